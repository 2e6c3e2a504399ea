"""Releases on a real directory tree: atomic activation, history, rollback, pruning, check mode."""

from __future__ import annotations

import json
import os

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.arm_inference.vllm.plugins.modules import vllm_release


def run_module(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            vllm_release.main()
    return json.loads(capsys.readouterr().out)


def make_release(root, name, day, identity=None):
    path = root / "releases" / name
    (path / "venv").mkdir(parents=True)
    stamp = {"release": name, "created": "2026-11-%02dT00:00:00+00:00" % day, "identity": identity or name}
    (path / "release.json").write_text(json.dumps(stamp))
    return path


def current(root):
    return os.readlink(root / "current")


def test_fresh_root_has_nothing(capsys, tmp_path):
    result = run_module(capsys, root=str(tmp_path / "vllm"))
    assert result["current"] is None and result["releases"] == {} and result["rollback_target"] is None
    assert result["free_bytes"] > 0 and not result["changed"]


def test_activate_switches_the_symlink_and_records_history(capsys, tmp_path):
    make_release(tmp_path, "one", 1)
    make_release(tmp_path, "two", 2)
    result = run_module(capsys, root=str(tmp_path), action="activate", release="one")
    assert result["changed"] and current(tmp_path) == "releases/one"
    result = run_module(capsys, root=str(tmp_path), action="activate", release="two")
    assert result["changed"] and result["previous"] == "one" and current(tmp_path) == "releases/two"
    assert result["rollback_target"] == "one"
    assert run_module(capsys, root=str(tmp_path), action="activate", release="two")["changed"] is False
    history = [json.loads(line) for line in (tmp_path / "release-history").read_text().splitlines()]
    assert [(entry["release"], entry["previous"]) for entry in history] == [("one", None), ("two", "one")]
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".current")]


def test_rollback_goes_back_and_forth(capsys, tmp_path):
    make_release(tmp_path, "one", 1)
    make_release(tmp_path, "two", 2)
    run_module(capsys, root=str(tmp_path), action="activate", release="one")
    run_module(capsys, root=str(tmp_path), action="activate", release="two")
    result = run_module(capsys, root=str(tmp_path), action="rollback")
    assert result["changed"] and result["current"] == "one" and current(tmp_path) == "releases/one"
    assert run_module(capsys, root=str(tmp_path), action="rollback")["current"] == "two"


def test_rollback_without_an_earlier_release_fails(capsys, tmp_path):
    make_release(tmp_path, "one", 1)
    run_module(capsys, root=str(tmp_path), action="activate", release="one")
    result = run_module(capsys, root=str(tmp_path), action="rollback")
    assert result["failed"] and "no earlier release to roll back to (current: one" in result["msg"]
    assert current(tmp_path) == "releases/one"


def test_incomplete_release_is_never_activated(capsys, tmp_path):
    make_release(tmp_path, "good", 1)
    run_module(capsys, root=str(tmp_path), action="activate", release="good")
    (tmp_path / "releases" / "half" / "venv").mkdir(parents=True)
    result = run_module(capsys, root=str(tmp_path), action="activate", release="half")
    assert result["failed"] and "half is not complete" in result["msg"]
    assert current(tmp_path) == "releases/good"
    assert run_module(capsys, root=str(tmp_path))["incomplete"] == ["half"]


def test_pruning_keeps_current_and_rollback_target_and_drops_builds(capsys, tmp_path):
    for day, name in enumerate(["r1", "r2", "r3", "r4"], start=1):
        make_release(tmp_path, name, day, identity="%016x" % day)
        (tmp_path / "builds" / ("%016x" % day)).mkdir(parents=True)
    (tmp_path / "releases" / "half").mkdir()
    run_module(capsys, root=str(tmp_path), action="activate", release="r1")
    result = run_module(capsys, root=str(tmp_path), action="activate", release="r4", keep=2)
    assert sorted(result["pruned"]) == ["half", "r2"]
    assert sorted(os.listdir(tmp_path / "releases")) == ["r1", "r3", "r4"]
    assert sorted(os.listdir(tmp_path / "builds")) == ["%016x" % 1, "%016x" % 3, "%016x" % 4]
    assert result["rollback_target"] == "r1"


def test_check_mode_reports_without_switching(capsys, tmp_path):
    make_release(tmp_path, "one", 1)
    make_release(tmp_path, "two", 2)
    run_module(capsys, root=str(tmp_path), action="activate", release="one")
    result = run_module(capsys, root=str(tmp_path), action="activate", release="two", keep=1, _ansible_check_mode=True)
    assert result["changed"] and result["current"] == "two" and result["pruned"] == []
    assert current(tmp_path) == "releases/one" and sorted(os.listdir(tmp_path / "releases")) == ["one", "two"]


def test_a_real_directory_named_current_is_refused(capsys, tmp_path):
    make_release(tmp_path, "one", 1)
    (tmp_path / "current").mkdir()
    result = run_module(capsys, root=str(tmp_path), action="activate", release="one")
    assert result["failed"] and "is not a symlink" in result["msg"]


def test_a_corrupt_stamp_is_named(capsys, tmp_path):
    make_release(tmp_path, "one", 1)
    (tmp_path / "releases" / "one" / "release.json").write_text("{")
    result = run_module(capsys, root=str(tmp_path))
    assert result["failed"] and "releases/one is not valid JSON" in result["msg"]


def test_the_history_is_never_appended_through_a_link(capsys, tmp_path):
    # Whoever could replace the history with a link would have root append to the link's target.
    make_release(tmp_path, "one", 1)
    target = tmp_path / "elsewhere"
    (tmp_path / "release-history").symlink_to(target)
    result = run_module(capsys, root=str(tmp_path), action="activate", release="one")
    assert result["failed"] and "release-history" in result["msg"]
    assert not target.exists()
