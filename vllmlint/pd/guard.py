"""Token-id continuation guard for bidirectional KV transfer (multi-turn P/D).

With NixlConnector's `bidirectional_kv_xfer`, decode (D) keeps a finished turn's KV blocks for
`decoder_kv_blocks_ttl` (480 s) and returns `kv_transfer_params` naming them; prefill (P) pulls
them on the next turn and computes only the new tokens. The blocks are paired with P's prompt by
position only - vLLM compares no token ids - so they may be reused only when the next prompt's
token ids start with exactly the ids D saw and produced. `remote_num_tokens` in D's parameters
counts D's computed tokens, prompt *and* generated (usually prompt + output - 1).

This module is that check, and nothing else: no vLLM import, no I/O, an injectable clock.

* `decide(stored, new_ids, now)` - the pure decision for one turn (replay uses it directly).
* `ContinuationGuard` - the per-conversation store a router uses: `record()` after D answers,
  `check()` before the next turn goes to P (single use: a hit or a miss consumes the entry).
  Keyed by conversation id; the entry remembers the model, and a different model is a miss.
  Thread and asyncio safe (one lock, no awaits inside), bounded (LRU cap on conversations and on
  stored tokens, TTL eviction).
* `UnguardedReuse` - what vLLM's reference multi-turn proxy does (reuse by conversation id,
  450 s, no check). Only for `vllmlint replay`, to show the mismatch; never use it to serve.

Every decision is logged on the `vllmlint.guard` logger, one line each:

    guard: hit conversation=abc model=m reuse=212 of 260 tokens
    guard: miss conversation=abc reason=edited-history at token 57 (stored 212, new 198)
    guard: miss conversation=abc reason=expired (stored 212, age 451.2s)
    guard: miss conversation=abc reason=model-changed (stored m1, new m2)
    guard: store conversation=abc model=m tokens=212 (prompt 180 + output 33) ttl=450s
    guard: skip-store conversation=abc reason=no-output-token-ids
"""
from __future__ import annotations

import logging
import threading
import time
from array import array
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

log = logging.getLogger("vllmlint.guard")

DECODER_KV_BLOCKS_TTL_S = 480.0   # NixlConnector default: how long D pins a finished turn's blocks
TTL_SAFETY_MARGIN_S = 30.0        # time for the next turn to reach P and P to start the pull
DEFAULT_TTL_S = DECODER_KV_BLOCKS_TTL_S - TTL_SAFETY_MARGIN_S
# P declines a pull 5 s before D's `remote_blocks_expiry_time` (pull_worker.py); we stop
# attaching earlier still, so a request in flight does not arrive after the deadline.
EXPIRY_MARGIN_S = 10.0
# vLLM 0.30 stamps `remote_blocks_expiry_time` with D's scheduler `time.perf_counter()` (seconds
# since boot, pull_scheduler.py), which no other host can compare with its clock; P corrects it
# with a clock offset learnt in the NIXL handshake. So the guard uses the value only when it is
# wall-clock seconds (a router or a later vLLM may export that); otherwise the TTL from the moment
# D answered (decoder_kv_blocks_ttl starts when D finishes the request) bounds the reuse.
_EPOCH_PLAUSIBLE = 1e9

# decision reasons
HIT = "hit"
NO_ENTRY = "no-entry"                 # first turn, unknown conversation, evicted or already used
MODEL_CHANGED = "model-changed"
EXPIRED = "expired"
EDITED = "edited-history"             # the new ids differ from the stored ones at a position < k
NO_NEW_TOKENS = "no-new-tokens"       # the new prompt is exactly the stored ids: nothing to compute
UNRENDERED = "unrendered"             # the new prompt's token ids are not known (render failed)
STORE_UNAVAILABLE = "store-unavailable"   # the shared store (--state) did not answer: recompute
MISS_REASONS = (NO_ENTRY, MODEL_CHANGED, EXPIRED, EDITED, NO_NEW_TOKENS, UNRENDERED, STORE_UNAVAILABLE)

# the fields that turn D's end-of-turn parameters into a turn-2 request for P
_TURN2 = {"do_remote_decode": True, "do_remote_prefill": False}
_NOT_FORWARDED = ("prompt_token_ids",)    # a router's own pin, never part of D's block info


class NotStorable(ValueError):
    """D's answer cannot be guarded (the reason is `args[0]`, a short code)."""


def _ids(values: Iterable[int]) -> array:
    """Token ids as a compact array (4 bytes a token); refuses anything but non-negative ints."""
    try:
        out = array("i", values)
    except (TypeError, OverflowError) as err:
        raise NotStorable("invalid-token-ids") from err
    if out and min(out) < 0:
        raise NotStorable("invalid-token-ids")
    return out


@dataclass(frozen=True, eq=False)
class StoredTurn:
    """What D saw and produced at the end of one turn, and the parameters naming its blocks."""

    conversation_id: str
    model: str | None
    token_ids: array                  # the first `remote_num_tokens` ids of D's prompt + output
    kv_transfer_params: Mapping[str, Any]
    stored_at: float
    expires_at: float                 # when a hit stops being allowed (clock seconds)
    prompt_tokens: int = 0
    output_tokens: int = 0

    @property
    def remote_num_tokens(self) -> int:
        return len(self.token_ids)


@dataclass(frozen=True)
class Decision:
    """The guard's answer for one turn: attach `kv_transfer_params` to P's request, or not."""

    hit: bool
    reason: str                       # HIT or one of MISS_REASONS
    conversation_id: str = ""
    position: int | None = None       # edited-history: the first token that differs
    stored_tokens: int = 0            # remote_num_tokens of the stored turn (0: none)
    new_tokens: int = 0               # length of the new prompt
    kv_transfer_params: dict | None = None   # hit only: what to send P (a fresh copy)
    detail: str = ""

    def log_line(self) -> str:
        conv = f"conversation={self.conversation_id or '-'}"
        if self.hit:
            return f"guard: hit {conv} {self.detail}".rstrip()
        text = f"guard: miss {conv} reason={self.reason}"
        return f"{text} {self.detail}" if self.detail else text

    def header(self) -> str:
        """Compact form for an HTTP response header (`X-Vllmlint-Guard`)."""
        parts = ["hit" if self.hit else "miss", f"reason={self.reason}"]
        if self.position is not None:
            parts.append(f"position={self.position}")
        parts += [f"stored={self.stored_tokens}", f"new={self.new_tokens}"]
        return "; ".join(parts)


def first_difference(stored: Sequence[int], new: Sequence[int]) -> int | None:
    """Index of the first position < len(stored) where `new` differs from `stored` (a `new`
    shorter than `stored` differs at its end); None when `new` starts with all of `stored`."""
    k = len(stored)
    a = stored if isinstance(stored, array) else array("q", stored)
    try:
        b = array(a.typecode, new[:k])
    except (TypeError, OverflowError):
        b = None
    if b is not None and a[:len(b)] == b:
        return None if len(b) >= k else len(b)
    n = min(k, len(new))
    step = 4096                       # find the chunk at C speed, then the token in it
    for start in range(0, n, step):
        end = min(n, start + step)
        if b is not None and a[start:end] == b[start:end]:
            continue
        for i in range(start, end):
            if a[i] != new[i]:
                return i
    return n if n < k else None


_UNSET: Any = object()


def decide(stored: StoredTurn | None, new_ids: Sequence[int] | None, now: float,
           model: str | None = _UNSET, conversation_id: str | None = None) -> Decision:
    """Whether D's blocks from `stored` may be reused for a prompt of `new_ids`, at time `now`.

    A hit needs: a stored turn, the same model (when `model` is given), `now` before the stored
    expiry, and `new_ids` starting with exactly the stored `remote_num_tokens` ids and going on
    past them. Anything else is a miss: P recomputes, which costs time and nothing else.
    """
    conv = conversation_id if conversation_id is not None else (stored.conversation_id if stored else "")
    new_len = len(new_ids) if new_ids is not None else 0
    if stored is None:
        return Decision(False, NO_ENTRY, conv, new_tokens=new_len)
    k = stored.remote_num_tokens
    if model is not _UNSET and (model or None) != (stored.model or None):
        return Decision(False, MODEL_CHANGED, conv, stored_tokens=k, new_tokens=new_len,
                        detail=f"(stored {stored.model or '-'}, new {model or '-'})")
    if now >= stored.expires_at:
        return Decision(False, EXPIRED, conv, stored_tokens=k, new_tokens=new_len,
                        detail=f"(stored {k}, age {now - stored.stored_at:.1f}s)")
    if new_ids is None:
        return Decision(False, UNRENDERED, conv, stored_tokens=k,
                        detail=f"(stored {k}, the new prompt's token ids are unknown)")
    at = first_difference(stored.token_ids, new_ids)
    if at is not None:
        return Decision(False, EDITED, conv, position=at, stored_tokens=k, new_tokens=new_len,
                        detail=f"at token {at} (stored {k}, new {new_len})")
    if new_len <= k:
        return Decision(False, NO_NEW_TOKENS, conv, stored_tokens=k, new_tokens=new_len,
                        detail=f"(stored {k}, new {new_len})")
    params = {key: value for key, value in stored.kv_transfer_params.items() if key not in _NOT_FORWARDED}
    params.update(_TURN2)
    return Decision(True, HIT, conv, stored_tokens=k, new_tokens=new_len, kv_transfer_params=params,
                    detail=f"model={stored.model or '-'} reuse={k} of {new_len} tokens")


def stored_turn(conversation_id: str, model: str | None, prompt_ids: Sequence[int] | None,
                output_ids: Sequence[int] | None, kv_transfer_params: Mapping[str, Any] | None,
                now: float, ttl_s: float = DEFAULT_TTL_S,
                expiry_margin_s: float = EXPIRY_MARGIN_S) -> StoredTurn:
    """Build the record of one finished turn from D's answer; raises NotStorable(reason)."""
    if not kv_transfer_params:
        raise NotStorable("no-kv-transfer-params")
    if not kv_transfer_params.get("remote_block_ids"):
        raise NotStorable("no-remote-block-ids")
    k = kv_transfer_params.get("remote_num_tokens")
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise NotStorable("no-remote-num-tokens")
    if prompt_ids is None:
        raise NotStorable("no-prompt-token-ids")
    if output_ids is None:
        raise NotStorable("no-output-token-ids")
    seq = _ids(prompt_ids)
    seq.extend(_ids(output_ids))
    if k > len(seq):
        # D computed tokens we have no ids for: their positions cannot be checked
        raise NotStorable(f"unverifiable: remote_num_tokens {k} > {len(seq)} known ids")
    expires = now + ttl_s
    deadline = kv_transfer_params.get("remote_blocks_expiry_time")
    if isinstance(deadline, (int, float)) and not isinstance(deadline, bool) and deadline > _EPOCH_PLAUSIBLE:
        expires = min(expires, float(deadline) - expiry_margin_s)
    return StoredTurn(conversation_id, model or None, seq[:k], dict(kv_transfer_params), now, expires,
                      prompt_tokens=len(prompt_ids), output_tokens=len(output_ids))


class ContinuationGuard:
    """Per-conversation store of D's last turn; attaches its blocks only to exact continuations.

    `clock` returns wall-clock seconds (`time.time`; tests pass a fake). `ttl_s` must be below
    D's `decoder_kv_blocks_ttl` (default 480 - 30 s).
    """

    def __init__(self, *, ttl_s: float = DEFAULT_TTL_S, expiry_margin_s: float = EXPIRY_MARGIN_S,
                 max_conversations: int = 4096, max_tokens: int = 16_000_000,
                 clock: Callable[[], float] = time.time, logger: logging.Logger | None = None):
        if ttl_s <= 0 or max_conversations < 1 or max_tokens < 1:
            raise ValueError("ttl_s, max_conversations and max_tokens must be positive")
        self.ttl_s = ttl_s
        self.expiry_margin_s = expiry_margin_s
        self.max_conversations = max_conversations
        self.max_tokens = max_tokens
        self.clock = clock
        self.log = logger or log
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, StoredTurn] = OrderedDict()   # oldest store first
        self._tokens = 0
        self._last_sweep = float("-inf")
        self.counts: Counter[str] = Counter()

    # -- the two calls a router makes --------------------------------------------------
    def record(self, conversation_id: str, model: str | None, prompt_ids: Sequence[int] | None,
               output_ids: Sequence[int] | None, kv_transfer_params: Mapping[str, Any] | None) -> StoredTurn | None:
        """After D answers a turn: remember what it saw and produced. None when not storable
        (logged); any older entry of the conversation is dropped either way."""
        now = self.clock()
        try:
            turn = stored_turn(conversation_id, model, prompt_ids, output_ids, kv_transfer_params,
                               now, self.ttl_s, self.expiry_margin_s)
        except NotStorable as err:
            with self._lock:
                self._drop(conversation_id)
                self.counts["skip-store"] += 1
            self.log.info("guard: skip-store conversation=%s reason=%s", conversation_id, err.args[0])
            return None
        with self._lock:
            self._drop(conversation_id)
            self._entries[conversation_id] = turn
            self._tokens += turn.remote_num_tokens
            self.counts["store"] += 1
            evicted = self._evict(now)
        self.log.info("guard: store conversation=%s model=%s tokens=%d (prompt %d + output %d) ttl=%.0fs",
                      conversation_id, model or "-", turn.remote_num_tokens, turn.prompt_tokens,
                      turn.output_tokens, turn.expires_at - now)
        for cid, why in evicted:
            self.log.info("guard: evict conversation=%s reason=%s", cid, why)
        return turn

    def check(self, conversation_id: str, model: str | None, new_ids: Sequence[int] | None) -> Decision:
        """Before the next turn goes to P: the decision, logged. Consumes the entry (D's blocks
        serve one pull; a miss means the conversation went elsewhere)."""
        now = self.clock()
        with self._lock:
            stored = self._entries.pop(conversation_id, None)
            if stored is not None:
                self._tokens -= stored.remote_num_tokens
            evicted = self._evict(now)
        decision = decide(stored, new_ids, now, model, conversation_id)
        with self._lock:
            self.counts[decision.reason] += 1
        for cid, why in evicted:
            self.log.info("guard: evict conversation=%s reason=%s", cid, why)
        self.log.info("%s", decision.log_line())
        return decision

    # -- housekeeping --------------------------------------------------------------------
    def forget(self, conversation_id: str) -> None:
        with self._lock:
            self._drop(conversation_id)

    def peek(self, conversation_id: str) -> StoredTurn | None:
        with self._lock:
            return self._entries.get(conversation_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"conversations": len(self._entries), "tokens": self._tokens,
                    "decisions": dict(self.counts)}

    def _drop(self, conversation_id: str) -> None:
        old = self._entries.pop(conversation_id, None)
        if old is not None:
            self._tokens -= old.remote_num_tokens

    def _evict(self, now: float) -> list[tuple[str, str]]:
        """Expired entries (the oldest first, and all of them every 30 s), then the least
        recently stored ones beyond the caps. Called with the lock held."""
        out = []
        while self._entries:
            cid, turn = next(iter(self._entries.items()))
            if now < turn.expires_at:
                break
            self._drop(cid)
            out.append((cid, "expired"))
        if now - self._last_sweep >= 30.0:
            self._last_sweep = now
            for cid in [c for c, t in self._entries.items() if now >= t.expires_at]:
                self._drop(cid)
                out.append((cid, "expired"))
        while self._entries and (len(self._entries) > self.max_conversations or self._tokens > self.max_tokens):
            cid = next(iter(self._entries))
            self._drop(cid)
            out.append((cid, "capacity"))
        return out


@dataclass
class UnguardedReuse:
    """vLLM's reference multi-turn proxy: D's parameters reused by conversation id alone
    (single use, 450 s), whatever the next prompt is. For `vllmlint replay` only - it is the
    behaviour that gives wrong answers on edited history."""

    ttl_s: float = 450.0
    clock: Callable[[], float] = time.time
    logger: logging.Logger = field(default=log)
    _entries: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    counts: Counter = field(default_factory=Counter)

    def record(self, conversation_id, model, prompt_ids, output_ids, kv_transfer_params):
        if not kv_transfer_params:
            return None
        with self._lock:
            self._entries[conversation_id] = (dict(kv_transfer_params), self.clock())
            self.counts["store"] += 1
        return kv_transfer_params

    def check(self, conversation_id, model, new_ids) -> Decision:
        with self._lock:
            entry = self._entries.pop(conversation_id, None)
        new_len = len(new_ids) if new_ids is not None else 0
        if entry is None:
            decision = Decision(False, NO_ENTRY, conversation_id, new_tokens=new_len)
        elif self.clock() - entry[1] > self.ttl_s:
            decision = Decision(False, EXPIRED, conversation_id, new_tokens=new_len)
        else:
            params = {k: v for k, v in entry[0].items() if k not in _NOT_FORWARDED}
            params.update(_TURN2)
            k = params.get("remote_num_tokens") or 0
            decision = Decision(True, HIT, conversation_id, stored_tokens=k if isinstance(k, int) else 0,
                                new_tokens=new_len, kv_transfer_params=params, detail="unguarded")
        with self._lock:
            self.counts[decision.reason] += 1
        self.logger.info("%s", decision.log_line().replace("guard:", "unguarded:", 1))
        return decision

    def forget(self, conversation_id: str) -> None:
        with self._lock:
            self._entries.pop(conversation_id, None)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"conversations": len(self._entries), "decisions": dict(self.counts)}


class NoReuse:
    """Never attach anything (plain P/D); records nothing."""

    counts: Counter

    def __init__(self) -> None:
        self.counts = Counter()

    def record(self, *args, **kwargs):
        return None

    def check(self, conversation_id, model, new_ids) -> Decision:
        self.counts[NO_ENTRY] += 1
        return Decision(False, NO_ENTRY, conversation_id, new_tokens=len(new_ids) if new_ids is not None else 0,
                        detail="(reuse disabled)")

    def forget(self, conversation_id: str) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        return {"conversations": 0, "decisions": dict(self.counts)}
