"""The verify report as text or JSON."""
from __future__ import annotations

import json
import shlex

from .runner import Outcome


def render(out: Outcome, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(out.as_dict(), indent=2, default=str)
    return text(out)


def _mark(ok: bool | None) -> str:
    return "PASS" if ok else "FAIL"


def text(out: Outcome) -> str:
    lines: list[str] = []
    add = lines.append
    if out.error:
        add(f"error: {out.error}")
        return "\n".join(lines)
    add(f"vLLM {out.vllm_version or '?'} at {out.vllm}")
    add(f"model: {out.model}" + (f" (built in {out.model_built_s} s)" if out.model_built_s else ""))
    for note in out.notes:
        add(f"note: {note}")
    for unit in out.units:
        add("")
        add(f"deployment {unit.name}")
        for skipped in unit.skipped:
            add(f"  skipped: {skipped}")
        for s in unit.servers:
            p = s.plan
            add(f"  {p.kind}  {p.name}")
            add(f"    argv: {shlex.join(p.masked_argv())}")
            env = p.masked_env()
            if env:
                add("    env:  " + " ".join(f"{k}={v}" for k, v in env.items()))
            for a in p.adaptations:
                add(f"    adapted: {a}")
            if s.healthy_s is not None:
                add(f"    healthy in {s.healthy_s:.1f} s, peak RSS {s.peak_rss_mb or 0:.0f} MB")
            if s.error_line:
                add(f"    did not start: {s.error_line}")
                if s.proc:
                    add(f"    log: {s.proc.log_path}")
            for pr in s.probes:
                add(f"    {_mark(pr.ok)} {pr.name}: {pr.status if pr.status is not None else '-'} {pr.evidence}"
                    + (f" ({pr.seconds:.2f} s)" if pr.seconds is not None else ""))
        if unit.router:
            r = unit.router
            add(f"  router ({r['kind']}): " + (r.get("why") or r.get("name") or ""))
            if r.get("argv"):
                add(f"    argv: {shlex.join(r['argv'])}")
            for a in r.get("adaptations", []):
                add(f"    adapted: {a}")
            if r.get("flow"):
                add(f"    flow: {r['flow']}")
            if r.get("error"):
                add(f"    did not start: {r['error']}")
        for pr in unit.probes:
            add(f"  {_mark(pr.ok)} {pr.name}: {pr.status if pr.status is not None else '-'} {pr.evidence}"
                + (f" ({pr.seconds:.2f} s)" if pr.seconds is not None else ""))
        kv = unit.kv_transfer
        if kv and kv.get("transfers"):
            ms = kv.get("avg_transfer_ms")
            add(f"  KV transfer ({kv.get('connector')}): {kv['transfers']} transfer(s), "
                f"avg {'n/a' if ms is None else f'{ms} ms'}, {kv.get('mb_per_transfer')} MB per transfer")
    probes = [p for u in out.units for p in u.all_probes]
    failed = [p for p in probes if not p.ok]
    not_started = [u for u in out.units if not u.started]
    add("")
    verdict = {0: "all probes passed", 1: f"{len(failed)} probe(s) failed",
               2: f"{len(not_started)} deployment(s) could not start"}[out.exit_code]
    add(f"{verdict} ({len(probes)} probe(s), {len(out.units)} deployment(s), {out.seconds:.0f} s)")
    if out.workdir:
        add(f"logs kept in {out.workdir}")
    return "\n".join(lines)
