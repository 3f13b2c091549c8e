"""The fast entry point (vllmlint.entry): `vllmlint check [FLAGS] PATH...` without click gives
exactly what the click command gives, and the two agree on every default."""
from __future__ import annotations

import inspect
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllmlint.cli import check as click_check
from vllmlint.entry import FAST_FLAGS, fast_check_args
from vllmlint.lint.checkrun import run_check

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "fixtures" / "demo"
CLICK = "import sys; from vllmlint.cli import main; sys.argv[0] = 'vllmlint'; main()"


def test_run_check_defaults_are_the_command_lines():
    given = click_check.make_context("check", []).params     # what click passes for `vllmlint check`
    signature = inspect.signature(run_check).parameters
    assert set(signature) == set(given)                     # the click command passes them by name
    for name, value in given.items():
        assert signature[name].default == value, name


def test_fast_flags_are_flags_of_check():
    by_opt = {opt: p for p in click_check.params for opt in getattr(p, "opts", [])}
    for flag, name in FAST_FLAGS.items():
        assert by_opt[flag].name == name and by_opt[flag].is_flag, flag


@pytest.mark.parametrize("argv, expected", [
    (["check", "a.yaml", "--fix", "-q"], {"paths": ("a.yaml",), "fix": True, "quiet": True}),
    (["check"], {"paths": ()}),
    (["check", "--format", "json", "a"], None),          # an option with a value: click reads it
    (["check", "-"], None),                              # stdin
    (["check", "--", "-odd-name"], None),
    (["check", "--help"], None),
    (["launches", "a"], None),
    ([], None),
])
def test_fast_check_args(argv, expected):
    assert fast_check_args(argv) == expected


def _run(code: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


FAST = "import sys; from vllmlint.entry import main; sys.argv[0] = 'vllmlint'; main()"


@pytest.mark.parametrize("args", [
    ["check", "."],
    ["check", "--diff", "."],
    ["check", "--statistics", "-q", "docker"],
    ["check", "--show-details", "--exit-zero", "k8s/decode.yaml", "scripts/serve.sh"],
    ["check", "missing-file.yaml", "docker/Dockerfile"],
])
def test_fast_path_prints_what_click_prints(tmp_path, args):
    for name in ("fast", "click"):
        shutil.copytree(DEMO, tmp_path / name)
    fast = _run(FAST, args, tmp_path / "fast")
    slow = _run(CLICK, args, tmp_path / "click")
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    assert fast.stdout or fast.stderr


def test_fast_fix_writes_what_click_writes(tmp_path):
    for name in ("fast", "click"):
        shutil.copytree(DEMO, tmp_path / name)
    fast = _run(FAST, ["check", "--fix", "."], tmp_path / "fast")
    slow = _run(CLICK, ["check", "--fix", "."], tmp_path / "click")
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    files = sorted(p.relative_to(tmp_path / "fast") for p in (tmp_path / "fast").rglob("*") if p.is_file())
    assert files and all((tmp_path / "fast" / f).read_bytes() == (tmp_path / "click" / f).read_bytes() for f in files)
    assert "Fixed" in fast.stderr


def test_usage_error_is_worded_by_click(tmp_path):
    (tmp_path / ".vllmlint.toml").write_text("no-such-key = 1\n")
    shutil.copy(DEMO / "docker" / "Dockerfile", tmp_path / "Dockerfile")
    fast = _run(FAST, ["check", "Dockerfile"], tmp_path)
    slow = _run(CLICK, ["check", "Dockerfile"], tmp_path)
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    # a settings error names the file and line, without click's usage lines (the command line was right)
    assert fast.returncode == 2 and fast.stderr.startswith(".vllmlint.toml:1: no-such-key: unknown key")
    assert "Usage:" not in fast.stderr and "--help" not in fast.stderr


def test_fast_path_does_not_import_click(tmp_path):
    probe = ("import sys; from vllmlint.entry import main; sys.argv = ['vllmlint', 'check', '-q', sys.argv[1]]\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\nprint('click' in sys.modules, file=sys.stderr)")
    done = _run(probe, [str(DEMO / "docker" / "Dockerfile")], tmp_path)
    assert done.stderr.strip().splitlines()[-1] == "False"
