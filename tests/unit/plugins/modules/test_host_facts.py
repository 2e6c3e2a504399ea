"""The module on the machine running the tests: it reads the live /proc and /sys and agrees with them."""

from __future__ import annotations

import json
import os

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.arm_inference.vllm.plugins.modules import host_facts


def run_module(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            host_facts.main()
    return json.loads(capsys.readouterr().out)


def test_live_host(capsys):
    result = run_module(capsys)
    facts = result["ansible_facts"]["arm_inference_host"]
    assert result["changed"] is False
    assert facts["cpus"]["usable_count"] == len(os.sched_getaffinity(0))
    with open("/proc/cpuinfo") as handle:
        assert facts["cpus"]["online_count"] == handle.read().count("\nprocessor") + 1
    assert facts["build_max_jobs"] >= 1 and facts["build_class"].startswith(facts["architecture"])


def test_bad_gib_per_job_names_the_option(capsys):
    result = run_module(capsys, build_gib_per_job=0)
    assert result["failed"] and "build_gib_per_job" in result["msg"]
