"""`vllmlint router` under the faults of issue 20: hostile or slow clients, broken engines, a soak.

Real sockets on 127.0.0.1 throughout. The clients that misbehave (request smuggling, half-sent
requests) and the engines that break (a reply cut off mid-body, a 200 that is not JSON, one that
never answers) are raw asyncio servers and streams that write exactly those bytes; well-behaved
engines are tests/test_router.py's FakeEngine. Timeouts are set small here so each case ends in
seconds; assertions bound what happened (status, closed, released), never how fast.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import httpkit
from guard_sequences import Q1, SYSTEM
from test_router import FakeEngine
from vllmlint.pd.router import Backend, Limits, Router, build_parser, router_from_args

ROOT = Path(__file__).resolve().parent.parent


def run(coro):
    return asyncio.run(coro)


async def _router(p: Backend, d: Backend, **kw) -> Router:
    return await Router([p], [d], **kw).start("127.0.0.1", 0)


async def _chat(router: Router, body: dict, timeout: float = 20) -> httpkit.ClientResponse:
    return await httpkit.post_json(f"http://127.0.0.1:{router.port}/v1/chat/completions", body, timeout=timeout)


BODY = {"model": "qwen3", "messages": [SYSTEM, Q1], "conversation_id": "c1", "max_tokens": 8}


async def _read_all(reader: asyncio.StreamReader, timeout: float) -> bytes:
    """Everything the peer sends until it closes (fails when it does not close in `timeout`)."""
    return await asyncio.wait_for(reader.read(), timeout)


class RawEngine:
    """An engine that reads one HTTP request and answers with `reply` bytes (then closes), or
    with nothing at all (`hang`): it records when the router closed the connection."""

    def __init__(self, reply: bytes | None = None, hang: bool = False, drip: bytes = b""):
        self.reply, self.hang = reply, hang
        self.drip = drip                                  # written a byte every 0.2 s after `reply`
        self.requests = 0
        self.closed_by_peer: list[float] = []
        self.server: asyncio.base_events.Server | None = None

    @property
    def backend(self) -> Backend:
        return Backend("127.0.0.1", self.server.sockets[0].getsockname()[1])

    async def start(self) -> "RawEngine":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            await reader.readexactly(length)
            self.requests += 1
            if self.hang:
                await reader.read()                      # until the router closes its side
                self.closed_by_peer.append(time.monotonic())
                return
            writer.write(self.reply)
            await writer.drain()
            for byte in self.drip[:100]:                  # bounded: 100 bytes, 20 s at most
                await asyncio.sleep(0.2)
                writer.write(bytes([byte]))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        self.server.close()


def _reply(status: str, body: bytes, length: int | None = None) -> bytes:
    n = len(body) if length is None else length
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {n}\r\n\r\n").encode() + body


# -- request smuggling: one 400, then the connection is closed ---------------------------------------

SMUGGLING = {
    "content-length-and-transfer-encoding": (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
        b"Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        b"GET /health HTTP/1.1\r\nHost: r\r\n\r\n"),
    "folded-header-line": (
        b"GET /health HTTP/1.1\r\nHost: r\r\nX-Folded: a\r\n b\r\n\r\n"
        b"GET /health HTTP/1.1\r\nHost: r\r\n\r\n"),
    "space-before-colon": (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Length : 2\r\n\r\n{}"
        b"GET /health HTTP/1.1\r\nHost: r\r\n\r\n"),
}


@pytest.mark.parametrize("probe", sorted(SMUGGLING))
def test_smuggling_probe_gets_one_400_and_a_close(probe):
    async def go():
        p, d = await FakeEngine("prefill").start(), await FakeEngine("decode").start()
        router = await _router(p.backend, d.backend)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", router.port)
            writer.write(SMUGGLING[probe])
            await writer.drain()
            data = await _read_all(reader, 10)          # the router closes: read() returns
            writer.close()
            statuses = [line for line in data.split(b"\r\n") if line.startswith(b"HTTP/1.")]
            assert len(statuses) == 1, data              # the hidden second request is never answered
            assert statuses[0].split()[1] == b"400", data
            assert p.requests == [] and d.requests == []
        finally:
            await router.close()
            await p.server.close()
            await d.server.close()
    run(go())


# -- broken engines: explicit 502/504 with a JSON error and a log line ------------------------------

def _fault_case(reply: bytes | None, hang=False, limits: Limits | None = None, timeout_s=600.0, body=BODY,
                drip: bytes = b""):
    async def go(caplog):
        p = await FakeEngine("prefill").start()
        d = await RawEngine(reply, hang, drip).start()
        router = await _router(p.backend, d.backend, limits=limits, timeout_s=timeout_s)
        try:
            with caplog.at_level(logging.INFO):
                r = await _chat(router, body)
            if r.status == 200:
                assert router.guard.peek("c1") is None        # a broken turn is never stored
            metrics = (await httpkit.request("GET", f"http://127.0.0.1:{router.port}/metrics")).body.decode()
            return r, metrics, d
        finally:
            await router.close()
            await p.server.close()
            await d.close()
    return go


def test_decode_closing_mid_body_is_a_502(caplog):
    r, metrics, _ = run(_fault_case(_reply("200 OK", b'{"choices": [', length=4000))(caplog))
    assert r.status == 502
    err = r.json()
    assert err["type"] == "upstream_error" and err["kind"] == "payload" and "decoder" in err["error"]
    assert "router: decode http://127.0.0.1:" in caplog.text and "failed (payload)" in caplog.text
    assert 'vllmlint_router_upstream_errors_total{upstream="decode",kind="payload"} 1' in metrics


def test_decode_closing_before_answering_is_a_502(caplog):
    r, _, _ = run(_fault_case(b"")(caplog))
    assert r.status == 502 and r.json()["kind"] == "disconnected"


def test_200_with_malformed_json_is_a_502(caplog):
    r, metrics, _ = run(_fault_case(_reply("200 OK", b'{"choices": [oops'))(caplog))
    assert r.status == 502
    assert r.json()["kind"] == "invalid-json"
    assert "with a body that is not JSON" in caplog.text
    assert 'vllmlint_router_upstream_errors_total{upstream="decode",kind="invalid-json"} 1' in metrics


def test_200_with_a_json_array_is_a_502(caplog):
    r, _, _ = run(_fault_case(_reply("200 OK", b"[1, 2]"))(caplog))
    assert r.status == 502 and "not an object" in r.json()["error"]


def test_an_engine_error_that_is_not_json_keeps_its_status(caplog):
    r, _, _ = run(_fault_case(_reply("503 Service Unavailable", b"overloaded"))(caplog))
    assert r.status == 503 and r.json()["error"] == "overloaded"


def test_a_large_answer_without_content_length_is_read_to_the_end(caplog):
    content = "x" * 100_000
    body = json.dumps({"id": "d", "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                               "finish_reason": "stop"}]}).encode()
    reply = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n" + body
    r, _, _ = run(_fault_case(reply)(caplog))
    assert r.status == 200 and r.json()["choices"][0]["message"]["content"] == content


def test_a_silent_decode_is_a_504_after_the_read_timeout(caplog):
    r, metrics, d = run(_fault_case(None, hang=True, limits=Limits(upstream_read_timeout_s=1.0))(caplog))
    assert r.status == 504 and r.json()["kind"] == "timeout"
    assert 'vllmlint_router_upstream_errors_total{upstream="decode",kind="timeout"} 1' in metrics
    assert "failed (timeout)" in caplog.text


def test_unreachable_prefill_is_a_502_with_a_log_line(caplog):
    async def go():
        d = await FakeEngine("decode").start()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead = s.getsockname()[1]                    # nothing listens there once closed
        router = await _router(Backend("127.0.0.1", dead), d.backend)
        try:
            with caplog.at_level(logging.INFO, logger="vllmlint.router"):
                r = await _chat(router, dict(BODY, conversation_id=None))
            assert r.status == 502 and r.json()["kind"] == "connect" and "prefiller" in r.json()["error"]
            assert "failed (connect)" in caplog.text
        finally:
            await router.close()
            await d.server.close()
    run(go())


def test_a_stream_that_breaks_ends_with_an_error_event():
    async def go():
        p = await FakeEngine("prefill").start()
        # D answers 200 with a choice the router cannot turn into events (message is not an object)
        bad = json.dumps({"id": "x", "choices": [{"index": 0, "message": "not-an-object"}]}).encode()
        d = await RawEngine(_reply("200 OK", bad)).start()
        router = await _router(p.backend, d.backend)
        try:
            r = await _chat(router, dict(BODY, stream=True))
            assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream")
            events = [e[6:] for e in r.body.decode().split("\n\n") if e.startswith("data: ")]
            assert events[-1] == "[DONE]"
            assert json.loads(events[-2])["error"]["type"] == "upstream_error"
        finally:
            await router.close()
            await p.server.close()
            await d.close()
    run(go())


def test_a_client_that_goes_away_cancels_its_upstream_call():
    async def go():
        p = await FakeEngine("prefill").start()
        d = await RawEngine(hang=True).start()
        router = await _router(p.backend, d.backend)
        try:
            body = json.dumps(BODY).encode()
            reader, writer = await asyncio.open_connection("127.0.0.1", router.port)
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
            for _ in range(200):                          # until the request reached decode
                if d.requests:
                    break
                await asyncio.sleep(0.05)
            assert d.requests == 1
            writer.close()                                # the client gives up
            for _ in range(200):
                if d.closed_by_peer:
                    break
                await asyncio.sleep(0.05)
            assert d.closed_by_peer, "the router kept its call to decode open after the client left"
            assert router.metrics.in_flight == 0
            assert router.metrics.client_errors["disconnected"] == 1
        finally:
            await router.close()
            await p.server.close()
            await d.close()
    run(go())


# -- slow clients ---------------------------------------------------------------------------------

def test_200_half_open_clients_are_released_while_a_normal_request_is_served():
    async def go():
        p, d = await FakeEngine("prefill").start(), await FakeEngine("decode", [["It", "."]]).start()
        router = await _router(p.backend, d.backend, limits=Limits(client_timeout_s=1.0, header_timeout_s=1.0,
                                                                   keepalive_timeout_s=1.0))
        conns = []
        try:
            body = json.dumps(BODY).encode()
            for i in range(200):
                reader, writer = await asyncio.open_connection("127.0.0.1", router.port)
                if i % 3 == 0:      # headers never finished
                    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Le")
                elif i % 3 == 1:    # headers sent, the body never comes
                    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\n"
                                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:10])
                # else: connected and silent
                conns.append((reader, writer))
            await asyncio.gather(*(w.drain() for _, w in conns))
            r = await _chat(router, BODY)                  # served meanwhile
            assert r.status == 200
            t0 = time.monotonic()
            answers = await asyncio.gather(*(_read_all(rd, 30) for rd, _ in conns))
            released_in = time.monotonic() - t0            # every one closed by the router
            assert all(a == b"" or a.startswith(b"HTTP/1.1 408") for a in answers[1::3])
            assert all(a == b"" for a in answers[0::3]) and all(a == b"" for a in answers[2::3])
            assert released_in < 30
            assert router.metrics.client_errors["body-timeout"] >= 1
        finally:
            for _, w in conns:
                w.close()
            await router.close()
            await p.server.close()
            await d.server.close()
    run(go())


async def _open_from(port: int, source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the router from a loopback source address (127.0.0.0/8 is all local)."""
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def _get_from(port: int, path: str, source: str = "127.0.0.1") -> bytes:
    reader, writer = await _open_from(port, source)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: r\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await _read_all(reader, 10)
    writer.close()
    return data


def test_at_the_cap_the_longest_idle_connection_is_closed_for_a_new_one():
    async def go():
        p, d = await FakeEngine("prefill").start(), await FakeEngine("decode", [["It", "."]]).start()
        router = await _router(p.backend, d.backend, limits=Limits(max_connections=5))
        conns = []
        try:
            for _ in range(5):                            # connected and silent
                conns.append(await asyncio.open_connection("127.0.0.1", router.port))
                await asyncio.sleep(0.02)
            r = await _chat(router, BODY)                 # a sixth: the first silent one makes room
            assert r.status == 200
            assert await _read_all(conns[0][0], 10) == b""
            assert router._server.evicted >= 1
        finally:
            for _, w in conns:
                w.close()
            await router.close()
            await p.server.close()
            await d.server.close()
    run(go())


def test_when_every_connection_is_busy_a_request_gets_503_and_health_still_answers():
    async def go():
        p = await FakeEngine("prefill").start()
        d = await RawEngine(hang=True).start()            # every request stays in progress
        router = await _router(p.backend, d.backend, limits=Limits(max_connections=3))
        busy = []
        try:
            body = json.dumps(BODY).encode()
            for _ in range(3):
                reader, writer = await asyncio.open_connection("127.0.0.1", router.port)
                writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
                             + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
                busy.append((reader, writer))
            for _ in range(200):                          # until all three reached decode
                if d.requests == 3:
                    break
                await asyncio.sleep(0.05)
            assert d.requests == 3
            refused = await _chat(router, BODY)
            assert refused.status == 503
            health = await _get_from(router.port, "/health")
            assert health.startswith(b"HTTP/1.1 200")
            metrics = (await _get_from(router.port, "/metrics")).decode()
            assert 'vllmlint_router_rejected_connections_total{reason="cap"} 1' in metrics
        finally:
            for _, w in busy:
                w.close()
            await router.close()
            await p.server.close()
            await d.close()
    run(go())


def test_one_address_holding_its_limit_of_idle_connections_does_not_lock_out_another():
    """Idle connections up to the per-address limit from 127.0.0.2 (and one more, refused); a
    request from 127.0.0.3 still gets its 200. Loopback addresses only."""
    async def go():
        p, d = await FakeEngine("prefill").start(), await FakeEngine("decode", [["It", "."]]).start()
        router = await _router(p.backend, d.backend,
                               limits=Limits(max_connections=8, max_connections_per_address=4))
        idle = []
        try:
            for _ in range(4):
                idle.append(await _open_from(router.port, "127.0.0.2"))
            extra_reader, extra_writer = await _open_from(router.port, "127.0.0.2")
            assert (await _read_all(extra_reader, 10)).startswith(b"HTTP/1.1 503")
            extra_writer.close()
            reader, writer = await _open_from(router.port, "127.0.0.3")
            body = json.dumps(BODY).encode()
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
                         + f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
            answer = await _read_all(reader, 20)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            metrics = (await _get_from(router.port, "/metrics", "127.0.0.3")).decode()
            assert 'vllmlint_router_rejected_connections_total{reason="per-address"} 1' in metrics
            assert router._server.per_address["127.0.0.2"] == 4
        finally:
            for _, w in idle:
                w.close()
            await router.close()
            await p.server.close()
            await d.server.close()
    run(go())


# -- streams that break after the first byte: an error event, then [DONE]; nothing stored ----------

SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
FIRST = (b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"qwen3","prompt_token_ids":[1,2],'
         b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n')


def _stream_case(reply: bytes, **kw):
    return _fault_case(SSE_HEAD + reply, body=dict(BODY, stream=True), **kw)


def _ends_with_error(r, kind: str) -> list[str]:
    assert r.status == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = [e[6:] for e in r.body.decode().split("\n\n") if e.startswith("data: ")]
    assert events[-1] == "[DONE]"
    err = json.loads(events[-2])["error"]
    assert err["type"] == "upstream_error" and f"({kind})" in err["message"], err
    return events


@pytest.mark.parametrize("case,reply,kind", [
    ("cut after one event", FIRST, "payload"),
    ("cut inside an event", FIRST + b'data: {"id":"x","choi', "payload"),
    ("an event that is not JSON", FIRST + b"data: {not json\n\n", "malformed"),
    ("a 100,000-deep event", FIRST + b"data: " + b"[" * 100_000 + b"\n\n", "malformed"),
    ("a choice that is not an object", FIRST + b'data: {"choices":["x"]}\n\n', "malformed"),
])
def test_a_stream_that_breaks_after_the_first_byte_ends_with_an_error_event(caplog, case, reply, kind):
    r, metrics, _ = run(_stream_case(reply)(caplog))
    events = _ends_with_error(r, kind)
    assert json.loads(events[0])["choices"][0]["delta"]["role"] == "assistant"     # relayed before the break
    assert "prompt_token_ids" not in json.loads(events[0])                          # not asked for: taken out
    assert f'vllmlint_router_upstream_errors_total{{upstream="decode",kind="{kind}"}} 1' in metrics
    assert caplog.text.count("stream for conversation=c1 broke") == 1             # logged once


def test_vllms_own_error_event_is_passed_on_and_the_turn_not_stored(caplog):
    error = b'data: {"error":{"message":"boom","type":"InternalServerError","code":500}}\n\ndata: [DONE]\n\n'
    r, _, _ = run(_stream_case(FIRST + error)(caplog))
    events = [e[6:] for e in r.body.decode().split("\n\n") if e.startswith("data: ")]
    assert json.loads(events[-2])["error"]["message"] == "boom" and events[-1] == "[DONE]"


def test_a_stream_that_drips_without_completing_an_event_ends_after_the_read_timeout(caplog):
    """One byte every 0.2 s is not an event: --upstream-read-timeout 1 ends the stream."""
    r, metrics, _ = run(_stream_case(FIRST, drip=b"data: " + b"x" * 90,
                                     limits=Limits(upstream_read_timeout_s=1.0))(caplog))
    _ends_with_error(r, "timeout")
    assert 'vllmlint_router_upstream_errors_total{upstream="decode",kind="timeout"} 1' in metrics


def test_an_event_over_the_size_limit_ends_the_stream(caplog, monkeypatch):
    import vllmlint.pd.router as router_mod
    monkeypatch.setattr(router_mod, "MAX_EVENT_BYTES", 1000)
    r, _, _ = run(_stream_case(FIRST + b"data: " + b"x" * 5000)(caplog))
    _ends_with_error(r, "event-too-large")


def test_deeply_nested_json_body_is_a_400():
    async def go():
        p, d = await FakeEngine("prefill").start(), await FakeEngine("decode").start()
        router = await _router(p.backend, d.backend)
        try:
            url = f"http://127.0.0.1:{router.port}/v1/chat/completions"
            r = await httpkit.request("POST", url, b"[" * 100_000 + b"]" * 100_000,
                                      {"content-type": "application/json"}, timeout=20)
            assert r.status == 400 and "nested too deeply" in r.json()["error"]
        finally:
            await router.close()
            await p.server.close()
            await d.server.close()
    run(go())


def test_an_upstream_error_status_is_passed_through_and_logged_once(caplog):
    r, metrics, _ = run(_fault_case(_reply("500 Internal Server Error", b'{"error": "engine fell over"}'))(caplog))
    assert r.status == 500 and r.json() == {"error": "engine fell over"}
    assert caplog.text.count("answered 500") == 1
    assert 'vllmlint_router_upstream_errors_total{upstream="decode",kind="status-5xx"} 1' in metrics


def test_a_body_declared_over_the_limit_is_refused_before_it_is_read():
    async def go():
        p, d = await FakeEngine("prefill").start(), await FakeEngine("decode").start()
        router = await _router(p.backend, d.backend, limits=Limits(max_body_bytes=1000))
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", router.port)
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100000000\r\n\r\n{")     # 100 MB declared, one byte sent
            await writer.drain()
            answer = await _read_all(reader, 10)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 413")
        finally:
            await router.close()
            await p.server.close()
            await d.server.close()
    run(go())


def test_oversized_body_is_a_413():
    async def go():
        p, d = await FakeEngine("prefill").start(), await FakeEngine("decode").start()
        router = await _router(p.backend, d.backend, limits=Limits(max_body_bytes=1000))
        try:
            r = await _chat(router, dict(BODY, messages=[{"role": "user", "content": "x" * 5000}]))
            assert r.status == 413 and p.requests == []
        finally:
            await router.close()
            await p.server.close()
            await d.server.close()
    run(go())


# -- bounded state, metrics, flags ------------------------------------------------------------------

def test_guard_and_turns_are_bounded():
    from vllmlint.pd.router import MAX_CONVERSATION_ID

    async def go():
        p = await FakeEngine("prefill").start()
        d = await FakeEngine("decode", [["It", "."]] * 12).start()
        router = await _router(p.backend, d.backend, guard_max_tokens=120, turn_history=5)
        try:
            for i in range(12):
                assert (await _chat(router, dict(BODY, conversation_id=f"c{i}"))).status == 200
            assert router.guard.stats()["tokens"] <= 120          # older conversations evicted
            assert len(router.turns) == 5
            turn = router.turns[-1]
            assert not hasattr(turn, "prompt_ids") and turn.prompt_tokens > 0
            assert turn.decision.kv_transfer_params is None        # the record keeps no block ids
            r = await _chat(router, dict(BODY, conversation_id="x" * (MAX_CONVERSATION_ID + 1)))
            assert r.status == 400
        finally:
            await router.close()
            await p.server.close()
            await d.server.close()
    run(go())


def test_metrics_are_prometheus_text():
    async def go():
        p, d = await FakeEngine("prefill").start(), await FakeEngine("decode", [["It", "."]]).start()
        router = await _router(p.backend, d.backend)
        try:
            assert (await _chat(router, BODY)).status == 200
            m = await httpkit.request("GET", f"http://127.0.0.1:{router.port}/metrics")
            return m
        finally:
            await router.close()
            await p.server.close()
            await d.server.close()
    m = run(go())
    assert m.status == 200 and m.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = m.body.decode()
    assert 'vllmlint_router_requests_total{path="/v1/chat/completions",status="200"} 1' in text
    assert 'vllmlint_router_guard_decisions_total{decision="miss",reason="no-entry"} 1' in text
    assert 'vllmlint_router_guard_records_total{result="store"} 1' in text
    assert 'vllmlint_router_request_duration_seconds_count{path="/v1/chat/completions"} 1' in text
    parser = pytest.importorskip("prometheus_client.parser")
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    assert families["vllmlint_router_request_duration_seconds"].type == "histogram"
    assert families["vllmlint_router_requests"].type == "counter"


def test_limit_flags_parse():
    parser = build_parser()
    args = parser.parse_args(["--guard-max-tokens", "1000", "--client-timeout", "5", "--keepalive-timeout", "7",
                              "--max-connections", "64", "--upstream-connect-timeout", "2",
                              "--upstream-read-timeout", "0", "--timeout", "30"])
    router = router_from_args(args, parser)
    assert router.guard.max_tokens == 1000
    lim = router.limits
    assert (lim.client_timeout_s, lim.keepalive_timeout_s, lim.max_connections) == (5, 7, 64)
    assert (lim.upstream_connect_timeout_s, lim.upstream_read_timeout_s, lim.upstream_timeout_s) == (2, None, 30)
    assert Limits().client_timeout_s <= 30
    assert Limits().upstream_read_timeout_s is not None             # a default that is not "forever"


def test_stream_store_and_connection_flags_parse(tmp_path):
    parser = build_parser()
    args = parser.parse_args(["--header-timeout", "3", "--max-connections-per-address", "8", "--buffer-streams",
                              "--state", "redis://:pw@127.0.0.1:6390/2"])
    router = router_from_args(args, parser)
    assert (router.limits.header_timeout_s, router.limits.max_connections_per_address) == (3, 8)
    assert router.buffer_streams and router.guard.stats()["store"] == "redis://:***@127.0.0.1:6390/2"
    for bad in (["--state", "memcached://x"], ["--state", "redis://x", "--policy", "none"],
                ["--max-connections-per-address", "0"], ["--header-timeout", "0"]):
        with pytest.raises(SystemExit):
            router_from_args(parser.parse_args(bad), parser)


# -- what `vllmlint check` loads ------------------------------------------------------------------------

def test_check_never_imports_aiohttp():
    code = ("import sys\n"
            "from click.testing import CliRunner\n"
            "from vllmlint.cli import main\n"
            f"r = CliRunner().invoke(main, ['check', {str(ROOT / 'fixtures' / 'VL101')!r}, '--exit-zero'])\n"
            "assert r.exit_code == 0, r.output\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('aiohttp', 'multidict', 'yarl'))\n"
            "assert not bad, bad\n"
            "import gc; assert not gc.isenabled()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr


# -- soak: RSS of `python -m vllmlint router` stays flat ---------------------------------------------------

def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_rss_stays_flat_over_a_soak():
    """4,000 requests through the CLI's router (the path that used to turn gc off): RSS after
    the last must be within a loose bound of RSS after the first 1,000 (old router: +7.5 MB per
    2,000 requests, still rising)."""
    from aiohttp import web
    import aiohttp

    async def engine(request: web.BaseRequest) -> web.Response:
        body = await request.json()
        if request.path.endswith("/render"):
            return web.json_response({"token_ids": list(range(1, 300))})
        kv = body.get("kv_transfer_params") or {}
        prompt = kv.get("prompt_token_ids") or list(range(1, 300))
        if kv.get("do_remote_decode"):            # prefill
            return web.json_response({"choices": [{"message": {"content": "x"}}],
                                      "kv_transfer_params": {"do_remote_prefill": True, "remote_block_ids": [[1]],
                                                             "remote_engine_id": "p", "remote_host": "h",
                                                             "remote_port": 1}})
        out = [7, 8, 9]
        return web.json_response({"id": "d", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                                          "token_ids": out, "finish_reason": "stop"}],
                                  "prompt_token_ids": prompt,
                                  "kv_transfer_params": {"remote_block_ids": [list(range(20))], "remote_engine_id": "d",
                                                         "remote_num_tokens": len(prompt) + 2, "remote_host": "h",
                                                         "remote_port": 2}})

    async def go():
        runner = web.ServerRunner(web.Server(engine, access_log=None), handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        eport = site._server.sockets[0].getsockname()[1]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen([sys.executable, "-m", "vllmlint", "router", "--host", "127.0.0.1", "--port", str(port),
                                 "--prefiller-hosts", "127.0.0.1", "--prefiller-ports", str(eport),
                                 "--decoder-hosts", "127.0.0.1", "--decoder-ports", str(eport),
                                 "--max-conversations", "64", "--log-level", "WARNING"],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            async with aiohttp.ClientSession() as session:
                for _ in range(200):
                    try:
                        async with session.get(f"http://127.0.0.1:{port}/health") as r:
                            if r.status == 200:
                                break
                    except aiohttp.ClientError:
                        assert proc.poll() is None, proc.stderr.read().decode()
                        await asyncio.sleep(0.1)
                counter = iter(range(10**9))
                errors = []

                async def client(n: int) -> None:
                    for _ in range(n):
                        i = next(counter)
                        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                "conversation_id": f"c{i % 500}"}
                        async with session.post(url, json=body) as r:
                            await r.read()
                            if r.status != 200:
                                errors.append(r.status)

                rss = []
                for _ in range(4):
                    await asyncio.gather(*(client(1000 // 16) for _ in range(16)))
                    rss.append(_rss_mb(proc.pid))
                assert not errors, errors[:5]
                return rss
        finally:
            proc.terminate()
            proc.wait(10)
            await runner.cleanup()

    rss = run(go())
    assert rss[-1] - rss[0] < 6.0, f"router RSS grew over the soak (MB after each 1,000 requests): {rss}"
