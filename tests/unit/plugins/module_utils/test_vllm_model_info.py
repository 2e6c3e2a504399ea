"""What a model directory holds and what that means for serving it, on published model metadata and
published host samples.

The published models are under tests/unit/samples/models (README.md there). Checkpoints whose
published files were not reachable here (compressed-tensors W8A8/W4A8, GPTQ, AWQ, FP8) are described
by their quantization_config in the forms vLLM 0.32 tells apart
(model_executor/layers/quantization/compressed_tensors/compressed_tensors.py _get_scheme_from_parts,
and the quant_method names of its registry); safetensors files are written with the safetensors
library itself.
"""

from __future__ import annotations

import json
import re

import numpy
import pytest
from safetensors.numpy import save_file

import model_samples
import published_samples
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_info as info
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_tuning as tuning
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts

GIB = 1024 ** 3
INT8_DYNAMIC_TOKEN = {"type": "int", "num_bits": 8, "dynamic": True, "strategy": "token", "symmetric": True}


def facts(name):
    return build_host_facts(published_samples.load_sample(name))


def compressed_tensors(weights, activations=None):
    return {"quant_method": "compressed-tensors", "format": "int-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                          "input_activations": activations}}}


W8A8 = compressed_tensors({"type": "int", "num_bits": 8, "strategy": "channel", "symmetric": True, "dynamic": False},
                          INT8_DYNAMIC_TOKEN)
W4A8_GROUP = compressed_tensors({"type": "int", "num_bits": 4, "strategy": "group", "group_size": 32,
                                 "symmetric": True, "dynamic": False}, INT8_DYNAMIC_TOKEN)
W4A8_CHANNEL = compressed_tensors({"type": "int", "num_bits": 4, "strategy": "channel", "symmetric": True,
                                   "dynamic": False}, INT8_DYNAMIC_TOKEN)
W4A16 = compressed_tensors({"type": "int", "num_bits": 4, "strategy": "group", "group_size": 128, "symmetric": True})
FP8 = compressed_tensors({"type": "float", "num_bits": 8, "strategy": "tensor", "symmetric": True},
                         {"type": "float", "num_bits": 8, "dynamic": True, "strategy": "token"})


# --- the weight reader -------------------------------------------------------------------------

@pytest.mark.parametrize("name, total, dtype", [
    ("llama-3.1-8b-bf16", 16060522496, "bfloat16"),
    ("llama-3.1-8b-instruct-bnb-8bit", 9086705888, "float16"),
])
def test_weight_bytes_are_the_files_vllm_loads(tmp_path, name, total, dtype):
    directory = model_samples.make_sample_dir(name, tmp_path / name)
    (directory / "original").mkdir()
    (directory / "original" / "consolidated.00.pth").write_bytes(b"x" * 100)  # not loaded by vLLM: not counted
    (directory / "training_args.bin").write_bytes(b"x" * 100)
    summary = info.read_model_dir(str(directory), headers=False)
    assert summary["weight_bytes"] == total and summary["index_total_size"] == total
    assert summary["weight_files"] == sorted(model_samples.sample_files(name))
    assert summary["architectures"] == ["LlamaForCausalLM"] and summary["torch_dtype"] == dtype
    assert summary["weight_format"] == "safetensors"


def test_a_current_link_is_followed(tmp_path):
    model_samples.make_sample_dir("llama-3.1-8b-bf16", tmp_path / "rev1")
    (tmp_path / "current").symlink_to("rev1")
    summary = info.read_model_dir(str(tmp_path / "current"), headers=False)
    assert summary["weight_bytes"] == 16060522496 and summary["path"] == str(tmp_path / "current")


def test_a_missing_shard_is_an_incomplete_model(tmp_path):
    directory = model_samples.make_sample_dir("llama-3.1-8b-bf16", tmp_path / "m")
    (directory / "model-00003-of-00004.safetensors").unlink()
    expected = "is incomplete: model.safetensors.index.json names model-00003-of-00004.safetensors, which is missing"
    with pytest.raises(info.ModelInfoError, match=expected):
        info.read_model_dir(str(directory), headers=False)


def test_not_a_model_directory(tmp_path):
    with pytest.raises(info.ModelInfoError, match="is not a directory"):
        info.read_model_dir(str(tmp_path / "absent"))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(info.ModelInfoError, match="has no config.json"):
        info.read_model_dir(str(tmp_path))
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(info.ModelInfoError, match="holds no weights vLLM can load"):
        info.read_model_dir(str(tmp_path))


def test_bin_files_count_only_without_safetensors():
    files = {"pytorch_model-00001-of-00002.bin": 10, "pytorch_model-00002-of-00002.bin": 5, "training_args.bin": 3}
    summary = info.summarize({"architectures": ["GPT2LMHeadModel"]}, files)
    assert summary["weight_bytes"] == 15 and summary["weight_format"] == "bin"
    summary = info.summarize({}, dict(files, **{"model.safetensors": 7}))
    assert summary["weight_bytes"] == 7


def _write_model(directory, config, tensors):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    save_file(tensors, str(directory / "model.safetensors"))
    return directory


def test_safetensors_headers_split_integer_and_floating_tensors(tmp_path):
    """A W8A8 layout written by the safetensors library: int8 weights stay int8 in memory, the
    float16 embedding and scales take the serving dtype's size."""
    tensors = {"model.layers.0.mlp.down_proj.weight": numpy.zeros((1024, 512), dtype=numpy.int8),
               "model.layers.0.mlp.down_proj.weight_scale": numpy.zeros((1024, 1), dtype=numpy.float16),
               "model.embed_tokens.weight": numpy.zeros((256, 512), dtype=numpy.float16)}
    directory = _write_model(tmp_path / "w8a8", {"architectures": ["LlamaForCausalLM"], "torch_dtype": "float16",
                                                 "quantization_config": W8A8}, tensors)
    summary = info.read_model_dir(str(directory))
    floats = 1024 + 256 * 512
    assert summary["tensor_bytes"] == {"fixed": 1024 * 512, "float": floats * 2, "float_elements": floats}
    assert summary["weight_bytes"] == (directory / "model.safetensors").stat().st_size
    assert info.memory_weight_bytes(summary, "bfloat16") == 1024 * 512 + floats * 2
    assert info.memory_weight_bytes(summary, "float32") == 1024 * 512 + floats * 4
    assert summary["quantization"]["scheme"] == "w8a8-int8"


def test_an_unquantized_checkpoint_grows_when_served_wider():
    """No headers (a summary from sizes alone): the whole checkpoint scales with the dtype."""
    summary = model_samples.summary("llama-3.1-8b-bf16")
    assert summary["tensor_bytes"] is None
    assert info.memory_weight_bytes(summary, "bfloat16") == 16060522496
    assert info.memory_weight_bytes(summary, "float32") == 2 * 16060522496


def test_a_truncated_safetensors_file_is_reported(tmp_path):
    directory = tmp_path / "broken"
    directory.mkdir()
    (directory / "config.json").write_text("{}")
    (directory / "model.safetensors").write_bytes(b"\x10\x00")
    with pytest.raises(info.ModelInfoError, match="too short to be a safetensors file"):
        info.read_model_dir(str(directory))


def _safetensors_bytes(header, data=b""):
    text = json.dumps(header).encode() if isinstance(header, dict) else header
    return len(text).to_bytes(8, "little") + text + data


# Headers a hostile source (or a corrupted file) can send; the safetensors library's own rules refuse each.
HOSTILE_HEADERS = [
    (b"[1, 2]", "not a JSON object"),
    (b'{"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}, "w": {}}', "unreadable safetensors header"),
    (b"\xff\xfe", "unreadable safetensors header"),
    (b'{"w": {"dtype": "F16", "shape": [NaN], "data_offsets": [0, 4]}}', "unreadable safetensors header"),
    ({"w": {"shape": [2], "data_offsets": [0, 4]}}, "tensor \"w\" has no dtype"),
    ({"w": {"dtype": "F16", "shape": [-2], "data_offsets": [0, 4]}}, "has a shape that is not a list of sizes"),
    ({"w": {"dtype": "F16", "shape": "2", "data_offsets": [0, 4]}}, "has a shape that is not a list of sizes"),
    ({"w": {"dtype": "F16", "shape": [2], "data_offsets": [4, 0]}}, "has data_offsets that are not"),
    ({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, "4"]}}, "has data_offsets that are not"),
    ({"w": {"dtype": "F16", "shape": [2], "data_offsets": [True, 4]}}, "has data_offsets that are not"),
    ({"w": {"dtype": "F16", "shape": [2], "data_offsets": [-4, 0]}}, "has data_offsets that are not"),
    ({"w": {"dtype": "F16", "shape": [2**40], "data_offsets": [0, 4]}}, "holds 4 bytes for 1099511627776 F16"),
    ({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
      "v": {"dtype": "F32", "shape": [1 << 20], "data_offsets": [4, 4 + (4 << 20)]}},
     "names tensor bytes up to 4194308 past its header, more than the file's 4 bytes hold"),
]


@pytest.mark.parametrize("header, problem", HOSTILE_HEADERS)
def test_a_hostile_safetensors_header_is_refused(tmp_path, header, problem):
    """From a source (the start of a file, before its weights) and from a file (in staging) alike."""
    data = _safetensors_bytes(header, b"\0" * 4)
    with pytest.raises(info.ModelInfoError, match=re.escape(problem)):
        info.source_headers(["model.safetensors"], {"model.safetensors": len(data)},
                            lambda name, limit: data[:limit + 1], "tiny at r1")
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(data)
    with pytest.raises(info.ModelInfoError, match=re.escape(problem)):
        info.read_model_dir(str(tmp_path))


@pytest.mark.parametrize("length, size, problem", [
    (info.MAX_HEADER_BYTES + 1, 0, "announces a 104857601-byte header in a unknown-byte file"),
    (4096, 1000, "announces a 4096-byte header in a 1000-byte file"),
])
def test_a_header_length_that_cannot_be_is_refused_before_it_is_read(length, size, problem):
    asked = []

    def head(name, limit):
        asked.append(limit)
        return length.to_bytes(8, "little")[:limit + 1]

    with pytest.raises(info.ModelInfoError, match=re.escape(problem)):
        info.source_headers(["model.safetensors"], {"model.safetensors": size}, head, "tiny at r1")
    assert asked == [7]  # only the 8-byte length was asked for


def test_a_source_that_ends_inside_the_header_is_refused():
    data = _safetensors_bytes({"w": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}, b"\0" * 4)
    with pytest.raises(info.ModelInfoError, match="ended after 20 bytes, inside the "):
        info.source_headers(["model.safetensors"], {}, lambda name, limit: data[:20], "tiny at r1")


def test_headers_read_from_a_source_weigh_as_the_files_do(tmp_path):
    """The safetensors library's own file: what source_headers reads from its start (two reads: the length, then
    exactly the header) is what read_model_dir reads from the file."""
    tensors = {"weight": numpy.zeros((64, 32), dtype=numpy.int8), "scale": numpy.zeros((64, 1), dtype=numpy.float16)}
    directory = _write_model(tmp_path / "m", {"architectures": ["LlamaForCausalLM"]}, tensors)
    data = (directory / "model.safetensors").read_bytes()
    asked = []

    def head(name, limit):
        asked.append(limit)
        return data[:limit + 1]

    headers = info.source_headers(["model.safetensors"], {"model.safetensors": len(data)}, head, "m at r1")
    length = int.from_bytes(data[:8], "little")
    assert asked == [7, 8 + length - 1]
    assert headers["model.safetensors"] == info.read_safetensors_header(str(directory / "model.safetensors"))


# --- quantization ------------------------------------------------------------------------------

@pytest.mark.parametrize("config, scheme, arm, x86", [
    ({}, None, True, True),
    ({"quantization_config": W8A8}, "w8a8-int8", True, True),
    ({"quantization_config": W4A8_GROUP}, "w4a8-int8", True, False),
    ({"quantization_config": W4A8_CHANNEL}, "w4a8-int8", True, False),
    ({"quantization_config": W4A16}, "wna16-int", False, True),
    ({"quantization_config": FP8}, "fp8", False, False),
    ({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}}, "gptq", False, True),
    ({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}, "awq", False, True),
    ({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}, "fp8", False, False),
    ({"quantization_config": {"quant_method": "hqq"}}, "unknown", False, False),
])
def test_quantization_is_recognised_and_checked_per_architecture(config, scheme, arm, x86):
    quant = info.quantization(config)
    assert (quant or {}).get("scheme") == scheme
    assert info.quantization_support(quant, "aarch64")[0] is arm
    assert info.quantization_support(quant, "x86_64")[0] is x86


def test_published_bitsandbytes_checkpoint_is_not_served_on_arm():
    summary = model_samples.summary("llama-3.1-8b-instruct-bnb-8bit")
    assert summary["quantization"]["method"] == "bitsandbytes"
    with pytest.raises(info.ModelInfoError, match="bitsandbytes checkpoints are not served by vLLM's CPU backend on Arm"):
        info.serving_rules(summary, {"architecture": "aarch64", "cpu": {"flags": {}}})


def test_awq_on_x86_needs_avx512():
    quant = info.quantization({"quantization_config": {"quant_method": "awq", "bits": 4}})
    assert info.quantization_support(quant, "x86_64", avx512=True)[0] is True
    supported, reason = info.quantization_support(quant, "x86_64", avx512=False)
    assert not supported and "need a CPU with AVX-512" in reason
    summary = info.summarize({"quantization_config": {"quant_method": "awq"}}, {"model.safetensors": 1})
    with pytest.raises(info.ModelInfoError, match="AVX-512"):
        info.serving_rules(summary, facts("x86_64-e5-2687w-v4"))
    assert info.serving_rules(summary, facts("x86_64-spr-2s"))["dtype"] is None


def test_legacy_gptq_file_and_gguf_are_recognised():
    files = {"model.safetensors": 10}
    quant = info.summarize({}, files, legacy_quant={"bits": 4, "group_size": 128})["quantization"]
    assert quant["scheme"] == "gptq"
    summary = info.summarize({}, {"model-q4_k_m.gguf": 4000})
    assert summary["quantization"]["scheme"] == "gguf" and summary["weight_bytes"] == 4000
    assert info.quantization_support(summary["quantization"], "aarch64")[0] is False
    # Next to safetensors a GGUF file is not what vLLM loads.
    summary = info.summarize({}, {"model-q4_k_m.gguf": 4000, "model.safetensors": 10})
    assert summary["quantization"] is None and summary["weight_bytes"] == 10


def test_group_wise_w4a8_is_served_in_float32():
    summary = info.summarize({"quantization_config": W4A8_GROUP}, {"model.safetensors": 10})
    arm = facts("graviton4-c8g-16xlarge")
    assert info.serving_rules(summary, arm)["dtype"] == "float32"
    summary = info.summarize({"quantization_config": W4A8_CHANNEL}, {"model.safetensors": 10})
    assert info.serving_rules(summary, arm)["dtype"] is None


# --- the fit check before download ---------------------------------------------------------------

def test_an_8b_bf16_model_fits_a_c8g_16xlarge():
    result = info.check_fit(facts("graviton4-c8g-16xlarge"), 16060522496, model="llama")
    # 128 GiB node; 14.96 GiB weights + 1 GiB floor + 12.8 GiB headroom.
    assert result == {"checked": True, "per_rank_gib": 28.76, "node": 0, "node_share_gib": 128.0, "kv_budget_gib": 100}


def test_a_model_too_large_is_refused_with_the_numbers():
    with pytest.raises(tuning.TuningError, match=(
            r"^vllm_model_models\[0\]: llama-70b needs 144.2 GiB per rank on NUMA node 0 \(weights 130.4 GiB / TP 1 \+ "
            r"KV cache floor 1 GiB \+ headroom 12.8 GiB\), which gives each rank 128.0 GiB; choose a smaller")):
        info.check_fit(facts("graviton4-c8g-16xlarge"), 140 * 10 ** 9, model="llama-70b",
                       variable="vllm_model_models[0]")
    with pytest.raises(tuning.TuningError, match="needs 17.0 GiB per rank on NUMA node 0 .* gives each rank 8.0 GiB"):
        info.check_fit(facts("graviton2-t4g"), 16060522496)


def test_the_fit_check_follows_the_rank_layout():
    superchip = facts("grace-superchip")
    two_ranks = info.check_fit(superchip, 300 * GIB)  # TP 2: 150 GiB per rank
    assert two_ranks["per_rank_gib"] == pytest.approx(150 + 1 + 47.06, abs=0.01) and two_ranks["node"] == 1
    with pytest.raises(tuning.TuningError, match="per rank on NUMA node 1 .* / TP 1 "):
        info.check_fit(superchip, 450 * GIB, tensor_parallel_size=1, instances=2)


def test_a_host_without_node_memory_cannot_be_checked():
    assert info.check_fit(facts("graviton3"), 16060522496)["checked"] is False


# --- KV cache from the real sizes on published hosts ---------------------------------------------

def test_kv_cache_of_an_8b_bf16_model_on_a_c8g_16xlarge():
    """The issue's example: with no size the instance got VLLM_CPU_KVCACHE_SPACE=115; the weights in
    the model's files take 14.96 GiB of the 128 GiB node."""
    summary = model_samples.summary("llama-3.1-8b-bf16")
    profile, = tuning.serve_profile(facts("graviton4-c8g-16xlarge"), [{"model_summary": summary}])
    assert profile["model_weights_gib"] == 14.96 and profile["model_weights_source"] == "files"
    assert profile["kv_cache_gib"] == 100 and profile["dtype"] == "bfloat16"
    assert profile["arguments"][-2:] == ["--kv-cache-memory-bytes", str(100 * GIB)]


def test_kv_cache_on_a_host_without_bf16_counts_float32_weights():
    """Graviton2 has no bf16: the bf16 checkpoint is served in float32 and takes twice its file size."""
    summary = model_samples.summary("llama-3.1-8b-bf16")
    profile, = tuning.serve_profile(facts("graviton2-c6g-16xlarge"), [{"model_summary": summary}])
    assert profile["dtype"] == "float32" and profile["model_weights_gib"] == 29.92
    assert profile["kv_cache_gib"] == 85


def test_an_unsupported_checkpoint_is_refused_naming_the_variable():
    summary = model_samples.summary("llama-3.1-8b-instruct-bnb-8bit", "/models/llama-bnb")
    with pytest.raises(tuning.TuningError, match=(
            r"^vllm_serve_instances\[0\].model: bitsandbytes checkpoints are not served by vLLM's CPU backend on Arm "
            r".*\(got '/models/llama-bnb'\); serve an unquantized, INT8 W8A8 or INT4 W4A8 checkpoint$")):
        tuning.serve_profile(facts("graviton4-c8g-16xlarge"), [{"model_summary": summary}])


def test_group_wise_w4a8_gets_float32_unless_the_user_sets_a_dtype():
    summary = info.summarize({"quantization_config": W4A8_GROUP, "torch_dtype": "bfloat16"},
                             {"model.safetensors": 5 * GIB})
    host = facts("graviton4-c8g-16xlarge")
    profile, = tuning.serve_profile(host, [{"model_summary": summary}])
    assert profile["dtype"] == "float32" and profile["model_weights_gib"] == 5.0
    profile, = tuning.serve_profile(host, [{"model_summary": summary, "dtype": "bfloat16"}])
    assert profile["dtype"] == "bfloat16"


def test_w4a8_on_neoverse_n1_is_served_in_float32_and_bfloat16_is_refused():
    """Neoverse-N1 (Altra Q80): dotprod, no i8mm, no bf16. torch 2.13's KleidiAI path runs W4A8 there with its dotprod
    kernels in float32 (docs/tuning.md); its bf16 channel-wise path stops with "BF16 Unsupported" on such a CPU, so
    the host's dtype rule, which refuses bfloat16 there, is what keeps W4A8 from it."""
    host = facts("altra-q80-1p")
    assert not host["cpu"]["bf16"] and host["cpu"]["flags"].get("asimddp") and not host["cpu"]["flags"].get("i8mm")
    for config in (W4A8_CHANNEL, W4A8_GROUP):
        summary = info.summarize({"quantization_config": config, "torch_dtype": "bfloat16"},
                                 {"model.safetensors": 5 * GIB})
        profile, = tuning.serve_profile(host, [{"model_summary": summary}])
        assert profile["dtype"] == "float32"
        with pytest.raises(tuning.TuningError, match="bfloat16 needs a CPU with bf16"):
            tuning.serve_profile(host, [{"model_summary": summary, "dtype": "bfloat16"}])


def test_the_size_overrides_still_win():
    summary = model_samples.summary("llama-3.1-8b-bf16")
    host = facts("graviton4-c8g-16xlarge")
    profile, = tuning.serve_profile(host, [{"model_summary": summary, "model_weights_gib": 20}])
    assert profile["model_weights_gib"] == 20 and profile["model_weights_source"] == "model_weights_gib"
    profile, = tuning.serve_profile(host, [{"model_params_billion": 8}])
    assert profile["model_weights_source"] == "model_params_billion"
