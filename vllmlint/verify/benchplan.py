"""`vllmlint bench-plan`: step 3 of vLLM's pre-split checklist, written out from the config.

For every P/D pair in the tree: the collocated baseline on the same GPUs (one `vllm serve` with
the pair's model, `--max-model-len`, `--dtype` and the engine flags that change what it
computes, `--data-parallel-size` = the pair's GPU count, or GPUs / tensor-parallel size when
the pair runs tensor parallel), and the exact `vllm bench serve` commands to run against the
split deployment's router and against the baseline: the same random prompts (`--seed`), a
`--request-rate` sweep, the goodput SLOs (`--goodput ttft:2000 tpot:30`), `--percentile-metrics
ttft,tpot,itl --metric-percentiles 50,99` and `--save-result` into one folder per pair, named so
`vllmlint bench-compare` can pair them. Nothing here runs anything; `bench_plan(...)` only reads.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Sequence

from ..knowledge.topology import parse_cuda_visible_devices
from ..lint.discovery import discover
from ..lint.graph import Graph
from ..lint.project import load
from ..model.launch import PROXY, Launch

DEFAULT_RATES = (0.25, 0.5, 1.0, 2.0)
DEFAULT_PROMPT_TOKENS = 8192       # the guide's long prompts
DEFAULT_OUTPUT_TOKENS = 256
DEFAULT_NUM_PROMPTS = 100
GOODPUT = ("ttft:2000", "tpot:30")
# engine flags that change what the baseline computes or holds, carried from the pair as written
CARRIED = ("--quantization", "--kv-cache-dtype", "--gpu-memory-utilization", "--max-num-seqs",
           "--max-num-batched-tokens", "--block-size", "--enable-prefix-caching", "--no-enable-prefix-caching",
           "--enable-chunked-prefill", "--no-enable-chunked-prefill", "--served-model-name", "--tokenizer",
           "--revision", "--trust-remote-code", "--enforce-eager", "--swap-space", "--load-format")
BOOL_FLAGS = {"--enable-prefix-caching", "--no-enable-prefix-caching", "--enable-chunked-prefill",
              "--no-enable-chunked-prefill", "--trust-remote-code", "--enforce-eager"}


class PlanError(ValueError):
    pass


@dataclass
class PairPlan:
    index: int
    prefill: list[str]                   # "path:line (context)"
    decode: list[str]
    model: str
    max_model_len: int | None
    dtype: str | None
    gpus: int
    gpu_ids: list[int] | None
    tensor_parallel: int
    router_url: str
    prompt_tokens: int
    output_tokens: int
    rates: list[float]
    num_prompts: int
    result_dir: str
    collocated: list[str] = field(default_factory=list)          # argv
    collocated_env: dict[str, str] = field(default_factory=dict)
    split_bench: list[list[str]] = field(default_factory=list)    # one argv per rate
    collocated_bench: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("index", "prefill", "decode", "model", "max_model_len", "dtype", "gpus",
                                              "gpu_ids", "tensor_parallel", "router_url", "prompt_tokens",
                                              "output_tokens", "rates", "num_prompts", "result_dir", "collocated",
                                              "collocated_env", "split_bench", "collocated_bench", "notes")}


def _where(l: Launch) -> str:
    return f"{l.file.display}:{l.line} ({l.context})"


def _int_flag(l: Launch, *names: str) -> int | None:
    for n in names:
        a = l.flag_value(n)
        if a is not None and a.value.isdigit():
            return int(a.value)
    return None


def gpus_of(l: Launch) -> tuple[int, list[int] | None, str]:
    """GPUs one server uses, the indices when the config pins them, and what says so."""
    ids = parse_cuda_visible_devices(l.env_value("CUDA_VISIBLE_DEVICES")) or l.gpus
    tp = _int_flag(l, "--tensor-parallel-size", "-tp") or 1
    pp = _int_flag(l, "--pipeline-parallel-size", "-pp") or 1
    dp = _int_flag(l, "--data-parallel-size", "-dp") or 1
    engine = tp * pp * dp
    if l.gpu_count:
        return l.gpu_count, ids, "its GPU request"
    if ids:
        return len(ids), ids, "its pinned GPUs"
    return engine, None, "its parallel sizes"


def _fmt_rate(r: float) -> str:
    return f"{r:g}"


def _value(l: Launch, flag: str) -> str | None:
    a = l.flag_value(flag)
    return a.value if a is not None else None


def _router_url(graph: Graph, prod: list[Launch], cons: list[Launch]) -> str:
    members = {id(x) for x in prod + cons}
    for info in graph.proxies:
        if {id(x) for x in info.prefill + info.decode} & members:
            p = info.launch
            port = _int_flag(p, "--port") or 8000
            host = p.hostnames[0] if p.hostnames else "localhost"
            if p.file.kind == "compose":
                host = "localhost"            # published on the host by `ports:` (or run from inside)
            else:
                svc = _service_for(graph, p, port)
                if svc:
                    host, port = svc
            return f"http://{host}:{port}"
    return "http://ROUTER:8000"


def _service_for(graph: Graph, launch: Launch, port: int) -> tuple[str, int] | None:
    """A Kubernetes Service that selects the router's pods, and its port for the router's port."""
    if not launch.labels:
        return None
    for pf in graph.project.files:
        for svc in pf.services:
            if svc.selector and all(launch.labels.get(k) == v for k, v in svc.selector.items()):
                for sport, target in svc.ports.items():
                    if str(target) == str(port):
                        return svc.name, sport
                if port in svc.ports:
                    return svc.name, port
    return None


def plan(paths: Sequence[str], *, prompt_tokens: int | None = None, output_tokens: int = DEFAULT_OUTPUT_TOKENS,
         rates: Sequence[float] = DEFAULT_RATES, num_prompts: int = DEFAULT_NUM_PROMPTS,
         result_dir: str = "bench-results", collocated_port: int = 8000, seed: int = 0) -> list[PairPlan]:
    candidates, missing = discover(list(paths))
    if missing:
        raise PlanError("; ".join(missing))
    graph = Graph(load(candidates))
    out: list[PairPlan] = []
    for prod, cons in graph.pd_pairs():
        prod = [l for l in prod if l.kind != PROXY]
        cons = [l for l in cons if l.kind != PROXY and l not in prod]
        if not prod or not cons:
            continue
        idx = len(out) + 1
        p, d = prod[0], cons[0]
        notes: list[str] = []
        model = p.model() or d.model()
        if model is None:
            raise PlanError(f"{_where(p)}: no model in the launch")
        models = {l.model() for l in prod + cons} - {None}
        if len(models) > 1:
            notes.append(f"prefill and decode serve different models ({', '.join(sorted(models))}); the baseline uses {model}")
        mml = _int_flag(p, "--max-model-len") or _int_flag(d, "--max-model-len")
        dtype = _value(p, "--dtype") or _value(d, "--dtype")
        for flag in ("--max-model-len", "--dtype"):
            vals = {_value(l, flag) for l in prod + cons}
            if len(vals) > 1:
                notes.append(f"prefill and decode differ in {flag} ({', '.join(sorted(str(v) for v in vals))})")
        total, ids, sources = 0, [], set()
        for l in prod + cons:
            n, lids, why = gpus_of(l)
            total += n
            sources.add(why)
            if ids is not None and lids:
                ids.extend(lids[:n])
            else:
                ids = None
        tp = _int_flag(d, "--tensor-parallel-size", "-tp") or 1
        tps = {_int_flag(l, "--tensor-parallel-size", "-tp") or 1 for l in prod + cons}
        if len(tps) > 1:
            notes.append(f"prefill and decode differ in tensor parallel size ({sorted(tps)}); the baseline uses decode's {tp}")
        dp = max(total // tp, 1)
        if total % tp:
            notes.append(f"{total} GPUs do not divide by tensor parallel size {tp}: the baseline uses {dp * tp}")
        notes.append(f"{total} GPUs in the pair (from {', '.join(sorted(sources))}); per replica of each workload")
        # -- the collocated baseline ---------------------------------------------------------
        argv = ["vllm", "serve", model]
        if mml:
            argv += ["--max-model-len", str(mml)]
        if dtype:
            argv += ["--dtype", dtype]
        if tp > 1:
            argv += ["--tensor-parallel-size", str(tp)]
        argv += ["--data-parallel-size", str(dp)]
        for flag in CARRIED:
            if flag in BOOL_FLAGS:
                if d.has_flag(flag) or p.has_flag(flag):
                    argv.append(flag)
                continue
            v = _value(d, flag) or _value(p, flag)
            if v is not None:
                argv += [flag, v]
        argv += ["--port", str(collocated_port)]
        env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, ids))} if ids else {}
        # -- the benchmark ----------------------------------------------------------------------
        inp = prompt_tokens or DEFAULT_PROMPT_TOKENS
        if mml and inp + output_tokens > mml:
            inp = max(mml - output_tokens, 1)
            notes.append(f"prompt length {prompt_tokens or DEFAULT_PROMPT_TOKENS} + output {output_tokens} does not fit "
                         f"--max-model-len {mml}: prompts of {inp} tokens")
        served = _value(d, "--served-model-name") or model
        router = _router_url(graph, prod, cons)
        if router == "http://ROUTER:8000":
            notes.append("no router found in the tree for this pair: set SPLIT_URL to its address")
        folder = f"{result_dir}/pair{idx}"

        def bench(url: str, label: str, rate: float) -> list[str]:
            cmd = ["vllm", "bench", "serve", "--backend", "vllm", "--base-url", url,
                   "--endpoint", "/v1/completions", "--model", served]
            if served != model:
                cmd += ["--tokenizer", model]
            cmd += ["--dataset-name", "random", "--random-input-len", str(inp), "--random-output-len", str(output_tokens),
                    "--num-prompts", str(num_prompts), "--request-rate", _fmt_rate(rate), "--seed", str(seed),
                    "--ignore-eos", "--goodput", *GOODPUT, "--percentile-metrics", "ttft,tpot,itl",
                    "--metric-percentiles", "50,99", "--save-result", "--result-dir", folder,
                    "--result-filename", f"{label}-rate{_fmt_rate(rate)}.json"]
            return cmd
        pp = PairPlan(idx, [_where(l) for l in prod], [_where(l) for l in cons], model, mml, dtype, total, ids, tp,
                      router, inp, output_tokens, list(rates), num_prompts, folder, argv, env,
                      [bench(router, "split", r) for r in rates],
                      [bench(f"http://localhost:{collocated_port}", "collocated", r) for r in rates], notes)
        out.append(pp)
    return out


# -- output ------------------------------------------------------------------------------------------------
def _sh(argv: list[str]) -> str:
    """Shell words; a word with a `$VAR` of ours is double-quoted so the shell expands it."""
    return " ".join(f'"{a}"' if "$" in a and all(c not in a for c in '"`\\') else shlex.quote(a) for a in argv)


def _sh_wrapped(argv: list[str], indent: str = "  ") -> str:
    """One command over several lines: the first words, then one option (and its values) a line."""
    parts: list[list[str]] = [[]]
    for a in argv:
        if a.startswith("--") and parts[-1]:
            parts.append([])
        parts[-1].append(a)
    lines = [_sh(parts[0])] + [indent + _sh(p) for p in parts[1:]]
    return " \\\n".join(lines)


def _rate_loop(pp: PairPlan, which: str) -> str:
    """The sweep as one `for RATE` loop around the exact command (the JSON format lists each)."""
    argv = list((pp.split_bench if which == "split" else pp.collocated_bench)[0])
    i = argv.index("--request-rate")
    argv[i + 1] = "$RATE"
    argv[argv.index("--base-url") + 1] = "$SPLIT_URL" if which == "split" else "$COLLOCATED_URL"
    j = argv.index("--result-filename")
    argv[j + 1] = f"{which}-rate$RATE.json"
    body = _sh_wrapped(argv, "    ")
    return f"for RATE in {' '.join(_fmt_rate(r) for r in pp.rates)}; do\n  {body}\ndone"


def _collocated_line(pp: PairPlan) -> str:
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in pp.collocated_env.items())
    return (env + " " if env else "") + _sh(pp.collocated)


def render_sh(plans: list[PairPlan]) -> str:
    out = ["#!/bin/sh", "# vllmlint bench-plan: step 3 of vLLM's P/D checklist - the split deployment against one",
           "# collocated `vllm serve` on the same GPUs, with the same prompts and SLOs.", "set -eu"]
    if not plans:
        out.append("# no P/D pair (a kv_producer and a kv_consumer) found")
    for pp in plans:
        port = pp.collocated[pp.collocated.index("--port") + 1]
        out += ["", f"# == pair {pp.index}: {pp.model}, {pp.gpus} GPUs ==",
                *[f"# prefill: {w}" for w in pp.prefill], *[f"# decode:  {w}" for w in pp.decode],
                *[f"# note: {n}" for n in pp.notes],
                f"SPLIT_URL=${{SPLIT_URL:-{pp.router_url}}}",
                f"COLLOCATED_URL=${{COLLOCATED_URL:-http://localhost:{port}}}",
                f"mkdir -p {shlex.quote(pp.result_dir)}",
                "", "# 1. the split deployment as it runs now, through its router", _rate_loop(pp, "split"),
                "", "# 2. stop the split deployment; start the collocated baseline on the same GPUs:",
                "#    " + _collocated_line(pp),
                "# 3. the same benchmark against it", _rate_loop(pp, "collocated"),
                "", "# 4. compare, per rate:"]
        out += [f"# vllmlint bench-compare {pp.result_dir}/split-rate{_fmt_rate(r)}.json "
                f"{pp.result_dir}/collocated-rate{_fmt_rate(r)}.json" for r in pp.rates]
    return "\n".join(out) + "\n"


def render_markdown(plans: list[PairPlan]) -> str:
    out = ["# Benchmark plan: split vs collocated", "",
           "Step 3 of vLLM's P/D checklist: the split deployment against one collocated `vllm serve` on the same "
           "GPUs, same prompts, goodput SLOs `ttft:2000 tpot:30` (ms). Compare p99 ITL, p99 TTFT and goodput "
           "with `vllmlint bench-compare`."]
    if not plans:
        out += ["", "No P/D pair (a kv_producer and a kv_consumer) found."]
    for pp in plans:
        port = pp.collocated[pp.collocated.index("--port") + 1]
        out += ["", f"## Pair {pp.index}: `{pp.model}` on {pp.gpus} GPUs", ""]
        out += [f"- prefill: `{w}`" for w in pp.prefill] + [f"- decode: `{w}`" for w in pp.decode]
        out += [f"- prompts: {pp.prompt_tokens} tokens in, {pp.output_tokens} out, {pp.num_prompts} per rate; "
                f"rates {', '.join(_fmt_rate(r) for r in pp.rates)} req/s"]
        out += [f"- note: {n}" for n in pp.notes]
        out += ["", f"1. The split deployment, through its router (`SPLIT_URL={pp.router_url}`):", "", "```sh",
                _rate_loop(pp, "split"), "```", "",
                "2. Stop it; start the collocated baseline on the same GPUs:", "", "```sh", _collocated_line(pp), "```",
                "", f"3. The same benchmark against it (`COLLOCATED_URL=http://localhost:{port}`):", "", "```sh",
                _rate_loop(pp, "collocated"), "```", "",
                f"4. Per rate R: `vllmlint bench-compare {pp.result_dir}/split-rateR.json "
                f"{pp.result_dir}/collocated-rateR.json`."]
    return "\n".join(out) + "\n"


def render_json(plans: list[PairPlan]) -> str:
    return json.dumps([pp.as_dict() for pp in plans], indent=1) + "\n"

