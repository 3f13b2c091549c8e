"""The replay conversations file and the client edit ops, and the ten conversations driven
through `vllmlint router` (fake engines, in-process): the guard hits exactly on the echoed turns.

The real-stack run - P/D engines with bidirectional_kv_xfer, outputs compared with the mode off -
is `vllmlint replay`'s job (verify's machinery); here only the router's decisions are checked.
"""
from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from guard_sequences import encode, render
from test_router import FakeEngine
from vllmlint.pd import conversations as cv
import httpkit
from vllmlint.pd.router import Router


def test_the_shipped_file_has_ten_conversations_of_every_kind():
    convs = cv.load()
    assert len(convs) == 10
    kinds = Counter(c.kind for c in convs)
    for kind in ("exact-continuation", "stripped-reasoning", "rewritten-tool-call", "compaction"):
        assert kinds[kind] >= 2, kind
    ops = Counter(t.previous["op"] for c in convs for t in c.turns[1:])
    assert set(ops) == set(cv.OPS)
    for c in convs:
        assert 2 <= len(c.turns) <= 5 and c.sampling.get("max_tokens", 0) <= 32   # short: a tiny model finishes fast


def test_sized_for_the_tiny_model():
    """Measured with verify's tiny model (its byte-level tokenizer and template): the first
    prompt is 186-216 tokens - past kv_recompute_threshold (64) and one 128-token CPU block - and
    the longest turn with 16 generated tokens per turn is 388, under --max-model-len 512."""
    for c in cv.load():
        assert 180 <= len(c.system or "") <= 260
        assert c.sampling == {"max_tokens": 16}
        assert len(c.turns) <= 5


def test_echo_sends_the_answer_back_verbatim():
    msgs = [{"role": "user", "content": "q1"}]
    out = cv.carry(msgs, {"content": "a1", "reasoning_content": "r"}, {"op": "echo"})
    assert out == msgs + [{"role": "assistant", "content": "a1", "reasoning_content": "r"}]


@pytest.mark.parametrize("text,expected", [
    ("<think>\nplan\n</think>\n\nIt is sunny.", "It is sunny."),
    ("plan, then\n</think>\n\nIt is sunny.", "It is sunny."),           # the template opened <think>
    ("<think>a</think>x<think>b</think>y", "xy"),
    ("abcdef", "def"),                                                  # no think block: half stands in
    ("", ""),
])
def test_strip_think(text, expected):
    assert cv.strip_think(text) == expected


def test_strip_think_drops_reasoning_content():
    out = cv.carry([], {"content": "<think>x</think>ok", "reasoning_content": "x"}, {"op": "strip_think"})
    assert out == [{"role": "assistant", "content": "ok"}]


def test_rewrite_tool_call_reserialises_the_arguments():
    prev = {"op": "rewrite_tool_call", "tool_call": {"name": "get_weather", "arguments": {"unit": "c", "city": "Paris"}},
            "tool_result": "rain"}
    out = cv.carry([], {"content": '<tool_call>{"name": "get_weather"}</tool_call>'}, prev)
    assert out[0]["content"] == ""       # not null: simple chat templates concatenate it
    assert out[0]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city":"Paris","unit":"c"}'}
    assert out[1] == {"role": "tool", "tool_call_id": "call_0", "content": "rain"}


def test_compact_history_keeps_the_system_message_and_the_last_answer():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]
    out = cv.carry(msgs, {"content": "a2"}, {"op": "compact_history", "summary": "sum"})
    assert out == [{"role": "system", "content": "s"}, {"role": "user", "content": "sum"},
                   {"role": "assistant", "content": "a2"}]


@pytest.mark.parametrize("line,error", [
    ('{"id": "x", "kind": "other", "turns": []}', "kind 'other'"),
    ('{"id": "x", "kind": "mixed", "turns": [{"user": "a"}]}', "at least two turns"),
    ('{"id": "x", "kind": "mixed", "turns": [{"user": "a", "previous": {"op": "echo"}}, {"user": "b", "previous": {"op": "echo"}}]}', "first turn"),
    ('{"id": "x", "kind": "mixed", "turns": [{"user": "a"}, {"user": "b", "previous": {"op": "paraphrase"}}]}', "previous.op"),
    ('{"id": "x", "kind": "mixed", "turns": [{"user": "a"}, {"user": "b", "previous": {"op": "compact_history"}}]}', "summary"),
    ('{"id": "x", "kind": "mixed", "turns": [{"user": "a"}, {"user": "b", "previous": {"op": "rewrite_tool_call", "tool_call": {"name": "f"}}}]}', "arguments"),
])
def test_invalid_files_name_the_line(tmp_path, line, error):
    path = tmp_path / "c.jsonl"
    path.write_text('\n' + line + '\n')
    with pytest.raises(ValueError, match=f"c.jsonl:2: .*{error}"):
        cv.load(path)


class EchoingDecode(FakeEngine):
    """A decode engine whose answer tokenizes canonically, so an echo is token-exact."""

    def __init__(self):
        super().__init__("decode")
        self.n = 0

    async def handle(self, req):
        if req.path == "/v1/chat/completions":
            self.n += 1
            self.replies.append([f"Answer {self.n}."])
        return await super().handle(req)


@pytest.mark.parametrize("policy", ["guarded", "unguarded", "none"])
def test_the_ten_conversations_through_the_router(policy):
    async def go():
        p = await FakeEngine("prefill").start()
        d = await EchoingDecode().start()
        router = await Router([p.backend], [d.backend], policy=policy).start("127.0.0.1", 0)
        got, want = [], []
        try:
            for conv in cv.load():
                msgs = conv.first_messages()
                for i, turn in enumerate(conv.turns):
                    if i:
                        msgs = cv.next_messages(msgs, answer, turn)
                    body = conv.request(msgs, "qwen3") | {"temperature": 0, "conversation_id": conv.id}
                    r = await httpkit.post_json(f"http://127.0.0.1:{router.port}/v1/chat/completions", body, timeout=10)
                    assert r.status == 200, r.body
                    answer = r.json()["choices"][0]["message"]
                    decision = r.headers["x-vllmlint-guard"].split(";")[0]
                    got.append((conv.id, i + 1, decision))
                    expected = cv.expected_guard(turn) if policy == "guarded" else \
                        ("hit" if i and policy == "unguarded" else None)
                    want.append((conv.id, i + 1, expected or "miss"))
            assert got == want
            # the rendered prompt of a later turn really is long (system prompt + history)
            assert len(encode(render(msgs))) > 128
        finally:
            await router.close()
            await p.server.close()
            await d.server.close()
    asyncio.run(go())
