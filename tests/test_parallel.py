"""Parsing in worker processes changes nothing a user sees: every output format is byte-identical
with one process and with two (VLLMLINT_JOBS forces the count; trees of PARALLEL_MIN_FILES files
and more get one worker per core by default)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def run(jobs: int, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, VLLMLINT_JOBS=str(jobs))
    return subprocess.run([sys.executable, "-m", "vllmlint.cli", *args], capture_output=True, text=True,
                          env=env, cwd=CORPUS)


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared corpus is not here")
@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_output_identical_with_one_and_two_workers(fmt):
    one, two = run(1, "check", "--format", fmt, "."), run(2, "check", "--format", fmt, ".")
    assert one.returncode == two.returncode
    assert one.stdout == two.stdout
    assert one.stdout.strip()


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared corpus is not here")
def test_diff_identical_with_one_and_two_workers():
    one, two = run(1, "check", "--diff", "."), run(2, "check", "--diff", ".")
    assert (one.returncode, one.stdout) == (two.returncode, two.stdout)


def test_workers_for_small_trees_is_one(monkeypatch):
    from vllmlint.lint import project

    monkeypatch.delenv("VLLMLINT_JOBS", raising=False)
    assert project.workers_for(10) == 1
    monkeypatch.setenv("VLLMLINT_JOBS", "3")
    assert project.workers_for(10) == 3
