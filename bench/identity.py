#!/usr/bin/env python3
"""Byte identity of what a user sees, between this source tree and another ("before"):
`check` in every format (and --statistics), `check FILE` one file at a time (the pre-commit
call, through the fast entry point), `launches`, and `migrate --to 0.30.0 --diff`, on each tree.

    python bench/identity.py --before-src DIR TREE [TREE ...] [--single N] [--jobs 1]

`--before-src`: an older `vllmlint/` (see bench/workers.py for how to lay one out), run through
PYTHONPATH with this interpreter; this tree runs the same way, so both start alike. Every
command runs from TREE (paths in the output stay relative); stdout, stderr and the exit status
are compared. `--single N`: also N files of each tree, one `check FILE` each. Prints one line a
difference and exits 1 if any; nothing is timed.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

COMMANDS = [
    ["check", "."], ["check", "--format", "json", "."], ["check", "--format", "sarif", "."],
    ["check", "--format", "github", "."], ["check", "--format", "gitlab", "."],
    ["check", "--statistics", "."], ["check", "--fix", "--diff", "."],
    ["launches", "."], ["launches", "--format", "json", "."],
    ["migrate", "--to", "0.30.0", "--diff", "."],
]


def run(src: Path, argv: list[str], cwd: Path, jobs: str) -> tuple[int, bytes, bytes]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(src), VLLMLINT_JOBS=jobs, NO_COLOR="1", COLUMNS="100")
    proc = subprocess.run([sys.executable, "-m", "vllmlint", *argv], cwd=cwd, env=env, capture_output=True,
                          timeout=1800)
    return proc.returncode, proc.stdout, proc.stderr


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", type=Path)
    ap.add_argument("--before-src", type=Path, required=True)
    ap.add_argument("--after-src", type=Path, default=ROOT, help="default: this source tree")
    ap.add_argument("--single", type=int, default=0, help="files a tree checked one at a time")
    ap.add_argument("--jobs", default="1")
    ap.add_argument("--only", help="a comma list of command indexes to run (default: all)")
    opts = ap.parse_args(argv)
    before, after = opts.before_src.resolve(), opts.after_src.resolve()
    commands = COMMANDS
    if opts.only:
        commands = [COMMANDS[int(i)] for i in opts.only.split(",")]
    bad = 0
    for tree in opts.trees:
        tree = tree.resolve()
        cases = list(commands)
        if opts.single:
            files = sorted(p for p in tree.rglob("*") if p.is_file() and ".git" not in p.parts)
            step = max(1, len(files) // opts.single)
            cases += [["check", str(p.relative_to(tree))] for p in files[::step][:opts.single]]
        for case in cases:
            got = run(after, case, tree, opts.jobs)
            want = run(before, case, tree, opts.jobs)
            if got != want:
                bad += 1
                print(f"DIFFERS {tree}: vllmlint {' '.join(case)} (exit {want[0]} -> {got[0]})")
        print(f"{tree}: {len(cases)} commands compared", file=sys.stderr)
    print("identical" if not bad else f"{bad} difference(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
