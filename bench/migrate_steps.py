#!/usr/bin/env python3
"""What a long `migrate` chain costs next to a `check` of the same files (issue 34, item 3).

    python bench/migrate_steps.py [--corpus /tmp/vllmlint-bench-corpus2] [--files 200] [--runs 3]
                                  [--to 0.33.0] [--from 0.8.0]

Copies --files entries of the corpus (the same number of each kind: k8s, compose, docker, sh,
py, in name order) to a temporary directory, then runs in one process each (VLLMLINT_JOBS=1,
so the CPU is one process's and workers do not blur it), interleaved, --runs times:

    check                          `vllmlint check .`
    migrate 1 step                 `vllmlint migrate --from <to's previous release> --to <to> --diff .`
    migrate N steps --diff         `vllmlint migrate --from 0.8.0 --to 0.33.0 --diff .`
    migrate N steps (writes)       the same without --diff, on a fresh copy each run

and prints per command the median CPU (user+sys of the child, os.wait4) and the median peak
resident memory (ru_maxrss), then the ratios the issue's targets read: the N-step migrate's CPU
over check's, and its peak memory over the 1-step migrate's. CPU only: wall time means nothing on
a shared machine. The corpus is never written (the writing migrate runs on a copy).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("k8s", "compose", "docker", "sh", "py")


def pick(corpus: Path, n: int) -> list[Path]:
    """n entries of the corpus, the same number of each kind present (k8s/0000-x, sh/0001-serve.sh)."""
    kinds = [corpus / k for k in KINDS if (corpus / k).is_dir()] or [corpus]
    per = max(1, n // len(kinds))
    out: list[Path] = []
    for k in kinds:
        out += sorted(k.iterdir())[:per]
    return out[:n]


def copy(entries: list[Path], corpus: Path, dest: Path) -> None:
    for e in entries:
        target = dest / e.relative_to(corpus)
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if e.is_dir() else shutil.copy2)(e, target)


def measure(args: list[str], cwd: Path) -> tuple[float, int, int]:
    """(CPU seconds user+sys, peak RSS KiB, exit code) of one vllmlint run."""
    env = dict(os.environ, VLLMLINT_JOBS="1", NO_COLOR="1")
    proc = subprocess.Popen([sys.executable, "-m", "vllmlint.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss, proc.returncode


def previous_release(to: str) -> str:
    sys.path.insert(0, str(ROOT))
    from vllmlint.knowledge.catalogue import versions
    from vllmlint.knowledge.versions import parse_version

    target = parse_version(to)
    older = sorted(parse_version(v) for v in versions() if parse_version(v) < target)
    return ".".join(map(str, older[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="/tmp/vllmlint-bench-corpus2", type=Path)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--to", default="0.33.0")
    ap.add_argument("--from", dest="start", default="0.8.0")
    opts = ap.parse_args()
    entries = pick(opts.corpus, opts.files)
    prev = previous_release(opts.to)
    cmds = {
        "check": ["check", "."],
        "migrate 1 step --diff": ["migrate", "--from", prev, "--to", opts.to, "--diff", "."],
        "migrate N steps --diff": ["migrate", "--from", opts.start, "--to", opts.to, "--diff", "."],
        "migrate N steps (writes)": ["migrate", "--from", opts.start, "--to", opts.to, "."],
    }
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    rss: dict[str, list[int]] = {k: [] for k in cmds}
    with tempfile.TemporaryDirectory(prefix="vllmlint-migrate-bench-") as tmp:
        tree = Path(tmp) / "tree"
        copy(entries, opts.corpus, tree)
        for _ in range(opts.runs):
            for name, args in cmds.items():
                here = tree
                if "--diff" not in args and name != "check":
                    here = Path(tmp) / "written"
                    shutil.rmtree(here, ignore_errors=True)
                    shutil.copytree(tree, here)
                c, m, _ = measure(args, here)
                cpu[name].append(c)
                rss[name].append(m)
    print(f"{len(entries)} entries of {opts.corpus}, "
          f"--from {opts.start} --to {opts.to}; 1 step: --from {prev}; medians of {opts.runs}, VLLMLINT_JOBS=1")
    print(f"{'command':28} {'CPU s':>8} {'peak RSS MiB':>13}")
    med = {k: statistics.median(v) for k, v in cpu.items()}
    mem = {k: statistics.median(v) / 1024 for k, v in rss.items()}
    for k in cmds:
        print(f"{k:28} {med[k]:8.2f} {mem[k]:13.1f}")
    print(f"migrate N steps --diff / check, CPU: {med['migrate N steps --diff'] / med['check']:.2f}x (target <= 2x)")
    print(f"migrate N steps / 1 step, peak RSS: {mem['migrate N steps --diff'] / mem['migrate 1 step --diff']:.2f}x "
          f"(target <= 1.25x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
