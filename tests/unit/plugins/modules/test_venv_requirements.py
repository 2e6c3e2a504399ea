"""venv_requirements against real virtual environments made here: one with the pip that `python -m venv` installs
(the packaging library the probe uses comes with it), one without pip, and none at all."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from conftest import make_venv
from ansible_collections.arm_inference.vllm.plugins.modules import venv_requirements


def run_command(argv):
    run = subprocess.run(argv, capture_output=True, text=True, check=False)
    return run.returncode, run.stdout, run.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    return make_venv(tmp_path_factory.mktemp("venv") / "venv")


def test_what_is_installed_at_a_matching_version_is_satisfied(venv):
    python, pip = venv
    assert venv_requirements.unsatisfied(run_command, python, ["pip==%s" % pip, "PIP>=1", "pip"]) == []


def test_another_version_a_missing_package_and_what_it_cannot_judge_are_not(venv):
    python, pip = venv
    asked = ["pip==0.1", "pip<1", "arm-inference-never-installed==1.0", "pip[extra]==%s" % pip,
             "pip @ https://example.invalid/pip.whl", "--index-url=https://example.invalid", "not a requirement !"]
    assert venv_requirements.unsatisfied(run_command, python, asked) == asked


def test_a_marker_that_does_not_apply_needs_nothing(venv):
    python, dummy = venv
    assert venv_requirements.unsatisfied(run_command, python, ['never-here==1; python_version < "3"']) == []


def test_without_pip_or_without_python_everything_is_pending(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    pin = "setuptools==%s" % metadata.version("setuptools")
    assert venv_requirements.unsatisfied(run_command, str(bare / "bin" / "python"), [pin]) == [pin]
    assert venv_requirements.unsatisfied(run_command, str(tmp_path / "none" / "bin" / "python"), [pin]) == [pin]
    assert venv_requirements.unsatisfied(run_command, str(tmp_path / "none" / "bin" / "python"), []) == []


def test_an_answer_that_is_not_a_list_of_the_requirements_asked_counts_as_none(venv):
    python, pip = venv
    asked = ["pip==%s" % pip]
    assert venv_requirements.unsatisfied(lambda argv: (0, '["something else"]\n', ""), python, asked) == asked
    assert venv_requirements.unsatisfied(lambda argv: (0, "garbage", ""), python, asked) == asked
    assert venv_requirements.unsatisfied(lambda argv: (1, "[]", "Traceback"), python, asked) == asked
