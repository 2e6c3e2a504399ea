"""serve_units: instance validation (each error names the variable) and what the unit gets."""

from __future__ import annotations

import pytest

import model_samples
import published_samples
from ansible_collections.arm_inference.vllm.plugins.filter.vllm_serve import (
    vllm_serve_environment_lines,
    vllm_serve_units,
)
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_serve
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_serve import (
    ServeError,
    environment_line,
    model_paths,
    serve_units,
    systemd_quote,
)
from ansible.errors import AnsibleFilterError

MODEL = "/srv/models/llama-3.1-8b"
# What the vllm_model_info module reports for MODEL: the published Llama-3.1-8B bf16 sample.
MODEL_INFO = {"models": {MODEL: model_samples.summary("llama-3.1-8b-bf16", MODEL)}, "errors": {}}


@pytest.fixture(scope="module")
def superchip():
    return build_host_facts(published_samples.load_sample("grace-superchip"))


@pytest.fixture(scope="module")
def altra():
    return build_host_facts(published_samples.load_sample("altra-q80-1p"))


def _error(facts, instances, settings=None):
    with pytest.raises(ServeError) as caught:
        serve_units(facts, instances, dict({"model": MODEL, "model_info": MODEL_INFO}, **(settings or {})))
    return str(caught.value)


def test_single_instance_defaults(altra):
    [unit] = serve_units(altra, [{}], {"model": MODEL, "model_info": MODEL_INFO, "tcmalloc_path": "/usr/lib/libtcmalloc_minimal.so.4"})
    assert unit["name"] == "main" and unit["unit"] == "vllm-serve-main.service"
    assert unit["port"] == 8000 and unit["host"] == "127.0.0.1"
    assert unit["health_url"] == "http://127.0.0.1:8000/health"
    assert unit["arguments"][:6] == ["--model", MODEL, "--host", "127.0.0.1", "--port", "8000"]
    # Altra (Neoverse-N1) has no bf16: float32, no fpmath variable.
    assert "--dtype" in unit["arguments"] and unit["arguments"][unit["arguments"].index("--dtype") + 1] == "float32"
    assert "ONEDNN_DEFAULT_FPMATH_MODE" not in unit["environment"]
    assert unit["environment"]["LD_PRELOAD"] == "/usr/lib/libtcmalloc_minimal.so.4"
    assert unit["environment"]["HF_HUB_OFFLINE"] == "1"
    assert unit["cpu_affinity"] == "0-79" and unit["environment"]["VLLM_CPU_OMP_THREADS_BIND"] == "0-78"
    assert unit["exec_start"].startswith("/opt/vllm/current/venv/bin/python -I /usr/local/libexec/arm-inference/")


def test_one_instance_per_node_gets_its_own_port_cpus_and_dirs(superchip):
    units = serve_units(superchip, [{"name": "node0", "tensor_parallel_size": 1},
                                    {"name": "node1", "tensor_parallel_size": 1, "port": 9000}], {"model": MODEL, "model_info": MODEL_INFO})
    assert [unit["port"] for unit in units] == [8000, 9000]
    assert [unit["cpu_affinity"] for unit in units] == ["0-71", "72-143"]
    assert units[0]["state_dir"] != units[1]["state_dir"]
    assert "ONEDNN_DEFAULT_FPMATH_MODE" in units[0]["environment"]


def test_empty_instance_list_means_no_units(altra):
    assert serve_units(altra, [], {}) == []
    assert serve_units(altra, None, {}) == []


def test_wildcard_bind_is_checked_on_loopback(altra):
    settings = {"model": MODEL, "model_info": MODEL_INFO, "api_key_configured": True, "ip_address_allow": ["any"]}
    [unit] = serve_units(altra, [{"host": "0.0.0.0"}], settings)
    assert unit["health_url"] == "http://127.0.0.1:8000/health"
    [unit] = serve_units(altra, [{"host": "::"}], settings)
    assert unit["health_url"] == "http://[::1]:8000/health"


@pytest.mark.parametrize("instances, settings, expected", [
    ([{"host": "0.0.0.0"}], {}, "vllm_serve_instances[0].host: is reachable from other machines, "
                                "but no API key is configured (got '0.0.0.0'); set vllm_serve_api_key (or vllm_serve_api_key_file), "
                                "let the role generate one (vllm_gateway_enabled: true with vllm_serve_api_key_generate: "
                                "auto)"),
    ([{}], {"host": "10.0.0.5"}, "vllm_serve_host: is reachable from other machines, but no API key is "
                                 "configured (got '10.0.0.5')"),
    ([{}], {"host": "myhost"}, "vllm_serve_host: must be an IP address to listen on (got 'myhost'); give "
                               "127.0.0.1, ::1"),
    ([{"model": ""}], {"model": ""}, "vllm_serve_instances[0].model: is required (got ''); name a model"),
    ([{}], {"model": ""}, "vllm_serve_instances[0].model (or vllm_serve_model): is required (got '')"),
    ([{"model": "not a model"}], {}, "vllm_serve_instances[0].model: not a model is neither a model declared in "
                                     "vllm_model_models (none declared), an absolute path nor a hub id"),
    ([{"name": "Bad Name"}], {}, "vllm_serve_instances[0].name: must be 1-40 characters of a-z, 0-9, '-' and "
                                 "'_', starting with a letter or digit (got 'Bad Name'); rename the instance"),
    ([{"name": "a"}, {"name": "b", "port": 8000}], {}, "vllm_serve_instances[1].port: is already used by instance a (got 8000); "
                                                       "give every instance its own port"),
    ([{"port": 70000}], {}, "vllm_serve_instances[0].port: must be a TCP port between 1 and 65535 "
                            "(got 70000); pick a free port"),
    ([{"prot": 8001}], {}, "vllm_serve_instances[0]: has unknown key(s) prot (got ['prot']); use only "
                           "the allowed keys: name, model,"),
    ([{"extra_args": ["--api-key=x"]}], {}, "vllm_serve_instances[0].extra_args: must not contain --api-key: the role "
                                            "sets it (got '--api-key'); use the instance keys"),
    ([{}], {"extra_args": ["--port", "1"]}, "vllm_serve_extra_args: must not contain --port: the role sets it (got "
                                            "'--port')"),
    ([{"extra_args": "--foo"}], {}, "vllm_serve_instances[0].extra_args: must be a list of strings, one argument "
                                    "each (got '--foo'); write each argument"),
    ([{"environment": {"PYTHONOPTIMIZE": "1"}}], {}, "vllm_serve_instances[0].environment: must not set PYTHONOPTIMIZE: it disables a vLLM safeguard (got "
     "'PYTHONOPTIMIZE'); remove it (PYTHONOPTIMIZE, VLLM_ALLOW_INSECURE_SERIALIZATION, VLLM_SERVER_DEV_MODE are "
     "refused)"),
    ([{}], {"environment": {"VLLM_API_KEY": "k"}}, "vllm_serve_environment: must not set VLLM_API_KEY: the role computes it "
                                                   "(got 'VLLM_API_KEY'); use the instance keys"),
    ([{"environment": {"A": "x\ny"}}], {}, "vllm_serve_instances[0].environment.A: must not contain control "
                                           "characters such as newlines; remove them"),
    ([{"max_model_len": 0}], {}, "vllm_serve_instances[0].max_model_len: must be a positive integer or "
                                 "empty (vLLM's default) (got 0); give a whole number"),
    ([{}], {"max_num_seqs": "many"}, "vllm_serve_max_num_seqs: must be a positive integer or empty (vLLM's "
                                     "default) (got 'many')"),
    ([{"cpu_affinity": "0-500"}], {}, "vllm_serve_instances[0].cpu_affinity: names CPUs this host cannot use "
                                      "(80-500) (got '0-500'); use only the usable CPUs: 0-79"),
    ([{"kv_cache_gib": 100000}], {}, "vllm_serve_instances[0].kv_cache_gib: does not fit: NUMA node"),
    ("main", {}, "vllm_serve_instances: must be a list of mappings (one per vLLM server) (got "
                 "'main'); give one mapping per server"),
])
def test_bad_input_names_the_variable(altra, instances, settings, expected):
    assert expected in _error(altra, instances, settings)


def test_remote_bind_allowed_with_key_or_explicit_override(altra):
    settings = {"model": MODEL, "model_info": MODEL_INFO, "ip_address_allow": ["10.0.0.0/8"]}
    assert serve_units(altra, [{"host": "10.0.0.5"}], dict(settings, api_key_configured=True))
    assert serve_units(altra, [{"host": "10.0.0.5"}], dict(settings, allow_unauthenticated=True, ip_address_allow=["any"]))


def test_quoting_for_systemd_and_environment_files():
    assert systemd_quote("--model") == "--model"
    assert systemd_quote("a b") == '"a b"'
    assert systemd_quote('say "hi"\\') == '"say \\"hi\\"\\\\"'
    assert systemd_quote("50%") == '"50%%"'
    assert systemd_quote("$HOME") == '"$$HOME"'
    assert environment_line("A", 'x "y" \\z') == 'A="x \\"y\\" \\\\z"'


def test_extra_args_and_served_name_reach_the_command_line(altra):
    [unit] = serve_units(altra, [{"served_model_name": "my model", "extra_args": ["--enforce-eager"],
                                  "max_model_len": 4096}], {"model": MODEL, "model_info": MODEL_INFO, "extra_args": ["--disable-log-requests"]})
    assert '--served-model-name "my model"' in unit["exec_start"]
    assert unit["arguments"][-2:] == ["--disable-log-requests", "--enforce-eager"]
    assert "--max-model-len 4096" in unit["exec_start"]


def test_user_bind_string_leaves_affinity_to_the_user(altra):
    [unit] = serve_units(altra, [{"omp_threads_bind": "0-31"}], {"model": MODEL, "model_info": MODEL_INFO})
    assert unit["cpu_affinity"] == ""
    [unit] = serve_units(altra, [{"omp_threads_bind": "0-31", "cpu_affinity": "0-32"}], {"model": MODEL, "model_info": MODEL_INFO})
    assert unit["cpu_affinity"] == "0-32"


def test_filter_turns_errors_into_filter_errors(altra):
    with pytest.raises(AnsibleFilterError, match="vllm_serve_instances\\[0\\].port"):
        vllm_serve_units(altra, [{"port": 0}], {"model": MODEL, "model_info": MODEL_INFO})
    with pytest.raises(AnsibleFilterError, match="run arm_inference.vllm.host_facts first"):
        vllm_serve_units({}, [{}], {})
    with pytest.raises(AnsibleFilterError, match="vllm_serve_environment_lines takes"):
        vllm_serve_environment_lines({}, [{}], {})


def test_the_units_the_role_keeps_carry_no_environment_value_and_the_lines_carry_all(altra):
    # Ansible prints the units fact and every loop item over it at -v: the operator's tokens stay out of both.
    token = "hf_secret_token_0d7c"
    instances = [{"name": "a", "environment": {"EXTRA": "instance-" + token}}, {"name": "b"}]
    settings = {"model": MODEL, "model_info": MODEL_INFO, "environment": {"HF_TOKEN": token}}
    units = vllm_serve_units(altra, instances, settings)
    assert token not in repr(units)
    assert [unit["name"] for unit in units] == ["a", "b"]
    assert "HF_TOKEN" in units[0]["environment_names"] and "EXTRA" in units[0]["environment_names"]
    assert "EXTRA" not in units[1]["environment_names"]
    lines = vllm_serve_environment_lines(altra, instances, settings)
    full = serve_units(altra, instances, settings)
    assert lines == {unit["name"]: unit["environment_lines"] for unit in full}
    assert 'HF_TOKEN="%s"' % token in lines["a"] and 'EXTRA="instance-%s"' % token in lines["a"]
    assert [line.split("=")[0] for line in lines["a"]] == units[0]["environment_names"]
    # Everything else the role reads of a unit is the same.
    assert [dict(unit, environment_names=None) for unit in units] == [
        dict({key: value for key, value in unit.items() if key not in ("environment", "environment_lines")},
             environment_names=None) for unit in full]


def test_key_transport_file_names_the_file_and_credential_does_not(altra):
    settings = {"model": MODEL, "model_info": MODEL_INFO, "api_key_configured": True, "api_key_file": "/etc/vllm-serve/api_key"}
    [unit] = serve_units(altra, [{}], dict(settings, api_key_transport="file"))
    assert unit["environment"]["ARM_INFERENCE_API_KEY_FILE"] == "/etc/vllm-serve/api_key"
    assert unit["environment"]["ARM_INFERENCE_API_KEY_REQUIRED"] == "1"
    [unit] = serve_units(altra, [{}], settings)
    assert "ARM_INFERENCE_API_KEY_FILE" not in unit["environment"]
    # Clients (smoke.yml) find the key where it is stored on the host, whatever the transport.
    assert unit["endpoint"] == {"name": "main", "base_url": "http://127.0.0.1:8000", "model": MODEL,
                                "api_key_file": "/etc/vllm-serve/api_key"}
    # The model clients ask for: the served name when one is set (the gateway balances by it).
    [unit] = serve_units(altra, [{"served_model_name": "llama"}], settings)
    assert unit["endpoint"]["model"] == "llama"
    [unit] = serve_units(altra, [{}], {"model": MODEL, "model_info": MODEL_INFO})
    assert "ARM_INFERENCE_API_KEY_REQUIRED" not in unit["environment"]
    assert unit["endpoint"]["api_key_file"] == ""
    assert "vllm_serve_api_key_transport: must be one of credential, file (got 'env'); set it to credential or file" in _error(
        altra, [{}], {"api_key_transport": "env"})


# --- models vllm_model placed, local paths and hub ids -------------------------------------------

PLACED_PATH = "/var/lib/vllm-models/llama/current"
PLACED = {"llama": {"path": PLACED_PATH, "revision": "0e9e39f249a16976918f6564b8830bc894c89659", "source": "hf"}}
DECLARED = [{"name": "llama", "repo_id": "meta-llama/Llama-3.1-8B-Instruct"}, {"name": "qwen", "repo_id": "Qwen/x"}]
PLACED_INFO = {"models": {PLACED_PATH: model_samples.summary("llama-3.1-8b-bf16", PLACED_PATH)}, "errors": {}}


def test_a_placed_model_is_served_from_its_verified_directory_offline():
    c8g = build_host_facts(published_samples.load_sample("graviton4-c8g-16xlarge"))
    settings = {"declared_models": DECLARED, "placed_models": PLACED, "model_info": PLACED_INFO, "offline": False}
    [unit] = serve_units(c8g, [{"model": "llama"}], settings)
    arguments = unit["arguments"]
    assert arguments[:4] == ["--model", PLACED_PATH, "--served-model-name", "llama"]
    assert unit["environment"]["HF_HUB_OFFLINE"] == "1" and unit["environment"]["TRANSFORMERS_OFFLINE"] == "1"
    assert unit["model_source"]["revision"] == PLACED["llama"]["revision"]
    assert unit["profile"]["model_weights_gib"] == 14.96 and unit["profile"]["kv_cache_gib"] == 100
    assert arguments[arguments.index("--kv-cache-memory-bytes") + 1] == str(100 * 1024 ** 3)
    assert "VLLM_CPU_KVCACHE_SPACE" not in unit["environment"]


def test_a_model_not_on_the_host_yet_is_weighed_by_its_given_size_or_not_at_all():
    """A pending model (placed later in this run, or check mode only said it would be) has no directory
    to read: unsized, it is not weighed (vllm_model checks it fits); sized, by the size given."""
    c8g = build_host_facts(published_samples.load_sample("graviton4-c8g-16xlarge"))
    pending = {"llama": dict(PLACED["llama"], pending=True)}
    settings = {"declared_models": DECLARED, "placed_models": pending, "model_info": {"models": {}, "errors": {}}}
    [unit] = serve_units(c8g, [{"model": "llama"}], settings)
    assert unit["profile"]["model_weights_gib"] == 0 and unit["arguments"][:2] == ["--model", PLACED_PATH]
    [sized] = serve_units(c8g, [{"model": "llama", "model_weights_gib": 15}], settings)
    assert sized["profile"]["model_weights_gib"] == 15
    # Placed (not pending) and unreadable: refused, as before.
    with pytest.raises(ServeError, match="the model directory cannot be read"):
        serve_units(c8g, [{"model": "llama"}], dict(settings, placed_models=PLACED))


def test_a_revision_switch_changes_the_unit():
    """vllm_model publishes each revision's own directory: the unit names it, so a new revision
    changes the unit and the role restarts the server onto the new weights."""
    c8g = build_host_facts(published_samples.load_sample("graviton4-c8g-16xlarge"))
    commands = []
    for revision in ("0e9e39f249a16976918f6564b8830bc894c89659", "1f0e9e39f249a16976918f6564b8830bc894c896"):
        path = "/var/lib/vllm-models/llama/" + revision
        placed = {"llama": dict(PLACED["llama"], revision=revision, revision_path=path)}
        info = {"models": {path: model_samples.summary("llama-3.1-8b-bf16", path)}, "errors": {}}
        settings = {"declared_models": DECLARED, "placed_models": placed, "model_info": info}
        [unit] = serve_units(c8g, [{"model": "llama"}], settings)
        assert unit["arguments"][:2] == ["--model", path]
        commands.append(unit["exec_start"])
    assert commands[0] != commands[1]


def test_model_paths_lists_the_local_directories_to_read():
    settings = {"model": "llama", "declared_models": DECLARED, "placed_models": PLACED}
    instances = [{"name": "a"}, {"name": "b", "model": MODEL}, {"name": "c", "model": "org/hub-model"},
                 {"name": "d", "model": "llama"}]
    assert model_paths(instances, settings) == [PLACED_PATH, MODEL]


@pytest.mark.parametrize("instances, settings, expected", [
    ([{"model": "qwen"}], {}, "vllm_serve_instances[0].model: model qwen is declared in vllm_model_models but not "
                              "placed on this host (vllm_model_placed has llama) (got 'qwen'); run the vllm_model "
                              "role before vllm_serve (site.yml and serve.yml do)"),
    # The roles pass the declared models' names alone (none of an entry's secrets): read the same way.
    ([{"model": "qwen"}], {"declared_models": ["llama", "qwen"]},
     "vllm_serve_instances[0].model: model qwen is declared in vllm_model_models but not placed on this host"),
    ([{"model": "mistral"}], {"declared_models": ["llama", "qwen"]},
     "vllm_serve_instances[0].model: mistral is neither a model declared in vllm_model_models (llama, qwen)"),
    ([{"model": "mistral"}], {}, "vllm_serve_instances[0].model: mistral is neither a model declared in "
                                 "vllm_model_models (llama, qwen), an absolute path nor a hub id org/name (got "
                                 "'mistral'); declare the model in vllm_model_models or correct the name"),
    ([{}], {"model": "org/hub-model"}, "vllm_serve_instances[0]: the model's weights are unknown, so the KV cache "
                                       "cannot be sized (no model files read, no size given) (got 'org/hub-model'); "
                                       "serve a model from vllm_model_models"),
    ([{"model": "/srv/missing"}], {}, "vllm_serve_instances[0].model: the model directory cannot be read: "
                                      "/srv/missing is not a directory. (got '/srv/missing'); point it at a "
                                      "Hugging Face model directory"),
    ([{"model": "llama"}], {"model_info": {"models": {}, "errors": {PLACED_PATH: "it is incomplete"}}},
     "vllm_serve_instances[0].model: the model directory cannot be read: it is incomplete (got '%s'); run the "
     "vllm_model role again to place it" % PLACED_PATH),
])
def test_models_that_cannot_be_served_or_weighed_are_refused(instances, settings, expected):
    c8g = build_host_facts(published_samples.load_sample("graviton4-c8g-16xlarge"))
    merged = dict({"declared_models": DECLARED, "placed_models": PLACED, "model_info": {
        "models": {}, "errors": {"/srv/missing": "/srv/missing is not a directory."}}}, **settings)
    with pytest.raises(ServeError) as caught:
        serve_units(c8g, instances, merged)
    assert expected in str(caught.value)


def test_a_hub_id_with_a_size_or_a_missing_path_with_a_size_is_served():
    c8g = build_host_facts(published_samples.load_sample("graviton4-c8g-16xlarge"))
    [unit] = serve_units(c8g, [{"model": "org/hub-model", "model_params_billion": 8}], {})
    assert unit["arguments"][:2] == ["--model", "org/hub-model"] and unit["profile"]["kv_cache_gib"] == 100
    [unit] = serve_units(c8g, [{"model": "/srv/elsewhere", "model_weights_gib": 15}], {})
    assert unit["profile"]["model_weights_source"] == "model_weights_gib"


def test_units_stay_on_loopback_and_fetch_no_media_url_unless_told(altra):
    [unit] = serve_units(altra, [{}], {"model": MODEL, "model_info": MODEL_INFO})
    assert unit["ip_address_allow"] == "localhost"
    flag = unit["arguments"].index("--allowed-media-domains")
    assert unit["arguments"][flag + 1:flag + 2] == [vllm_serve.NO_MEDIA_DOMAIN]
    assert unit["environment"]["VLLM_MEDIA_URL_ALLOW_REDIRECTS"] == "0"
    # Tensor-parallel ranks meet on loopback, the only address the unit may use.
    assert (unit["environment"]["VLLM_HOST_IP"], unit["environment"]["GLOO_SOCKET_IFNAME"]) == ("127.0.0.1", "lo")
    assert 'VLLM_HOST_IP="127.0.0.1"' in "\n".join(unit["environment_lines"]) or \
        "VLLM_HOST_IP=127.0.0.1" in "\n".join(unit["environment_lines"])
    [unit] = serve_units(altra, [{}], {"model": MODEL, "model_info": MODEL_INFO, "ip_address_allow": ["localhost", "10.1.2.3/8"],
                                       "allowed_media_domains": ["images.example.com", "cdn.example.org"]})
    assert unit["ip_address_allow"] == "localhost 10.0.0.0/8"
    assert unit["arguments"][unit["arguments"].index("--allowed-media-domains") + 1:][:2] == [
        "images.example.com", "cdn.example.org"]


@pytest.mark.parametrize("settings,expected", [
    ({"ip_address_allow": []}, "vllm_serve_ip_address_allow: must be a non-empty list"),
    ({"ip_address_allow": ["localhost", "intranet"]}, "vllm_serve_ip_address_allow[1]: is neither a network"),
    ({"host": "0.0.0.0", "api_key_configured": True}, "vllm_serve_ip_address_allow: keeps the instances on loopback, "
     "but vllm_serve_host binds a non-loopback address"),
    ({"offline": False, "model": "org/model", "instance": {"model_weights_gib": 1}}, "vllm_serve_ip_address_allow: keeps the instances on loopback, but "
     "vllm_serve_offline is false"),
    ({"allowed_media_domains": "images.example.com"}, "vllm_serve_allowed_media_domains: must be a list of host names"),
    ({"allowed_media_domains": ["https://images.example.com"]}, "vllm_serve_allowed_media_domains[0]: must be a "
     "lower-case host name"),
    ({"allowed_media_domains": ["*.example.com"]}, "vllm_serve_allowed_media_domains[0]: must be a lower-case host"),
    ({"extra_args": ["--allowed-media-domains", "169.254.169.254"]}, "vllm_serve_extra_args"),
])
def test_network_and_media_settings_are_refused_in_one_line(altra, settings, expected):
    with pytest.raises(vllm_serve.ServeError) as error:
        settings = dict(settings)
        serve_units(altra, [settings.pop("instance", {})], dict({"model": MODEL, "model_info": MODEL_INFO}, **settings))
    assert str(error.value).startswith(expected) and "\n" not in str(error.value)


def test_the_roles_settings_map_renders_every_variable_the_preflight_and_autotune_read():
    """vars/main.yml builds the role's settings in Jinja; the preflight and autotune take the same variables
    through vllm_serve.variable_settings. Both must name the same variable for each setting."""
    import pathlib
    import re
    import yaml

    vars_file = pathlib.Path(__file__).resolve().parents[4] / "roles" / "vllm_serve" / "vars" / "main.yml"
    rendered = yaml.safe_load(vars_file.read_text())["_vllm_serve_settings"]
    pairs = dict(re.findall(r"'([a-z_]+)': (vllm_serve_[a-z_]+)\b(?!\s*\|)", rendered))
    assert {setting: name for name, setting in vllm_serve.VARIABLE_SETTINGS.items()} == {
        setting: pairs[setting] for setting in vllm_serve.VARIABLE_SETTINGS.values()}
    computed = set(re.findall(r"'([a-z_]+)':", rendered)) - set(vllm_serve.VARIABLE_SETTINGS.values())
    assert computed == {"declared_models", "placed_models", "model_info", "venv_path", "launcher_path",
                        "tcmalloc_path", "api_key_configured", "api_key_file"}
    assert set(vllm_serve.VARIABLE_SETTINGS.values()) | computed <= set(vllm_serve.DEFAULT_SETTINGS)


def test_variable_settings_takes_only_the_variables_given():
    variables = {"vllm_serve_port": 8001, "vllm_serve_venv_path": "/x", "vllm_serve_allow_unauthenticated_remote": True}
    settings = vllm_serve.variable_settings(variables, venv_path="/y")
    assert settings == {"port": 8001, "allow_unauthenticated": True, "venv_path": "/y"}
