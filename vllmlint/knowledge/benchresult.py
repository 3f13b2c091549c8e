"""`vllm bench serve --save-result` files, side by side, and the P/D guide's decision.

A result file (vLLM 0.30-0.33, `vllm/benchmarks/serve.py`) is one JSON object with, among
others: `completed`, `failed`, `request_rate`, `request_throughput`, `request_goodput` (None
without `--goodput`), `output_throughput`, and per metric in `--percentile-metrics`
`mean_X_ms`, `median_X_ms`, `std_X_ms`, `pP_X_ms` for each `--metric-percentiles` P
(`p99_ttft_ms`, `p50_itl_ms`, ...).

The guide's rule (vLLM's disaggregated-serving guide): split only when p99 inter-token latency
misses its target collocated and the split holds it; stay collocated when time to first token
is the target you are measured on and the split makes it worse.
"""
from __future__ import annotations

import json
from ..model.record import field, record
from pathlib import Path

ROWS = (  # (label, key, unit, lower is better)
    ("completed requests", "completed", "", False),
    ("failed requests", "failed", "", True),
    ("request rate (req/s)", "request_rate", "", None),
    ("request throughput (req/s)", "request_throughput", "", False),
    ("request goodput (req/s)", "request_goodput", "", False),
    ("output throughput (tok/s)", "output_throughput", "", False),
    ("median TTFT (ms)", "median_ttft_ms", "ms", True),
    ("P50 TTFT (ms)", "p50_ttft_ms", "ms", True),
    ("P99 TTFT (ms)", "p99_ttft_ms", "ms", True),
    ("median TPOT (ms)", "median_tpot_ms", "ms", True),
    ("P99 TPOT (ms)", "p99_tpot_ms", "ms", True),
    ("median ITL (ms)", "median_itl_ms", "ms", True),
    ("P50 ITL (ms)", "p50_itl_ms", "ms", True),
    ("P99 ITL (ms)", "p99_itl_ms", "ms", True),
)
STAY, SPLIT, UNDECIDED = "stay collocated", "split", "undecided"
NOT_STREAMED_MS = 0.1


class ResultError(ValueError):
    pass


def load(path: str | Path) -> dict:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ResultError(f"{path}: {err}") from None
    if not isinstance(data, dict) or not any(k in data for k in ("p99_itl_ms", "p99_ttft_ms", "request_throughput")):
        raise ResultError(f"{path}: not a `vllm bench serve --save-result` file (no p99_ttft_ms, p99_itl_ms, "
                          "request_throughput)")
    return data


def _num(d: dict, key: str) -> float | None:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@record
class Decision:
    verdict: str
    reasons: list[str] = field(default_factory=list)
    binding: str = ""

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "reasons": self.reasons, "binding": self.binding}


def decide(split: dict, coll: dict, *, ttft_slo: float = 2000.0, itl_slo: float = 30.0,
           binding: str = "auto") -> Decision:
    """The guide's decision on two result files (p99 figures; SLOs in ms).

    `binding`: which target the service is measured on - `ttft`, `itl`, or `auto` (ITL when the
    collocated p99 ITL misses its target, else TTFT: with ITL held collocated, splitting only
    moves TTFT)."""
    empty = [n for n, d in (("split", split), ("collocated", coll)) if _num(d, "completed") == 0]
    if empty:
        failed = ", ".join(f"{n} {int(_num(d, 'failed') or 0)} failed" for n, d in (("split", split), ("collocated", coll))
                           if n in empty)
        return Decision(UNDECIDED, [f"no request completed on the {' and '.join(empty)} side ({failed}): its "
                                    "latencies are zeros, not measurements"], binding)
    s_itl, c_itl = _num(split, "p99_itl_ms"), _num(coll, "p99_itl_ms")
    s_ttft, c_ttft = _num(split, "p99_ttft_ms"), _num(coll, "p99_ttft_ms")
    if None in (s_itl, c_itl, s_ttft, c_ttft):
        missing = [n for n, v in (("split p99_itl_ms", s_itl), ("collocated p99_itl_ms", c_itl),
                                  ("split p99_ttft_ms", s_ttft), ("collocated p99_ttft_ms", c_ttft)) if v is None]
        return Decision(UNDECIDED, [f"missing {', '.join(missing)} (run with --percentile-metrics ttft,tpot,itl "
                                    "--metric-percentiles 50,99)"], binding)
    # a p99 gap under 0.1 ms between tokens is no decoder's (10,000 tokens/s for one request): the
    # stream reached the client whole (a router that buffers it), so ITL was not measured
    flat = [n for n, v in (("split", s_itl), ("collocated", c_itl)) if v < NOT_STREAMED_MS]
    if flat:
        return Decision(UNDECIDED, [f"no inter-token latencies on the {' and '.join(flat)} side (p99 ITL under "
                                    f"{NOT_STREAMED_MS:g} ms): its router returned the stream whole, so ITL was "
                                    "not measured"], binding)
    c_miss, s_hold = c_itl > itl_slo, s_itl <= itl_slo
    if binding == "auto":
        binding = "itl" if c_miss else "ttft"
    reasons = [f"p99 ITL: collocated {c_itl:g} ms ({'misses' if c_miss else 'holds'} {itl_slo:g}), "
               f"split {s_itl:g} ms ({'holds' if s_hold else 'misses'} {itl_slo:g})",
               f"p99 TTFT: collocated {c_ttft:g} ms, split {s_ttft:g} ms "
               f"({'worse' if s_ttft > c_ttft else 'not worse'} split; target {ttft_slo:g})"]
    sg, cg = _num(split, "request_goodput"), _num(coll, "request_goodput")
    if sg is not None and cg is not None:
        reasons.append(f"goodput: collocated {cg:g} req/s, split {sg:g} req/s")
    if (split.get("failed") or 0) > 0:
        reasons.append(f"split failed {split.get('failed')} request(s)")
    if binding == "ttft" and s_ttft > c_ttft:
        return Decision(STAY, ["TTFT is the binding target and the split makes it worse"] + reasons, binding)
    if c_miss and s_hold:
        extra = []
        if s_ttft > ttft_slo:
            extra.append(f"but the split's p99 TTFT {s_ttft:g} ms misses {ttft_slo:g}: fix the KV transfer "
                         "(vllmlint kv-probe) before relying on it")
        return Decision(SPLIT, ["collocated p99 ITL misses its target and the split holds it"] + extra + reasons,
                        binding)
    if not c_miss:
        return Decision(STAY, ["collocated already holds p99 ITL: splitting has nothing to win here"] + reasons,
                        binding)
    moved = f" (the split moves it from {c_itl:g} to {s_itl:g} ms)" if s_itl < c_itl else ""
    return Decision(STAY, [f"neither holds p99 ITL {itl_slo:g} ms{moved}: the split alone does not meet the "
                           "target (add capacity or tune first)"] + reasons, binding)


def table(split: dict, coll: dict) -> list[tuple[str, float | None, float | None, str]]:
    """(label, split value, collocated value, which is better) for every figure either file has."""
    out = []
    for label, key, _unit, lower in ROWS:
        s, c = _num(split, key), _num(coll, key)
        if s is None and c is None:
            continue
        better = ""
        if lower is not None and s is not None and c is not None and s != c:
            better = "split" if (s < c) == lower else "collocated"
        out.append((label, s, c, better))
    return out


def _fmt(v: float | None) -> str:
    return "-" if v is None else (f"{v:,.0f}" if abs(v) >= 1000 else f"{v:,.2f}".rstrip("0").rstrip("."))


def render_text(split: dict, coll: dict, decision: Decision) -> str:
    rows = table(split, coll)
    w = max(len(r[0]) for r in rows) if rows else 10
    out = [f"{'':<{w}}  {'split':>12}  {'collocated':>12}  better"]
    for label, s, c, better in rows:
        out.append(f"{label:<{w}}  {_fmt(s):>12}  {_fmt(c):>12}  {better}")
    out.append("")
    out.append(f"decision: {decision.verdict.upper()} (binding target: {decision.binding})")
    out += [f"  - {r}" for r in decision.reasons]
    return "\n".join(out) + "\n"


def render_markdown(split: dict, coll: dict, decision: Decision) -> str:
    out = ["| | split | collocated | better |", "|---|---:|---:|---|"]
    out += [f"| {label} | {_fmt(s)} | {_fmt(c)} | {better} |" for label, s, c, better in table(split, coll)]
    out += ["", f"**Decision: {decision.verdict}** (binding target: {decision.binding})", ""]
    out += [f"- {r}" for r in decision.reasons]
    return "\n".join(out) + "\n"
