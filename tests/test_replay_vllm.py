"""`vllmlint replay` on a real vLLM 0.30.0 P/D pair over NixlConnector (CPU build, nixl 1.5.1).

The issue's claim, shown on the real engines: with `bidirectional_kv_xfer` on, a client that
edits its history gets a different answer when the router reuses decode's blocks by
conversation id alone (mode b), and the same answer as the mode-off run (a) behind the guarded
router (c), whose log says why it missed. Exact continuations reuse D's blocks (guard hits) and
still answer as (a).

Two conversations, three turns each: exact-01 (verbatim history) and think-01 (turn 2 strips
the reasoning). About 4-5 minutes on 2 cores (two starts of the pair, ~35 s each; the first
request of each start ~50 s, oneDNN's first shapes; later turns 0.3-3 s). In CI (CI=true) a
missing vLLM or nixl fails rather than skips: .ci/run installs both.
"""
from __future__ import annotations

import json

import pytest

from real_vllm import ROOT, require_nixl, run_json, vllm_or_skip


@pytest.fixture(scope="module")
def report() -> dict:
    vllm = vllm_or_skip()
    require_nixl(vllm)
    code, rep, stderr = run_json(["replay", "--deployment", str(ROOT / "fixtures/verify/pd-nixl"),
                                  "--vllm", str(vllm), "--only", "exact-01", "--only", "think-01",
                                  "--format", "json", "--timeout", "600"], timeout=2400)
    print(json.dumps({k: v for k, v in rep.items() if k != "turns"}, indent=1))
    print(stderr[-6000:])                     # the per-turn progress lines, shown when a test fails
    assert rep["error"] is None, rep["error_lines"]
    rep["_exit"] = code
    return rep


def turn(rep: dict, conv: str, n: int) -> dict:
    return next(r for r in rep["turns"] if r["conversation"] == conv and r["turn"] == n)


def test_every_turn_answers_on_nixl_with_bidirectional_transfer(report):
    assert report["deployment"]["connector"] == "NixlConnector"
    assert len(report["turns"]) == 6
    for row in report["turns"]:
        for m in ("a", "b", "c"):
            assert row[m]["status"] == 200 and len(row[m]["token_ids"]) == 16, (m, row[m])


def test_edited_history_differs_unguarded_and_matches_guarded(report):
    row = turn(report, "think-01", 2)
    # (b) reused D's blocks for a history that no longer continues them: wrong, and no error
    assert row["b"]["guard"].startswith("hit")
    assert row["b_vs_a"]["same_prompt"] and not row["b_vs_a"]["match"], row["b_vs_a"]
    # (c) refused them and said why; the answer is the mode-off answer
    assert row["c"]["guard"].startswith("miss; reason=edited-history")
    assert any("reason=edited-history at token" in line for line in row["c"]["guard_lines"]), row["c"]["guard_lines"]
    assert row["c_vs_a"]["match"], row["c_vs_a"]


def test_exact_continuations_hit_and_match(report):
    for n in (2, 3):
        row = turn(report, "exact-01", n)
        assert row["c"]["guard"].startswith("hit"), row["c"]["guard"]
        assert row["c_vs_a"]["match"] and row["b_vs_a"]["match"], (row["b_vs_a"], row["c_vs_a"])
    summary = report["summary"]
    assert summary["c"]["guard_hits"] >= 2 and summary["c"]["mismatch"] == 0


def test_exit_0_because_guarded_matches_everywhere(report):
    assert report["exit_code"] == report["_exit"] == 0


def test_streamed_answers_arrive_token_by_token_through_the_router(report):
    """The router relays decode's stream as it comes: every generated token id arrives, in
    several events (streamed, not gathered into one answer), [DONE] at the end, no error event.
    Not "one event per token": vLLM's API server merges the deltas it has not sent yet into one
    event when it lags behind the engine (its output collector), which a loaded 2-core CI
    machine shows (2026-12-04: sixteen ids in fifteen events, one of three); that is vLLM's
    pacing, the same with or without a router. Nor "first and last event apart in time": the
    tiny model writes its sixteen tokens within a millisecond when the engine runs ahead of the
    reader, and all eighteen events then arrive in one read (a5bb9f6's CI, 2026-12-04: first and
    last at 0.694 s); separate events in order, ending in [DONE], are what a router that gathered
    the answer could not produce. Pacing through the router (each event relayed as decode sends
    it) is shown with a paced upstream: tests/test_router.py,
    test_a_streamed_answer_is_relayed_event_by_event_as_decode_sends_it."""
    assert len(report["streams"]) == 2
    for row in report["streams"]:
        assert row["status"] == 200 and row["done"] and row["error"] is None, row
        assert sum(row["token_events"]) == 16 and min(row["token_events"]) >= 1, row
        assert len(row["token_events"]) >= 2, row          # streamed, not one gathered answer
