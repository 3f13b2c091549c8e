"""`vllmlint router` against fake engines started in-process on 127.0.0.1.

The fake prefill and decode engines answer with JSON shaped like vLLM 0.30's (render's
GenerateRequest, P's kv_transfer_params, D's `return_token_ids` and end-of-turn
kv_transfer_params), built from tests/guard_sequences.py. They check the router's side of the
contract only: what it sends to P and D and when it attaches D's blocks. Whether a real P/D pair
with `bidirectional_kv_xfer` answers the same with and without reuse is NOT checked here: that
real-stack check lives in `vllmlint replay` (verify's machinery), which drives this router.
"""
from __future__ import annotations

import asyncio
import json
import logging

import pytest
from click.testing import CliRunner

from guard_sequences import Q1, Q2, SYSTEM, d_params, encode, render, sample
import httpkit
from vllmlint.cli import main as cli_main
from vllmlint.pd.router import Backend, Router, build_parser, router_from_args


class FakeEngine:
    """One vLLM-like engine: `role` is prefill, decode or render."""

    def __init__(self, role: str, replies: list[list[str]] | None = None, render_status: int = 200,
                 event_delay: float = 0.0, stream_kv: bool = True):
        self.role = role
        self.event_delay = event_delay            # seconds between two streamed events
        self.stream_kv = stream_kv                # vLLM 0.33+: D's kv_transfer_params in the last chunk
        self.sent_at: list[float] = []            # when each streamed event was written (loop time)
        # lock-step: with a queue, each event after the first waits until the client put an item
        # (it received the previous one), so a router that held events back never finishes
        self.gate: asyncio.Queue | None = None
        self.replies = list(replies or [])
        self.render_status = render_status
        self.requests: list[tuple[str, dict]] = []
        self.answers: list[dict] = []             # decode: each answer as JSON (streamed or not)
        self.fail_next_with_reuse = False
        self.server: httpkit.Server | None = None

    @property
    def backend(self) -> Backend:
        return Backend("127.0.0.1", self.server.port)

    async def start(self) -> "FakeEngine":
        self.server = await httpkit.Server(self.handle).start("127.0.0.1", 0)
        return self

    async def handle(self, req: httpkit.Request) -> httpkit.Response:
        body = req.json() if req.body else None
        self.requests.append((req.path, body))
        if req.path == "/v1/models":
            return httpkit.Response.json({"object": "list", "data": [{"id": "qwen3"}]})
        if req.path.endswith("/render"):
            if self.render_status != 200:
                return httpkit.Response.json({"detail": "Not Found"}, self.render_status)
            ids = encode(render(body["messages"]))
            return httpkit.Response.json({"request_id": "chatcmpl-r", "token_ids": ids, "model": body.get("model"),
                                         "sampling_params": {"max_tokens": 16}, "stream": False})
        if body.get("stream") and self.role != "decode":
            return httpkit.Response.json({"error": "prefill is never asked to stream"}, 400)
        if body.get("model") == "nope":
            return httpkit.Response.json({"error": "model nope does not exist"}, 404)
        kv = body.get("kv_transfer_params") or {}
        prompt = kv.get("prompt_token_ids") or encode(render(body["messages"]))
        if self.role == "prefill":
            if self.fail_next_with_reuse and kv.get("remote_block_ids"):
                self.fail_next_with_reuse = False
                return httpkit.Response.json({"error": "KV load failed"}, 500)
            return httpkit.Response.json({
                "id": "chatcmpl-p", "object": "chat.completion", "model": body.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "It"}, "finish_reason": "length"}],
                "kv_transfer_params": {"do_remote_prefill": True, "do_remote_decode": False,
                                       "remote_block_ids": [[7, 8]], "remote_engine_id": "p-engine",
                                       "remote_request_id": "p-1", "remote_host": "localhost", "remote_port": 5600}})
        pieces = self.replies.pop(0)
        output = sample(pieces)
        choice = {"index": 0, "message": {"role": "assistant", "content": "".join(pieces)}, "logprobs": None,
                  "finish_reason": "stop"}
        resp = {"id": "chatcmpl-d", "object": "chat.completion", "created": 1, "model": body.get("model"),
                "choices": [choice], "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(output)},
                "kv_transfer_params": d_params(prompt, output, remote_host="localhost",
                                               remote_request_id=f"d-{len(self.calls())}-{id(self):x}")}
        self.answers.append(resp)
        if body.get("stream"):
            return httpkit.Response(200, headers={"content-type": "text/event-stream"},
                                    stream=self._events(body, prompt, pieces, output, resp["kv_transfer_params"]))
        if body.get("return_token_ids"):
            resp["prompt_token_ids"] = prompt
            choice["token_ids"] = output
        return httpkit.Response.json(resp)

    async def _events(self, body: dict, prompt: list[int], pieces: list[str], output: list[int], kv: dict):
        """vLLM 0.30's chat stream: a role chunk (with prompt_token_ids when asked), one chunk per
        piece (its token ids), the finish chunk (the end-of-turn token), usage when asked, [DONE]."""
        ids = body.get("return_token_ids")
        common = {"id": "chatcmpl-d", "object": "chat.completion.chunk", "created": 1, "model": body.get("model")}

        def event(obj) -> bytes:
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        chunks = [dict(common, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                         "logprobs": None, "finish_reason": None}],
                       **({"prompt_token_ids": prompt} if ids else {}))]
        for piece in pieces:
            choice = {"index": 0, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}
            if ids:
                choice["token_ids"] = encode(piece)
            chunks.append(dict(common, choices=[choice]))
        last = {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop", "stop_reason": None}
        if ids:
            last["token_ids"] = output[-1:]
        chunks.append(dict(common, choices=[last], **({"kv_transfer_params": kv} if self.stream_kv else {})))
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append(dict(common, choices=[], usage={"prompt_tokens": len(prompt),
                                                          "completion_tokens": len(output)}))
        loop = asyncio.get_running_loop()
        for i, data in enumerate([event(c) for c in chunks] + [b"data: [DONE]\n\n"]):
            if i and self.gate is not None:
                try:
                    await asyncio.wait_for(self.gate.get(), 10)
                except asyncio.TimeoutError:
                    return                        # the client never got the last event: the stream is cut
            elif i and self.event_delay:
                await asyncio.sleep(self.event_delay)
            self.sent_at.append(loop.time())
            yield data

    def calls(self, suffix: str = "/v1/chat/completions") -> list[dict]:
        return [b for p, b in self.requests if p == suffix]


async def _stack(replies, render_status=200, render_tier=False, **router_kw):
    p = await FakeEngine("prefill", render_status=render_status).start()
    d = await FakeEngine("decode", replies).start()
    r = await FakeEngine("render").start() if render_tier else None
    router = await Router([p.backend], [d.backend], render_url=f"http://127.0.0.1:{r.server.port}" if r else None,
                          **router_kw).start("127.0.0.1", 0)
    return p, d, r, router


async def _close(*things):
    for t in things:
        if t is not None:
            await (t.close() if isinstance(t, Router) else t.server.close())


async def _chat(router: Router, body: dict, headers: dict | None = None) -> httpkit.ClientResponse:
    return await httpkit.post_json(f"http://127.0.0.1:{router.port}/v1/chat/completions", body, headers, timeout=10)


def run(coro):
    return asyncio.run(coro)


def test_exact_continuation_attaches_d_blocks_to_prefill():
    async def go():
        p, d, _, router = await _stack([["It", " is", " sunny", "."], ["Rome", " is", " sunny", "."]])
        try:
            m1 = [SYSTEM, Q1]
            r1 = await _chat(router, {"model": "qwen3", "messages": m1, "conversation_id": "c1", "max_tokens": 16})
            assert r1.status == 200
            a1 = r1.json()
            assert r1.headers["x-vllmlint-guard"].startswith("miss; reason=no-entry")
            assert "kv_transfer_params" not in a1 and "prompt_token_ids" not in a1
            assert "token_ids" not in a1["choices"][0]
            m2 = m1 + [{"role": "assistant", "content": a1["choices"][0]["message"]["content"]}, Q2]
            r2 = await _chat(router, {"model": "qwen3", "messages": m2, "conversation_id": "c1", "max_tokens": 16})
            assert r2.status == 200
            assert r2.headers["x-vllmlint-guard"].startswith("hit; reason=hit")
            p1, p2 = p.calls()
            # turn 1: fresh parameters, the rendered ids pinned, max_tokens 1, not streaming
            assert p1["kv_transfer_params"]["remote_block_ids"] is None
            assert p1["kv_transfer_params"]["prompt_token_ids"] == encode(render(m1))
            assert (p1["max_tokens"], p1["stream"]) == (1, False)
            assert "conversation_id" not in p1
            # turn 2: D's blocks, as P must receive them
            kv2 = p2["kv_transfer_params"]
            turn1 = d_params(encode(render(m1)), sample(["It", " is", " sunny", "."]))
            assert kv2["remote_block_ids"] == turn1["remote_block_ids"]
            assert kv2["remote_num_tokens"] == turn1["remote_num_tokens"]
            assert kv2["remote_engine_id"] == "d-engine-0"
            assert (kv2["do_remote_decode"], kv2["do_remote_prefill"]) == (True, False)
            assert kv2["remote_host"] == "127.0.0.1"              # D's host as the router reaches it
            assert kv2["prompt_token_ids"] == encode(render(m2))
            # decode: non-streaming, P's parameters, token ids asked for
            d1, d2 = d.calls()
            assert d1["stream"] is False and d1["return_token_ids"] is True
            assert d1["kv_transfer_params"]["remote_engine_id"] == "p-engine"
            assert d1["kv_transfer_params"]["remote_host"] == "127.0.0.1"
            assert d1["max_tokens"] == 16
            assert [t.decision.reason for t in router.turns] == ["no-entry", "hit"]
            assert router.guard.stats()["decisions"] == {"store": 2, "no-entry": 1, "hit": 1}
        finally:
            await _close(p, d, router)
    run(go())


def test_stripped_reasoning_sends_fresh_parameters(caplog):
    async def go():
        think = ["<think>", "\n", "sunny", "\n", "</think>", "\n\n", "It", " is", " sunny", "."]
        p, d, _, router = await _stack([think, ["Rome", "."]])
        try:
            m1 = [SYSTEM, Q1]
            a1 = (await _chat(router, {"model": "qwen3", "messages": m1, "conversation_id": "c1"})).json()
            text = a1["choices"][0]["message"]["content"]
            m2 = m1 + [{"role": "assistant", "content": text}, Q2]     # the template drops the thinking
            with caplog.at_level(logging.INFO, logger="vllmlint.guard"):
                r2 = await _chat(router, {"model": "qwen3", "messages": m2, "conversation_id": "c1"})
            assert r2.status == 200
            assert r2.headers["x-vllmlint-guard"].startswith(f"miss; reason=edited-history; position={len(encode(render(m1)))}")
            assert p.calls()[1]["kv_transfer_params"]["remote_block_ids"] is None
            assert "guard: miss conversation=c1 reason=edited-history at token" in caplog.text
        finally:
            await _close(p, d, router)
    run(go())


def test_unguarded_policy_reuses_edited_history_like_the_reference_proxy():
    async def go():
        think = ["<think>", "\n", "sunny", "\n", "</think>", "\n\n", "It", "."]
        p, d, _, router = await _stack([think, ["Rome", "."]], policy="unguarded")
        try:
            m1 = [SYSTEM, Q1]
            a1 = (await _chat(router, {"model": "qwen3", "messages": m1, "conversation_id": "c1"})).json()
            m2 = m1 + [{"role": "assistant", "content": a1["choices"][0]["message"]["content"]}, Q2]
            r2 = await _chat(router, {"model": "qwen3", "messages": m2, "conversation_id": "c1"})
            assert r2.headers["x-vllmlint-guard"].startswith("hit")
            assert p.calls()[1]["kv_transfer_params"]["remote_engine_id"] == "d-engine-0"
            assert not [path for path, _ in p.requests if path.endswith("/render")]   # it never renders
            assert "prompt_token_ids" not in p.calls()[1]["kv_transfer_params"]
        finally:
            await _close(p, d, router)
    run(go())


def test_without_conversation_id_nothing_is_rendered_or_stored():
    async def go():
        p, d, _, router = await _stack([["It", "."]])
        try:
            r = await _chat(router, {"model": "qwen3", "messages": [SYSTEM, Q1]})
            assert r.status == 200 and "x-vllmlint-guard" not in r.headers
            assert [path for path, _ in p.requests] == ["/v1/chat/completions"]
            assert "return_token_ids" not in d.calls()[0]
            assert len(router.guard) == 0
        finally:
            await _close(p, d, router)
    run(go())


def test_conversation_id_header_is_accepted():
    async def go():
        p, d, _, router = await _stack([["It", "."]])
        try:
            r = await _chat(router, {"model": "qwen3", "messages": [SYSTEM, Q1]}, {"X-Conversation-Id": "h1"})
            assert r.headers["x-vllmlint-guard"].startswith("miss; reason=no-entry")
            assert router.guard.peek("h1") is not None
        finally:
            await _close(p, d, router)
    run(go())


def test_render_failure_is_a_miss_and_the_request_still_works(caplog):
    async def go():
        p, d, _, router = await _stack([["It", "."], ["Rome", "."]], render_status=404)
        try:
            m1 = [SYSTEM, Q1]
            with caplog.at_level(logging.INFO):
                a1 = (await _chat(router, {"model": "qwen3", "messages": m1, "conversation_id": "c1"})).json()
                m2 = m1 + [{"role": "assistant", "content": a1["choices"][0]["message"]["content"]}, Q2]
                r2 = await _chat(router, {"model": "qwen3", "messages": m2, "conversation_id": "c1"})
            assert r2.status == 200
            assert r2.headers["x-vllmlint-guard"].startswith("miss; reason=unrendered")
            assert p.calls()[1]["kv_transfer_params"]["remote_block_ids"] is None
            assert "--enable-scale-out" in caplog.text
        finally:
            await _close(p, d, router)
    run(go())


def test_render_tier_is_used_when_given():
    async def go():
        p, d, r, router = await _stack([["It", "."]], render_tier=True)
        try:
            await _chat(router, {"model": "qwen3", "messages": [SYSTEM, Q1], "conversation_id": "c1"})
            assert [path for path, _ in r.requests] == ["/v1/chat/completions/render"]
            assert not [path for path, _ in p.requests if path.endswith("/render")]
            assert "conversation_id" not in r.requests[0][1]
        finally:
            await _close(p, d, r, router)
    run(go())


def _events(body: bytes) -> list[str]:
    return [e[6:] for e in body.decode().split("\n\n") if e.startswith("data: ")]


def test_buffered_streams_call_decode_without_streaming():
    async def go():
        p, d, _, router = await _stack([["It", " is", " sunny", "."]], buffer_streams=True)
        try:
            r = await _chat(router, {"model": "qwen3", "messages": [SYSTEM, Q1], "conversation_id": "c1",
                                     "stream": True, "stream_options": {"include_usage": True}})
            assert r.status == 200 and r.headers["content-type"] == "text/event-stream"
            events = _events(r.body)
            assert events[-1] == "[DONE]"
            chunks = [json.loads(e) for e in events[:-1]]
            text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
            assert text == "It is sunny."
            assert chunks[-1]["usage"]["completion_tokens"] == len(sample(["It", " is", " sunny", "."]))
            assert d.calls()[0]["stream"] is False and "stream_options" not in d.calls()[0]
            assert router.guard.peek("c1") is not None
        finally:
            await _close(p, d, router)
    run(go())


async def _stream_events(url: str, body: dict, gate: asyncio.Queue | None = None
                         ) -> tuple[dict, list[tuple[float, bytes]]]:
    """POST and read the answer event by event: (headers, [(loop time it arrived, event bytes)]);
    each event received puts an item on `gate` (the fake decode's lock-step)."""
    import aiohttp
    loop = asyncio.get_running_loop()
    out: list[tuple[float, bytes]] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
        async with s.post(url, json=body) as r:
            buf = b""
            async for piece in r.content.iter_any():
                buf += piece
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    out.append((loop.time(), event))
                    if gate is not None:
                        gate.put_nowait(len(out))
            return {k.lower(): v for k, v in r.headers.items()}, out


def test_a_streamed_answer_is_relayed_event_by_event_as_decode_sends_it():
    """Decode in lock-step with the client: it sends each event only after the client received the
    one before, so the answer completes only if the router relays every event as it comes (no
    clock involved: a router that buffered would leave decode waiting and the stream cut). Then
    the same number of events as decode's, the turn recorded from the ids read on the way, and
    nothing the router added reaches the client. (How many ms the relay adds: the development note.)"""
    pieces = ["It", " is", " sunny", "."]

    async def go():
        p, d, _, router = await _stack([pieces, ["Rome", "."]])
        d.gate = asyncio.Queue()
        try:
            url = f"http://127.0.0.1:{router.port}/v1/chat/completions"
            headers, got = await _stream_events(url, {"model": "qwen3", "messages": [SYSTEM, Q1],
                                                      "conversation_id": "c1", "stream": True}, d.gate)
            assert headers["content-type"] == "text/event-stream"
            assert len(got) == len(d.sent_at) == 7                  # decode's event count, [DONE] included
            assert all(arrived >= sent for (arrived, _), sent in zip(got, d.sent_at))
            chunks = [json.loads(e[6:]) for _, e in got[:-1]]
            assert got[-1][1] == b"data: [DONE]"
            assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "It is sunny."
            for c in chunks:      # the router's own additions are taken out
                assert "kv_transfer_params" not in c and "prompt_token_ids" not in c
                assert "token_ids" not in c["choices"][0]
            call = d.calls()[0]
            assert call["stream"] is True and call["return_token_ids"] is True
            stored = router.guard.peek("c1")
            m1 = [SYSTEM, Q1]
            assert list(stored.token_ids) == (encode(render(m1)) + sample(pieces))[:stored.remote_num_tokens]
            # the next turn, continuing exactly, reuses D's blocks
            m2 = m1 + [{"role": "assistant", "content": "It is sunny."}, Q2]
            d.gate = None
            headers2, _ = await _stream_events(url, {"model": "qwen3", "messages": m2, "conversation_id": "c1",
                                                     "stream": True})
            assert headers2["x-vllmlint-guard"].startswith("hit")
            metrics = (await httpkit.request("GET", f"http://127.0.0.1:{router.port}/metrics")).body.decode()
            assert 'vllmlint_router_first_byte_seconds_count{path="/v1/chat/completions",streamed="true"} 2' \
                in metrics
        finally:
            await _close(p, d, router)
    run(go())


def test_a_stream_without_kv_transfer_params_is_relayed_and_not_stored(caplog):
    """vLLM 0.30-0.32 stream no kv_transfer_params: the answer streams, the turn is not stored."""
    async def go():
        p, d, _, router = await _stack([["It", "."]])
        d.stream_kv = False
        try:
            with caplog.at_level(logging.INFO):
                headers, got = await _stream_events(f"http://127.0.0.1:{router.port}/v1/chat/completions", {
                    "model": "qwen3", "messages": [SYSTEM, Q1], "conversation_id": "c1", "stream": True,
                    "return_token_ids": True})
            assert got[-1][1] == b"data: [DONE]"
            first = json.loads(got[0][1][6:])
            assert first["prompt_token_ids"] == encode(render([SYSTEM, Q1]))      # asked for: kept
            assert router.guard.peek("c1") is None
            assert "reason=no-kv-transfer-params" in caplog.text and "--buffer-streams" in caplog.text
        finally:
            await _close(p, d, router)
    run(go())


def test_token_ids_are_returned_when_the_client_asks():
    async def go():
        p, d, _, router = await _stack([["It", "."]])
        try:
            a = (await _chat(router, {"model": "qwen3", "messages": [SYSTEM, Q1], "conversation_id": "c1",
                                      "return_token_ids": True})).json()
            assert a["prompt_token_ids"] == encode(render([SYSTEM, Q1]))
            assert a["choices"][0]["token_ids"] == sample(["It", "."])
        finally:
            await _close(p, d, router)
    run(go())


def test_prefill_failure_with_reused_blocks_is_retried_without_them():
    async def go():
        p, d, _, router = await _stack([["It", "."], ["Rome", "."]])
        try:
            m1 = [SYSTEM, Q1]
            a1 = (await _chat(router, {"model": "qwen3", "messages": m1, "conversation_id": "c1"})).json()
            p.fail_next_with_reuse = True
            m2 = m1 + [{"role": "assistant", "content": a1["choices"][0]["message"]["content"]}, Q2]
            r2 = await _chat(router, {"model": "qwen3", "messages": m2, "conversation_id": "c1"})
            assert r2.status == 200
            calls = p.calls()
            assert calls[1]["kv_transfer_params"]["remote_engine_id"] == "d-engine-0"
            assert calls[2]["kv_transfer_params"]["remote_block_ids"] is None
            assert router.turns[-1].retried_without_reuse
        finally:
            await _close(p, d, router)
    run(go())


def test_media_requests_are_not_guarded():
    async def go():
        p, d, _, router = await _stack([["It", "."], ["Rome", "."]])
        try:
            m1 = [SYSTEM, Q1]
            a1 = (await _chat(router, {"model": "qwen3", "messages": m1, "conversation_id": "c1"})).json()
            img = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}},
                                               {"type": "text", "text": "What about Rome?"}]}
            m2 = m1 + [{"role": "assistant", "content": a1["choices"][0]["message"]["content"]}, img]
            r2 = await _chat(router, {"model": "qwen3", "messages": m2, "conversation_id": "c1"})
            assert "x-vllmlint-guard" not in r2.headers
            assert p.calls()[1]["kv_transfer_params"]["remote_block_ids"] is None
            assert len(router.guard) == 0
        finally:
            await _close(p, d, router)
    run(go())


def test_upstream_errors_are_passed_through_and_unreachable_is_502():
    async def go():
        p, d, _, router = await _stack([["It", "."]])
        try:
            bad = await _chat(router, {"model": "nope", "messages": [SYSTEM, Q1], "conversation_id": "c1"})
            assert bad.status == 404 and bad.json()["error"] == "model nope does not exist"
            assert d.calls() == []
            await d.server.close()
            gone = await _chat(router, {"model": "qwen3", "messages": [SYSTEM, Q1]})
            assert gone.status == 502 and "decoder" in gone.json()["error"]
            notfound = await httpkit.request("GET", f"http://127.0.0.1:{router.port}/nope")
            assert notfound.status == 404
        finally:
            await _close(p, router)
    run(go())


def test_health_and_models():
    async def go():
        p, d, _, router = await _stack([])
        try:
            h = await httpkit.request("GET", f"http://127.0.0.1:{router.port}/health")
            assert h.status == 200 and h.json()["policy"] == "guarded"
            m = await httpkit.request("GET", f"http://127.0.0.1:{router.port}/v1/models")
            assert m.json()["data"][0]["id"] == "qwen3"
        finally:
            await _close(p, d, router)
    run(go())


# -- command line ---------------------------------------------------------------------------------

def test_reference_proxy_argv_parses():
    parser = build_parser()
    args = parser.parse_args(["--port", "8000", "--prefiller-hosts", "p1", "p2", "--prefiller-ports", "8100", "8101",
                              "--decoder-host", "d1", "--decoder-port", "8200"])
    router = router_from_args(args, parser)
    assert router.prefillers == [Backend("p1", 8100), Backend("p2", 8101)]
    assert router.decoders == [Backend("d1", 8200)]
    assert args.host == "0.0.0.0" and router.policy == "guarded"


def test_backend_from_url():
    assert Backend.from_url("http://127.0.0.1:8100") == Backend("127.0.0.1", 8100)
    assert Backend.from_url("http://[::1]:8200/").url == "http://[::1]:8200"
    assert Backend.from_url("decode:8200") == Backend("decode", 8200)


def test_mismatched_hosts_and_ports_is_a_usage_error():
    parser = build_parser()
    args = parser.parse_args(["--prefiller-hosts", "p1", "p2", "--prefiller-ports", "8100"])
    with pytest.raises(SystemExit):
        router_from_args(args, parser)


def test_cli_router_help_is_the_routers():
    result = CliRunner().invoke(cli_main, ["router", "--help"])
    assert result.exit_code == 0
    assert "--prefiller-hosts" in result.output and "--render-url" in result.output


def test_python_m_vllmlint_router_serves_health(tmp_path):
    """The module entry point starts, answers /health and stops on SIGTERM."""
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "vllmlint.router", "--host", "127.0.0.1", "--port", str(port),
                             "--prefiller-hosts", "127.0.0.1", "--prefiller-ports", "9",
                             "--decoder-hosts", "127.0.0.1", "--decoder-ports", "9"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    assert json.loads(r.read())["status"] == "ok"
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()
                time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- streamed turns: the guard still refuses every rewritten history ---------------------------------

THINK = ["<think>", "Paris", "?", "</think>", "\n\n", "It", " is", " sunny", "."]
CALL = ["<tool_call>", '\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n', "</tool_call>"]
SUNNY = ["It", " is", " sunny", "."]


def _assistant(pieces: list[str]) -> dict:
    return {"role": "assistant", "content": "".join(pieces)}


def _tool_call(city: str) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": "call-1", "type": "function", "function": {
        "name": "get_weather", "arguments": json.dumps({"city": city})}}]}


TOOL_RESULT = {"role": "tool", "content": "sunny", "tool_call_id": "call-1"}
Q3 = {"role": "user", "content": "What about the city?"}
A = _assistant(SUNNY)
# each case: the turns (messages sent, D's answer pieces); the last turn is the one checked
REWRITES = {
    "exact continuation": ([([SYSTEM, Q1], SUNNY), ([SYSTEM, Q1, A, Q2], SUNNY)], True),
    "exact tool call": ([([SYSTEM, Q1], CALL), ([SYSTEM, Q1, _tool_call("Paris"), TOOL_RESULT], SUNNY)], True),
    "removed middle message": ([([SYSTEM, Q1], SUNNY), ([SYSTEM, Q1, A, Q2], SUNNY),
                                ([SYSTEM, Q1, Q2, A, Q3], SUNNY)], False),
    "dropped thinking trace": ([([SYSTEM, Q1], THINK), ([SYSTEM, Q1, _assistant(THINK), Q2], SUNNY)], False),
    "edited tool call": ([([SYSTEM, Q1], CALL), ([SYSTEM, Q1, _tool_call("Rome"), TOOL_RESULT], SUNNY)], False),
}


@pytest.mark.parametrize("case", sorted(REWRITES))
def test_streamed_turns_reuse_only_exact_continuations(case):
    """Every turn streamed through the router; the turns before the last continue exactly (hits
    after the first), the last one continues or rewrites the history."""
    turns, hit = REWRITES[case]

    async def go():
        p, d, _, router = await _stack([pieces for _, pieces in turns])
        url = f"http://127.0.0.1:{router.port}/v1/chat/completions"
        try:
            for n, (messages, _) in enumerate(turns, 1):
                headers, got = await _stream_events(url, {"model": "qwen3", "messages": messages,
                                                          "conversation_id": "c1", "stream": True})
                assert got[-1][1] == b"data: [DONE]" and router.guard.peek("c1") is not None
                guard = headers["x-vllmlint-guard"]
                kv = p.calls()[-1]["kv_transfer_params"]
                if n == 1:
                    assert guard.startswith("miss; reason=no-entry"), guard
                elif n < len(turns) or hit:
                    assert guard.startswith("hit"), (n, guard)
                    assert kv["remote_block_ids"] is not None
                else:
                    assert guard.startswith("miss; reason=edited-history"), guard
                    assert kv["remote_block_ids"] is None            # P computes the whole prompt
        finally:
            await _close(p, d, router)
    run(go())


def test_a_client_that_leaves_mid_stream_closes_decodes_stream_and_stores_nothing():
    import aiohttp

    async def go():
        p, d, _, router = await _stack([["It", " is", " sunny", "."]])
        d.event_delay = 0.2
        try:
            async with aiohttp.ClientSession() as s:
                async with s.post(f"http://127.0.0.1:{router.port}/v1/chat/completions", json={
                        "model": "qwen3", "messages": [SYSTEM, Q1], "conversation_id": "c1", "stream": True}) as r:
                    first = await r.content.readuntil(b"\n\n")
                    assert first.startswith(b"data: ")
                    r.close()                         # the client goes away after the first event
            for _ in range(100):                      # bounded: 10 s
                if router.metrics.in_flight == 0:
                    break
                await asyncio.sleep(0.1)
            assert router.metrics.in_flight == 0
            assert router.metrics.client_errors["disconnected"] == 1
            await asyncio.sleep(1.0)                  # what decode would have sent by now: nothing more
            assert len(d.sent_at) < 7 and router.guard.peek("c1") is None
        finally:
            await _close(p, d, router)
    run(go())
