"""Write a tiny model directory (config, tokenizer config, one safetensors file) in pure Python.

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


def write_tiny_model(directory, seed=0, hidden=16, vocab=64):
    os.makedirs(directory, exist_ok=True)
    generator = random.Random(seed)
    tensors = {"model.embed_tokens.weight": (vocab, hidden), "lm_head.weight": (vocab, hidden),
               "model.norm.weight": (hidden,)}
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
    with open(os.path.join(directory, "model.safetensors"), "wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
              "intermediate_size": hidden * 2, "num_hidden_layers": 1, "num_attention_heads": 1,
              "vocab_size": vocab, "torch_dtype": "float32", "seed": seed}
    with open(os.path.join(directory, "config.json"), "w") as handle:
        json.dump(config, handle, indent=1)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as handle:
        json.dump({"model_max_length": 256, "eos_token": "</s>"}, handle)
    return directory
