# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a model directory holds, as far as serving it on a CPU is concerned.

summarize() is pure: it takes config.json, model.safetensors.index.json and the sizes (and, where
read, the safetensors headers) of the top-level files, and returns the weight bytes, the
architectures, the checkpoint dtype and the quantization. read_model_dir() gathers those inputs
from a directory without reading any weight data: it stats files and reads the JSON files and the
JSON header at the start of each safetensors file.

quantization_support() says whether vLLM's CPU backend serves a quantization on an architecture,
memory_weight_bytes() how much memory the weights take at a serving dtype, and check_fit() refuses a
model that cannot fit a host's NUMA nodes, before anything is downloaded. The rules and their
sources are in docs/tuning.md ("Models").
"""

from __future__ import annotations

import json
import math
import os
import struct

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_tuning


class ModelInfoError(ValueError):
    """A model directory cannot be read or holds something vLLM cannot load."""


GIB = 1024 ** 3
CONFIG_FILE = "config.json"
INDEX_FILE = "model.safetensors.index.json"
# Older GPTQ/AWQ checkpoints keep their quantization here instead of in config.json.
LEGACY_QUANT_FILES = ("quantize_config.json", "quant_config.json")
# vLLM's default loader globs these in the model directory itself (not subdirectories), in this
# order, and takes the first pattern that matches (0.32 model_loader/default_loader.py:186-231).
WEIGHT_PATTERNS = (".safetensors", ".bin", ".pt")
# Trainer leftovers vLLM skips (weight_utils.py filter_files_not_needed_for_inference).
NOT_WEIGHTS = ("training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt")
# A safetensors header longer than this is not a header (the format puts a JSON header of a few
# MB at most before the data).
MAX_HEADER_BYTES = 100 * 1024 * 1024
# Bytes per element of safetensors dtypes; the floating ones change size with the serving dtype.
SAFETENSORS_DTYPES = {
    "F64": (8, False), "F32": (4, True), "F16": (2, True), "BF16": (2, True), "F8_E4M3": (1, False),
    "F8_E5M2": (1, False), "I64": (8, False), "I32": (4, False), "I16": (2, False), "I8": (1, False),
    "U8": (1, False), "U16": (2, False), "U32": (4, False), "U64": (8, False), "BOOL": (1, False),
}
TORCH_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}
ARCHITECTURES = ("aarch64", "x86_64")

# Which quantization schemes vLLM's CPU backend serves, per architecture. Sources: vLLM 0.32's
# vllm@v0.32.0/docs/features/quantization/README.md table (x86 CPU / Arm CPU columns) and its CPU build:
# csrc/cpu/cpu_wna16.cpp (the W4A16 kernel behind AWQ, GPTQ and compressed-tensors WNA16 on CPU)
# is compiled for PowerPC, s390x, RISC-V and x86's AVX-512 build, not for Arm and not into x86's
# AVX2 build (cmake/cpu_extension.cmake:507-540, 584-620).
SUPPORT = {
    "w8a8-int8": {"aarch64": True, "x86_64": True},
    "w4a8-int8": {"aarch64": True, "x86_64": False},
    "wna16-int": {"aarch64": False, "x86_64": True},
    "gptq": {"aarch64": False, "x86_64": True},
    "awq": {"aarch64": False, "x86_64": True},
}
SCHEME_NAMES = {
    "w8a8-int8": "INT8 W8A8 (compressed-tensors)",
    "w4a8-int8": "INT4 W4A8 (compressed-tensors, int8 dynamic activations)",
    "wna16-int": "integer weight-only W4A16/W8A16 (compressed-tensors)",
    "gptq": "GPTQ",
    "awq": "AWQ",
    "bitsandbytes": "bitsandbytes",
    "fp8": "FP8",
    "fp4": "FP4 (NVFP4/MXFP4)",
    "gguf": "GGUF",
}
NEEDS_AVX512_ON_X86 = ("wna16-int", "gptq", "awq")
METHOD_SCHEMES = {"gptq": "gptq", "gptq_marlin": "gptq", "awq": "awq", "awq_marlin": "awq",
                  "bitsandbytes": "bitsandbytes", "fp8": "fp8", "fbgemm_fp8": "fp8", "modelopt": "fp8",
                  "mxfp4": "fp4", "modelopt_fp4": "fp4", "gguf": "gguf"}


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _compressed_tensors_group(group):
    """Scheme of one compressed-tensors config group, as vLLM 0.32's
    compressed_tensors.py _get_scheme_from_parts tells them apart."""
    weights = group.get("weights") or {}
    activations = group.get("input_activations") or {}
    wtype, wbits = weights.get("type"), _int(weights.get("num_bits"))
    if wtype == "float":
        return "fp4" if wbits == 4 else "fp8"
    if wtype != "int":
        return "unknown"
    if not activations:
        return "wna16-int"
    if activations.get("type") != "int" or _int(activations.get("num_bits")) != 8:
        return "unknown"
    if wbits == 8:
        return "w8a8-int8"
    # _is_dynamic_token_w4a8_int: int4 symmetric weights (group or channel), int8 dynamic per-token activations.
    if (wbits == 4 and weights.get("symmetric", True) and weights.get("strategy") in ("group", "channel")
            and activations.get("dynamic") and activations.get("strategy") == "token"):
        return "w4a8-int8"
    return "unknown"


def quantization(config, legacy=None):
    """The checkpoint's quantization: None for an unquantized model, else a dict with method,
    scheme (a key of SCHEME_NAMES or "unknown"), name, and for compressed-tensors the groups."""
    config = config or {}
    quant = config.get("quantization_config")
    if quant is None and isinstance(config.get("text_config"), dict):
        quant = config["text_config"].get("quantization_config")
    if quant is None and legacy:
        quant = dict(legacy, quant_method=legacy.get("quant_method") or "gptq")
    if not quant:
        return None
    if not isinstance(quant, dict):
        return {"method": str(quant), "scheme": "unknown", "name": str(quant), "groups": []}
    method = str(quant.get("quant_method") or "").lower()
    if method == "compressed-tensors":
        groups = quant.get("config_groups") or {}
        schemes = sorted(set(_compressed_tensors_group(group) for group in groups.values()
                             if isinstance(group, dict))) or ["unknown"]
        details = []
        for name, group in sorted(groups.items()):
            weights = (group or {}).get("weights") or {}
            details.append({"group": name, "weight_bits": _int(weights.get("num_bits")),
                            "strategy": weights.get("strategy"), "group_size": _int(weights.get("group_size")),
                            "activation_bits": _int(((group or {}).get("input_activations") or {}).get("num_bits"))})
        scheme = schemes[0] if len(schemes) == 1 else "mixed:" + "+".join(schemes)
        return {"method": method, "scheme": scheme,
                "name": " + ".join(SCHEME_NAMES.get(s, "unknown compressed-tensors scheme") for s in schemes),
                "groups": details}
    scheme = METHOD_SCHEMES.get(method, "unknown")
    return {"method": method or "unknown", "scheme": scheme,
            "name": SCHEME_NAMES.get(scheme, "quantization method %r" % (method or "?")),
            "weight_bits": _int(quant.get("bits") or quant.get("w_bit")), "groups": []}


def quantization_support(quant, architecture, avx512=True):
    """(supported, reason) for serving a quantization() result with vLLM's CPU backend on
    architecture (aarch64 or x86_64; avx512: whether an x86_64 CPU has AVX-512F). An unquantized
    model is always supported."""
    if quant is None:
        return True, ""
    schemes = quant["scheme"][len("mixed:"):].split("+") if quant["scheme"].startswith("mixed:") else [quant["scheme"]]
    arch_name = "Arm" if architecture == "aarch64" else architecture
    for scheme in schemes:
        if not SUPPORT.get(scheme, {}).get(architecture, False):
            return False, ("%s checkpoints are not served by vLLM's CPU backend on %s (vLLM's quantization support "
                           "table: on Arm CPUs INT8 W8A8 and INT4 W4A8 only)" % (quant["name"], arch_name))
        if architecture == "x86_64" and scheme in NEEDS_AVX512_ON_X86 and not avx512:
            return False, ("%s checkpoints need a CPU with AVX-512 on x86_64 (vLLM compiles its W4A16 CPU kernel only "
                           "into its AVX-512 build)" % quant["name"])
    return True, ""


def _checkpoint_dtype(config):
    for holder in (config, config.get("text_config") or {}):
        for key in ("torch_dtype", "dtype"):
            value = holder.get(key) if isinstance(holder, dict) else None
            if isinstance(value, str) and value:
                return value.replace("torch.", "")
    return None


def safetensors_header_bytes(header):
    """{"float_elements": elements of floating tensors, "float": their bytes, "fixed": bytes of the
    others (integer, boolean, fp8)} from a header parse_safetensors_header() accepted, from each tensor's
    data_offsets."""
    totals = {"float_elements": 0, "float": 0, "fixed": 0}
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        start, end = tensor["data_offsets"]
        size, floating = SAFETENSORS_DTYPES.get(tensor["dtype"], (1, False))
        if floating:
            totals["float_elements"] += (end - start) // size
            totals["float"] += end - start
        else:
            totals["fixed"] += end - start
    return totals


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _tensor_problem(tensor):
    """Why one tensor entry of a safetensors header is not one the format allows, or None."""
    if not isinstance(tensor, dict) or not isinstance(tensor.get("dtype"), str):
        return "has no dtype"
    shape, offsets = tensor.get("shape"), tensor.get("data_offsets")
    if not (isinstance(shape, list) and all(_count(value) for value in shape)):
        return "has a shape that is not a list of sizes (got %s)" % (json.dumps(shape)[:60],)
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_count(value) for value in offsets)
            and offsets[0] <= offsets[1]):
        return "has data_offsets that are not [start, end] (got %s)" % (json.dumps(offsets)[:60],)
    known = SAFETENSORS_DTYPES.get(tensor["dtype"])
    elements = 1
    for value in shape:
        elements *= value
    if known and elements * known[0] != offsets[1] - offsets[0]:
        return "holds %d bytes for %d %s elements" % (offsets[1] - offsets[0], elements, tensor["dtype"])
    return None


def safetensors_header_length(prefix, name, size, origin):
    """The header length a safetensors file announces in its first 8 bytes (little-endian), refused when it is not
    a header this file can hold: more than MAX_HEADER_BYTES, or (size: the file's bytes, 0 when unknown) more than
    the file."""
    if len(prefix) < 8:
        raise ModelInfoError("%s: %s is too short to be a safetensors file." % (origin, name))
    (length,) = struct.unpack("<Q", prefix[:8])
    if length > MAX_HEADER_BYTES or (size and 8 + length > size):
        raise ModelInfoError("%s: %s announces a %d-byte header in a %s-byte file: not a safetensors file."
                             % (origin, name, length, size or "unknown"))
    return length


def parse_safetensors_header(data, name, size, origin):
    """A safetensors header (the JSON after the 8-byte length) from bytes a source sent or a file holds: strict
    UTF-8 JSON, an object of tensors each with a dtype, a shape of sizes and data_offsets [start, end] whose bytes
    match the shape for the dtypes known here, every tensor inside the file (size: the file's bytes, 0 when
    unknown). ModelInfoError otherwise: a header that lies about its tensors would be weighed wrongly."""
    try:
        header = json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ModelInfoError("%s: %s has an unreadable safetensors header (%s)"
                             % (origin, name, " ".join(str(error).split())[:120]))
    if not isinstance(header, dict):
        raise ModelInfoError("%s: %s has a safetensors header that is not a JSON object" % (origin, name))
    end = 0
    for tensor_name, tensor in header.items():
        if tensor_name == "__metadata__":
            continue
        problem = _tensor_problem(tensor)
        if problem:
            raise ModelInfoError("%s: %s is not a safetensors file vLLM can load: tensor %s %s"
                                 % (origin, name, json.dumps(tensor_name)[:80], problem))
        end = max(end, tensor["data_offsets"][1])
    if size and 8 + len(data) + end > size:
        raise ModelInfoError("%s: %s names tensor bytes up to %d past its header, more than the file's %d bytes hold"
                             % (origin, name, end, size - 8 - len(data)))
    return header


def weight_files(files, index=None):
    """The top-level files vLLM loads as weights, per its loader: every *.safetensors (only those the
    index names, when there is one), else *.bin, else *.pt; trainer leftovers skipped."""
    for suffix in WEIGHT_PATTERNS:
        names = sorted(name for name in files if name.endswith(suffix) and name not in NOT_WEIGHTS)
        if not names:
            continue
        if suffix == ".safetensors" and index and isinstance(index.get("weight_map"), dict):
            named = set(index["weight_map"].values())
            return suffix, sorted(named), [name for name in names if name in named]
        return suffix, names, names
    return None, [], []


def summarize(config, files, index=None, headers=None, legacy_quant=None, path=""):
    """Summary of a model directory from what read_model_dir() gathers.

    config: parsed config.json (None when missing); files: {top-level file name: size in bytes};
    index: parsed model.safetensors.index.json or None; headers: {safetensors file: parsed header}
    for the files whose header was read; legacy_quant: parsed quantize_config.json or None.
    """
    if config is None:
        raise ModelInfoError("%s has no %s: it is not a Hugging Face model directory." % (path or "the model", CONFIG_FILE))
    kind, expected, present = weight_files(files, index)
    # GGUF files count only where nothing else is there to load (vLLM prefers the patterns above).
    gguf = [] if present else sorted(name for name in files if name.endswith(".gguf"))
    quant = quantization(config, legacy_quant)
    if gguf and quant is None:
        quant = {"method": "gguf", "scheme": "gguf", "name": SCHEME_NAMES["gguf"], "groups": []}
    missing = sorted(set(expected) - set(present))
    if missing:
        raise ModelInfoError("%s is incomplete: %s names %s, which %s missing." % (
            path or "the model", INDEX_FILE, ", ".join(missing), "is" if len(missing) == 1 else "are"))
    if not present and not gguf:
        raise ModelInfoError("%s holds no weights vLLM can load (no *.safetensors, *.bin or *.pt at its top level)."
                             % (path or "the model"))
    weight_bytes = sum(files[name] for name in present) + sum(files[name] for name in gguf)
    split = None
    if headers and kind == ".safetensors" and all(name in headers for name in present):
        split = {"float_elements": 0, "float": 0, "fixed": 0}
        for name in present:
            for key, value in safetensors_header_bytes(headers[name]).items():
                split[key] += value
    index_total = None
    if index and isinstance(index.get("metadata"), dict) and _int(index["metadata"].get("total_size")) is not None:
        index_total = index["metadata"]["total_size"]
    architectures = config.get("architectures") or []
    return {
        "path": path,
        "architectures": [str(name) for name in architectures] if isinstance(architectures, list) else [str(architectures)],
        "model_type": config.get("model_type"),
        "torch_dtype": _checkpoint_dtype(config),
        "quantization": quant,
        "weight_format": (kind or ".gguf").lstrip("."),
        "weight_files": present or gguf,
        "weight_bytes": weight_bytes,
        "weight_gib": round(weight_bytes / float(GIB), 2),
        "index_total_size": index_total,
        "tensor_bytes": split,
    }


def memory_weight_bytes(summary, serve_dtype):
    """Bytes the weights take in memory when served at serve_dtype.

    vLLM loads floating-point tensors in the serving dtype and keeps integer (quantized) tensors as
    stored. With safetensors headers read, floating tensors take their element count times the
    serving element size; without them an unquantized checkpoint is scaled as a whole by serving / checkpoint dtype
    (config.json's torch_dtype) and a quantized one is taken as stored.
    """
    serve = TORCH_DTYPE_BYTES.get(serve_dtype)
    split = summary.get("tensor_bytes")
    stored = TORCH_DTYPE_BYTES.get(summary.get("torch_dtype") or "")
    if serve is None:
        return summary["weight_bytes"]
    if split:
        return split["fixed"] + split["float_elements"] * serve
    if summary.get("quantization") is None and stored:
        return int(summary["weight_bytes"] * serve / float(stored))
    return summary["weight_bytes"]


def serving_rules(summary, facts):
    """Settings vLLM's CPU backend needs for this checkpoint on the host facts describe
    (ansible_facts.arm_inference_host), or ModelInfoError when it cannot serve it.
    Returns {"dtype": preferred dtype or None, "reasons": [...]}."""
    quant = summary.get("quantization")
    flags = (facts.get("cpu") or {}).get("flags") or {}
    supported, reason = quantization_support(quant, facts.get("architecture"), bool(flags.get("avx512f")))
    if not supported:
        raise ModelInfoError(reason)
    rules = {"dtype": None, "reasons": []}
    if quant and quant["scheme"] == "w4a8-int8" and any(g.get("strategy") == "group" for g in quant["groups"]):
        # KleidiAI's dynamic 4-bit matmul takes group-wise weights with float32 activations; vLLM
        # converts bfloat16 activations to float32 and back around every such matmul
        # (0.32 kernels/linear/mixed_precision/dynamic_4bit.py:122-140).
        rules["dtype"] = "float32"
        rules["reasons"].append("group-wise INT4 W4A8 runs natively with float32 activations")
    return rules


def check_fit(facts, weight_bytes, tensor_parallel_size=None, instances=1, kv_cache_min_gib=1,
              memory_headroom_gib=None, model="the model", variable="vllm_model_models"):
    """Refuse a model that cannot fit this host, before it is downloaded.

    facts: ansible_facts.arm_inference_host (module host_facts). weight_bytes: bytes the weights
    take in memory (the checkpoint's file bytes, e.g. a hub listing's or an index's total_size;
    memory_weight_bytes() when config.json is known). tensor_parallel_size/instances: the layout
    the instances will use (default: vllm_serve's, one instance over every NUMA node with usable
    CPUs). kv_cache_min_gib and memory_headroom_gib: vllm_serve's floor and headroom.

    Each rank holds weights / TP plus the KV floor plus the headroom in its NUMA node. Returns a
    dict with the numbers (per_rank_gib, node, node_share_gib, kv_budget_gib) or raises
    vllm_tuning.TuningError: "<variable>: <model> needs X GiB per rank on NUMA node N, which gives
    each rank Y GiB (...); <what to do>". A host that reports no node memory cannot be checked:
    the result then has checked False.
    """
    weights = vllm_tuning.number(weight_bytes, "%s: weight bytes of %s" % (variable, model)) / float(GIB)
    tp = vllm_tuning.tensor_parallel_size(facts, instances, tensor_parallel_size)
    layout = vllm_tuning.rank_layout(facts, instances, tp)
    floor = vllm_tuning.positive_int(kv_cache_min_gib, "vllm_serve_kv_cache_min_gib")
    worst = None
    for node, ranks_per_node in layout:
        if not node["memory_mib"]:
            return {"checked": False, "per_rank_gib": None, "node": node["id"], "node_share_gib": None,
                    "kv_budget_gib": None}
        share = node["memory_mib"] / 1024.0 / ranks_per_node
        headroom = vllm_tuning.headroom(share, memory_headroom_gib)
        need = weights / tp + floor + headroom
        if worst is None or share - need < worst[0]:
            worst = (share - need, node["id"], share, need, headroom)
    margin, node_id, share, need, headroom = worst
    if margin < 0:
        raise vllm_tuning.TuningError(
            "%s: %s needs %.1f GiB per rank on NUMA node %d (weights %.1f GiB / TP %d + KV cache floor %d GiB + "
            "headroom %.1f GiB), which gives each rank %.1f GiB; choose a smaller or quantized model, fewer instances "
            "per host, or a host with more memory per NUMA node."
            % (variable, model, need, node_id, weights, tp, floor, headroom, share))
    return {"checked": True, "per_rank_gib": round(need, 2), "node": node_id, "node_share_gib": round(share, 2),
            "kv_budget_gib": int(math.floor(margin + floor))}


# What a revision's small files may weigh when they are read before its weights (vllm_model's fit check): a
# config.json of a few KB, an index of a few MB for the largest published checkpoints. More is not metadata.
METADATA_LIMITS = ((CONFIG_FILE, 4 * 1024 * 1024), (INDEX_FILE, 64 * 1024 * 1024)) + tuple(
    (name, 1024 * 1024) for name in LEGACY_QUANT_FILES)


def _unique_keys(pairs):
    keys = [key for key, dummy in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key %r" % sorted(key for key in keys if keys.count(key) > 1)[0])
    return dict(pairs)


def _no_constant(name):
    raise ValueError("%s is not JSON" % name)


def parse_metadata(data, name, limit, origin):
    """One small file of a model (config.json, its index, a legacy quantization file) from bytes a source sent:
    at most limit bytes of UTF-8 JSON, an object, no duplicate keys, no NaN or Infinity. ModelInfoError otherwise."""
    if len(data) > limit:
        raise ModelInfoError("%s: %s is larger than %d bytes, not model metadata" % (origin, name, limit))
    try:
        value = json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ModelInfoError("%s: %s is not valid JSON (%s)" % (origin, name, " ".join(str(error).split())[:120]))
    if not isinstance(value, dict):
        raise ModelInfoError("%s: %s is not a JSON object (got %s)" % (origin, name, type(value).__name__))
    if name == INDEX_FILE and not (isinstance(value.get("weight_map"), dict) and all(
            isinstance(shard, str) for shard in value["weight_map"].values())):
        raise ModelInfoError("%s: %s has no weight_map of tensor name to shard file" % (origin, name))
    return value


def source_headers(names, sizes, head, origin):
    """{file: parsed header} of the safetensors files names, read from a source through head(name, limit) -> at
    most limit + 1 bytes from the file's start: its 8-byte length, then exactly the length and the header it
    announces (no weight byte is asked for), each checked against the size the source announced (sizes; 0 when
    none was)."""
    headers = {}
    for name in names:
        length = safetensors_header_length(head(name, 7)[:8], name, sizes.get(name) or 0, origin)
        data = head(name, 8 + length - 1)[:8 + length]
        if len(data) < 8 + length:
            raise ModelInfoError("%s: %s ended after %d bytes, inside the %d-byte header it announces"
                                 % (origin, name, len(data), length))
        headers[name] = parse_safetensors_header(data[8:], name, sizes.get(name) or 0, origin)
    return headers


def listing_summary(sizes, read, origin, head=None, check=None):
    """summarize() of a revision a source lists but this host does not hold yet, from its file listing
    (sizes: {file name: size announced}) and its small files alone, read through read(name, limit) -> bytes
    (at most limit + 1 bytes: more is refused): config.json, model.safetensors.index.json, a legacy
    quantization file; with head (a reader of the start of a file, as read but not held to the file's checksum)
    the header of each safetensors file vLLM would load, so its tensors are weighed at their dtypes as
    read_model_dir() weighs them (check, when given, runs on the summary of the small files first: what their
    rules refuse reads no header). No weight byte is kept. Whatever the source sent is hostile until parsed here:
    sizes capped (METADATA_LIMITS), strict JSON, headers checked against the sizes announced, and a config vLLM
    could not read refused with ModelInfoError."""
    top = dict((name, size) for name, size in sizes.items() if "/" not in name)
    parsed = {}
    for name, limit in METADATA_LIMITS:
        if name not in top:
            continue
        if (top[name] or 0) > limit:
            raise ModelInfoError("%s: %s is %d bytes, more than the %d a metadata file may take"
                                 % (origin, name, top[name], limit))
        parsed[name] = parse_metadata(read(name, limit), name, limit, origin)
    legacy = next((parsed[name] for name in LEGACY_QUANT_FILES if name in parsed), None)
    try:
        summary = summarize(parsed.get(CONFIG_FILE), top, parsed.get(INDEX_FILE), None, legacy, origin)
        if check is not None:
            check(summary)
        if head is None or summary["weight_format"] != "safetensors":
            return summary
        headers = source_headers(summary["weight_files"], top, head, origin)
        return summarize(parsed.get(CONFIG_FILE), top, parsed.get(INDEX_FILE), headers, legacy, origin)
    except (TypeError, AttributeError, KeyError) as error:  # well-formed JSON of the wrong shape
        raise ModelInfoError("%s: %s is not a model configuration vLLM reads (%s: %s)"
                             % (origin, CONFIG_FILE, type(error).__name__, " ".join(str(error).split())[:120]))


def _read_json(path, limit=64 * 1024 * 1024):
    if not os.path.isfile(path):
        return None
    if os.path.getsize(path) > limit:
        raise ModelInfoError("%s is larger than %d MiB: not a model metadata file." % (path, limit // (1024 * 1024)))
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as error:
        raise ModelInfoError("%s cannot be read as JSON: %s" % (path, error))


def read_safetensors_header(path):
    """The JSON header at the start of a safetensors file (8-byte little-endian length, then JSON),
    checked as parse_safetensors_header() checks a source's; no tensor data is read."""
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        length = safetensors_header_length(handle.read(8), os.path.basename(path), size, os.path.dirname(path))
        return parse_safetensors_header(handle.read(length), os.path.basename(path), size, os.path.dirname(path))


def read_model_dir(path, headers=True):
    """summarize() of a directory on this machine: stats its top-level files (following links, as
    a hub snapshot or a `current` link needs), reads config.json, the index and (headers=True) the
    safetensors headers."""
    if not os.path.isdir(path):
        raise ModelInfoError("%s is not a directory." % path)
    real = os.path.realpath(path)
    files = {}
    for name in os.listdir(real):
        full = os.path.join(real, name)
        if os.path.isfile(full):
            files[name] = os.path.getsize(full)
    config = _read_json(os.path.join(real, CONFIG_FILE))
    index = _read_json(os.path.join(real, INDEX_FILE))
    legacy = None
    for name in LEGACY_QUANT_FILES:
        legacy = legacy or _read_json(os.path.join(real, name))
    kind, dummy, present = weight_files(files, index)
    parsed = {}
    if kind == ".safetensors" and headers and config is not None:
        for name in present:
            parsed[name] = read_safetensors_header(os.path.join(real, name))
    return summarize(config, files, index, parsed, legacy, path)
