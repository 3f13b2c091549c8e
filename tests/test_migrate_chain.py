"""`vllmlint migrate --from 0.27.0 --to 0.33.0`: one step per catalogued release, each applying
that release's safe fixes on the result of the step before (fixtures/migrate-chain)."""
from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from vllmlint.cli import main
from vllmlint.lint.migrate import steps_between

ROOT = Path(__file__).resolve().parent.parent
CHAIN = ROOT / "fixtures" / "migrate-chain"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_steps_between():
    assert steps_between((0, 27, 0), (0, 33, 0)) == [(0, 28, 0), (0, 29, 0), (0, 30, 0), (0, 31, 0), (0, 32, 0),
                                                   (0, 33, 0)]
    assert steps_between((0, 29, 0), (0, 30, 0)) == [(0, 30, 0)]
    assert steps_between((0, 30, 0), (0, 30, 0)) == [(0, 30, 0)]
    assert steps_between(None, (0, 31, 0)) == [(0, 31, 0)]
    assert steps_between((0, 29, 1), (0, 31, 2)) == [(0, 30, 0), (0, 31, 0), (0, 31, 2)]


def test_chain_from_0_27_to_0_33(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(CHAIN, tree)
    before = snapshot(tree)
    preview = invoke("migrate", "--from", "0.27.0", "--to", "0.33.0", "--diff", str(tree))
    assert snapshot(tree) == before, "--diff writes nothing"
    assert "+            - '--mm-hasher-algorithm=sha256'" in preview.stdout

    result = invoke("migrate", "--from", "0.27.0", "--to", "0.33.0", str(tree))
    out = result.stdout
    assert result.exit_code == 1, out             # the legacy deployment is left for a human
    assert "Migration to vLLM 0.33.0: changed 4 files." in out
    assert "from vLLM 0.27.0 (--from), 6 steps: 0.28.0, 0.29.0, 0.30.0, 0.31.0, 0.32.0, 0.33.0" in out
    steps = out.split("  step ")[1:]
    by_step = {s.split(":", 1)[0]: s for s in steps}
    assert "VL302 error: `--calculate-kv-scales` was removed in vLLM 0.28.0" in by_step["0.28.0"]
    assert "fixed VL303" in by_step["0.29.0"] and "fixed VL104" in by_step["0.29.0"]
    assert by_step["0.30.0"].count("fixed VL303") == 2 and "fixed VL001" in by_step["0.30.0"]
    assert by_step["0.31.0"].startswith("0.31.0: nothing to change")
    assert "  steps " not in out, "a single idle step keeps its own line"
    assert "fixed VL303" in by_step["0.32.0"] and "needs a human" in by_step["0.32.0"] \
        and "legacy.yaml:16:15 (VL302) is left for a human)" \
        in by_step["0.32.0"]
    assert "fixed VL303" in by_step["0.33.0"]
    assert "image tag vllm/vllm-openai:v0.27.0 -> vllm/vllm-openai:v0.33.0" in out
    assert "Left for a human (3):" in out
    # the legacy deployment keeps an error no fix resolves: its tag and its config stay
    assert ("k8s/legacy.yaml:10: image tag vllm/vllm-openai:v0.27.0: kept: " in out
            and "k8s/legacy.yaml:16:15 (VL302) is left for a human and breaks a launch it runs on vLLM 0.33.0" in out)

    after = snapshot(tree)
    assert after["k8s/legacy.yaml"] == before["k8s/legacy.yaml"]
    prefill = after["k8s/prefill.yaml"]
    assert "image: vllm/vllm-openai:v0.33.0" in prefill
    assert "- '--mm-hasher-algorithm=sha256'\n            - '--enable-scale-out'\n" in prefill
    assert "enable_cross_layers_blocks" not in prefill and "env:" not in prefill
    assert after["scripts/serve.sh"] == ("#!/usr/bin/env bash\nset -euo pipefail\nexport VLLM_TRITON_USE_TD=1\n"
                                         "exec vllm serve Qwen/Qwen3-8B --port 8000 --attention-backend TRITON_ATTN\n")
    assert after["docker/Dockerfile"] == ('FROM vllm/vllm-openai:v0.33.0\nENTRYPOINT ["vllm", "serve"]\n'
                                          'CMD ["Qwen/Qwen3-8B", "--port", "8000", '
                                          '"--prefix-cache-retention-interval=30"]\n')
    assert after["requirements.txt"] == "vllm==0.33.0\n"

    again = invoke("migrate", "--to", "0.33.0", str(tree))
    assert "changed 0 files." in again.stdout and snapshot(tree) == after


def test_chain_detects_the_current_release(tmp_path):
    """Without --from, the oldest image tag / pin in the tree is where the chain starts."""
    tree = tmp_path / "tree"
    shutil.copytree(CHAIN, tree)
    result = invoke("migrate", "--to", "0.33.0", str(tree))
    assert "from vLLM 0.27.0 (image tag vllm/vllm-openai:v0.27.0 (" in result.stdout
    assert "6 steps" in result.stdout


def test_one_step_keeps_the_plain_summary(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(CHAIN, tree)
    result = invoke("migrate", "--from", "0.32.0", "--to", "0.33.0", str(tree))
    assert "steps:" not in result.stdout and "  step " not in result.stdout
    assert "fixed VL303 removed-env-var" in result.stdout


def test_changed_defaults_are_listed_and_pinned_with_keep_defaults(tmp_path):
    """VL307 in migrate: listed under "changes behaviour silently" (not as work for a human);
    --keep-defaults pins today's value, and the pinned flags are listed no more."""
    tree = tmp_path / "tree"
    shutil.copytree(CHAIN.parent / "VL307" / "k8s-args-0.31-to-0.33" / "input", tree)
    out = invoke("migrate", "--to", "0.33.0", "--diff", str(tree))
    text = out.stdout + (out.stderr or "")
    assert "Changes behaviour silently (2):" in text and "Left for a human" not in text
    assert "`--allowed-origins` is not set: its default changes from `[\"*\"]`" in text
    assert out.exit_code == 1, "changes are pending: --diff exits 1"
    report = tmp_path / "migration.md"
    pinned = invoke("migrate", "--to", "0.33.0", "--keep-defaults", "--report", str(report), str(tree))
    assert pinned.exit_code == 0, pinned.stdout
    yaml_text = (tree / "deploy.yaml").read_text()
    assert yaml_text.endswith("            - hermes\n            - --allowed-origins=[\"*\"]\n"
                              "            - --tool-strict-level=auto\n")
    assert "Changes behaviour silently" not in pinned.stdout
    assert "image: vllm/vllm-openai:v0.33.0" in yaml_text
    again = invoke("check", "--select", "VL307", "--target-version", "0.33.0", "--fail-level", "info", str(tree))
    assert again.exit_code == 0, again.stdout


def test_keep_defaults_pins_only_what_the_last_release_starts_with(tmp_path, monkeypatch):
    """A pin written at a step must also start the release the chain ends on: 0.8.5's
    `--scheduler-cls` default (the V0 `vllm.core.scheduler.Scheduler`) changes in 0.12.0, a
    release whose modules the catalogue does not list, and the class is gone by 0.33.0: it is
    not pinned (found as a user on KempnerInstitute/distributed-inference-vllm), the others are."""
    (tmp_path / "requirements.txt").write_text("vllm==0.8.5\n")
    (tmp_path / "serve.sh").write_text("#!/bin/bash\nvllm serve /models/llama --tensor-parallel-size 4\n")
    monkeypatch.chdir(tmp_path)
    result = invoke("migrate", "--to", "0.33.0", "--keep-defaults", ".")
    script = (tmp_path / "serve.sh").read_text()
    assert "--scheduler-cls" not in script, script
    assert "'--allowed-origins=[\"*\"]'" in script, script
    said = invoke("migrate", "--from", "0.8.5", "--to", "0.33.0", "--diff", ".").output
    assert "`--scheduler-cls` is not set" not in said or "that class does not exist" in said


def test_a_release_older_than_the_catalogue_is_said(tmp_path, monkeypatch):
    """vLLM 0.4.2 predates the oldest catalogued release (0.6.6): the chain starts there and says
    that what changed before it is not checked (found on a repository still on v0.4.2)."""
    (tmp_path / "run.sh").write_text("#!/bin/sh\ndocker run --gpus all vllm/vllm-openai:v0.4.2 --model m\n")
    monkeypatch.chdir(tmp_path)
    result = invoke("migrate", "--to", "0.33.0", "--diff", ".")
    said = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert "vLLM 0.4.2 is older than the oldest release vllmlint knows (0.6.6)" in said
    quiet = invoke("migrate", "--from", "0.27.0", "--to", "0.33.0", "--diff", ".")
    assert "older than the oldest release" not in quiet.output


def test_a_value_the_target_refuses_is_left_for_a_human(tmp_path):
    """`--prefix-caching-hash-algo builtin` on v0.10.0, migrated to 0.33.0 (found as a user on
    llm-d/llm-d-kv-cache-manager): the refused value is listed for a human, and the tag stays
    with the config (2026-12-05: a bump past an error it leaves would merge a server that does not
    start; lint.migrate.held_refs)."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "fixtures" / "VL308" / "k8s-removed-value-at-target" / "input", tree)
    result = invoke("migrate", "--to", "0.33.0", "--diff", str(tree))
    assert result.stdout == "", result.stdout
    out = result.output
    assert "Left for a human (2):" in out
    left = out.split("Left for a human (2):", 1)[1]
    assert "deploy.yaml:13: image tag vllm/vllm-openai:v0.10.0: kept: " in left
    assert "VL308 error: vLLM 0.33.0 will not start: `--prefix-caching-hash-algo` accepts" in left
    assert "`builtin` was removed in vLLM 0.10.2" in left
