#!/usr/bin/env python3
"""Profile vllmlint on the benchmark corpus: where the CPU goes in bulk and for one file.

    python bench/profile.py [--corpus /tmp/vllmlint-bench-corpus] [--top 25] [--out bench/profile.md]

Runs, as separate processes (so each pays its own imports, like a real run):
  python -m cProfile -o PROF -m vllmlint.cli check CORPUS           (bulk, the mixed corpus)
  python -m cProfile -o PROF -m vllmlint.cli check ONE_FILE         (one k8s, Dockerfile, shell file)
  python -X importtime -m vllmlint.cli check ONE_FILE                (per kind; import costs)
and writes the top entries by cumulative and by own time, and the heaviest imports, as Markdown.
cProfile roughly doubles pure-Python run time; read the shares, not the absolute seconds.
"""
from __future__ import annotations

import argparse
import io
import os
import pstats
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gen_corpus  # noqa: E402
from run import child_env  # noqa: E402

ONE = {"k8s": "k8s/*/*.yaml", "docker": "docker/*/Dockerfile", "sh": "sh/*.sh", "py": "py/*.py"}


# `python -m cProfile -o PROF -m vllmlint.cli check TARGET`, with a CPU-time clock: the machines
# this runs on are shared, and cProfile's default wall clock charges other jobs' time to us.
RUNNER = """
import cProfile, runpy, sys, time
prof, target = sys.argv[1], sys.argv[2]
sys.argv = ["vllmlint", "check", target]
p = cProfile.Profile(time.process_time)
p.enable()
try:
    runpy.run_module("vllmlint.cli", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
finally:
    p.disable()
    p.dump_stats(prof)
"""


def profile(target: str, corpus: Path, prof: Path) -> float:
    cmd = [sys.executable, "-c", RUNNER, str(prof), target]
    before = os.times()
    subprocess.run(cmd, cwd=corpus, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env=child_env())
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def table(prof: Path, sort: str, top: int) -> str:
    stats = pstats.Stats(str(prof), stream=io.StringIO())
    stats.sort_stats(sort)
    total = stats.total_tt
    rows = ["| # | function | calls | own s | cumulative s | cum % |", "|---|---|---|---|---|---|"]
    shown = [f for f in stats.fcn_list or [] if sort != "cumulative" or not _wrapper(f)][:top]
    for i, func in enumerate(shown, 1):
        cc, nc, tt, ct, _callers = stats.stats[func]
        filename, line, name = func
        where = _short(filename)
        label = f"{where}:{line}({name})" if line else name
        calls = f"{nc}" if nc == cc else f"{nc}/{cc}"
        rows.append(f"| {i} | `{label}` | {calls} | {tt:.3f} | {ct:.3f} | {100 * ct / total:.0f}% |")
    return f"Total profiled CPU time {total:.2f} s.\n\n" + "\n".join(rows)


WRAPPERS = ("<frozen runpy>", "<string>", "click/core.py", "click/decorators.py", "cProfile.py", "profile.py",
            "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>", "importlib/__init__.py")


def _wrapper(func) -> bool:
    """Frames every run goes through (runpy, click dispatch): noise in a cumulative listing."""
    filename, _line, name = func
    return filename.endswith(WRAPPERS) or filename.startswith(WRAPPERS) or name in (
        "<built-in method builtins.exec>", "main", "invoke", "__call__") and "vllmlint" not in filename


def _short(filename: str) -> str:
    for marker in ("/vllmlint/", "/rules/", "site-packages/", "/lib/python3"):
        if marker in filename:
            tail = filename.split(marker, 1)[1]
            return ("vllmlint/" if marker == "/vllmlint/" else "rules/" if marker == "/rules/" else "") + tail
    return filename


IMPORT_RE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")


def import_times(target: str, corpus: Path, top: int) -> tuple[str, int]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "vllmlint.cli", "check", target],
                          cwd=corpus, capture_output=True, text=True, check=False, env=child_env())
    entries = []
    for line in proc.stderr.splitlines():
        m = IMPORT_RE.match(line)
        if m:
            self_us, cum_us, indent, name = int(m.group(1)), int(m.group(2)), len(m.group(3)) - 1, m.group(4)
            entries.append((name, self_us, cum_us, indent // 2))
    total = sum(s for _, s, _, _ in entries)
    heavy = {}
    for name, _self, cum, level in entries:          # the cumulative time of each package's root import
        root = name.split(".")[0]
        if name == root or name.startswith("vllmlint."):
            heavy[name] = max(heavy.get(name, 0), cum)
    rows = ["| module | cumulative ms | level |", "|---|---|---|"]
    ranked = sorted(((c, n) for n, c in heavy.items()), reverse=True)[:top]
    levels = {n: lvl for n, _s, _c, lvl in entries}
    rows += [f"| `{n}` | {c / 1000:.1f} | {levels.get(n, 0)} |" for c, n in ranked]
    return "\n".join(rows), total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=Path(gen_corpus.DEFAULT_DEST))
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", type=Path, default=HERE / "profile.md")
    ap.add_argument("--prof-dir", type=Path, default=Path(tempfile.gettempdir()))
    opts = ap.parse_args(argv)
    corpus = opts.corpus
    if not (corpus / "k8s").is_dir():
        gen_corpus.generate(corpus)
    corpus = corpus.resolve()
    out = [f"## vllmlint profile (`python bench/profile.py`, corpus {corpus})", ""]

    prof = opts.prof_dir / "vl.prof"
    cpu = profile(".", corpus, prof)
    out += ["cProfile with a CPU-time clock (`cProfile.Profile(time.process_time)`, the equivalent of "
            "`python -m cProfile -o PROF -m vllmlint.cli check TARGET`); import machinery and click dispatch "
            "frames are left out of the cumulative listings. Profiling inflates pure-Python time: read shares.", "",
            f"### Bulk: `vllmlint check .` ({cpu:.1f} s CPU under cProfile)",
            "", "By cumulative time:", "", table(prof, "cumulative", opts.top), "",
            "By own time (tottime):", "", table(prof, "tottime", opts.top), ""]
    for kind, pattern in ONE.items():
        one = str(sorted(corpus.glob(pattern))[1].relative_to(corpus))
        prof_one = opts.prof_dir / f"vl-one-{kind}.prof"
        cpu = profile(one, corpus, prof_one)
        imports, total = import_times(one, corpus, 20)
        out += [f"### One {kind} file: `vllmlint check {one}` ({cpu * 1000:.0f} ms CPU under cProfile)", "",
                table(prof_one, "cumulative", 15), "",
                f"`python -X importtime -m vllmlint.cli check {one}`: {total / 1000:.0f} ms of imports in all "
                f"(sum of self times); the heaviest:", "", imports, ""]
    text = "\n".join(out)
    opts.out.write_text(text)
    print(text)
    print(f"written to {opts.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
