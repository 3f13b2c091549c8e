#!/usr/bin/env python3
"""Where the CPU of one `vllmlint check` goes, stage by stage, without a profiler's distortion.

    python bench/stages.py [CORPUS] [--no-gc]

cProfile multiplies the cost of code that makes many small calls (libcst's visitors, our tree
walks) by up to 10x, so its shares mislead. This script runs the pipeline of `check` in-process
(discover -> read -> parse per kind -> link -> graph -> each rule -> suppressions -> report)
and times each stage with the process CPU clock. It uses vllmlint's internal functions and so
follows their names; if one moves, fix the call here.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gen_corpus  # noqa: E402

T0 = time.process_time()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", nargs="?", type=Path, default=Path(gen_corpus.DEFAULT_DEST))
    ap.add_argument("--no-gc", action="store_true",
                    help="run with the cyclic garbage collector off (how much of the time is GC)")
    opts = ap.parse_args(argv)
    if opts.no_gc:
        import gc
        gc.disable()
    clock = time.process_time
    rows: list[tuple[str, float, str]] = []

    t = clock()
    import click  # noqa: F401  - what the CLI pays before anything else
    import yaml  # noqa: F401
    from vllmlint.lint.discovery import discover
    from vllmlint.lint.engine import analyse
    from vllmlint.lint.graph import graph_of
    from vllmlint.lint.project import Project, link, parse_source
    from vllmlint.lint.registry import selected_rules
    from vllmlint.lint.report import render
    from vllmlint.lint.sources import read_source
    from vllmlint.knowledge.versions import parse_version
    rows.append(("import click, yaml, vllmlint core", clock() - t, ""))

    t = clock()
    rules = list(selected_rules(parse_version("0.30.0")))
    rows.append((f"import + instantiate {len(rules)} rules", clock() - t, ""))

    t = clock()
    candidates, _missing = discover([str(opts.corpus)])
    rows.append(("discover", clock() - t, f"{len(candidates)} files"))

    project = Project()
    per_kind: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    first: dict[str, float] = {}
    t = clock()
    sources = [read_source(c.path, c.display, c.kind) for c in candidates]
    rows.append(("read + decode", clock() - t, ""))
    for src in sources:
        parts = Path(src.display).relative_to(opts.corpus).parts if Path(src.display).is_absolute() else ()
        top = parts[0] if parts and parts[0] in gen_corpus.KINDS else src.kind
        t = clock()
        parsed = parse_source(src)
        dt = clock() - t
        if top not in first:
            first[top] = dt          # includes the lazy import of that kind's parser
        per_kind[top] += dt
        count[top] += 1
        if parsed is not None:
            project.files.append(parsed)
    for kind in sorted(per_kind):
        n = count[kind]
        rest = (per_kind[kind] - first[kind]) / max(1, n - 1)
        rows.append((f"parse {kind}", per_kind[kind], f"{n} files, {rest * 1000:.2f} ms/file after the first "
                                                       f"({first[kind] * 1000:.0f} ms, with its imports)"))
    t = clock()
    link(project)
    rows.append(("link (envFrom)", clock() - t, f"{len(project.launches)} launches"))
    t = clock()
    graph = graph_of(project)
    rows.append(("graph (names, URLs, proxies, union-find)", clock() - t, f"{len(graph.calls)} URLs"))
    for rule in rules:
        if getattr(rule, "post", False):
            continue
        t = clock()
        found = list(rule.check(project))
        rows.append((f"rule {rule.code}", clock() - t, f"{len(found)} findings"))
    t = clock()
    findings, suppressed, _problems = analyse(project, rules)     # runs the rules again, + suppressions
    rows.append(("analyse (rules again + suppressions + sort)", clock() - t, f"{len(findings)} findings"))
    t = clock()
    out = render(findings, "text", rules=rules, suppressed=suppressed, color=False)
    rows.append(("render text", clock() - t, f"{len(out)} chars"))

    total = clock() - T0
    n = len(candidates)
    print(f"## Stages of `vllmlint check` on {opts.corpus} ({n} files), process CPU time"
          f"{', garbage collector off' if opts.no_gc else ''}\n")
    print("| stage | CPU s | ms/file (of all files) | note |\n|---|---|---|---|")
    for name, dt, note in rows:
        print(f"| {name} | {dt:.3f} | {dt * 1000 / max(1, n):.3f} | {note} |")
    print(f"| **total (this script, interpreter start excluded)** | {total:.3f} | {total * 1000 / max(1, n):.3f} | "
          f"the `analyse` row repeats the rules |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
