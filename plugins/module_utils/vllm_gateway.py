# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the vllm_gateway role's HAProxy configuration says, and every rule on its variables.

gateway_config() turns the instances vllm_serve wrote into its endpoints file plus the role's
variables into what haproxy.cfg.j2 prints (listeners, servers, routes, limits); the template adds
no logic. problems() holds the gateway's own input rules; input_rules.vllm_gateway_settings() runs
them in preflight with the integer floors every role's limits share there. file_sd_targets() lists every host's metrics listener for Prometheus.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from ansible_collections.arm_inference.vllm.plugins.module_utils.api_keys import WEAK_KEY_FIX, WEAK_KEY_PROBLEM, key_digest, weak_key
from ansible_collections.arm_inference.vllm.plugins.module_utils.input_message import input_message
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_serve import ServeError, local_address, tcp_port

KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# A key is one word of printable ASCII: the map file HAProxy reads it from splits on whitespace,
# and a header cannot carry control characters.
KEY_TEXT = re.compile(r"^[\x21-\x7e]+$")
KEY_MIN_LENGTH = 16
# A host name Prometheus can resolve (inventory names with '_' included: /etc/hosts allows them).
HOST_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*$")
ROUTE = re.compile(r"^/[A-Za-z0-9._~/-]*$")
# vLLM routes that must never be public: metrics have their own listener, the rest leak the
# tokenizer, server internals or control the engine.
PRIVATE_ROUTES = ("/metrics", "/tokenize", "/detokenize", "/version", "/docs", "/redoc", "/openapi.json",
                  "/load", "/ping", "/server_info", "/reset_prefix_cache", "/sleep", "/wake_up", "/collective_rpc",
                  "/start_profile", "/stop_profile", "/scale_elastic_ep", "/is_sleeping", "/reset_mm_cache",
                  "/v1/load_lora_adapter", "/v1/unload_lora_adapter",
                  # vLLM 0.32's control routes (its wheel's entrypoints): pause, abort, weights, KV cache, ...
                  "/pause", "/resume", "/is_paused", "/abort_requests", "/update_weights", "/start_weight_update",
                  "/finish_weight_update", "/start_draft_weight_update", "/update_weight_version", "/weight_info",
                  "/weight_checker", "/init_weight_transfer_engine", "/shutdown_weight_transfer_engine",
                  "/release_kv_cache_memory", "/reset_encoder_cache", "/kv_event_sources", "/get_world_size",
                  "/is_scaling_elastic_ep", "/fault_tolerance/status", "/tokenizer_info", "/ready", "/readyz")
# The OpenAI inference routes vLLM serves, each with the one method it takes. vllm_gateway_routes may
# name only these; another vLLM route is forwarded only when vllm_gateway_extra_routes names it (POST).
OPENAI_ROUTES = {"/v1/chat/completions": "POST", "/v1/completions": "POST", "/v1/embeddings": "POST",
                 "/v1/models": "GET", "/v1/responses": "POST", "/v1/audio/transcriptions": "POST",
                 "/v1/audio/translations": "POST"}
# The gateway answers /health itself (from its health checks), so it is never forwarded.
HEALTH_ROUTE = "/health"
METRICS_PATH = "/instances/%s/metrics"
# The name of the role's own client key (tasks/configure.yml), which no operator key may take.
PROBE_NAME = "arm-inference-probe"


class GatewayError(ValueError):
    """One problem with one variable, printed as one line."""


def _problem(variable, problem, got=None, fix="", show_got=True):
    return (variable, input_message(variable, problem, got, fix, show_got))


def key_problems(keys, variable="vllm_gateway_api_keys"):
    """Named client keys: each a name and a key; names and keys unique; no key is ever shown."""
    problems = []
    if not isinstance(keys, list) or not keys:
        return [_problem(variable, "is empty, so the gateway would refuse every request", None,
                         "add at least one {name, key} entry (docs/gateway.md), or set vllm_gateway_enabled: false",
                         show_got=False)]
    names = {}
    seen = {}
    for index, entry in enumerate(keys):
        where = "%s[%d]" % (variable, index)
        if not isinstance(entry, dict):
            problems.append(_problem(where, "must be a mapping with name and key", None, "write {name: ..., key: ...}",
                                     show_got=False))
            continue
        unknown = sorted(set(entry) - {"name", "key"})
        if unknown:
            problems.append(_problem(where, "has unknown keys %s" % ", ".join(map(str, unknown)), None,
                                     "use only name and key", show_got=False))
        name = entry.get("name")
        if name == PROBE_NAME:
            problems.append(_problem(where + ".name", "is the name of the role's own probe key", name,
                                     "pick another name"))
        elif not isinstance(name, str) or not KEY_NAME.match(name):
            problems.append(_problem(where + ".name", "must be 1-64 characters of letters, digits, '.', '_' and '-'",
                                     name, "name the client or team the key belongs to"))
        elif name in names:
            problems.append(_problem(where + ".name", "is already used by %s[%d]" % (variable, names[name]), name,
                                     "give every key its own name (it is what the logs and rate limits show)"))
        else:
            names[name] = index
        key = entry.get("key")
        if not isinstance(key, str) or not key:
            problems.append(_problem(where + ".key", "is empty", None,
                                     "set a random key, e.g. from `openssl rand -hex 32`", show_got=False))
        elif not KEY_TEXT.match(key) or key.startswith("#"):
            problems.append(_problem(where + ".key", "contains spaces or control characters, or starts with #", None,
                                     "use printable ASCII without spaces (a leading # would make it a comment in the "
                                     "key map)", show_got=False))
        elif len(key) < KEY_MIN_LENGTH:
            problems.append(_problem(where + ".key", "is shorter than %d characters" % KEY_MIN_LENGTH, None,
                                     "use a random key, e.g. from `openssl rand -hex 32`", show_got=False))
        elif weak_key(key):
            problems.append(_problem(where + ".key", WEAK_KEY_PROBLEM, None, WEAK_KEY_FIX, show_got=False))
        elif key in seen:
            problems.append(_problem(where + ".key", "is the same key as %s[%d]" % (variable, seen[key]), None,
                                     "give every client its own key", show_got=False))
        else:
            seen[key] = index
    return problems


def network_problems(networks, variable="vllm_gateway_metrics_allow"):
    problems = []
    for index, network in enumerate(networks or []):
        try:
            ipaddress.ip_network(str(network), strict=False)
        except ValueError:
            problems.append(_problem("%s[%d]" % (variable, index), "is not an IP network in CIDR notation", network,
                                     "write it like 10.0.0.0/8 or 192.0.2.7/32"))
    return problems


def route_problems(routes, variable="vllm_gateway_routes"):
    problems = []
    if not routes and variable == "vllm_gateway_routes":
        problems.append(_problem(variable, "is empty, so every request would be refused", routes,
                                 "list the OpenAI routes clients use, e.g. /v1/chat/completions"))
    for index, route in enumerate(routes or []):
        where = "%s[%d]" % (variable, index)
        if not isinstance(route, str) or not ROUTE.match(route) or "//" in route or "/../" in route + "/":
            problems.append(_problem(where, "must be an absolute URL path of letters, digits and . _ ~ / -", route,
                                     "write it like /v1/chat/completions"))
        elif route.rstrip("/") in PRIVATE_ROUTES or route == HEALTH_ROUTE:
            problems.append(_problem(where, "must not be public" if route != HEALTH_ROUTE else
                                     "is answered by the gateway itself", route,
                                     "remove it (metrics are on vllm_gateway_metrics_port)" if route == "/metrics"
                                     else "remove it"))
        elif variable == "vllm_gateway_routes" and route not in OPENAI_ROUTES:
            problems.append(_problem(where, "is not one of the OpenAI inference routes (%s)" % ", ".join(OPENAI_ROUTES),
                                     route, "remove it, or name it in vllm_gateway_extra_routes to forward it anyway "
                                     "(POST only)"))
    return problems


def route_map(routes, extra_routes=()):
    """The lines of the map file HAProxy looks a request's path up in: `<path> <method>`."""
    return "".join("%s %s\n" % (route, OPENAI_ROUTES.get(route, "POST")) for route in
                   list(dict.fromkeys(list(routes or []) + list(extra_routes or []))))


def tls_problems(certificate, key, source, controller_exists=None):
    """Both or neither of certificate and key; paths on the controller must exist there."""
    if bool(certificate) != bool(key):
        missing = "vllm_gateway_tls_key" if certificate else "vllm_gateway_tls_certificate"
        given = "vllm_gateway_tls_certificate" if certificate else "vllm_gateway_tls_key"
        return [_problem(missing, "is empty while %s is set" % given, "", "give both the certificate and its key, "
                         "or neither for a self-signed pair made on each host")]
    problems = []
    for variable, path in (("vllm_gateway_tls_certificate", certificate), ("vllm_gateway_tls_key", key)):
        if not path:
            continue
        if not str(path).startswith("/"):
            problems.append(_problem(variable, "must be an absolute path (on the %s)" % source, path,
                                     "give the file's full path"))
        elif source == "controller" and controller_exists is not None and not controller_exists(path):
            problems.append(_problem(variable, "does not exist on the controller", path,
                                     "give a readable file, or set vllm_gateway_tls_source: host for a path on "
                                     "each host"))
    return problems


def instance_problems(units, settings):
    """The gateway's ports against the instances', loopback binds, one model per host."""
    problems = []
    ports = {}
    for key in ("port", "metrics_port", "peers_port"):
        try:
            port = tcp_port(settings.get(key), "vllm_gateway_" + key)
        except ServeError as error:
            problems.append(("vllm_gateway_" + key, str(error)))
            continue
        if port in ports:
            problems.append(_problem("vllm_gateway_" + key, "is the same port as %s" % ports[port], port,
                                     "give each of the gateway's listeners its own port"))
        else:
            ports[port] = "vllm_gateway_" + key
    for unit in units:
        if unit["port"] in ports:
            problems.append(_problem(ports[unit["port"]], "is the port of the vLLM instance %s" % unit["name"],
                                     unit["port"], "give the gateway and every instance their own ports"))
        if not ipaddress.ip_address(unit["host"]).is_loopback:
            problems.append(_problem("vllm_serve_host", "lets clients bypass vllm_gateway: instance %s binds a "
                                     "non-loopback address" % unit["name"], unit["host"],
                                     "bind the instances to 127.0.0.1, or set vllm_gateway_enabled: false"))
    # The model clients ask each instance for (vllm_serve's endpoint carries it).
    models = sorted({unit["endpoint"]["model"] for unit in units})
    if len(models) > 1:
        problems.append(_problem("vllm_serve_instances", "serve %d different models on one host, but the gateway "
                                 "balances one model per host" % len(models), ", ".join(models),
                                 "serve one model per host, or set vllm_gateway_enabled: false and route by model "
                                 "in your own proxy"))
    return problems


def target_problems(file_sd_path, target_host):
    """Where the file_sd file goes on the controller, and the address Prometheus is told to scrape."""
    found = []
    path = "" if file_sd_path is None else str(file_sd_path)
    if path and (any(part == ".." for part in re.split(r"[\\/]", path)) or re.search(r"[\x00-\x1f\x7f]", path)
                 or not re.search(r"\.(json|ya?ml)$", path)):
        found.append(_problem("vllm_gateway_file_sd_path", "must be a .json, .yml or .yaml path without '..' or "
                              "control characters (Prometheus reads only those)", path,
                              "give an absolute path such as /etc/prometheus/targets/vllm.json, or \"\" for no file"))
    # Empty where the inventory's names are not known (a rule run outside a play); a play always has one.
    host = "" if target_host is None else str(target_host)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host and not HOST_NAME.match(host):
            found.append(_problem("vllm_gateway_metrics_target_host", "is neither an IP address nor a host name",
                                  host, "give the address Prometheus reaches this host at, e.g. gw1.example.com"))
    return found


def _integer(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def limit_problems(settings):
    """Limits against each other (input_rules checks each one's floor): one source cannot take every
    slot of the public listener, and the client timeout is the short one."""
    found = []
    per_source, slots = _integer(settings.get("connections_per_source")), _integer(settings.get("max_connections"))
    if per_source is not None and slots is not None and per_source > slots:
        found.append(_problem("vllm_gateway_connections_per_source", "is more than vllm_gateway_max_connections "
                              "(%s), so one address could hold every connection slot" % slots, per_source,
                              "keep it well below vllm_gateway_max_connections"))
    client, server = _integer(settings.get("client_timeout")), _integer(settings.get("timeout"))
    if client is not None and server is not None and client > server:
        found.append(_problem("vllm_gateway_client_timeout", "is longer than vllm_gateway_timeout (%s s); a client "
                              "that stays silent (a handshake never finished, an idle connection) would hold its "
                              "slot longer than a silent generation" % server, client,
                              "keep it short (tens of seconds); vllm_gateway_timeout covers silent generations"))
    return found


def descriptor_need(max_connections, metrics_max_connections):
    """LimitNOFILE= of HAProxy's unit (hardening.conf.j2): each proxied connection holds two descriptors
    (client and server), plus listeners, checks and logs. HAProxy refuses to start when it cannot raise its
    own limit to what its maxconn needs ("Cannot raise FD limit to ..."): 8360 for the default 4160 slots."""
    return 2 * (int(max_connections) + int(metrics_max_connections)) + 1024


def _most(fits, upto):
    """The largest n in 0..upto with fits(n) (fits holds up to some n and not beyond), or -1."""
    low, high = -1, upto
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def descriptor_problems(settings, host_open_files, minimum=16):
    """HAProxy's descriptor need against the most open files the host's service manager can give a service
    (host_ports.service_open_files; None: unknown, nothing to say). systemd lowers a larger LimitNOFILE= to
    that figure without an error, and HAProxy then refuses to start. minimum: vllm_gateway_max_connections'
    floor (input_rules)."""
    slots, metrics = _integer(settings.get("max_connections")), _integer(settings.get("metrics_max_connections"))
    if host_open_files is None or slots is None or metrics is None or slots < minimum:
        return []  # unknown, or input_rules' floors say what is wrong
    need = descriptor_need(slots, metrics)
    if need <= host_open_files:
        return []
    fitting = _most(lambda value: descriptor_need(value, metrics) <= host_open_files, slots)
    # vllm_gateway_max_connections unless lowering it to its floor would not do.
    variable, value, other, other_value = (("vllm_gateway_max_connections", slots, "metrics_max_connections", metrics)
                                           if fitting >= minimum else
                                           ("vllm_gateway_metrics_max_connections", metrics, "max_connections", slots))
    problem = ("needs %d open files for HAProxy (LimitNOFILE, with vllm_gateway_%s %d) but this host's service "
               "manager can give a service at most %d, so HAProxy would not start"
               % (need, other, other_value, host_open_files))
    lower = ("lower vllm_gateway_max_connections to %d or less" % fitting if fitting >= minimum else
             "lower vllm_gateway_metrics_max_connections and vllm_gateway_max_connections")
    return [_problem(variable, problem, value, "%s, or raise the host's open-files limit (a container's --ulimit "
                     "nofile=%d:%d)" % (lower, need, need))]


def problems(settings, units, controller_exists=None):
    """Every problem with the gateway's variables, as (variable, one-line message) pairs."""
    if not settings.get("enabled"):
        return []
    found = key_problems(settings.get("api_keys"))
    found += network_problems(settings.get("metrics_allow"))
    found += route_problems(settings.get("routes"))
    if not isinstance(settings.get("extra_routes") or [], list):
        found.append(_problem("vllm_gateway_extra_routes", "must be a list of URL paths", settings.get("extra_routes"),
                              "write it like [/v1/rerank], or []"))
    else:
        found += route_problems(settings.get("extra_routes") or [], "vllm_gateway_extra_routes")
    found += tls_problems(settings.get("tls_certificate"), settings.get("tls_key"), settings.get("tls_source"),
                          controller_exists)
    for name in ("address", "metrics_address"):
        if name == "metrics_address" and settings.get(name) in (None, ""):
            continue  # the public listener's
        try:
            ipaddress.ip_address(str(settings.get(name)))
        except ValueError:
            found.append(_problem("vllm_gateway_" + name, "is not an IP address", settings.get(name),
                                  "use 0.0.0.0 for every IPv4 address, :: for every address, or one of the host's"))
    found += limit_problems(settings)
    if "file_sd_path" in settings or "metrics_target_host" in settings:
        found += target_problems(settings.get("file_sd_path"), settings.get("metrics_target_host"))
    found += instance_problems(units or [], settings)
    return found


def _listen(address, port):
    return "[%s]:%d" % (address, port) if ":" in address else "%s:%d" % (address, port)


def gateway_config(endpoints, settings):
    """What haproxy.cfg.j2 prints, from vllm_serve's endpoints (its endpoints file) and the settings.

    endpoints: [{name, base_url, model, ...}] as vllm_serve writes them. Every instance is a server
    of the one backend; each also gets a metrics backend on the metrics listener.
    """
    servers = []
    for endpoint in endpoints:
        parts = urlsplit(endpoint["base_url"])
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise GatewayError("vllm_gateway: the endpoint %s in vllm_serve's endpoints file has no http://host:port "
                               "base URL (got %s); re-run the vllm_serve role"
                               % (endpoint.get("name"), endpoint["base_url"]))
        servers.append({"name": endpoint["name"], "address": _listen(parts.hostname, parts.port),
                        "model": endpoint.get("model", ""), "metrics_path": METRICS_PATH % endpoint["name"]})
    return {
        "public_bind": _listen(settings["address"], int(settings["port"])),
        "metrics_bind": _listen(settings.get("metrics_address") or settings["address"], int(settings["metrics_port"])),
        "metrics_allow": [str(ipaddress.ip_network(str(network), strict=False))
                          for network in settings.get("metrics_allow") or []],
        "servers": servers,
        "max_request_bytes": int(settings["max_request_mib"]) * 1024 * 1024,
        "rate_limit_per_minute": int(settings["rate_limit_per_minute"]),
        "timeout": int(settings["timeout"]),
        "client_timeout": int(settings["client_timeout"]),
        "header_timeout": int(settings["header_timeout"]),
        "max_connections": int(settings["max_connections"]),
        "connections_per_source": int(settings["connections_per_source"]),
        "metrics_max_connections": int(settings["metrics_max_connections"]),
        "concurrency_per_key": int(settings["concurrency_per_key"]),
        "failed_keys_per_minute": int(settings["failed_keys_per_minute"]),
        "peers_port": int(settings["peers_port"]),
        # Both listeners' slots: neither can take the other's (each frontend has its own maxconn).
        "total_connections": int(settings["max_connections"]) + int(settings["metrics_max_connections"]),
        "health_route": HEALTH_ROUTE,
        "tls_min_version": "TLSv1.3" if str(settings.get("tls_min_version")) == "1.3" else "TLSv1.2",
        "route_map": route_map(settings.get("routes"), settings.get("extra_routes")),
        "limit_nofile": descriptor_need(settings["max_connections"], settings["metrics_max_connections"]),
    }


def client_key_map(keys, probe_key=""):
    """The lines of the map file HAProxy looks a client's key up in: `<SHA-256 of the key, hex> <name>`,
    never the key itself (haproxy.cfg.j2 looks up the digest of the key a client presents); the role's
    own probe key (made on the host, for its checks and smoke.yml) under PROBE_NAME."""
    entries = list(keys) + ([{"key": probe_key.strip(), "name": PROBE_NAME}] if probe_key.strip() else [])
    return "".join("%s %s\n" % (key_digest(entry["key"]), entry["name"]) for entry in entries)


def gateway_endpoint(settings, ca_file, probe_key_file):
    """The gateway as one endpoint in vllm_serve's endpoints format, for clients on the host
    (vllm_chat_load): its loopback address, the probe key and the certificate to check."""
    base_url = "https://%s" % _listen(local_address(settings["address"]), int(settings["port"]))
    return {"name": "gateway", "base_url": base_url,
            "api_key_file": probe_key_file, "ca_file": ca_file or "", "tls_verify": bool(ca_file)}


def certificate_names(names, addresses):
    """subjectAltName for a self-signed certificate: each name as DNS, each address as IP, no repeats."""
    entries = []
    for value in list(addresses) + list(names):
        if value in (None, ""):
            continue
        value = str(value)
        try:
            entry = "IP:%s" % ipaddress.ip_address(value)
        except ValueError:
            if not re.match(r"^[A-Za-z0-9*]([A-Za-z0-9.-]*[A-Za-z0-9])?$", value):
                continue
            entry = "DNS:%s" % value
        if entry not in entries:
            entries.append(entry)
    return ",".join(entries)


def file_sd_targets(hosts, existing=None):
    """Prometheus file_sd groups: one per instance on every host's metrics listener.

    hosts: [{host, address, metrics_port, hardware_class, endpoints}] where endpoints is vllm_serve's
    list for that host. existing: the groups the file holds now; those of hosts this run did not
    describe (a --limit, a host that failed earlier) are kept, so a partial run never drops them.
    """
    described = {host["host"] for host in hosts}
    groups = [group for group in existing or [] if isinstance(group, dict)
              and group.get("labels", {}).get("host") not in described]
    for host in hosts:
        for endpoint in host["endpoints"]:
            groups.append({
                "targets": [_listen(str(host["address"]), int(host["metrics_port"]))],
                "labels": {
                    "__metrics_path__": METRICS_PATH % endpoint["name"],
                    "host": host["host"],
                    "instance": "%s/%s" % (host["host"], endpoint["name"]),
                    "vllm_instance": endpoint["name"],
                    "model": endpoint.get("model", ""),
                    "hardware_class": host.get("hardware_class") or "unknown",
                },
            })
    return sorted(groups, key=lambda group: (group["labels"].get("host", ""), group["labels"].get("vllm_instance", "")))
