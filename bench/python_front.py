#!/usr/bin/env python3
"""The Python front end alone: CPU per file and launches found, on the shared corpus's Python
files and on generated launchers (bench/gen_corpus.py's `gen_python`).

    python bench/python_front.py [--n 300] [--runs 3]

Prints, per set: files, median CPU ms/file over the runs (parse only: the file is read and
decoded once, outside the timing), and for the corpus the launches found against MANIFEST.tsv's
`launches` column (file recall: files with launches > 0 where at least one is found; launch
recall: min(found, counted) summed / counted; false launches on the `launches = 0` files).
"""
from __future__ import annotations

import argparse
import csv
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from vllmlint.model.launch import ParseError, SourceFile  # noqa: E402
from vllmlint.parsers.pythonfile import parse_python  # noqa: E402

SHARED = Path(os.environ.get("VLLMLINT_SHARED", ROOT.parent / "shared")) / "corpus"


def sources_from(paths: list[Path], base: Path) -> list[SourceFile]:
    out = []
    for p in paths:
        text = p.read_text(encoding="utf-8", errors="replace").lstrip("\ufeff")
        out.append(SourceFile(p, p.relative_to(base).as_posix(), text, "python"))
    return out


def generated(n: int) -> list[SourceFile]:
    import gen_corpus
    rng = random.Random(8)
    out = []
    for i in range(n):
        name, text = gen_corpus.gen_python(i, rng)
        out.append(SourceFile(Path("/gen") / name, name, text, "python"))
    return out


def timed(files: list[SourceFile], runs: int) -> tuple[float, dict[str, int]]:
    found: dict[str, int] = {}
    per_run = []
    for _ in range(runs):
        t0 = time.process_time()
        for f in files:
            f._line_starts = None
            try:
                found[f.display] = len(parse_python(f).launches)
            except ParseError:
                found[f.display] = -1
        per_run.append((time.process_time() - t0) * 1000 / max(1, len(files)))
    return statistics.median(per_run), found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3)
    opts = ap.parse_args()
    # warm up: imports and caches are not per-file costs
    timed(generated(3), 1)
    print(f"load average {os.getloadavg()[0]:.2f}")
    gen = generated(opts.n)
    ms, found = timed(gen, opts.runs)
    print(f"generated launchers: {len(gen)} files, {ms:.2f} ms CPU/file, "
          f"{sum(1 for v in found.values() if v > 0)} with a launch")
    files = SHARED / "files"
    if not files.is_dir():
        return
    corpus = sources_from(sorted(files.rglob("*.py")), files)
    ms, found = timed(corpus, opts.runs)
    print(f"corpus Python files: {len(corpus)} files, {ms:.2f} ms CPU/file")
    with open(SHARED / "MANIFEST.tsv", newline="") as f:
        counted = {r["local_name"]: int(r["launches"]) for r in csv.DictReader(f, delimiter="\t")
                   if r["launches"].strip() and r["local_name"].endswith(".py")}
    want_files = [n for n, c in counted.items() if c > 0]
    hit_files = [n for n in want_files if found.get(n, 0) > 0]
    launches = sum(counted[n] for n in want_files)
    hit_launches = sum(min(max(found.get(n, 0), 0), counted[n]) for n in want_files)
    false = sum(max(found.get(n, 0), 0) for n, c in counted.items() if c == 0)
    print(f"corpus recall: files {len(hit_files)}/{len(want_files)}, launches {hit_launches}/{launches}, "
          f"false launches on launches=0 files: {false}")
    for n in sorted(counted):
        mark = "ok  " if found.get(n, 0) == counted[n] else "MISS"
        print(f"  {mark} {found.get(n, 0)}/{counted[n]} {n}")


if __name__ == "__main__":
    main()
