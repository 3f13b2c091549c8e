"""`vllmlint kv-probe`: step 2 of vLLM's pre-split checklist on running servers.

Send long prompts one at a time through the P/D deployment and read what decode says about
pulling their KV: NixlConnector's counters on decode's `/metrics` and, given the log, decode's
`KV Transfer metrics` line (any release format, `knowledge/kvmetrics.py`). Print the average
and P90 transfer time, MB per request and throughput beside VL201's estimate for the model and
the link, and the verdict: an average transfer in the hundreds of milliseconds is the first
thing to fix before splitting.

    run_probe(ProbeConfig(router="http://router:8000", decode="http://decode:8200", ...))

Routes: `router` (the deployment's own proxy, POST /v1/completions), or `prefill` + `decode`
(vllmlint plays the reference proxies' flow: prefill with `max_tokens=1` and
`kv_transfer_params.do_remote_decode`, then decode with what prefill returned). Each prompt is
text of `prompt_tokens` tokens as counted by the server's own `/tokenize`, starting with a
unique nonce so no prefix cache (P's or D's) shortens the transfer.

Exit codes: 0 transfers seen and not slow, 1 slow / failed / no transfer seen, 2 the servers
could not be reached or a usage problem.
"""
from __future__ import annotations

import random
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..knowledge import kvmetrics as km
from ..knowledge.topology import BANDWIDTH, LINK_KINDS, Link, dtype_bytes, estimate, find_geometry, parse_topology
from . import client as http
from .router import BuiltinRouter

SLOW_MS = 100.0          # "an average transfer in the hundreds of milliseconds is the first thing to fix"
EXIT_OK, EXIT_FINDING, EXIT_ERROR = 0, 1, 2
WORDS = ("river stone cloud amber lantern orbit meadow cipher harbor velvet quartz summit timber "
         "falcon ember glacier canyon willow signal prism marble thunder cobalt saffron tundra beacon "
         "nectar rapid mosaic ripple kernel fjord lattice tidal zephyr onyx crimson delta vector").split()


class ProbeError(RuntimeError):
    pass


@dataclass
class ProbeConfig:
    router: str | None = None
    prefill: str | None = None
    decode: str | None = None
    model: str | None = None
    prompt_tokens: int = 8192
    requests: int = 5
    max_tokens: int = 4
    decode_log: str | None = None           # a file, or "-" for stdin
    log_wait: float = 20.0                  # seconds to wait for the stats interval's line
    timeout: float = 300.0
    api_key: str | None = None
    tokenize_url: str | None = None
    model_config: str | None = None
    dtype: str | None = None
    kv_cache_dtype: str | None = None
    link: str | None = None
    topology: str | None = None
    gpus: tuple[int, int] | None = None


@dataclass
class ProbeResult:
    model: str | None = None
    route: str = ""
    prompt_tokens: list[int] = field(default_factory=list)     # as each answer's usage says
    target_tokens: int = 0
    clamped: str | None = None
    request_seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    metrics: km.TransferSummary | None = None                  # decode /metrics delta
    log: km.TransferSummary | None = None                      # decode's log lines
    estimate: dict | None = None
    verdict: str = ""
    findings: list[str] = field(default_factory=list)
    exit_code: int = EXIT_OK

    @property
    def measured(self) -> km.TransferSummary | None:
        """/metrics' figures when it saw transfers (exactly the probe's window), else the log's (its
        stats interval may also hold a transfer made just before the probe started)."""
        for s in (self.metrics, self.log):
            if s is not None and s.transfers:
                return s
        return self.metrics or self.log

    def as_dict(self) -> dict:
        m = self.measured
        return {"model": self.model, "route": self.route, "target_tokens": self.target_tokens,
                "prompt_tokens": self.prompt_tokens, "clamped": self.clamped,
                "request_seconds": [round(s, 3) for s in self.request_seconds], "errors": self.errors,
                "metrics": self.metrics.as_dict() if self.metrics else None,
                "log": dict(self.log.as_dict(), lines=self.log.lines) if self.log else None,
                "measured": m.as_dict() if m else None, "mb_per_request": self.mb_per_request(),
                "estimate": self.estimate, "verdict": self.verdict, "findings": self.findings,
                "exit_code": self.exit_code}

    def mb_per_request(self) -> float | None:
        """MB moved per request: with tensor parallelism each rank counts its own transfer."""
        m = self.measured
        if not m or not m.transfers or m.mb_per_transfer is None or not self.prompt_tokens:
            return None
        return round(m.mb_per_transfer * m.transfers / len(self.prompt_tokens), 4)


# -- prompts of N tokens -----------------------------------------------------------------------------
def _count(url: str, model: str | None, text: str, timeout: float, headers: dict) -> tuple[int, int | None]:
    body = {"prompt": text}
    if model:
        body["model"] = model
    reply = http.post(url.rstrip("/") + "/tokenize", body, timeout, headers)
    data = reply.json() if reply.status == 200 else None
    if not isinstance(data, dict) or "count" not in data:
        raise ProbeError(f"{url}/tokenize answered {reply.status or ''} {reply.snippet()}".strip()
                         + " (give --tokenize-url: a vLLM server of the deployment)")
    return int(data["count"]), data.get("max_model_len")


def prompt_of(n_tokens: int, count, seed: int) -> tuple[str, int]:
    """Text of at most `n_tokens` tokens (as `count(text)` says), as close as whole words allow,
    starting with a unique nonce. Returns (text, its count)."""
    rng = random.Random(seed)
    head = f"Request {secrets.token_hex(6)}. Read the words and reply with one:"
    words = [rng.choice(WORDS) for _ in range(max(16, n_tokens * 2))]

    def text(k: int) -> str:
        return head + " " + " ".join(words[:k])
    k = max(1, n_tokens // 2)
    c = count(text(k))
    if c < n_tokens:                             # scale up to a bracket, then bisect
        k = min(len(words), int(k * n_tokens / max(c, 1)) + 8)
        while count(text(k)) <= n_tokens and k < len(words):
            words += [rng.choice(WORDS) for _ in range(len(words))]
            k = min(len(words), k * 2)
    lo, hi = 0, k                                # count(text(hi)) > n_tokens or hi is the most we have
    best = (text(0), count(text(0)))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        c = count(text(mid))
        if c <= n_tokens:
            lo, best = mid, (text(mid), c)
        else:
            hi = mid - 1
    if best[1] > n_tokens:
        raise ProbeError(f"the probe's preamble alone is {best[1]} tokens, over {n_tokens}")
    return best


# -- the decode log -----------------------------------------------------------------------------------
class LogSource:
    """Decode's log from a file (lines appended after `start`) or stdin (lines that arrive after
    `start`: `kubectl logs -f --tail=0 POD | vllmlint kv-probe --decode-log - ...`)."""

    def __init__(self, spec: str, stdin=None):
        self.spec = spec
        self.lines: list[tuple[float, str]] = []
        self.offset = 0
        self.t0 = 0.0
        if spec == "-":
            stream = stdin or sys.stdin
            threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.lines.append((time.monotonic(), line))

    def start(self) -> None:
        self.t0 = time.monotonic()
        if self.spec != "-":
            p = Path(self.spec)
            self.offset = p.stat().st_size if p.exists() else 0

    def text(self, everything: bool = False) -> str:
        if self.spec == "-":
            return "".join(l for t, l in list(self.lines) if everything or t >= self.t0)
        p = Path(self.spec)
        if not p.exists():
            raise ProbeError(f"{self.spec}: no such file")
        with p.open("rb") as fh:
            if not everything:
                fh.seek(self.offset)
            return fh.read().decode("utf-8", "replace")


# -- the estimate -----------------------------------------------------------------------------------------
def link_of(cfg: ProbeConfig) -> Link:
    if cfg.topology:
        topo = parse_topology(Path(cfg.topology).read_text(encoding="utf-8", errors="replace"))
        a, b = cfg.gpus or (topo.indices[:2] if len(topo.indices) >= 2 else (0, 1))
        try:
            return topo.link(a, b)
        except KeyError as err:
            raise ProbeError(f"--topology: {err.args[0]}") from None
    kind = cfg.link or "unknown"
    return Link(kind, "", kind in ("nvlink", "p2p", "rdma"))


def estimate_for(cfg: ProbeConfig, model: str | None, prompt_tokens: int) -> dict | None:
    found = find_geometry(model or "", cfg.model_config)
    if found is None:
        return {"error": f"no KV geometry for {model!r} (give --model-config PATH/config.json)"}
    geo, where = found
    link = link_of(cfg)
    est = estimate(geo, prompt_tokens, link, dtype_bytes(cfg.dtype, cfg.kv_cache_dtype))
    return {"geometry": where, "bytes": est.bytes, "mb": round(est.bytes / 2**20, 4), "ms": round(est.seconds * 1e3, 3),
            "link": link.kind, "link_detail": link.detail, "mb_per_s": round(BANDWIDTH[link.kind] / 2**20, 1),
            "describe": est.describe()}


# -- the probe ----------------------------------------------------------------------------------------------
def _headers(cfg: ProbeConfig) -> dict[str, str]:
    return {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}


def served_model(url: str, timeout: float, headers: dict) -> str:
    reply = http.get(url.rstrip("/") + "/v1/models", timeout, headers)
    data = reply.json() if reply.status == 200 else None
    try:
        return data["data"][0]["id"]
    except (TypeError, KeyError, IndexError):
        raise ProbeError(f"{url}/v1/models answered {reply.status or ''} {reply.snippet()}".strip()) from None


def _reading(cfg: ProbeConfig) -> dict | None:
    if not cfg.decode:
        return None
    reply = http.get(cfg.decode.rstrip("/") + "/metrics", 10, _headers(cfg))
    return km.nixl_reading(reply.body.decode("utf-8", "replace")) if reply.status == 200 else None


def run_probe(cfg: ProbeConfig, echo=None, stdin=None) -> ProbeResult:
    echo = echo or (lambda s: None)
    res = ProbeResult(target_tokens=cfg.prompt_tokens)
    hdrs = _headers(cfg)
    log = LogSource(cfg.decode_log, stdin) if cfg.decode_log else None
    try:
        if cfg.requests == 0:                     # read a saved log only
            if log is None:
                raise ProbeError("--requests 0 reads --decode-log only; give it")
            text = _drain(log) if cfg.decode_log == "-" else log.text(everything=True)
            res.log = km.summarize(km.parse_log(text))
            res.model = cfg.model
            res.estimate = estimate_for(cfg, cfg.model, cfg.prompt_tokens) if cfg.model else None
            return _judge(res, requests=None)
        if cfg.router:
            res.route = f"router {cfg.router}"
            base = cfg.router
        elif cfg.prefill and cfg.decode:
            res.route = f"prefill {cfg.prefill} -> decode {cfg.decode} (vllmlint plays the reference proxy)"
            base = cfg.prefill
        else:
            raise ProbeError("give --router URL, or --prefill URL and --decode URL")
        model = cfg.model or served_model(cfg.decode or base, cfg.timeout, hdrs)
        res.model = model
        tok_url = cfg.tokenize_url or cfg.prefill or cfg.decode or cfg.router
        counter = lambda t: _count(tok_url, model, t, cfg.timeout, hdrs)[0]   # noqa: E731
        _, max_len = _count(tok_url, model, "hello", cfg.timeout, hdrs)
        target = cfg.prompt_tokens
        if max_len and target + cfg.max_tokens > int(max_len):
            target = int(max_len) - cfg.max_tokens - 1
            res.clamped = (f"--prompt-tokens {cfg.prompt_tokens} does not fit max_model_len {max_len}: "
                           f"{target} tokens sent")
            echo(f"kv-probe: {res.clamped}")
        res.target_tokens = target
        router = BuiltinRouter([cfg.prefill], [cfg.decode], cfg.timeout, hdrs) if not cfg.router else None
        before = _reading(cfg)
        if log:
            log.start()
        for i in range(cfg.requests):
            text, n = prompt_of(target, counter, seed=i)
            body = {"model": model, "prompt": text, "max_tokens": cfg.max_tokens, "temperature": 0,
                    "ignore_eos": True}
            t0 = time.monotonic()
            if router is not None:
                status, payload = router.route("/v1/completions", body)
                reply = http.Reply(status, payload, time.monotonic() - t0)
            else:
                reply = http.post(cfg.router.rstrip("/") + "/v1/completions", body, cfg.timeout, hdrs)
            res.request_seconds.append(reply.seconds)
            data = reply.json() if reply.status == 200 else None
            if not isinstance(data, dict) or not data.get("choices"):
                res.errors.append(f"request {i + 1}: {reply.status or ''} {reply.snippet()}".strip())
                echo(f"kv-probe: request {i + 1}: FAILED {res.errors[-1]}")
                continue
            res.prompt_tokens.append(int((data.get("usage") or {}).get("prompt_tokens") or n))
            echo(f"kv-probe: request {i + 1}/{cfg.requests}: {res.prompt_tokens[-1]} prompt tokens, "
                 f"{reply.seconds:.2f} s")
        ok = len(res.prompt_tokens)
        deadline = time.monotonic() + cfg.log_wait
        while ok:                                  # counters and the stats line land after the answer
            if before is not None:
                after = _reading(cfg)
                if after is not None:
                    res.metrics = km.nixl_delta(before, after)
            if log:
                res.log = km.summarize(km.parse_log(log.text()))
            got_m = before is None or (res.metrics is not None and res.metrics.transfers >= ok)
            got_l = log is None or (res.log is not None and res.log.transfers >= ok)
            if got_m and got_l or time.monotonic() > deadline:
                break
            time.sleep(1)
        res.estimate = estimate_for(cfg, model, round(sum(res.prompt_tokens) / ok) if ok else target)
        return _judge(res, requests=cfg.requests)
    except ProbeError as err:
        res.errors.append(str(err))
        res.verdict = f"could not probe: {err}"
        res.exit_code = EXIT_ERROR
        return res
    except OSError as err:
        res.errors.append(str(err))
        res.verdict = f"could not probe: {err}"
        res.exit_code = EXIT_ERROR
        return res


def _drain(log: LogSource) -> str:
    last = -1
    while len(log.lines) != last:      # stdin until it stops growing (a saved log piped in)
        last = len(log.lines)
        time.sleep(0.3)
    return log.text(everything=True)


def _judge(res: ProbeResult, requests: int | None) -> ProbeResult:
    m = res.measured
    est = res.estimate or {}
    if requests is not None and not res.prompt_tokens:
        res.verdict = "no request was answered: " + "; ".join(res.errors[:2])
        res.exit_code = EXIT_ERROR
        return res
    if m is None or not m.transfers:
        where = "decode's /metrics and log" if res.metrics is not None and res.log is not None else \
            "decode's log" if res.log is not None else "decode's /metrics" if res.metrics is not None else \
            "nothing (give --decode URL for /metrics or --decode-log)"
        res.verdict = f"no KV transfer seen in {where}"
        if m is not None and m.failed:
            res.verdict += f"; {m.failed} failed transfer(s)"
        res.exit_code = EXIT_FINDING if (res.metrics is not None or res.log is not None) else EXIT_ERROR
        return res
    if m.failed:
        res.findings.append(f"{m.failed} failed transfer(s)")
    if m.expired:
        res.findings.append(f"{m.expired} request(s) whose KV expired on prefill before decode read it")
    if m.notifs_after_expiry:
        res.findings.append(f"{m.notifs_after_expiry} notification(s) after expiry")
    if requests and m.transfers < len(res.prompt_tokens):
        res.findings.append(f"{m.transfers} transfer(s) for {len(res.prompt_tokens)} request(s)")
    slow = m.avg_ms is not None and m.avg_ms >= SLOW_MS
    if slow:
        res.findings.append(f"average transfer {m.avg_ms:g} ms: hundreds of milliseconds per request is the "
                            "first thing to fix before splitting (link, peer-to-peer, RDMA, kv_buffer_device)")
    link_mb_s = est.get("mb_per_s")
    if link_mb_s and m.throughput_mb_s and m.throughput_mb_s * 3 < link_mb_s and (m.avg_ms or 0) >= 10:
        res.findings.append(f"{m.throughput_mb_s:g} MB/s per rank is {link_mb_s / m.throughput_mb_s:.0f}x under what "
                            f"VL201 assumes for the link ({est.get('link')}, {link_mb_s:g} MiB/s)")
    res.exit_code = EXIT_FINDING if (slow or m.failed) else EXIT_OK
    res.verdict = ("SLOW: " if slow else "FAILED TRANSFERS: " if m.failed else "ok: ") + \
        f"{m.transfers} transfer(s), average {m.avg_ms:g} ms" + ("" if slow else f" (under {SLOW_MS:g} ms)")
    return res


def render_text(res: ProbeResult) -> str:
    out = [f"kv-probe: {res.route or 'saved log'}; model {res.model or '?'}"]
    if res.prompt_tokens:
        out.append(f"  requests: {len(res.prompt_tokens)} answered, prompt tokens {min(res.prompt_tokens)}-"
                   f"{max(res.prompt_tokens)} (target {res.target_tokens}), "
                   f"{min(res.request_seconds):.2f}-{max(res.request_seconds):.2f} s each")
    if res.clamped:
        out.append(f"  note: {res.clamped}")
    for label, s in (("decode /metrics", res.metrics), ("decode log", res.log)):
        if s is None:
            continue
        if not s.transfers:
            out.append(f"  {label}: no transfer" + (f" ({s.failed} failed)" if s.failed else ""))
            continue
        out.append(f"  {label}: {s.transfers} transfer(s), avg {s.avg_ms:g} ms, P90 "
                   f"{'-' if s.p90_ms is None else format(s.p90_ms, 'g')} ms"
                   + (" (bucket bound)" if s.source == "/metrics" and s.p90_ms is not None else "")
                   + f", {s.mb_per_transfer:g} MB per transfer, "
                   f"{'-' if s.throughput_mb_s is None else format(s.throughput_mb_s, 'g')} MB/s"
                   + (f", {s.failed} failed" if s.failed else "") + (f", {s.expired} expired" if s.expired else ""))
        for line in s.lines[-3:]:
            out.append(f"    {line[-240:]}")
    est = res.estimate
    if est and "error" not in est:
        mpr = res.mb_per_request()
        out.append(f"  VL201 estimate: {est['describe']} ({est['mb']:g} MiB, {est['ms']:g} ms at "
                   f"{est['mb_per_s']:g} MiB/s; geometry from {est['geometry']})")
        if mpr is not None:
            out.append(f"  measured: {mpr:g} MiB per request (estimate {est['mb']:g} MiB)")
    elif est:
        out.append(f"  VL201 estimate: {est['error']}")
    for f in res.findings:
        out.append(f"  - {f}")
    for e in res.errors[:5]:
        out.append(f"  error: {e}")
    out.append(f"verdict: {res.verdict}")
    return "\n".join(out)


__all__ = ["LINK_KINDS", "ProbeConfig", "ProbeResult", "run_probe", "render_text", "prompt_of"]
