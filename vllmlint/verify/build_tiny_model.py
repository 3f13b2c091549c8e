"""Build the tiny model `vllmlint verify` serves: offline, random weights, about 1 MB.

Run with a Python that has torch, transformers and tokenizers (the vLLM venv has all three):

    python build_tiny_model.py OUT_DIR

Standalone on purpose (no vllmlint import): it runs inside the vLLM venv, which does not have
vllmlint installed. Qwen2 architecture, 2 layers, hidden 64, head_dim 32 (vLLM's CPU attention
backend rejects head_dim 16 at the first request, after /health already passed), a byte-level
BPE tokenizer trained on a small built-in text, and a ChatML chat template. Nothing is
downloaded. Deterministic: the same script builds the same weights.
"""
from __future__ import annotations

import json
import os
import sys

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def corpus() -> list[str]:
    words = ("the quick brown fox jumps over the lazy dog while a model serves tokens to a router "
             "that sends prefill to one engine and decode to another engine over a connector "
             "render derender generate health chat completion system user assistant hello world "
             "vllm lint verify deployment kubernetes compose docker shell python launch config")
    lines = [words]
    tokens = words.split()
    for i in range(400):           # a deterministic mix, so merges cover common pairs
        lines.append(" ".join(tokens[(i * 7 + j * 3) % len(tokens)] for j in range(12)))
    lines.append("0 1 2 3 4 5 6 7 8 9 10 100 1000 . , ; : ! ? ' \" ( ) [ ] { } - _ / \\ = + * # @")
    return lines


def build(out: str) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", bos_token=None,
                                   unk_token=None, model_max_length=1024)
    fast.chat_template = CHAT_TEMPLATE
    os.makedirs(out, exist_ok=True)
    fast.save_pretrained(out)

    vocab = len(fast)
    config = Qwen2Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=1024,
        tie_word_embeddings=True, rms_norm_eps=1e-6, rope_theta=10000.0,
        bos_token_id=fast.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.convert_tokens_to_ids("<|endoftext|>"),
        torch_dtype="float32", use_sliding_window=False,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    with open(os.path.join(out, "generation_config.json"), "w") as fh:
        json.dump({"eos_token_id": config.eos_token_id, "pad_token_id": config.pad_token_id}, fh)
    # tokenizer_config.json of some transformers releases leaves the template out
    cfg_path = os.path.join(out, "tokenizer_config.json")
    with open(cfg_path) as fh:
        tcfg = json.load(fh)
    if tcfg.get("chat_template") != CHAT_TEMPLATE:
        tcfg["chat_template"] = CHAT_TEMPLATE
        with open(cfg_path, "w") as fh:
            json.dump(tcfg, fh, indent=2)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_tiny_model.py OUT_DIR")
    build(sys.argv[1])
