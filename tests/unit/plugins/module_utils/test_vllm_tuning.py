"""Tuning rules on published hosts: defaults, every override, and the errors for values that do not fit."""

from __future__ import annotations

import pytest

import published_samples
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_tuning as tuning
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts


SIZE_KEYS = ("model_weights_gib", "model_params_billion", "model_summary")


def serve(facts, instances=None, *args, **kwargs):
    """serve_profile() with a 0.5B-parameter model for every instance that states no size (the tests
    here are about CPUs and memory, not about the model; sizing is tested below and in
    test_vllm_model_info.py)."""
    if isinstance(instances, list):
        instances = [item if not isinstance(item, dict) or any(key in item for key in SIZE_KEYS)
                     else dict(item, model_params_billion=0.5) for item in instances]
    elif instances is None:
        instances = [{"model_params_billion": 0.5}]
    return tuning.serve_profile(facts, instances, *args, **kwargs)


@pytest.fixture(scope="module")
def superchip():
    return build_host_facts(published_samples.load_sample("grace-superchip"))


@pytest.fixture(scope="module")
def altra():
    return build_host_facts(published_samples.load_sample("altra-q80-2p"))


@pytest.fixture(scope="module")
def small_n1():
    return build_host_facts(published_samples.load_sample("graviton2-t4g"))


def test_tensor_parallel_defaults_to_nodes_per_instance(superchip):
    assert tuning.tensor_parallel_size(superchip) == 2
    assert tuning.tensor_parallel_size(superchip, instances=2) == 1
    assert tuning.tensor_parallel_size(superchip, instances=3) == 1


@pytest.mark.parametrize("size", [3, 5])
def test_tensor_parallel_that_does_not_fit_names_the_variable(superchip, size):
    with pytest.raises(tuning.TuningError, match=r"^vllm_serve_tensor_parallel_size: does not fit: 1 instance\(s\) x %d ranks .*\(got %d\); "
                                                 r"use a size that fits: 1, 2, 4" % (size, size)):
        tuning.tensor_parallel_size(superchip, override=size)


def test_four_ranks_split_each_node_in_two(superchip):
    profile, = serve(superchip, [{"tensor_parallel_size": 4}])
    assert profile["omp_threads_bind"] == "0-34|36-70|72-106|108-142"
    assert profile["omp_threads"] == 140


def test_instances_share_nodes_and_keep_one_cpu_each(superchip):
    first, second = serve(superchip, [{"name": "a"}, {"name": "b"}])
    assert (first["omp_threads_bind"], second["omp_threads_bind"]) == ("0-70", "72-142")
    assert first["environment"]["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"


def test_reserving_zero_cpus_binds_them_all(superchip):
    profile, = serve(superchip, reserved_cpus_per_rank=0)
    assert profile["omp_threads_bind"] == "0-71|72-143"


def test_bind_override_is_validated_and_normalized(superchip):
    profile, = serve(superchip, [{"omp_threads_bind": "0,1,2,3|72-75"}])
    assert profile["omp_threads_bind"] == "0-3|72-75" and profile["omp_threads"] == 8


@pytest.mark.parametrize("bind, message", [
    ("0-70|72-200", "names CPUs 144-200 that this host does not have"),
    ("0-80|100-110", "group 0 \\(0-80\\) spans NUMA nodes 0, 1"),
    ("0-10", "has 1 '\\|'-separated group"),
    ("0-10|5-20", "binds CPUs 5-10 to more than one rank"),
    ("zero|72", "must be 'auto', 'nobind' or CPU lists"),
    ("0-3||72", "has 3 '\\|'-separated group"),
])
def test_bad_bind_override(superchip, bind, message):
    with pytest.raises(tuning.TuningError, match="^vllm_serve_instances\\[0\\].omp_threads_bind: " + message):
        serve(superchip, [{"omp_threads_bind": bind}])


def test_auto_and_nobind_pass_through(superchip):
    assert serve(superchip, [{"omp_threads_bind": "auto"}])[0]["omp_threads_bind"] == "auto"
    assert serve(superchip, [{"omp_threads_bind": "nobind"}])[0]["omp_threads_bind"] == "nobind"
    with pytest.raises(tuning.TuningError, match="auto needs one NUMA node per rank"):
        serve(superchip, [{"omp_threads_bind": "auto", "tensor_parallel_size": 4}])


def test_kv_cache_budget_is_per_node_share(superchip):
    profile, = serve(superchip, [{"model_weights_gib": 100}])
    # node 1 is the smaller: 481845 MiB = 470.6 GiB; minus 50 GiB weights per rank, minus 47.1 GiB headroom.
    assert profile["kv_cache_gib"] == 373


def test_kv_cache_override_that_does_not_fit(superchip):
    with pytest.raises(tuning.TuningError, match=r"kv_cache_gib: does not fit: NUMA node 1 gives each rank 470.6 GiB.*"
                                                 r"\(got 500\); set it to 423 or less"):
        serve(superchip, [{"kv_cache_gib": 500}])
    profile, = serve(superchip, [{"kv_cache_gib": 40}])
    assert "VLLM_CPU_KVCACHE_SPACE" not in profile["environment"]
    assert profile["arguments"][profile["arguments"].index("--kv-cache-memory-bytes") + 1] == str(40 * 1024 ** 3)


def test_kv_cache_floor(small_n1):
    with pytest.raises(tuning.TuningError, match="below the floor of 1 GiB.*set vllm_serve_instances\\[0\\].kv_cache_gib"):
        serve(small_n1, [{"model_params_billion": 8}])
    with pytest.raises(tuning.TuningError, match="below the floor of 6 GiB"):
        serve(small_n1, [{"model_params_billion": 0.5}], kv_cache_min_gib=6)


def test_unknown_memory_asks_for_the_kv_size():
    facts = build_host_facts(published_samples.load_sample("graviton3"))
    with pytest.raises(tuning.TuningError, match="^vllm_serve_instances\\[0\\].kv_cache_gib: cannot be sized: "
                                                 "the NUMA node of CPU 0 reports no memory \\(got None\\); set it"):
        serve(facts)
    assert serve(facts, [{"kv_cache_gib": 20}])[0]["kv_cache_gib"] == 20
    with pytest.raises(tuning.TuningError, match="memory is unknown"):
        tuning.max_jobs(facts)


def test_dtype_and_fpmath_follow_bf16(superchip, altra):
    assert (tuning.dtype(superchip), tuning.fpmath_mode(superchip)) == ("bfloat16", "BF16")
    assert (tuning.dtype(altra), tuning.fpmath_mode(altra)) == ("float32", None)
    assert tuning.dtype(altra, "float") == "float32" and tuning.fpmath_mode(superchip, "strict") == "STRICT"


@pytest.mark.parametrize("function, value, message", [
    (tuning.dtype, "bfloat16", "^vllm_serve_dtype: bfloat16 needs a CPU with bf16.*Neoverse-N1 has none \\(got 'bfloat16'\\); use float32"),
    (tuning.dtype, "int4", "is not one of auto, bfloat16, float16, float32"),
    (tuning.fpmath_mode, "bf16", "^vllm_serve_onednn_fpmath_mode: bf16 needs a CPU with bf16.* \\(got 'bf16'\\); leave it empty"),
    (tuning.fpmath_mode, "fast", "is not one of strict, bf16"),
])
def test_dtype_and_fpmath_overrides_are_checked(altra, function, value, message):
    with pytest.raises(tuning.TuningError, match=message):
        function(altra, value)


def test_max_jobs_is_capped_by_memory_and_cpus(altra, small_n1):
    assert tuning.max_jobs(altra) == 64  # 128 GiB / 2 GiB = 64 < 160 CPUs
    assert tuning.max_jobs(altra, gib_per_job=1) == 128
    assert tuning.max_jobs(small_n1) == 2  # 8 GiB allows 4 jobs, 2 CPUs
    assert tuning.max_jobs(small_n1, override="3") == 3
    with pytest.raises(tuning.TuningError, match="^vllm_build_max_jobs: must be 1 or more \\(got 0\\); give a whole number of 1 or more$"):
        tuning.max_jobs(small_n1, override=0)
    with pytest.raises(tuning.TuningError, match="^vllm_build_max_jobs: must be an integer"):
        tuning.max_jobs(small_n1, override="many")


# Each published aarch64 host's class, checked against the Features/Flags of its own dump: Neoverse-N1
# (Graviton2, Altra) has neither bf16 nor i8mm; Neoverse-V1/V2 (Graviton3/4, Grace) and AmpereOne have
# both, which vLLM's CMake compiles in as +bf16+i8mm.
AARCH64_CLASSES = {
    "altra-max-m128-2p": "aarch64-dotprod-fp16",
    "altra-max-m96-1p": "aarch64-dotprod-fp16",
    "altra-q80-1p": "aarch64-dotprod-fp16",
    "altra-q80-2p": "aarch64-dotprod-fp16",
    "ampereone-a192": "aarch64-dotprod-fp16-bf16-i8mm",
    "grace-c1": "aarch64-dotprod-fp16-bf16-i8mm",
    "grace-gh200": "aarch64-dotprod-fp16-bf16-i8mm",
    "grace-superchip": "aarch64-dotprod-fp16-bf16-i8mm",
    "graviton2-c6g-16xlarge": "aarch64-dotprod-fp16",
    "graviton2-t4g": "aarch64-dotprod-fp16",
    "graviton3": "aarch64-dotprod-fp16-bf16-i8mm",
    "graviton4-c8g-16xlarge": "aarch64-dotprod-fp16-bf16-i8mm",
    "graviton4-m8g-2xlarge": "aarch64-dotprod-fp16-bf16-i8mm",
}


@pytest.mark.parametrize("name", sorted(AARCH64_CLASSES))
def test_build_class_of_each_published_aarch64_host(name):
    facts = build_host_facts(published_samples.load_sample(name))
    assert tuning.build_class(facts) == AARCH64_CLASSES[name]
    # The class names a feature exactly when the published dump lists it as a whole word.
    sample = published_samples.SAMPLES_DIR / name
    words = set()
    for dump in ("cpuinfo", "lscpu"):
        if (sample / dump).is_file():
            words.update((sample / dump).read_text().split())
    for feature in tuning.AARCH64_OPTIONAL_FEATURES:
        assert (feature in AARCH64_CLASSES[name].split("-")) == (feature in words), (name, feature)


def test_every_published_aarch64_host_has_an_expected_class():
    aarch64 = [name for name in published_samples.sample_names() if not name.startswith("x86_64")]
    assert sorted(aarch64) == sorted(AARCH64_CLASSES)


@pytest.mark.parametrize("bf16, i8mm, expected", [
    (False, False, "aarch64-dotprod-fp16"),
    (True, False, "aarch64-dotprod-fp16-bf16"),
    (False, True, "aarch64-dotprod-fp16-i8mm"),
    (True, True, "aarch64-dotprod-fp16-bf16-i8mm"),
])
def test_bf16_and_i8mm_each_split_the_class(altra, bf16, i8mm, expected):
    # A CPU with bf16 but no i8mm (or the reverse) gets a wheel of its own: vLLM's CMake adds each flag
    # separately, so neither wheel runs on the other CPU.
    facts = dict(altra, cpu=dict(altra["cpu"], flags=dict(altra["cpu"]["flags"], bf16=bf16, i8mm=i8mm)))
    assert tuning.build_class(facts) == expected


def test_the_acl_step_is_capped_at_max_jobs_through_nproc(altra):
    # Altra Q80 2P: 160 CPUs, 128 GiB. MAX_JOBS 64 (2 GiB each); vLLM's CMake would run 160 ACL jobs.
    assert tuning.max_jobs(altra) == 64
    assert tuning.acl_build_jobs(altra, 64) == {"jobs": 64, "environment": {"OMP_THREAD_LIMIT": "64"}}
    # OMP_NUM_THREADS in the user's environment stays under the role's cap, as in nproc.
    assert tuning.acl_build_jobs(altra, 64, environment={"OMP_NUM_THREADS": "200"})["jobs"] == 64
    assert tuning.acl_build_jobs(altra, 64, environment={"OMP_NUM_THREADS": "8,4"})["jobs"] == 8
    # Lifting the cap is fine while memory holds it (1 GiB per job: 128 jobs fit in 128 GiB).
    assert tuning.acl_build_jobs(altra, 64, 1, {"OMP_THREAD_LIMIT": "128"})["jobs"] == 128


def test_lifting_the_acl_cap_beyond_memory_is_refused_in_one_line(altra):
    with pytest.raises(tuning.TuningError) as raised:
        tuning.acl_build_jobs(altra, 64, 2, {"OMP_THREAD_LIMIT": "0"})  # 0 means no limit: all 160 CPUs
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("vllm_build_environment: OMP_THREAD_LIMIT makes the Arm Compute Library step of vLLM's "
                              "build run 160 compile jobs (it follows nproc, not MAX_JOBS), 320 GiB at 2.0 GiB each, but "
                              "the host has 128.0 GiB available (got OMP_THREAD_LIMIT=0); remove them from "
                              "vllm_build_environment or set OMP_THREAD_LIMIT to 64 or less"), message
    with pytest.raises(tuning.TuningError, match=r"OMP_NUM_THREADS and OMP_THREAD_LIMIT makes .* run 100 compile jobs"):
        tuning.acl_build_jobs(altra, 64, 2, {"OMP_THREAD_LIMIT": "100", "OMP_NUM_THREADS": 120})


def test_no_acl_step_off_aarch64_and_unknown_memory_is_not_guessed(altra):
    x86 = build_host_facts(published_samples.load_sample("x86_64-spr-2s"))
    assert tuning.acl_build_jobs(x86, 64, 2, {"OMP_THREAD_LIMIT": "0"}) == {"jobs": None, "environment": {}}
    unknown = dict(altra, memory={"total_mib": None, "available_mib": None})
    assert tuning.acl_build_jobs(unknown, 4, 2, {"OMP_THREAD_LIMIT": "0"})["jobs"] == 160
    with pytest.raises(tuning.TuningError, match="^vllm_build_environment: must be a mapping of environment variables \\(got a list\\); write"):
        tuning.acl_build_jobs(altra, 4, 2, ["OMP_THREAD_LIMIT=0"])


@pytest.mark.parametrize("environment, expected", [
    ({}, 160), ({"OMP_NUM_THREADS": "4"}, 4), ({"OMP_NUM_THREADS": "400"}, 400), ({"OMP_THREAD_LIMIT": "8"}, 8),
    ({"OMP_NUM_THREADS": "16", "OMP_THREAD_LIMIT": "8"}, 8), ({"OMP_NUM_THREADS": "0"}, 160),
    ({"OMP_NUM_THREADS": "x"}, 160), ({"OMP_NUM_THREADS": " 12 ,2"}, 12),
])
def test_nproc_follows_coreutils(environment, expected):
    assert tuning.nproc(160, environment) == expected


def test_build_class_of_an_emulated_host_is_unknown(superchip):
    emulated = dict(superchip, cpu=dict(superchip["cpu"], cpuinfo_architecture="x86_64"))
    assert tuning.build_class(emulated) == "aarch64-unknown-cpu"


@pytest.mark.parametrize("instances, message", [
    ("one", "^vllm_serve_instances: must be a list of mappings \\(one per vLLM server\\) \\(got 'one'\\)"),
    ([{"name": "a"}, {"name": "a"}], "duplicate names: a, a"),
    ([{"tensor_parallel_size": 1}, {"tensor_parallel_size": 2}], "same tensor_parallel_size"),
    ([{"tensor_parallel_size": True}], "must be an integer"),
    ([{"model_params_billion": -1}], "must be a number >= 0"),
])
def test_bad_instances(superchip, instances, message):
    with pytest.raises(tuning.TuningError, match=message):
        serve(superchip, instances)


def test_reserved_cpus_that_leave_nothing(small_n1):
    with pytest.raises(tuning.TuningError, match="^vllm_serve_reserved_cpus_per_rank: leaves no CPU for OpenMP threads "
                                                 "on a rank of 2 CPU\\(s\\) \\(0-1\\) \\(got 2\\); reserve fewer"):
        serve(small_n1, [{"model_params_billion": 0.5}], reserved_cpus_per_rank=2)


def test_instances_must_not_share_cpus(superchip):
    with pytest.raises(tuning.TuningError, match="^vllm_serve_instances\\[1\\].omp_threads_bind: binds CPU 60, which "
                                                 "instance a already uses \\(got '60-70'\\); give each instance"):
        serve(superchip, [{"name": "a"}, {"name": "b", "omp_threads_bind": "60-70"}])
    first, second = serve(superchip, [{"name": "a"}, {"name": "b", "omp_threads_bind": "100-110"}])
    assert second["omp_threads_bind"] == "100-110"


def test_a_model_nothing_weighs_is_refused(superchip):
    """The issue's case: no size used to mean 0 GiB of weights and a KV cache that took their memory."""
    with pytest.raises(tuning.TuningError, match=(
            r"^vllm_serve_instances\[0\]: the model's weights are unknown.*\(got 'org/model'\); .*set "
            r"vllm_serve_instances\[0\].model_weights_gib or vllm_serve_instances\[0\].model_params_billion")):
        tuning.serve_profile(superchip, [{"model_label": "org/model"}])
    with pytest.raises(tuning.TuningError, match="weights are unknown"):
        tuning.serve_profile(superchip)


def test_the_kv_size_reaches_vllm_as_bytes_per_rank(superchip):
    profile, = serve(superchip, [{"model_weights_gib": 100}])
    arguments = profile["arguments"]
    assert arguments[arguments.index("--kv-cache-memory-bytes") + 1] == str(373 * 1024 ** 3)
    assert "VLLM_CPU_KVCACHE_SPACE" not in profile["environment"]


def published_class(name):
    return tuning.build_class(build_host_facts(published_samples.load_sample(name)))


def test_missing_features_between_published_hosts():
    # A Graviton3 wheel (bf16, i8mm) on a Graviton2 or an Altra (Neoverse-N1) lacks both; the other way round nothing.
    assert tuning.missing_features(published_class("graviton3"), published_class("graviton2-t4g")) == ["bf16", "i8mm"]
    assert tuning.missing_features(published_class("graviton4-c8g-16xlarge"), published_class("altra-q80-1p")) == [
        "bf16", "i8mm"]
    assert tuning.missing_features(published_class("graviton2-t4g"), published_class("graviton3")) == []
    # Sapphire Rapids' wheel on an AVX2-only x86_64 (AMD Zen 2/3, Intel before Skylake-SP).
    spr = published_class("x86_64-spr-2s")
    assert tuning.missing_features(spr, "x86_64-avx2") == ["avx512f", "avx512bf16", "avx512vnni", "amxbf16"]
    # An AVX2 wheel runs on every AVX-512 CPU, whose class does not spell avx2 out.
    assert tuning.missing_features("x86_64-avx2", spr) == []
    assert tuning.missing_features("x86_64-avx2", published_class("x86_64-e5-2687w-v4")) == []


@pytest.mark.parametrize("release, host", [
    ("", "aarch64-dotprod-fp16"), ("aarch64-dotprod-fp16", "x86_64-avx2"), ("aarch64-unknown-cpu", "aarch64-dotprod-fp16"),
    ("aarch64-dotprod-fp16-bf16", "aarch64-unknown-cpu")])
def test_missing_features_of_classes_that_cannot_be_compared(release, host):
    assert tuning.missing_features(release, host) is None
