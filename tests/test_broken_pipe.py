"""`vllmlint ... | head -1`: when the reader of the output goes away, every command stops quietly
with exit code 1 (vllmlint.entry) - no traceback, no "Exception ignored" at interpreter exit -
whether the pipe breaks in the fast `check` path, under click, or at the last flush."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "fixtures" / "demo"

COMMANDS = [
    ["check", "."],                                   # the fast path (no click)
    ["check", "--show-details", "--statistics", "."],
    ["check", "--format", "json", "."],               # click
    ["check", "--diff", "."],
    ["migrate", "--to", "0.30.0", "--diff", "."],
    ["launches", "."],
    ["rule", "VL001"],
    ["--help"],
]


def run_into_closed_pipe(args: list[str], cwd: Path, stderr_too: bool = False) -> tuple[int, str]:
    """`vllmlint ARGS` whose stdout (and with `stderr_too` its stderr) is a pipe nobody reads
    any more: its reading end is closed before the command starts."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "vllmlint", *args], cwd=cwd, stdout=write,
                              stderr=write if stderr_too else subprocess.PIPE, timeout=120)
    finally:
        os.close(write)
    return done.returncode, (done.stderr or b"").decode()


@pytest.fixture
def demo(tmp_path):
    shutil.copytree(DEMO, tmp_path / "demo")
    return tmp_path / "demo"


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_closed_stdout_exits_quietly(args, demo):
    code, err = run_into_closed_pipe(args, demo)
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    assert code == 1


def test_closed_stdout_and_stderr_exit_quietly(demo):
    code, _ = run_into_closed_pipe(["migrate", "--to", "0.30.0", "--diff", "."], demo, stderr_too=True)
    assert code == 1            # 120 when the interpreter's last flush fails


def test_head_one(tmp_path):
    """`vllmlint check . | head -1`: the first line arrives, then the reader closes the pipe
    while vllmlint still writes (more than the pipe holds)."""
    for i in range(40):
        (tmp_path / f"s{i}.sh").write_text(
            f"#!/bin/sh\nexport VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nvllm serve m{i} --port 8000\n")
    proc = subprocess.Popen([sys.executable, "-m", "vllmlint", "check", "--show-details", "."], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        import fcntl

        fcntl.fcntl(proc.stdout.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)   # Linux: a small pipe
    except (ImportError, OSError):
        pass
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert first.startswith(b"s") and b"VL" in first
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err
    assert code == 1
