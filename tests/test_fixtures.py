"""Every fixture case of every rule, through one parametrized test.

fixtures/<CODE>/<case>/
    input/        the tree to check (any file kinds)
    expected.txt  one finding a line: `path:line:col: CODE` (+ ` fixable` when it has a fix)
    fixed/        the expected bytes of each file `--fix` changes (absent: nothing changes)
    args.txt      optional extra command-line arguments (e.g. --target-version 0.29.0)
"""
from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CASES = sorted(p for p in FIXTURES.glob("VL*/*") if (p / "input").is_dir())


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run(args: list[str]):
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_fixture(case: Path, tmp_path: Path, monkeypatch):
    code = case.parent.name
    work = tmp_path / "tree"
    shutil.copytree(case / "input", work, symlinks=True)
    extra = shlex.split((case / "args.txt").read_text()) if (case / "args.txt").exists() else []
    monkeypatch.chdir(work)
    before = snapshot(work)

    result = run(["check", "--format", "json", "--select", code, *extra, "."])
    assert result.exit_code in (0, 1), result.output
    found = [f"{f['path']}:{f['line']}:{f['column']}: {f['code']}" + (" fixable" if f["fixable"] else "")
             for f in json.loads(result.stdout)]
    expected = [l.strip() for l in (case / "expected.txt").read_text().splitlines() if l.strip()]
    assert found == expected
    assert result.exit_code == (1 if expected else 0)
    assert snapshot(work) == before, "check must not write"

    fixed = run(["check", "--fix", "--select", code, *extra, "."])
    assert fixed.exit_code in (0, 1), fixed.output
    want = dict(before)
    if (case / "fixed").is_dir():
        want.update(snapshot(case / "fixed"))
    after = snapshot(work)
    for name in want:
        assert after[name] == want[name], f"{name} after --fix"
    assert set(after) == set(want)

    again = run(["check", "--fix", "--select", code, *extra, "."])
    assert snapshot(work) == after, "a second --fix must change nothing"
    remaining = json.loads(run(["check", "--format", "json", "--select", code, *extra, "."]).stdout)
    assert not [f for f in remaining if f["fixable"]], "every fixable finding is gone after --fix"
    assert again.exit_code == (1 if remaining else 0)
