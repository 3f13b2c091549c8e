"""The token-id continuation guard (vllmlint.pd.guard), on sequences shaped like a real exchange.

Each case builds turn 1 as D saw and produced it (tests/guard_sequences.py: a Qwen3-style
template, a greedy tokenizer, D's output "sampled" piece by piece, D's kv_transfer_params with
remote_num_tokens = prompt + output - 1), then the client's turn 2, rendered by the same
renderer, and checks the decision: only an exact token continuation may reuse D's blocks.
"""
from __future__ import annotations

import logging
import threading

import pytest

from guard_sequences import (IDS, IM_END, Q1, Q2, SYSTEM, d_params, encode, next_prompt, render,
                             turn)
from vllmlint.pd.guard import (DEFAULT_TTL_S, EDITED, EXPIRED, HIT, MODEL_CHANGED, NO_ENTRY, NO_NEW_TOKENS,
                            UNRENDERED, ContinuationGuard, Decision, NoReuse, NotStorable, UnguardedReuse,
                            decide, first_difference, stored_turn)

T0 = 1_800_000_000.0          # wall-clock seconds, like D's remote_blocks_expiry_time


class Clock:
    def __init__(self, now: float = T0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_guard(**kw) -> tuple[ContinuationGuard, Clock]:
    clock = Clock()
    return ContinuationGuard(clock=clock, **kw), clock


def record_turn1(guard: ContinuationGuard, messages, pieces, conv="c1", model="qwen3", **params):
    prompt, output, text = turn(messages, pieces)
    params = d_params(prompt, output, **params)
    stored = guard.record(conv, model, prompt, output, params)
    assert stored is not None
    return prompt, output, text, params


# -- the cases the issue lists ----------------------------------------------------------------

def test_exact_continuation_is_a_hit():
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    prompt, output, text, params = record_turn1(guard, m1, ["The", " weather", " in", " Paris", " is", " sunny", "."])
    new = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])
    k = params["remote_num_tokens"]
    assert new[:k] == (prompt + output)[:k]          # the premise: the template re-renders it exactly
    d = guard.check("c1", "qwen3", new)
    assert (d.hit, d.reason) == (True, HIT)
    assert d.stored_tokens == k and d.new_tokens == len(new)
    sent = d.kv_transfer_params
    assert sent["do_remote_decode"] is True and sent["do_remote_prefill"] is False
    assert sent["remote_block_ids"] == params["remote_block_ids"]
    assert sent["remote_num_tokens"] == k
    assert sent["remote_engine_id"] == "d-engine-0"


def test_stripped_reasoning_is_a_miss_at_the_first_output_token():
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    pieces = ["<think>", "\n", "Paris", " is", " sunny", "\n", "</think>", "\n\n", "It", " is", " sunny", "."]
    prompt, output, text, _ = record_turn1(guard, m1, pieces)
    assert text.startswith("<think>")
    new = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])   # the template drops the thinking
    assert "<think>" not in render(m1 + [{"role": "assistant", "content": text}, Q2])
    d = guard.check("c1", "qwen3", new)
    assert (d.hit, d.reason, d.position) == (False, EDITED, len(prompt))


def test_client_dropping_reasoning_content_is_a_miss_too():
    """The client sends back only `content`, without the reasoning the parser split off."""
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    pieces = ["<think>", "\n", "sunny", "\n", "</think>", "\n\n", "It", " is", " sunny", "."]
    prompt, output, text, _ = record_turn1(guard, m1, pieces)
    answer_only = text.split("</think>", 1)[1].lstrip("\n")
    d = guard.check("c1", "qwen3", next_prompt(m1 + [{"role": "assistant", "content": answer_only}, Q2]))
    assert (d.reason, d.position) == (EDITED, len(prompt))


def test_rewritten_tool_call_is_a_miss_inside_the_output():
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    pieces = ["<tool_call>", "\n", '{"', "name", '": "', "get_weather", '", "', "arguments", '": ',
              '{"', "city", '": "', "Paris", '"}}', "\n", "</tool_call>"]
    prompt, output, text, params = record_turn1(guard, m1, pieces)
    # the agent harness parsed the call and sends it back re-serialised (compact JSON)
    call = {"type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
    m2 = m1 + [{"role": "assistant", "content": "", "tool_calls": [call]},
               {"role": "tool", "content": "sunny"}, Q2]
    new = next_prompt(m2)
    d = guard.check("c1", "qwen3", new)
    assert d.reason == EDITED
    assert len(prompt) < d.position < params["remote_num_tokens"]
    # and the same call re-serialised exactly as the model wrote it continues: a hit
    guard2, _ = make_guard()
    record_turn1(guard2, m1, pieces)
    same = {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    m2_same = m1 + [{"role": "assistant", "content": "", "tool_calls": [same]}, {"role": "tool", "content": "sunny"}, Q2]
    assert guard2.check("c1", "qwen3", next_prompt(m2_same)).hit


def test_compaction_is_a_miss_right_after_the_system_prompt():
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1, {"role": "assistant", "content": "It is sunny."}, Q2]
    prompt, output, text, _ = record_turn1(guard, m1, ["Rome", " is", " sunny", "."])
    compacted = [SYSTEM, {"role": "user", "content": "Summary: the user asked about the weather in Paris and Rome."},
                 {"role": "assistant", "content": text}, {"role": "user", "content": "What about the city?"}]
    d = guard.check("c1", "qwen3", next_prompt(compacted))
    system_len = len(encode(render([SYSTEM], add_generation_prompt=False)))
    assert d.reason == EDITED
    assert system_len <= d.position < len(prompt)


def test_retokenisation_drift_is_a_miss():
    """D sampled "Hello" then "," - the tokenizer encodes the text "Hello," as one token."""
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    prompt, output, text, _ = record_turn1(guard, m1, ["Hello", ",", " world", "."])
    assert encode("Hello,") == [IDS["Hello,"]] and output[:2] == [IDS["Hello"], IDS[","]]
    new = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])
    assert render(m1 + [{"role": "assistant", "content": text}]).startswith(render(m1))   # same text...
    d = guard.check("c1", "qwen3", new)
    assert (d.reason, d.position) == (EDITED, len(prompt))                                 # ...other ids


def test_one_changed_token_at_position_0_is_a_miss():
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    prompt, output, text, _ = record_turn1(guard, m1, ["It", " is", " sunny", "."])
    new = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])
    new[0] = new[0] + 1
    d = guard.check("c1", "qwen3", new)
    assert (d.hit, d.reason, d.position) == (False, EDITED, 0)


def test_one_changed_token_at_the_last_stored_position_is_a_miss():
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    prompt, output, text, params = record_turn1(guard, m1, ["It", " is", " sunny", "."])
    k = params["remote_num_tokens"]
    new = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])
    new[k - 1] = IDS["!"]
    d = guard.check("c1", "qwen3", new)
    assert (d.reason, d.position, d.stored_tokens) == (EDITED, k - 1, k)


def test_a_changed_token_just_past_the_stored_ones_is_still_a_hit():
    """Position k is D's last sampled token: D never computed its KV, so it is not compared."""
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    prompt, output, text, params = record_turn1(guard, m1, ["It", " is", " sunny", "."])
    k = params["remote_num_tokens"]
    assert (prompt + output)[k] == IM_END
    new = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])
    new[k] = IDS["!"]
    assert guard.check("c1", "qwen3", new).hit


def test_expiry_by_ttl_is_a_miss():
    guard, clock = make_guard()
    m1 = [SYSTEM, Q1]
    _, _, text, _ = record_turn1(guard, m1, ["It", " is", " sunny", "."])
    new = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])
    clock.now = T0 + DEFAULT_TTL_S
    d = guard.check("c1", "qwen3", new)
    assert (d.hit, d.reason) == (False, EXPIRED)
    assert "age 450.0s" in d.log_line()


def test_just_before_the_ttl_is_still_a_hit():
    guard, clock = make_guard()
    m1 = [SYSTEM, Q1]
    _, _, text, _ = record_turn1(guard, m1, ["It", " is", " sunny", "."])
    clock.now = T0 + DEFAULT_TTL_S - 0.001
    assert guard.check("c1", "qwen3", next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])).hit


def test_default_ttl_is_below_decoder_kv_blocks_ttl():
    assert DEFAULT_TTL_S == 450.0 < 480.0


def test_expiry_by_d_deadline_is_honoured_with_a_margin():
    guard, clock = make_guard(expiry_margin_s=10.0)
    m1 = [SYSTEM, Q1]
    _, _, text, _ = record_turn1(guard, m1, ["It", " is", " sunny", "."], expiry=T0 + 60.0)
    new = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])
    assert guard.peek("c1").expires_at == T0 + 50.0
    clock.now = T0 + 50.0
    assert guard.check("c1", "qwen3", new).reason == EXPIRED


def test_a_d_deadline_later_than_the_ttl_does_not_extend_it():
    guard, clock = make_guard()
    record_turn1(guard, [SYSTEM, Q1], ["It", "."], expiry=T0 + 10_000)
    assert guard.peek("c1").expires_at == T0 + DEFAULT_TTL_S


def test_a_deadline_that_is_not_wall_clock_is_ignored():
    """vLLM 0.30 exports D's time.perf_counter() deadline (seconds since boot): not comparable
    with this host's clock, so the TTL from the store time applies."""
    guard, _ = make_guard()
    record_turn1(guard, [SYSTEM, Q1], ["It", "."], expiry=12345.6)
    assert guard.peek("c1").expires_at == T0 + DEFAULT_TTL_S


def test_model_change_is_a_miss():
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    _, _, text, _ = record_turn1(guard, m1, ["It", " is", " sunny", "."], model="qwen3")
    d = guard.check("c1", "qwen3-lora-legal", next_prompt(m1 + [{"role": "assistant", "content": text}, Q2]))
    assert (d.reason, d.hit) == (MODEL_CHANGED, False)
    assert "(stored qwen3, new qwen3-lora-legal)" in d.log_line()


# -- more misses and the store's behaviour ---------------------------------------------------

def test_unknown_conversation_is_a_miss():
    guard, _ = make_guard()
    record_turn1(guard, [SYSTEM, Q1], ["It", "."], conv="c1")
    d = guard.check("c2", "qwen3", encode("anything"))
    assert (d.reason, d.stored_tokens) == (NO_ENTRY, 0)


def test_entries_are_single_use():
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    _, _, text, _ = record_turn1(guard, m1, ["It", "."])
    new = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])
    assert guard.check("c1", "qwen3", new).hit
    assert guard.check("c1", "qwen3", new).reason == NO_ENTRY


def test_a_miss_consumes_the_entry():
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    _, _, text, _ = record_turn1(guard, m1, ["It", "."])
    good = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])
    bad = list(good)
    bad[3] += 1
    assert guard.check("c1", "qwen3", bad).reason == EDITED
    assert guard.check("c1", "qwen3", good).reason == NO_ENTRY


def test_prompt_equal_to_the_stored_ids_has_nothing_new():
    guard, _ = make_guard()
    prompt, output, _, params = record_turn1(guard, [SYSTEM, Q1], ["It", "."])
    k = params["remote_num_tokens"]
    d = guard.check("c1", "qwen3", (prompt + output)[:k])
    assert d.reason == NO_NEW_TOKENS


def test_truncated_history_is_a_miss_where_it_ends():
    guard, _ = make_guard()
    prompt, output, _, params = record_turn1(guard, [SYSTEM, Q1], ["It", " is", " sunny", "."])
    d = guard.check("c1", "qwen3", prompt[:-3])
    assert (d.reason, d.position, d.new_tokens) == (EDITED, len(prompt) - 3, len(prompt) - 3)


def test_unrendered_prompt_is_a_miss():
    guard, _ = make_guard()
    record_turn1(guard, [SYSTEM, Q1], ["It", "."])
    d = guard.check("c1", "qwen3", None)
    assert (d.hit, d.reason) == (False, UNRENDERED)
    assert len(guard) == 0


def test_a_new_turn_replaces_the_stored_one():
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    prompt1, output1, text1, _ = record_turn1(guard, m1, ["It", "."])
    m2 = m1 + [{"role": "assistant", "content": text1}, Q2]
    prompt2, output2, text2, params2 = record_turn1(guard, m2, ["Rome", " is", " sunny", "."])
    assert len(guard) == 1 and guard.peek("c1").remote_num_tokens == params2["remote_num_tokens"]
    m3 = m2 + [{"role": "assistant", "content": text2}, {"role": "user", "content": "Hello"}]
    d = guard.check("c1", "qwen3", next_prompt(m3))
    assert d.hit and d.stored_tokens == params2["remote_num_tokens"]


def test_hit_params_are_a_copy_without_the_routers_pin():
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    prompt, output, text, params = record_turn1(guard, m1, ["It", "."])
    params["remote_block_ids"][0].append(999)          # the caller's dict changes after record
    guard2, _ = make_guard()
    p2 = d_params(prompt, output, prompt_token_ids=[1, 2, 3])
    guard2.record("c1", "qwen3", prompt, output, p2)
    d = guard2.check("c1", "qwen3", next_prompt(m1 + [{"role": "assistant", "content": text}, Q2]))
    assert d.hit and "prompt_token_ids" not in d.kv_transfer_params
    assert p2["do_remote_decode"] is True and p2["do_remote_prefill"] is False   # untouched
    d.kv_transfer_params["remote_block_ids"] = None
    assert p2["remote_block_ids"] is not None


@pytest.mark.parametrize("params,prompt,output,reason", [
    (None, [1, 2], [3], "no-kv-transfer-params"),
    ({}, [1, 2], [3], "no-kv-transfer-params"),
    ({"remote_num_tokens": 2}, [1, 2], [3], "no-remote-block-ids"),
    ({"remote_block_ids": [[1]]}, [1, 2], [3], "no-remote-num-tokens"),
    ({"remote_block_ids": [[1]], "remote_num_tokens": "2"}, [1, 2], [3], "no-remote-num-tokens"),
    ({"remote_block_ids": [[1]], "remote_num_tokens": 0}, [1, 2], [3], "no-remote-num-tokens"),
    ({"remote_block_ids": [[1]], "remote_num_tokens": 2}, None, [3], "no-prompt-token-ids"),
    ({"remote_block_ids": [[1]], "remote_num_tokens": 2}, [1, 2], None, "no-output-token-ids"),
    ({"remote_block_ids": [[1]], "remote_num_tokens": 5}, [1, 2], [3], "unverifiable: remote_num_tokens 5 > 3 known ids"),
    ({"remote_block_ids": [[1]], "remote_num_tokens": 2}, [1, -2], [3], "invalid-token-ids"),
    ({"remote_block_ids": [[1]], "remote_num_tokens": 2}, [1, "2"], [3], "invalid-token-ids"),
])
def test_unverifiable_turns_are_not_stored(params, prompt, output, reason, caplog):
    guard, _ = make_guard()
    guard.record("c1", "m", [9, 9], [9], {"remote_block_ids": [[1]], "remote_num_tokens": 2})
    with caplog.at_level(logging.INFO, logger="vllmlint.guard"):
        assert guard.record("c1", "m", prompt, output, params) is None
    assert f"guard: skip-store conversation=c1 reason={reason}" in caplog.text
    assert len(guard) == 0                                # the older turn is gone too
    with pytest.raises(NotStorable):
        stored_turn("c1", "m", prompt, output, params, T0)


def test_decisions_are_logged_with_their_reason(caplog):
    guard, clock = make_guard()
    m1 = [SYSTEM, Q1]
    with caplog.at_level(logging.INFO, logger="vllmlint.guard"):
        prompt, output, text, params = record_turn1(guard, m1, ["It", " is", " sunny", "."], conv="abc")
        k = params["remote_num_tokens"]
        new = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])
        edited = list(new)
        edited[7] += 1
        guard.check("abc", "qwen3", edited[:20])
        record_turn1(guard, m1, ["It", " is", " sunny", "."], conv="abc")
        guard.check("abc", "qwen3", new)
    lines = [r.getMessage() for r in caplog.records]
    assert f"guard: store conversation=abc model=qwen3 tokens={k} (prompt {len(prompt)} + output {len(output)}) ttl=450s" in lines
    assert f"guard: miss conversation=abc reason=edited-history at token 7 (stored {k}, new 20)" in lines
    assert f"guard: hit conversation=abc model=qwen3 reuse={k} of {len(new)} tokens" in lines


def test_ttl_eviction_frees_memory():
    guard, clock = make_guard(ttl_s=100)
    for i in range(5):
        guard.record(f"c{i}", "m", [1, 2, 3], [4], {"remote_block_ids": [[1]], "remote_num_tokens": 3})
        clock.now += 10
    clock.now = T0 + 100 + 25        # c0, c1, c2 are past their TTL
    guard.record("late", "m", [1], [2], {"remote_block_ids": [[1]], "remote_num_tokens": 1})
    assert {c for c in ("c0", "c1", "c2", "c3", "c4", "late") if guard.peek(c)} == {"c3", "c4", "late"}
    assert guard.stats()["tokens"] == 3 + 3 + 1


def test_lru_cap_on_conversations():
    guard, clock = make_guard(max_conversations=3)
    for i in range(5):
        guard.record(f"c{i}", "m", [1, 2, 3], [4], {"remote_block_ids": [[1]], "remote_num_tokens": 3})
    assert len(guard) == 3 and guard.peek("c0") is None and guard.peek("c4") is not None


def test_cap_on_stored_tokens():
    guard, clock = make_guard(max_tokens=10)
    for i in range(4):
        guard.record(f"c{i}", "m", list(range(4)), [4], {"remote_block_ids": [[1]], "remote_num_tokens": 4})
    assert guard.stats()["tokens"] <= 10 and len(guard) == 2


def test_concurrent_checks_get_one_hit():
    guard, _ = make_guard()
    m1 = [SYSTEM, Q1]
    _, _, text, _ = record_turn1(guard, m1, ["It", "."])
    new = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])
    results: list[Decision] = []
    barrier = threading.Barrier(8)

    def worker():
        barrier.wait()
        results.append(guard.check("c1", "qwen3", new))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(d.hit for d in results) == 1


def test_many_conversations_from_threads_stay_consistent():
    guard, _ = make_guard(max_conversations=50)

    def worker(n):
        for i in range(200):
            conv = f"t{n}-{i % 70}"
            guard.record(conv, "m", [1, 2, 3], [4], {"remote_block_ids": [[1]], "remote_num_tokens": 3})
            guard.check(conv, "m", [1, 2, 3, 4, 5])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = guard.stats()
    assert stats["conversations"] <= 50
    assert stats["tokens"] == 3 * stats["conversations"]


# -- the pure function replay uses --------------------------------------------------------------

def test_decide_is_pure_and_needs_no_guard():
    prompt, output, text = turn([SYSTEM, Q1], ["It", "."])
    stored = stored_turn("c", "m", prompt, output, d_params(prompt, output), now=T0)
    new = next_prompt([SYSTEM, Q1, {"role": "assistant", "content": text}, Q2])
    assert decide(stored, new, T0).hit
    assert decide(stored, new, T0).hit                 # no state: same answer twice
    assert decide(stored, new, T0 + DEFAULT_TTL_S).reason == EXPIRED
    assert decide(stored, new, T0, model="other").reason == MODEL_CHANGED
    assert decide(None, new, T0).reason == NO_ENTRY
    assert decide(stored, new[:5], T0).position == 5


@pytest.mark.parametrize("at", [0, 1, 4095, 4096, 4097, 8191, 9999])
def test_first_difference_on_long_sequences(at):
    stored = list(range(10_000))
    new = stored + [1, 2, 3]
    assert first_difference(stored, new) is None
    new[at] = -1
    assert first_difference(stored, new) == at


def test_first_difference_with_ids_out_of_array_range():
    assert first_difference([1, 2, 3], [1, 2**40, 3, 4]) == 1
    assert first_difference([1, 2, 3], [1, 2]) == 2
    assert first_difference([], [1]) is None


def test_decision_header_for_http():
    d = Decision(False, EDITED, "c", position=57, stored_tokens=212, new_tokens=198)
    assert d.header() == "miss; reason=edited-history; position=57; stored=212; new=198"


# -- the reference proxy's behaviour, for replay ------------------------------------------------

def test_unguarded_reuse_hits_on_edited_history():
    """What disagg_proxy_multiturn.py does: the wrong answer this guard prevents."""
    clock = Clock()
    ref = UnguardedReuse(clock=clock)
    m1 = [SYSTEM, Q1]
    pieces = ["<think>", "\n", "sunny", "\n", "</think>", "\n\n", "It", "."]
    prompt, output, text = turn(m1, pieces)
    ref.record("c1", "qwen3", prompt, output, d_params(prompt, output))
    edited = next_prompt(m1 + [{"role": "assistant", "content": text}, Q2])
    assert ref.check("c1", "qwen3", edited).hit
    assert ref.check("c1", "qwen3", edited).reason == NO_ENTRY       # single use, like the proxy
    ref.record("c1", "qwen3", prompt, output, d_params(prompt, output))
    clock.now += 451
    assert ref.check("c1", "qwen3", edited).reason == EXPIRED


def test_no_reuse_never_hits():
    none = NoReuse()
    none.record("c", "m", [1], [2], {"remote_block_ids": [[1]], "remote_num_tokens": 1})
    assert none.check("c", "m", [1, 2, 3]).reason == NO_ENTRY


# -- the shared store (--state redis://): its value format and its failure mode ------------------------
# (with a real redis-server and two routers: tests/test_router_redis.py)

def test_a_stored_turn_survives_the_store_format_exactly():
    from guard_sequences import sample
    from vllmlint.pd.guard import stored_turn
    from vllmlint.pd.state import decode_turn, encode_turn

    prompt, output = next_prompt([SYSTEM, Q1]), sample(["It", " is", " sunny", "."])
    turn = stored_turn("c1", "qwen3", prompt, output, d_params(prompt, output), now=1000.0)
    back = decode_turn("c1", encode_turn(turn))
    assert list(back.token_ids) == list(turn.token_ids)
    assert (back.model, back.kv_transfer_params, back.stored_at, back.expires_at) == \
        (turn.model, turn.kv_transfer_params, turn.stored_at, turn.expires_at)
    with pytest.raises(ValueError):
        decode_turn("c1", b'{"v": 99}\n')


def test_a_store_that_is_down_is_a_recompute_never_a_reuse(caplog):
    import asyncio
    import socket

    from guard_sequences import sample
    from vllmlint.pd.guard import STORE_UNAVAILABLE
    from vllmlint.pd.state import StoreGuard

    pytest.importorskip("redis")
    with socket.socket() as s:                # a port nothing listens on (loopback)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    prompt, output = next_prompt([SYSTEM, Q1]), sample(["It", "."])

    async def go():
        guard = StoreGuard(f"redis://:secret@127.0.0.1:{port}/0", timeout_s=0.5)
        try:
            with caplog.at_level(logging.INFO, logger="vllmlint.guard"):
                stored = await guard.record("c1", "qwen3", prompt, output, d_params(prompt, output))
                decisions = [await guard.check("c1", "qwen3", prompt + output + [1, 2]) for _ in range(3)]
        finally:
            await guard.aclose()
        return guard, stored, decisions

    guard, stored, decisions = asyncio.run(go())
    assert stored is None
    assert all(not d.hit and d.reason == STORE_UNAVAILABLE for d in decisions)
    assert guard.store_errors["record"] == 1 and guard.store_errors["check"] == 3
    assert caplog.text.count("unavailable (ConnectionError") == 1   # the way down is logged once
    assert "secret" not in caplog.text and "***" in guard.stats()["store"]
