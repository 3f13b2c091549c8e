"""`--diff` prints a patch that real tools apply: `git apply` and GNU `patch -p1` take what
`migrate --diff` and `check --fix --diff` print and write exactly the bytes the writing command
writes - for files without a final newline (`\\ No newline at end of file`), CRLF, a BOM, and
lines holding a form feed, U+2028 or an escape sequence (none of which ends a line for git)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllmlint.lint.report import NO_NEWLINE, unified_diff

ENV_LINE = "export VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1"

FILES = {
    # no final newline, changed on the last line
    "last.sh": f"#!/bin/sh\n{ENV_LINE}\nvllm serve m --port 8000",
    # no final newline, changed elsewhere (the last line is context)
    "elsewhere.sh": f"#!/bin/sh\n{ENV_LINE}\nvllm serve m --port 8000\n# end",
    # a final newline: no marker
    "newline.sh": f"#!/bin/sh\n{ENV_LINE}\nvllm serve m --port 8000\n",
    # BOM and CRLF, no final newline (the BOM is in the first line, as on disk)
    "bom_crlf.sh": f"\ufeff#!/bin/sh\r\n{ENV_LINE}\r\nvllm serve m --port 8000",
    "crlf.sh": f"#!/bin/sh\r\n{ENV_LINE}\r\nvllm serve m --port 8000\r\n",
    # characters str.splitlines cuts at (git does not) and an escape sequence click.echo drops
    "odd.sh": f"#!/bin/sh\n# \x1b[31mred\x1b[0m \x0c feed \u2028 sep \x85 nel\n{ENV_LINE}\nvllm serve m --port 8000",
    # migrate only (image tag): the removed last line has no newline
    "Dockerfile": 'FROM vllm/vllm-openai:v0.29.0\nCMD ["m", "--port", "8000"]\nENV VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1',
    "k8s.yaml": ("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n"
                 "      containers:\n        - name: vllm\n          image: vllm/vllm-openai:v0.29.0\n"
                 "          args: [--model, m]\n          env:\n            - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS\n"
                 '              value: "1"'),
}

COMMANDS = {
    "check-fix": ["check", "--fix", "."],
    "migrate": ["migrate", "--to", "0.30.0", "."],
}

needs_tools = pytest.mark.skipif(not (shutil.which("git") and shutil.which("patch")),
                                 reason="needs git and GNU patch")


def write_tree(root: Path) -> None:
    root.mkdir()
    (root / ".vllmlint.toml").write_text('target-version = "0.30.0"\n')
    for name, text in FILES.items():
        (root / name).write_bytes(text.encode("utf-8"))


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def vllmlint(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vllmlint", *args], cwd=cwd, capture_output=True,
                          env=dict(os.environ, PYTHONIOENCODING="utf-8"))


def tool(args: list[str], cwd: Path) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def apply_everywhere(patch: bytes, tmp_path: Path, expected: dict[str, bytes]) -> None:
    """`patch` checked and applied by git apply and by GNU patch, each on a fresh copy of the
    tree, both giving `expected` byte for byte."""
    (tmp_path / "fix.patch").write_bytes(patch)
    for name, check, apply in (
            ("git", ["git", "apply", "--check", "../fix.patch"], ["git", "apply", "../fix.patch"]),
            ("patch", ["patch", "-p1", "--dry-run", "-i", "../fix.patch"],
             ["patch", "-p1", "--no-backup-if-mismatch", "-i", "../fix.patch"])):
        copy = tmp_path / f"by-{name}"
        write_tree(copy)
        tool(check, copy)
        said = tool(apply, copy)
        assert "fuzz" not in said and "offset" not in said.lower(), said
        assert snapshot(copy) == expected, name


@needs_tools
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_diff_applies_to_what_writing_writes(tmp_path, command):
    args = COMMANDS[command]
    written = tmp_path / "written"
    write_tree(written)
    before = snapshot(written)
    vllmlint(args, written)
    expected = snapshot(written)
    changed = {name for name in expected if expected[name] != before[name]}
    assert {"last.sh", "elsewhere.sh", "bom_crlf.sh", "odd.sh"} <= changed, changed

    shown = tmp_path / "shown"
    write_tree(shown)
    diff = vllmlint([*args[:-1], "--diff", "."], shown)
    assert snapshot(shown) == before                  # --diff writes nothing
    patch = diff.stdout
    assert patch.count(b"--- a/") == len(changed)
    assert b"\\ No newline at end of file\n" in patch
    assert b"\\ No newline at end of file\n--- a/" in patch or patch.endswith(b"\\ No newline at end of file\n")
    apply_everywhere(patch, tmp_path, expected)


def test_marker_after_each_side_that_lacks_the_newline():
    ends = unified_diff("f", "a\nb\nc", "a\nb\nC")
    assert ends.endswith(f"-c\n{NO_NEWLINE}+C\n{NO_NEWLINE}")
    context = unified_diff("f", "x\na\nb\nc", "X\na\nb\nc")
    assert context.endswith(f" c\n{NO_NEWLINE}") and context.count(NO_NEWLINE) == 1
    assert NO_NEWLINE not in unified_diff("f", "a\nb\n", "a\nB\n")


@needs_tools
@pytest.mark.parametrize("old, new", [
    ("a\nb\nc", "a\nb\nc\n"),             # the final newline added
    ("a\nb\nc\n", "a\nb\nc"),             # and removed
    ("a\r\nb\r\nc", "a\r\nB\r\nc\r\n"),
    ("a\nb\nc", "a\nb"),                  # the last line removed: the line before gains no newline
    ("one", "two"),
    ("x\n" * 10 + "y", "X\n" + "x\n" * 9 + "y"),
])
def test_newline_at_end_changes_apply(tmp_path, old, new):
    for name, cwd in (("git", tmp_path / "g"), ("patch", tmp_path / "p")):
        cwd.mkdir()
        (cwd / "f.txt").write_bytes(old.encode())
        (cwd / "fix.patch").write_text(unified_diff("f.txt", old, new), newline="")
        tool(["git", "apply", "fix.patch"] if name == "git" else ["patch", "-p1", "-i", "fix.patch"], cwd)
        assert (cwd / "f.txt").read_bytes() == new.encode(), name
    # what `diff -u` itself writes, headers aside
    d = tmp_path / "d"
    d.mkdir()
    (d / "old").write_bytes(old.encode())
    (d / "new").write_bytes(new.encode())
    ours = unified_diff("f.txt", old, new).split("\n", 2)[2]
    theirs = subprocess.run(["diff", "-u", "old", "new"], cwd=d, capture_output=True).stdout.decode().split("\n", 2)[2]
    assert ours == theirs
