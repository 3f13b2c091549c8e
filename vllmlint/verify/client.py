"""A small HTTP client for the probes (stdlib only: vllmlint itself does not need requests)."""
from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    status: int                  # 0: no HTTP answer (refused, timed out)
    body: bytes
    seconds: float
    error: str | None = None     # why there was no answer

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def snippet(self, limit: int = 200) -> str:
        if self.error:
            return self.error
        text = self.body.decode("utf-8", "replace").strip().replace("\n", " ")
        return text if len(text) <= limit else text[:limit] + "..."


def request(method: str, url: str, body: Any = None, timeout: float = 60.0,
            headers: dict[str, str] | None = None) -> Reply:
    data = None if body is None else json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json"} if data is not None else {}
    hdrs.update(headers or {})
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    start = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return Reply(resp.status, resp.read(), time.monotonic() - start)
    except urllib.error.HTTPError as err:
        try:
            payload = err.read()
        except OSError:
            payload = b""
        return Reply(err.code, payload, time.monotonic() - start)
    except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError, OSError) as err:
        reason = getattr(err, "reason", err)
        return Reply(0, b"", time.monotonic() - start, f"no answer: {reason}")


def get(url: str, timeout: float = 10.0, headers: dict[str, str] | None = None) -> Reply:
    return request("GET", url, None, timeout, headers)


def post(url: str, body: Any, timeout: float = 60.0, headers: dict[str, str] | None = None) -> Reply:
    return request("POST", url, body, timeout, headers)
