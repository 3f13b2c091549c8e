"""Real public configs (../shared/corpus): every file is checked without a crash, and every
file that launches vLLM has its launches found. Skips when ../shared is absent.

Files whose MANIFEST.tsv `launches` column is filled must yield exactly that many launches
(0: none at all, so no other engine is read as vLLM); the older files (column empty) must yield
at least one launch when one is in plain sight. KNOWN_MISSES lists the files detection does
not get right yet, each with the reason; a file listed there that now matches fails too, so the
list only shrinks.
"""
from __future__ import annotations

import csv
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main

from corpus_expect import BROKEN, assert_only_broken_files_fail

SHARED = Path(__file__).resolve().parents[2] / "shared" / "corpus"
CORPUS = SHARED / "files"
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

# file -> why detection does not find its manifest count yet (issue: find every vLLM engine).
KNOWN_MISSES: dict[str, str] = {}


def manifest() -> dict[str, int]:
    """local_name -> the launches a careful reader counts (only where the column is filled)."""
    with open(SHARED / "MANIFEST.tsv", newline="") as f:
        return {row["local_name"]: int(row["launches"]) for row in csv.DictReader(f, delimiter="\t")
                if row["launches"].strip()}


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
    assert_only_broken_files_fail(result)
    json.loads(result.stdout)


def test_launch_found_in_every_file_that_has_one(corpus: Path, monkeypatch):
    monkeypatch.chdir(corpus)
    result = CliRunner().invoke(main, ["launches", "--format", "json", "."], catch_exceptions=False)
    assert_only_broken_files_fail(result)
    found = {row["path"] for row in json.loads(result.stdout)}
    counted = manifest()
    expected = set(ALSO_LAUNCHES)
    for path in corpus.rglob("*"):
        rel = path.relative_to(corpus).as_posix()
        if (path.is_file() and rel not in NOT_A_LAUNCH and rel not in counted
                and LAUNCH_RE.search(uncommented(path.read_text(errors="replace")))):
            expected.add(rel)
    assert len(expected) >= 35
    assert sorted(expected - found) == []


def test_launch_count_matches_the_manifest(corpus: Path, monkeypatch):
    """Every file with a filled `launches` column yields exactly that many launches, except the
    known misses - and a known miss that now matches must leave the list."""
    monkeypatch.chdir(corpus)
    result = CliRunner().invoke(main, ["launches", "--format", "json", "."], catch_exceptions=False)
    assert_only_broken_files_fail(result)
    # the manifest counts vLLM engines: a P/D proxy the file also starts is no engine, the
    # same argv written again in an exclusive if/case arm is the same engine; one in a `for` loop
    # starts one per iteration (`count`)
    found = Counter()
    for row in json.loads(result.stdout):
        if row["kind"] != "proxy" and not row.get("alternative_of"):
            found[row["path"]] += row.get("count") or 1
    counted = manifest()
    assert len(counted) >= 60
    wrong = {name: (want, found.get(name, 0)) for name, want in counted.items()
             if found.get(name, 0) != want and name not in BROKEN}
    assert sorted(set(wrong) - set(KNOWN_MISSES)) == [], {n: wrong[n] for n in set(wrong) - set(KNOWN_MISSES)}
    fixed = sorted(set(KNOWN_MISSES) - set(wrong) - set(BROKEN))
    assert fixed == [], f"these now match the manifest: remove them from KNOWN_MISSES: {fixed}"


def test_fix_on_whole_corpus_converges(corpus: Path, monkeypatch):
    """--fix twice: the second run changes nothing, and every file still parses."""
    work = corpus.parent / "fixed"
    shutil.copytree(corpus, work)
    monkeypatch.chdir(work)
    first = CliRunner().invoke(main, ["check", "--fix", "."], catch_exceptions=False)
    assert_only_broken_files_fail(first)
    snapshot = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    CliRunner().invoke(main, ["check", "--fix", "."], catch_exceptions=False)
    assert snapshot == {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    assert "would not parse" not in first.stderr
