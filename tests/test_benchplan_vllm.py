"""`vllmlint bench-plan --run` on verify's local stack (vLLM 0.30.0 CPU, nixl, the tiny model):
the pair's `vllm bench serve` commands against the P/D pair behind verify's router, then against
the collocated baseline (`--data-parallel-size 2` on CPU), and `bench-compare` on the files.

On demand only (VLLMLINT_BENCH_RUN=1): about 10-12 minutes on 2 busy cores - the collocated
DP=2 server alone takes ~5 minutes to start there, and each `vllm bench serve` ~1 minute to
import. The files one such run wrote are kept in tests/data/benchcompare/tiny-run/ and
test_benchplan.py compares them on every run.
"""
from __future__ import annotations

import json
import os

import pytest

from real_vllm import ROOT, require_nixl, run_json, vllm_or_skip

pytestmark = pytest.mark.skipif(os.environ.get("VLLMLINT_BENCH_RUN") != "1",
                                reason="on demand: VLLMLINT_BENCH_RUN=1 (10-12 minutes)")


def test_bench_plan_run_writes_files_bench_compare_reads(tmp_path):
    vllm = vllm_or_skip()
    require_nixl(vllm)
    code, rep, stderr = run_json(["bench-plan", str(ROOT / "fixtures/verify/pd-nixl"), "--run", "--connector", "nixl",
                                  "--rates", "1,4", "--num-prompts", "10", "--result-dir", str(tmp_path),
                                  "--format", "json"], timeout=2400)
    print(stderr[-4000:])
    assert code == 0
    for side in ("split", "collocated"):
        runs = rep[side]["runs"]
        assert [r["exit"] for r in runs] == [0, 0]
        for r in runs:
            data = json.loads(open(r["file"]).read())
            assert data["completed"] == 10 and data["request_goodput"] is not None
            assert {"p99_ttft_ms", "p50_ttft_ms", "p99_itl_ms", "p99_tpot_ms"} <= set(data)
    assert rep["collocated"]["argv"][rep["collocated"]["argv"].index("--data-parallel-size") + 1] == "2"
    assert len(rep["compared"]) == 2 and all(c["verdict"] in ("split", "stay collocated") for c in rep["compared"])
