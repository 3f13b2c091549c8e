"""The router's `GET /metrics`: counters and one latency histogram in Prometheus text format 0.0.4.

Written by hand (a few dozen lines) rather than with prometheus_client: each Router instance has
its own numbers (tests and `vllmlint replay` start several in one process), and nothing else is
needed. Label values are bounded sets (paths the router serves, status codes, guard reasons,
upstream names and failure kinds), so the families stay small however long the router runs.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from typing import Iterable, Mapping

# seconds: a request through P and D takes milliseconds on fake engines, seconds to minutes on real ones
FIRST_BYTE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: tuple[str, ...], values: tuple) -> str:
    if not names:
        return ""
    return "{" + ",".join(f'{n}="{_escape(str(v))}"' for n, v in zip(names, values)) + "}"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


class Histogram:
    def __init__(self, buckets: Iterable[float] = LATENCY_BUCKETS):
        self.buckets = tuple(sorted(buckets))
        self.counts = [0] * (len(self.buckets) + 1)      # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1


class RouterMetrics:
    """What the router counts. `render()` gives the exposition text."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str]] = Counter()          # (path, status)
        self.upstream_errors: Counter[tuple[str, str]] = Counter()   # (upstream, kind)
        self.client_errors: Counter[str] = Counter()                 # kind
        self.latency: dict[str, Histogram] = {}                      # path -> histogram
        self.first_byte: dict[tuple[str, str], Histogram] = {}       # (path, streamed) -> histogram
        self.in_flight = 0

    def observe_request(self, path: str, status: int, seconds: float) -> None:
        self.requests[(path, str(status))] += 1
        h = self.latency.get(path)
        if h is None:
            h = self.latency[path] = Histogram()
        h.observe(seconds)

    def observe_first_byte(self, path: str, streamed: bool, seconds: float) -> None:
        key = (path, "true" if streamed else "false")
        h = self.first_byte.get(key)
        if h is None:
            h = self.first_byte[key] = Histogram(FIRST_BYTE_BUCKETS)
        h.observe(seconds)

    def upstream_error(self, upstream: str, kind: str) -> None:
        self.upstream_errors[(upstream, kind)] += 1

    def render(self, guard_counts: Mapping[str, int], guard_stats: Mapping, connections: int,
               refused: Mapping[str, int], evicted: int = 0, store_errors: Mapping[str, int] | None = None) -> str:
        out: list[str] = []

        def family(name: str, kind: str, help_: str, labels: tuple[str, ...], rows) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {kind}")
            for values, v in rows:
                out.append(f"{name}{_labels(labels, values)} {_num(v)}")

        family("vllmlint_router_requests_total", "counter", "Requests answered, by path and HTTP status.",
               ("path", "status"), sorted(self.requests.items()))
        family("vllmlint_router_in_flight_requests", "gauge", "Requests being handled now.", (), [((), self.in_flight)])
        decisions = [((("hit" if r == "hit" else "miss"), r), n) for r, n in sorted(guard_counts.items())
                     if r not in ("store", "skip-store")]
        family("vllmlint_router_guard_decisions_total", "counter",
               "Guard decisions before prefill: hit (D's blocks attached) or miss, by reason "
               "(edited-history is a refused rewrite; store-unavailable a recompute because the shared store failed).",
               ("decision", "reason"), decisions)
        family("vllmlint_router_guard_store_errors_total", "counter",
               "Calls to the shared guard store (--state) that failed, by operation; each one is a recompute.",
               ("op",), sorted(((k,), v) for k, v in (store_errors or {}).items()))
        family("vllmlint_router_guard_records_total", "counter",
               "D's end-of-turn answers stored for the next turn, or skipped (not guardable).",
               ("result",), [((r,), guard_counts.get(r, 0)) for r in ("store", "skip-store")])
        family("vllmlint_router_guard_conversations", "gauge", "Conversations the guard holds now.", (),
               [((), guard_stats.get("conversations", 0))])
        family("vllmlint_router_guard_tokens", "gauge", "Token ids the guard holds now (4 bytes each).", (),
               [((), guard_stats.get("tokens", 0))])
        family("vllmlint_router_upstream_errors_total", "counter",
               "Failed calls to the engines, by upstream (render, prefill, decode, models) and kind.",
               ("upstream", "kind"), sorted(self.upstream_errors.items()))
        family("vllmlint_router_client_errors_total", "counter",
               "Client connections or requests the router gave up on (timeouts, limits, disconnects).",
               ("kind",), sorted(((k,), v) for k, v in self.client_errors.items()))
        family("vllmlint_router_open_connections", "gauge", "Client connections open now.", (),
               [((), connections)])
        family("vllmlint_router_rejected_connections_total", "counter",
               "Client connections refused with 503, by reason: per-address (--max-connections-per-address) "
               "or cap (--max-connections busy with requests and the probe reserve full).", ("reason",),
               [((r,), refused.get(r, 0)) for r in ("cap", "per-address")])
        family("vllmlint_router_evicted_connections_total", "counter",
               "Idle client connections (no request in progress) closed to make room at --max-connections.", (),
               [((), evicted)])
        name = "vllmlint_router_request_duration_seconds"
        out.append(f"# HELP {name} Time from the request's headers to the end of the answer, by path.")
        out.append(f"# TYPE {name} histogram")
        for path, h in sorted(self.latency.items()):
            cum = 0
            for le, n in zip(self.buckets_of(h), h.counts):
                cum += n
                out.append(f'{name}_bucket{{path="{_escape(path)}",le="{le}"}} {cum}')
            out.append(f'{name}_sum{{path="{_escape(path)}"}} {_num(h.sum)}')
            out.append(f'{name}_count{{path="{_escape(path)}"}} {h.count}')
        name = "vllmlint_router_first_byte_seconds"
        out.append(f"# HELP {name} Time from the request's headers to the first byte of the answer's body "
                   "(streamed: the first event), by path and streamed.")
        out.append(f"# TYPE {name} histogram")
        for (path, streamed), h in sorted(self.first_byte.items()):
            labels = f'path="{_escape(path)}",streamed="{streamed}"'
            cum = 0
            for le, n in zip(self.buckets_of(h), h.counts):
                cum += n
                out.append(f'{name}_bucket{{{labels},le="{le}"}} {cum}')
            out.append(f'{name}_sum{{{labels}}} {_num(h.sum)}')
            out.append(f'{name}_count{{{labels}}} {h.count}')
        return "\n".join(out) + "\n"

    @staticmethod
    def buckets_of(h: Histogram) -> list[str]:
        return [_num(b) for b in h.buckets] + ["+Inf"]
