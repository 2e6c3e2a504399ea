"""Galaxy-ready (issue 29, item 5): `make galaxy` (`python3 tests/harness galaxy`), outside CI.

1. The collection tarball, built as the README's install lines build it, into build/.
2. galaxy-importer (requirements-galaxy.txt, in its own venv under .cache: it pins attrs below what .venv has) on
   that tarball with its default configuration, as Galaxy imports an upload (ansible-doc of every plugin and role,
   ansible-lint, the changelog, the metadata). Any WARNING or ERROR line of its log fails the target.
3. Galaxy's ansible-test step: what galaxy-importer's own test container runs on an upload (the `ansible-test
   sanity` line of its entrypoint.sh, with the tests it skips there, on the ansible-core its Dockerfile installs),
   both read from the installed galaxy-importer, on the tarball's files. The container starts FROM a quay.io image
   no machine of ours can pull, so the same command runs here in a venv, with pyenv's Pythons on PATH as the
   image has its own (ansible-core 2.16's ansible-test uses 2.7 and 3.6 to 3.12 of them), and without
   `--failure-ok`: what Galaxy would show as a warning fails here.
4. ansible-test sanity (and the playbooks' syntax-check) on each ansible-core between the floor CI tests and the
   newest one it tests (BETWEEN_CORES), through tests/sanity/newest_core.py: meta/runtime.yml claims them all.
5. A machine that never saw the checkout: a container from the execution environment's base image (Debian 12 with
   ansible-core from PyPI; nothing of this repository) that gets only the tarballs. The README's install line for
   the tarball runs there as written; its `-r requirements.yml` line cannot (Galaxy does not answer from our
   machines), so the same collections are installed from tarballs packed as `make ee` packs them (ee.py's
   pack_requirements). The build line runs on this machine (with --force, into the same build/). Then every
   playbook of the collection is syntax-checked by its FQCN with the installed example inventory, and ansible-doc
   reads every module, filter and role.

Figures and the logs go to .cache/galaxy/ (galaxy.json).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

from harness.ee import BASE_TAG, build_base, pack_requirements, pip_site_config
from harness.machine import CACHE_DIR, REPO_ROOT, log, require_root

WORK_DIR = CACHE_DIR / "galaxy"
IMPORTER_VENV = CACHE_DIR / "galaxy-importer"
TEST_VENV = CACHE_DIR / "galaxy-ansible-test"
REQUIREMENTS = REPO_ROOT / "requirements-galaxy.txt"
# Where ansible-test finds a cached get-pip script, by the pip version it pins (run_sanity.py does the same).
GET_PIP_CACHE = Path.home() / ".ansible" / "test" / "cache"
PYENV_VERSIONS = Path.home() / ".pyenv" / "versions"
INSTALLED = "/root/.ansible/collections/ansible_collections/arm_inference/vllm"
# meta/runtime.yml claims ansible-core >= 2.19: CI's sanity runs the floor (requirements-dev.txt) and the newest
# core (tests/sanity/newest_core.py); these are the releases between them, each minor's newest when this was written.
BETWEEN_CORES = ["2.20.10"]


def venv(path, *requirements):
    """A venv at `path` with pip's `requirements` (arguments), made again when they change."""
    stamp = path / "requirements.stamp"
    wanted = json.dumps([str(item) for item in requirements] + [
        Path(item).read_text() for item in requirements if str(item).endswith(".txt")])
    if stamp.exists() and stamp.read_text() == wanted:
        return path / "bin"
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    subprocess.run([str(path / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *map(str, requirements)],
                   check=True)
    stamp.write_text(wanted)
    return path / "bin"


def build_tarball():
    """build/<namespace>-<name>-<version>.tar.gz, with the README's command."""
    output = REPO_ROOT / "build"
    subprocess.run(["ansible-galaxy", "collection", "build", "--force", "--output-path", str(output), str(REPO_ROOT)],
                   check=True, stdout=subprocess.DEVNULL)
    info = yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text())
    return output / ("%s-%s-%s.tar.gz" % (info["namespace"], info["name"], info["version"]))


def importer_findings(log_text):
    """The lines of galaxy-importer's log that Galaxy shows as warnings or errors."""
    return [line for line in log_text.splitlines() if re.match(r"\s*(WARNING|ERROR|CRITICAL)\b", line)]


def run_importer(bin_dir, tarball):
    """galaxy-importer on the tarball with its defaults (no configuration file); returns (exit, findings, log)."""
    log_file = WORK_DIR / "importer.log"
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]))
    env = {key: value for key, value in env.items() if not key.startswith(("ANSIBLE_", "GALAXY_IMPORTER_"))}
    with open(log_file, "w", encoding="utf-8") as output:
        result = subprocess.run([str(bin_dir / "python"), "-m", "galaxy_importer.main", str(tarball)], cwd=WORK_DIR,
                                env=env, stdout=output, stderr=subprocess.STDOUT, check=False)
    return result.returncode, importer_findings(log_file.read_text()), log_file


def galaxy_test_step(bin_dir):
    """(ansible-core pin, sanity arguments) of galaxy-importer's test container, read from the installed package:
    its Dockerfile's `ansible-core==X` and its entrypoint's `ansible-test sanity ...` line."""
    site = subprocess.run([str(bin_dir / "python"), "-c", "import galaxy_importer, os; "
                           "print(os.path.dirname(galaxy_importer.__file__))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    container = Path(site) / "ansible_test" / "container"
    core = re.search(r"ansible-core==([0-9.]+)", (container / "Dockerfile").read_text())
    line = re.search(r"^\s*ansible-test sanity (.*)$", (container / "entrypoint.sh").read_text(), re.MULTILINE)
    if not core or not line:
        sys.exit("harness: cannot read the ansible-core pin or the ansible-test line of %s" % container)
    arguments = [item for item in line.group(1).split() if item != "--failure-ok"]
    return core.group(1), arguments


def python_path():
    """A directory of pythonX.Y links to every pyenv Python (ansible-test looks them up on PATH by that name)."""
    links = WORK_DIR / "pythons"
    links.mkdir()
    for version in sorted(PYENV_VERSIONS.glob("[23].*")):
        short = ".".join(version.name.split(".")[:2])
        interpreter = version / "bin" / ("python" + short)
        if interpreter.exists() and not (links / interpreter.name).exists():
            (links / interpreter.name).symlink_to(interpreter)
    return links


def galaxy_sanity(tarball, core, arguments):
    """The test container's ansible-test sanity on the tarball's files; returns (exit, log path, pythons)."""
    bin_dir = venv(TEST_VENV, "ansible-core==%s" % core)
    # Outside the checkout: inside it, ansible-test would take git's view of the files there (none: .cache is
    # ignored) and skip every target.
    root = Path(tempfile.mkdtemp(prefix="arm-inference-galaxy-sanity-", dir="/var/tmp"))
    info = yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text())
    target = root / "ansible_collections" / info["namespace"] / info["name"]
    target.mkdir(parents=True)
    try:
        with tarfile.open(tarball) as archive:
            # The data filter refuses links and paths out of the target (Python >= 3.11.4; .venv's is 3.11.7).
            archive.extractall(target, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        requirements = next((TEST_VENV / "lib").glob(
            "python*/site-packages/ansible_test/_internal/python_requirements.py"))
        pip_version = re.search(r"\bpip='([0-9.]+)'", requirements.read_text())
        if not pip_version:
            sys.exit("harness: cannot read the pip version ansible-test pins in %s" % requirements)
        GET_PIP_CACHE.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / "tests" / "sanity" / "get_pip_bootstrap.py",
                     GET_PIP_CACHE / ("get_pip_%s.py" % pip_version.group(1).replace(".", "_")))
        pythons = python_path()
        env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
        env.update(PATH="%s:%s:/usr/bin:/bin" % (bin_dir, pythons), ANSIBLE_COLLECTIONS_PATH="")
        command = [str(bin_dir / "ansible-test"), "sanity", "--requirements", *arguments]
        log_file = WORK_DIR / "ansible-test.log"
        log("$ " + " ".join(command) + "  (in %s) > %s" % (target, log_file))
        with open(log_file, "w", encoding="utf-8") as output:
            result = subprocess.run(command, cwd=target, env=env, stdout=output, stderr=subprocess.STDOUT,
                                    check=False)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if "All targets skipped" in log_file.read_text():
        sys.exit("harness: ansible-test found nothing to test in %s (%s)" % (target, log_file))
    return result.returncode, log_file, sorted(path.name for path in pythons.iterdir())


def between_cores_sanity():
    """syntax-check and ansible-test sanity on each of BETWEEN_CORES, as `make sanity` runs the newest core;
    returns {core: (exit, log path)}."""
    results = {}
    for core in BETWEEN_CORES:
        log_file = WORK_DIR / ("sanity-%s.log" % core)
        log("ansible-test sanity on ansible-core %s > %s" % (core, log_file))
        with open(log_file, "w", encoding="utf-8") as output:
            result = subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "sanity" / "newest_core.py")],
                                    env=dict(os.environ, SANITY_CORE=core, ARM_INFERENCE_REQUIRE_NEWEST_CORE="1"),
                                    stdout=output, stderr=subprocess.STDOUT, cwd=REPO_ROOT, check=False)
        results[core] = (result.returncode, log_file)
    return results


def fresh_machine_script(install_line, playbooks):
    """The shell script the fresh container runs: the README's install line as written, the dependencies, then
    the checks."""
    lines = ["set -eux -o pipefail", "cd /root/work", install_line,
             # In place of `ansible-galaxy collection install -r requirements.yml` (Galaxy unreachable here).
             "ansible-galaxy collection install deps/*.tar.gz",
             "ansible-galaxy collection list",
             "ansible-galaxy collection verify --offline arm_inference.vllm",
             "ansible-inventory -i %s/inventories/example/hosts.yml --graph" % INSTALLED]
    lines += ["ansible-playbook -i %s/inventories/example/hosts.yml arm_inference.vllm.%s --syntax-check"
              % (INSTALLED, name) for name in playbooks]
    lines += [
        "ansible-doc -t module -l arm_inference.vllm",
        "for kind in module filter role; do for name in $(ansible-doc -t $kind -l arm_inference.vllm --json"
        " | python3 -c 'import json,sys; print(\" \".join(json.load(sys.stdin)))'); do"
        " ansible-doc -t $kind $name > /dev/null; echo \"ansible-doc $kind $name: ok\"; done; done"]
    return "\n".join(lines) + "\n"


def readme_install_lines():
    """The commands of the sh block of the README's "Installing" section, as written (comments dropped)."""
    section = (REPO_ROOT / "README.md").read_text().split("## Installing", 1)[1]
    return [line.split("#", 1)[0].strip() for line in
            re.search(r"```sh\n(.*?)```", section, re.DOTALL).group(1).splitlines()]


def tarball_install_line(lines, tarball_name):
    """The README's line that installs the built tarball; exits when there is none."""
    install = [line for line in lines if line == "ansible-galaxy collection install build/%s" % tarball_name]
    if len(install) != 1:
        sys.exit("harness: the README's Installing block has no line `ansible-galaxy collection install build/%s`"
                 % tarball_name)
    return install[0]


def fresh_machine(tarball):
    """The install on a container from the EE base image; returns (exit, log path)."""
    install = tarball_install_line(readme_install_lines(), tarball.name)
    with tempfile.TemporaryDirectory(prefix="arm-inference-galaxy-", dir="/var/tmp") as workdir:
        build_base(pip_site_config(workdir))
    staging = WORK_DIR / "fresh"
    (staging / "build").mkdir(parents=True)
    (staging / "deps").mkdir()
    shutil.copy2(tarball, staging / "build")
    pack_requirements(staging / "deps")
    playbooks = sorted(path.stem for path in (REPO_ROOT / "playbooks").glob("*.yml"))
    (staging / "check.sh").write_text(fresh_machine_script(install, playbooks))
    log_file = WORK_DIR / "fresh-machine.log"
    # Only the tarballs and the script go in (a copy, not a mount of the checkout); no network is needed.
    result = subprocess.run(["podman", "run", "--rm", "--network", "none", "--volume", "%s:/root/work:ro" % staging,
                             BASE_TAG, "bash", "/root/work/check.sh"], capture_output=True, text=True, check=False)
    log_file.write_text(result.stdout + result.stderr)
    return result.returncode, log_file


def galaxy(_args):
    """`tests/harness galaxy`: the importer, Galaxy's ansible-test step and a fresh install; exits non-zero when one
    of them fails."""
    require_root()
    shutil.rmtree(WORK_DIR, ignore_errors=True)
    WORK_DIR.mkdir(parents=True)
    figures = {}
    started = time.monotonic()
    bin_dir = venv(IMPORTER_VENV, "-r", REQUIREMENTS)
    tarball = build_tarball()
    figures["tarball"] = {"name": tarball.name, "bytes": tarball.stat().st_size}
    code, findings, importer_log = run_importer(bin_dir, tarball)
    figures["importer"] = {"exit": code, "findings": findings, "log": str(importer_log),
                           "seconds": round(time.monotonic() - started)}
    log("galaxy-importer: exit %d, %d warnings or errors (%s)" % (code, len(findings), importer_log))
    core, arguments = galaxy_test_step(bin_dir)
    started = time.monotonic()
    code, sanity_log, pythons = galaxy_sanity(tarball, core, arguments)
    figures["galaxy_ansible_test"] = {"ansible_core": core, "arguments": arguments, "pythons": pythons,
                                      "exit": code, "log": str(sanity_log),
                                      "seconds": round(time.monotonic() - started)}
    log("Galaxy's ansible-test sanity (ansible-core %s): exit %d (%s)" % (core, code, sanity_log))
    started = time.monotonic()
    for core, (code, core_log) in between_cores_sanity().items():
        figures["sanity_%s" % core] = {"exit": code, "log": str(core_log)}
        log("ansible-test sanity on ansible-core %s: exit %d (%s)" % (core, code, core_log))
    figures["sanity_between_cores_seconds"] = round(time.monotonic() - started)
    started = time.monotonic()
    code, fresh_log = fresh_machine(tarball)
    figures["fresh_machine"] = {"exit": code, "log": str(fresh_log), "seconds": round(time.monotonic() - started)}
    log("install on a machine without the checkout: exit %d (%s)" % (code, fresh_log))
    (WORK_DIR / "galaxy.json").write_text(json.dumps(figures, indent=2) + "\n")
    failed = [name for name, value in figures.items()
              if isinstance(value, dict) and "exit" in value and (value["exit"] != 0 or value.get("findings"))]
    if failed:
        sys.exit("harness: galaxy: %s failed; see %s" % (", ".join(failed), WORK_DIR / "galaxy.json"))
    log("galaxy: every step passed; figures in %s" % (WORK_DIR / "galaxy.json"))
