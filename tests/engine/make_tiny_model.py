"""Write a tiny random Llama model with a tokenizer and chat template, for the real-engine test.

No model hub is reachable from our test machines, so the x86_64 engine scenario makes its model
locally: 2 layers, hidden size 256, head size 64 (vLLM's CPU attention rejects 16), a byte-level
BPE tokenizer trained on a few sentences. The output is nonsense text, which is all a serving test
needs. SIZE small makes the same with 12 layers and hidden size 768 (about 85M parameters, 340 MB in
float32), for `make autotune-demo AUTOTUNE_DEMO_MODEL=small` outside CI.
Usage: python make_tiny_model.py OUTPUT_DIR [tiny|small]
"""

import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
TEXT = [
    "Arm Neoverse servers run vLLM on their CPU cores.",
    "Graviton, Altra and Grace hosts serve language models over an OpenAI compatible API.",
    "The quick brown fox jumps over the lazy dog while tokens stream back to the client.",
    "Each NUMA node gets its own OpenMP threads and KV cache.",
]


# Layers, hidden size, MLP size and heads (head size 64 in both).
SIZES = {"tiny": (2, 256, 512, 4), "small": (12, 768, 2048, 12)}


def main(output, size="tiny"):
    layers, hidden, intermediate, heads = SIZES[size]
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(TEXT * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(vocab_size=len(fast), hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=512,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                         pad_token_id=fast.pad_token_id, torch_dtype="float32")
    LlamaForCausalLM(config).save_pretrained(output, safe_serialization=True)
    fast.save_pretrained(output)
    print("wrote %s (vocabulary %d)" % (output, len(fast)))


if __name__ == "__main__":
    main(*sys.argv[1:3])
