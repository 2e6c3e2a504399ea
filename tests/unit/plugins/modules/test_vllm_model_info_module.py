"""The vllm_model_info module on real directories: a published model's metadata with sparse shards,
and a directory that is not a model. It reads, never changes anything, in check mode too."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

import model_samples
from ansible_collections.arm_inference.vllm.plugins.modules import vllm_model_info


def run_module(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            vllm_model_info.main()
    return json.loads(capsys.readouterr().out)


def test_reads_models_and_reports_what_it_cannot(capsys, tmp_path):
    model = model_samples.make_sample_dir("llama-3.1-8b-bf16", tmp_path / "llama")
    # The sparse shards have no real safetensors header: give each the smallest valid one.
    for shard in model_samples.sample_files("llama-3.1-8b-bf16"):
        with open(model / shard, "r+b") as handle:
            handle.write(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    result = run_module(capsys, paths=[str(model), str(tmp_path / "absent"), "relative/dir"], _ansible_check_mode=True)
    assert result["changed"] is False
    summary = result["models"][str(model)]
    assert summary["weight_bytes"] == 16060522496 and summary["torch_dtype"] == "bfloat16"
    assert summary["architectures"] == ["LlamaForCausalLM"] and summary["quantization"] is None
    assert result["errors"] == {str(tmp_path / "absent"): "%s is not a directory." % (tmp_path / "absent"),
                                "relative/dir": "relative/dir is not an absolute path."}
