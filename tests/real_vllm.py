"""What the tests against a real vLLM share: finding it (a failure in CI, a skip elsewhere),
nixl next to it, running a vllmlint command that prints a JSON report, and reading probes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllmlint.verify.locate import NotFound, find_vllm, python_of

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(msg: str):
    """In CI (CI=true) a missing piece fails the test: .ci/run installs everything first."""
    if IN_CI:
        pytest.fail(f"CI needs it: {msg}")
    pytest.skip(msg)


def vllm_or_skip() -> Path:
    try:
        return find_vllm(None)
    except NotFound as err:
        missing(f"no vLLM 0.30.0 here ({err})")


def require_nixl(vllm: Path) -> None:
    if subprocess.run([python_of(vllm), "-c", "import nixl"], capture_output=True).returncode != 0:
        missing("nixl is not installed next to vLLM (VLLMLINT_WITH_NIXL=1 bash scripts/install_vllm_cpu.sh)")


def run_json(args: list[str], timeout: float) -> tuple[int, dict, str]:
    """`python -m vllmlint ARGS` -> (exit code, its JSON report, stderr)."""
    res = subprocess.run([sys.executable, "-m", "vllmlint", *args], capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    try:
        report = json.loads(res.stdout)
    except ValueError:
        raise AssertionError(f"no JSON report (exit {res.returncode}):\n{res.stdout}\n{res.stderr}") from None
    return res.returncode, report, res.stderr


def probes(report: dict) -> dict[str, dict]:
    """A verify report's probes by name (per server `kind:name`, per unit `name`)."""
    found = {}
    for unit in report["units"]:
        for s in unit["servers"]:
            for p in s["probes"]:
                found[f"{s['kind']}:{p['name']}"] = p
        for p in unit["probes"]:
            found[p["name"]] = p
    return found
