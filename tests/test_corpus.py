"""Real public configs (../shared/corpus): every file is checked without a crash, and every
file that launches vLLM has its launch found. Skips when ../shared is absent."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "files"
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not here")

# A launch in plain sight: `vllm serve`, `vllm launch render`, the api_server module, or a
# vllm/vllm-openai container given only args.
LAUNCH_RE = re.compile(r"\bvllm\s+(?:serve|launch\s+render)\b|vllm\.entrypoints\.openai\.api_server"
                       r"|^\s*-\s*vllm\s*$", re.M)
# Files whose launch is not in plain sight, and why vllmlint does not claim one.
NOT_A_LAUNCH = {
    "containers__ramalama/test__unit__command__data__engines__vllm.yaml":
        "RamaLama engine spec: the binary is chosen by a Jinja expression when RamaLama runs",
}
# Launches that carry no launch words: args-only containers, flag lists, flags in env vars.
ALSO_LAUNCHES = [
    "kserve__kserve/docs__samples__llmisvc__single-node-gpu__llm-inference-service-pd-qwen2-7b-gpu.yaml",
    "kserve__kserve/docs__samples__llmisvc__agentic-tool-calling__nemotron-3-ultra-pd.yaml",
    "llm-d__llm-d-inference-scheduler/deploy__components__vllm-prefill__deployment.yaml",
    "zetxqx__llm-d/guides__pd-disaggregation__modelserver__tpu__v7__vllm__patch-prefill.yaml",
    "vllm-project__production-stack/tutorials__assets__values-14-vllm-v1.yaml",
    "vllm-project__vllm-ascend/tests__e2e__nightly__multi_node__external_dp__config__DeepSeek-V4-flash-w8a8-PD-prefix.yaml",
    "vllm-project__recipes/strategies__pd_cluster.yaml",
]


def uncommented(text: str) -> str:
    return "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus") / "files"
    shutil.copytree(CORPUS, root, copy_function=shutil.copyfile)   # writable, like a checkout
    return root


def test_check_whole_corpus_without_crash(corpus: Path, monkeypatch):
    monkeypatch.chdir(corpus)
    result = CliRunner().invoke(main, ["check", "--format", "json", "."], catch_exceptions=False)
    assert "Traceback" not in result.output and "internal error" not in result.stderr
    assert result.exit_code in (0, 1), result.stderr
    json.loads(result.stdout)


def test_launch_found_in_every_file_that_has_one(corpus: Path, monkeypatch):
    monkeypatch.chdir(corpus)
    result = CliRunner().invoke(main, ["launches", "--format", "json", "."], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    found = {row["path"] for row in json.loads(result.stdout)}
    expected = set(ALSO_LAUNCHES)
    for path in corpus.rglob("*"):
        rel = path.relative_to(corpus).as_posix()
        if path.is_file() and rel not in NOT_A_LAUNCH and LAUNCH_RE.search(uncommented(path.read_text(errors="replace"))):
            expected.add(rel)
    assert len(expected) >= 35
    assert sorted(expected - found) == []


def test_fix_on_whole_corpus_converges(corpus: Path, monkeypatch):
    """--fix twice: the second run changes nothing, and every file still parses."""
    work = corpus.parent / "fixed"
    shutil.copytree(corpus, work)
    monkeypatch.chdir(work)
    first = CliRunner().invoke(main, ["check", "--fix", "."], catch_exceptions=False)
    assert first.exit_code in (0, 1), first.stderr
    snapshot = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    CliRunner().invoke(main, ["check", "--fix", "."], catch_exceptions=False)
    assert snapshot == {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    assert "would not parse" not in first.stderr
