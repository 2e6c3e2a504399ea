"""The collection tarball Galaxy gets (galaxy.yml's build_ignore) and the pins `make galaxy` imports it with."""

from __future__ import annotations

from pathlib import Path

import yaml

from test_execution_environment import REPO_ROOT, pins


def test_the_modules_python_floor_is_declared_for_ansible_test():
    # Shipped in the tarball (tests/containers/test_collection_build.py): Galaxy's sanity reads it too.
    assert yaml.safe_load((REPO_ROOT / "tests" / "config.yml").read_text())["modules"]["python_requires"] == ">=3.9"


def test_every_directory_of_tests_is_left_out_by_name():
    ignored = set(yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text())["build_ignore"])
    # ansible-test's output directory and Python's caches are gitignored (and ansible-galaxy leaves them out itself).
    directories = {"tests/" + path.name for path in (REPO_ROOT / "tests").iterdir() if path.is_dir()
                   and path.name not in ("__pycache__", "output")}
    assert directories <= ignored, "add %s to galaxy.yml's build_ignore" % sorted(directories - ignored)


def test_galaxy_importer_runs_with_the_ansible_ci_tests_with():
    galaxy, dev = pins("requirements-galaxy.txt"), pins("requirements-dev.txt")
    assert galaxy["galaxy-importer"]
    assert galaxy["ansible-core"] == dev["ansible-core"]
    assert galaxy["ansible-lint"] == dev["ansible-lint"]
    lines = [line for line in Path(REPO_ROOT / "requirements-galaxy.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    assert all("==" in line for line in lines)
