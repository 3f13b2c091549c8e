"""A migrate chain that does less work per step (issue 34, item 3) changes no byte a user sees.

`VLLMLINT_MIGRATE=full` runs the chain as it ran before (lint.migrate.incremental): every rule
builds every fix, unsafe ones included, and every edited file is parsed back by the pure-Python
YAML loader, with no answer kept from one pass or step to the next. That path is the reference
here: `migrate --diff` (stdout, stderr and exit code), its `--report` and the files a real
`migrate` writes on a copy must be byte-identical to the default path, on the fixtures, both
generated corpora (bench/), the shared corpus and ../shared/redteam (skipped where ../shared is
absent), for a long chain (--from 0.8.0, every catalogued step: each changes files on the
generated corpora) and for a one-step migrate. A golden file was not chosen: it would go stale
with every message a rule change rewords.
"""
from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compared_trees import HELM_SCHEMA_NOTE, SHARED, generate_corpora, trees  # noqa: E402

CHAINS = [("--from", "0.8.0", "--to", "0.33.0"), ("--to", "0.30.0")]


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    return generate_corpora(tmp_path_factory.mktemp("corpora"), 6)


def run(mode: str, cwd: Path, args: tuple[str, ...]) -> tuple[int, str, str]:
    env = dict(os.environ, NO_COLOR="1")
    env.pop("VLLMLINT_MIGRATE", None)
    if mode == "full":
        env["VLLMLINT_MIGRATE"] = "full"
    proc = subprocess.run([sys.executable, "-m", "vllmlint.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd)
    return proc.returncode, proc.stdout, HELM_SCHEMA_NOTE.sub(r"\1", proc.stderr)


@pytest.mark.parametrize("chain", CHAINS, ids=lambda c: " ".join(c))
def test_diff_and_report_are_the_same_bytes(generated, tmp_path, chain):
    for name, tree in trees(generated):
        answers = {}
        for mode in ("full", "incremental"):
            report = tmp_path / f"{name}-{mode}.md"
            code, out, err = run(mode, tree, ("migrate", *chain, "--diff", "--report", str(report), "."))
            answers[mode] = (code, out, err.replace(str(report), "REPORT"), report.read_text())
        assert answers["full"] == answers["incremental"], f"{name}: migrate {' '.join(chain)} --diff differs"
        assert answers["full"][1].strip(), f"{name}: nothing to change (the test would prove nothing)"


def _differences(a: Path, b: Path) -> list[str]:
    cmp = filecmp.dircmp(a, b)
    out: list[str] = []

    def walk(c, here: str) -> None:
        out.extend(f"{here}{n}" for n in c.left_only + c.right_only + c.funny_files)
        _, mismatch, errors = filecmp.cmpfiles(c.left, c.right, c.common_files, shallow=False)
        out.extend(f"{here}{n}" for n in mismatch + errors)
        for sub, sc in c.subdirs.items():
            walk(sc, f"{here}{sub}/")

    walk(cmp, "")
    return out


def test_written_files_are_the_same_bytes(generated, tmp_path):
    """A real migrate (it writes) on two copies of each tree, one per path: the same files, the
    same bytes, the same output."""
    for name, tree in trees(generated):
        copies = {}
        for mode in ("full", "incremental"):
            copy = tmp_path / mode / name
            shutil.copytree(tree, copy, symlinks=True)
            os.chmod(copy, 0o755)          # ../shared is read-only, and so its copy (migrate then writes nothing)
            for here, dirs, files in os.walk(copy):
                for n in dirs + files:
                    if not os.path.islink(os.path.join(here, n)):
                        os.chmod(os.path.join(here, n), 0o755 if n in dirs else 0o644)
            copies[mode] = (copy, run(mode, copy, ("migrate", "--from", "0.8.0", "--to", "0.33.0", ".")))
        assert copies["full"][1] == copies["incremental"][1], f"{name}: migrate's output differs"
        assert not _differences(copies["full"][0], copies["incremental"][0]), \
            f"{name}: written files differ: {_differences(copies['full'][0], copies['incremental'][0])[:5]}"
        assert _differences(tree, copies["full"][0]), f"{name}: migrate wrote nothing (the test would prove nothing)"


def test_shared_trees_are_migrated_when_present(generated):
    names = {name for name, _ in trees(generated)}
    if not SHARED.is_dir():
        pytest.skip("../shared is not here")
    assert {"corpus", "redteam"} <= names
