"""A P/D deployment brought up with verify's machinery, for code that drives it (`vllmlint replay`).

    with deployment(["fixtures/verify/pd-nixl"], connector="nixl",
                    kv_extra={"bidirectional_kv_xfer": True}) as dep:
        dep.prefill_urls, dep.decode_urls, dep.model      # base URLs, served model name
        mark = dep.mark()                                  # log offsets per server
        before = dep.counters()                            # /metrics counters per server
        ...
        dep.logs_since(mark), counter_delta(before, dep.counters())

Planning is verify's (discover, group into deployments, `adapt`, start, wait for /health); the
first deployment with a producer and a consumer is used. `kv_extra` is merged into the
`kv_connector_extra_config` of every NixlConnector config (and recorded as an adaptation);
`prefill_args` are appended to the prefillers' argv. Every process started is stopped on exit.
"""
from __future__ import annotations

import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from ..lint.discovery import discover
from ..lint.graph import ROLE_BOTH, ROLE_CONSUMER, ROLE_PRODUCER, Graph
from ..model.kvconfig import NIXL
from ..lint.project import load
from . import client as http, logs
from .adapt import SERVER_KINDS, UnitContext, _kv_parts, _replace_kv_tokens, adapt
from .locate import NotFound, find_vllm, python_of, tiny_model
from .procs import Supervisor, free_port
from .runner import ServerResult, UnitRun, Units, Verifier, _auth, is_cpu_build, vllm_version

COUNTER_RE = re.compile(r"^(vllm:(?:prefix_cache_queries|prefix_cache_hits|external_prefix_cache_queries|"
                        r"external_prefix_cache_hits|nixl_xfer_time_seconds|nixl_bytes_transferred|"
                        r"nixl_num_failed_transfers|num_preemptions|prompt_tokens)"
                        r"(?:_total|_count|_sum)?)(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$")


class DeploymentError(RuntimeError):
    """The deployment could not be planned or started; `lines` holds vLLM's own error lines."""

    def __init__(self, message: str, lines: Sequence[str] = ()):
        super().__init__(message)
        self.lines = list(lines)



def by_role(prefill: list, decode: list) -> dict:
    """Servers (or their URLs) by the names reports use: prefill, prefill1, ..., decode, decode1, ..."""
    out = {f"prefill{i or ''}": x for i, x in enumerate(prefill)}
    out.update({f"decode{i or ''}": x for i, x in enumerate(decode)})
    return out

@dataclass
class Deployment:
    servers: list[ServerResult]
    prefill: list[ServerResult]
    decode: list[ServerResult]
    model: str
    vllm: str
    vllm_version: str | None
    workdir: Path
    started_s: float
    adaptations: dict[str, list[str]] = field(default_factory=dict)

    @property
    def prefill_urls(self) -> list[str]:
        return [r.plan.base_url for r in self.prefill]

    @property
    def decode_urls(self) -> list[str]:
        return [r.plan.base_url for r in self.decode]

    @property
    def api_key(self) -> str | None:
        return self.decode[0].plan.api_key

    def names(self) -> dict[str, ServerResult]:
        return by_role(self.prefill, self.decode)

    def mark(self) -> dict[str, int]:
        return {n: len(r.proc.log_text()) if r.proc else 0 for n, r in self.names().items()}

    def logs_since(self, mark: dict[str, int]) -> dict[str, str]:
        return {n: (r.proc.log_text()[mark.get(n, 0):] if r.proc else "") for n, r in self.names().items()}

    def alive(self) -> dict[str, bool]:
        return {n: bool(r.proc and r.proc.alive()) for n, r in self.names().items()}

    def counters(self) -> dict[str, dict[str, float]]:
        """Per server: prefix-cache, external (connector) prefix-cache and NixlConnector counters."""
        out = {}
        for n, r in self.names().items():
            reply = http.get(r.plan.base_url + "/metrics", timeout=10, headers=_auth(r.plan))
            out[n] = parse_counters(reply.body.decode("utf-8", "replace")) if reply.status == 200 else {}
        return out


def parse_counters(text: str) -> dict[str, float]:
    return logs.prometheus_sums(text, COUNTER_RE)


def counter_delta(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> dict[str, dict]:
    """Per server: prefix-cache hits/queries (tokens), external hits (tokens loaded through the
    connector) and NixlConnector transfers (count, avg ms, MB) between two readings."""
    out = {}
    for name in after:
        b, a = before.get(name, {}), after[name]

        def d(key: str) -> float:
            return a.get(key, 0.0) - b.get(key, 0.0)
        row = {"prefix_hits": int(d("vllm:prefix_cache_hits_total")),
               "prefix_queries": int(d("vllm:prefix_cache_queries_total")),
               "external_hits": int(d("vllm:external_prefix_cache_hits_total")),
               "external_queries": int(d("vllm:external_prefix_cache_queries_total"))}
        nixl = logs.nixl_delta(b, a)
        row["transfers"] = nixl["transfers"] if nixl else 0
        if nixl:
            row.update(avg_transfer_ms=nixl["avg_transfer_ms"], mb_per_transfer=nixl["mb_per_transfer"])
        failed = int(d("vllm:nixl_num_failed_transfers_total"))
        if failed:
            row["failed_transfers"] = failed
        out[name] = row
    return out


def _merge_kv_extra(plan, extra: dict, notes: list[str]) -> None:
    if not extra or not plan.kv:
        return
    changed = False
    for part in _kv_parts(plan.kv):
        if part.get("kv_connector") in NIXL:
            cfg = part.setdefault("kv_connector_extra_config", {})
            for k, v in extra.items():
                if cfg.get(k) != v:
                    cfg[k] = v
                    notes.append(f"kv {k} {v!r} (replay)")
                    changed = True
    if changed:
        head = plan.argv[:2] if plan.argv[1:2] == ["serve"] else plan.argv[:1]
        rest = plan.argv[len(head):]
        plan.argv = head + _replace_kv_tokens(rest, plan.kv, None)


@contextmanager
def deployment(paths: Sequence[str], *, vllm: str | None = None, model: str | None = None,
               connector: str | None = None, kv_extra: dict | None = None,
               prefill_args: Sequence[str] = (), timeout: float = 300.0, echo=None,
               keep: bool = False) -> Iterator[Deployment]:
    echo = echo or (lambda s: None)
    t0 = time.monotonic()
    try:
        exe = find_vllm(vllm)
    except NotFound as err:
        raise DeploymentError(str(err)) from None
    version = vllm_version(exe)
    candidates, missing = discover(list(paths))
    if missing:
        raise DeploymentError("; ".join(missing))
    graph = Graph(load(candidates))
    unit = None
    for group in Units(graph).groups:
        servers = [l for l in group if l.kind in SERVER_KINDS]
        roles = {graph.role(l) for l in servers}
        if roles & {ROLE_PRODUCER, ROLE_BOTH} and roles & {ROLE_CONSUMER, ROLE_BOTH}:
            unit = group
            break
    if unit is None:
        raise DeploymentError("no P/D deployment (a kv_producer and a kv_consumer) in " + ", ".join(paths))
    if model:
        model_dir = Path(model).expanduser().absolute()
    else:
        try:
            model_dir, _ = tiny_model(exe)
        except NotFound as err:
            raise DeploymentError(str(err)) from None
    root = Path(tempfile.mkdtemp(prefix="vllmlint-replay-"))
    sup = Supervisor(root)
    ctx = UnitContext(workdir=root / "unit", model=model_dir, vllm=exe, python=python_of(exe),
                      cpu=is_cpu_build(version), connector=connector, vllm_version=version)
    ctx.workdir.mkdir(parents=True, exist_ok=True)
    verifier = Verifier(list(paths), vllm=vllm, timeout=timeout, echo=echo)
    run = UnitRun(verifier, graph, unit, ctx, sup, Path(paths[0]).absolute())
    try:
        servers = [l for l in unit if l.kind in SERVER_KINDS]
        for l in servers:
            if graph.role(l) in (ROLE_CONSUMER, ROLE_BOTH):
                ctx.decoders.add(id(l))
        plans = []
        ctx.server_count = len(servers)
        for l in servers:
            port = free_port()
            ctx.ports[id(l)] = port
            plan = adapt(l, ctx, port)
            _merge_kv_extra(plan, dict(kv_extra or {}), plan.adaptations)
            if plan.kv_role == ROLE_PRODUCER and prefill_args:
                plan.argv = plan.argv + list(prefill_args)
                plan.adaptations.append(f"added `{' '.join(prefill_args)}` (replay)")
            plans.append(plan)
        run.results = [ServerResult(p) for p in plans]
        run.result.servers = run.results
        if not run._start_all():
            lines = [f"{r.plan.name}: {r.error_line}" for r in run.results if r.error_line]
            raise DeploymentError("the deployment did not start", lines)
        prod = [r for r in run.results if r.plan.kv_role == ROLE_PRODUCER] or \
            [r for r in run.results if r.plan.kv_role == ROLE_BOTH]
        cons = [r for r in run.results if r.plan.kv_role == ROLE_CONSUMER] or \
            [r for r in run.results if r.plan.kv_role == ROLE_BOTH and r not in prod]
        if not prod or not cons:
            raise DeploymentError("no prefill/decode pair among the servers")
        dep = Deployment(run.results, prod, cons, run._model_name(cons[0]), str(exe), version, root,
                         time.monotonic() - t0, {r.plan.name: r.plan.adaptations for r in run.results})
        yield dep
    finally:
        for r in getattr(run, "results", []):
            if r.proc is not None:
                sup.stop(r.proc)
                r.peak_rss_mb = round(r.proc.peak_rss_kb / 1024, 1)
        sup.close()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


@dataclass
class RunningDeployment:
    """A P/D deployment that is already running (the user's staging stack): the same face as
    `Deployment` for code that drives one (`vllmlint replay --router/--prefill/--decode`), with
    nothing started or stopped. Logs are not reachable (`logs_since` is empty); counters come
    from each server's /metrics; a server is alive while it answers HTTP at all."""
    prefill_urls: list[str]
    decode_urls: list[str]
    model: str
    router_url: str | None = None
    api_key: str | None = None
    vllm: str = "(running deployment)"
    vllm_version: str | None = None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def urls(self) -> dict[str, str]:
        return by_role(self.prefill_urls, self.decode_urls)

    def mark(self) -> dict[str, int]:
        return {}

    def logs_since(self, mark: dict[str, int]) -> dict[str, str]:
        return {}

    def alive(self) -> dict[str, bool]:
        targets = self.urls() or ({"router": self.router_url} if self.router_url else {})
        return {n: http.get(u.rstrip("/") + "/health", timeout=10, headers=self.headers()).status != 0
                for n, u in targets.items()}

    def counters(self) -> dict[str, dict[str, float]]:
        out = {}
        for n, u in self.urls().items():
            reply = http.get(u.rstrip("/") + "/metrics", timeout=10, headers=self.headers())
            out[n] = parse_counters(reply.body.decode("utf-8", "replace")) if reply.status == 200 else {}
        return out


def served_model(url: str, api_key: str | None = None, timeout: float = 30.0) -> str | None:
    """The first model a server (or an OpenAI-compatible router) lists on /v1/models."""
    reply = http.get(url.rstrip("/") + "/v1/models", timeout=timeout,
                     headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        return (reply.json() or {})["data"][0]["id"]
    except (TypeError, KeyError, IndexError):
        return None


def vllm_version_of(url: str, api_key: str | None = None) -> str | None:
    reply = http.get(url.rstrip("/") + "/version", timeout=10,
                     headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    data = reply.json() if reply.status == 200 else None
    return data.get("version") if isinstance(data, dict) else None
