#!/usr/bin/env python3
"""CPU and wall of a bulk `vllmlint check` with one worker and with two, on one or more corpora,
and optionally the same with another source tree of vllmlint (a "before").

    python bench/workers.py CORPUS [CORPUS ...] [--runs 3] [--before-src DIR]

`--before-src`: a folder holding an older `vllmlint/` (with `vllmlint/rules` linked to its
`rules/`), e.g. `git archive REV vllmlint rules | tar -x -C DIR && ln -s ../rules DIR/vllmlint/rules`;
it runs first on PYTHONPATH, with this interpreter. CPU is user + sys of the whole process tree
(os.wait4 of the child, which waits for its pool workers), so it stays comparable on a loaded
machine; wall is printed too, and means little when other jobs share the cores. Runs of the
variants are interleaved (run 1 of each, then run 2 of each, ...); figures are medians.
No assertion anywhere: this prints a Markdown table.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(argv: list[str], cwd: Path, env: dict) -> tuple[float, float, int]:
    """(CPU s, wall s, exit status) of one run, its output discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, wall, proc.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before-src", type=Path, help="an older vllmlint source tree to time too")
    opts = ap.parse_args(argv)
    variants = [("before", opts.before_src)] if opts.before_src else []
    variants.append(("after", None))
    rows = []
    for corpus in opts.corpora:
        n = sum(1 for p in corpus.rglob("*") if p.is_file())
        samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for _ in range(opts.runs):
            for name, src in variants:
                for jobs in (1, 2):
                    env = dict(os.environ, VLLMLINT_JOBS=str(jobs))
                    if src is not None:
                        env["PYTHONPATH"] = str(src.resolve())
                    cpu, wall, rc = timed([sys.executable, "-m", "vllmlint.cli", "check", "."], corpus, env)
                    if rc not in (0, 1):
                        sys.exit(f"{name} jobs={jobs} on {corpus}: exit {rc}")
                    samples.setdefault((name, jobs), []).append((cpu, wall))
                    print(f"{corpus.name} {name} jobs={jobs}: {cpu:.2f} s CPU, {wall:.2f} s wall", file=sys.stderr)
        for (name, jobs), got in samples.items():
            cpu = statistics.median(c for c, _ in got)
            wall = statistics.median(w for _, w in got)
            rows.append((corpus.name, n, name, jobs, cpu, wall))
    print("| corpus | files | code | workers | CPU s (median) | CPU ms / file | wall s (median) |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for corpus, n, name, jobs, cpu, wall in rows:
        print(f"| {corpus} | {n} | {name} | {jobs} | {cpu:.2f} | {1000 * cpu / n:.2f} | {wall:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
