"""`vllmlint router`: a P/D router for bidirectional KV transfer that checks token-id continuation.

A drop-in for vLLM's reference multi-turn proxy (`disagg_proxy_multiturn.py`: same options,
same top-level `conversation_id` field, `/v1/chat/completions`, `/v1/completions`, `/health`),
with the one thing that proxy lacks: D's `kv_transfer_params` go to P only when the guard
(`vllmlint.guard`) says the new prompt's token ids start with exactly the ids D saw and produced.

Per request carrying a `conversation_id` (body field, or the `X-Conversation-Id` header):

1. render the request to token ids: `--render-url` (a `vllm launch render` tier), else the
   prefiller's own `/v1/chat/completions/render` (needs `--enable-scale-out` on 0.30+);
   a completions request whose prompt is already token ids needs no render;
2. ask the guard: a hit attaches D's stored parameters (`do_remote_decode: true`), a miss sends
   fresh ones (P computes the whole prompt);
3. prefill: the request with `max_tokens: 1`, non-streaming; with `--pin-token-ids` (default)
   `kv_transfer_params.prompt_token_ids` holds the rendered ids, so P and D compute exactly the
   ids the guard checked instead of rendering again;
4. decode, with P's parameters and `return_token_ids: true`. A client that streams gets D's
   stream relayed event by event as it arrives (`_relay`): the ids are read on the way (vLLM
   0.30's streamed `return_token_ids`: `prompt_token_ids` in the first chunk, each chunk's
   `token_ids`), and so are D's end-of-turn `kv_transfer_params` where the release streams them
   (0.33+, last chunk; 0.27-0.32 stream none, so such a turn is not stored: `--buffer-streams`
   calls D non-streamed and keeps the reuse at the cost of time to first token). Other clients
   get D's non-streamed answer;
5. D's prompt + output ids and parameters are recorded in the guard - after a whole answer, or a
   stream that reached `[DONE]` with no error event - and the answer goes back without what the
   router added (D's parameters, token ids the client did not ask for).

Requests without a conversation id, with several choices (`n > 1`) or with non-text content
(images, audio: their placeholder tokens are the same ids whatever the media) go P -> D with no
reuse and record nothing. If P fails while reused blocks were attached, the request is retried
once without them. Each response carries `X-Vllmlint-Guard: hit|miss; reason=...`.

The guard's state is in this process, or with `--state redis://host:port/db` in Redis/Valkey,
shared by several replicas (`state.py`).

HTTP is aiohttp (the `router` extra): its server (C parser, llhttp) for clients, one pooled
`ClientSession` for the engines. Limits (`Limits`, each a flag): a connection has
`--header-timeout` to send a request head and `--client-timeout` for the body (read in pieces:
a body over `--max-body-bytes` is a 413 at the limit, or at once by its Content-Length),
`--keepalive-timeout` idle between requests; one client address holds at most
`--max-connections-per-address`; at `--max-connections` the longest-idle connection is closed
for a new one, and when all are busy a few more are taken for /health and /metrics only (others
get a 503 and a close); a client that goes away cancels its upstream calls. Upstream calls have
connect, read-idle and total timeouts. Every upstream failure is answered 502 (unreachable, cut
off, not JSON) or 504 (timed out) with a JSON error - or, once a stream has started, ends it with
an error event and `[DONE]` - and one log line. `GET /metrics` is Prometheus text. No vLLM import.
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import inspect
import itertools
import json
import logging
import os
import sys
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterator, Mapping, Sequence
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from array import array

from .guard import DEFAULT_TTL_S, ContinuationGuard, Decision, NoReuse, UnguardedReuse
from .metrics import RouterMetrics

log = logging.getLogger("vllmlint.router")

ROUTER_FIELDS = ("conversation_id",)          # ours: never forwarded to an engine
FRESH_PREFILL_PARAMS = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                        "remote_block_ids": None, "remote_host": None, "remote_port": None}
TEXT_PARTS = {"text", "input_text", "output_text", "refusal", "thinking", "reasoning"}
POLICIES = ("guarded", "unguarded", "none")
COMPLETION_PATHS = ("/v1/chat/completions", "/v1/completions")
MAX_CONVERSATION_ID = 512                     # characters: the id is a key the guard keeps
MAX_STORED_PARAMS_BYTES = 256 * 1024          # D's kv_transfer_params (block ids) kept per conversation
DEFAULT_GUARD_MAX_TOKENS = 16_000_000         # 64 MB of token ids
MAX_EVENT_BYTES = 16 * 1024 * 1024            # one server-sent event of decode's stream (a 1M-token prompt's ids)
BODY_CHUNK = 256 * 1024                       # a request body is read in pieces, its size checked as it comes


@dataclass(frozen=True)
class Limits:
    """Client-side and upstream limits; every field is a command-line flag (defaults here)."""

    client_timeout_s: float = 30.0            # to send the request body once its head arrived
    header_timeout_s: float = 10.0            # to send a request head (a new or a kept-alive connection)
    keepalive_timeout_s: float = 15.0         # idle client connection between requests
    max_connections: int = 1024               # open client connections (idle ones are closed first at the cap)
    max_connections_per_address: int = 256    # one client address; more get 503 + close
    max_body_bytes: int = 64 * 1024 * 1024    # request body; more is a 413
    upstream_connect_timeout_s: float | None = 10.0
    upstream_read_timeout_s: float | None = 600.0   # engine silent: between two reads of a JSON answer,
                                                    # between two events of a stream
    upstream_timeout_s: float | None = 600.0        # one upstream call, connect to last byte
    upstream_max_connections: int = 1024      # pooled connections to all engines together
    upstream_keepalive_s: float = 4.0         # below uvicorn's 5 s (vLLM's servers): no reuse of a closed socket


@dataclass(frozen=True)
class Backend:
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"http://{host}:{self.port}"

    @classmethod
    def from_url(cls, url: str) -> "Backend":
        """`http://127.0.0.1:8100` (what verify hands replay) -> Backend."""
        parts = urlsplit(url if "//" in url else f"http://{url}")
        return cls(parts.hostname or "localhost", parts.port or 80)


@dataclass
class Turn:
    """What the router did for one request (the last `turn_history` are kept in `Router.turns`
    for replay and tests). Fixed size: the decision without its parameters, no token ids."""

    conversation_id: str
    decision: Decision | None
    prompt_tokens: int | None             # length of the rendered prompt the guard checked
    recorded: bool
    prefill: Backend | None
    decode: Backend | None
    retried_without_reuse: bool = False
    prefill_ms: float = 0.0
    decode_ms: float = 0.0


@dataclass
class Reply:
    """The answer to one completion request, before it is written: JSON, or `sse` events."""

    status: int
    body: Any
    headers: dict[str, str]
    sse: Iterator[bytes] | None = None
    stream: AsyncIterator[bytes] | None = None    # decode's events, relayed as they arrive


class UpstreamError(Exception):
    """A call to an engine that gave no usable answer: `status` is what the client gets (502/504),
    `kind` the metric label (connect, timeout, disconnected, payload, invalid-json, error)."""

    def __init__(self, status: int, kind: str, message: str):
        super().__init__(message)
        self.status, self.kind = status, kind


# -- the server: aiohttp's low-level server with a header deadline and connection limits ------------

def _reject_bytes(reason: str) -> bytes:
    body = json.dumps({"error": f"too many connections ({reason}), try again"}).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


# connections beyond --max-connections that are still accepted, for /health and /metrics only:
# a load balancer's probe must not be refused because the cap is full (it would eject the replica)
PROBE_RESERVE = 16
PROBE_PATHS = ("/health", "/healthz", "/metrics")


class _Connection(RequestHandler):
    """aiohttp's per-connection protocol plus the limits it lacks (as nginx's
    `client_header_timeout` and `limit_conn`): the request head must arrive within
    `header_timeout`; one client address holds at most `max_per_address` connections; at the
    cap, the connection idle the longest without a request in progress is closed to make room,
    and when none is idle a connection is still taken on the probe reserve (it may only ask for
    /health or /metrics) before any is refused with a 503."""

    def __init__(self, manager: "_Server", *, header_timeout: float, **kwargs):
        super().__init__(manager, **kwargs)
        self._header_timeout = header_timeout
        self._header_handle: asyncio.TimerHandle | None = None
        self._header_count = 0
        self._peer = ""
        self.probe_only = False
        self.idle_since = 0.0
        self._finished = 0                        # requests answered; _request_count counts those parsed

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        manager = self._manager
        peer = transport.get_extra_info("peername")
        self._peer = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        reason = manager.admit(self)
        if reason is not None:
            manager.refuse(reason, self._peer)
            self._manager = None                  # connection_lost: nothing to undo
            self._peer = ""
            transport.write(_reject_bytes(reason))   # type: ignore[attr-defined]
            transport.close()
            return
        manager.per_address[self._peer] += 1
        self.idle_since = self._loop.time()
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        before = self._request_count
        self.idle_since = self._loop.time()
        super().data_received(data)
        # a request started but its headers are not complete: they have header_timeout
        if self._header_handle is None and self._request_count == before and not self._busy() \
                and not self._force_close:
            self._arm()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._header_handle is not None:
            self._header_handle.cancel()
            self._header_handle = None
        manager = self._manager
        if manager is not None and self._peer:
            manager.release(self)
            self._peer = ""
        super().connection_lost(exc)

    async def _handle_request(self, request, start_time, request_handler):   # type: ignore[override]
        try:
            return await super()._handle_request(request, start_time, request_handler)
        finally:
            self._finished += 1
            self.idle_since = self._loop.time()

    def _busy(self) -> bool:
        # a request parsed and not yet answered (queued, between the queue and its task, or running)
        return self._request_count != self._finished or getattr(self, "_request_in_progress", False)

    def idle(self) -> bool:
        """No request in progress or queued: the connection waits for a request head."""
        return not self._busy() and not self._force_close

    def _arm(self) -> None:
        self._header_count = self._request_count
        self._header_handle = self._loop.call_later(self._header_timeout, self._header_deadline)

    def _header_deadline(self) -> None:
        self._header_handle = None
        if self._force_close or self._busy() or self._request_count != self._header_count:
            return
        if self._manager is not None:
            self._manager.timed_out += 1
        self.force_close()


class _Server(web.Server):
    def __init__(self, handler, *, max_connections: int, header_timeout: float, max_per_address: int,
                 **kwargs):
        super().__init__(handler, **kwargs)
        self.max_connections = max_connections
        self.max_per_address = max_per_address
        self.header_timeout = header_timeout
        self.per_address: Counter[str] = Counter()
        self.probes = 0                           # connections open on the probe reserve
        self.refused: Counter[str] = Counter()    # reason -> connections refused with 503
        self.evicted = 0                          # idle connections closed at the cap
        self.timed_out = 0
        self._refuse_logged: dict[str, float] = {}

    @property
    def rejected(self) -> int:
        return sum(self.refused.values())

    def __call__(self) -> RequestHandler:
        return _Connection(self, loop=self._loop, header_timeout=self.header_timeout, **self._kwargs)

    def admit(self, conn: _Connection) -> str | None:
        """None to take the connection, else why it is refused."""
        if conn._peer and self.per_address[conn._peer] >= self.max_per_address:
            return "per-address"
        if len(self._connections) - self.probes < self.max_connections:
            return None
        victim = min((c for c in self._connections if isinstance(c, _Connection) and c.idle() and not c.probe_only),
                     key=lambda c: c.idle_since, default=None)
        if victim is not None:
            self.evicted += 1
            victim.force_close()                 # idle: no request is lost (HTTP lets a server close it)
            return None
        if self.probes < PROBE_RESERVE:
            self.probes += 1
            conn.probe_only = True
            return None
        return "cap"

    def release(self, conn: _Connection) -> None:
        self.per_address[conn._peer] -= 1
        if self.per_address[conn._peer] <= 0:
            del self.per_address[conn._peer]
        if conn.probe_only:
            self.probes -= 1
            conn.probe_only = False

    def refuse(self, reason: str, peer: str) -> None:
        self.refused[reason] += 1
        now = time.monotonic()
        key = f"{reason} {peer}"
        if now - self._refuse_logged.get(key, float("-inf")) >= 10.0:    # one line per 10 s and cause
            if len(self._refuse_logged) > 1024:
                self._refuse_logged.clear()
            self._refuse_logged[key] = now
            log.warning("router: connection from %s refused with 503 (%s: %s)", peer or "?", reason,
                        f"--max-connections-per-address {self.max_per_address}" if reason == "per-address"
                        else f"--max-connections {self.max_connections} busy, probe reserve full")


class Router:
    """The router as an object: `await Router(...).start(host, port)`, `await router.close()`.

    `policy` selects what happens between turns: "guarded" (the default: the token-id guard),
    "unguarded" (reuse by conversation id like the reference proxy: replay only), "none".
    `timeout_s` is the total per upstream call (None: no total); `limits` the rest.
    """

    def __init__(self, prefillers: Sequence[Backend], decoders: Sequence[Backend], *,
                 render_url: str | None = None, policy: str = "guarded",
                 guard: Any = None, guard_ttl_s: float = DEFAULT_TTL_S, max_conversations: int = 4096,
                 guard_max_tokens: int = DEFAULT_GUARD_MAX_TOKENS,
                 pin_token_ids: bool = True, rewrite_remote_host: bool = True,
                 timeout_s: float | None = 600.0, api_key: str | None = None,
                 limits: Limits | None = None, turn_history: int = 1000, buffer_streams: bool = False,
                 state: str | None = None):
        if not prefillers or not decoders:
            raise ValueError("at least one prefiller and one decoder")
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}")
        self.prefillers, self.decoders = list(prefillers), list(decoders)
        self.render_url = render_url.rstrip("/") if render_url else None
        self.policy = policy
        if guard is None and state and policy == "guarded":
            from .state import store_guard        # the redis client is imported only for --state redis://
            guard = store_guard(state, ttl_s=guard_ttl_s)
        if guard is None:
            guard = (ContinuationGuard(ttl_s=guard_ttl_s, max_conversations=max_conversations,
                                       max_tokens=guard_max_tokens)
                     if policy == "guarded" else UnguardedReuse() if policy == "unguarded" else NoReuse())
        self.guard = guard
        self.pin_token_ids = pin_token_ids
        self.buffer_streams = buffer_streams
        self.guard_max_tokens = guard_max_tokens
        self._no_stream_kv_warned = False
        self.rewrite_remote_host = rewrite_remote_host
        limits = limits or Limits()
        self.limits = dataclasses.replace(limits, upstream_timeout_s=timeout_s)
        self.timeout_s = timeout_s
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._p = itertools.cycle(self.prefillers)
        self._d = itertools.cycle(self.decoders)
        self.turns: deque[Turn] = deque(maxlen=turn_history)
        self.metrics = RouterMetrics()
        self._server: _Server | None = None
        self._runner: web.ServerRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._port = 0
        self._render_warned = False

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self, host: str = "127.0.0.1", port: int = 0) -> "Router":
        lim = self.limits
        loop = asyncio.get_running_loop()

        def make_request(message, payload, protocol, writer, task):
            return web.BaseRequest(message, payload, protocol, writer, task, loop,
                                   client_max_size=lim.max_body_bytes)

        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=lim.upstream_max_connections, limit_per_host=0,
                                           keepalive_timeout=lim.upstream_keepalive_s),
            timeout=aiohttp.ClientTimeout(total=lim.upstream_timeout_s, connect=lim.upstream_connect_timeout_s,
                                          sock_read=lim.upstream_read_timeout_s),
            trust_env=False, auto_decompress=True)
        self._server = _Server(self.handle, request_factory=make_request, handler_cancellation=True,
                               max_connections=lim.max_connections, header_timeout=lim.header_timeout_s,
                               max_per_address=lim.max_connections_per_address,
                               keepalive_timeout=lim.keepalive_timeout_s, access_log=None,
                               max_line_size=16 * 1024, max_field_size=16 * 1024, lingering_time=1.0)
        self._runner = web.ServerRunner(self._server, handle_signals=False, shutdown_timeout=5.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, backlog=1024, reuse_address=True)
        await site.start()
        self._port = site._server.sockets[0].getsockname()[1]   # type: ignore[union-attr]
        log.info("router: listening on %s:%d, %d prefill, %d decode, policy=%s, render=%s", host, self._port,
                 len(self.prefillers), len(self.decoders), self.policy,
                 self.render_url or "prefiller /v1/*/render")
        return self

    @property
    def port(self) -> int:
        return self._port

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        closer = getattr(self.guard, "aclose", None)
        if closer is not None:
            await closer()

    async def serve_forever(self) -> None:
        """Until SIGTERM or SIGINT (where the loop can take signal handlers), or cancellation."""
        import signal

        assert self._runner is not None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        handled = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
                handled.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        try:
            await stop.wait()
            log.info("router: stopping; open requests get up to 5 s")
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)

    # -- HTTP ----------------------------------------------------------------------------
    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        t0 = time.monotonic()
        path = request.path
        label = path if path in COMPLETION_PATHS or path in ("/health", "/healthz", "/v1/models", "/metrics") \
            else "other"
        status = 500
        self.metrics.in_flight += 1
        first_byte = _FirstByte(self.metrics, label, t0)
        try:
            resp = await self._dispatch(request, first_byte)
            status = resp.status
            if label in COMPLETION_PATHS:
                first_byte.seen(False)
            return resp
        except (asyncio.CancelledError, ConnectionError):
            status = 499                          # the client went away; its upstream calls are cancelled
            self.metrics.client_errors["disconnected"] += 1
            log.info("router: client %s went away during %s %s; upstream calls cancelled", request.remote,
                     request.method, path)
            raise
        except Exception:                         # noqa: BLE001 - answered 500, logged with the trace
            log.exception("router: %s %s failed", request.method, path)
            return _json({"error": "internal error in the router"}, 500)
        finally:
            self.metrics.in_flight -= 1
            self.metrics.observe_request(label, status, time.monotonic() - t0)

    def _metrics_text(self) -> str:
        server = self._server
        if server is not None and server.timed_out:
            self.metrics.client_errors["header-timeout"] = server.timed_out
        guard = self.guard
        return self.metrics.render(
            getattr(guard, "counts", {}), guard.stats(), len(server._connections) if server else 0,
            server.refused if server else {}, server.evicted if server else 0,
            getattr(guard, "store_errors", {}))

    async def _dispatch(self, request: web.BaseRequest, first_byte: "_FirstByte") -> web.StreamResponse:
        method, path = request.method, request.path
        if method == "GET" and path in ("/health", "/healthz"):
            return _json({"status": "ok", "policy": self.policy, "guard": self.guard.stats()})
        if method == "GET" and path == "/metrics":
            return web.Response(body=self._metrics_text().encode(),
                                headers={"content-type": "text/plain; version=0.0.4; charset=utf-8"})
        if getattr(request.protocol, "probe_only", False):
            # taken on the probe reserve at the cap: /health and /metrics only
            server = self._server
            if server is not None:
                server.refused["cap"] += 1
            resp = _json({"error": "too many connections (cap), try again"}, 503)
            resp.force_close()
            return resp
        if method == "GET" and path == "/v1/models":
            return await self._forward_get(self.decoders[0], request)
        if path in COMPLETION_PATHS:
            if method != "POST":
                return _json({"error": "method not allowed"}, 405)
            raw = await self._read_body(request)
            if isinstance(raw, web.Response):
                return raw
            try:
                body = json.loads(raw or b"null")
            except ValueError as err:
                return _json({"error": f"invalid JSON body: {err}"}, 400)
            except RecursionError:
                return _json({"error": "invalid JSON body: nested too deeply"}, 400)
            finally:
                del raw                           # the request's bytes: freed now, not at the next collection
            if not isinstance(body, dict):
                return _json({"error": "the body must be a JSON object"}, 400)
            reply = await self.complete(path, body, request.headers)
            return await self._write(request, reply, first_byte)
        return _json({"error": f"not found: {path}"}, 404)

    async def _read_body(self, request: web.BaseRequest) -> bytes | web.Response:
        """The request body, or the error response (408, 413). Read in pieces with a running size
        check, so an oversized body is refused at the limit (or by its Content-Length before any of
        it is read) and nothing of it outlives the 413: no exception holds its buffer in a cycle."""
        limit, timeout = self.limits.max_body_bytes, self.limits.client_timeout_s
        length = request.content_length
        if length is not None and length > limit:
            return self._too_large(request, limit)
        buf = bytearray()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                chunk = await asyncio.wait_for(request.content.read(BODY_CHUNK), max(0.0, deadline - loop.time()))
                if not chunk:
                    return bytes(buf)
                if len(buf) + len(chunk) > limit:
                    buf.clear()
                    return self._too_large(request, limit)
                buf += chunk
        except asyncio.TimeoutError:
            buf.clear()
            self.metrics.client_errors["body-timeout"] += 1
            log.warning("router: client %s did not send its body within %.0fs", request.remote, timeout)
            resp = _json({"error": f"request body not received within {timeout:g}s"}, 408)
            resp.force_close()
            return resp

    def _too_large(self, request: web.BaseRequest, limit: int) -> web.Response:
        self.metrics.client_errors["body-too-large"] += 1
        log.info("router: client %s sent a body over --max-body-bytes %d: 413", request.remote, limit)
        resp = _json({"error": f"request body larger than {limit} bytes"}, 413)
        resp.force_close()                        # the rest of the body is not read: the connection ends
        return resp

    async def _write(self, request: web.BaseRequest, reply: Reply, first_byte: "_FirstByte") -> web.StreamResponse:
        if reply.sse is None and reply.stream is None:
            return _json(reply.body, reply.status, reply.headers)
        resp = web.StreamResponse(status=reply.status, headers={
            "content-type": "text/event-stream", "cache-control": "no-cache", **reply.headers})
        try:
            await resp.prepare(request)
            if reply.stream is not None:
                async for event in reply.stream:
                    await resp.write(event)
                    first_byte.seen(True)
            else:
                for event in reply.sse or ():
                    await resp.write(event)
                    first_byte.seen(True)
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception as err:                  # noqa: BLE001 - the stream is cut: say so in it
            log.error("router: the event stream broke after it started: %s: %s", type(err).__name__, err)
            self.metrics.upstream_error("stream", type(err).__name__)
            await resp.write(_sse_error(f"the router's event stream broke: {type(err).__name__}: {err}"))
        finally:
            if reply.stream is not None:
                await reply.stream.aclose()       # type: ignore[attr-defined]  # releases decode's connection
        await resp.write_eof()
        return resp

    def _headers(self, client: Mapping[str, str], request_id: str) -> dict[str, str]:
        h = {"x-request-id": request_id}
        if self.api_key:
            h["authorization"] = f"Bearer {self.api_key}"
        elif client.get("authorization"):
            h["authorization"] = client["authorization"]
        return h

    async def _forward_get(self, backend: Backend, request: web.BaseRequest) -> web.StreamResponse:
        assert self._session is not None
        url = backend.url + request.path
        try:
            async with self._session.get(url, headers=self._headers(request.headers, "models")) as r:
                data = await r.read()
                ctype = r.headers.get("content-type", "application/json")
                status = r.status
        except Exception as err:                  # noqa: BLE001 - classified below
            e = self._classify("models", url, err)
            return _json({"error": f"decoder {backend.url}: {e}"}, e.status)
        return web.Response(body=data, status=status, headers={"content-type": ctype})

    async def _post(self, url: str, body: dict, headers: dict[str, str], upstream: str) -> tuple[int, Any]:
        """POST JSON to an engine: (status, parsed JSON). A 2xx whose body is not JSON, a reply
        cut off, a refused connection or a timeout raise UpstreamError (logged, counted)."""
        assert self._session is not None
        try:
            async with self._session.post(url, data=_dumps(body),
                                          headers={**headers, "content-type": "application/json"}) as r:
                status = r.status
                raw = await r.read()
        except Exception as err:                  # noqa: BLE001 - classified below
            raise self._classify(upstream, url, err) from None
        try:
            return status, json.loads(raw)
        except ValueError:
            if status < 400:
                self.metrics.upstream_error(upstream, "invalid-json")
                log.error("router: %s %s answered %d with a body that is not JSON (%d bytes: %r)", upstream, url,
                          status, len(raw), raw[:80])
                raise UpstreamError(502, "invalid-json",
                                    f"answered {status} with a body that is not JSON ({len(raw)} bytes)") from None
            return status, {"error": raw.decode("utf-8", "replace")[:2000]}

    def _classify(self, upstream: str, url: str, err: BaseException) -> UpstreamError:
        if isinstance(err, asyncio.TimeoutError):
            kind = "connect-timeout" if isinstance(err, aiohttp.ConnectionTimeoutError) else "timeout"
            status = 504
        elif isinstance(err, aiohttp.ClientConnectorError):
            kind, status = "connect", 502
        elif isinstance(err, aiohttp.ClientPayloadError):
            kind, status = "payload", 502         # the body was cut off (closed mid-body, bad chunking)
        elif isinstance(err, aiohttp.ServerDisconnectedError):
            kind, status = "disconnected", 502
        else:
            kind, status = "error", 502
        text = str(err) or type(err).__name__
        self.metrics.upstream_error(upstream, kind)
        log.error("router: %s %s failed (%s): %s", upstream, url, kind, text)
        return UpstreamError(status, kind, f"{kind}: {text}")

    # -- the request flow ------------------------------------------------------------------
    async def complete(self, path: str, body: dict, client_headers: Mapping[str, str]) -> Reply:
        chat = path == "/v1/chat/completions"
        request_id = str(uuid.uuid4())
        headers = self._headers(client_headers, request_id)
        conv = body.get("conversation_id") or client_headers.get("x-conversation-id") or ""
        conv = str(conv) if conv else ""
        if len(conv) > MAX_CONVERSATION_ID:
            return Reply(400, {"error": f"conversation_id longer than {MAX_CONVERSATION_ID} characters"}, {})
        base = {k: v for k, v in body.items() if k not in ROUTER_FIELDS}
        base.pop("kv_transfer_params", None)
        wants_stream = bool(base.get("stream"))
        wants_ids = bool(base.get("return_token_ids"))
        model = base.get("model")
        guarded = bool(conv) and self._guardable(base, chat)

        prompt_ids: list[int] | None = None
        decision: Decision | None = None
        if guarded:
            if self.policy == "guarded":
                prompt_ids = await self._render(base, chat, headers)
            decision = await _maybe(self.guard.check(conv, model, prompt_ids))
        elif conv:
            await _maybe(self.guard.forget(conv))
            log.info("router: conversation=%s not guarded (n>1, echo, media or batched prompt): no reuse", conv)

        prefill, decode = next(self._p), next(self._d)
        turn = Turn(conv, dataclasses.replace(decision, kv_transfer_params=None) if decision else None,
                    len(prompt_ids) if prompt_ids is not None else None, False, prefill, decode)
        self.turns.append(turn)

        # prefill ----------------------------------------------------------------------------
        reuse = decision.kv_transfer_params if decision is not None and decision.hit else None
        t0 = time.monotonic()
        try:
            status, p_resp = await self._post(prefill.url + path, self._prefill_body(base, reuse, prompt_ids),
                                              headers, "prefill")
            if status >= 400 and reuse is not None:
                log.warning("router: conversation=%s prefill answered %d with reused blocks attached; "
                            "retrying without them", conv, status)
                turn.retried_without_reuse = True
                status, p_resp = await self._post(prefill.url + path, self._prefill_body(base, None, prompt_ids),
                                                  headers, "prefill")
        except UpstreamError as err:
            return self._upstream_error("prefiller", prefill, err, decision)
        turn.prefill_ms = (time.monotonic() - t0) * 1000
        if status >= 400:
            self._status_error("prefill", prefill.url + path, status, p_resp)
            return Reply(status, p_resp, self._guard_header(decision))

        # decode -------------------------------------------------------------------------------
        d_body = dict(base)   # top-level keys change; nested values are shared, never mutated
        through = wants_stream and not self.buffer_streams
        if not through:
            d_body["stream"] = False
            d_body.pop("stream_options", None)
        p_kv = p_resp.get("kv_transfer_params") if isinstance(p_resp, dict) else None
        if isinstance(p_kv, dict) and p_kv:
            p_kv = dict(p_kv)
            if self.rewrite_remote_host:
                p_kv["remote_host"] = prefill.host
            if self.pin_token_ids and prompt_ids is not None:
                p_kv.setdefault("prompt_token_ids", prompt_ids)
            d_body["kv_transfer_params"] = p_kv
        elif self.pin_token_ids and prompt_ids is not None:
            d_body["kv_transfer_params"] = {"prompt_token_ids": prompt_ids}
        if guarded:
            d_body["return_token_ids"] = True
        flow = _Flow(conv, model, chat, guarded, wants_ids, prompt_ids, decode, decision, turn)
        if through:
            return await self._decode_stream(decode.url + path, d_body, headers, flow)
        t0 = time.monotonic()
        try:
            status, d_resp = await self._post(decode.url + path, d_body, headers, "decode")
        except UpstreamError as err:
            return self._upstream_error("decoder", decode, err, decision)
        turn.decode_ms = (time.monotonic() - t0) * 1000
        return await self._decoded(status, d_resp, flow, wants_stream,
                                   bool((base.get("stream_options") or {}).get("include_usage")))

    async def _decoded(self, status: int, d_resp: Any, flow: "_Flow", wants_stream: bool,
                       include_usage: bool) -> Reply:
        """D's whole (non-streamed) answer: record the turn, answer as JSON or as events."""
        decode, decision = flow.decode, flow.decision
        if status >= 400:
            self._status_error("decode", decode.url, status, d_resp)
            return Reply(status, d_resp, self._guard_header(decision))
        if not isinstance(d_resp, dict):
            self.metrics.upstream_error("decode", "invalid-json")
            log.error("router: decoder %s answered %d with JSON that is not an object", decode.url, status)
            return Reply(502, {"error": f"decoder {decode.url}: answered {status} with JSON that is not an object"},
                         self._guard_header(decision))
        if flow.guarded:
            d_prompt, d_output = _returned_ids(d_resp, flow.chat)
            await self._record(flow, d_prompt, d_output, d_resp.get("kv_transfer_params"))
        answer = _client_view(d_resp, flow.chat, flow.wants_ids)
        headers_out = self._guard_header(decision)
        if wants_stream:
            return Reply(200, None, headers_out, sse=_sse(answer, flow.chat, include_usage))
        return Reply(200, answer, headers_out)

    async def _record(self, flow: "_Flow", d_prompt, d_output, d_kv) -> None:
        """Store D's end of turn in the guard (only ever after a clean answer)."""
        if isinstance(d_kv, dict):
            d_kv = {k: v for k, v in d_kv.items() if k != "prompt_token_ids"}   # our pin, if echoed
            if self.rewrite_remote_host and d_kv.get("remote_host") is not None:
                d_kv["remote_host"] = flow.decode.host
            if len(json.dumps(d_kv)) > MAX_STORED_PARAMS_BYTES:
                log.warning("router: conversation=%s decode's kv_transfer_params exceed %d bytes; not stored",
                            flow.conv, MAX_STORED_PARAMS_BYTES)
                d_kv = None
        else:
            d_kv = None
        if d_prompt is None and self.pin_token_ids and flow.prompt_ids is not None:
            d_prompt = flow.prompt_ids            # D used the pinned ids verbatim
        flow.turn.recorded = await _maybe(self.guard.record(flow.conv, flow.model, d_prompt, d_output, d_kv)) \
            is not None

    def _status_error(self, upstream: str, url: str, status: int, body: Any) -> None:
        """An engine answered an HTTP error: passed through to the client, counted and logged once."""
        self.metrics.upstream_error(upstream, f"status-{status // 100}xx")
        log.log(logging.ERROR if status >= 500 else logging.WARNING, "router: %s %s answered %d: %s",
                upstream, url, status, _dumps(body)[:300].decode("utf-8", "replace"))

    # -- streaming through ------------------------------------------------------------------
    async def _decode_stream(self, url: str, d_body: dict, headers: dict[str, str], flow: "_Flow") -> Reply:
        """Call decode streaming; once its head is in, the client's answer relays its events."""
        assert self._session is not None
        lim = self.limits
        timeout = aiohttp.ClientTimeout(total=lim.upstream_timeout_s, connect=lim.upstream_connect_timeout_s,
                                        sock_read=lim.upstream_read_timeout_s)
        t0 = time.monotonic()
        try:
            resp = await self._session.post(url, data=_dumps(d_body), timeout=timeout,
                                            headers={**headers, "content-type": "application/json"})
        except Exception as err:                  # noqa: BLE001 - classified below
            return self._upstream_error("decoder", flow.decode, self._classify("decode", url, err), flow.decision)
        if resp.status >= 400 or resp.content_type != "text/event-stream":
            # an error, or an engine that answered in one piece: read it as a JSON answer
            try:
                raw = await resp.read()
            except Exception as err:              # noqa: BLE001 - classified below
                return self._upstream_error("decoder", flow.decode, self._classify("decode", url, err),
                                            flow.decision)
            finally:
                resp.release()
            flow.turn.decode_ms = (time.monotonic() - t0) * 1000
            try:
                d_resp = json.loads(raw)
            except (ValueError, RecursionError):
                if resp.status < 400:
                    self.metrics.upstream_error("decode", "invalid-json")
                    log.error("router: decode %s answered %d with a body that is neither events nor JSON "
                              "(%d bytes: %r)", url, resp.status, len(raw), raw[:80])
                    return self._upstream_error("decoder", flow.decode, UpstreamError(
                        502, "invalid-json", f"answered {resp.status} with a body that is not JSON "
                                             f"({len(raw)} bytes)"), flow.decision)
                d_resp = {"error": raw.decode("utf-8", "replace")[:2000]}
            include_usage = bool((d_body.get("stream_options") or {}).get("include_usage"))
            return await self._decoded(resp.status, d_resp, flow, True, include_usage)
        return Reply(200, None, self._guard_header(flow.decision), stream=self._relay(resp, url, flow, t0))

    async def _relay(self, resp: aiohttp.ClientResponse, url: str, flow: "_Flow", t0: float) -> AsyncIterator[bytes]:
        """Decode's events, one at a time, as they arrive: at most one event (and the piece of the
        next that came with it) is held. Token ids and D's kv_transfer_params are read on the way;
        what the client did not ask for is taken out. The turn is recorded when [DONE] arrives
        after no error event; a stream that breaks, stalls (`--upstream-read-timeout` with no
        complete event) or carries a malformed event ends with an error event and [DONE]."""
        idle = self.limits.upstream_read_timeout_s
        loop = asyncio.get_running_loop()
        st = _StreamState(self.guard_max_tokens)
        buf = bytearray()
        scan = 0
        failure: tuple[str, str] | None = None
        deadline = loop.time() + idle if idle else None
        try:
            while True:
                end = buf.find(b"\n\n", scan)
                if end < 0:
                    if len(buf) > MAX_EVENT_BYTES:
                        failure = ("event-too-large", f"an event over {MAX_EVENT_BYTES} bytes")
                        break
                    scan = max(0, len(buf) - 1)
                    try:
                        wait = None if deadline is None else max(0.0, deadline - loop.time())
                        chunk = await asyncio.wait_for(resp.content.readany(), wait)
                    except asyncio.TimeoutError:
                        failure = ("timeout", f"no event for {idle:g}s (--upstream-read-timeout)")
                        break
                    except aiohttp.ClientError as err:
                        failure = ("payload", f"{type(err).__name__}: {err}")
                        break
                    if not chunk:
                        failure = ("payload", "the stream ended before [DONE]")
                        break
                    buf += chunk
                    continue
                raw = bytes(buf[:end + 2])
                del buf[:end + 2]
                scan = 0
                if deadline is not None:
                    deadline = loop.time() + idle
                try:
                    out = st.event(raw, flow.chat, flow.wants_ids)
                except ValueError as err:
                    failure = ("malformed", str(err))
                    break
                if st.done:
                    flow.turn.decode_ms = (time.monotonic() - t0) * 1000
                    if flow.guarded and not st.error:
                        await self._record_stream(flow, st)
                if out:
                    yield out
                if st.done:
                    return
        finally:
            if st.done:
                resp.release()
            else:
                resp.close()                      # a client that left closes decode's stream: D aborts it
            buf = bytearray()
        self.metrics.upstream_error("decode", failure[0])
        log.error("router: decode %s stream for conversation=%s broke after %d events (%s): %s", url,
                  flow.conv or "-", st.events, failure[0], failure[1])
        yield _sse_error(f"decoder {flow.decode.url}: the stream broke ({failure[0]}): {failure[1]}")

    async def _record_stream(self, flow: "_Flow", st: "_StreamState") -> None:
        if st.too_long:
            log.info("guard: skip-store conversation=%s reason=output-over-%d-tokens", flow.conv, st.max_tokens)
            await _maybe(self.guard.forget(flow.conv))
            return
        if st.kv is None and not self._no_stream_kv_warned:
            self._no_stream_kv_warned = True
            log.warning("router: decode's event stream carried no kv_transfer_params (vLLM before 0.33): "
                        "streamed turns are not reused; --buffer-streams reuses them at the cost of "
                        "time to first token")
        await self._record(flow, st.prompt_ids, st.output_ids, st.kv)

    def _prefill_body(self, base: dict, reuse: dict | None, prompt_ids: list[int] | None) -> dict:
        body = dict(base)   # top-level keys change; nested values are shared, never mutated
        body["stream"] = False
        body["max_tokens"] = 1
        for key in ("max_completion_tokens", "min_tokens", "stream_options", "return_token_ids"):
            body.pop(key, None)
        kv = dict(reuse) if reuse is not None else dict(FRESH_PREFILL_PARAMS)
        if self.pin_token_ids and prompt_ids is not None:
            kv["prompt_token_ids"] = prompt_ids
        body["kv_transfer_params"] = kv
        return body

    async def _render(self, base: dict, chat: bool, headers: dict[str, str]) -> list[int] | None:
        """The request's prompt token ids, from the render tier (or P's render endpoint)."""
        if not chat:
            prompt = base.get("prompt")
            if isinstance(prompt, list) and prompt and _all_ints(prompt):
                return list(prompt)
        endpoint = "/v1/chat/completions/render" if chat else "/v1/completions/render"
        if self.render_url:
            url = self.render_url if "/render" in urlsplit(self.render_url).path else self.render_url + endpoint
        else:
            url = self.prefillers[0].url + endpoint
        body = dict(base)   # top-level keys change; nested values are shared, never mutated
        body["stream"] = False
        body.pop("stream_options", None)
        try:
            status, resp = await self._post(url, body, headers, "render")
        except UpstreamError as err:
            status, resp = 0, {"error": str(err)}
        ids = _rendered_ids(resp) if status == 200 else None
        if ids is None:
            level = logging.WARNING if not self._render_warned else logging.INFO
            self._render_warned = True
            log.log(level, "router: render failed (%s %s: %s); no reuse for this turn%s", url, status or "error",
                    str(resp)[:200], "" if self.render_url else
                    " - the prefiller needs --enable-scale-out (vLLM 0.30+), or pass --render-url")
        return ids

    @staticmethod
    def _guardable(body: dict, chat: bool) -> bool:
        if (body.get("n") or 1) != 1 or (body.get("best_of") or 1) != 1 or body.get("echo"):
            return False
        if chat:
            for msg in body.get("messages") or []:
                content = msg.get("content") if isinstance(msg, dict) else None
                if isinstance(content, list):
                    for part in content:
                        if isinstance(part, dict) and part.get("type", "text") not in TEXT_PARTS:
                            return False
            return True
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            return True
        return isinstance(prompt, list) and bool(prompt) and set(map(type, prompt)) <= {int, bool}

    @staticmethod
    def _guard_header(decision: Decision | None) -> dict[str, str]:
        return {"x-vllmlint-guard": decision.header()} if decision is not None else {}

    def _upstream_error(self, what: str, backend: Backend, err: UpstreamError, decision) -> Reply:
        return Reply(err.status, {"error": f"{what} {backend.url}: {err}", "type": "upstream_error",
                                  "kind": err.kind}, self._guard_header(decision))


class _FirstByte:
    """Observes the time to the first byte of one answer's body, once."""

    __slots__ = ("metrics", "label", "t0", "done")

    def __init__(self, metrics: RouterMetrics, label: str, t0: float):
        self.metrics, self.label, self.t0, self.done = metrics, label, t0, False

    def seen(self, streamed: bool) -> None:
        if not self.done:
            self.done = True
            self.metrics.observe_first_byte(self.label, streamed, time.monotonic() - self.t0)


async def _maybe(value):
    """A guard call's result: the in-process guards answer at once, a shared store is awaited."""
    return await value if inspect.isawaitable(value) else value


@dataclass
class _Flow:
    """One request between prefill and the end of decode's answer."""

    conv: str
    model: str | None
    chat: bool
    guarded: bool
    wants_ids: bool
    prompt_ids: list[int] | None
    decode: Backend
    decision: Decision | None
    turn: Turn


class _StreamState:
    """What the relay reads from decode's events as they pass (vLLM 0.30's `return_token_ids`
    stream: chat puts `prompt_token_ids` at the top of the first chunk, completions in its choice;
    each choice's `token_ids` are that chunk's new output ids; 0.33+ adds D's
    `kv_transfer_params` at the top of the last content chunk)."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.prompt_ids: list[int] | None = None
        self.out = array("i")
        self.kv: dict | None = None
        self.done = False
        self.error = False
        self.too_long = False
        self.events = 0

    @property
    def output_ids(self) -> array:
        return self.out

    def event(self, raw: bytes, chat: bool, wants_ids: bool) -> bytes:
        """The bytes to forward for one event (`raw` ends with a blank line); raises ValueError
        when it is not a well-formed vLLM event."""
        self.events += 1
        data = None
        for line in raw.split(b"\n"):
            if line.startswith(b"data:"):
                piece = line[5:].lstrip(b" ").rstrip(b"\r")
                data = piece if data is None else data + b"\n" + piece
        if data is None:
            return raw                            # a comment or keep-alive: forwarded as it is
        if data == b"[DONE]":
            self.done = True
            return raw
        if self.done:
            raise ValueError("an event after [DONE]")
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError):
            raise ValueError(f"an event that is not JSON ({len(data)} bytes: {data[:60]!r})") from None
        if not isinstance(obj, dict):
            raise ValueError("an event that is not a JSON object")
        if "error" in obj:
            self.error = True                     # vLLM's own error event: passed on, the turn is not stored
            return raw
        changed = False
        kv = obj.pop("kv_transfer_params", None)
        if kv is not None:
            changed = True
            if isinstance(kv, dict):
                self.kv = kv
        if chat and isinstance(obj.get("prompt_token_ids"), list):
            self.prompt_ids = _int_list(obj["prompt_token_ids"])
            if not wants_ids:
                del obj["prompt_token_ids"]
                changed = True
        choices = obj.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if not isinstance(choice, dict):
                    raise ValueError("a choice that is not a JSON object")
                if not chat and isinstance(choice.get("prompt_token_ids"), list):
                    self.prompt_ids = _int_list(choice["prompt_token_ids"])
                ids = choice.get("token_ids")
                if isinstance(ids, list) and not self.too_long:
                    if len(self.out) + len(ids) > self.max_tokens:
                        self.too_long = True      # bounded: the ids of a huge answer are not kept
                        self.out = array("i")
                    else:
                        try:
                            self.out.extend(ids)
                        except (TypeError, OverflowError):
                            raise ValueError("token_ids that are not token ids") from None
                if not wants_ids and ("token_ids" in choice or "prompt_token_ids" in choice):
                    choice.pop("token_ids", None)
                    choice.pop("prompt_token_ids", None)
                    changed = True
        return b"data: " + _dumps(obj) + b"\n\n" if changed else raw


_COMPACT = json.JSONEncoder(separators=(",", ":"))


def _dumps(obj: Any) -> bytes:
    """Compact JSON (as FastAPI answers): token-id lists are a sixth shorter than with spaces."""
    return _COMPACT.encode(obj).encode()


def _json(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(body=_dumps(obj), status=status,
                        headers={"content-type": "application/json", **(headers or {})})


def _sse_error(message: str) -> bytes:
    """The end of a stream that broke: an error event in vLLM's shape, then [DONE] (as vLLM ends one)."""
    return (b"data: " + json.dumps({"error": {"message": message, "type": "upstream_error", "code": 502}}).encode()
            + b"\n\ndata: [DONE]\n\n")


def _all_ints(values: list) -> bool:
    """Every item is an int (not a bool): at C speed, for lists of thousands of token ids."""
    return set(map(type, values)) <= {int}


def _int_list(value) -> list[int] | None:
    if isinstance(value, list) and _all_ints(value):
        return value
    return None


def _rendered_ids(resp) -> list[int] | None:
    """`token_ids` of a render answer: a GenerateRequest (chat) or a list of one (completions)."""
    if isinstance(resp, list):
        if len(resp) != 1:
            return None
        resp = resp[0]
    if not isinstance(resp, dict):
        return None
    return _int_list(resp.get("token_ids")) or _int_list(resp.get("prompt_token_ids"))


def _returned_ids(resp: dict, chat: bool) -> tuple[list[int] | None, list[int] | None]:
    """D's prompt and output token ids (`return_token_ids`): chat puts the prompt ids at the top
    level, completions in the choice."""
    choices = resp.get("choices") or []
    choice = choices[0] if len(choices) == 1 and isinstance(choices[0], dict) else {}
    prompt = _int_list(resp.get("prompt_token_ids")) if chat else None
    if prompt is None:
        prompt = _int_list(choice.get("prompt_token_ids"))
    return prompt, _int_list(choice.get("token_ids"))


def _client_view(resp: dict, chat: bool, wants_ids: bool) -> dict:
    """D's answer without what the router added: its kv_transfer_params, and token ids the
    client did not ask for."""
    out = {k: v for k, v in resp.items() if k != "kv_transfer_params"}
    if not wants_ids:
        out.pop("prompt_token_ids", None)
        out["choices"] = [{k: v for k, v in c.items() if k not in ("token_ids", "prompt_token_ids")}
                          if isinstance(c, dict) else c for c in resp.get("choices") or []]
    return out


def _sse(resp: dict, chat: bool, include_usage: bool) -> Iterator[bytes]:
    """A non-streamed answer as server-sent events, one content chunk per choice."""
    def event(obj) -> bytes:
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    common = {"id": resp.get("id", ""), "created": resp.get("created", int(time.time())),
              "model": resp.get("model", "")}
    obj_name = "chat.completion.chunk" if chat else "text_completion"
    for choice in resp.get("choices") or []:
        index = choice.get("index", 0)
        if chat:
            message = choice.get("message") or {}
            yield event({**common, "object": obj_name, "choices": [
                {"index": index, "delta": {"role": message.get("role", "assistant"), "content": ""},
                 "logprobs": None, "finish_reason": None}]})
            delta = {k: v for k, v in message.items() if k != "role" and v not in (None, [], "")}
            if isinstance(delta.get("tool_calls"), list):
                delta["tool_calls"] = [dict(tc, index=tc.get("index", i)) for i, tc in enumerate(delta["tool_calls"])]
            extra = {k: v for k, v in choice.items() if k in ("token_ids", "prompt_token_ids")}
            yield event({**common, "object": obj_name, "choices": [
                {"index": index, "delta": delta, "logprobs": choice.get("logprobs"), "finish_reason": None,
                 **extra}]})
            yield event({**common, "object": obj_name, "choices": [
                {"index": index, "delta": {}, "logprobs": None, "finish_reason": choice.get("finish_reason"),
                 "stop_reason": choice.get("stop_reason")}]})
        else:
            yield event({**common, "object": obj_name, "choices": [
                {"index": index, "text": choice.get("text", ""), "logprobs": choice.get("logprobs"),
                 "finish_reason": choice.get("finish_reason"),
                 **{k: v for k, v in choice.items() if k in ("token_ids", "prompt_token_ids")}}]})
    if include_usage and resp.get("usage") is not None:
        yield event({**common, "object": obj_name, "choices": [], "usage": resp["usage"]})
    yield b"data: [DONE]\n\n"

# -- command line ---------------------------------------------------------------------------------

def _seconds_or_none(text: str) -> float | None:
    value = float(text)
    return value if value > 0 else None


def build_parser(prog: str = "vllmlint router") -> argparse.ArgumentParser:
    """The reference multi-turn proxy's options (singular and plural spellings), plus ours."""
    d = Limits()
    p = argparse.ArgumentParser(
        prog=prog, description="P/D router for bidirectional KV transfer that reuses decode's KV blocks "
                               "only for exact token-id continuations (drop-in for disagg_proxy_multiturn.py).")
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0, as the reference proxy)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--prefiller-host", "--prefiller-hosts", dest="prefiller_hosts", nargs="+", default=["localhost"])
    p.add_argument("--prefiller-port", "--prefiller-ports", dest="prefiller_ports", type=int, nargs="+", default=[8100])
    p.add_argument("--decoder-host", "--decoder-hosts", dest="decoder_hosts", nargs="+", default=["localhost"])
    p.add_argument("--decoder-port", "--decoder-ports", dest="decoder_ports", type=int, nargs="+", default=[8200])
    p.add_argument("--render-url", help="render tier base URL (`vllm launch render`), or a full .../render URL; "
                                        "default: the first prefiller's /v1/chat/completions/render")
    p.add_argument("--guard-ttl", type=float, default=DEFAULT_TTL_S,
                   help=f"seconds a stored turn may be reused; keep below decode's decoder_kv_blocks_ttl "
                        f"(default {DEFAULT_TTL_S:.0f} = 480 - 30)")
    p.add_argument("--max-conversations", type=int, default=4096, help="LRU cap on stored conversations")
    p.add_argument("--guard-max-tokens", type=int, default=DEFAULT_GUARD_MAX_TOKENS,
                   help="LRU cap on the token ids the guard stores over all conversations, 4 bytes each "
                        f"(default {DEFAULT_GUARD_MAX_TOKENS:,} = 64 MB)")
    p.add_argument("--no-pin-token-ids", dest="pin_token_ids", action="store_false",
                   help="do not send the checked ids to P and D as kv_transfer_params.prompt_token_ids")
    p.add_argument("--keep-remote-host", dest="rewrite_remote_host", action="store_false",
                   help="keep the engines' remote_host (default: replace it with the host the router reaches "
                        "the engine by, as the reference proxy does)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="total seconds per upstream call, connect to last byte (0: none; default 600)")
    p.add_argument("--upstream-connect-timeout", type=_seconds_or_none, default=d.upstream_connect_timeout_s,
                   help=f"seconds to connect to an engine (default {d.upstream_connect_timeout_s:g}); a timeout is a 504")
    p.add_argument("--upstream-read-timeout", type=_seconds_or_none, default=d.upstream_read_timeout_s,
                   help="seconds an engine may stay silent while answering: between two reads of a JSON answer, "
                        "between two complete events of a stream (a stream that stalls ends with an error event; "
                        f"default {d.upstream_read_timeout_s:g}: decode answers a non-streamed request in one piece; "
                        "0: none)")
    p.add_argument("--upstream-max-connections", type=int, default=d.upstream_max_connections,
                   help=f"pooled keep-alive connections to the engines (default {d.upstream_max_connections})")
    p.add_argument("--client-timeout", type=float, default=d.client_timeout_s,
                   help=f"seconds a client has to send its request body (default {d.client_timeout_s:g})")
    p.add_argument("--header-timeout", type=float, default=d.header_timeout_s,
                   help="seconds a connection has to send a complete request head (new, or kept alive after an "
                        f"answer: then --keepalive-timeout applies too) (default {d.header_timeout_s:g})")
    p.add_argument("--keepalive-timeout", type=float, default=d.keepalive_timeout_s,
                   help=f"seconds an idle client connection is kept open (default {d.keepalive_timeout_s:g})")
    p.add_argument("--max-connections", type=int, default=d.max_connections,
                   help="open client connections; at the cap the longest-idle one is closed, and when every one is "
                        f"busy a client gets 503 (/health and /metrics still answer) (default {d.max_connections})")
    p.add_argument("--max-connections-per-address", type=int, default=d.max_connections_per_address,
                   help="open connections from one client address; more get 503 (default "
                        f"{d.max_connections_per_address}; behind a proxy that pools connections, raise it to "
                        "--max-connections)")
    p.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes,
                   help=f"largest request body; more is a 413 (default {d.max_body_bytes})")
    p.add_argument("--state", metavar="URL",
                   help="shared guard store for several router replicas: redis://host:port/db (Redis 6.2+ or "
                        "Valkey; pip install 'vllmlint[router-redis]'); default: in this process")
    p.add_argument("--buffer-streams", action="store_true",
                   help="call decode non-streamed and send a streaming client its answer at the end (vLLM before "
                        "0.33 streams no kv_transfer_params: without this, streamed turns are not reused)")
    p.add_argument("--policy", choices=POLICIES, default="guarded",
                   help="guarded (default); unguarded reproduces the reference proxy, for replay only; none")
    p.add_argument("--log-level", default="INFO")
    return p


def _backends(parser, hosts: list[str], ports: list[int], what: str) -> list[Backend]:
    if len(hosts) != len(ports):
        parser.error(f"number of {what} hosts must match ports")
    return [Backend(h.strip("[]"), p) for h, p in zip(hosts, ports)]


def router_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Router:
    for name in ("client_timeout", "keepalive_timeout", "header_timeout"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if min(args.max_connections, args.upstream_max_connections, args.max_body_bytes, args.guard_max_tokens,
           args.max_connections_per_address) < 1:
        parser.error("--max-connections, --max-connections-per-address, --upstream-max-connections, "
                     "--max-body-bytes and --guard-max-tokens must be positive")
    if args.state and not args.state.startswith(("redis://", "rediss://", "unix://")):
        parser.error("--state takes a redis://host:port/db URL (Redis or Valkey)")
    if args.state and args.policy != "guarded":
        parser.error("--state is the guarded policy's store; it cannot be used with --policy " + args.policy)
    limits = Limits(client_timeout_s=args.client_timeout, keepalive_timeout_s=args.keepalive_timeout,
                    header_timeout_s=args.header_timeout,
                    max_connections_per_address=args.max_connections_per_address,
                    max_connections=args.max_connections, max_body_bytes=args.max_body_bytes,
                    upstream_connect_timeout_s=args.upstream_connect_timeout,
                    upstream_read_timeout_s=args.upstream_read_timeout,
                    upstream_max_connections=args.upstream_max_connections)
    return Router(_backends(parser, args.prefiller_hosts, args.prefiller_ports, "prefiller"),
                  _backends(parser, args.decoder_hosts, args.decoder_ports, "decoder"),
                  render_url=args.render_url, policy=args.policy, guard_ttl_s=args.guard_ttl,
                  max_conversations=args.max_conversations, guard_max_tokens=args.guard_max_tokens,
                  pin_token_ids=args.pin_token_ids, rewrite_remote_host=args.rewrite_remote_host,
                  timeout_s=args.timeout or None, limits=limits, buffer_streams=args.buffer_streams,
                  state=args.state)


def _raise_fd_limit(needed: int) -> None:
    """Client connections + upstream pool + slack need descriptors: raise the soft limit
    towards the hard one, and say so when it stays too low."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < needed:
            target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            if target < needed:
                log.warning("router: open-file limit %d is below the %d descriptors --max-connections and "
                            "--upstream-max-connections may need", target, needed)
    except (ImportError, ValueError, OSError):
        pass


def main(argv: list[str] | None = None, prog: str = "vllmlint router") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s", level=args.log_level.upper())
    gc.enable()                       # a long-running server: the cyclic collector stays on
    router = router_from_args(args, parser)
    _raise_fd_limit(args.max_connections + args.upstream_max_connections + 64)

    async def run() -> None:
        await router.start(args.host, args.port)
        gc.freeze()                   # what start-up built is never garbage: keep it out of collections
        try:
            await router.serve_forever()
        finally:
            await router.close()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(prog="python -m vllmlint.router"))
