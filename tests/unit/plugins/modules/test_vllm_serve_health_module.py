"""vllm_serve_health's last check against the OpenAI-compatible stand-in (tests/stand_ins/openai_upstream.py): an
instance whose endpoint names a key file must refuse /v1/models without the key, as vLLM with --api-key does; one
that answers it is named. (The wait and the unit verdicts are module_utils/vllm_serve_health.py's tests.)"""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from conftest import start_openai_stand_in
from ansible_collections.arm_inference.vllm.plugins.modules import vllm_serve_health


def run_module(capsys, endpoints):
    with patch_module_args({"endpoints": endpoints, "timeout": 5, "interval": 1}):
        with pytest.raises(SystemExit):
            vllm_serve_health.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture(params=[None, "health-key-7d2e"], ids=["open", "keyed"])
def server(request):
    process, base_url = start_openai_stand_in(request.param)
    yield request.param, base_url
    process.terminate()
    process.wait()


def test_an_instance_with_a_key_must_refuse_v1_without_it(capsys, server):
    api_key, base_url = server
    result = run_module(capsys, [{"name": "main", "base_url": base_url, "api_key_file": "/etc/vllm-serve/api_key"}])
    if api_key:
        assert not result.get("failed") and result["healthy"] == ["main"], result
    else:
        assert result["failed"] and result["msg"] == (
            "vllm_serve: instance main answered 200 at %s/v1/models without the API key, not 401: the key did not "
            "reach vLLM" % base_url)


def test_an_instance_without_a_key_is_not_asked(capsys, server):
    dummy, base_url = server
    result = run_module(capsys, [{"name": "main", "base_url": base_url, "api_key_file": ""}])
    assert not result.get("failed") and result["healthy"] == ["main"], result
