"""VL302's speculative folds checked with one re-parse per file (speculative_fixes) give exactly
the fixes of the per-launch check (speculative_fix), on files with many such launches:
bench/gen_corpus2.py's multi-document k8s files, compose stacks and scripts, and the fixtures."""
from __future__ import annotations

import sys
from pathlib import Path

from vllmlint.lint.discovery import discover
from vllmlint.lint.project import load

from vllmlint.rules.vl302_removed_or_renamed_flag import SPECULATIVE, speculative_fix, speculative_fixes

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import gen_corpus2  # noqa: E402

TARGET = (0, 30, 0)


def edits_of(fix):
    return None if fix is None else [(e.file.display, e.start, e.end, e.text) for e in fix.edits]


def test_one_reparse_per_file_gives_the_per_launch_fixes(tmp_path):
    gen_corpus2.generate(tmp_path / "gen2", {"k8s": 12, "compose": 12, "docker": 6, "sh": 6, "py": 6})
    candidates, _ = discover([str(tmp_path / "gen2"), str(ROOT / "fixtures" / "VL302")])
    project = load(candidates)
    launches = [l for l in project.launches
                if any(a.value.split("=", 1)[0].replace("_", "-") in SPECULATIVE for a in l.argv)]
    per_file = {}
    for l in launches:
        per_file.setdefault(l.file.display, []).append(l)
    assert max(len(v) for v in per_file.values()) >= 3         # files with several such launches
    together = speculative_fixes(launches, TARGET)
    alone = {id(l): speculative_fix(l, TARGET) for l in launches}
    assert sum(f is not None for f in alone.values()) >= 10
    for l in launches:
        assert edits_of(together[id(l)]) == edits_of(alone[id(l)]), l.file.display


def test_a_run_that_only_counts_the_folds_counts_those_that_read_back(tmp_path):
    """`check` without --unsafe-fixes counts the folds it plans without reading them back
    (UNSAFE_FIXES_COUNTED_ONLY): on these trees every planned fold reads back, so the count is
    the one a read-back gives (a fold written above its launch, in a shell array, included)."""
    from vllmlint.rules.vl302_removed_or_renamed_flag import speculative_plans

    gen_corpus2.generate(tmp_path / "gen2", {"k8s": 6, "compose": 6, "docker": 6, "sh": 12, "py": 6})
    candidates, _ = discover([str(tmp_path / "gen2"), str(ROOT / "fixtures" / "VL302")])
    launches = [l for l in load(candidates).launches
                if any(a.value.split("=", 1)[0].replace("_", "-") in SPECULATIVE for a in l.argv)]
    planned, read_back = speculative_plans(launches, TARGET), speculative_fixes(launches, TARGET)
    assert sum(f is not None for f in read_back.values()) >= 10
    assert {k for k, f in planned.items() if f} == {k for k, f in read_back.items() if f}
    for l in launches:          # the plan is the first edit set, the one that reads back here
        assert edits_of(planned[id(l)]) == edits_of(read_back[id(l)]), l.file.display
