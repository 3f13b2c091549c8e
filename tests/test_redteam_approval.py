"""Approval tests over ../shared/redteam (issue 29): every edit `migrate` and `check --fix` make
on eight real repositories' vLLM config trees was read by a person and recorded in
tests/data/redteam_approved_hunks.json (file, line, old -> new, verdict, one-line reason). A
hunk not in that list fails until someone reads it and records it; a hunk recorded `harmful`
fails always. Then: every file those runs change parses back in its own language.

A hunk is one run of changed lines of a unified diff: (file, first old line, old lines, new
lines). The list is matched on (file, old, new): a line number that moved does not need a new
reading. Each repository is copied once to a temporary folder and each command runs once on
it. Skipped when ../shared is absent (as the corpus tests are)."""
from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SHARED = Path(__file__).resolve().parents[2] / "shared"        # as tests/test_corpus.py
REDTEAM = SHARED / "redteam"
CORPUS = SHARED / "corpus" / "files"
APPROVED = Path(__file__).parent / "data" / "redteam_approved_hunks.json"
COMMANDS = {
    "m30": ["migrate", "--to", "0.30.0", "--diff", "."],
    "m33": ["migrate", "--to", "0.33.0", "--diff", "."],
    "fix": ["check", "--fix", "--diff", "."],
}

pytestmark = pytest.mark.skipif(not REDTEAM.is_dir(), reason="../shared/redteam is not here")


def hunks(diff: str) -> list[tuple[str, int, str, str]]:
    """(file, first old line, old lines, new lines) of each run of changed lines."""
    out = []
    current = None
    lines = diff.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("+++ "):
            current = line[4:].split("\t")[0]
            current = current[2:] if current.startswith("b/") else current
        elif line.startswith("@@") and current is not None:
            number = int(re.match(r"@@ -(\d+)", line).group(1))
            i += 1
            olds, news, start = [], [], None
            while i < len(lines) and not lines[i].startswith(("@@", "--- ")):
                text = lines[i]
                if text.startswith("-"):
                    start = number if start is None else start
                    olds.append(text[1:])
                    number += 1
                elif text.startswith("+"):
                    start = number if start is None else start
                    news.append(text[1:])
                else:
                    if olds or news:
                        out.append((current, start, "\n".join(olds), "\n".join(news)))
                        olds, news, start = [], [], None
                    number += 1
                i += 1
            if olds or news:
                out.append((current, start, "\n".join(olds), "\n".join(news)))
            continue
        i += 1
    return out


def _vllmlint(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vllmlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900)


def _repos() -> list[str]:
    return sorted(p.name for p in REDTEAM.iterdir() if p.is_dir() and "__" in p.name) if REDTEAM.is_dir() else []


@pytest.fixture(scope="module")
def approved() -> dict:
    return json.loads(APPROVED.read_text())


@pytest.mark.parametrize("repo", _repos())
def test_every_hunk_is_approved(repo, approved, tmp_path):
    copy = tmp_path / repo
    shutil.copytree(REDTEAM / repo, copy)
    unread, harmful = [], []
    for name, args in COMMANDS.items():
        done = _vllmlint(args, copy)
        assert done.returncode in (0, 1, 2), done.stderr[-2000:]
        assert "Traceback" not in done.stderr, done.stderr[-2000:]
        known = {(h["file"], h["old"], h["new"]): h for h in approved.get(repo, {}).get(name, [])}
        for file, line, old, new in hunks(done.stdout):
            entry = known.get((file, old, new))
            if entry is None:
                unread.append(f"{name} {file}:{line}: {old.strip()[:80]!r} -> {new.strip()[:80]!r}")
            elif entry["verdict"] == "harmful":
                harmful.append(f"{name} {file}:{line}: {entry['reason']}")
    assert not harmful, "harmful hunks:\n" + "\n".join(harmful)
    assert not unread, ("hunks nobody has read (read each, then record it in "
                        f"{APPROVED.name} with a verdict and a reason):\n" + "\n".join(unread))


def test_the_approved_list_holds_no_harmful_hunk_and_a_reason_for_each(approved):
    for repo, commands in approved.items():
        for name, entries in commands.items():
            for h in entries:
                assert h["verdict"] in ("correct", "questionable"), (repo, name, h)
                assert h["reason"].strip(), (repo, name, h)


# --------------------------------------------------------------------------------------------
# every file an edit changes parses back in its own language (issue 29)
# --------------------------------------------------------------------------------------------
def _parse_error(path: Path, before: str, after: str) -> str | None:
    """Why `after` does not parse where `before` did (None: it parses, or neither did)."""
    def check(text: str) -> str | None:
        name = path.name.lower()
        try:
            if name.endswith(".json"):
                json.loads(text)
            elif name.endswith((".yaml", ".yml")):
                list(yaml.safe_load_all(text))
            elif name.endswith(".py"):
                ast.parse(text)
            elif name.endswith((".sh", ".bash")) or text.startswith("#!/bin/bash") or text.startswith("#!/bin/sh"):
                bash = shutil.which("bash")
                if bash:
                    done = subprocess.run([bash, "-n"], input=text, capture_output=True, text=True, timeout=30)
                    if done.returncode:
                        return done.stderr.strip()
        except Exception as err:      # noqa: BLE001 - any parser's complaint
            return f"{type(err).__name__}: {err}"
        return None
    if check(before) is not None:
        return None
    return check(after)


def _snapshot(root: Path) -> dict[Path, str]:
    out = {}
    for path in root.rglob("*"):
        if path.is_file():
            try:
                out[path] = path.read_text()
            except (UnicodeDecodeError, OSError):
                pass
    return out


def _trees() -> list[Path]:
    trees = [REDTEAM / r for r in _repos()]
    if CORPUS.is_dir():
        trees.append(CORPUS)
    return trees


@pytest.mark.parametrize("tree", _trees(), ids=lambda p: p.name)
@pytest.mark.parametrize("args", [["check", "--fix", "."], ["migrate", "--to", "0.30.0", "."]], ids=["fix", "migrate"])
def test_every_changed_file_parses_back(tree, args, tmp_path):
    copy = tmp_path / tree.name
    shutil.copytree(tree, copy)
    before = _snapshot(copy)
    done = _vllmlint(args, copy)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    broken = []
    for path, text in before.items():
        after = path.read_text()
        if after != text:
            why = _parse_error(path, text, after)
            if why:
                broken.append(f"{path.relative_to(copy)}: {why}")
    assert not broken, "edited files that no longer parse:\n" + "\n".join(broken)
