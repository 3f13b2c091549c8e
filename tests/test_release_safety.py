"""Over the real trees (../shared/corpus, ../shared/redteam), on temporary copies: after
`check --fix`, and after `migrate --to 0.30.0`, no launch whose release is known has lost a flag
or an environment variable that this release still reads. (After migrate, "this release" is the
one the launch runs once the edits are made: a tag or pin migrate could not bump keeps the old
release, and then nothing it reads may go.) Skips when ../shared is absent.
"""
from __future__ import annotations

import os
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main
from vllmlint.knowledge.catalogue import for_target, normalize, release_for
from vllmlint.lint.discovery import discover
from vllmlint.lint.project import load

SHARED = Path(__file__).resolve().parents[2] / "shared"
TREES = ([SHARED / "corpus"] if (SHARED / "corpus").is_dir() else []) + \
    (sorted(p for p in (SHARED / "redteam").glob("*") if p.is_dir()) if (SHARED / "redteam").is_dir() else [])
pytestmark = pytest.mark.skipif(not TREES, reason="../shared is not here")


def launch_names(root: Path) -> dict[tuple, list]:
    """(file, context, kind) -> per launch: (release, flag names, env names)."""
    old = Path.cwd()
    os.chdir(root)
    try:
        candidates, _ = discover(["."])
        project = load(candidates)
    finally:
        os.chdir(old)
    out: dict[tuple, list] = defaultdict(list)
    for launch in project.launches:
        flags = {normalize(a.value.split("=", 1)[0]) for a in launch.options if a.value.startswith("--")}
        env = {e.name for e in launch.env}
        out[(launch.file.display, launch.context, launch.kind)].append((launch.release, flags, env))
    return out


def reads(release, flag: str | None = None, env: str | None = None) -> bool:
    """The catalogued release `release` reads the flag / variable (False outside the catalogue)."""
    if release is None or release_for(release) is None:
        return False
    cat = for_target(release)
    if flag is not None:
        return cat.flag(flag) is not None
    return cat.reads_env(env)


def harmful_removals(before: dict, after: dict) -> list[str]:
    found = []
    for key, launches in before.items():
        now = after.get(key, [])
        if len(now) != len(launches):
            continue            # a launch split or merged: not comparable one to one (none in these trees)
        for (release, flags, env), (release_after, flags_after, env_after) in zip(launches, now):
            runs = release_after if release_after is not None else release
            if release is None and release_after is None:
                continue
            for flag in sorted(flags - flags_after):
                if reads(runs, flag=flag):
                    found.append(f"{key[0]} ({key[1]}): {flag} removed, vLLM {runs} reads it")
            for name in sorted(env - env_after):
                if reads(runs, env=name):
                    found.append(f"{key[0]} ({key[1]}): {name} removed, vLLM {runs} reads it")
    return found


@pytest.mark.parametrize("tree", TREES, ids=[t.name for t in TREES])
@pytest.mark.parametrize("command", [["check", "--fix"], ["migrate", "--to", "0.30.0"]],
                         ids=["check-fix", "migrate-0.30.0"])
def test_no_known_release_loses_what_it_reads(tree, command, tmp_path):
    work = tmp_path / "tree"
    shutil.copytree(tree, work, symlinks=True)
    before = launch_names(work)
    old = Path.cwd()
    os.chdir(work)
    try:
        CliRunner().invoke(main, command + ["."], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert harmful_removals(before, launch_names(work)) == []
