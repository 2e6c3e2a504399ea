# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each vLLM serve unit gets: validated instance settings merged with the host's tuning.

serve_units() is the single place that turns role variables plus host facts into the strings the
vllm_serve templates print (ExecStart, environment file lines, CPUAffinity). The templates add no
logic of their own, so the unit a pytest renders from a sample is the unit a host gets.
"""

from __future__ import annotations

import ipaddress
import re

from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import (
    HostFactsError,
    format_cpulist,
    parse_cpulist,
)
from ansible_collections.arm_inference.vllm.plugins.module_utils.input_message import input_message
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_tuning import (
    TuningError,
    serve_profile,
)

TUNING_KEYS = ("tensor_parallel_size", "omp_threads_bind", "kv_cache_gib", "dtype", "onednn_fpmath_mode",
               "model_weights_gib", "model_params_billion")
SERVE_KEYS = ("name", "model", "served_model_name", "host", "port", "max_model_len", "max_num_batched_tokens",
              "max_num_seqs", "block_size", "extra_args", "environment", "cpu_affinity")
INSTANCE_KEYS = SERVE_KEYS + TUNING_KEYS
# What sizes a model without reading it (vllm_tuning.model_weights_gib).
SIZE_KEYS = ("model_weights_gib", "model_params_billion")
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
# A hub id names its organisation: a bare word is far more likely a model declared in
# vllm_model_models under another name than one of the hub's few legacy unprefixed ids.
MODEL_ID_PATTERN = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PLAIN_ARGUMENT = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")
UNIT_PREFIX = "vllm-serve-"
OPTIONAL_INT_FLAGS = (("max_model_len", "--max-model-len"), ("max_num_batched_tokens", "--max-num-batched-tokens"),
                      ("max_num_seqs", "--max-num-seqs"), ("block_size", "--block-size"))
# Flags the role sets from its own variables; passing them again in extra_args would silently win or
# clash (and --api-key would put the secret on the command line).
MANAGED_FLAGS = ("--model", "--host", "--port", "--api-key", "--dtype", "--tensor-parallel-size", "-tp",
                 "--served-model-name", "--max-model-len", "--max-num-batched-tokens", "--max-num-seqs",
                 "--block-size", "--distributed-executor-backend", "--uds", "--kv-cache-memory-bytes",
                 "--allowed-media-domains")
# Variables the role computes or that would override what it computes (VLLM_CPU_KVCACHE_SPACE, when
# set, replaces --kv-cache-memory-bytes: vLLM 0.32 platforms/cpu.py), and variables that
# switch off vLLM safeguards (CVE-2026-41523: asserts skipped under -O; pickle over ZMQ; dev routes).
MANAGED_ENVIRONMENT = ("VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU",
                       "ONEDNN_DEFAULT_FPMATH_MODE", "LD_PRELOAD", "VLLM_API_KEY", "ARM_INFERENCE_API_KEY_REQUIRED",
                       "ARM_INFERENCE_API_KEY_FILE")
API_KEY_TRANSPORTS = ("credential", "file")
# vllm_serve_api_key_generate: "auto" makes vLLM a key of its own when the gateway fronts it and the operator
# gave none (api_key_plan); "never" leaves vLLM without a key unless the operator gives one.
API_KEY_GENERATE = ("auto", "never")
FORBIDDEN_ENVIRONMENT = ("PYTHONOPTIMIZE", "VLLM_ALLOW_INSECURE_SERIALIZATION", "VLLM_SERVER_DEV_MODE")


class ServeError(ValueError):
    """An instance setting is invalid: one line, `<variable>: <what is wrong> (got <value>); <what to do>`."""


def _refuse(variable, problem, got=None, fix="", show_got=True, got_text=None):
    raise ServeError(input_message(variable, problem, got, fix, show_got, got_text))


def _kind(value):
    """What a value is, for a message that must not print it (it may hold a token)."""
    return "a %s" % type(value).__name__


def _no_control_characters(value, variable, show_got=True):
    text = str(value)
    if any(ord(char) < 32 or ord(char) == 127 for char in text):
        _refuse(variable, "must not contain control characters such as newlines", text,
                "remove them (a newline would split the line it is written to)", show_got)
    return text


def _optional_positive_int(value, variable):
    if value in (None, ""):
        return None
    problem = "must be a positive integer or empty (vLLM's default)"
    fix = "give a whole number of 1 or more, or leave it empty"
    if isinstance(value, bool):
        _refuse(variable, problem, value, fix)
    try:
        number = int(str(value).strip())
    except ValueError:
        _refuse(variable, problem, value, fix)
    if number < 1:
        _refuse(variable, problem, value, fix)
    return number


def tcp_port(value, variable):
    """value as a TCP port number, or ServeError naming variable."""
    number = _optional_positive_int(value, variable)
    if number is None or number > 65535:
        _refuse(variable, "must be a TCP port between 1 and 65535", value, "pick a free port between 1 and 65535")
    return number


def local_address(address):
    """Where a client on the host reaches a server bound to address: the loopback of its family for a
    wildcard bind (0.0.0.0, ::), else the address itself."""
    address = ipaddress.ip_address(str(address))
    if address.is_unspecified:
        return "127.0.0.1" if address.version == 4 else "::1"
    return str(address)


def _bind_address(value, variable):
    text = str(value).strip()
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        _refuse(variable, "must be an IP address to listen on", value,
                "give 127.0.0.1, ::1, an interface address, 0.0.0.0 or ::")


def _declared_names(value):
    """The names of vllm_model's declared models: given as names (what the roles pass: the entries' tokens, keys and
    headers never reach this role's settings) or as vllm_model_models entries."""
    if not isinstance(value, (list, tuple)):
        return []
    names = [item.get("name") if isinstance(item, dict) else item for item in value]
    return [str(name) for name in names if name not in (None, "")]


def resolve_model(value, variable, settings):
    """What an instance's model names: a model vllm_model placed on this host ({"kind": "placed",
    "name", "path", "revision", "source"}), an absolute path ({"kind": "path", "path"}) or a hub id
    ({"kind": "hub", "id"}). A model declared in vllm_model_models but not placed, and a name that
    is none of these, are refused naming the variable."""
    text = _no_control_characters(value if value is not None else "", variable).strip()
    if not text:
        _refuse(variable, "is required", text, "name a model declared in vllm_model_models, a local model directory "
                "(absolute path) or a Hugging Face hub id such as org/name")
    placed = settings.get("placed_models") or {}
    entry = placed.get(text) if isinstance(placed, dict) else None
    if isinstance(entry, dict) and str(entry.get("path") or "").startswith("/"):
        # The revision's own directory where vllm_model publishes it: switching revisions then changes
        # the unit, which restarts the server onto the new weights (and a rollback back).
        path = str(entry.get("revision_path") or entry["path"])
        return {"kind": "placed", "name": text, "path": path, "revision": entry.get("revision"),
                "source": entry.get("source"), "pending": bool(entry.get("pending"))}
    if text in _declared_names(settings.get("declared_models")):
        _refuse(variable, "model %s is declared in vllm_model_models but not placed on this host (vllm_model_placed "
                "has %s)" % (text, ", ".join(sorted(placed)) if isinstance(placed, dict) and placed else "nothing"),
                text, "run the vllm_model role before vllm_serve (site.yml and serve.yml do)")
    if text.startswith("/"):
        return {"kind": "path", "path": text}
    if MODEL_ID_PATTERN.match(text):
        return {"kind": "hub", "id": text}
    declared = _declared_names(settings.get("declared_models"))
    _refuse(variable, "%s is neither a model declared in vllm_model_models (%s), an absolute path nor a hub id "
            "org/name" % (text, ", ".join(declared) or "none declared"), text,
            "declare the model in vllm_model_models or correct the name")


def _model_variable(item, index):
    return "vllm_serve_instances[%d].model%s" % (index, "" if "model" in item else " (or vllm_serve_model)")


def model_paths(instances, settings):
    """The local directories the instances serve (placed models and absolute paths), for the
    vllm_model_info module to read before serve_units() sizes the KV cache from them."""
    merged = dict(DEFAULT_SETTINGS)
    merged.update({key: value for key, value in (settings or {}).items() if key in DEFAULT_SETTINGS})
    paths = []
    for index, item in enumerate(_instances(instances)):
        model = resolve_model(item.get("model", merged["model"]), _model_variable(item, index), merged)
        if model.get("path") and not model.get("pending") and model["path"] not in paths:
            paths.append(model["path"])
    return paths


def _served_name(item, merged, model):
    """--served-model-name: the instance's or the role's, else for a placed model the name it is declared under
    (clients ask for it by that name, not by its store path); None or "" when vLLM names it itself."""
    served = item.get("served_model_name", merged["served_model_name"])
    if served in (None, "") and model["kind"] == "placed":
        served = model["name"]
    return served


def _endpoint_model(served, model):
    """The model name clients send, as vLLM answers to it."""
    return served if served not in (None, "") else (model.get("path") or model["id"])


def served_models(instances, settings):
    """What each instance serves, as clients name it and as it was placed: [{model, revision}], the revision
    being the placed revision, else the path or hub id (what autotune records a measurement against)."""
    merged = dict(DEFAULT_SETTINGS)
    merged.update({key: value for key, value in (settings or {}).items() if key in DEFAULT_SETTINGS})
    result = []
    for index, item in enumerate(_instances(instances)):
        model = resolve_model(item.get("model", merged["model"]), _model_variable(item, index), merged)
        result.append({"model": _endpoint_model(_served_name(item, merged, model), model),
                       "revision": model.get("revision") or model.get("path") or model["id"]})
    return result


def _sized(item):
    """Whether an instance gives its model's size, so nothing has to be read to weigh it."""
    return any(item.get(key) not in (None, "") for key in SIZE_KEYS)


def _model_summary(model, item, variable, model_info):
    """The vllm_model_info summary of a local model, None when there is none to read (a hub id)
    or the directory cannot be read but the user gave the size."""
    if model["kind"] == "hub":
        return None
    info = model_info or {}
    summary = (info.get("models") or {}).get(model["path"])
    if summary:
        return summary
    error = (info.get("errors") or {}).get(model["path"]) or "it was not read (vllm_model_info did not run on it)"
    sized = _sized(item)
    # A model not on the host yet (this run's vllm_model places it later, or check mode only said it would)
    # is weighed by the size given, if any (serve_units); vllm_model checks it fits before the download.
    if model.get("pending") or (sized and model["kind"] == "path"):
        return None
    _refuse(variable, "the model directory cannot be read: %s" % " ".join(str(error).split()), model["path"],
            "run the vllm_model role again to place it" if model["kind"] == "placed"
            else "point it at a Hugging Face model directory, or set the size with model_weights_gib")


def _extra_args(value, variable):
    if value in (None, ""):
        return []
    if not isinstance(value, (list, tuple)):
        _refuse(variable, "must be a list of strings, one argument each", value,
                "write each argument as its own list item, such as ['--enforce-eager']")
    arguments = [_no_control_characters(item, "%s[%d]" % (variable, index)) for index, item in enumerate(value)]
    for argument in arguments:
        flag = argument.split("=", 1)[0]
        if flag == "--trust-remote-code":
            _refuse(variable, "must not contain --trust-remote-code: it runs the model repository's own Python code "
                    "in the server", flag, "set vllm_serve_trust_remote_code: true to allow it for every instance "
                    "(see docs/security.md)")
        if flag in MANAGED_FLAGS:
            # Only the flag is shown: --api-key=... would carry the secret.
            _refuse(variable, "must not contain %s: the role sets it" % flag, flag,
                    "use the instance keys model, served_model_name, host, port, dtype, tensor_parallel_size, "
                    "max_model_len, max_num_batched_tokens, max_num_seqs, block_size; the API key comes from "
                    "vllm_serve_api_key")
    return arguments


def _environment(value, variable):
    if value in (None, ""):
        return {}
    if not isinstance(value, dict):
        # Only the value's type is shown: an environment given as text may carry a token.
        _refuse(variable, "must be a mapping of variable names to values", fix="write NAME: value pairs",
                got_text=_kind(value))
    result = {}
    for key, item in value.items():
        key = str(key)
        if not ENV_NAME_PATTERN.match(key):
            _refuse(variable, "has an invalid variable name", key,
                    "use letters, digits and _, not starting with a digit")
        if key in MANAGED_ENVIRONMENT:
            _refuse(variable, "must not set %s: the role computes it" % key, key,
                    "use the instance keys kv_cache_gib, omp_threads_bind, onednn_fpmath_mode, "
                    "vllm_serve_reserved_cpus_per_rank, vllm_serve_tcmalloc_path, vllm_serve_api_key instead")
        if key in FORBIDDEN_ENVIRONMENT:
            _refuse(variable, "must not set %s: it disables a vLLM safeguard" % key, key,
                    "remove it (%s are refused)" % ", ".join(FORBIDDEN_ENVIRONMENT))
        if isinstance(item, bool):
            item = "1" if item else "0"
        # An environment value may be a token: what is wrong with it is said, the value is not shown.
        result[key] = _no_control_characters("" if item is None else item, "%s.%s" % (variable, key), show_got=False)
    return result


def _cpu_affinity(facts, value, computed, variable):
    if value is None:
        return computed
    text = str(value).strip()
    if not text:
        return ""
    try:
        cpus = parse_cpulist(text)
    except HostFactsError as error:
        _refuse(variable, "cannot be read: %s" % error, text, "give a CPU list such as 0-3,8")
    usable = set(parse_cpulist(facts["cpus"]["usable"]))
    missing = sorted(set(cpus) - usable)
    if missing:
        _refuse(variable, "names CPUs this host cannot use (%s)" % format_cpulist(missing), text,
                "use only the usable CPUs: %s" % facts["cpus"]["usable"])
    return format_cpulist(cpus)


def systemd_quote(argument):
    """One ExecStart argument, quoted for systemd's command-line parser (specifiers and $ escaped)."""
    text = str(argument)
    if not PLAIN_ARGUMENT.match(text):
        text = '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')
    return text.replace("%", "%%").replace("$", "$$")


def environment_line(key, value):
    """KEY="value" for an EnvironmentFile (double quotes keep spaces; backslash escapes \\ and ")."""
    return '%s="%s"' % (key, str(value).replace("\\", "\\\\").replace('"', '\\"'))


def _instances(value):
    if value in (None, ""):
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        _refuse("vllm_serve_instances", "must be a list of mappings (one per vLLM server)", value,
                "give one mapping per server, such as [{name: main, port: 8000}]")
    for index, item in enumerate(value):
        unknown = sorted(str(key) for key in item if key not in INSTANCE_KEYS)
        if unknown:
            _refuse("vllm_serve_instances[%d]" % index, "has unknown key(s) %s" % ", ".join(unknown), unknown,
                    "use only the allowed keys: %s" % ", ".join(INSTANCE_KEYS))
    return value


# systemd's names for address groups in IPAddressAllow=, besides addresses and networks.
IP_ADDRESS_GROUPS = ("localhost", "link-local", "multicast", "any")
# vLLM lets every media URL through when its list is empty, so "none" is a name no URL can resolve
# (.invalid is reserved, RFC 6761).
NO_MEDIA_DOMAIN = "media-urls-refused.invalid"
MEDIA_DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


def network_access(value, addresses, offline):
    """The serve units' IPAddressAllow= entries: [localhost] keeps them on the host (a tensor-parallel
    instance's torch.distributed ports listen on every interface)."""
    variable = "vllm_serve_ip_address_allow"
    if not isinstance(value, list) or not value:
        _refuse(variable, "must be a non-empty list", value, "keep [localhost], or list the networks the instances "
                "must reach ([any] lifts the limit)")
    networks = []
    for index, entry in enumerate(value):
        if entry in IP_ADDRESS_GROUPS:
            networks.append(entry)
            continue
        try:
            networks.append(str(ipaddress.ip_network(str(entry), strict=False)))
        except ValueError:
            _refuse("%s[%d]" % (variable, index), "is neither a network in CIDR notation nor one of %s"
                    % ", ".join(IP_ADDRESS_GROUPS), entry, "write it like 10.0.0.0/8, or localhost")
    loopback_only = all(entry == "localhost" or (entry not in IP_ADDRESS_GROUPS and ipaddress.ip_network(
        entry).is_loopback) for entry in networks)
    if loopback_only and any(not address.is_loopback for address in addresses):
        _refuse(variable, "keeps the instances on loopback, but vllm_serve_host binds a non-loopback address", value,
                "add the clients' networks (or any), or bind 127.0.0.1 behind vllm_gateway")
    if loopback_only and not offline:
        _refuse(variable, "keeps the instances on loopback, but vllm_serve_offline is false (they would fetch from "
                "the hub)", value, "add the hub's or your mirror's networks (or any), or set vllm_serve_offline: true")
    return " ".join(networks)


def media_domains(value):
    """--allowed-media-domains: the host names a multimodal request's media URLs may name; none by default."""
    variable = "vllm_serve_allowed_media_domains"
    if not isinstance(value, list):
        _refuse(variable, "must be a list of host names", value, "write it like [images.example.com], or []")
    for index, entry in enumerate(value):
        if not isinstance(entry, str) or not MEDIA_DOMAIN.match(entry):
            _refuse("%s[%d]" % (variable, index), "must be a lower-case host name (vLLM compares a URL's host with "
                    "it exactly: no scheme, port, path or wildcard)", entry, "write it like images.example.com")
    return list(value) or [NO_MEDIA_DOMAIN]


def api_key_plan(settings):
    """Where the serve units' API key comes from, as {"source": path on the host or "" (no key), "generated": bool}.

    settings: api_key (the operator gave vllm_serve_api_key), api_key_file (vllm_serve_api_key_file or ""),
    generate (vllm_serve_api_key_generate), gateway_enabled (vllm_gateway's contract, a bool), generated_exists (a key this
    role generated is stored on the host), stored_path (where the role stores vllm_serve_api_key), generated_path.
    The operator's key wins. Without one, with generate "auto", vLLM serves with the generated key when the
    gateway is on, and keeps serving with it once it exists (turning the gateway off does not drop vLLM's key);
    "generated" true means the role makes that key when it is missing and keeps it; "remove" lists the keys the
    role stored earlier that are no longer used (never the operator's own file).
    """
    generate = settings.get("generate")
    if generate not in API_KEY_GENERATE:
        _refuse("vllm_serve_api_key_generate", "must be one of %s" % ", ".join(API_KEY_GENERATE), generate,
                "set it to %s" % " or ".join(API_KEY_GENERATE))
    if settings.get("api_key"):
        source = settings["stored_path"]
    elif settings.get("api_key_file"):
        source = settings["api_key_file"]
    elif generate == "auto" and (settings.get("gateway_enabled") or settings.get("generated_exists")):
        source = settings["generated_path"]
    else:
        source = ""
    stored = (settings["stored_path"], settings["generated_path"])
    return {"source": source, "generated": source == settings["generated_path"] and not settings.get("api_key_file"),
            "remove": [path for path in stored if path != source]}


def serve_units(facts, instances, settings):
    """Everything the unit and environment templates print, one dict per instance.

    settings: the role-wide values (keys of DEFAULT_SETTINGS); instance keys override the
    instance-level ones (model, host, port, ...). An empty instance list is valid: no unit.
    """
    merged = dict(DEFAULT_SETTINGS)
    merged.update({key: value for key, value in (settings or {}).items() if key in DEFAULT_SETTINGS})
    items = _instances(instances)
    if not items:
        return []
    models = [resolve_model(item.get("model", merged["model"]), _model_variable(item, index), merged)
              for index, item in enumerate(items)]
    tuning = []
    for index, (item, model) in enumerate(zip(items, models)):
        entry = {key: item[key] for key in TUNING_KEYS if key in item}
        entry["model_label"] = model.get("name") or model.get("path") or model.get("id")
        entry["model_summary"] = _model_summary(model, item, _model_variable(item, index), merged["model_info"])
        if model.get("pending") and not _sized(item):
            entry["model_weights_gib"] = 0
        tuning.append(entry)
    try:
        profiles = serve_profile(facts, tuning, merged["reserved_cpus_per_rank"], merged["kv_cache_min_gib"],
                                 merged["memory_headroom_gib"])
    except (TuningError, HostFactsError) as error:
        raise ServeError(str(error))
    if merged["api_key_transport"] not in API_KEY_TRANSPORTS:
        _refuse("vllm_serve_api_key_transport", "must be one of %s" % ", ".join(API_KEY_TRANSPORTS),
                merged["api_key_transport"], "set it to %s" % " or ".join(API_KEY_TRANSPORTS))
    base_port = tcp_port(merged["port"], "vllm_serve_port")
    allowed_media = media_domains(merged["allowed_media_domains"])
    units = []
    ports = {}
    names = {}
    for index, (item, profile) in enumerate(zip(items, profiles)):
        variable = "vllm_serve_instances[%d]" % index
        name = str(item.get("name") or ("main" if len(items) == 1 else "vllm%d" % index))
        if not NAME_PATTERN.match(name):
            _refuse(variable + ".name", "must be 1-40 characters of a-z, 0-9, '-' and '_', starting with a letter "
                    "or digit", name, "rename the instance")
        if name in names:
            _refuse(variable + ".name", "is already used by vllm_serve_instances[%d]" % names[name], name,
                    "give every instance its own name (it names the unit)")
        names[name] = index
        model = models[index]
        model_argument = model.get("path") or model["id"]
        port = tcp_port(item["port"], variable + ".port") if item.get("port") not in (None, "") else base_port + index
        if port in ports:
            _refuse(variable + ".port", "is already used by instance %s" % ports[port], port,
                    "give every instance its own port")
        ports[port] = name
        host_variable = variable + ".host" if "host" in item else "vllm_serve_host"
        address = _bind_address(item.get("host", merged["host"]), host_variable)
        if not address.is_loopback and not merged["api_key_configured"] and not merged["allow_unauthenticated"]:
            _refuse(host_variable, "is reachable from other machines, but no API key is configured", str(address),
                    "set vllm_serve_api_key (or vllm_serve_api_key_file), let the role generate one "
                    "(vllm_gateway_enabled: true with vllm_serve_api_key_generate: auto), bind 127.0.0.1, or set "
                    "vllm_serve_allow_unauthenticated_remote: true if a proxy in front does the authentication")
        health_host = local_address(address)
        base_url = "http://%s:%d" % ("[%s]" % health_host if ":" in health_host else health_host, port)
        arguments = ["--model", model_argument]
        served = _served_name(item, merged, model)
        if served not in (None, ""):
            arguments += ["--served-model-name", _no_control_characters(served, variable + ".served_model_name")]
        arguments += ["--host", str(address), "--port", str(port)] + profile["arguments"]
        arguments += ["--allowed-media-domains"] + allowed_media
        for key, flag in OPTIONAL_INT_FLAGS:
            source = "%s.%s" % (variable, key) if key in item else "vllm_serve_%s" % key
            number = _optional_positive_int(item.get(key, merged[key]), source)
            if number is not None:
                arguments += [flag, str(number)]
        if merged["trust_remote_code"]:
            arguments.append("--trust-remote-code")
        arguments += _extra_args(merged["extra_args"], "vllm_serve_extra_args")
        arguments += _extra_args(item.get("extra_args"), variable + ".extra_args")

        state_dir = "%s/%s" % (merged["state_root"], name)
        cache_dir = "%s/%s" % (merged["cache_root"], name)
        environment = dict(profile["environment"])
        environment.update({
            "HOME": state_dir,
            "XDG_CACHE_HOME": cache_dir,
            "HF_HOME": cache_dir + "/huggingface",
            "VLLM_CACHE_ROOT": cache_dir + "/vllm",
            "TORCHINDUCTOR_CACHE_DIR": cache_dir + "/torchinductor",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            # A media URL's redirect could lead anywhere, past --allowed-media-domains.
            "VLLM_MEDIA_URL_ALLOW_REDIRECTS": "0",
        })
        # A placed model is verified on disk: serving it never needs the hub.
        if merged["offline"] or model["kind"] == "placed":
            environment.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
        if merged["api_key_configured"]:
            # The launcher refuses to start without the key instead of serving unauthenticated.
            environment["ARM_INFERENCE_API_KEY_REQUIRED"] = "1"
            if merged["api_key_transport"] == "file":
                environment["ARM_INFERENCE_API_KEY_FILE"] = merged["api_key_file"]
        if merged["tcmalloc_path"]:
            environment["LD_PRELOAD"] = _no_control_characters(merged["tcmalloc_path"], "vllm_serve_tcmalloc_path")
        environment.update(_environment(merged["environment"], "vllm_serve_environment"))
        environment.update(_environment(item.get("environment"), variable + ".environment"))

        command = [merged["venv_path"] + "/bin/python", "-I", merged["launcher_path"]] + arguments
        units.append({
            "name": name,
            "unit": "%s%s.service" % (UNIT_PREFIX, name),
            "model": model_argument,
            "model_source": model,
            "host": str(address),
            "port": port,
            "health_url": "%s/health" % base_url,
            # What smoke tests and benchmarks need to reach the instance (vllm_serve's endpoints file).
            "endpoint": {"name": name, "base_url": base_url,
                         "model": _endpoint_model(served, model),
                         "api_key_file": merged["api_key_file"] if merged["api_key_configured"] else ""},
            "state_dir": state_dir,
            "cache_dir": cache_dir,
            "cpu_affinity": _cpu_affinity(facts, item.get("cpu_affinity"), profile["instance_cpus"],
                                          variable + ".cpu_affinity"),
            "environment": dict(sorted(environment.items())),
            "environment_lines": [environment_line(key, value) for key, value in sorted(environment.items())],
            "arguments": arguments,
            "exec_start": " ".join(systemd_quote(part) for part in command),
            "profile": profile,
        })
    allow = network_access(merged["ip_address_allow"], [ipaddress.ip_address(unit["host"]) for unit in units],
                           merged["offline"] or all(unit["model_source"]["kind"] == "placed" for unit in units))
    for unit in units:
        unit["ip_address_allow"] = allow
        if allow == "localhost":
            # The ranks of a tensor-parallel instance would meet on the host's outward address, which the
            # unit may not use: they meet on loopback (the operator's own environment still wins).
            for key, value in (("VLLM_HOST_IP", "127.0.0.1"), ("GLOO_SOCKET_IFNAME", "lo")):
                unit["environment"].setdefault(key, value)
            unit["environment"] = dict(sorted(unit["environment"].items()))
            unit["environment_lines"] = [environment_line(key, value) for key, value in unit["environment"].items()]
    return units


# An instance's environment may hold the operator's tokens (vllm_serve_environment, an instance's environment).
# The units the role keeps as a fact and loops over (Ansible prints both at -v, a loop item whatever its label)
# carry the variables' names only; the lines go to the environment file's rendering alone, which shows nothing.
SECRET_UNIT_KEYS = ("environment", "environment_lines")


def public_units(units):
    """serve_units() without the environment's values: each unit's `environment_names` instead."""
    return [dict({key: value for key, value in unit.items() if key not in SECRET_UNIT_KEYS},
                 environment_names=sorted(unit["environment"])) for unit in units]


def environment_files(units):
    """{instance name: the environment file's lines} of serve_units()."""
    return {unit["name"]: unit["environment_lines"] for unit in units}


# The settings that are a vllm_serve role variable as the inventory gives it ({variable: setting}); the
# others (venv, launcher, key file, models, tcmalloc path) are computed by the role, by the preflight
# (input_rules.serve_settings) or by autotune from their own facts. vars/main.yml renders the same map for
# the role (tests/unit/plugins/module_utils/test_vllm_serve.py holds them together).
VARIABLE_SETTINGS = dict(
    [("vllm_serve_%s" % key, key) for key in (
        "model", "served_model_name", "host", "port", "max_model_len", "max_num_batched_tokens", "max_num_seqs",
        "block_size", "extra_args", "environment", "ip_address_allow", "allowed_media_domains",
        "reserved_cpus_per_rank", "kv_cache_min_gib", "memory_headroom_gib", "offline", "trust_remote_code",
        "api_key_transport")]
    + [("vllm_serve_allow_unauthenticated_remote", "allow_unauthenticated")])


def variable_settings(variables, **computed):
    """The vllm_serve variables present in `variables` as serve_units() settings, with the computed ones."""
    settings = {setting: variables[name] for name, setting in VARIABLE_SETTINGS.items() if name in variables}
    settings.update(computed)
    return settings


DEFAULT_SETTINGS = {
    "model": "",
    "served_model_name": "",
    "host": "127.0.0.1",
    "port": 8000,
    "max_model_len": None,
    "max_num_batched_tokens": None,
    "max_num_seqs": None,
    "block_size": None,
    "extra_args": [],
    "environment": {},
    "ip_address_allow": ["localhost"],
    "allowed_media_domains": [],
    "reserved_cpus_per_rank": None,
    "kv_cache_min_gib": 1,
    "memory_headroom_gib": None,
    "venv_path": "/opt/vllm/current/venv",
    "launcher_path": "/usr/local/libexec/arm-inference/vllm-serve-launch",
    "state_root": "/var/lib/vllm-serve",
    "cache_root": "/var/cache/vllm-serve",
    "tcmalloc_path": "",
    "offline": True,
    "trust_remote_code": False,
    "api_key_configured": False,
    "api_key_transport": "credential",
    "api_key_file": "",
    "allow_unauthenticated": False,
    # vllm_model's contract: vllm_model_models (declared names) and the host's vllm_model_placed
    # ({name: {path, revision, source}}); model_info is the vllm_model_info module's result.
    "declared_models": [],
    "placed_models": {},
    "model_info": {},
}
