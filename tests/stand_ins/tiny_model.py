"""Write a tiny model directory (config, tokenizer config, one safetensors file, or shards and their index) in pure
Python.

tests/engine/make_tiny_model.py makes a servable model but needs torch and transformers, which the
test toolchain does not carry; the model-placement tests need only real files of the right formats:
a safetensors file (8-byte header length, JSON header, raw tensors) and JSON configs. `seed` changes
the weights, so each test revision has its own checksums.
"""

from __future__ import annotations

import json
import os
import random
import struct


def _write_safetensors(path, generator, tensors):
    header, blobs, offset = {}, [], 0
    for name, shape in tensors.items():
        count = 1
        for dimension in shape:
            count *= dimension
        blob = struct.pack("<%df" % count, *(generator.uniform(-1, 1) for index in range(count)))
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt"}
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))


def write_tiny_model(directory, seed=0, hidden=16, vocab=64, shards=1):
    """shards > 1: the tensors spread over model-0000i-of-0000n.safetensors with a model.safetensors.index.json
    whose weight_map names them, as a sharded hub checkpoint is laid out."""
    os.makedirs(directory, exist_ok=True)
    generator = random.Random(seed)
    tensors = {"model.embed_tokens.weight": (vocab, hidden), "lm_head.weight": (vocab, hidden),
               "model.norm.weight": (hidden,)}
    if shards == 1:
        _write_safetensors(os.path.join(directory, "model.safetensors"), generator, tensors)
    else:
        names, weight_map = sorted(tensors), {}
        for number in range(shards):
            shard = "model-%05d-of-%05d.safetensors" % (number + 1, shards)
            part = dict((name, tensors[name]) for name in names[number::shards])
            _write_safetensors(os.path.join(directory, shard), generator, part)
            weight_map.update((name, shard) for name in part)
        with open(os.path.join(directory, "model.safetensors.index.json"), "w") as handle:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, handle, indent=1)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
              "intermediate_size": hidden * 2, "num_hidden_layers": 1, "num_attention_heads": 1,
              "vocab_size": vocab, "torch_dtype": "float32", "seed": seed}
    with open(os.path.join(directory, "config.json"), "w") as handle:
        json.dump(config, handle, indent=1)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as handle:
        json.dump({"model_max_length": 256, "eos_token": "</s>"}, handle)
    return directory
