"""Shared guard state for several router replicas: Redis or Valkey (`--state redis://host:port/db`).

The in-process `ContinuationGuard` is the default. Behind a Service or load balancer a
conversation's next turn may reach another replica; with the state in one store every replica
sees it. The store holds, per conversation, exactly what the in-process guard holds (a
`StoredTurn`: D's prompt + output ids, its kv_transfer_params, expiry) and the decision is the
same pure `guard.decide`:

* `record` after a clean turn: one `SET key value PX ttl` (the guard's TTL, so the store forgets
  what D has released);
* `check` before prefill: one `GETDEL` (Redis 6.2+, Valkey 7+), an atomic take: of two replicas
  that get turns of one conversation at once, one takes the entry and the other finds nothing, so
  D's blocks are never attached twice (they serve one pull);
* a store that fails or times out (`STORE_TIMEOUT_S`) is a miss with reason
  `store-unavailable`: P recomputes, never an unguarded reuse. After a failure the store is left
  alone for `RETRY_AFTER_S` (calls are misses at once, not a timeout each), then tried again.
  Each failed or skipped call counts in `store_errors` (op: check, record, forget); the log says
  when the store goes down and when it is back, once each.

Value layout: a JSON header line (model, parameters, times, counts, byte order) then the token
ids as 4-byte ints, so a 100k-token turn is 400 kB, not 700 kB of JSON.
"""
from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from array import array
from collections import Counter
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from .guard import (DEFAULT_TTL_S, EXPIRY_MARGIN_S, STORE_UNAVAILABLE, Decision, NotStorable, StoredTurn, decide,
                    stored_turn)

log = logging.getLogger("vllmlint.guard")

KEY_PREFIX = "vllmlint:guard:"
STORE_TIMEOUT_S = 0.5        # one store call; a request waits at most this before it recomputes
RETRY_AFTER_S = 1.0          # after a failure, the store is not called for this long
_FORMAT = 1


def encode_turn(turn: StoredTurn) -> bytes:
    head = {"v": _FORMAT, "model": turn.model, "kv": turn.kv_transfer_params, "stored_at": turn.stored_at,
            "expires_at": turn.expires_at, "prompt_tokens": turn.prompt_tokens,
            "output_tokens": turn.output_tokens, "order": sys.byteorder, "size": turn.token_ids.itemsize}
    return json.dumps(head, separators=(",", ":")).encode() + b"\n" + turn.token_ids.tobytes()


def decode_turn(conversation_id: str, blob: bytes) -> StoredTurn:
    """The stored turn; ValueError when the value is not one this module wrote."""
    head_raw, sep, ids_raw = blob.partition(b"\n")
    if not sep:
        raise ValueError("no header line")
    head = json.loads(head_raw)
    if not isinstance(head, dict) or head.get("v") != _FORMAT:
        raise ValueError("unknown format")
    ids = array("i")
    if head.get("size") != ids.itemsize or len(ids_raw) % ids.itemsize:
        raise ValueError("token ids of another width")
    ids.frombytes(ids_raw)
    if head.get("order") != sys.byteorder:
        ids.byteswap()
    kv = head.get("kv")
    if not isinstance(kv, dict):
        raise ValueError("no kv_transfer_params")
    return StoredTurn(conversation_id, head.get("model"), ids, kv, float(head["stored_at"]),
                      float(head["expires_at"]), int(head.get("prompt_tokens") or 0),
                      int(head.get("output_tokens") or 0))


def redacted(url: str) -> str:
    """The URL without its password (for /health and the log)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit((parts.scheme, user + netloc, parts.path, parts.query, parts.fragment))


class StoreGuard:
    """The continuation guard with its entries in Redis/Valkey; the router awaits `check`,
    `record` and `forget`. `client` is a `redis.asyncio.Redis` (built from `url` when None)."""

    def __init__(self, url: str, *, ttl_s: float = DEFAULT_TTL_S, expiry_margin_s: float = EXPIRY_MARGIN_S,
                 timeout_s: float = STORE_TIMEOUT_S, retry_after_s: float = RETRY_AFTER_S,
                 clock: Callable[[], float] = time.time, client: Any = None, key_prefix: str = KEY_PREFIX):
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        if client is None:
            import redis.asyncio as aioredis
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            client = aioredis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                             retry=Retry(NoBackoff(), 0), health_check_interval=0)
        self.url = redacted(url)
        self.client = client
        self.ttl_s, self.expiry_margin_s = ttl_s, expiry_margin_s
        self.timeout_s, self.retry_after_s = timeout_s, retry_after_s
        self.clock = clock
        self.key_prefix = key_prefix
        self.counts: Counter[str] = Counter()
        self.store_errors: Counter[str] = Counter()
        self._down_since: float | None = None
        self._retry_at = 0.0

    def key(self, conversation_id: str) -> str:
        return self.key_prefix + conversation_id

    # -- the calls a router makes ----------------------------------------------------------
    async def check(self, conversation_id: str, model: str | None, new_ids: Sequence[int] | None) -> Decision:
        """Take the conversation's entry (atomically: GETDEL) and decide."""
        new_len = len(new_ids) if new_ids is not None else 0
        blob = await self._call("check", self.client.getdel(self.key(conversation_id)))
        if blob is _FAILED:
            decision = Decision(False, STORE_UNAVAILABLE, conversation_id, new_tokens=new_len,
                                detail=f"(store {self.url} unavailable: recompute)")
        else:
            stored = None
            if blob is not None:
                try:
                    stored = decode_turn(conversation_id, bytes(blob))
                except (ValueError, KeyError, TypeError) as err:
                    log.warning("guard: conversation=%s the store's entry is unreadable (%s): a miss",
                                conversation_id, err)
            decision = decide(stored, new_ids, self.clock(), model, conversation_id)
        self.counts[decision.reason] += 1
        log.info("%s", decision.log_line())
        return decision

    async def record(self, conversation_id: str, model: str | None, prompt_ids: Sequence[int] | None,
                     output_ids: Sequence[int] | None,
                     kv_transfer_params: Mapping[str, Any] | None) -> StoredTurn | None:
        """After a clean turn: SET the entry with the guard's TTL (PX)."""
        now = self.clock()
        try:
            turn = stored_turn(conversation_id, model, prompt_ids, output_ids, kv_transfer_params, now,
                               self.ttl_s, self.expiry_margin_s)
        except NotStorable as err:
            self.counts["skip-store"] += 1
            log.info("guard: skip-store conversation=%s reason=%s", conversation_id, err.args[0])
            await self.forget(conversation_id)
            return None
        ttl_ms = int((turn.expires_at - now) * 1000)
        if ttl_ms <= 0:
            self.counts["skip-store"] += 1
            log.info("guard: skip-store conversation=%s reason=expired-on-arrival", conversation_id)
            return None
        if await self._call("record", self.client.set(self.key(conversation_id), encode_turn(turn),
                                                       px=ttl_ms)) is _FAILED:
            return None
        self.counts["store"] += 1
        log.info("guard: store conversation=%s model=%s tokens=%d (prompt %d + output %d) ttl=%.0fs store=%s",
                 conversation_id, model or "-", turn.remote_num_tokens, turn.prompt_tokens, turn.output_tokens,
                 ttl_ms / 1000, self.url)
        return turn

    async def forget(self, conversation_id: str) -> None:
        await self._call("forget", self.client.delete(self.key(conversation_id)))

    def stats(self) -> dict[str, Any]:
        return {"store": self.url, "store_up": self._down_since is None, "decisions": dict(self.counts),
                "store_errors": dict(self.store_errors)}

    async def aclose(self) -> None:
        try:
            await self.client.aclose()
        except Exception:                         # noqa: BLE001 - closing a client of a store that is gone
            pass

    # -- failures ----------------------------------------------------------------------------
    async def _call(self, op: str, awaitable):
        """One store call with the timeout; _FAILED (counted, logged on the way down) when the
        store fails or is being left alone after a failure."""
        now = time.monotonic()
        if self._down_since is not None and now < self._retry_at:
            awaitable.close()                     # the coroutine is never run
            self.store_errors[op] += 1
            return _FAILED
        try:
            result = await asyncio.wait_for(awaitable, self.timeout_s * 2)
        except Exception as err:                  # noqa: BLE001 - redis errors, OSError, timeouts: all a recompute
            self.store_errors[op] += 1
            self._retry_at = time.monotonic() + self.retry_after_s
            if self._down_since is None:
                self._down_since = now
                log.error("guard: store %s unavailable (%s: %s): turns are recomputed, not reused, until it is "
                          "back", self.url, type(err).__name__, err)
            return _FAILED
        if self._down_since is not None:
            log.warning("guard: store %s is back after %.1fs", self.url, now - self._down_since)
            self._down_since = None
        return result


_FAILED: Any = object()


def store_guard(url: str, *, ttl_s: float = DEFAULT_TTL_S) -> StoreGuard:
    try:
        import redis  # noqa: F401
    except ImportError:
        raise SystemExit("vllmlint router: --state redis:// needs the redis client: "
                         "pip install 'vllmlint[router-redis]'") from None
    return StoreGuard(url, ttl_s=ttl_s)
