"""A placed revision changed behind the store's back is noticed by the next run and placed again from its source:
a file changed in place with the same size, a new file beside the weights (a *.py that trust_remote_code would run),
and, with verify full only, a same-size change whose mtime was put back. A real HTTP origin (tests/unit/http_origin.py)
serves a tiny model; the module runs in-process."""

from __future__ import annotations

import hashlib
import os

import pytest
from ansible.module_utils.basic import AnsibleModule

from http_origin import http_origin
from stand_ins.tiny_model import write_tiny_model
from model_fetch import run_module  # noqa: E402


@pytest.fixture()
def warned(monkeypatch):
    """The module's warnings, as it gives them (in-process, Ansible may route them to its display instead of the
    result once controller code was imported by another test)."""
    messages = []
    monkeypatch.setattr(AnsibleModule, "warn", lambda module, message, **kwargs: messages.append(message))
    return messages


@pytest.fixture()
def placed(capsys, tmp_path):
    model = write_tiny_model(str(tmp_path / "web"), seed=81)
    sums = dict((name, hashlib.sha256(open(os.path.join(model, name), "rb").read()).hexdigest())
                for name in os.listdir(model))
    with http_origin(model) as server:
        args = {"store": str(tmp_path / "store"), "name": "tiny", "source": server.url + "/", "sha256": sums,
                "min_free_disk_gib": 0}
        first = run_module(capsys, **args)
        assert first.get("failed") is not True and first["changed"], first
        server.requests.clear()
        yield args, server, tmp_path / "store" / "tiny" / "current", sums


def same_size_change(path):
    data = path.read_bytes()
    path.write_bytes(data[:-1] + (b"x" if data[-1:] != b"x" else b"y"))


def test_an_untouched_revision_is_decided_from_the_record(capsys, placed, warned):
    args, server, current, _sums = placed
    again = run_module(capsys, **args)
    assert again["changed"] is False and server.requests == [] and warned == []


def test_a_file_changed_in_place_with_the_same_size_is_noticed_and_placed_again(capsys, placed, warned):
    args, server, current, sums = placed
    same_size_change(current / "config.json")
    again = run_module(capsys, **args)
    assert again.get("failed") is not True and again["changed"], again
    assert "config.json changed (mtime)" in " ".join(warned)
    assert hashlib.sha256((current / "config.json").read_bytes()).hexdigest() == sums["config.json"]
    assert ("GET", "/config.json") in server.requests


def test_a_new_python_file_beside_the_weights_is_noticed_and_removed(capsys, placed, warned):
    args, server, current, sums = placed
    (current / "modeling_evil.py").write_text("import os\n")
    again = run_module(capsys, **args)
    assert again.get("failed") is not True and again["changed"], again
    assert "modeling_evil.py added" in " ".join(warned)
    assert sorted(os.listdir(current)) == sorted(sums)


def test_a_change_that_hides_its_mtime_is_found_by_verify_full_only(capsys, placed, warned):
    args, server, current, sums = placed
    weights = current / "model.safetensors"
    stat = os.stat(weights)
    same_size_change(weights)  # in place: the same inode
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert run_module(capsys, **args)["changed"] is False
    again = run_module(capsys, **dict(args, verify="full"))
    assert again.get("failed") is not True and again["changed"], again
    assert "model.safetensors changed (sha256)" in " ".join(warned)
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == sums["model.safetensors"]
    assert run_module(capsys, **dict(args, verify="full"))["changed"] is False
