"""Runs the vllm_model_fetch module in-process for the module tests, as Ansible would: the arguments patched in,
the module's exit caught, its JSON result returned."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.arm_inference.vllm.plugins.modules import vllm_model_fetch


def run_module(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            vllm_model_fetch.main()
    return json.loads(capsys.readouterr().out)
