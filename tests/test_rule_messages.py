"""What the P/D rules say matters as much as where: the numbers and the advice."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from vllmlint.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def findings(case: str, *args: str, tmp_path: Path, monkeypatch) -> list[dict]:
    work = tmp_path / "tree"
    shutil.copytree(FIXTURES / case / "input", work)
    monkeypatch.chdir(work)
    result = CliRunner().invoke(main, ["check", "--format", "json", *args, "."], catch_exceptions=False)
    rows = json.loads(result.stdout)
    for row in rows:        # what a user can read: the one-line message and the detail under it
        row["text"] = f"{row['message']} {row['detail']}"
    return rows


def test_vl201_estimate_for_qwen_7b_at_8k_tokens(tmp_path, monkeypatch):
    [f] = findings("VL201/shell-cns", "--select", "VL201", "--topology", "topo.txt",
                   tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert f["severity"] == "warning"
    assert "~469.8 MB of KV per 8,192-token prompt" in f["message"]     # 2*28*4*128*2*8192 B
    assert "~1.30 s over PCIe without peer-to-peer (CNS)" in f["message"]
    assert "stay collocated when TTFT is the target" in f["text"]


def test_vl201_prompt_tokens_option(tmp_path, monkeypatch):
    [f] = findings("VL201/shell-cns", "--select", "VL201", "--topology", "topo.txt", "--prompt-tokens", "4096",
                   tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert "~234.9 MB of KV per 4,096-token prompt" in f["text"]


def test_vl101_version_twist(tmp_path, monkeypatch):
    [now] = findings("VL101/k8s-three-files", "--select", "VL101", tmp_path=tmp_path / "a", monkeypatch=monkeypatch)
    assert "prefill.yaml" in now["text"] and "decode.yaml" in now["text"] and now["path"] == "proxy.yaml"
    assert "caches nothing yet" in now["text"] and "0.33.0" in now["text"]
    [later] = findings("VL101/k8s-three-files", "--select", "VL101", "--target-version", "0.33.0",
                       tmp_path=tmp_path / "b", monkeypatch=monkeypatch)
    assert "caches nothing yet" not in later["text"]
    assert "conversation_id" in later["text"] and "token-id continuation" in later["text"]


def test_vl002_names_the_caller(tmp_path, monkeypatch):
    [f] = findings("VL002/k8s-three-files", "--select", "VL002", tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert f["path"] == "decode.yaml" and "/inference/v1/generate (router.yaml:12)" in f["text"]


def test_every_rule_prints_its_docs():
    runner = CliRunner()
    listing = runner.invoke(main, ["rules"]).stdout
    for code in ("VL001", "VL002", "VL101", "VL102", "VL103", "VL201"):
        assert code in listing
        doc = runner.invoke(main, ["rule", code]).stdout
        assert "## Why" in doc and "## Fix safety" in doc


def test_messages_are_one_short_line(tmp_path, monkeypatch):
    """Text output: one line, the what and the what-to-do (issue 14.9); the why is the detail."""
    monkeypatch.chdir(FIXTURES)
    result = CliRunner().invoke(main, ["check", "--format", "json", "--fail-level", "info", "."],
                                catch_exceptions=False)
    lengths = sorted(len(r["message"]) for r in json.loads(result.stdout))
    assert lengths and all("\n" not in r["message"] for r in json.loads(result.stdout))
    assert lengths[len(lengths) // 2] <= 120, lengths[len(lengths) // 2]
    assert lengths[-1] <= 200, lengths[-1]


def test_vl103_plugin_connector_mismatch_is_a_warning(tmp_path, monkeypatch):
    [f] = findings("VL103/plugin-connector-mismatch", "--select", "VL103", tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert f["severity"] == "warning" and f["line"] == 7
    assert "AIBrixPDReuseConnector" in f["message"] and "not built into vLLM" in f["detail"]


def test_vl103_two_builtin_connectors_stay_an_error(tmp_path, monkeypatch):
    rows = findings("VL103/pd-mismatch", "--select", "VL103", tmp_path=tmp_path, monkeypatch=monkeypatch)
    [f] = [r for r in rows if "different connectors" in r["message"]]
    assert f["severity"] == "error" and "cannot exchange KV" in f["message"]


def test_vl101_python_proxy_apps(tmp_path, monkeypatch):
    """A proxy app that reuses decode's params by conversation id is the reference proxy's error;
    one we cannot classify (one-way, or reading token ids) is never more than info."""
    [reuse] = findings("VL101/python-fastapi-proxy", "--select", "VL101", tmp_path=tmp_path / "a",
                       monkeypatch=monkeypatch)
    assert reuse["severity"] == "error" and reuse["path"] == "router.py" and reuse["line"] == 13
    assert "by conversation id" in reuse["message"] and "kv_by_conversation[conv]" not in reuse["message"]
    assert "stores decode's kv_transfer_params under conv (line 32)" in reuse["detail"]
    for i, case in enumerate(("VL101/python-aiohttp-proxy", "VL101/python-proxy-token-check")):
        [f] = findings(case, "--select", "VL101", "--fail-level", "info", tmp_path=tmp_path / str(i),
                       monkeypatch=monkeypatch)
        assert f["severity"] == "info" and "custom P/D proxy" in f["message"]


def test_vl302_names_where_a_removed_flag_went(tmp_path, monkeypatch):
    """A removed flag with a known successor is not "remove it": deleting `--rope-scaling` would
    silently drop the context extension it sets (vLLM's deprecation: use --hf-overrides)."""
    rows = findings("VL302/successor-named-not-removed", "--target-version", "0.33.0",
                    tmp_path=tmp_path, monkeypatch=monkeypatch)
    by_line = {r["line"]: r for r in rows if r["code"] == "VL302"}
    assert by_line[5]["message"].endswith('set "rope_scaling" in --hf-overrides instead')
    assert "`--hf-overrides '{\"rope_scaling\": X}'`" in by_line[5]["detail"]
    assert by_line[6]["message"].endswith('set "rope_theta" in --hf-overrides instead')
    assert by_line[7]["message"].endswith("its deprecation said to use `--cudagraph-capture-sizes` instead")
    assert by_line[8]["message"].endswith("remove it (`--reasoning-parser`, which its deprecation named instead, is set)")
    assert not any(r["fixable"] for r in by_line.values())     # named, never written: no fix


def test_vl307_never_advises_an_old_default_the_target_refuses(tmp_path, monkeypatch):
    """0.10.1's defaults `builtin` (dropped from the choices in 0.10.2) and the V0 scheduler
    class (its module gone) cannot be set on 0.33.0: no `set X to keep it`, and no pin."""
    rows = findings("VL307/old-default-refused-by-target", "--select", "VL307", "--target-version", "0.33.0",
                    tmp_path=tmp_path, monkeypatch=monkeypatch)
    said = {row["message"].split("`")[1]: row["message"] for row in rows}
    assert said["--prefix-caching-hash-algo"].endswith(
        "that value is not one of its choices in vLLM 0.33.0: nothing keeps today's behaviour there")
    assert "that class does not exist in vLLM 0.33.0" in said["--scheduler-cls"]
    assert not any("--prefix-caching-hash-algo=builtin" in m or "--scheduler-cls=" in m for m in said.values())
    result = CliRunner().invoke(main, ["migrate", "--to", "0.33.0", "--keep-defaults", "--diff", "."],
                                catch_exceptions=False)
    assert "--prefix-caching-hash-algo" not in "".join(l for l in result.stdout.splitlines() if l.startswith("+"))


def test_vl308_names_the_release_that_dropped_the_value(tmp_path, monkeypatch):
    """`builtin` left `--prefix-caching-hash-algo`'s choices in 0.10.2: on 0.33.0 argparse stops
    the server ("invalid choice"). The message lists what 0.33.0 accepts; no value is chosen for
    the user (no fix)."""
    [f] = findings("VL308/k8s-removed-value-at-target", "--select", "VL308", "--target-version", "0.33.0",
                   tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert f["severity"] == "error" and not f["fixable"]
    assert f["message"] == ("vLLM 0.33.0 will not start: `--prefix-caching-hash-algo` accepts sha256, sha256_cbor, "
                            "xxhash, xxhash_cbor; `builtin` was removed in vLLM 0.10.2")
    assert "invalid choice: 'builtin'" in f["detail"] and "accepted up to vLLM 0.10.1" in f["detail"]
    assert "runs vLLM 0.10.0 today" in f["detail"]


def test_vl308_without_a_target_checks_the_release_the_launch_runs(tmp_path, monkeypatch):
    """No target named: `builtin` is right for the v0.10.0 image, `sha256_cbor` is not (new in
    0.10.2), and a launch whose release is unknown is not judged."""
    assert findings("VL308/k8s-removed-value-at-target", "--select", "VL308",
                    tmp_path=tmp_path / "a", monkeypatch=monkeypatch) == []
    rows = findings("VL308/compose-refused-by-its-own-release", "--select", "VL308",
                    tmp_path=tmp_path / "b", monkeypatch=monkeypatch)
    assert [r["message"].split(": ", 1)[0] for r in rows] == ["vLLM 0.10.0 will not start"] * 2
    assert rows[0]["message"].endswith("`sha256_cbor` is new in vLLM 0.10.2")
    assert rows[1]["message"].endswith("`BF16` is not one of them; did you mean `bfloat16`?")
    assert findings("VL308/unknown-release-no-target", "--select", "VL308",
                    tmp_path=tmp_path / "c", monkeypatch=monkeypatch) == []
    [named] = findings("VL308/unknown-release-no-target", "--select", "VL308", "--target-version", "0.33.0",
                       tmp_path=tmp_path / "d", monkeypatch=monkeypatch)[:1]
    assert "`bogus` is not one of them" in named["message"]


def test_vl308_engine_keyword_is_named_as_written(tmp_path, monkeypatch):
    [f] = findings("VL308/python-engine-kwargs", "--select", "VL308", "--target-version", "0.16.0",
                   tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert f["message"] == ("vLLM 0.16.0 will not start: `convert` accepts auto, none, embed, classify; "
                            "`reward` was removed in vLLM 0.16.0")
    assert "engine arguments refuse it" in f["detail"]
