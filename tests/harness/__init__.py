"""The test harness of arm_inference.vllm: the machine, the images and the containers the tests run on.

Tests, benchmarks and tools import it by name (`import harness`; pytest.ini puts tests/ on the path);
the command line is `python3 tests/harness SUBCOMMAND` (tests/harness/__main__.py lists them).

The API, for tests and benchmarks:

    Container(image, systemd, options=())
        A throw-away container: .exec(command), .playbook(tmp_path, role, variables), .state(), .remove().
    prepared_host(image, options=()) -> Container
        A booted systemd container from a prepared image.
    run_playbook(hosts, tmp_path, role_or_playbook, variables, ...) / playbook_command(...)
        ansible-playbook against containers in group vllm_hosts, through their namespaces (namespaces.py).
    podman(*args, check=True)
        Run podman; return the completed process.
    BUILD_SETUP, BUILD_ARCH, NATIVE
        build.yml's variables in a test container (the fixture vLLM repository, no PyTorch index), the
        architecture vllm_build's lifecycle and fleet tests compile on, this machine's architecture.
    build_prepared_image(arch=None) -> str
        The tag of Debian 12 of `arch` (default: this machine's) after prepare.yml with the fixture vLLM
        repository staged at FIXTURE_REPO; built only when its inputs changed, one build at a time.
    boot_container(name)
        Wait until systemd in the running container `name` is up.
    image_tag(name) -> str
        The podman tag of a base image of IMAGES ("debian12-amd64", ...).
    native_arch() -> str
        This machine's Debian architecture ("amd64", "arm64").
    ensure_binfmt()
        Register qemu-aarch64 again (a container's systemd can flush binfmt_misc).
    stage_fixture_repo(name, workdir)
        Put the fixture vLLM repository into container `name` at FIXTURE_REPO.
    PREPARE_VARIABLES
        The variables prepare.yml (and build.yml) need in a test container on this machine.
    FIXTURE_REPO, HOST_CA_BUNDLE, REPO_ROOT, WHEELHOUSE, MODELS
        Where the fixture repository, this machine's CA bundle, the checkout, the offline wheelhouse and
        the tiny model are.

Its modules: machine (this machine's setup), images (base images, booting), prepared (the prepared
image), containers (test containers, playbook runs), assets (wheelhouse, tiny model), scenarios
(molecule lanes), namespaces (commands and the Ansible connection into a container).
"""

from harness.assets import MODELS, WHEELHOUSE
from harness.containers import (BUILD_ARCH, BUILD_SETUP, NATIVE, Container, playbook_command, podman, prepared_host,
                                run_playbook)
from harness.images import IMAGES, boot_container, image_tag
from harness.machine import REPO_ROOT, ensure_binfmt, native_arch
from harness.prepared import FIXTURE_REPO, HOST_CA_BUNDLE, PREPARE_VARIABLES, build_prepared_image, stage_fixture_repo

__all__ = ["BUILD_ARCH", "BUILD_SETUP", "FIXTURE_REPO", "HOST_CA_BUNDLE", "IMAGES", "MODELS", "NATIVE", "PREPARE_VARIABLES",
           "REPO_ROOT", "WHEELHOUSE", "Container", "boot_container", "build_prepared_image", "ensure_binfmt", "image_tag",
           "native_arch", "playbook_command", "podman", "prepared_host", "run_playbook", "stage_fixture_repo"]
