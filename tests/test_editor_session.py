"""The editor's suppression comment on every fixture finding: offered, placed where the file
keeps its meaning, and it hides that finding (and, by the directive's nature, the same code on
the same line, or in the file for `disable-file`) and nothing else."""
from __future__ import annotations

import collections
from pathlib import Path

import pytest

from vllmlint.editor.session import Workspace, suppress_edit
from vllmlint.lint.engine import apply_edits

ROOT = Path(__file__).resolve().parents[1]
CASES = sorted(p.parent for p in (ROOT / "fixtures").glob("VL*/*/input"))


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_suppress_with_reason_on_every_fixture_finding(case):
    root = (case / "input").resolve()
    run = Workspace(root).check({})
    before = collections.Counter((p, f.code, f.line_col[0]) for p, fs in run.findings.items() for f in fs)
    for path, findings in run.findings.items():
        for f in findings:
            placed = suppress_edit(f)
            if f.code == "VL900":
                assert placed is None          # its own fix removes the unused comment
                continue
            if f.file.path.suffix == ".json":
                assert placed is None          # JSON holds no comment: per-file-ignores in the settings
                continue
            assert placed is not None, f"{f.code} at {f.file.display}:{f.line_col}: no place for a suppression"
            edit, where = placed
            assert edit.text.lstrip().startswith("# vllmlint: disable")
            assert " -- TODO: say why" in edit.text
            new = apply_edits(f.file.text, [edit])
            after_run = Workspace(root).check({path: new})
            assert after_run.problems == run.problems
            shift = 1 if where in ("line above", "whole file") else 0
            after = collections.Counter()
            for p, fs in after_run.findings.items():
                for g in fs:
                    line = g.line_col[0]
                    if p == path and line > edit.file.line_col(edit.start)[0] - (0 if shift else 1):
                        line -= shift      # lines below an inserted comment line moved down by one
                    after[(p, g.code, line)] += 1
            gone = before - after
            assert after - before == collections.Counter(), "a suppression added a finding"
            assert gone[(path, f.code, f.line_col[0])] >= 1
            for (p, code, line), _ in gone.items():
                assert p == path and code == f.code and (where == "whole file" or line == f.line_col[0])
