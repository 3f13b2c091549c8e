"""Token sequences shaped like a real P/D multi-turn exchange, for the guard's tests.

A Qwen3-style ChatML template (earlier turns' `<think>` dropped, tool calls as `<tool_call>` JSON)
and a greedy longest-match tokenizer over a small vocabulary stand in for the model's renderer.
D's answer is "sampled" piece by piece (each piece tokenized on its own, as a model emits
tokens), so re-rendering the same text may give other ids - the retokenisation drift real BPE
tokenizers show. What D returns is built the way NixlConnector builds it: `remote_num_tokens` =
prompt + output - 1 (the last sampled token has no KV yet), one block id per 16 tokens.
"""
from __future__ import annotations

import json
import math

SPECIAL = ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"]
WORDS = ["system", "user", "assistant", "tool", "You are a helpful assistant.", "Hello", "Hello,",
         " world", " the", " weather", " in", " Paris", " is", " sunny", " What", " about", " Rome",
         " city", "name", "arguments", "get_weather", "Summary:", " asked", "\n\n", ": ", ", "]
VOCAB = SPECIAL + WORDS + [chr(c) for c in range(32, 127)] + ["\n"]
IDS = {tok: i for i, tok in enumerate(VOCAB)}
IM_END = IDS["<|im_end|>"]
BLOCK_SIZE = 16


def encode(text: str) -> list[int]:
    """Greedy longest match: the canonical tokenization of `text`."""
    out, i = [], 0
    longest = max(len(t) for t in VOCAB)
    while i < len(text):
        for n in range(min(longest, len(text) - i), 0, -1):
            if text[i:i + n] in IDS:
                out.append(IDS[text[i:i + n]])
                i += n
                break
        else:
            raise ValueError(f"no token for {text[i]!r}")
    return out


def render(messages: list[dict], add_generation_prompt: bool = True) -> str:
    """Qwen3-like: reasoning of assistant turns before the last user message is dropped."""
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    out = []
    for i, m in enumerate(messages):
        content = m.get("content") or ""
        if m["role"] == "assistant":
            if i < last_user and "</think>" in content:
                content = content.split("</think>", 1)[1].lstrip("\n")
            for call in m.get("tool_calls") or []:
                fn = call["function"]
                args = fn["arguments"] if isinstance(fn["arguments"], str) else json.dumps(fn["arguments"])
                content += f'<tool_call>\n{{"name": "{fn["name"]}", "arguments": {args}}}\n</tool_call>'
        out.append(f"<|im_start|>{m['role']}\n{content}<|im_end|>\n")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
    return "".join(out)


def sample(pieces: list[str]) -> list[int]:
    """D's output ids: each piece as the model emitted it, then end of turn."""
    return [t for piece in pieces for t in encode(piece)] + [IM_END]


def d_params(prompt_ids: list[int], output_ids: list[int], expiry: float | None = None, **extra) -> dict:
    """kv_transfer_params as D returns them at the end of a turn (bidirectional, pull mode)."""
    k = len(prompt_ids) + len(output_ids) - 1
    params = {"do_remote_prefill": False, "do_remote_decode": True,
              "remote_block_ids": [list(range(100, 100 + math.ceil(k / BLOCK_SIZE)))],
              "remote_engine_id": "d-engine-0", "remote_request_id": "chatcmpl-1", "remote_host": "10.0.0.2",
              "remote_port": 5601, "tp_size": 1, "dcp_size": 1, "pp_size": 1, "remote_num_tokens": k,
              "transfer_mode": "pull"}
    if expiry is not None:
        params["remote_blocks_expiry_time"] = expiry
    params.update(extra)
    return params


SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
Q1 = {"role": "user", "content": "What about the weather in Paris?"}
Q2 = {"role": "user", "content": "What about Rome?"}


def turn(messages: list[dict], pieces: list[str]) -> tuple[list[int], list[int], str]:
    """Turn 1: what D saw (prompt ids), produced (output ids), and the text the client got."""
    return encode(render(messages)), sample(pieces), "".join(pieces)


def next_prompt(messages: list[dict]) -> list[int]:
    return encode(render(messages))
