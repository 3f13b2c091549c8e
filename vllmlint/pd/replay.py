"""`vllmlint replay`: multi-turn conversations against a real P/D deployment, three ways.

  (a) baseline   - bidirectional_kv_xfer off, plain P -> D routing (router policy "none");
  (b) unguarded  - bidirectional on, D's kv_transfer_params reused by conversation id alone,
                   as vLLM's reference multi-turn proxy does (router policy "unguarded");
  (c) guarded    - bidirectional on, reuse only for exact token-id continuations ("guarded").

Every turn is sent at temperature 0 with logprobs and `return_token_ids` through the in-process
`vllmlint.router.Router` on a free 127.0.0.1 port. Each mode carries its own answers forward
(what a client does). A turn of (b) or (c) matches (a) when its generated token ids are equal and
the largest |logprob difference| is <= the tolerance (1e-3): a tiny random model may repeat
tokens, but its logprobs move when the context it attends to differs.

Exit 0 when every turn of (c) matches (a); 1 otherwise; 2 when the stack could not start.
Mismatches under (b) are the evidence the guard exists for, not a failure.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import aiohttp

from .conversations import Conversation, expected_guard, load, next_messages

MODES = ("a", "b", "c")
MODE_NAMES = {"a": "baseline (bidirectional off)", "b": "unguarded (bidirectional on)",
              "c": "guarded (bidirectional on)"}
POLICY = {"a": "none", "b": "unguarded", "c": "guarded"}
TOLERANCE = 1e-3
EXIT_OK, EXIT_MISMATCH, EXIT_START = 0, 1, 2


# -- one turn's answer, and comparisons ------------------------------------------------------------
@dataclass
class TurnResult:
    conversation: str
    turn: int                                 # 1-based
    mode: str
    status: int = 0
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    text: str = ""
    prompt_tokens: int | None = None
    prompt_hash: str = ""                     # of the messages sent (same history as baseline?)
    guard: str | None = None                  # X-Vllmlint-Guard
    expected_guard: str | None = None
    guard_lines: list[str] = field(default_factory=list)
    seconds: float = 0.0
    prefill_ms: float | None = None
    decode_ms: float | None = None
    kv: dict = field(default_factory=dict)    # per server: prefix/external hits, nixl transfers
    kv_log_lines: list[str] = field(default_factory=list)
    retried_without_reuse: bool = False       # prefill failed with D's blocks attached
    error: str | None = None

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("conversation", "turn", "mode", "status", "token_ids", "logprobs",
                                           "text", "prompt_tokens", "prompt_hash", "guard", "expected_guard",
                                           "guard_lines", "prefill_ms", "decode_ms", "kv", "kv_log_lines",
                                           "retried_without_reuse", "error")}
        d["seconds"] = round(self.seconds, 3)
        return d


@dataclass
class Comparison:
    match: bool
    tokens_equal: bool
    max_logprob_diff: float | None
    first_token_diff: int | None
    same_prompt: bool
    why: str = ""

    def as_dict(self) -> dict:
        return {"match": self.match, "tokens_equal": self.tokens_equal,
                "max_logprob_diff": self.max_logprob_diff, "first_token_diff": self.first_token_diff,
                "same_prompt": self.same_prompt, "why": self.why}


def compare(base: TurnResult, other: TurnResult, tol: float = TOLERANCE) -> Comparison:
    """Does `other` answer as `base` did? Equal token ids and logprobs within `tol`."""
    same_prompt = bool(base.prompt_hash) and base.prompt_hash == other.prompt_hash
    if base.error or other.error or base.token_ids is None or other.token_ids is None:
        why = "baseline failed" if (base.error or base.token_ids is None) else "request failed"
        return Comparison(False, False, None, None, same_prompt, why)
    a, b = base.token_ids, other.token_ids
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    tokens_equal = first is None
    diff = None
    if base.logprobs is not None and other.logprobs is not None:
        n = min(len(base.logprobs), len(other.logprobs)) if tokens_equal else (first or 0)
        diffs = [abs(x - y) for x, y in zip(base.logprobs[:n], other.logprobs[:n])
                 if x is not None and y is not None]
        diff = max(diffs) if diffs else 0.0
    lp_ok = diff is not None and diff <= tol
    match = tokens_equal and lp_ok
    if match:
        why = ""
    elif not tokens_equal:
        why = f"token {first} differs"
    elif diff is None:
        why = "no logprobs"
    else:
        why = f"logprobs differ by {diff:.3g}"
    if not match and not same_prompt:
        why += " (history already differed)"
    return Comparison(match, tokens_equal, None if diff is None else round(diff, 6), first, same_prompt, why)


def prompt_hash(messages: list[dict]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:12]


def parse_answer(resp: dict) -> tuple[dict, list[int] | None, list[float] | None]:
    """(assistant message, generated token ids, their logprobs) of a chat completion."""
    choice = (resp.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    ids = choice.get("token_ids")
    content = (choice.get("logprobs") or {}).get("content") or []
    lps = [c.get("logprob") for c in content] if content else None
    if lps is not None:
        lps = [max(float(x), -1e9) if x is not None else None for x in lps]   # -inf -> comparable
    return message, ids if isinstance(ids, list) else None, lps


# -- the report ----------------------------------------------------------------------------------------
@dataclass
class Replay:
    results: dict[str, list[TurnResult]] = field(default_factory=dict)   # mode -> turns
    timings: dict[str, float] = field(default_factory=dict)
    deployment: dict = field(default_factory=dict)
    error: str | None = None
    error_lines: list[str] = field(default_factory=list)
    tolerance: float = TOLERANCE
    warm_up_problems: list[str] = field(default_factory=list)   # retried, not fatal
    labels: dict[str, str] = field(default_factory=lambda: dict(MODE_NAMES))   # what each mode was
    streams: list[dict] = field(default_factory=list)   # streamed first turns through the guarded router

    def rows(self) -> list[dict]:
        base = {(t.conversation, t.turn): t for t in self.results.get("a", [])}
        out = []
        keys = [(t.conversation, t.turn) for t in self.results.get("a", [])]
        for m in ("b", "c"):
            for t in self.results.get(m, []):
                if (t.conversation, t.turn) not in base and (t.conversation, t.turn) not in keys:
                    keys.append((t.conversation, t.turn))
        by = {m: {(t.conversation, t.turn): t for t in self.results.get(m, [])} for m in MODES}
        for key in keys:
            row: dict[str, Any] = {"conversation": key[0], "turn": key[1]}
            a = base.get(key)
            for m in MODES:
                t = by[m].get(key)
                row[m] = t.as_dict() if t else None
                if m != "a":
                    row[f"{m}_vs_a"] = compare(a, t, self.tolerance).as_dict() if (a and t) else None
            out.append(row)
        return out

    @property
    def exit_code(self) -> int:
        if self.error:
            return EXIT_START
        rows = self.rows()
        if not rows or any(r["c_vs_a"] is None or not r["c_vs_a"]["match"] for r in rows):
            return EXIT_MISMATCH
        return EXIT_OK

    def summary(self) -> dict:
        rows = self.rows()
        s = {}
        for m in ("b", "c"):
            cmp = [r[f"{m}_vs_a"] for r in rows if r[f"{m}_vs_a"] is not None]
            s[m] = {"turns": len(cmp), "match": sum(1 for c in cmp if c["match"]),
                    "mismatch": sum(1 for c in cmp if not c["match"])}
        c_turns = [t for t in self.results.get("c", []) if t.guard]
        s["c"]["guard_hits"] = sum(1 for t in c_turns if t.guard.startswith("hit"))
        s["b"]["reused"] = sum(1 for t in self.results.get("b", []) if (t.guard or "").startswith("hit"))
        return s

    def as_dict(self) -> dict:
        return {"exit_code": self.exit_code, "error": self.error, "error_lines": self.error_lines,
                "labels": self.labels,
                "warm_up_problems": self.warm_up_problems,
                "tolerance": self.tolerance, "deployment": self.deployment,
                "timings_s": {k: round(v, 1) for k, v in self.timings.items()},
                "summary": self.summary() if not self.error else None, "turns": self.rows(),
                "streams": self.streams}


def _kv_short(kv: dict) -> str:
    parts = []
    for name, row in sorted(kv.items()):
        bits = []
        if row.get("prefix_hits"):
            bits.append(f"hit {row['prefix_hits']}/{row['prefix_queries']}")
        if row.get("external_hits"):
            bits.append(f"ext {row['external_hits']}")
        if row.get("transfers"):
            bits.append(f"xfer {row['transfers']} {row.get('avg_transfer_ms')}ms {row.get('mb_per_transfer')}MB")
        if row.get("failed_transfers"):
            bits.append(f"FAILED {row['failed_transfers']}")
        parts.append(f"{name}[{', '.join(bits) or '-'}]")
    return " ".join(parts)


def render_text(rep: Replay) -> str:
    lines = []
    if rep.error:
        lines.append(f"replay: {rep.error}")
        lines += [f"  {l}" for l in rep.error_lines]
        return "\n".join(lines)
    d = rep.deployment
    if d:
        lines.append(f"vLLM {d.get('vllm_version')} ({d.get('vllm')}), model {d.get('model')}, "
                     f"connector {d.get('connector')}")
    for row in rep.rows():
        conv, n = row["conversation"], row["turn"]
        a = row["a"] or {}
        lines.append(f"{conv} turn {n}: (a) {a.get('status')} {len(a.get('token_ids') or [])} tokens "
                     f"{a.get('seconds')}s {_kv_short(a.get('kv') or {})}" + (f" ERROR {a['error']}" if a.get("error") else ""))
        for m in ("b", "c"):
            t, c = row[m], row[f"{m}_vs_a"]
            if t is None:
                if m in rep.labels:
                    lines.append(f"  ({m}) not run")
                continue
            verdict = "match" if c and c["match"] else f"MISMATCH ({c['why'] if c else '?'})"
            lp = c.get("max_logprob_diff") if c else None
            guard = (t.get("guard") or "-") + (" (prefill failed with reused blocks; retried without them)"
                                               if t.get("retried_without_reuse") else "")
            exp = f", expected {t['expected_guard']}" if m == "c" and t.get("expected_guard") else ""
            lines.append(f"  ({m}) {verdict}, max|dlogprob| {lp}; router: {guard}{exp}; {t.get('seconds')}s "
                         f"{_kv_short(t.get('kv') or {})}" + (f" ERROR {t['error']}" if t.get("error") else ""))
            for g in t.get("guard_lines") or []:
                lines.append(f"      {g}")
            for k in t.get("kv_log_lines") or []:
                lines.append(f"      {k}")
    for p in rep.warm_up_problems:
        lines.append(f"warm-up (retried): {p}")
    s = rep.summary()
    if "b" in rep.labels:
        lines.append(f"(b) unguarded: {s['b']['match']}/{s['b']['turns']} turns match baseline "
                     f"({s['b']['reused']} reused D's blocks unchecked); "
                     f"(c) guarded: {s['c']['match']}/{s['c']['turns']} match ({s['c']['guard_hits']} guard hits)")
    else:
        lines.append(f"(a) {rep.labels.get('a')}; (c) {rep.labels.get('c')}: {s['c']['match']}/{s['c']['turns']} "
                     "turns match (a)")
    lines.append("timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in rep.timings.items()))
    what = "guarded" if "b" in rep.labels else "the router under test"
    lines.append("exit %d: %s" % (rep.exit_code, f"{what} matches baseline everywhere" if rep.exit_code == 0
                                  else f"{what} differs from baseline (or a turn failed)"))
    return "\n".join(lines)


def render_markdown(report: dict) -> str:
    """A replay report (`Replay.as_dict()`, or a saved `--format json`) as Markdown: a summary
    and one table row per conversation turn, for a pull request or a results page."""
    out = ["## vllmlint replay", ""]
    if report.get("error"):
        out.append(f"**Could not run:** {report['error']}")
        out += [f"    {line}" for line in report.get("error_lines") or []]
        return "\n".join(out) + "\n"
    d = report.get("deployment") or {}
    s = report.get("summary") or {}
    b, c = s.get("b", {}), s.get("c", {})
    labels = report.get("labels") or MODE_NAMES
    out += [f"vLLM {d.get('vllm_version')}, connector {d.get('connector')}, model `{d.get('model')}`; "
            f"temperature 0, a turn matches (a) when its token ids are equal and |dlogprob| <= {report.get('tolerance')}.",
            ""]
    if "b" in labels:
        out += [f"* **(b) unguarded** (bidirectional on, D's blocks reused by conversation id): "
                f"{b.get('match')}/{b.get('turns')} turns match (a), {b.get('reused')} reused D's blocks unchecked",
                f"* **(c) guarded** (bidirectional on, reuse only on exact token-id continuation): "
                f"{c.get('match')}/{c.get('turns')} turns match (a), {c.get('guard_hits')} guard hits"]
    else:
        out += [f"* **(a)** {labels.get('a')}",
                f"* **(c)** {labels.get('c')}: {c.get('match')}/{c.get('turns')} turns match (a)"]
    out += [
            f"* exit {report.get('exit_code')}; timings: "
            + ", ".join(f"{k} {v} s" for k, v in (report.get("timings_s") or {}).items()),
            "", "| conversation | turn | (b) vs (a) | (c) vs (a) | guarded router | (b) s | (c) s |",
            "|---|---:|---|---|---|---:|---:|"]

    def verdict(cmp: dict | None) -> str:
        if not cmp:
            return "not run"
        return "match" if cmp["match"] else f"**MISMATCH** ({cmp['why']})"
    for row in report.get("turns") or []:
        guard = ((row.get("c") or {}).get("guard") or "-").split("; stored=")[0]
        secs = [f"{(row.get(m) or {}).get('seconds', '-')}" for m in ("b", "c")]
        out.append(f"| {row['conversation']} | {row['turn']} | {verdict(row.get('b_vs_a'))} | "
                   f"{verdict(row.get('c_vs_a'))} | {guard} | {secs[0]} | {secs[1]} |")
    streams = report.get("streams") or []
    if streams:
        out += ["", "First turns streamed through the guarded router:", "",
                "| conversation | status | events | token ids per event | first event s | last event s |",
                "|---|---:|---:|---|---:|---:|"]
        for row in streams:
            per = sorted(set(row.get("token_events") or []))
            out.append(f"| {row['conversation']} | {row.get('status')} | {row.get('events')} | "
                       f"{', '.join(map(str, per)) or '-'} ({sum(row.get('token_events') or [])} ids) | "
                       f"{row.get('first_event_s')} | {row.get('last_event_s')} |"
                       + (f" {row['error']}" if row.get("error") else ""))
    for p in report.get("warm_up_problems") or []:
        out.append(f"\nwarm-up (retried): {p}")
    return "\n".join(out) + "\n"


# -- driving a deployment ---------------------------------------------------------------------------
class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def _post_json(url: str, body: dict, timeout: float,
                     headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    """One POST through the router: (status, lower-case headers, parsed JSON)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        async with session.post(url, json=body, headers=headers or {}) as r:
            raw = await r.read()
            return r.status, {k.lower(): v for k, v in r.headers.items()}, json.loads(raw)


async def _start_router(dep, policy: str, timeout: float, render_url: str | None = None):
    """An in-process `vllmlint.router.Router` with `policy` in front of `dep`, on a free
    127.0.0.1 port: (router, its chat completions URL)."""
    from .router import Backend, Router

    router = Router([Backend.from_url(u) for u in dep.prefill_urls], [Backend.from_url(u) for u in dep.decode_urls],
                    render_url=render_url, policy=policy, timeout_s=timeout, api_key=dep.api_key)
    await router.start("127.0.0.1", 0)
    return router, f"http://127.0.0.1:{router.port}/v1/chat/completions"


async def replay_mode(mode: str, convs: Sequence[Conversation], dep, timeout: float,
                      capture: _Capture, run_tag: str = "", echo=None, url: str | None = None,
                      fresh_ids: bool = False, render_url: str | None = None) -> list[TurnResult]:
    """Every conversation through a fresh in-process Router with `mode`'s policy - or through the
    router at `url` (a running deployment's own). `fresh_ids`: every turn its own conversation id,
    so no router keyed on it can reuse anything (the baseline through a router we do not run)."""
    from ..verify import logs

    external = url is not None
    if url is None:
        router, url = await _start_router(dep, POLICY[mode], timeout, render_url)
    else:
        router, url = None, url.rstrip("/") + ("" if url.rstrip("/").endswith("/chat/completions")
                                               else "/v1/chat/completions")
    # Each mode gets its own prefix-cache namespace, as if on a fresh stack: stale KV that (b)
    # reused is hashed under the *new* tokens once its block fills, and P and D then serve it to
    # any later request with that prefix (measured: (c) turn 3 of think-01 matched (a) only
    # with this salt). The salt is part of the first block's hash and nothing else.
    salt = f"vllmlint-replay-{mode}{run_tag}-{secrets.token_hex(4)}"
    out: list[TurnResult] = []
    try:
        for conv in convs:
            # a router we do not run may still hold an earlier replay's entries: ids of this run only
            cid = f"{conv.id}-{mode}{run_tag}" + (f"-{secrets.token_hex(3)}" if external else "")
            messages = conv.first_messages()
            answer: dict = {}
            for i, turn in enumerate(conv.turns):
                if i:
                    messages = next_messages(messages, answer, turn)
                body = conv.request(messages, dep.model)
                body.update(temperature=0, logprobs=True, top_logprobs=1, return_token_ids=True,
                            conversation_id=f"{cid}-t{i + 1}" if fresh_ids else cid, cache_salt=salt)
                tr = TurnResult(conv.id, i + 1, mode, prompt_hash=messages and prompt_hash(messages),
                                expected_guard=expected_guard(turn) if mode == "c" else None)
                mark, before, log_mark = dep.mark(), await asyncio.to_thread(dep.counters), len(capture.lines)
                turns_before = len(router.turns) if router else 0
                t0 = time.monotonic()
                try:
                    tr.status, headers, data = await _post_json(
                        url, body, timeout, dep.headers() if hasattr(dep, "headers") else {})
                    tr.guard = headers.get("x-vllmlint-guard")
                    if tr.status != 200:
                        tr.error = json.dumps(data)[:300]
                except (OSError, asyncio.TimeoutError, ValueError, aiohttp.ClientError) as err:
                    tr.error = f"{type(err).__name__}: {err}"
                    data = None
                tr.seconds = time.monotonic() - t0
                if router is not None and len(router.turns) > turns_before:
                    rt = router.turns[-1]
                    tr.prefill_ms, tr.decode_ms = round(rt.prefill_ms, 1), round(rt.decode_ms, 1)
                    tr.retried_without_reuse = rt.retried_without_reuse
                if isinstance(data, dict) and tr.status == 200:
                    answer, tr.token_ids, tr.logprobs = parse_answer(data)
                    tr.text = answer.get("content") or ""
                    tr.prompt_tokens = (data.get("usage") or {}).get("prompt_tokens")
                else:
                    answer = {"content": ""}
                await asyncio.sleep(0.5)          # let the stats loggers catch up
                from ..verify.deployment import counter_delta
                tr.kv = counter_delta(before, await asyncio.to_thread(dep.counters))
                for name, text in dep.logs_since(mark).items():
                    for row in logs.kv_metrics(text):
                        tr.kv_log_lines.append(f"{name}: {row['line']}")
                    for line in text.splitlines():
                        if logs.EXC_RE.search(line) and "Warning" not in line:
                            tr.kv_log_lines.append(f"{name}: {logs.clean(line)}"[:300])
                tr.guard_lines = [l for l in capture.lines[log_mark:]
                                  if l.startswith(("guard:", "unguarded:", "router: conversation", "router: render"))]
                out.append(tr)
                if echo:
                    echo(f"  ({mode}) {conv.id} turn {i + 1}: {tr.status} {len(tr.token_ids or [])} tokens "
                         f"{tr.seconds:.1f}s router={tr.guard or '-'}"
                         + (" RETRIED-WITHOUT-REUSE" if tr.retried_without_reuse else "")
                         + (f" ERROR {tr.error}" if tr.error else "") + f" lp={(tr.logprobs or [])[:3]}")
                    for line in tr.guard_lines + tr.kv_log_lines:
                        echo(f"      {line}")
                if tr.error and not all(dep.alive().values()):
                    return out
    finally:
        if router is not None:
            await router.close()
    return out


async def stream_probe(convs: Sequence[Conversation], dep, timeout: float, echo=None) -> list[dict]:
    """Each conversation's first turn once more, streamed through a guarded router: how its
    events arrived (count, token ids per event, seconds from the request to the first and the
    last). The router relays decode's events as they come, so a model that makes one token per
    step answers one token per event."""
    router, url = await _start_router(dep, "guarded", timeout)
    out = []
    try:
        for conv in convs:
            body = conv.request(conv.first_messages(), dep.model)
            body.update(temperature=0, stream=True, return_token_ids=True,
                        conversation_id=f"{conv.id}-stream-{secrets.token_hex(3)}")
            row: dict[str, Any] = {"conversation": conv.id, "status": None, "events": 0, "token_events": [],
                                   "first_event_s": None, "last_event_s": None, "done": False, "error": None}
            t0 = time.monotonic()
            try:
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
                    async with session.post(url, json=body, headers=dep.headers() if hasattr(dep, "headers")
                                            else {}) as r:
                        row["status"] = r.status
                        buf = b""
                        async for piece in r.content.iter_any():
                            buf += piece
                            while b"\n\n" in buf:
                                event, buf = buf.split(b"\n\n", 1)
                                if not event.startswith(b"data: "):
                                    continue
                                now = round(time.monotonic() - t0, 3)
                                row["events"] += 1
                                row["first_event_s"] = row["first_event_s"] or now
                                row["last_event_s"] = now
                                if event == b"data: [DONE]":
                                    row["done"] = True
                                    continue
                                obj = json.loads(event[6:])
                                if "error" in obj:
                                    row["error"] = json.dumps(obj)[:300]
                                for choice in obj.get("choices") or []:
                                    if choice.get("token_ids"):
                                        row["token_events"].append(len(choice["token_ids"]))
            except (OSError, asyncio.TimeoutError, ValueError, aiohttp.ClientError) as err:
                row["error"] = f"{type(err).__name__}: {err}"
            out.append(row)
            if echo:
                echo(f"  (stream) {conv.id}: {row['status']} {row['events']} events, token ids per event "
                     f"{row['token_events']}, first {row['first_event_s']}s last {row['last_event_s']}s"
                     + (f" ERROR {row['error']}" if row["error"] else ""))
    finally:
        await router.close()
    return out


WARM_UP_TRIES = 4


async def warm_up(dep, bidirectional: bool, timeout: float, echo=None) -> list[str]:
    """Two unrecorded turns before the measured ones: the first NIXL handshakes (decode to
    prefill on turn 1; prefill to decode when turn 2 reuses D's blocks) and the engines' first
    shapes happen here. vLLM waits 5 s for a handshake reply (zmq RCVTIMEO, not configurable);
    on a busy 2-core host a starting engine misses it, the request fails (500, or the router
    retries without reuse) and the next request handshakes again - so each turn is retried.
    Returns what went wrong on the way (empty: warm)."""
    from ..verify.runner import PD_PROMPT      # > one 128-token CPU block

    echo = echo or (lambda s: None)
    router, url = await _start_router(dep, "unguarded" if bidirectional else "none", timeout)
    problems: list[str] = []
    messages = [{"role": "user", "content": PD_PROMPT}]
    cid = f"warm-up-{secrets.token_hex(4)}"
    try:
        for n in (1, 2) if bidirectional else (1,):
            for attempt in range(1, WARM_UP_TRIES + 1):
                body = {"model": dep.model, "messages": messages, "max_tokens": 16, "temperature": 0,
                        "logprobs": True, "top_logprobs": 1, "return_token_ids": True,   # as the turns ask
                        "conversation_id": cid, "cache_salt": f"vllmlint-warm-up-{secrets.token_hex(4)}"}
                t0 = time.monotonic()
                try:
                    status, _, data = await _post_json(url, body, timeout)
                except (OSError, asyncio.TimeoutError, ValueError, aiohttp.ClientError) as err:
                    status, data = 0, {"error": f"{type(err).__name__}: {err}"}
                retried = bool(router.turns) and router.turns[-1].retried_without_reuse
                ok = status == 200 and not (n == 2 and retried)
                echo(f"  warm-up turn {n} (try {attempt}): {status} {time.monotonic() - t0:.1f}s"
                     + (" (prefill could not read D's blocks; retried without them)" if retried and n == 2 else ""))
                if ok:
                    if n == 1:
                        answer, _, _ = parse_answer(data)
                        messages = messages + [{"role": "assistant", "content": answer.get("content") or ""},
                                               {"role": "user", "content": "Again."}]
                    break
                problems.append(f"warm-up turn {n} try {attempt}: "
                                + ("reuse failed" if status == 200 else f"{status} {json.dumps(data)[:200]}"))
                if not all(dep.alive().values()):
                    return problems
                await asyncio.sleep(2)
            else:
                return problems
    finally:
        await router.close()
    return problems


ROUTER_LOGGERS = ("vllmlint.guard", "vllmlint.router")


def _select(conversations: str | None, only: Sequence[str], limit: int | None, rep: "Replay") -> list:
    """The conversations to replay (`--only`, `--limit`); none: `rep.error` says why."""
    try:
        convs = load(conversations)
    except (OSError, ValueError) as err:
        rep.error = f"conversations: {err}"
        return []
    if only:
        convs = [c for c in convs if c.id in set(only)]
    if limit:
        convs = convs[:limit]
    if not convs:
        rep.error = "no conversation selected"
    return convs


def _capture_router_logs() -> "_Capture":
    """The guard's and router's log lines, captured at INFO while a replay runs."""
    capture = _Capture()
    for name in ROUTER_LOGGERS:
        lg = logging.getLogger(name)
        lg.addHandler(capture)
        if lg.getEffectiveLevel() > logging.INFO:
            lg.setLevel(logging.INFO)
    return capture


def _release_router_logs(capture: "_Capture") -> None:
    for name in ROUTER_LOGGERS:
        logging.getLogger(name).removeHandler(capture)


def run_replay(conversations: str | None, deployment_paths: Sequence[str], *, vllm: str | None = None,
               connector: str | None = None, timeout: float = 300.0, limit: int | None = None,
               only: Sequence[str] = (), model: str | None = None, echo=None,
               modes: Sequence[str] = MODES) -> Replay:
    from ..verify.deployment import DeploymentError, deployment

    echo = echo or (lambda s: None)
    rep = Replay()
    convs = _select(conversations, only, limit, rep)
    if not convs:
        return rep
    capture = _capture_router_logs()
    t_all = time.monotonic()
    groups = [(False, [m for m in modes if m == "a"]), (True, [m for m in modes if m in ("b", "c")])]
    try:
        for bidir, group_modes in groups:
            if not group_modes:
                continue
            tag = "bidirectional on" if bidir else "bidirectional off"
            echo(f"starting the deployment ({tag})...")
            t0 = time.monotonic()
            try:
                with deployment(deployment_paths, vllm=vllm, model=model, connector=connector,
                                kv_extra={"bidirectional_kv_xfer": bidir}, prefill_args=["--enable-scale-out"],
                                timeout=timeout, echo=echo) as dep:
                    rep.timings[f"start ({tag})"] = time.monotonic() - t0
                    conn = {p.get("kv_connector") for r in dep.servers for p in [r.plan.kv or {}]}
                    rep.deployment = {"vllm": dep.vllm, "vllm_version": dep.vllm_version, "model": dep.model,
                                      "connector": ",".join(sorted(c for c in conn if c)),
                                      "prefill": dep.prefill_urls, "decode": dep.decode_urls,
                                      "argv": {r.plan.name: r.plan.masked_argv() for r in dep.servers}}
                    if bidir and not any("Nixl" in (c or "") for c in conn):
                        rep.error = (f"bidirectional KV transfer needs NixlConnector; the deployment runs "
                                     f"{', '.join(sorted(c for c in conn if c)) or 'no connector'} "
                                     "(use --connector nixl)")
                        return rep
                    t1 = time.monotonic()
                    problems = asyncio.run(warm_up(dep, bidir, timeout, echo))
                    rep.timings[f"warm-up ({tag})"] = time.monotonic() - t1
                    rep.warm_up_problems += [f"{p} ({tag})" for p in problems]
                    for m in group_modes:
                        echo(f"replaying {len(convs)} conversation(s): ({m}) {MODE_NAMES[m]}")
                        t1 = time.monotonic()
                        rep.results[m] = asyncio.run(replay_mode(m, convs, dep, timeout, capture, echo=echo))
                        rep.timings[f"({m}) {MODE_NAMES[m]}"] = time.monotonic() - t1
                        dead = [n for n, ok in dep.alive().items() if not ok]
                        if dead:
                            rep.error = f"server(s) died during ({m}): {', '.join(dead)}"
                            rep.error_lines = [f"{n}: {_error_line(dep, n)}" for n in dead]
                            return rep
                    if bidir and "c" in group_modes:
                        echo(f"streaming {len(convs)} first turn(s) through the guarded router")
                        rep.streams = asyncio.run(stream_probe(convs, dep, timeout, echo))
            except DeploymentError as err:
                rep.error = f"{err} ({tag})"
                rep.error_lines = err.lines
                return rep
    finally:
        rep.timings["total"] = time.monotonic() - t_all
        _release_router_logs(capture)
    return rep


def _error_line(dep, name: str) -> str:
    from ..verify import logs
    r = dep.names()[name]
    return logs.error_line(r.proc.log_text()) if r.proc else "(not started)"


def run_replay_running(conversations: str | None, *, router: str | None = None, prefill: Sequence[str] = (),
                       decode: Sequence[str] = (), model: str | None = None, api_key: str | None = None,
                       render_url: str | None = None, timeout: float = 300.0, limit: int | None = None,
                       only: Sequence[str] = (), echo=None) -> Replay:
    """Step 5 on a deployment that is already running (the user's staging stack), with the user's
    conversations; nothing is started or restarted, so the bidirectional setting is the
    deployment's own.

    * `prefill` + `decode` (no `router`): (a) plain P -> D routing (policy none: decode's blocks
      are never offered to prefill - the baseline even with bidirectional on), (b) unguarded and
      (c) guarded, each through an in-process router on 127.0.0.1 with its own `cache_salt`.
    * `router`: the deployment's own router is the one under test, as (c), one conversation id per
      conversation; the baseline (a) is plain P -> D when `prefill`/`decode` are given, else the
      same router with a fresh conversation id on every turn (nothing to reuse by id).
    """
    from ..verify.deployment import RunningDeployment, served_model, vllm_version_of

    echo = echo or (lambda s: None)
    rep = Replay()
    convs = _select(conversations, only, limit, rep)
    if not convs:
        return rep
    pd = bool(prefill and decode)
    if not router and not pd:
        rep.error = "give --router URL, or --prefill URL and --decode URL"
        return rep
    probe = (list(decode) or [router])[0]
    model = model or served_model(probe, api_key) or (served_model(router, api_key) if router else None)
    if not model:
        rep.error = f"no model: {probe}/v1/models did not answer (give --model)"
        return rep
    dep = RunningDeployment(list(prefill), list(decode), model, router, api_key,
                            vllm_version=vllm_version_of(probe, api_key))
    if router:
        rep.labels = {"a": ("plain P -> D routing (no reuse)" if pd else
                            f"{router} with a fresh conversation id every turn (no reuse by id)"),
                      "c": f"your router {router} (one conversation id per conversation)"}
        plan = [("a", None if pd else router, not pd), ("c", router, False)]
    else:
        plan = [("a", None, False), ("b", None, False), ("c", None, False)]
    rep.deployment = {"vllm": dep.vllm, "vllm_version": dep.vllm_version, "model": model,
                      "connector": "(running deployment)", "router": router,
                      "prefill": list(prefill), "decode": list(decode)}
    capture = _capture_router_logs()
    t_all = time.monotonic()
    try:
        if pd:
            t1 = time.monotonic()
            problems = asyncio.run(warm_up(dep, True, timeout, echo))
            rep.timings["warm-up"] = time.monotonic() - t1
            rep.warm_up_problems += problems
        for mode, url, fresh in plan:
            echo(f"replaying {len(convs)} conversation(s): ({mode}) {rep.labels[mode]}")
            t1 = time.monotonic()
            rep.results[mode] = asyncio.run(replay_mode(mode, convs, dep, timeout, capture, echo=echo, url=url,
                                                        fresh_ids=fresh, render_url=render_url))
            rep.timings[f"({mode}) {rep.labels[mode]}"] = time.monotonic() - t1
            dead = [n for n, ok in dep.alive().items() if not ok]
            if dead:
                rep.error = f"server(s) stopped answering during ({mode}): {', '.join(dead)}"
                return rep
    finally:
        rep.timings["total"] = time.monotonic() - t_all
        _release_router_logs(capture)
    return rep

