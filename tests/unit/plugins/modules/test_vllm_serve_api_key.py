"""vllm_serve_api_key on a real directory: a random key made once, 0600 from the start, never in the result."""

from __future__ import annotations

import json
import os
import stat

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.arm_inference.vllm.plugins.module_utils.api_keys import weak_key
from ansible_collections.arm_inference.vllm.plugins.modules import vllm_serve_api_key


def run_module(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            vllm_serve_api_key.main()
    return json.loads(capsys.readouterr().out)


def test_a_missing_key_is_made_once_and_kept(capsys, tmp_path):
    path = tmp_path / "generated_api_key"
    first = run_module(capsys, path=str(path), mode="0600")
    key = path.read_text()
    assert first["changed"] and first["generated"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(key.strip()) == 64 and key.endswith("\n") and not weak_key(key.strip())
    assert key.strip() not in json.dumps(first)
    second = run_module(capsys, path=str(path), mode="0600")
    assert not second["changed"] and not second["generated"] and path.read_text() == key
    assert os.listdir(tmp_path) == ["generated_api_key"]


def test_two_hosts_get_different_keys(capsys, tmp_path):
    keys = set()
    for name in ("one", "two"):
        run_module(capsys, path=str(tmp_path / name))
        keys.add((tmp_path / name).read_text())
    assert len(keys) == 2


def test_the_temporary_file_is_private_before_the_key_is_written(tmp_path, fdopen_modes):
    vllm_serve_api_key.write_key(str(tmp_path / "key"))
    assert fdopen_modes == [0o600]


def test_an_empty_file_gets_a_key_and_a_wider_mode_is_narrowed(capsys, tmp_path):
    path = tmp_path / "key"
    path.write_text("\n")
    path.chmod(0o644)
    result = run_module(capsys, path=str(path), mode="0600")
    assert result["changed"] and result["generated"] and path.read_text().strip()
    key = path.read_text()
    path.chmod(0o644)
    result = run_module(capsys, path=str(path), mode="0600")
    assert result["changed"] and not result["generated"] and path.read_text() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_check_mode_writes_nothing(capsys, tmp_path):
    path = tmp_path / "absent" / "key"
    result = run_module(capsys, path=str(path), _ansible_check_mode=True)
    assert result["changed"] and result["generated"] and not path.parent.exists()


def test_a_missing_directory_or_relative_path_fails(capsys, tmp_path):
    assert "does not exist" in run_module(capsys, path=str(tmp_path / "absent" / "key"))["msg"]
    assert "must be absolute" in run_module(capsys, path="relative/key")["msg"]
