"""The rollout's smoke load reaches vllm_benchmark as integer levels, on old ansible-core and new.

ansible-core before 2.19 rendered a template inside a list element as text: the rollout once passed
`["{{ vllm_rollout_smoke_concurrency | int }}"]`, which arrived as `["2"]`, and vllm_benchmark's
validation refused it inside the rescue block, so every healthy update was rolled back. Two halves
prove the fix without an old core: vllm_benchmark accepts what older cores pass (integer strings, as
its `elements: int` spec would), and the rollout now templates the whole list, which renders to
integers on the installed core.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.arm_inference.vllm.plugins.filter.vllm_benchmark import FilterModule

REPO_ROOT = Path(__file__).resolve().parents[3]
LEVELS = FilterModule().filters()["vllm_benchmark_levels"]


def _smoke_load_vars():
    tasks = yaml.safe_load((REPO_ROOT / "roles/vllm_rollout/tasks/main.yml").read_text())
    for task in tasks:
        for inner in task.get("block", []):
            if inner.get("ansible.builtin.include_role", {}).get("name") == "arm_inference.vllm.vllm_benchmark":
                return inner["vars"]
    raise AssertionError("roles/vllm_rollout/tasks/main.yml no longer includes vllm_benchmark in its block")


def _rollout_default(name):
    return yaml.safe_load((REPO_ROOT / "roles/vllm_rollout/defaults/main.yml").read_text())[name]


@pytest.mark.parametrize("concurrency", [2, "3"])
def test_the_rollout_passes_integer_levels(concurrency):
    value = _smoke_load_vars()["vllm_benchmark_concurrency"]
    # A whole-value template: older cores evaluate it back to a list too, never to ["2"].
    assert isinstance(value, str) and value.startswith("{{") and value.endswith("}}"), value
    rendered = Templar(loader=DataLoader(), variables={"vllm_rollout_smoke_concurrency": concurrency}).template(
        trust_as_template(value))
    assert rendered == [int(concurrency)]
    assert LEVELS(rendered) == [int(concurrency)]


def test_the_rollout_default_reaches_the_benchmark_as_an_integer():
    assert LEVELS([_rollout_default("vllm_rollout_smoke_concurrency")]) == [2]


def test_what_older_cores_passed_is_accepted():
    assert LEVELS(["2"]) == [2]
    assert LEVELS(["1", 4, " 8 "]) == [1, 4, 8]
