#!/usr/bin/env python3
"""Same bytes before and after: every output a user sees, from an older commit and from this tree.

    python bench/identity.py --before REV [--trees fixtures,gen,gen2,corpus,redteam] [--count 8]

Speed work (issue 34) must not change a byte of what vllmlint writes. This runs each command of
`COMMANDS` on each tree with the source of commit REV (exported with `git archive` into a temp
folder, first on PYTHONPATH) and with this working tree, and compares exit status, stdout and
stderr; `migrate` is also run for real on two copies of each generated corpus and the written
files are compared. It prints one line per difference and exits 1 when there is one.
tests/test_output_identity.py runs it on small corpora.

Trees: `fixtures` (this repository's), `gen` / `gen2` (bench/gen_corpus.py and gen_corpus2.py,
`--count` files a kind), `corpus` and `redteam` (../shared, skipped when absent).
"""
from __future__ import annotations

import argparse
import difflib
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT / "bench"))
import gen_corpus  # noqa: E402
import gen_corpus2  # noqa: E402

COMMANDS: list[tuple[str, ...]] = [
    ("check", "--format", "text", "."),
    ("check", "--format", "json", "."),
    ("check", "--format", "sarif", "."),
    ("check", "--format", "github", "."),
    ("check", "--fix", "--diff", "."),
    ("launches", "."),
    ("migrate", "--to", "0.30.0", "--diff", "."),
    ("migrate", "--from", "0.8.0", "--to", "0.33.0", "--diff", "."),
    ("migrate", "--to", "0.30.0", "--diff", "--report", "{report}", "."),
]
# The long chain is left out on the real trees by default (--all-on-real runs it): on
# ../shared/redteam it costs minutes per side, and the chain's own code runs on the other trees.
LONG_CHAIN = ("migrate", "--from", "0.8.0", "--to", "0.33.0", "--diff", ".")
REAL_TREES = ("corpus", "redteam")
# A migrate that writes: run on a fresh copy, the trees compared afterwards.
WRITING = ("migrate", "--from", "0.8.0", "--to", "0.33.0", ".")
# Helm's schema validation lists a chart's errors in Go map order (not ours): the note's line is
# compared, its quoted reason is not (as in tests/test_worker_rules.py).
HELM_SCHEMA_NOTE = re.compile(r"(Helm rendering with values\.yaml failed: values don't meet the specifications).*")


def export(rev: str, dest: Path) -> Path:
    """The vllmlint package of commit `rev`, importable from `dest`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "vllmlint", "rules"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    link = dest / "vllmlint" / "rules"
    if not link.exists():
        link.symlink_to("../rules")
    return dest


def run(src: Path, cwd: Path, args: tuple[str, ...]) -> tuple[int, str, str]:
    """Exit status, stdout (then the `--report` file's text, when asked for one) and stderr."""
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(src))
    env.pop("FORCE_COLOR", None)
    with tempfile.TemporaryDirectory(prefix="vllmlint-report-") as tmp:
        report = Path(tmp) / "report.md"
        argv = [str(report) if a == "{report}" else a for a in args]
        proc = subprocess.run([sys.executable, "-m", "vllmlint.cli", *argv], capture_output=True, text=True,
                              env=env, cwd=cwd)
        written = report.read_text() if report.exists() else ""
    stderr = HELM_SCHEMA_NOTE.sub(r"\1", proc.stderr).replace(str(report), "{report}")
    return proc.returncode, proc.stdout + written, stderr


def trees(work: Path, names: list[str], count: int) -> list[tuple[str, Path]]:
    out = []
    for name in names:
        # every tree is a copy: a command that writes by mistake must not touch the originals
        if name == "fixtures":
            out.append((name, Path(shutil.copytree(ROOT / "fixtures", work / name))))
        elif name == "gen":
            gen_corpus.generate(work / name, {k: count for k in gen_corpus.KINDS})
            out.append((name, work / name))
        elif name == "gen2":
            gen_corpus2.generate(work / name, {k: count for k in gen_corpus2.KINDS})
            out.append((name, work / name))
        elif name == "corpus" and (SHARED / "corpus" / "files").is_dir():
            out.append((name, Path(shutil.copytree(SHARED / "corpus" / "files", work / name))))
        elif name == "redteam" and (SHARED / "redteam").is_dir():
            out.append((name, Path(shutil.copytree(SHARED / "redteam", work / name, symlinks=True))))
    return out


def same_tree(a: Path, b: Path) -> list[str]:
    """Relative paths whose bytes differ (or that exist on one side only)."""
    diffs = []
    cmp = filecmp.dircmp(a, b)
    stack = [(cmp, Path("."))]
    while stack:
        node, rel = stack.pop()
        diffs += [str(rel / n) for n in node.left_only + node.right_only]
        for name in node.common_files:
            if (Path(node.left) / name).read_bytes() != (Path(node.right) / name).read_bytes():
                diffs.append(str(rel / name))
        stack += [(sub, rel / name) for name, sub in node.subdirs.items()]
    return sorted(diffs)


def commands_for(name: str, long_on_real: bool = False) -> list[tuple[str, ...]]:
    return [c for c in COMMANDS if long_on_real or c != LONG_CHAIN or name not in REAL_TREES]


def compare(before: Path, after: Path, names: list[str], count: int, log=print,
            long_on_real: bool = False) -> list[str]:
    differences: list[str] = []
    with tempfile.TemporaryDirectory(prefix="vllmlint-identity-") as tmp:
        work = Path(tmp)
        for name, tree in trees(work, names, count):
            for args in commands_for(name, long_on_real):
                old, new = run(before, tree, args), run(after, tree, args)
                what = f"{name}: vllmlint {' '.join(args)}"
                if old != new:
                    part = "exit status" if old[0] != new[0] else "stdout" if old[1] != new[1] else "stderr"
                    index = 0 if part == "exit status" else 1 if part == "stdout" else 2
                    excerpt = "".join(list(difflib.unified_diff(str(old[index]).splitlines(True),
                                                                str(new[index]).splitlines(True), n=1))[2:14])
                    differences.append(f"{what}: {part} differs\n{excerpt}")
                log(f"{what}: {'same' if old == new else 'DIFFERENT'}")
            if name in ("gen", "gen2"):
                copies = []
                for side, src in (("before", before), ("after", after)):
                    copy = work / f"{name}-{side}"
                    shutil.copytree(tree, copy)
                    copies.append((copy, run(src, copy, WRITING)))
                (a, ra), (b, rb) = copies
                changed = same_tree(a, b)
                what = f"{name}: files written by vllmlint {' '.join(WRITING)}"
                if changed or ra != rb:
                    differences.append(f"{what}: {len(changed)} file(s) differ {changed[:5]}"
                                       + ("" if ra == rb else "; its output differs"))
                log(f"{what}: {'same' if not changed and ra == rb else 'DIFFERENT'}")
    return differences


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the commit whose outputs are the reference")
    ap.add_argument("--trees", default="fixtures,gen,gen2,corpus,redteam")
    ap.add_argument("--count", type=int, default=8, help="files a kind in the generated corpora")
    ap.add_argument("--all-on-real", action="store_true", help="also the 24-step migrate on ../shared's trees")
    opts = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vllmlint-before-") as src:
        before = export(opts.before, Path(src))
        differences = compare(before, ROOT, opts.trees.split(","), opts.count,
                              log=lambda line: print(line, file=sys.stderr), long_on_real=opts.all_on_real)
    for line in differences:
        print(line)
    print(f"{len(differences)} difference(s) against {opts.before}")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
