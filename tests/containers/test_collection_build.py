"""The built collection tarball installs, carries no test tree (tests/config.yml alone), and its roles run by FQCN."""

from __future__ import annotations

import os
import subprocess
import tarfile

import pytest

from harness import REPO_ROOT


@pytest.fixture(scope="module")
def tarball():
    built = sorted((REPO_ROOT / "build").glob("arm_inference-vllm-*.tar.gz"))
    assert built, "run `make build` first (make integration does)"
    return built[-1]


def test_tarball_ships_collection_content_only(tarball):
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    for required in ["MANIFEST.json", "meta/runtime.yml", "roles/tcmalloc/tasks/main.yml",
                     "plugins/modules/shared_library_info.py", "playbooks/site.yml",
                     "playbooks/serve.yml", "roles/vllm_serve/files/vllm-serve-launch.py"]:
        assert any(name == required or name.endswith("/" + required) for name in names), required
    for forbidden in ["molecule/", ".venv/", ".cache/", "Makefile", "requirements-", "ee/", ".ci/"]:
        assert not any(name.startswith(forbidden) for name in names), forbidden
    # Of tests/, only config.yml: ansible-test (Galaxy's run on an upload too) reads the modules' Pythons from it;
    # without it Galaxy's sanity compiles them for Python 2.7 and 3.6 and reports every module.
    assert [name for name in names if name == "tests" or name.startswith("tests/")] == ["tests", "tests/config.yml"]


def test_installed_tarball_runs_a_role_by_fqcn(tarball, tmp_path, supported_host):
    collections = tmp_path / "collections"
    # Only the fresh directory is a collection path here, so nothing else can satisfy the install.
    only_fresh = {"ANSIBLE_COLLECTIONS_PATH": str(collections), "PATH": os.environ["PATH"]}
    subprocess.run(
        ["ansible-galaxy", "collection", "install", "--offline", "-p", str(collections), str(tarball)],
        check=True,
        capture_output=True,
        env=only_fresh,
    )
    installed = collections / "ansible_collections" / "arm_inference" / "vllm"
    assert (installed / "roles" / "tcmalloc").is_dir()
    assert not installed.is_symlink()
    docs = subprocess.run(
        ["ansible-doc", "-t", "role", "arm_inference.vllm.tcmalloc"],
        capture_output=True, text=True, check=True,
        env=only_fresh,
    )
    assert "tcmalloc_variant" in docs.stdout
    module_docs = subprocess.run(
        ["ansible-doc", "arm_inference.vllm.host_facts"], capture_output=True, text=True, check=True, env=only_fresh)
    assert "build_gib_per_job" in module_docs.stdout and "EXAMPLES" in module_docs.stdout
    filter_docs = subprocess.run(
        ["ansible-doc", "-t", "filter", "arm_inference.vllm.vllm_serve_profile"],
        capture_output=True, text=True, check=True, env=only_fresh)
    assert "reserved_cpus_per_rank" in filter_docs.stdout
    serve_docs = subprocess.run(
        ["ansible-doc", "-t", "role", "arm_inference.vllm.vllm_serve"], capture_output=True, text=True, check=True,
        env=only_fresh)
    assert "vllm_serve_api_key_file" in serve_docs.stdout and "vllm_serve_instances" in serve_docs.stdout
    units_docs = subprocess.run(
        ["ansible-doc", "-t", "filter", "arm_inference.vllm.vllm_serve_units"],
        capture_output=True, text=True, check=True, env=only_fresh)
    assert "exec_start" in units_docs.stdout
    result = supported_host.playbook(tmp_path, "arm_inference.vllm.tcmalloc", {}, collections_path=collections)
    assert result.returncode == 0, result.stdout[-3000:]
    listed = subprocess.run(
        ["ansible-galaxy", "collection", "list", "arm_inference.vllm"],
        capture_output=True, text=True, check=True,
        env=only_fresh,
    )
    assert str(collections / "ansible_collections") in listed.stdout
    assert supported_host.exec("dpkg -s libtcmalloc-minimal4 | grep -q 'Status: install ok installed'").returncode == 0
