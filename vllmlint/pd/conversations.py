"""Multi-turn conversations for `vllmlint replay`, and how a client builds each next turn.

The file (`vllmlint/pd/data/conversations.jsonl`, one JSON object a line) holds conversations, not
answers: a random-weight test model answers anything, so the file says how the *client* folds
the model's answer to turn N into the request for turn N+1, and replay applies that to whatever
the model said. Fields:

    {"id": "exact-01",                        unique
     "kind": "exact-continuation",            exact-continuation | stripped-reasoning |
                                              rewritten-tool-call | compaction | mixed
     "description": "...",
     "system": "...",                         optional system message (first in every turn)
     "tools": [...],                          optional OpenAI tool definitions, sent every turn
                                              (with tool_choice "none" unless sampling says)
     "sampling": {"max_tokens": 16},          optional; replay adds temperature 0 itself
     "turns": [
       {"user": "first question"},                       turn 1: no `previous`
       {"user": "next question", "previous": {"op": "echo"}},
       ...]}

`previous` says what the client sent back for the answer to the turn before:

* `{"op": "echo"}` - the assistant message verbatim: `content` as returned (and
  `reasoning_content` when the server split one off). The exact continuation: the guard may hit
  (it still misses, correctly, when the re-rendered text tokenizes to other ids than the model
  sampled - frequent with random weights; replay can restrict sampling to whole-word tokens,
  e.g. vLLM's `allowed_token_ids`, to make echo token-exact).
* `{"op": "strip_think"}` - the reasoning dropped, as Qwen3's template and most clients do:
  `reasoning_content` is not sent back, and `content` loses every `<think>...</think>` block (and
  a leading unterminated `...</think>`). When the answer holds no think block at all - a
  random-weight model never closes one - the first `reasoning_chars` characters (default: half
  the text) stand in for the reasoning and are dropped.
* `{"op": "rewrite_tool_call", "tool_call": {"name": ..., "arguments": {...}},
   "tool_result": "..."}` - an agent harness: instead of the text the model wrote, the assistant
  message carries the parsed call (`content: ""`, `tool_calls: [...]`, arguments re-serialised
  as compact JSON with sorted keys), followed by a `tool` message holding `tool_result`.
* `{"op": "compact_history", "summary": "..."}` - compaction: every earlier message but the
  system message is replaced by one user message holding `summary`; the answer to the turn
  before is then appended verbatim.

The shipped ten are sized for verify's tiny model (`--max-model-len 512`): with its tokenizer
the first prompt is ~190-215 tokens (past `kv_recompute_threshold` 64 and one 128-token CPU
block) and the longest turn, at 16 generated tokens a turn, ~390.

Against the guarded router, `expected_guard(turn)` is "hit" for echo and "miss" for the edits;
against the reference proxy's behaviour every turn after the first reuses D's blocks.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

KINDS = ("exact-continuation", "stripped-reasoning", "rewritten-tool-call", "compaction", "mixed")
OPS = ("echo", "strip_think", "rewrite_tool_call", "compact_history")
THINK_RE = re.compile(r"<think>.*?</think>\s*", re.S)


@dataclass
class Turn:
    user: str
    previous: dict[str, Any] | None = None      # how this turn carries the answer to the turn before


@dataclass
class Conversation:
    id: str
    kind: str
    turns: list[Turn]
    description: str = ""
    system: str | None = None
    tools: list[dict] | None = None
    sampling: dict[str, Any] = field(default_factory=dict)

    def first_messages(self) -> list[dict]:
        sys_msg = [{"role": "system", "content": self.system}] if self.system else []
        return sys_msg + [{"role": "user", "content": self.turns[0].user}]

    def request(self, messages: list[dict], model: str) -> dict:
        """The chat request for one turn (replay adds temperature 0, logprobs, conversation_id)."""
        body: dict[str, Any] = {"model": model, "messages": messages, **self.sampling}
        if self.tools:
            # The declarations are rendered into every prompt; the model is never asked to call
            # one (a random model cannot, and "auto" would need the deployment's tool parser:
            # vLLM answers 400 without --enable-auto-tool-choice). Calls come from the script.
            body["tools"] = self.tools
            body.setdefault("tool_choice", "none")
        return body


def default_path() -> Path:
    return Path(str(resources.files("vllmlint.pd") / "data" / "conversations.jsonl"))


def load(path: str | Path | None = None) -> list[Conversation]:
    """Read and validate a conversations file; ValueError names the line."""
    path = Path(path) if path is not None else default_path()
    out: list[Conversation] = []
    seen: set[str] = set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            conv = _conversation(json.loads(line))
        except (ValueError, TypeError, KeyError) as err:
            raise ValueError(f"{path}:{n}: {err}") from None
        if conv.id in seen:
            raise ValueError(f"{path}:{n}: duplicate id {conv.id!r}")
        seen.add(conv.id)
        out.append(conv)
    return out


def _conversation(obj: dict) -> Conversation:
    if not isinstance(obj, dict):
        raise ValueError("a line must be a JSON object")
    kind = obj["kind"]
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    turns = [Turn(t["user"], t.get("previous")) for t in obj["turns"]]
    if len(turns) < 2:
        raise ValueError("a conversation needs at least two turns")
    if turns[0].previous is not None:
        raise ValueError("the first turn has no previous answer to carry")
    for i, t in enumerate(turns[1:], 2):
        if not isinstance(t.user, str) or not t.user:
            raise ValueError(f"turn {i}: user text missing")
        op = (t.previous or {}).get("op")
        if op not in OPS:
            raise ValueError(f"turn {i}: previous.op must be one of {', '.join(OPS)}")
        if op == "rewrite_tool_call":
            call = t.previous.get("tool_call") or {}
            if not isinstance(call.get("name"), str) or not isinstance(call.get("arguments"), dict):
                raise ValueError(f"turn {i}: rewrite_tool_call needs tool_call.name and tool_call.arguments")
        if op == "compact_history" and not t.previous.get("summary"):
            raise ValueError(f"turn {i}: compact_history needs a summary")
    return Conversation(obj["id"], kind, turns, obj.get("description", ""), obj.get("system"),
                        obj.get("tools"), dict(obj.get("sampling") or {}))


def strip_think(text: str, reasoning_chars: int | None = None) -> str:
    if "</think>" in text:
        text = THINK_RE.sub("", text)
        if "</think>" in text:                  # the template opened <think> itself
            text = text.split("</think>", 1)[1].lstrip()
        return text
    cut = len(text) // 2 if reasoning_chars is None else min(len(text), reasoning_chars)
    return text[cut:]


def carry(messages: list[dict], answer: dict, previous: dict) -> list[dict]:
    """The history the client sends after folding `answer` (the assistant message the server
    returned for `messages`) in as `previous` says."""
    op = previous["op"]
    content = answer.get("content") or ""
    if op == "echo":
        msg = {"role": "assistant", "content": content}
        if answer.get("reasoning_content"):
            msg["reasoning_content"] = answer["reasoning_content"]
        if answer.get("tool_calls"):
            msg["tool_calls"] = answer["tool_calls"]
        return messages + [msg]
    if op == "strip_think":
        return messages + [{"role": "assistant", "content": strip_think(content, previous.get("reasoning_chars"))}]
    if op == "rewrite_tool_call":
        call = previous["tool_call"]
        args = json.dumps(call["arguments"], separators=(",", ":"), sort_keys=True)
        call_id = previous.get("id", "call_0")
        return messages + [
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": call["name"], "arguments": args}}]},
            {"role": "tool", "tool_call_id": call_id, "content": previous.get("tool_result", "")}]
    if op == "compact_history":
        head = [m for m in messages[:1] if m.get("role") == "system"]
        return head + [{"role": "user", "content": previous["summary"]},
                       {"role": "assistant", "content": content}]
    raise ValueError(f"unknown op {op!r}")


def next_messages(messages: list[dict], answer: dict, turn: Turn) -> list[dict]:
    """The messages of `turn` (not the first), given the previous turn's messages and answer."""
    assert turn.previous is not None
    return carry(messages, answer, turn.previous) + [{"role": "user", "content": turn.user}]


def expected_guard(turn: Turn) -> str | None:
    """What the guarded router should decide for this turn: None (first turn), hit or miss."""
    if turn.previous is None:
        return None
    return "hit" if turn.previous["op"] == "echo" else "miss"
