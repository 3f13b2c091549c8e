"""Shapes users met on real repositories (2026-12-05, fourth stop), each with its neighbours:
what crashed, what was reported in the wrong place, and what was judged by the wrong table."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main


def _run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


HELPER = "def build():\n    out = []\n    out.append('x')\n    return out\n"


@pytest.mark.parametrize("tail, launches", [
    ("", 0),                                                   # no call: nothing to read
    ("import subprocess\nsubprocess.run(build())\n", 0),      # a call: which definition is not ours to guess
    ("def build():\n    return ['vllm', 'serve', 'm']\n", 1),  # an argv literal is read where written
])
def test_a_function_defined_twice_is_read(tmp_path, tail, launches):
    """coder-cong/PesticideRecipeGen: a notebook-style script defining the same function twice,
    each returning a list it built, made every command exit 2 ("nested too deeply to read"):
    two equal argv chains were compared field by field through their scopes, without end."""
    _tree(tmp_path, {"client.py": "# talks to vllm\n" + HELPER + HELPER + tail})
    result = _run("launches", ".")
    assert result.exit_code == 0, result.output
    assert "could not be read" not in result.output
    assert len(result.output.splitlines()) == launches
