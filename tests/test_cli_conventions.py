"""The command line users of ruff expect: summary, --statistics, -q, severity and --fail-level,
unknown codes, --diff's exit, --exit-non-zero-on-fix, stdin, nothing found, diff paths, rule docs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main

BAD_SCRIPT = "#!/bin/sh\nexport VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nvllm serve m --port 8000\n"
FIXED_SCRIPT = "#!/bin/sh\nvllm serve m --port 8000 --enable-scale-out\n"
# VL102's info finding alone: recompute with a bidirectional connector (fixtures/VL102)
ROOT = Path(__file__).resolve().parent.parent
INFO_ONLY = ROOT / "fixtures" / "VL102" / "recompute-with-bidirectional" / "input"


def invoke(*args: str, input: bytes | str | None = None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    (tmp_path / "launch.sh").write_text(BAD_SCRIPT)
    # the team's settings name the release the configs run: without it the release of launch.sh
    # is unknown and VL001's fix (a flag that exists from 0.30.0 on) is held back
    (tmp_path / ".vllmlint.toml").write_text('target-version = "0.30.0"\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_summary_line(tree):
    result = invoke("check", ".")
    assert result.exit_code == 1
    assert "Found 1 finding (1 fixable)." in result.stdout.splitlines()
    (tree / "launch.sh").write_text(FIXED_SCRIPT)
    clean = invoke("check", ".")
    assert clean.exit_code == 0 and clean.stdout.strip() == "All checks passed!"


def test_summary_after_fix(tree):
    result = invoke("check", "--fix", ".")
    assert result.exit_code == 0
    assert "Found 1 finding (1 fixed, 0 remaining)." in result.stdout


def test_machine_formats_carry_no_summary(tree):
    for fmt in ("json", "sarif", "gitlab"):
        json.loads(invoke("check", "--format", fmt, ".").stdout)       # the whole stdout is one document
    assert "Found" not in invoke("check", "--format", "github", ".").stdout


def test_quiet_prints_findings_only(tree):
    result = invoke("check", "-q", ".")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [result.stdout.splitlines()[0]]
    assert result.stdout.startswith("launch.sh:2:8: VL001")
    fixed = invoke("check", "--fix", "--quiet", ".")
    assert fixed.output == "" and fixed.exit_code == 0


def test_statistics(tree):
    (tree / "other.sh").write_text(BAD_SCRIPT)
    result = invoke("check", "--statistics", ".")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == ["2\tVL001\t[*] scale-out-env-removed (error)",
                                          "Found 2 findings (2 fixable).",
                                          "[*] 2 fixable with `vllmlint check --fix`."]
    rows = json.loads(invoke("check", "--statistics", "--format", "json", ".").stdout)
    assert rows == [{"code": "VL001", "name": "scale-out-env-removed", "severity": "error", "count": 2, "fixable": 2}]


def test_severity_in_text_output(tree):
    line = invoke("check", ".").stdout.splitlines()[0]
    assert line.startswith("launch.sh:2:8: VL001 error: VLLM_ENABLE_SCALE_OUT_ENDPOINTS") and line.endswith(" [*]")


def test_fail_level(tree, monkeypatch):
    monkeypatch.chdir(INFO_ONLY)
    info = invoke("check", "--format", "json", ".")
    assert [f["severity"] for f in json.loads(info.stdout)] == ["info"]
    assert info.exit_code == 0, "an info finding alone does not fail by default"
    assert invoke("check", "--fail-level", "info", ".").exit_code == 1
    monkeypatch.chdir(tree)
    assert invoke("check", "--fail-level", "error", ".").exit_code == 1
    (tree / ".vllmlint.toml").write_text('severity = {VL001 = "warning"}\n')
    assert invoke("check", "--fail-level", "error", ".").exit_code == 0
    assert invoke("check", ".").exit_code == 1
    (tree / ".vllmlint.toml").write_text('severity = {VL001 = "warning"}\nfail-level = "error"\n')
    assert invoke("check", ".").exit_code == 0
    assert invoke("check", "--fail-level", "banana", ".").exit_code == 2


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_unknown_code_is_a_usage_error(tree, option):
    for bad in ("VL9999", "XX", "VL001,NOPE"):
        result = CliRunner().invoke(main, ["check", option, bad, "."])
        assert result.exit_code == 2 and "unknown rule code or prefix" in result.output
    assert invoke("check", option, "VL0", ".").exit_code in (0, 1)
    assert invoke("check", option, "vl001", ".").exit_code in (0, 1)


def test_diff_exits_1_when_fixes_pending(tree):
    result = invoke("check", "--diff", ".")
    assert result.exit_code == 1 and "+vllm serve m --port 8000 --enable-scale-out" in result.stdout
    assert (tree / "launch.sh").read_text() == BAD_SCRIPT
    (tree / "launch.sh").write_text(FIXED_SCRIPT)
    clean = invoke("check", "--diff", ".")
    assert clean.exit_code == 0 and clean.stdout == ""


def test_exit_non_zero_on_fix(tree):
    result = invoke("check", "--fix", "--exit-non-zero-on-fix", ".")
    assert result.exit_code == 1 and (tree / "launch.sh").read_text() == FIXED_SCRIPT
    assert invoke("check", "--fix", "--exit-non-zero-on-fix", ".").exit_code == 0   # nothing left to fix


def test_stdin(tree):
    result = invoke("check", "-", "--stdin-filename", "deploy/launch.sh", input=BAD_SCRIPT)
    assert result.exit_code == 1 and result.stdout.startswith("deploy/launch.sh:2:8: VL001 error:")
    fixed = invoke("check", "--fix", "-q", "-", "--stdin-filename", "launch.sh", input=BAD_SCRIPT)
    assert fixed.exit_code == 0 and fixed.stdout == FIXED_SCRIPT
    diff = invoke("check", "--diff", "-", "--stdin-filename", "launch.sh", input=BAD_SCRIPT)
    assert diff.exit_code == 1 and "+++ b/launch.sh" in diff.stdout
    compose = "services:\n  vllm:\n    image: vllm/vllm-openai:v0.30.0\n    environment:\n" \
              "      VLLM_ENABLE_SCALE_OUT_ENDPOINTS: \"1\"\n    command: [\"--model\", \"m\"]\n"
    found = json.loads(invoke("check", "--format", "json", "-", "--stdin-filename", "compose.yaml",
                              input=compose).stdout)
    assert [(f["path"], f["code"]) for f in found] == [("compose.yaml", "VL001")]
    unknown = CliRunner().invoke(main, ["check", "-"], input="hello\n")
    assert unknown.exit_code == 2 and "--stdin-filename" in unknown.output
    assert CliRunner().invoke(main, ["check", "-", "."], input="x").exit_code == 2


def test_nothing_read_says_so(tmp_path):
    (tmp_path / "README.md").write_text("nothing here\n")
    result = invoke("check", str(tmp_path))
    assert result.exit_code == 0
    assert f"no vLLM config found in {tmp_path}" in result.stderr


def test_diff_paths_are_relative(tree):
    result = invoke("check", "--diff", str(tree))
    assert "--- a/launch.sh\n+++ b/launch.sh\n" in result.stdout
    assert "a//" not in result.stdout
    elsewhere = invoke("check", "--diff", str(tree / "launch.sh"))
    assert "--- a/launch.sh" in elsewhere.stdout


def test_rule_docs_rendered_on_a_tty_markdown_when_piped():
    piped = subprocess.run([sys.executable, "-m", "vllmlint.cli", "rule", "VL001"], capture_output=True, text=True)
    assert piped.returncode == 0 and "## What it does" in piped.stdout
    pty = pytest.importorskip("pty")
    out = bytearray()

    def read(fd):
        data = os.read(fd, 65536)
        out.extend(data)
        return data

    env = dict(os.environ, COLUMNS="100", TERM="xterm-256color")
    pid, fd = pty.fork()
    if pid == 0:     # pragma: no cover - the child
        os.execve(sys.executable, [sys.executable, "-m", "vllmlint.cli", "rule", "VL001"], env)
    try:
        while True:
            try:
                if not read(fd):
                    break
            except OSError:
                break
    finally:
        os.waitpid(pid, 0)
    text = out.decode("utf-8", "replace")
    assert "What it does" in text and "## What it does" not in text      # headings rendered, not raw
