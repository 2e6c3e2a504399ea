"""A hub branch is resolved once per run on the controller (vllm_model_fetch action resolve) and every host places that
commit (resolved): a host that placed `main` days ago, when it was another commit, moves to the commit `main` means
now, and a new host places the same one. The real huggingface_hub client and Ansible's open_url against the hub
stand-in (tests/stand_ins/hub_server.py). The hub's answer is hostile input: a sha that is a path is refused; a hub
the controller cannot reach leaves each host with its record, with a warning. On the old code a host kept the commit it
had recorded, so two hosts served two commits of one branch."""

from __future__ import annotations

import json
import os

import pytest

from stand_ins.hub_server import HubProcess
from stand_ins.s3_origin import free_port
from stand_ins.tiny_model import write_tiny_model
from model_fetch import run_module  # noqa: E402

FIRST = "a" * 40
LATER = "b" * 40


@pytest.fixture
def hub_root(tmp_path):
    root = tmp_path / "hub"
    write_tiny_model(str(root / "org" / "tiny" / FIRST), seed=91)
    write_tiny_model(str(root / "org" / "tiny" / LATER), seed=92)
    (root / "org" / "tiny" / "refs.json").write_text(json.dumps({"main": FIRST}))
    return root


def started(root, refs):
    (root / "org" / "tiny" / "refs.json").write_text(json.dumps(refs))
    return HubProcess(root).start()


def hub_args(hub, store, **extra):
    return dict({"store": str(store), "name": "tiny", "source": "hf://org/tiny", "revision": "main",
                 "endpoint": hub.endpoint, "min_free_disk_gib": 0}, **extra)


def test_every_host_places_the_commit_the_controller_resolved_main_to(capsys, tmp_path, hub_root):
    old_host, new_host = tmp_path / "old-host", tmp_path / "new-host"
    hub = started(hub_root, {"main": FIRST})  # the day the first host was placed
    try:
        first = run_module(capsys, **hub_args(hub, old_host))
    finally:
        hub.stop()
    assert first.get("failed") is not True and first["revision"] == FIRST, first

    hub = started(hub_root, {"main": LATER})  # main has moved since
    try:
        resolved = run_module(capsys, action="resolve", name="tiny", source="hf://org/tiny", revision="main",
                              endpoint=hub.endpoint)
        assert resolved.get("failed") is not True and resolved["resolved"] == LATER, resolved
        placed = dict((host.name, run_module(capsys, **hub_args(hub, host, resolved=resolved["resolved"])))
                      for host in (old_host, new_host))
    finally:
        hub.stop()
    for host, result in placed.items():
        assert result.get("failed") is not True and result["revision"] == LATER, (host, result)
        state = json.loads((tmp_path / host / "tiny" / ".state.json").read_text())
        assert state["refs"]["main"] == LATER, state["refs"]
    assert placed["old-host"]["placed"]["previous_revision"] == FIRST
    assert os.readlink(old_host / "tiny" / "current") == os.readlink(new_host / "tiny" / "current") == LATER


def test_a_hostile_or_unreachable_hub_at_resolve(capsys, tmp_path, hub_root):
    (hub_root / "org" / "tiny" / "answer.json").write_text(json.dumps({"main": {"sha": "../../escape"}}))
    hub = started(hub_root, {"main": LATER})
    try:
        hostile = run_module(capsys, action="resolve", name="tiny", source="hf://org/tiny", revision="main",
                             endpoint=hub.endpoint)
        missing = run_module(capsys, action="resolve", name="tiny", source="hf://org/tiny", revision="v9",
                             endpoint=hub.endpoint)
    finally:
        hub.stop()
    assert hostile.get("failed"), hostile
    assert hostile["msg"].startswith("vllm_model_models (tiny).endpoint: the hub at %s answered for main: not a hub "
                                     "commit (40 lower-case hex digits) (got ../../escape); " % hub.endpoint)
    assert missing.get("failed") and missing["msg"].startswith(
        "vllm_model_models (tiny).revision: org/tiny has no revision v9 (got v9); "), missing
    closed = "http://127.0.0.1:%d" % free_port()
    unreachable = run_module(capsys, action="resolve", name="tiny", source="hf://org/tiny", revision="main",
                             endpoint=closed)
    assert unreachable.get("failed") is not True and unreachable["resolved"] is None, unreachable
    assert unreachable["unresolved"].startswith("the hub at %s cannot be reached from the controller" % closed)
    # The warning (module.warn) and the play's line saying so are asserted by the role's run in
    # tests/containers/test_model_sources.py (test_rerun_with_the_hub_stopped_changes_nothing): in one pytest process
    # Ansible's warning collector is shared between in-process module runs.


def test_a_resolved_value_that_is_not_a_commit_is_refused(capsys, tmp_path):
    refused = run_module(capsys, store=str(tmp_path / "store"), name="tiny", source="hf://org/tiny", revision="main",
                         resolved="../../escape", endpoint="http://127.0.0.1:9")
    assert refused.get("failed") and refused["msg"].startswith(
        "vllm_model_models (tiny).revision: the controller resolved main: not a hub commit"), refused
    assert not os.path.exists(tmp_path / "escape") and not os.path.exists(tmp_path / "store" / "tiny")


def test_the_warning_of_an_unresolved_branch_is_worded_from_the_clients_error(capsys, monkeypatch):
    """The text roles/vllm_model/tasks/resolve.yml prints (from `unresolved`) and the module's warning, byte for byte
    as tests/containers/test_model_sources.py (test_rerun_with_the_hub_stopped_changes_nothing) reads them: the
    reason is the error's type and first line."""
    from ansible.module_utils import _internal

    # As in the module's own process: once another test of this process imported controller code, ansible-core sends a
    # module's warnings to the controller's display instead of its result.
    monkeypatch.setattr(_internal, "is_controller", False)
    closed = "http://127.0.0.1:%d" % free_port()
    answer = run_module(capsys, action="resolve", name="tiny", source="hf://org/tiny", revision="main", endpoint=closed)
    unresolved = ("the hub at %s cannot be reached from the controller (URLError: <urlopen error [Errno 111] "
                  "Connection refused>)" % closed)
    assert answer.get("failed") is not True and answer["unresolved"] == unresolved, answer
    warnings = [(warning.get("event") or {}).get("msg") if isinstance(warning, dict) else warning
                for warning in answer.get("warnings") or []]  # text, or ansible-core 2.19's summary of one
    assert ("vllm_model_models (tiny): hf://org/tiny main was not resolved for the fleet: %s; each host keeps the "
            "commit it recorded for it, and a host without one resolves it itself" % unresolved) in warnings, warnings
