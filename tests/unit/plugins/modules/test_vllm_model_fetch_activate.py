"""vllm_model_fetch's activate action (vllm_rollout's rollback) and the previous revision it publishes.

Revisions come in as the controller:// source brings them (manifest on the controller, plan, the copy
into the staging directory, place), with the tiny model the integration tests serve from the hub stand-in.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as rules
from ansible_collections.arm_inference.vllm.plugins.modules import vllm_model_fetch
from stand_ins.tiny_model import write_tiny_model


def run_module(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            vllm_model_fetch.main()
    return json.loads(capsys.readouterr().out)


def place(capsys, tmp_path, seed, keep=2):
    """Place the tiny model with weights from `seed` as a controller source does; the module's result."""
    source = tmp_path / ("controller-%d" % seed)
    write_tiny_model(str(source), seed=seed)
    common = {"store": str(tmp_path / "store"), "name": "tiny", "source": "controller://%s" % source}
    manifest = run_module(capsys, action="manifest", **common)
    plan = run_module(capsys, action="plan", revision=manifest["revision"], manifest=manifest["manifest"],
                      min_free_disk_gib=0, **common)
    if plan["needed"]:
        for name in os.listdir(source):
            shutil.copy(source / name, Path(plan["staging"]) / name)
    return run_module(capsys, revision=manifest["revision"], manifest=manifest["manifest"], staged=plan["staging"],
                      keep=keep, min_free_disk_gib=0, **common)


def current(tmp_path):
    return os.readlink(tmp_path / "store" / "tiny" / "current")


def test_the_placed_fact_names_the_revision_current_before(capsys, tmp_path):
    first = place(capsys, tmp_path, seed=1)
    assert first["changed"] and first["placed"]["previous_revision"] is None
    second = place(capsys, tmp_path, seed=2)
    assert second["placed"]["previous_revision"] == first["revision"] != second["revision"]
    assert second["placed"]["revision_path"] == str(tmp_path / "store" / "tiny" / second["revision"])
    again = place(capsys, tmp_path, seed=2)
    assert not again["changed"] and again["placed"]["previous_revision"] == second["revision"]


def test_activate_makes_a_kept_revision_current_again_without_pruning(capsys, tmp_path):
    revisions = [place(capsys, tmp_path, seed=seed, keep=3)["revision"] for seed in (1, 2, 3)]
    store = str(tmp_path / "store")
    # keep=1 would prune two of them on a placement: activate prunes nothing.
    back = run_module(capsys, action="activate", store=store, name="tiny", revision=revisions[0], keep=1)
    assert back["changed"] and back["pruned"] == [] and current(tmp_path) == revisions[0]
    assert back["placed"] == dict(rules.placed_fact(store, "tiny", {"revision": revisions[0], "kind": "controller"}),
                                  previous_revision=revisions[2])
    assert sorted(os.listdir(tmp_path / "store" / "tiny")) == sorted(revisions + [".state.json", "current"])
    history = rules.read_state(str(tmp_path / "store" / "tiny"))["history"]
    assert history[-1]["revision"] == revisions[0] and history[-1]["previous"] == revisions[2]
    # Already current: nothing to do.
    again = run_module(capsys, action="activate", store=store, name="tiny", revision=revisions[0])
    assert not again["changed"] and current(tmp_path) == revisions[0]


def test_activate_in_check_mode_changes_nothing(capsys, tmp_path):
    first, second = (place(capsys, tmp_path, seed=seed)["revision"] for seed in (1, 2))
    result = run_module(capsys, action="activate", store=str(tmp_path / "store"), name="tiny", revision=first,
                        _ansible_check_mode=True)
    assert result["changed"] and current(tmp_path) == second


def test_activate_refuses_a_revision_the_store_does_not_hold_intact(capsys, tmp_path):
    first, second = (place(capsys, tmp_path, seed=seed)["revision"] for seed in (1, 2))
    store = str(tmp_path / "store")
    missing = run_module(capsys, action="activate", store=store, name="tiny", revision="sha256-0000000000000000")
    assert missing["failed"] and current(tmp_path) == second
    assert missing["msg"] == ("tiny: revision sha256-0000000000000000 is not placed intact in %s/tiny (placed: %s); "
                              "place it again with the vllm_model role" % (store, ", ".join(sorted([first, second]))))
    # A revision whose files no longer have their recorded sizes is not made current either.
    with open(tmp_path / "store" / "tiny" / first / "model.safetensors", "ab") as handle:
        handle.write(b"x")
    altered = run_module(capsys, action="activate", store=store, name="tiny", revision=first)
    assert altered["failed"] and "is not placed intact" in altered["msg"] and current(tmp_path) == second


def test_activate_needs_a_revision_and_a_valid_name(capsys, tmp_path):
    store = str(tmp_path / "store")
    assert "revision" in run_module(capsys, action="activate", store=store, name="tiny")["msg"]
    refused = run_module(capsys, action="activate", store=store, name="../etc", revision="r1")
    assert refused["failed"] and refused["msg"].startswith("name: must be 1-64 letters")
    # Every other action still needs a source.
    assert "source" in run_module(capsys, action="place", store=store, name="tiny")["msg"]


def test_a_lost_state_file_never_deletes_what_is_serving_or_what_the_operator_put_there(capsys, tmp_path):
    """The state file gone (a restore, a hand clean-up): placing a new revision keeps every revision (nothing says
    which one a server not restarted yet still serves) and what the operator put beside, and removes only staging
    leftovers. With the record back, only the store's own unrecorded revisions go, never current's target or the
    revision current before it."""
    first, second = (place(capsys, tmp_path, seed=seed, keep=1)["revision"] for seed in (1, 2))
    model_dir = tmp_path / "store" / "tiny"
    (model_dir / ".state.json").unlink()
    (model_dir / "notes.txt").write_text("the operator's")
    (model_dir / "backup").mkdir()
    (model_dir / ".staging-sha256-0000000000000000").mkdir()  # an interrupted run's
    (model_dir / ("f" * 40)).mkdir()  # a revision of an interrupted run, named as the store names them
    third = place(capsys, tmp_path, seed=3, keep=1)
    assert third.get("failed") is not True, third
    assert current(tmp_path) == third["revision"] and third["placed"]["previous_revision"] == second
    assert sorted(os.listdir(model_dir)) == sorted([".state.json", "backup", "current", "notes.txt", "f" * 40,
                                                    first, second, third["revision"]])
    # The next run has a record: the unrecorded revision named as the store names them goes; the one current before
    # (second, still in the record's history) and the operator's entries stay.
    again = place(capsys, tmp_path, seed=3, keep=1)
    assert again.get("failed") is not True and again["changed"], again
    assert sorted(os.listdir(model_dir)) == sorted([".state.json", "backup", "current", "notes.txt", second,
                                                    third["revision"]])


def test_check_mode_marks_a_revision_it_did_not_place_as_pending(capsys, tmp_path):
    """vllm_serve then weighs it by the size given instead of refusing a directory a real run would have
    (site.yml --check on a fresh host stopped there)."""
    first = place(capsys, tmp_path, seed=1)
    assert "pending" not in first["placed"]
    source = tmp_path / "controller-2"
    write_tiny_model(str(source), seed=2)
    common = {"store": str(tmp_path / "store"), "name": "tiny", "source": "controller://%s" % source,
              "_ansible_check_mode": True}
    manifest = run_module(capsys, action="manifest", **common)
    plan = run_module(capsys, action="plan", revision=manifest["revision"], manifest=manifest["manifest"],
                      min_free_disk_gib=0, **common)
    would = run_module(capsys, action="place", revision=manifest["revision"], manifest=manifest["manifest"],
                       staged=plan["staging"], min_free_disk_gib=0, **common)
    assert would["changed"] and would["placed"]["pending"] is True
    assert not os.path.exists(would["placed"]["revision_path"]) and current(tmp_path) == first["revision"]
    # A revision already placed is not pending in check mode either.
    common["source"] = "controller://%s" % (tmp_path / "controller-1")
    again = run_module(capsys, action="place", revision=first["revision"], manifest=manifest["manifest"],
                       staged=plan["staging"], min_free_disk_gib=0, **common)
    assert "pending" not in again["placed"]
