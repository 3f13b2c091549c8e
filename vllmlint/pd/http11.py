"""A minimal HTTP/1.1 server and client on asyncio streams (standard library only).

Enough for a JSON router in front of vLLM engines: keep-alive on the server side, request bodies
by Content-Length or chunked, `Expect: 100-continue`, chunked (streamed) responses; the client
opens one connection per request (`Connection: close`) and reads Content-Length, chunked or
read-until-close bodies. No TLS on the server; the client speaks https when the URL says so.
"""
from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import dataclass, field
from typing import AsyncIterator, Awaitable, Callable
from urllib.parse import urlsplit

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
REASONS = {100: "Continue", 200: "OK", 204: "No Content", 400: "Bad Request", 404: "Not Found",
           405: "Method Not Allowed", 413: "Payload Too Large", 500: "Internal Server Error",
           502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


class HTTPError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class Request:
    method: str
    path: str                     # without the query string
    query: str
    headers: dict[str, str]       # lower-case names
    body: bytes

    def json(self):
        try:
            return json.loads(self.body or b"null")
        except ValueError as err:
            raise HTTPError(400, f"invalid JSON body: {err}") from None


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    stream: AsyncIterator[bytes] | None = None     # chunked body when set

    @classmethod
    def json(cls, obj, status: int = 200, headers: dict[str, str] | None = None) -> "Response":
        h = {"content-type": "application/json"}
        h.update(headers or {})
        return cls(status, json.dumps(obj).encode(), h)


@dataclass
class ClientResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


async def _read_headers(reader: asyncio.StreamReader) -> list[bytes] | None:
    lines: list[bytes] = []
    size = 0
    while True:
        line = await reader.readline()
        if not line:
            return None if not lines else lines
        size += len(line)
        if size > MAX_HEADER_BYTES:
            raise HTTPError(400, "headers too large")
        if line in (b"\r\n", b"\n"):
            if not lines:            # stray blank line between keep-alive requests
                continue
            return lines
        lines.append(line)


def _parse_fields(lines: list[bytes]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for raw in lines:
        name, sep, value = raw.decode("latin-1").partition(":")
        if not sep:
            raise HTTPError(400, "malformed header line")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str], until_close: bool) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        out = bytearray()
        while True:
            size_line = await reader.readline()
            if not size_line:
                raise HTTPError(400, "truncated chunked body")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass                 # trailers
                return bytes(out)
            if len(out) + size > MAX_BODY_BYTES:
                raise HTTPError(413, "body too large")
            out += await reader.readexactly(size)
            await reader.readline()
    if "content-length" in headers:
        n = int(headers["content-length"])
        if n > MAX_BODY_BYTES:
            raise HTTPError(413, "body too large")
        return await reader.readexactly(n) if n else b""
    if until_close:
        return await reader.read(MAX_BODY_BYTES)
    return b""


Handler = Callable[[Request], Awaitable[Response]]


class Server:
    """`await Server(handler).start(host, port)`; `port=0` picks a free port (see `.port`)."""

    def __init__(self, handler: Handler):
        self.handler = handler
        self._server: asyncio.base_events.Server | None = None
        self.port = 0
        self._conns: set[asyncio.Task] = set()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> "Server":
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_HEADER_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._conns):
                task.cancel()
            await self._server.wait_closed()

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        try:
            while True:
                try:
                    lines = await _read_headers(reader)
                    if lines is None:
                        return
                    method, target, version = lines[0].decode("latin-1").split(None, 2)
                    headers = _parse_fields(lines[1:])
                    if headers.get("expect", "").lower() == "100-continue":
                        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    body = await _read_body(reader, headers, until_close=False)
                except HTTPError as err:
                    await self._write(writer, Response.json({"error": str(err)}, err.status), False)
                    return
                except (ValueError, asyncio.IncompleteReadError):
                    await self._write(writer, Response.json({"error": "malformed request"}, 400), False)
                    return
                path, _, query = target.partition("?")
                keep = version.strip().upper() == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
                try:
                    response = await self.handler(Request(method.upper(), path, query, headers, body))
                except HTTPError as err:
                    response = Response.json({"error": str(err)}, err.status)
                if not await self._write(writer, response, keep) or not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            if task is not None:
                self._conns.discard(task)
            try:
                writer.close()
            except Exception:
                pass

    async def _write(self, writer: asyncio.StreamWriter, response: Response, keep: bool) -> bool:
        head = [f"HTTP/1.1 {response.status} {REASONS.get(response.status, 'Status')}"]
        headers = {k.lower(): v for k, v in response.headers.items()}
        if response.stream is None:
            headers["content-length"] = str(len(response.body))
        else:
            headers["transfer-encoding"] = "chunked"
        headers["connection"] = "keep-alive" if keep else "close"
        head += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        if response.stream is None:
            writer.write(response.body)
            await writer.drain()
            return True
        try:
            async for chunk in response.stream:
                if chunk:
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    await writer.drain()
        except Exception:
            return False                 # the client cannot tell: close the connection
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


async def request(method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                  timeout: float | None = None) -> ClientResponse:
    """One HTTP request on a fresh connection. Raises OSError / asyncio.TimeoutError."""
    coro = _request(method, url, body, headers or {})
    return await (asyncio.wait_for(coro, timeout) if timeout else coro)


async def post_json(url: str, obj, headers: dict[str, str] | None = None,
                    timeout: float | None = None) -> ClientResponse:
    h = {"content-type": "application/json"}
    h.update(headers or {})
    return await request("POST", url, json.dumps(obj).encode(), h, timeout)


async def _request(method: str, url: str, body: bytes | None, headers: dict[str, str]) -> ClientResponse:
    parts = urlsplit(url)
    secure = parts.scheme == "https"
    host = parts.hostname or "localhost"
    port = parts.port or (443 if secure else 80)
    reader, writer = await asyncio.open_connection(
        host, port, ssl=ssl.create_default_context() if secure else None, limit=MAX_HEADER_BYTES)
    try:
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        netloc = parts.netloc.rpartition("@")[2]
        h = {"host": netloc, "connection": "close", "accept": "application/json"}
        h.update({k.lower(): v for k, v in headers.items()})
        if body is not None:
            h["content-length"] = str(len(body))
        head = [f"{method} {target} HTTP/1.1"] + [f"{k}: {v}" for k, v in h.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        if body:
            writer.write(body)
        await writer.drain()
        while True:
            lines = await _read_headers(reader)
            if not lines:
                raise ConnectionError(f"{url}: connection closed without a response")
            status = int(lines[0].split()[1])
            if status != 100:
                break
        resp_headers = _parse_fields(lines[1:])
        data = b"" if method == "HEAD" or status in (204, 304) else \
            await _read_body(reader, resp_headers, until_close=True)
        return ClientResponse(status, resp_headers, data)
    finally:
        writer.close()
