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
4. decode: non-streaming (0.27-0.32 stream chunks carry no `kv_transfer_params`) with P's
   parameters and `return_token_ids: true`; D's prompt + output ids and its returned parameters
   are recorded in the guard;
5. the answer goes back to the client, as server-sent events when it asked to stream.

Requests without a conversation id, with several choices (`n > 1`) or with non-text content
(images, audio: their placeholder tokens are the same ids whatever the media) go P -> D with no
reuse and record nothing. If P fails while reused blocks were attached, the request is retried
once without them. Each response carries `X-Vllmlint-Guard: hit|miss; reason=...`.

No vLLM import and no third-party dependency: asyncio and `vllmlint.http11`.
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import itertools
import json
import logging
import os
import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, AsyncIterator, Sequence
from urllib.parse import urlsplit

from . import http11
from .guard import DEFAULT_TTL_S, ContinuationGuard, Decision, NoReuse, UnguardedReuse

log = logging.getLogger("vllmlint.router")

ROUTER_FIELDS = ("conversation_id",)          # ours: never forwarded to an engine
FRESH_PREFILL_PARAMS = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                        "remote_block_ids": None, "remote_host": None, "remote_port": None}
TEXT_PARTS = {"text", "input_text", "output_text", "refusal", "thinking", "reasoning"}
POLICIES = ("guarded", "unguarded", "none")


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
    """What the router did for one request (kept in `Router.turns` for replay and tests)."""

    conversation_id: str
    decision: Decision | None
    prompt_ids: list[int] | None          # the rendered ids the guard checked
    recorded: bool
    prefill: Backend | None
    decode: Backend | None
    retried_without_reuse: bool = False
    prefill_ms: float = 0.0
    decode_ms: float = 0.0


class Router:
    """The router as an object: `await Router(...).start(host, port)`, `await router.close()`.

    `policy` selects what happens between turns: "guarded" (the default: the token-id guard),
    "unguarded" (reuse by conversation id like the reference proxy: replay only), "none".
    """

    def __init__(self, prefillers: Sequence[Backend], decoders: Sequence[Backend], *,
                 render_url: str | None = None, policy: str = "guarded",
                 guard: Any = None, guard_ttl_s: float = DEFAULT_TTL_S, max_conversations: int = 4096,
                 pin_token_ids: bool = True, rewrite_remote_host: bool = True,
                 timeout_s: float | None = 600.0, api_key: str | None = None):
        if not prefillers or not decoders:
            raise ValueError("at least one prefiller and one decoder")
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}")
        self.prefillers, self.decoders = list(prefillers), list(decoders)
        self.render_url = render_url.rstrip("/") if render_url else None
        self.policy = policy
        if guard is None:
            guard = (ContinuationGuard(ttl_s=guard_ttl_s, max_conversations=max_conversations)
                     if policy == "guarded" else UnguardedReuse() if policy == "unguarded" else NoReuse())
        self.guard = guard
        self.pin_token_ids = pin_token_ids
        self.rewrite_remote_host = rewrite_remote_host
        self.timeout_s = timeout_s
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._p = itertools.cycle(self.prefillers)
        self._d = itertools.cycle(self.decoders)
        self.turns: deque[Turn] = deque(maxlen=1000)
        self._server: http11.Server | None = None
        self._render_warned = False

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self, host: str = "127.0.0.1", port: int = 0) -> "Router":
        self._server = await http11.Server(self.handle).start(host, port)
        log.info("router: listening on %s:%d, %d prefill, %d decode, policy=%s, render=%s",
                 host, self._server.port, len(self.prefillers), len(self.decoders), self.policy,
                 self.render_url or "prefiller /v1/*/render")
        return self

    @property
    def port(self) -> int:
        return self._server.port if self._server else 0

    async def close(self) -> None:
        if self._server is not None:
            await self._server.close()

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    # -- HTTP ----------------------------------------------------------------------------
    async def handle(self, req: http11.Request) -> http11.Response:
        if req.method == "GET" and req.path in ("/health", "/healthz"):
            return http11.Response.json({"status": "ok", "policy": self.policy, "guard": self.guard.stats()})
        if req.method == "GET" and req.path == "/v1/models":
            return await self._forward_get(self.decoders[0], req)
        if req.path in ("/v1/chat/completions", "/v1/completions"):
            if req.method != "POST":
                return http11.Response.json({"error": "method not allowed"}, 405)
            body = req.json()
            if not isinstance(body, dict):
                return http11.Response.json({"error": "the body must be a JSON object"}, 400)
            return await self.complete(req.path, body, req.headers)
        return http11.Response.json({"error": f"not found: {req.path}"}, 404)

    def _headers(self, client: dict[str, str], request_id: str) -> dict[str, str]:
        h = {"x-request-id": request_id}
        if self.api_key:
            h["authorization"] = f"Bearer {self.api_key}"
        elif client.get("authorization"):
            h["authorization"] = client["authorization"]
        return h

    async def _forward_get(self, backend: Backend, req: http11.Request) -> http11.Response:
        try:
            r = await http11.request("GET", backend.url + req.path, headers=self._headers(req.headers, "models"),
                                     timeout=self.timeout_s)
        except (OSError, asyncio.TimeoutError) as err:
            return http11.Response.json({"error": f"decoder unreachable: {err}"}, 502)
        return http11.Response(r.status, r.body, {"content-type": r.headers.get("content-type", "application/json")})

    async def _post(self, url: str, body: dict, headers: dict[str, str]) -> tuple[int, Any]:
        r = await http11.post_json(url, body, headers, self.timeout_s)
        try:
            return r.status, r.json()
        except ValueError:
            return r.status, {"error": r.body.decode("utf-8", "replace")[:2000]}

    # -- the request flow ------------------------------------------------------------------
    async def complete(self, path: str, body: dict, client_headers: dict[str, str]) -> http11.Response:
        chat = path == "/v1/chat/completions"
        request_id = str(uuid.uuid4())
        headers = self._headers(client_headers, request_id)
        conv = body.get("conversation_id") or client_headers.get("x-conversation-id") or ""
        conv = str(conv) if conv else ""
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
            decision = self.guard.check(conv, model, prompt_ids)
        elif conv:
            self.guard.forget(conv)
            log.info("router: conversation=%s not guarded (n>1, media or batched prompt): no reuse", conv)

        prefill, decode = next(self._p), next(self._d)
        turn = Turn(conv, decision, prompt_ids, False, prefill, decode)
        self.turns.append(turn)

        # prefill ----------------------------------------------------------------------------
        reuse = decision.kv_transfer_params if decision is not None and decision.hit else None
        t0 = time.monotonic()
        try:
            status, p_resp = await self._post(prefill.url + path, self._prefill_body(base, reuse, prompt_ids), headers)
            if status >= 400 and reuse is not None:
                log.warning("router: conversation=%s prefill answered %d with reused blocks attached; "
                            "retrying without them", conv, status)
                turn.retried_without_reuse = True
                status, p_resp = await self._post(prefill.url + path, self._prefill_body(base, None, prompt_ids),
                                                  headers)
        except (OSError, asyncio.TimeoutError, http11.HTTPError, ValueError) as err:
            return self._upstream_error("prefiller", prefill, err, decision)
        turn.prefill_ms = (time.monotonic() - t0) * 1000
        if status >= 400:
            return http11.Response.json(p_resp, status, self._guard_header(decision))

        # decode -------------------------------------------------------------------------------
        d_body = copy.deepcopy(base)
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
        t0 = time.monotonic()
        try:
            status, d_resp = await self._post(decode.url + path, d_body, headers)
        except (OSError, asyncio.TimeoutError, http11.HTTPError, ValueError) as err:
            return self._upstream_error("decoder", decode, err, decision)
        turn.decode_ms = (time.monotonic() - t0) * 1000
        if status >= 400 or not isinstance(d_resp, dict):
            return http11.Response.json(d_resp, status if status >= 400 else 502, self._guard_header(decision))

        # record -------------------------------------------------------------------------------
        d_kv = d_resp.get("kv_transfer_params")
        if guarded:
            if isinstance(d_kv, dict) and self.rewrite_remote_host and d_kv.get("remote_host") is not None:
                d_kv = dict(d_kv, remote_host=decode.host)
            d_prompt, d_output = _returned_ids(d_resp, chat)
            if d_prompt is None and self.pin_token_ids and prompt_ids is not None:
                d_prompt = prompt_ids            # D used the pinned ids verbatim
            turn.recorded = self.guard.record(conv, model, d_prompt, d_output, d_kv) is not None

        # answer -----------------------------------------------------------------------------
        answer = _client_view(d_resp, chat, wants_ids)
        headers_out = self._guard_header(decision)
        if wants_stream:
            include_usage = bool((base.get("stream_options") or {}).get("include_usage"))
            return http11.Response(200, headers={"content-type": "text/event-stream", "cache-control": "no-cache",
                                                 **headers_out},
                                   stream=_sse(answer, chat, include_usage))
        return http11.Response.json(answer, 200, headers_out)

    def _prefill_body(self, base: dict, reuse: dict | None, prompt_ids: list[int] | None) -> dict:
        body = copy.deepcopy(base)
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
            if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
                return list(prompt)
        endpoint = "/v1/chat/completions/render" if chat else "/v1/completions/render"
        if self.render_url:
            url = self.render_url if "/render" in urlsplit(self.render_url).path else self.render_url + endpoint
        else:
            url = self.prefillers[0].url + endpoint
        body = copy.deepcopy(base)
        body["stream"] = False
        body.pop("stream_options", None)
        try:
            status, resp = await self._post(url, body, headers)
        except (OSError, asyncio.TimeoutError, http11.HTTPError, ValueError) as err:
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
        if (body.get("n") or 1) != 1 or (body.get("best_of") or 1) != 1:
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
        return isinstance(prompt, list) and bool(prompt) and all(isinstance(t, int) for t in prompt)

    @staticmethod
    def _guard_header(decision: Decision | None) -> dict[str, str]:
        return {"x-vllmlint-guard": decision.header()} if decision is not None else {}

    def _upstream_error(self, what: str, backend: Backend, err: Exception, decision) -> http11.Response:
        log.error("router: %s %s failed: %s", what, backend.url, err or type(err).__name__)
        status = 504 if isinstance(err, asyncio.TimeoutError) else 502
        return http11.Response.json({"error": f"{what} {backend.url}: {err or type(err).__name__}"}, status,
                                    self._guard_header(decision))


def _int_list(value) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
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


async def _sse(resp: dict, chat: bool, include_usage: bool) -> AsyncIterator[bytes]:
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

def build_parser(prog: str = "vllmlint router") -> argparse.ArgumentParser:
    """The reference multi-turn proxy's options (singular and plural spellings), plus ours."""
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
    p.add_argument("--no-pin-token-ids", dest="pin_token_ids", action="store_false",
                   help="do not send the checked ids to P and D as kv_transfer_params.prompt_token_ids")
    p.add_argument("--keep-remote-host", dest="rewrite_remote_host", action="store_false",
                   help="keep the engines' remote_host (default: replace it with the host the router reaches "
                        "the engine by, as the reference proxy does)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per upstream request")
    p.add_argument("--policy", choices=POLICIES, default="guarded",
                   help="guarded (default); unguarded reproduces the reference proxy, for replay only; none")
    p.add_argument("--log-level", default="INFO")
    return p


def _backends(parser, hosts: list[str], ports: list[int], what: str) -> list[Backend]:
    if len(hosts) != len(ports):
        parser.error(f"number of {what} hosts must match ports")
    return [Backend(h.strip("[]"), p) for h, p in zip(hosts, ports)]


def router_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Router:
    return Router(_backends(parser, args.prefiller_hosts, args.prefiller_ports, "prefiller"),
                  _backends(parser, args.decoder_hosts, args.decoder_ports, "decoder"),
                  render_url=args.render_url, policy=args.policy, guard_ttl_s=args.guard_ttl,
                  max_conversations=args.max_conversations, pin_token_ids=args.pin_token_ids,
                  rewrite_remote_host=args.rewrite_remote_host, timeout_s=args.timeout or None)


def main(argv: list[str] | None = None, prog: str = "vllmlint router") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s", level=args.log_level.upper())
    router = router_from_args(args, parser)

    async def run() -> None:
        await router.start(args.host, args.port)
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
