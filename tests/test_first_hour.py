"""What a new user meets in the first hour (issue 32): a summary that never contradicts the run,
settings checked as the command line checks its options, fix hints that say what `--fix` will
do, `migrate`'s exit codes, colour, plural forms, grouped notes, `--statistics` as ruff's, and
the Helm SDK's Go log held back."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "fixtures" / "demo"
# The scripts name the release they run (issue 29: a fix that depends on the release needs it)
RELEASE = "# vllmlint: release=0.30.0\n"
BAD_SCRIPT = "#!/bin/sh\nexport VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nvllm serve m --port 8000\n" + RELEASE
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), catch_exceptions=False, env=env)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    return tmp_path


# -- 1. a run in which a file could not be read ------------------------------------------------
def test_unreadable_file_is_never_all_checks_passed(tree):
    (tree / "compose.yaml").write_bytes(b"services:\n  vllm:\n    image: vllm/vllm-openai:v0.30.0\x00\xff\n")
    result = invoke("check", ".")
    assert result.exit_code == 2 and "All checks passed!" not in result.output
    assert result.stdout == "Found 0 findings; 1 file could not be read.\n"
    assert result.stderr.startswith("compose.yaml:1:1: E000 error: binary file")


def test_missing_path_is_an_error_at_1_1(tree):
    (tree / "launch.sh").write_text(BAD_SCRIPT)
    result = invoke("check", "launch.sh", "nosuch.yaml")
    assert result.exit_code == 2
    assert "nosuch.yaml:1:1: E000 error: " in result.stderr and "nosuch.yaml:0:" not in result.output
    assert "Found 1 finding (1 fixable); 1 file could not be read." in result.stdout.splitlines()


# -- 2. settings checked like the command line ---------------------------------------------------
SETTINGS_TYPOS = [
    ('select = ["VL001", "VL9999"]\n', "pyproject.toml:2: select: unknown rule code or prefix 'VL9999'"),
    ('select = ["XYZ"]\n', "pyproject.toml:2: select: unknown rule code or prefix 'XYZ'"),
    ('ignore = [\n  "VL001",\n  "E501",\n]\n', "pyproject.toml:4: ignore: unknown rule code or prefix 'E501'"),
    ('select = ["VL0"]\nextend-select = ["VL7"]\n', "pyproject.toml:3: extend-select: unknown rule code or prefix 'VL7'"),
    ('per-file-ignores = {"legacy/**" = ["VL01"]}\n',
     "pyproject.toml:2: per-file-ignores: 'legacy/**': unknown rule code or prefix 'VL01'"),
    ('[tool.vllmlint.severity]\nVL2 = "error"\n', "pyproject.toml:3: severity: unknown rule code 'VL2'"),
    ('selct = ["VL001"]\n', "pyproject.toml:2: selct: unknown key; did you mean `select`?"),
    ('fail-level = "warn"\n', "pyproject.toml:2: fail-level: must be error, warning or info, not 'warn'"),
]


@pytest.mark.parametrize("body,error", SETTINGS_TYPOS, ids=[t[1].split(": ", 1)[1][:40] for t in SETTINGS_TYPOS])
def test_settings_typo_is_an_error_with_its_line(tree, body, error):
    (tree / "launch.sh").write_text(BAD_SCRIPT)
    (tree / "pyproject.toml").write_text("[tool.vllmlint]\n" + body)
    for command in (["check", "."], ["check", "--fix", "."], ["launches", "."], ["migrate", "--to", "0.30.0", "."]):
        result = invoke(*command)
        assert result.exit_code == 2, (command, result.output)
        assert result.stderr.startswith(error), (command, result.stderr)
        assert "Usage:" not in result.output and "--help" not in result.output
        assert "All checks passed" not in result.output
    assert (tree / "launch.sh").read_text() == BAD_SCRIPT, "nothing was fixed under broken settings"


def test_every_settings_error_is_reported_at_once(tree):
    (tree / ".vllmlint.toml").write_text('select = ["VL001", "VL9999"]\nignroe = ["VL001"]\n')
    (tree / "launch.sh").write_text(BAD_SCRIPT)
    result = invoke("check", ".")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        ".vllmlint.toml:1: select: unknown rule code or prefix 'VL9999'; see `vllmlint rules`",
        ".vllmlint.toml:2: ignroe: unknown key; did you mean `ignore`?"]


def test_extend_select_adds_to_select(tree):
    (tree / "launch.sh").write_text(BAD_SCRIPT + "vllm serve m --disable-log-requests\n")
    (tree / ".vllmlint.toml").write_text('select = ["VL302"]\n')
    assert {r["code"] for r in json.loads(invoke("check", "--format", "json", ".").stdout)} == {"VL302"}
    (tree / ".vllmlint.toml").write_text('select = ["VL302"]\nextend-select = ["VL001"]\n')
    assert {r["code"] for r in json.loads(invoke("check", "--format", "json", ".").stdout)} == {"VL001", "VL302"}


def test_invalid_toml_names_its_line(tree):
    (tree / ".vllmlint.toml").write_text('select = ["VL001"]\nignore = [\n')
    result = invoke("check", ".")
    assert result.exit_code == 2 and result.stderr.startswith(".vllmlint.toml:2: invalid TOML: ")
    assert "Usage:" not in result.output


# -- 3. fix gating that reads the same everywhere ------------------------------------------------
OLD_IMAGE = 'FROM vllm/vllm-openai:v0.28.0\nCMD ["vllm", "serve", "m", "--disable-log-requests"]\n'


def test_release_gated_fix_is_not_offered_and_is_counted(tree):
    (tree / "Dockerfile").write_text(OLD_IMAGE)
    result = invoke("check", "--target-version", "0.29.0", "--select", "VL302", ".")
    [line] = [l for l in result.stdout.splitlines() if "VL302" in l]
    assert not line.endswith("[*]") and "fix with `vllmlint migrate --to 0.29.0`" in line
    assert "1 more fixable with `vllmlint migrate --to 0.29.0`." in result.stdout.splitlines()
    assert "fixable with `vllmlint check --fix`" not in result.stdout
    fixed = invoke("check", "--target-version", "0.29.0", "--select", "VL302", "--fix", ".")
    assert (tree / "Dockerfile").read_text() == OLD_IMAGE, "not [*]: --fix leaves it"
    assert "fixed" not in fixed.stdout


def test_every_star_is_applied_by_fix_with_the_same_arguments(tmp_path):
    """[*] on a finding <=> `check --fix` with the same arguments applies its fix (the demo, at
    two targets, with and without --unsafe-fixes)."""
    for args in ([], ["--target-version", "0.29.0"], ["--unsafe-fixes"]):
        work = tmp_path / f"demo{len(args)}"
        shutil.copytree(DEMO, work)
        rows = json.loads(invoke("check", "--format", "json", *args, str(work)).stdout)
        starred = sorted((r["path"], r["line"], r["code"]) for r in rows if r["fixable"])
        invoke("check", "--fix", *args, str(work))
        after = json.loads(invoke("check", "--format", "json", *args, str(work)).stdout)
        left = {(r["path"], r["code"], r["message"]) for r in after}
        assert all((r["path"], r["code"], r["message"]) not in left for r in rows if r["fixable"]), args
        assert all(r["fixable"] is False for r in after), args
        unstarred = [r for r in rows if not r["fixable"]]
        assert len(after) >= len(unstarred), "a finding without [*] was not fixed"
        assert starred or args == ["--target-version", "0.29.0"]


SPECULATIVE = "#!/bin/sh\nvllm serve m --speculative-model x --num-speculative-tokens 5\n" + RELEASE


def test_unsafe_fix_hint(tree):
    (tree / "s.sh").write_text(SPECULATIVE)
    plain = invoke("check", ".")
    assert "1 hidden fix can be enabled with `--unsafe-fixes`." in plain.stdout.splitlines()
    assert "[*]" not in plain.stdout
    unsafe = invoke("check", "--unsafe-fixes", ".")
    assert "[*] 1 fixable with `vllmlint check --fix --unsafe-fixes`." in unsafe.stdout.splitlines()
    assert "hidden" not in unsafe.stdout
    invoke("check", "--fix", ".")
    assert (tree / "s.sh").read_text() == SPECULATIVE, "check --fix leaves an unsafe fix"
    invoke("check", "--fix", "--unsafe-fixes", ".")
    assert "--speculative-config" in (tree / "s.sh").read_text(), "the hint's command applies it"


# -- 4. migrate's exit codes -------------------------------------------------------------------
def test_migrate_exit_codes_documented_and_diff_pending_is_1(tmp_path):
    help_text = invoke("migrate", "--help").stdout
    assert "Exit codes" in help_text
    for code in ("0 ", "1 ", "2 ", "3 "):
        assert re.search(rf"^\s+{code}", help_text, re.M), code
    work = tmp_path / "demo"
    shutil.copytree(DEMO, work)
    assert invoke("migrate", "--to", "0.30.0", "--diff", str(work)).exit_code == 1
    assert invoke("migrate", "--to", "0.30.0", str(work)).exit_code == 0
    assert invoke("migrate", "--to", "0.30.0", "--diff", str(work)).exit_code == 0


# -- 5. colour, plural forms, grouping, statistics, Helm's log ---------------------------------
def test_color_choice_and_environment(tree):
    (tree / "launch.sh").write_text(BAD_SCRIPT)
    plain = invoke("check", ".")
    assert not ANSI.search(plain.stdout), "not a terminal: no colour"
    assert ANSI.search(invoke("check", ".", env={"FORCE_COLOR": "1"}).stdout)
    assert not ANSI.search(invoke("check", ".", env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout)
    assert ANSI.search(invoke("check", "--color", "always", ".", env={"NO_COLOR": "1"}).stdout)
    assert not ANSI.search(invoke("check", "--color", "never", ".", env={"FORCE_COLOR": "1"}).stdout)
    coloured = invoke("check", "--color", "always", ".").stdout
    assert ANSI.sub("", coloured) == plain.stdout
    assert invoke("check", "--color", "sometimes", ".").exit_code == 2


def test_plural_forms_and_would_fix(tree):
    (tree / "launch.sh").write_text(BAD_SCRIPT)
    diff = invoke("check", "--diff", ".")
    assert "Would fix 1 finding in 1 file." in diff.stderr and "(s)" not in diff.output
    (tree / "other.sh").write_text(BAD_SCRIPT)
    fixed = invoke("check", "--fix", ".")
    assert "Fixed 2 findings in 2 files." in fixed.stderr and "(s)" not in fixed.output


TWO_SERVICES = """services:
  a:
    image: vllm/vllm-openai:v0.29.0
    command: ["--model", "m"]
  b:
    image: vllm/vllm-openai:v0.29.0
    command: ["--model", "n"]
"""


def test_identical_findings_on_launches_of_one_file_are_one_line(tree):
    (tree / "compose.yaml").write_text(TWO_SERVICES)
    rows = [r for r in json.loads(invoke("check", "--format", "json", ".").stdout) if r["code"] == "VL307"]
    assert len(rows) >= 2 and len({r["message"] for r in rows}) < len(rows), "the JSON keeps every finding"
    text = [l for l in invoke("check", ".").stdout.splitlines() if " VL307 " in l]
    assert len(text) == len({r["message"] for r in rows})
    assert all(re.search(r" \(2 launches; also line \d+\)$", l) for l in text), text


def test_statistics_as_ruff(tree):
    (tree / "launch.sh").write_text(BAD_SCRIPT + "vllm serve m --speculative-model x\n")
    result = invoke("check", "--statistics", ".")
    lines = result.stdout.splitlines()
    assert "1\tVL001\t[*] scale-out-env-removed (error)" in lines
    assert any(re.fullmatch(r"\d+\tVL302\t\[ \] removed-or-renamed-flag \(error\)", l) for l in lines), lines
    assert lines[-3:] == ["Found 2 findings (1 fixable).", "[*] 1 fixable with `vllmlint check --fix`.",
                          "1 hidden fix can be enabled with `--unsafe-fixes`."], "the summary after the table"
    for fmt in ("sarif", "github", "gitlab"):
        refused = invoke("check", "--statistics", "--format", fmt, ".")
        assert refused.exit_code == 2 and "--statistics" in refused.stderr and fmt in refused.stderr
        assert refused.stdout == ""


def test_helm_go_log_is_held_back_unless_verbose(tmp_path):
    pytest.importorskip("helm_python")
    chart = tmp_path / "hl"
    shutil.copytree(ROOT / "fixtures" / "VL001" / "helm-chart-values" / "input", chart)
    (chart / "chart" / "values-link.yaml").symlink_to("values.yaml")
    run = lambda *a: subprocess.run([sys.executable, "-m", "vllmlint.cli", "check", *a, "."], cwd=chart,  # noqa: E731
                                    capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})
    quiet, verbose = run(), run("-v")
    assert "VL001" in quiet.stdout and "symbolic link" not in quiet.stderr, quiet.stderr
    assert "found symbolic link in path" in verbose.stderr


OLD_COMPOSE = """services:
  vllm:
    image: vllm/vllm-openai:v0.8.0
    command: ["--model", "m", "--max-model-len", "8192"]
"""


def test_migrate_across_many_releases_says_idle_steps_once(tree):
    """Found as a user (a compose file on v0.8.0, 26 steps to 0.30.0): 24 lines of `step X: nothing
    to change` are one line."""
    (tree / "compose.yaml").write_text(OLD_COMPOSE)
    result = invoke("migrate", "--to", "0.30.0", "--diff", ".")
    assert result.exit_code == 1, result.output          # the tag bump is pending
    steps = [l for l in result.stderr.splitlines() if l.startswith(("  step ", "  steps "))]
    assert any(re.fullmatch(r"  steps 0\.8\.5-\S+: nothing to change \(\d+ steps\)", l) for l in steps), steps
    assert len(steps) < 10, steps
