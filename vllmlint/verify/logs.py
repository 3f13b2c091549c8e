"""What vLLM's logs say: the line that explains a failed start, the scale-out notice, and the
evidence of a KV transfer on decode."""
from __future__ import annotations

import re

NOISE = ("resource_tracker", "warnings.warn", "UserWarning", "leaked shared_memory", "ulimit",
         "Triton", "LD_PRELOAD", "DeepSelect")
PREFIX_RE = re.compile(r"^(?:\(\w+ pid=\d+\)\s*)?(?:(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s*)?")
EXC_RE = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Exit)):\s*\S")
SCALE_OUT_OFF = "Scale-out endpoints are disabled"
METRICS_RE = re.compile(r"KV Transfer metrics: (.*)$")
INJECT_RE = re.compile(r"Inject KV cache of (\d+) tokens")


HANDSHAKE_RE = re.compile(r"NIXL transfer failure: (handshake_\w*failed)[^|]*")


def handshake_failure(text: str) -> str | None:
    """NixlConnector's `NIXL transfer failure: handshake_setup_failed | Context: ...` (or
    `handshake_failed`) in a log excerpt, cut to its reason; None when there is none."""
    m = HANDSHAKE_RE.search(text)
    return m.group(0).strip() if m else None


def clean(line: str) -> str:
    return PREFIX_RE.sub("", line.strip()).strip()


def error_line(text: str) -> str:
    """The line that says why a server did not come up: argparse's `error:`, else the last
    exception line, else the last ERROR line, else the last line."""
    lines = [l.rstrip() for l in text.splitlines() if l.strip()]
    useful = [l for l in lines if not any(n in l for n in NOISE)]
    for l in reversed(useful):
        if ": error: " in l:
            return clean(l)
    for l in reversed(useful):
        if EXC_RE.search(l):
            return clean(l)
    for l in reversed(useful):
        if " ERROR " in l or l.startswith("ERROR"):
            return clean(l)
    return clean(useful[-1]) if useful else (clean(lines[-1]) if lines else "(no output)")


def find_line(text: str, needle: str) -> str | None:
    for l in text.splitlines():
        if needle in l:
            return clean(l)
    return None


def kv_metrics(text: str) -> list[dict[str, float | str]]:
    """Every `KV Transfer metrics: k=v, k=v` line as a dict (numbers as floats)."""
    found = []
    for l in text.splitlines():
        m = METRICS_RE.search(l)
        if not m:
            continue
        row: dict[str, float | str] = {}
        for part in m.group(1).split(", "):
            key, eq, value = part.partition("=")
            if not eq:
                continue
            try:
                row[key.strip()] = float(value)
            except ValueError:
                row[key.strip()] = value.strip()
        row["line"] = clean(l)
        found.append(row)
    return found


def summarize_metrics(rows: list[dict]) -> dict | None:
    """Totals over several metrics lines (each covers one logging interval)."""
    rows = [r for r in rows if float(r.get("Num successful transfers", 0) or 0) > 0]
    if not rows:
        return None
    n = sum(float(r["Num successful transfers"]) for r in rows)
    avg_ms = sum(float(r.get("Avg xfer time (ms)", 0)) * float(r["Num successful transfers"]) for r in rows) / n
    avg_mb = sum(float(r.get("Avg MB per transfer", 0)) * float(r["Num successful transfers"]) for r in rows) / n
    return {"transfers": int(n), "avg_transfer_ms": round(avg_ms, 3), "mb_per_transfer": round(avg_mb, 4),
            "line": rows[-1]["line"]}


PROM_RE = re.compile(r"^(vllm:nixl_(?:xfer_time_seconds|bytes_transferred|num_failed_transfers)(?:_count|_sum|_total)?)(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$")


def prometheus_sums(text: str, pattern: re.Pattern) -> dict[str, float]:
    """The samples of a /metrics page whose line `pattern` matches (group 1 the name, group 2 the
    value), summed over label sets."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        m = pattern.match(line.strip())
        if m:
            try:
                found[m.group(1)] = found.get(m.group(1), 0.0) + float(m.group(2))
            except ValueError:
                pass
    return found


def nixl_prometheus(text: str) -> dict[str, float]:
    """NixlConnector's transfer counters in a /metrics page, summed over label sets."""
    return prometheus_sums(text, PROM_RE)


def nixl_delta(before: dict[str, float], after: dict[str, float]) -> dict | None:
    """transfers, average ms and MB per transfer between two /metrics readings."""
    def d(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)
    n = d("vllm:nixl_xfer_time_seconds_count")
    if n <= 0:
        return None
    return {"transfers": int(n), "avg_transfer_ms": round(d("vllm:nixl_xfer_time_seconds_sum") / n * 1e3, 3),
            "mb_per_transfer": round(d("vllm:nixl_bytes_transferred_sum") / n / 2**20, 4)}
