"""tests/sanity/newest_core.py: which interpreter it takes for the newest ansible-core, and what it does without one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "sanity" / "newest_core.py"


@pytest.fixture
def newest_core(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("newest_core", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # No python3.12/3.13 on PATH and no ~/.pyenv: only what a test names.
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("NEWEST_CORE_PYTHON", raising=False)
    monkeypatch.delenv("ARM_INFERENCE_REQUIRE_NEWEST_CORE", raising=False)
    return module


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="needs an interpreter older than ansible-core 2.20's floor")
def test_an_interpreter_older_than_3_12_is_not_taken(newest_core, monkeypatch):
    monkeypatch.setenv("NEWEST_CORE_PYTHON", sys.executable)
    assert newest_core.find_python() is None


def test_without_an_interpreter_it_skips_saying_why(newest_core, capsys):
    assert newest_core.main() == 0
    assert "skipped: no Python >= 3.12 found (ansible-core %s needs it" % newest_core.NEWEST_CORE in capsys.readouterr().out


def test_without_an_interpreter_it_fails_when_required(newest_core, monkeypatch, capsys):
    monkeypatch.setenv("ARM_INFERENCE_REQUIRE_NEWEST_CORE", "1")
    assert newest_core.main() == 1
    assert "failed: no Python >= 3.12 found" in capsys.readouterr().out


def test_a_python_3_12_or_newer_is_taken(newest_core, monkeypatch, tmp_path):
    fake_home_python = tmp_path / ".pyenv" / "versions" / "3.13.0" / "bin" / "python3"
    fake_home_python.parent.mkdir(parents=True)
    # A real interpreter reporting 3.13 is not available everywhere: ask the version probe instead.
    fake_home_python.symlink_to(sys.executable)
    monkeypatch.setattr(newest_core, "python_version", lambda executable: (3, 13))
    assert newest_core.find_python() == str(fake_home_python)


def test_available_says_whether_the_newest_core_will_run(newest_core, monkeypatch, tmp_path):
    # The Makefile leaves pylint to the newest core only when this says it runs.
    monkeypatch.setattr(sys, "argv", ["newest_core.py", "--available"])
    assert newest_core.main() == 1
    fake_home_python = tmp_path / ".pyenv" / "versions" / "3.13.0" / "bin" / "python3"
    fake_home_python.parent.mkdir(parents=True)
    fake_home_python.symlink_to(sys.executable)
    monkeypatch.setattr(newest_core, "python_version", lambda executable: (3, 13))
    assert newest_core.main() == 0
