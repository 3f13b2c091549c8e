#!/usr/bin/env python3
"""Start-up cost of one run: `vllmlint check FILE` on one file of each kind, as pre-commit runs
it, beside `python -c pass` and (when installed) yamllint / hadolint / shellcheck on the same file.

    python bench/startup.py [--runs 21] [--before-src DIR] [--corpus /tmp/vllmlint-bench-corpus]
                            [--peers DIR]

CPU is user + sys of the child (os.wait4); wall is printed beside it. Runs are interleaved (one of
each command, then the next round) and the figures are medians, so a loaded machine shifts every
command alike. `--before-src`: an older source tree (see bench/workers.py) run through PYTHONPATH
with this interpreter, for before/after in one sitting. Bytecode is written and read (a
warm-up round first), as for an installed package. `--peers`: a folder holding yamllint,
hadolint, shellcheck (default: beside this interpreter). No assertion: this prints a Markdown table.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

KINDS = {  # kind -> (the corpus file, the peer that reads that kind)
    "k8s": ("k8s/0000-agent-search-0000/engine.yaml", "yamllint"),
    "compose": (None, "yamllint"),
    "docker": ("docker/0000-embed/Dockerfile", "hadolint"),
    "sh": ("sh/0000-serve.sh", "shellcheck"),
    "py": ("py/0000_launch.py", None),
}


def timed(argv: list[str], env: dict) -> tuple[float, float]:
    start = time.perf_counter()
    # run from a neutral folder: `python -m` puts the working folder first on sys.path, and from
    # the source tree that would shadow --before-src's PYTHONPATH
    proc = subprocess.Popen(argv, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - start


def first_file(folder: Path) -> Path:
    return sorted(p for p in folder.rglob("*") if p.is_file())[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--before-src", type=Path)
    ap.add_argument("--corpus", type=Path, default=Path("/tmp/vllmlint-bench-corpus"))
    ap.add_argument("--peers", type=Path, default=Path(sys.executable).parent)
    ap.add_argument("--kinds", default="k8s,docker,sh,py")
    opts = ap.parse_args(argv)
    # PYTHONDONTWRITEBYTECODE (set in some sandboxes) would make every run compile every module
    # from source: a pip-installed vllmlint has its .pyc written at install time, so the runs here
    # write theirs (the warm-up round below) and read them after
    base_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    base_env["VLLMLINT_JOBS"] = "1"
    commands: dict[str, tuple[list[str], dict]] = {"python -c pass": ([sys.executable, "-c", "pass"], base_env)}
    for kind in opts.kinds.split(","):
        rel, peer = KINDS[kind]
        path = opts.corpus / rel if rel else first_file(opts.corpus / kind)
        if opts.before_src:
            env = dict(base_env, PYTHONPATH=str(opts.before_src.resolve()))
            commands[f"{kind} before"] = ([sys.executable, "-m", "vllmlint", "check", str(path)], env)
        commands[f"{kind} after"] = ([sys.executable, "-m", "vllmlint", "check", str(path)], base_env)
        tool = shutil.which(peer, path=str(opts.peers)) if peer else None
        if tool:
            commands[f"{kind} {peer}"] = ([tool, str(path)], base_env)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for cmd, env in commands.values():      # warm-up: bytecode written, files in the page cache
        timed(cmd, env)
    for _ in range(opts.runs):
        for name, (cmd, env) in commands.items():
            samples[name].append(timed(cmd, env))
    print("| command | CPU ms (median) | wall ms (median) |")
    print("|---|---:|---:|")
    for name, got in samples.items():
        cpu = statistics.median(c for c, _ in got) * 1000
        wall = statistics.median(w for _, w in got) * 1000
        print(f"| {name} | {cpu:.1f} | {wall:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
