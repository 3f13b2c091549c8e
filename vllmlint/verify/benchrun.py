"""`vllmlint bench-plan --run`: the plan executed on verify's local stack (a real vLLM, the tiny
model, CPU), to prove the commands and produce real `--save-result` files for `bench-compare`.

For the first P/D pair: the pair starts with verify's machinery (as `vllmlint verify` adapts it)
behind verify's built-in router; after a warm-up request, `vllm bench serve` runs the plan's
commands against the router; the pair stops; the collocated baseline starts (the tiny model with
the same local adaptations, `--data-parallel-size` as planned) and the same commands run
against it. Prompt lengths are cut to what the local `--max-model-len` (512) holds. The figures
say nothing about your GPUs - only that the plan runs and what its files look like. Verify's
built-in router hands decode's stream back whole, so the split side's ITL/TPOT read 0 here
(`bench-compare` says so rather than deciding on them); TTFT and goodput are measured.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Sequence

from .adapt import CPU_KV_BYTES, UnitContext, base_env
from .benchplan import PairPlan
from .locate import NotFound, find_vllm, python_of, tiny_model
from .procs import Supervisor, free_port
from .router import BuiltinRouter, wait_port
from .runner import PD_PROMPT, is_cpu_build, vllm_version

LOCAL_MAX_LEN = 512
DETAILED = ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "queue_times",
            "generated_texts")


class RunError(RuntimeError):
    pass


def _bench_argv(exe: Path, cmd: list[str], url: str, model: str, input_len: int, output_len: int,
                result_dir: Path) -> list[str]:
    argv = [str(exe)] + cmd[1:]
    argv[argv.index("--base-url") + 1] = url
    argv[argv.index("--model") + 1] = model
    if "--tokenizer" in argv:
        argv[argv.index("--tokenizer") + 1] = model
    argv[argv.index("--random-input-len") + 1] = str(input_len)
    argv[argv.index("--random-output-len") + 1] = str(output_len)
    argv[argv.index("--result-dir") + 1] = str(result_dir)
    return argv + ["--save-detailed"]        # for the per-request errors; dropped from the file after


def _bench_all(exe, cmds, url, model, input_len, output_len, result_dir, env, timeout, echo) -> list[dict]:
    runs = []
    for cmd in cmds:
        argv = _bench_argv(exe, cmd, url, model, input_len, output_len, result_dir)
        name = argv[argv.index("--result-filename") + 1]
        echo(f"bench-plan --run: vllm bench serve ... --request-rate {argv[argv.index('--request-rate') + 1]} -> {name}")
        t0 = time.monotonic()
        res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=result_dir)
        out = (result_dir / name)
        runs.append({"file": str(out), "exit": res.returncode, "seconds": round(time.monotonic() - t0, 1),
                     "goodput_line": next((l.strip() for l in res.stdout.splitlines() if "goodput" in l.lower()), None),
                     "tail": (res.stdout + res.stderr)[-1500:] if res.returncode or not out.exists() else ""})
        if res.returncode or not out.exists():
            raise RunError(f"vllm bench serve failed (exit {res.returncode}): "
                           + ((res.stderr or res.stdout).strip().splitlines() or ["no output"])[-1])
        data = json.loads(out.read_text())
        errors = [e for e in data.pop("errors", None) or [] if e]
        for key in DETAILED:                 # --save-detailed was only for the errors: keep the file plain
            data.pop(key, None)
        out.write_text(json.dumps(data, indent=2) + "\n")
        runs[-1].update(completed=data.get("completed"), failed=data.get("failed"))
        if errors:
            runs[-1]["first_error"] = errors[0].strip().splitlines()[-1][:300]
        if not data.get("completed"):
            raise RunError(f"{name}: every request failed" + (f" ({runs[-1]['first_error']})" if errors else ""))
    return runs


def run_plan(paths: Sequence[str], pp: PairPlan, *, vllm: str | None = None, connector: str | None = None,
             output_tokens: int = 32, timeout: float = 600.0, result_dir: str | None = None, echo=None) -> dict:
    """Run pair `pp`'s plan locally; returns what ran and where the result files are."""
    from .deployment import DeploymentError, deployment

    echo = echo or (lambda s: None)
    try:
        exe = find_vllm(vllm)
        model_dir, _ = tiny_model(exe)
    except NotFound as err:
        raise RunError(str(err)) from None
    version = vllm_version(exe)
    out_dir = Path(result_dir or pp.result_dir).absolute()
    out_dir.mkdir(parents=True, exist_ok=True)
    input_len = min(pp.prompt_tokens, LOCAL_MAX_LEN - output_tokens - 8)
    work = Path(tempfile.mkdtemp(prefix="vllmlint-benchrun-"))
    ctx = UnitContext(workdir=work, model=model_dir, vllm=exe, python=python_of(exe), cpu=is_cpu_build(version),
                      connector=connector)
    env = base_env(ctx)
    report: dict = {"vllm": str(exe), "vllm_version": version, "model": str(model_dir), "input_len": input_len,
                    "output_len": output_tokens, "result_dir": str(out_dir),
                    "notes": [f"prompts cut to {input_len} tokens, outputs to {output_tokens}: the tiny model's "
                              f"local --max-model-len is {LOCAL_MAX_LEN}"]}
    t0 = time.monotonic()
    try:
        echo("bench-plan --run: starting the P/D pair (verify's adaptations)...")
        with deployment(list(paths), vllm=vllm, connector=connector, timeout=timeout, echo=echo) as dep:
            router = BuiltinRouter(dep.prefill_urls, dep.decode_urls, timeout)
            url = router.start()
            try:
                body = {"model": dep.model, "prompt": PD_PROMPT, "max_tokens": 2, "temperature": 0}
                for attempt in range(1, 5):   # first shapes, and NIXL's first handshake (5 s budget)
                    status, payload = router.route("/v1/completions", body)
                    if status == 200:
                        break
                    echo(f"bench-plan --run: warm-up try {attempt}: {status} {payload[:200]!r}")
                    time.sleep(2)
                else:
                    raise RunError(f"the P/D pair did not answer a warm-up request: {status} {payload[:300]!r}")
                report["split"] = {"router": url, "prefill": dep.prefill_urls, "decode": dep.decode_urls,
                                   "adaptations": dep.adaptations}
                try:
                    report["split"]["runs"] = _bench_all(exe, pp.split_bench, url, dep.model, input_len,
                                                         output_tokens, out_dir, env, timeout, echo)
                except RunError as err:
                    from . import logs
                    dead = [f"{n} died: {logs.error_line(r.proc.log_text())}" for n, r in dep.names().items()
                            if r.proc and not r.proc.alive()]
                    raise RunError("; ".join([str(err)] + dead)) from None
            finally:
                router.stop()
    except DeploymentError as err:
        raise RunError(f"{err}: " + "; ".join(err.lines)) from None
    report["timings_s"] = {"split": round(time.monotonic() - t0, 1)}
    # -- the collocated baseline ----------------------------------------------------------------------
    dp = int(pp.collocated[pp.collocated.index("--data-parallel-size") + 1])
    port = free_port()
    argv = [str(exe), "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port),
            "--max-model-len", str(LOCAL_MAX_LEN), "--dtype", "float32", "--enforce-eager",
            "--kv-cache-memory-bytes", CPU_KV_BYTES, "--data-parallel-size", str(dp)]
    sup = Supervisor(work)
    t1 = time.monotonic()
    try:
        echo(f"bench-plan --run: starting the collocated baseline (--data-parallel-size {dp})...")
        proc = sup.start("collocated", argv, env)
        if not wait_port(f"http://127.0.0.1:{port}/health", time.monotonic() + timeout, proc.alive):
            from . import logs
            raise RunError(f"the collocated baseline did not start: {logs.error_line(proc.log_text())}")
        url = f"http://127.0.0.1:{port}"
        from . import client as http
        http.post(url + "/v1/completions", {"model": str(model_dir), "prompt": PD_PROMPT, "max_tokens": 2}, timeout)
        report["collocated"] = {"url": url, "argv": argv[1:],
                                "runs": _bench_all(exe, pp.collocated_bench, url, str(model_dir), input_len,
                                                   output_tokens, out_dir, env, timeout, echo)}
    finally:
        sup.close()
        shutil.rmtree(work, ignore_errors=True)
    report["timings_s"]["collocated"] = round(time.monotonic() - t1, 1)
    return report

