from __future__ import annotations

import pytest

import model_samples
import published_samples
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_gateway
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_serve import serve_units

SETTINGS = {"enabled": True, "address": "0.0.0.0", "port": 8443, "metrics_port": 9180, "metrics_allow": ["10.1.2.3/8"],
            "api_keys": [{"name": "ops", "key": "21df29ffb7576b595489674caa73b132"}], "tls_certificate": "", "tls_key": "",
            "tls_source": "controller", "routes": ["/v1/chat/completions", "/v1/models"], "rate_limit_per_minute": 600,
            "max_request_mib": 16, "timeout": 600, "max_connections": 4096, "client_timeout": 30, "header_timeout": 10,
            "connections_per_source": 64, "metrics_address": "0.0.0.0", "metrics_max_connections": 64,
            "concurrency_per_key": 64, "failed_keys_per_minute": 20, "peers_port": 9181}
# Llama 3.1 8B's published file list, as vllm_model_info reads it on a host.
MODEL = {"model": "/srv/models/llama", "model_info": {
    "models": {"/srv/models/llama": model_samples.summary("llama-3.1-8b-bf16", "/srv/models/llama")}, "errors": {}}}


@pytest.fixture(scope="module")
def altra():
    """A published Ampere Altra Q80-30 dump: one NUMA node of 80 cores."""
    return build_host_facts(published_samples.load_sample("altra-q80-1p"))


def _units(facts, instances, **settings):
    return serve_units(facts, instances, dict(MODEL, **settings))


def _messages(settings=None, units=()):
    return [message for _variable, message in vllm_gateway.problems(dict(SETTINGS, **(settings or {})), list(units))]


def test_the_configuration_lists_every_instance_vllm_serve_wrote(altra):
    endpoints = [unit["endpoint"] for unit in _units(altra, [{"name": "node0"}, {"name": "node1"}])]
    config = vllm_gateway.gateway_config(endpoints, SETTINGS)
    assert [server["address"] for server in config["servers"]] == ["127.0.0.1:8000", "127.0.0.1:8001"]
    assert [server["metrics_path"] for server in config["servers"]] == ["/instances/node0/metrics",
                                                                        "/instances/node1/metrics"]
    assert config["public_bind"] == "0.0.0.0:8443" and config["metrics_bind"] == "0.0.0.0:9180"
    # A host address in a network entry is widened to its network, as HAProxy's src match would read it.
    assert config["metrics_allow"] == ["10.0.0.0/8"]
    assert config["max_request_bytes"] == 16 * 1024 * 1024 and config["health_route"] == "/health"
    # Extra vars (-e) arrive as strings; the configuration still holds numbers.
    as_strings = vllm_gateway.gateway_config(endpoints, dict(SETTINGS, port="9443", max_request_mib="2"))
    assert as_strings["public_bind"] == "0.0.0.0:9443" and as_strings["max_request_bytes"] == 2 * 1024 * 1024
    assert vllm_gateway.gateway_config(endpoints, dict(SETTINGS, address="::"))["public_bind"] == "[::]:8443"


def test_each_listener_has_its_own_slots_and_address():
    config = vllm_gateway.gateway_config([], dict(SETTINGS, metrics_address="127.0.0.1", metrics_max_connections=8))
    assert config["metrics_bind"] == "127.0.0.1:9180" and config["public_bind"] == "0.0.0.0:8443"
    assert (config["max_connections"], config["metrics_max_connections"], config["total_connections"]) == (4096, 8, 4104)
    assert (config["client_timeout"], config["header_timeout"], config["timeout"]) == (30, 10, 600)
    # Empty: the public listener's address.
    assert vllm_gateway.gateway_config([], dict(SETTINGS, address="::", metrics_address=""))["metrics_bind"] == "[::]:9180"
    assert _messages({"metrics_address": ""}) == []


def test_limits_are_checked_against_each_other():
    assert _messages({"connections_per_source": 5000}) == [
        "vllm_gateway_connections_per_source: is more than vllm_gateway_max_connections (4096), so one address could "
        "hold every connection slot (got 5000); keep it well below vllm_gateway_max_connections"]
    assert _messages({"client_timeout": 900})[0].startswith(
        "vllm_gateway_client_timeout: is longer than vllm_gateway_timeout (600 s)")
    # Not numbers: input_rules' floors name them; the relation is not checked then.
    assert _messages({"client_timeout": "soon", "connections_per_source": None}) == []
    assert _messages({"metrics_address": "metrics.example"})[0].startswith(
        "vllm_gateway_metrics_address: is not an IP address (got 'metrics.example')")


@pytest.mark.parametrize("settings,expected", [
    ({"peers_port": 8443}, "vllm_gateway_peers_port: is the same port as vllm_gateway_port"),
    ({"file_sd_path": "../../etc/prometheus/targets.json"}, "vllm_gateway_file_sd_path: must be a .json, .yml or "
     ".yaml path without '..'"),
    ({"file_sd_path": "/srv/prometheus/targets.txt"}, "vllm_gateway_file_sd_path: must be a .json"),
    ({"metrics_target_host": "gw 1.example.com"}, "vllm_gateway_metrics_target_host: is neither an IP address nor a "
     "host name (got 'gw 1.example.com')"),
    ({"metrics_target_host": "gw1.example.com/metrics"}, "vllm_gateway_metrics_target_host: is neither"),
])
def test_the_peers_port_and_prometheus_settings_are_checked(settings, expected):
    assert _messages(settings)[0].startswith(expected)
    assert _messages({"file_sd_path": "", "metrics_target_host": "fe80::1"}) == []
    assert _messages({"file_sd_path": "/etc/prometheus/vllm.yml", "metrics_target_host": "gw1.example.com"}) == []


def test_an_endpoint_without_an_http_address_is_refused():
    with pytest.raises(vllm_gateway.GatewayError, match="re-run the vllm_serve role"):
        vllm_gateway.gateway_config([{"name": "main", "base_url": "unix:/run/vllm.sock"}], SETTINGS)


def test_valid_settings_and_a_disabled_gateway_have_no_problem(altra):
    assert _messages(units=_units(altra, [{"name": "a"}, {"name": "b"}])) == []
    assert _messages({"enabled": False, "api_keys": []}) == []


def test_keys_are_checked_without_ever_showing_one():
    secret = "6c7c6b5e209c56001c0f83c2c0bd64ab"
    weak = ["s" * 40, "ab" * 20, "password" * 4, "0110100110010110" * 2]
    lines = _messages({"api_keys": [{"name": "a", "key": secret}, {"name": "b", "key": secret},
                                    {"name": "a", "key": "short"}, {"name": "c", "key": "with space " + "x" * 20}]
                       + [{"name": "w%d" % index, "key": key} for index, key in enumerate(weak)]})
    assert lines == [
        "vllm_gateway_api_keys[1].key: is the same key as vllm_gateway_api_keys[0]; give every client its own key",
        "vllm_gateway_api_keys[2].name: is already used by vllm_gateway_api_keys[0] (got 'a'); give every key its own "
        "name (it is what the logs and rate limits show)",
        "vllm_gateway_api_keys[2].key: is shorter than 16 characters; use a random key, e.g. from `openssl rand -hex 32`",
        "vllm_gateway_api_keys[3].key: contains spaces or control characters, or starts with #; use printable ASCII "
        "without spaces (a leading # would make it a comment in the key map)",
    ] + ["vllm_gateway_api_keys[%d].key: has too little entropy to be a random key (a repeated pattern, too few "
         "different characters, or too short for its alphabet); use a random key of 32 or more characters, e.g. from "
         "`openssl rand -hex 32`" % index for index in range(4, 8)]
    assert all(key not in line for line in lines for key in [secret] + weak)
    assert _messages({"api_keys": [{"name": "a", "key": "#" + "x" * 30}]})[0].startswith(
        "vllm_gateway_api_keys[0].key: contains spaces or control characters, or starts with #")


def test_a_certificate_needs_its_key_and_controller_files_must_exist():
    assert _messages({"tls_certificate": "/etc/ssl/gw.crt", "tls_source": "host"}) == [
        "vllm_gateway_tls_key: is empty while vllm_gateway_tls_certificate is set (got ''); give both the certificate "
        "and its key, or neither for a self-signed pair made on each host"]
    missing = vllm_gateway.problems(dict(SETTINGS, tls_certificate="/pki/a.crt", tls_key="/pki/a.key"), [],
                                    controller_exists=lambda path: path == "/pki/a.key")
    assert [variable for variable, _message in missing] == ["vllm_gateway_tls_certificate"]
    # A relative path would be looked up in the collection's own directories, not where the operator is.
    assert _messages({"tls_certificate": "files/gw.crt", "tls_key": "/pki/a.key"})[0] == (
        "vllm_gateway_tls_certificate: must be an absolute path (on the controller) (got 'files/gw.crt'); give the "
        "file's full path")


def test_ports_binds_and_models_are_checked_against_the_instances(altra):
    units = _units(altra, [{"name": "a"}, {"name": "b", "served_model_name": "other"}], host="0.0.0.0", ip_address_allow=["any"],
                   api_key_configured=True)
    lines = _messages({"port": 8001}, units)
    assert "vllm_gateway_port: is the port of the vLLM instance b (got 8001); give the gateway and every instance " \
        "their own ports" in lines
    assert any(line.startswith("vllm_serve_host: lets clients bypass vllm_gateway") for line in lines)
    assert any(line.startswith("vllm_serve_instances: serve 2 different models on one host") for line in lines)
    assert _messages({"metrics_port": 8443})[0].startswith("vllm_gateway_metrics_port: is the same port")


@pytest.mark.parametrize("routes,expected", [
    ([], "vllm_gateway_routes: is empty"),
    (["/metrics"], "vllm_gateway_routes[0]: must not be public (got '/metrics'); remove it (metrics are on"),
    (["/tokenize/"], "vllm_gateway_routes[0]: must not be public"),
    (["/v1/load_lora_adapter"], "vllm_gateway_routes[0]: must not be public"),
    (["/health"], "vllm_gateway_routes[0]: is answered by the gateway itself"),
    (["/v1/../metrics"], "vllm_gateway_routes[0]: must be an absolute URL path"),
    (["/v1/chat completions"], "vllm_gateway_routes[0]: must be an absolute URL path"),
    (["/v1/rerank"], "vllm_gateway_routes[0]: is not one of the OpenAI inference routes"),
    (["/pause"], "vllm_gateway_routes[0]: must not be public"),
])
def test_routes(routes, expected):
    assert _messages({"routes": routes})[0].startswith(expected)


def test_networks_must_be_cidr():
    assert _messages({"metrics_allow": ["10.0.0.0/8", "::1/128", "10.0.0.0/40", "prometheus"]}) == [
        "vllm_gateway_metrics_allow[2]: is not an IP network in CIDR notation (got '10.0.0.0/40'); write it like "
        "10.0.0.0/8 or 192.0.2.7/32",
        "vllm_gateway_metrics_allow[3]: is not an IP network in CIDR notation (got 'prometheus'); write it like "
        "10.0.0.0/8 or 192.0.2.7/32"]


def test_the_key_map_holds_the_digest_of_every_key_and_the_probe_never_a_key():
    # What coreutils says: `printf %s k1 | sha256sum`, `printf %s p1 | sha256sum`.
    k1 = "6ab9f1eb8f7d3388f4f9d586f66e99fd54080df2c446f0e58668b09c08a16dd0"
    p1 = "f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a"
    assert vllm_gateway.client_key_map([{"name": "ops", "key": "k1"}], "p1\n") == "%s ops\n%s arm-inference-probe\n" % (k1, p1)
    assert vllm_gateway.client_key_map([{"name": "ops", "key": "k1"}]) == "%s ops\n" % k1
    assert _messages({"api_keys": [{"name": vllm_gateway.PROBE_NAME, "key": "k" * 20}]})[0].startswith(
        "vllm_gateway_api_keys[0].name: is the name of the role's own probe key")


def test_the_gateway_endpoint_is_checked_against_its_certificate():
    endpoint = vllm_gateway.gateway_endpoint(SETTINGS, "/etc/haproxy/vllm-gateway/self-signed.crt", "/probe.key")
    assert endpoint == {"name": "gateway", "base_url": "https://127.0.0.1:8443", "api_key_file": "/probe.key",
                        "ca_file": "/etc/haproxy/vllm-gateway/self-signed.crt", "tls_verify": True}
    # An operator's certificate does not name 127.0.0.1: the loopback probe does not check it.
    assert vllm_gateway.gateway_endpoint(dict(SETTINGS, address="::"), "", "/k")["base_url"] == "https://[::1]:8443"
    assert vllm_gateway.gateway_endpoint(SETTINGS, "", "/k")["tls_verify"] is False


def test_certificate_names():
    assert vllm_gateway.certificate_names(["gw1", "10.0.0.5", "gw1.example.com", "", "bad name!", "localhost"],
                                          ["10.0.0.5", "127.0.0.1", "::1"]) == (
        "IP:10.0.0.5,IP:127.0.0.1,IP:::1,DNS:gw1,DNS:gw1.example.com,DNS:localhost")


def test_file_sd_groups_one_target_per_instance_with_labels():
    hosts = [{"host": "gw2", "address": "10.0.0.2", "metrics_port": 9180, "hardware_class": "aarch64-dotprod-fp16",
              "endpoints": [{"name": "main", "model": "llama"}]},
             {"host": "gw1", "address": "fe80::1", "metrics_port": 9180, "hardware_class": "",
              "endpoints": [{"name": "node0", "model": "llama"}, {"name": "node1", "model": "llama"}]}]
    groups = vllm_gateway.file_sd_targets(hosts)
    assert [group["targets"] for group in groups] == [["[fe80::1]:9180"], ["[fe80::1]:9180"], ["10.0.0.2:9180"]]
    assert groups[0]["labels"] == {"__metrics_path__": "/instances/node0/metrics", "host": "gw1",
                                   "instance": "gw1/node0", "vllm_instance": "node0", "model": "llama",
                                   "hardware_class": "unknown"}


def test_file_sd_keeps_the_hosts_a_run_did_not_describe():
    old = vllm_gateway.file_sd_targets([{"host": h, "address": h, "metrics_port": 9180, "hardware_class": "x",
                                         "endpoints": [{"name": "main", "model": "old"}]} for h in ("gw1", "gw2")])
    # serve.yml --limit gw2 with a new model: gw1's target stays, gw2's is replaced.
    new = vllm_gateway.file_sd_targets([{"host": "gw2", "address": "gw2", "metrics_port": 9180, "hardware_class": "x",
                                         "endpoints": [{"name": "main", "model": "new"}]}], old)
    assert [(group["labels"]["host"], group["labels"]["model"]) for group in new] == [("gw1", "old"), ("gw2", "new")]


def test_extra_routes_are_forwarded_by_name_with_post_and_never_a_control_route():
    assert _messages({"extra_routes": ["/v1/rerank", "/pooling"]}) == []
    assert _messages({"extra_routes": ["/update_weights"]})[0].startswith(
        "vllm_gateway_extra_routes[0]: must not be public")
    assert _messages({"extra_routes": "/v1/rerank"})[0].startswith("vllm_gateway_extra_routes: must be a list")
    assert vllm_gateway.route_map(["/v1/models", "/v1/chat/completions"], ["/v1/rerank", "/v1/models"]) == (
        "/v1/models GET\n/v1/chat/completions POST\n/v1/rerank POST\n")


# What the host_ports module read in a container started with --ulimit nofile=4096:4096 (the harness's, the
# molecule scenarios'): systemd lowers HAProxy's LimitNOFILE= to this without an error, and HAProxy exits.
CONTAINER_OPEN_FILES = 4096


def _descriptor_messages(host_open_files, **settings):
    return [message for dummy, message in vllm_gateway.descriptor_problems(dict(SETTINGS, **settings), host_open_files)]


def test_the_default_slots_need_more_open_files_than_a_4096_container_gives():
    assert _descriptor_messages(CONTAINER_OPEN_FILES) == [
        "vllm_gateway_max_connections: needs 9344 open files for HAProxy (LimitNOFILE, with "
        "vllm_gateway_metrics_max_connections 64) but this host's service manager can give a service at most 4096, "
        "so HAProxy would not start (got 4096); lower vllm_gateway_max_connections to 1472 or less, or raise the "
        "host's open-files limit (a container's --ulimit nofile=9344:9344)"]
    # A host that boots systemd gives a service fs.nr_open (PID 1 has CAP_SYS_RESOURCE); unknown: nothing to say.
    assert _descriptor_messages(1048576) == [] and _descriptor_messages(None) == []


def test_the_rule_compares_what_the_unit_file_asks_for():
    """The need is the LimitNOFILE= the role renders (gateway_config's limit_nofile): a host that gives exactly that
    passes, one descriptor less does not; the suggested slots fit and one more does not."""
    for slots, metrics in ((4096, 64), (1024, 64), (100, 4)):
        rendered = vllm_gateway.gateway_config([], dict(SETTINGS, max_connections=slots,
                                                        metrics_max_connections=metrics))["limit_nofile"]
        assert _descriptor_messages(rendered, max_connections=slots, metrics_max_connections=metrics) == []
        assert _descriptor_messages(rendered - 1, max_connections=slots, metrics_max_connections=metrics)
    assert _descriptor_messages(CONTAINER_OPEN_FILES, max_connections=1472) == []
    assert _descriptor_messages(CONTAINER_OPEN_FILES, max_connections=1473)
    # Strings from -e extra vars count as numbers; values that are not numbers are input_rules' floors' to name.
    assert _descriptor_messages(CONTAINER_OPEN_FILES, max_connections="4096", metrics_max_connections="64")
    assert _descriptor_messages(CONTAINER_OPEN_FILES, max_connections="many") == []
    assert _descriptor_messages(CONTAINER_OPEN_FILES, max_connections=8) == []


def test_the_metrics_slots_are_named_when_lowering_the_public_ones_would_not_do():
    [message] = _descriptor_messages(CONTAINER_OPEN_FILES, max_connections=1024, metrics_max_connections=1600)
    assert message.startswith("vllm_gateway_metrics_max_connections: needs 6272 open files for HAProxy (LimitNOFILE, "
                              "with vllm_gateway_max_connections 1024) but this host's service manager can give a "
                              "service at most 4096, so HAProxy would not start (got 1600); lower "
                              "vllm_gateway_metrics_max_connections and vllm_gateway_max_connections, or raise"), message
