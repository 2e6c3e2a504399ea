from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

import published_samples
from ansible_collections.arm_inference.vllm.plugins.filter import (vllm_autotune, vllm_benchmark, vllm_build, vllm_gateway,
                                                                   vllm_model, vllm_rollout, vllm_serve)
from ansible_collections.arm_inference.vllm.plugins.filter.vllm_tuning import FilterModule
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts

FILTERS = FilterModule().filters()


@pytest.fixture(scope="module")
def gh200():
    return build_host_facts(published_samples.load_sample("grace-gh200"))


def test_every_filter_has_a_documentation_file():
    from pathlib import Path

    directory = Path(published_samples.__file__).resolve().parents[2] / "plugins" / "filter"
    documented = sorted(path.stem for path in directory.glob("vllm_*.yml"))
    modules = (vllm_serve, vllm_build, vllm_benchmark, vllm_model, vllm_gateway, vllm_rollout, vllm_autotune)
    provided = list(FILTERS) + [name for module in modules for name in module.FilterModule().filters()]
    assert sorted(provided) == documented


def test_filters_compute_from_host_facts(gh200):
    assert FILTERS["vllm_build_class"](gh200) == "aarch64-dotprod-fp16-bf16-i8mm"
    assert FILTERS["vllm_tensor_parallel_size"](gh200) == 1
    assert FILTERS["vllm_dtype"](gh200) == "bfloat16"
    assert FILTERS["vllm_fpmath_mode"](gh200) == "BF16"
    assert FILTERS["vllm_max_jobs"](gh200, 4) == 72
    profile, = FILTERS["vllm_serve_profile"](gh200, [{"model_params_billion": 8}])
    assert profile["environment"]["VLLM_CPU_OMP_THREADS_BIND"] == "0-70"


def test_tuning_errors_become_filter_errors(gh200):
    with pytest.raises(AnsibleFilterError, match="names CPUs 72-100 that this host does not have"):
        FILTERS["vllm_serve_profile"](gh200, [{"omp_threads_bind": "0-100"}])


@pytest.mark.parametrize("value", [None, "text", {"cpu": {}}, []])
def test_input_that_is_not_host_facts(value):
    with pytest.raises(AnsibleFilterError, match="run arm_inference.vllm.host_facts first"):
        FILTERS["vllm_dtype"](value)


def test_the_acl_step_filter_caps_and_refuses_in_one_line(gh200):
    # GH200: 72 CPUs. MAX_JOBS 16 becomes the ACL step's cap; lifting it to all 72 at 8 GiB each does not fit.
    assert FILTERS["vllm_acl_build_jobs"](gh200, 16, 2, {}) == {"jobs": 16, "environment": {"OMP_THREAD_LIMIT": "16"}}
    with pytest.raises(AnsibleFilterError, match=r"^vllm_build_environment: OMP_THREAD_LIMIT makes .* run 72 compile jobs .*"
                                                 r"\(got OMP_THREAD_LIMIT=0\); remove them .*set OMP_THREAD_LIMIT to \d+ or less$"):
        FILTERS["vllm_acl_build_jobs"](gh200, 16, 8, {"OMP_THREAD_LIMIT": "0"})


def test_a_host_without_a_class_gets_the_placeholder_vllm_serve_globs_for(gh200):
    filters = vllm_autotune.FilterModule().filters()
    assert filters["vllm_autotune_class"](gh200, unknown="-").startswith("aarch64-")
    without_memory = dict(gh200, memory=dict(gh200["memory"], total_mib=0))
    assert filters["vllm_autotune_class"](without_memory, unknown="-") == "-"
    with pytest.raises(AnsibleFilterError, match="memory.total_mib: is unknown"):
        filters["vllm_autotune_class"](without_memory)


def test_a_tuned_file_that_is_not_yaml_is_refused_naming_it(gh200):
    apply = vllm_autotune.FilterModule().filters()["vllm_autotune_apply"]
    with pytest.raises(AnsibleFilterError, match=r"^x/m\.yml: not YAML \(.*\); remove it or measure again"):
        apply(gh200, {"x/m.yml": "settings: [unclosed"}, [{"name": "main"}], {"model": "org/m"}, "r1")
