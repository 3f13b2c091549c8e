"""Per-launch rules in the parse workers (issue 34, item 4) change no byte a user sees.

With one process (VLLMLINT_JOBS=1) every rule runs in the main process on the whole project:
the path as it was before the rules moved, so it is the "before" of this test; with two, the
workers that parse a chunk of files also run the per_launch rules (VL301, VL302, VL305) on it
and send their findings back. Every output format of `check`, `check --fix --diff` and
`launches` must be byte-identical on the fixtures, both generated corpora (bench/), the shared
corpus and ../shared/redteam (skipped where ../shared is absent). A golden file of today's
outputs was not chosen: it would go stale with every message a rule change rewords.

The redteam tree as a whole has Helm charts, where the rules stay in the main process (a chart
renders files after parsing); its chart-free repository is checked on its own so that the
worker path runs on real files too. test_rules_ran_in_the_workers shows that it does.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compared_trees import HELM_SCHEMA_NOTE, SHARED, generate_corpora, trees  # noqa: E402

# also redteam's chart-free repository alone, where the worker path runs
OPEA = (("redteam-opea", SHARED / "redteam" / "opea-project__GenAIExamples"),)

COMMANDS = [("check", "--format", fmt, ".") for fmt in ("text", "json", "sarif", "github", "gitlab")] \
    + [("migrate", "--to", "0.30.0", "--diff", "."), ("launches", ".")]
# The fixes go through `migrate`: `check --fix` on the generated corpora now writes nothing (their
# launches run 0.29 or name no release, so their fixes wait for `migrate`, issue 29), which would
# leave the fix output's byte identity untested.


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    return generate_corpora(tmp_path_factory.mktemp("corpora"), 8)


def run(jobs: int, cwd: Path, args: tuple[str, ...]) -> tuple[int, str, str]:
    env = dict(os.environ, VLLMLINT_JOBS=str(jobs), NO_COLOR="1")
    proc = subprocess.run([sys.executable, "-m", "vllmlint.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd)
    return proc.returncode, proc.stdout, HELM_SCHEMA_NOTE.sub(r"\1", proc.stderr)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:-1]))
def test_one_and_two_workers_write_the_same_bytes(generated, args):
    for name, tree in trees(generated, OPEA):
        one, two = run(1, tree, args), run(2, tree, args)
        assert one == two, f"{name}: {' '.join(args)} differs with two workers"
        assert one[1].strip(), f"{name}: nothing written"


def test_shared_trees_are_checked_when_present(generated):
    names = {name for name, _ in trees(generated, OPEA)}
    if not SHARED.is_dir():
        pytest.skip("../shared is not here")
    assert {"corpus", "redteam", "redteam-opea"} <= names


def test_rules_ran_in_the_workers(generated, monkeypatch):
    """Not vacuous: with two workers the per_launch rules' findings come back from them."""
    from vllmlint.lint import engine, project
    from vllmlint.lint.discovery import discover
    from vllmlint.lint.registry import load_rules

    monkeypatch.setenv("VLLMLINT_JOBS", "2")
    rules = [cls((0, 30, 0)) for cls in load_rules().values() if cls.applies_to((0, 30, 0))]
    local = sorted(r.code for r in rules if r.per_launch)
    assert local == ["VL301", "VL302", "VL305"]
    candidates, _ = discover([str(generated["gen2"])])
    seen = {}
    real = engine.run_rules

    def spy(proj, rs, unsafe=False):
        seen.update({code: len(found) for (code, _), found in proj.from_workers.items()})
        return real(proj, rs, unsafe)

    monkeypatch.setattr(engine, "run_rules", spy)
    engine.check_and_fix(candidates, rules, fix=False)
    assert sorted(seen) == local and seen["VL302"] > 0


def test_no_worker_rules_with_one_process(generated, monkeypatch):
    from vllmlint.lint import project
    from vllmlint.lint.discovery import discover
    from vllmlint.lint.registry import load_rules

    monkeypatch.setenv("VLLMLINT_JOBS", "1")
    rules = [cls((0, 30, 0)) for cls in load_rules().values() if cls.applies_to((0, 30, 0))]
    candidates, _ = discover([str(generated["gen2"])])
    assert project.load(candidates, rules=rules).from_workers == {}
