"""Tiny HTTP helpers for the tests, on aiohttp: fake engines (`Server(handler)`) and one-shot
client calls (`post_json`, `request`). The router's own HTTP is aiohttp too (vllmlint/pd/router.py)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import AsyncIterator, Awaitable, Callable

import aiohttp
from aiohttp import web


@dataclass
class Request:
    method: str
    path: str
    query: str
    headers: dict[str, str]       # lower-case names
    body: bytes

    def json(self):
        return json.loads(self.body or b"null")


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    stream: AsyncIterator[bytes] | None = None    # a body written piece by piece (server-sent events)

    @classmethod
    def json(cls, obj, status: int = 200, headers: dict[str, str] | None = None) -> "Response":
        return cls(status, json.dumps(obj).encode(), {"content-type": "application/json", **(headers or {})})


@dataclass
class ClientResponse:
    status: int
    headers: dict[str, str]       # lower-case names
    body: bytes

    def json(self):
        return json.loads(self.body)


Handler = Callable[[Request], Awaitable[Response]]


class Server:
    """`await Server(handler).start(host, port)`; `port=0` picks a free port (see `.port`)."""

    def __init__(self, handler: Handler):
        self.handler = handler
        self.port = 0
        self._runner: web.ServerRunner | None = None

    async def _handle(self, request: web.BaseRequest) -> web.Response:
        body = await request.read()
        req = Request(request.method, request.path, request.query_string,
                      {k.lower(): v for k, v in request.headers.items()}, body)
        resp = await self.handler(req)
        if resp.stream is None:
            return web.Response(body=resp.body, status=resp.status, headers=resp.headers)
        out = web.StreamResponse(status=resp.status, headers=resp.headers)
        await out.prepare(request)
        async for piece in resp.stream:
            await out.write(piece)
        await out.write_eof()
        return out

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> "Server":
        self._runner = web.ServerRunner(web.Server(self._handle, access_log=None), handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


async def request(method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                  timeout: float | None = None) -> ClientResponse:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
        async with s.request(method, url, data=body, headers=headers or {}) as r:
            data = await r.read()
            return ClientResponse(r.status, {k.lower(): v for k, v in r.headers.items()}, data)


async def post_json(url: str, obj, headers: dict[str, str] | None = None,
                    timeout: float | None = None) -> ClientResponse:
    return await request("POST", url, json.dumps(obj).encode(),
                         {"content-type": "application/json", **(headers or {})}, timeout)
