"""The published model metadata under tests/unit/samples/models/ (see its README.md).

sample_files() gives each shard the index names a size so that the shards add up to the index's
published total_size, which is what a directory holding those weights reports to stat() (less the
few kilobytes of each shard's own header, which the index does not count). make_sample_dir() lays
such a directory out with sparse files, so reading it takes no disk space; each shard starts with a
safetensors header of one tensor over the rest of the file, in the checkpoint's dtype (an integer
one for a quantized checkpoint: the published headers' split is not part of the samples, so its
bytes are weighed as stored, as without headers).
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parent / "samples" / "models"


def model_names():
    return sorted(path.name for path in MODELS_DIR.iterdir() if (path / "config.json").is_file())


def load(name):
    """(config, index or None) of one published model."""
    directory = MODELS_DIR / name
    config = json.loads((directory / "config.json").read_text())
    index_path = directory / "model.safetensors.index.json"
    return config, (json.loads(index_path.read_text()) if index_path.is_file() else None)


def sample_files(name):
    """{file name: size} of the weight shards, their sizes adding up to the index's total_size."""
    config, index = load(name)
    shards = sorted(set(index["weight_map"].values()))
    total = index["metadata"]["total_size"]
    sizes = {shard: total // len(shards) for shard in shards}
    sizes[shards[-1]] += total - sum(sizes.values())
    return sizes


def make_sample_dir(name, directory):
    """A model directory with the published JSON files and sparse shards of sample_files() sizes."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for path in (MODELS_DIR / name).iterdir():
        if path.suffix == ".json":
            shutil.copyfile(path, directory / path.name)
    config, dummy = load(name)
    for shard, size in sample_files(name).items():
        with open(directory / shard, "wb") as handle:
            handle.write(shard_header(config, size))
            handle.truncate(size)
    return directory


SAFETENSORS_DTYPE = {"bfloat16": ("BF16", 2), "float16": ("F16", 2), "float32": ("F32", 4)}


def shard_header(config, size):
    """The 8-byte length and a safetensors header (padded to 8 bytes, as the format writes it) of one tensor over the
    rest of a size-byte shard, in the checkpoint's dtype."""
    dtype, width = ("U8", 1) if config.get("quantization_config") else SAFETENSORS_DTYPE.get(
        config.get("torch_dtype") or (config.get("text_config") or {}).get("torch_dtype"), ("BF16", 2))
    length = 128
    while True:
        data = size - 8 - length
        data -= data % width
        text = json.dumps({"weight": {"dtype": dtype, "shape": [data // width], "data_offsets": [0, data]}})
        if len(text) <= length:
            return struct.pack("<Q", length) + text.encode().ljust(length)
        length += 128


def summary(name, path=""):
    """vllm_model_info.summarize() of a published sample laid out as sample_files() describes."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_model_info import summarize
    config, index = load(name)
    files = dict(sample_files(name), **{"config.json": 1, "model.safetensors.index.json": 1})
    return summarize(config, files, index, path=path or str(MODELS_DIR / name))
