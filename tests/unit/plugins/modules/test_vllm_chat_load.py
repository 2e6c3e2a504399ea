"""vllm_chat_load's split: the module (root, the host's Python) reads the endpoints and their keys, the load runs in
the given interpreter as another account with the key on its standard input only. The interpreter here is this
machine's own Python behind a wrapper that records who it runs as, its arguments and its environment; it has no
openai package, so the real driver answers with that error, which proves the sources and the request got through.
It is the system's Python (/usr/bin/python3), which the other account can run, unlike the test venv's.
The real load against real vLLM is the engine scenario's (molecule/shared/tests/test_engine.py)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import tempfile

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.arm_inference.vllm.plugins.modules import vllm_chat_load

KEY = "chat-load-key-0b9f44e1c2"
SYSTEM_PYTHON = "/usr/bin/python3"


def run_module(capsys, **args):
    with patch_module_args(dict({"prompts": ["hi"]}, **args)):
        with pytest.raises(SystemExit):
            vllm_chat_load.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def world():
    """A directory any account can enter: the endpoints, the key (root's only), the recording wrapper."""
    root = tempfile.mkdtemp(dir="/tmp", prefix="chat-load-")
    os.chmod(root, 0o755)
    key = os.path.join(root, "api_key")
    with open(key, "w", encoding="utf-8") as handle:
        handle.write(KEY + "\n")
    os.chmod(key, 0o600)
    record = os.path.join(root, "record")
    os.mkdir(record)
    os.chmod(record, 0o777)
    wrapper = os.path.join(root, "python")
    with open(wrapper, "w", encoding="utf-8") as handle:
        handle.write('#!/bin/sh\nid -u > %s/uid\nprintf "%%s\\n" "$@" > %s/argv\nenv > %s/env\nexec %s "$@"\n'
                     % (record, record, record, SYSTEM_PYTHON))
    os.chmod(wrapper, 0o755)
    yield {"root": root, "key": key, "record": record, "python": wrapper}
    shutil.rmtree(root)


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON),
                    reason="running the load as another account needs root, and a Python that account may run")
def test_the_load_runs_as_the_account_with_the_key_on_its_input_only(capsys, world):
    endpoints = [{"name": "main", "base_url": "http://127.0.0.1:9", "api_key_file": world["key"]}]
    result = run_module(capsys, endpoints=endpoints, python=world["python"], run_as="nobody")
    assert result["failed"] and "the openai package is missing in" in result["msg"], result
    record = world["record"]
    with open(os.path.join(record, "uid"), encoding="utf-8") as handle:
        assert int(handle.read()) == pwd.getpwnam("nobody").pw_uid
    for name in ("argv", "env"):
        with open(os.path.join(record, name), encoding="utf-8") as handle:
            text = handle.read()
        assert KEY not in text, name
    with open(os.path.join(record, "argv"), encoding="utf-8") as handle:
        assert handle.read().splitlines()[:2] == ["-I", "-c"]
    assert KEY not in json.dumps(result)


def test_as_root_without_an_account_nothing_runs(capsys, world, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    result = run_module(capsys, endpoints=[{"name": "main", "base_url": "http://127.0.0.1:9"}], python=world["python"])
    assert result["failed"] and result["msg"].startswith("run_as must name the account")
    assert os.listdir(world["record"]) == []


def test_an_account_the_host_lacks_is_named(capsys, world):
    result = run_module(capsys, endpoints=[{"name": "main", "base_url": "http://127.0.0.1:9"}], python=world["python"],
                        run_as="no-such-account-7c1d")
    assert result["failed"] and result["msg"] == "run_as: the account no-such-account-7c1d does not exist on the host"


def test_an_unreadable_key_file_is_named_before_anything_runs(capsys, world):
    endpoints = [{"name": "main", "base_url": "http://127.0.0.1:9", "api_key_file": world["root"] + "/missing"}]
    result = run_module(capsys, endpoints=endpoints, python=world["python"], run_as="nobody")
    assert result["failed"] and "cannot read the API key file %s/missing of endpoint main" % world["root"] in result["msg"]
    assert os.listdir(world["record"]) == []


def test_check_mode_runs_nothing(capsys, world):
    result = run_module(capsys, endpoints=[{"name": "main", "base_url": "http://127.0.0.1:9"}], python=world["python"],
                        run_as="nobody", _ansible_check_mode=True)
    assert result == {"changed": False, "results": [], "invocation": result["invocation"]}
    assert os.listdir(world["record"]) == []


def test_the_load_may_take_what_its_requests_timeouts_allow_and_no_more():
    # Two endpoints; levels of 8 requests at 4 in flight (2 turns) and 3 at 8 (1 turn); 2 untimed requests each.
    request = {"levels": [[4, 8], [8, 3]], "params": {"timeout": 10.0}}
    assert vllm_chat_load.load_seconds(request, 2) == 2 * (2 + 1 + 2) * 10.0 + 60
