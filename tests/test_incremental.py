"""`--fix` and `migrate` re-parse only the files an edit changed (lint.project.ParseCache)."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from vllmlint.cli import main
from vllmlint.lint import engine, project

ROOT = Path(__file__).resolve().parents[1]


def count_parses(monkeypatch) -> Counter:
    parses: Counter = Counter()
    real = project.parse_source

    def counting(source):
        parses[source.display] += 1
        return real(source)

    monkeypatch.setattr(project, "parse_source", counting)
    monkeypatch.setattr(engine, "parse_source", counting)
    return parses


def test_fix_parses_each_unchanged_file_once(tmp_path, monkeypatch):
    tree = tmp_path / "demo"
    shutil.copytree(ROOT / "fixtures" / "demo", tree)
    monkeypatch.chdir(tree)
    parses = count_parses(monkeypatch)
    result = CliRunner().invoke(main, ["check", "--fix", "."], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    changed = {p for p in parses if (tree / p).read_bytes() != (ROOT / "fixtures" / "demo" / p).read_bytes()}
    assert changed, "the demo has fixes: the test must see a changed file"
    # an unchanged file is parsed once; a changed one once, plus once per pass that edited it
    assert all(n == 1 for p, n in parses.items() if p not in changed), parses
    assert all(n <= 1 + engine.MAX_PASSES for n in parses.values()), parses


def test_migrate_chain_parses_unchanged_files_once(tmp_path, monkeypatch):
    tree = tmp_path / "chain"
    shutil.copytree(ROOT / "fixtures" / "demo", tree)
    (tree / "clean").mkdir()         # a launch no step changes
    (tree / "clean" / "compose.yaml").write_text(
        "services:\n  engine:\n    image: vllm/vllm-openai:latest\n    command: [\"--model\", \"m\", \"--port\", \"8000\"]\n")
    monkeypatch.chdir(tree)
    parses = count_parses(monkeypatch)
    result = CliRunner().invoke(main, ["migrate", "--from", "0.8.0", "--to", "0.33.0", "--diff", "."],
                                catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    diffed = {line[6:] for line in result.output.splitlines() if line.startswith("+++ b/")}
    untouched = [p for p in parses if not any(d.endswith(p) for d in diffed)]
    assert "clean/compose.yaml" in untouched, parses
    assert all(parses[p] == 1 for p in untouched), parses
