"""`vllmlint bench-plan` golden outputs (a P/D compose file, a Kubernetes pair) and
`vllmlint bench-compare` on files shaped like `vllm bench serve --save-result`.

Regenerate a golden file after a deliberate change (and review the diff):
    vllmlint bench-plan tests/data/benchplan/compose-pd > tests/data/benchplan/compose-pd.expected.sh
    vllmlint bench-plan tests/data/benchplan/k8s-pd --format markdown > tests/data/benchplan/k8s-pd.expected.md
    vllmlint bench-plan tests/data/benchplan/k8s-pd --format json --rates 0.5,1 --prompt-tokens 4096 \\
        --output-tokens 128 --num-prompts 50 > tests/data/benchplan/k8s-pd.expected.json
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main
from vllmlint.knowledge import benchresult as br

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests/data/benchplan"
CMP = ROOT / "tests/data/benchcompare"

GOLDEN = [
    (["tests/data/benchplan/compose-pd"], "compose-pd.expected.sh"),
    (["tests/data/benchplan/k8s-pd", "--format", "markdown"], "k8s-pd.expected.md"),
    (["tests/data/benchplan/k8s-pd", "--format", "json", "--rates", "0.5,1", "--prompt-tokens", "4096",
      "--output-tokens", "128", "--num-prompts", "50"], "k8s-pd.expected.json"),
]


def run(args, monkeypatch):
    monkeypatch.chdir(ROOT)
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.mark.parametrize("args,golden", GOLDEN, ids=[g for _, g in GOLDEN])
def test_golden(args, golden, monkeypatch):
    r = run(["bench-plan", *args], monkeypatch)
    assert r.exit_code == 0, r.output
    assert r.output == (DATA / golden).read_text()


def test_compose_plan_baseline_on_the_same_gpus(monkeypatch):
    r = run(["bench-plan", "tests/data/benchplan/compose-pd", "--format", "json"], monkeypatch)
    (pp,) = json.loads(r.output)
    assert pp["gpus"] == 2 and pp["gpu_ids"] == [0, 1] and pp["collocated_env"] == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert pp["collocated"] == ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "16384", "--dtype",
                                "bfloat16", "--data-parallel-size", "2", "--gpu-memory-utilization", "0.9",
                                "--enable-prefix-caching", "--port", "8000"]
    assert pp["router_url"] == "http://localhost:8000"          # the toy proxy's published port
    cmd = pp["split_bench"][0]
    for needle in (["--goodput", "ttft:2000", "tpot:30"], ["--percentile-metrics", "ttft,tpot,itl"],
                   ["--metric-percentiles", "50,99"], ["--random-input-len", "8192"], ["--request-rate", "0.25"]):
        i = cmd.index(needle[0])
        assert cmd[i:i + len(needle)] == needle
    assert "--save-result" in cmd and cmd[-1] == "split-rate0.25.json"
    assert [c[c.index("--request-rate") + 1] for c in pp["collocated_bench"]] == ["0.25", "0.5", "1", "2"]


def test_k8s_plan_keeps_tensor_parallel_and_finds_the_router_service(monkeypatch):
    r = run(["bench-plan", "tests/data/benchplan/k8s-pd", "--format", "json"], monkeypatch)
    (pp,) = json.loads(r.output)
    assert pp["gpus"] == 4 and pp["tensor_parallel"] == 2
    c = pp["collocated"]
    assert c[c.index("--tensor-parallel-size") + 1] == "2" and c[c.index("--data-parallel-size") + 1] == "2"
    assert c[c.index("--kv-cache-dtype") + 1] == "fp8"           # what the pair computes with
    assert pp["router_url"] == "http://pd-router:80"             # Service port 80 -> the router's 9000
    assert pp["prompt_tokens"] == 8192 - 256 and any("does not fit" in n for n in pp["notes"])


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
def test_sh_plan_is_valid_shell(tmp_path):
    subprocess.run(["sh", "-n", str(DATA / "compose-pd.expected.sh")], check=True)


def test_no_pair_is_exit_1(tmp_path, monkeypatch):
    (tmp_path / "compose.yaml").write_text("services:\n  vllm:\n    image: vllm/vllm-openai:v0.30.0\n"
                                           "    command: --model m --port 8000\n")
    r = CliRunner().invoke(main, ["bench-plan", str(tmp_path)])
    assert r.exit_code == 1 and "no P/D pair" in r.output


# -- bench-compare -----------------------------------------------------------------------------------
SPLIT = str(CMP / "guide-split-rate0.4.json")
COLL = str(CMP / "guide-collocated-rate0.4.json")


def test_compare_split_when_collocated_itl_misses_and_split_holds():
    r = CliRunner().invoke(main, ["bench-compare", SPLIT, COLL])
    assert r.exit_code == 0, r.output
    assert "P99 ITL (ms)                          28           169  split" in r.output
    assert "P99 TTFT (ms)                      3,050         1,410  collocated" in r.output
    assert "decision: SPLIT (binding target: itl)" in r.output
    assert "misses 2000: fix the KV transfer" in r.output


def test_compare_stay_when_ttft_is_binding_and_split_is_worse():
    r = CliRunner().invoke(main, ["bench-compare", SPLIT, COLL, "--binding", "ttft", "--format", "json"])
    data = json.loads(r.output)
    assert r.exit_code == 1 and data["verdict"] == "stay collocated" and data["binding"] == "ttft"
    assert data["reasons"][0] == "TTFT is the binding target and the split makes it worse"
    row = next(t for t in data["table"] if t["metric"] == "request goodput (req/s)")
    assert row == {"metric": "request goodput (req/s)", "split": 0.21, "collocated": 0.12, "better": "split"}


def test_decisions():
    s, c = br.load(SPLIT), br.load(COLL)
    assert br.decide(s, c).verdict == br.SPLIT
    d = br.decide(s, c, itl_slo=20)                   # neither holds 20 ms
    assert d.verdict == br.STAY and "moves it from 169 to 28 ms" in d.reasons[0]
    d = br.decide(c, c)                               # collocated vs itself: ITL misses, split misses too
    assert d.verdict == br.STAY
    held = dict(c, p99_itl_ms=25.0)
    d = br.decide(s, held)                            # collocated already holds ITL -> TTFT binds
    assert d.verdict == br.STAY and d.binding == "ttft"
    assert br.decide({"p99_ttft_ms": 1}, {"request_throughput": 1}).verdict == br.UNDECIDED


def test_compare_rejects_other_json(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"a": 1}')
    r = CliRunner().invoke(main, ["bench-compare", str(bad), COLL])
    assert r.exit_code == 2 and "not a `vllm bench serve --save-result` file" in r.output


# -- files a real `bench-plan --run` wrote (vLLM 0.30.0 CPU, the tiny model, 2 cores at load ~29):
# the collocated DP=2 baseline completed 10/10 at 1 req/s; through the NixlConnector pair every
# request failed (NIXL on an overloaded CPU host), which the decision must not read as latencies.
TINY = ROOT / "tests/data/benchcompare/tiny-run"


def test_real_save_result_files_and_a_side_with_no_completed_request():
    coll = br.load(TINY / "collocated-rate1.json")
    assert coll["completed"] == 10 and coll["backend"] == "vllm" and coll["request_goodput"] is not None
    assert {"p50_ttft_ms", "p99_ttft_ms", "p50_itl_ms", "p99_itl_ms", "p99_tpot_ms"} <= set(coll)
    r = CliRunner().invoke(main, ["bench-compare", str(TINY / "split-rate1.json"), str(TINY / "collocated-rate1.json")])
    assert r.exit_code == 1
    assert "decision: UNDECIDED" in r.output and "no request completed on the split side (split 10 failed)" in r.output
    assert br.decide(coll, coll).verdict == br.STAY      # the real file against itself: ITL 349 ms misses 30 on both


def test_a_side_without_inter_token_latencies_is_undecided():
    s, c = br.load(SPLIT), br.load(COLL)
    d = br.decide(dict(s, p99_itl_ms=0.0), c)
    assert d.verdict == br.UNDECIDED and "returned the stream whole" in d.reasons[0]


def test_real_run_through_a_buffering_router_is_undecided_on_itl():
    """A real `bench-plan --run` (200-token prompts, ExampleConnector pair behind verify's built-in
    router, which returns decode's stream whole; collocated DP=2): every request completed on both
    sides, the split's p99 ITL is 0.02 ms - not a measurement."""
    d = ROOT / "tests/data/benchcompare/tiny-run-200"
    split, coll = br.load(d / "split-rate1.json"), br.load(d / "collocated-rate1.json")
    assert split["completed"] == coll["completed"] == 8 and split["p99_itl_ms"] < 0.1 < coll["p99_itl_ms"]
    r = CliRunner().invoke(main, ["bench-compare", str(d / "split-rate1.json"), str(d / "collocated-rate1.json")])
    assert r.exit_code == 1 and "decision: UNDECIDED" in r.output and "returned the stream whole" in r.output
    assert "P99 TTFT (ms)                      1,229        167.04  collocated" in r.output
