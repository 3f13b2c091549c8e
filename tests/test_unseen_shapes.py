"""Shapes users met on real repositories (2026-12-05, fourth stop), each with its neighbours:
what crashed, what was reported in the wrong place, and what was judged by the wrong table."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main


def _run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


HELPER = "def build():\n    out = []\n    out.append('x')\n    return out\n"


@pytest.mark.parametrize("tail, launches", [
    ("", 0),                                                   # no call: nothing to read
    ("import subprocess\nsubprocess.run(build())\n", 0),      # a call: which definition is not ours to guess
    ("def build():\n    return ['vllm', 'serve', 'm']\n", 1),  # an argv literal is read where written
])
def test_a_function_defined_twice_is_read(tmp_path, tail, launches):
    """coder-cong/PesticideRecipeGen: a notebook-style script defining the same function twice,
    each returning a list it built, made every command exit 2 ("nested too deeply to read"):
    two equal argv chains were compared field by field through their scopes, without end."""
    _tree(tmp_path, {"client.py": "# talks to vllm\n" + HELPER + HELPER + tail})
    result = _run("launches", ".")
    assert result.exit_code == 0, result.output
    assert "could not be read" not in result.output
    assert len(result.output.splitlines()) == launches


@pytest.mark.parametrize("written, advice", [
    ("--task embed", "use `--convert embed` on a generative model, `--runner pooling` on a pooling one"),
    ("--task=embedding", "use `--convert embed` on a generative model"),
    ("--task classify", "use `--convert classify` on a generative model"),
    ("--task reward", "use `--convert reward` on a generative model"),
    ("--task score", "use `--convert classify` (`embed` if it is no classifier)"),
    ("--task draft", "use `--runner draft`"),
    ("--task generate", "remove it (a generative task is the default)"),
    ("--task auto", "remove it (a generative task is the default)"),
    ('--task "$TASK"', "for pooling: `--convert embed` (or classify, reward)"),
])
def test_a_removed_task_names_what_its_value_became(tmp_path, written, advice):
    """tomasruizt/llm_app: "remove it" for `--task embed` would serve an embedding deployment
    with the generate runner (/v1/embeddings gone, no error at startup). vLLM 0.11.0's own
    deprecation hints (vllm/config/model.py) say what each value became."""
    _tree(tmp_path, {"serve.sh": f"#!/bin/sh\nvllm serve Qwen/Qwen2.5-0.5B {written} --port 8001\n"})
    out = _run("check", "--select", "VL302", ".").output
    assert "`--task` was removed in vLLM 0.13.0" in out and advice in out, out


def test_an_engine_keyword_is_named_as_written(tmp_path):
    """infinityreader/RARE: `LLM(swap_space=16)` was reported as the CLI flag `--swap-space`
    refused by argparse; the keyword is what the user wrote, and the engine arguments'
    constructor is what refuses it."""
    _tree(tmp_path, {"offline.py": "from vllm import LLM\n\nllm = LLM(model='m', swap_space=16, task='embed')\n"})
    out = _run("check", "--select", "VL302", "--show-details", ".").output
    assert "`swap_space` was removed in vLLM 0.18.0" in out, out
    assert "TypeError: unexpected keyword argument 'swap_space'" in out
    assert "use `convert='embed'` on a generative model, `runner='pooling'` on a pooling one" in out
    assert "--swap-space" not in out and "unrecognized arguments" not in out


CONFIG = "max-model-len: 8192\nswap-space: 4\ndisable-log-requests: true\n"


def test_the_options_of_a_config_file_are_the_launchs(tmp_path):
    """coder-cong/PesticideRecipeGen: `vllm serve --config vllm_config.yaml` held its flags in the
    file, unseen; vLLM reads them as `--key value` after the subcommand. They are reported where
    they are written, and never edited there (a key is not a flag)."""
    root = _tree(tmp_path, {"serve.sh": "#!/bin/bash\nvllm serve Qwen/Qwen2.5-0.5B --config serve.yaml --port 8000\n",
                            "serve.yaml": CONFIG})
    out = _run("check", ".").output
    assert "serve.yaml:2:1: VL302 error: `--swap-space` was removed in vLLM 0.18.0" in out, out
    assert "serve.yaml:3:1: VL302" in out
    launch = _run("launches", ".").output
    assert "vllm serve Qwen/Qwen2.5-0.5B --max-model-len 8192 --swap-space 4 --disable-log-requests --config" in launch
    _run("check", "--fix", "--unsafe-fixes", ".")
    assert (root / "serve.yaml").read_text() == CONFIG


def test_an_options_file_a_container_reads_is_not_the_trees(tmp_path):
    """A container's `--config x.yaml` is relative to its image's WORKDIR: the tree's file of that
    name is not known to be the one it reads."""
    _tree(tmp_path, {"run.sh": "#!/bin/bash\ndocker run vllm/vllm-openai:v0.30.0 --model m --config serve.yaml\n",
                     "serve.yaml": CONFIG})
    assert "VL302" not in _run("check", ".").output


def test_a_parse_reused_reads_its_options_file_again(tmp_path):
    """The editor keeps parses while a file's text is unchanged: a changed options file is read again."""
    from vllmlint.lint.project import ParseCache, parse_source
    from vllmlint.lint.sources import read_source

    root = _tree(tmp_path, {"serve.sh": "#!/bin/bash\nvllm serve m --config serve.yaml\n", "serve.yaml": CONFIG})
    source = read_source(root / "serve.sh", "serve.sh", "shell")
    cache = ParseCache()
    cache.put(source, parse_source(source))
    assert cache.get(source) is not None
    (root / "serve.yaml").write_text("max-model-len: 4096\n")
    assert cache.get(source) is None


PD = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.10.0
          command: ["vllm", "serve", "m", "--port", "{port}"{extra}, "--kv-transfer-config",
                    '{{"kv_connector":"NixlConnector","kv_role":"{role}"}}']
          env:
            - name: VLLM_USE_V1
              value: "1"
"""


@pytest.mark.parametrize("broken", ["prefill", "decode", None])
def test_a_tag_stays_while_an_error_is_left_for_a_human(tmp_path, broken):
    """A bump past an error `migrate` leaves ("vLLM 0.33.0 will not start") merges a deployment
    that breaks: the tag stays, the fixes of the launches it runs wait with it, and the two sides
    of a P/D pair move together (llm-d/llm-d-kv-cache-manager's refused value, and the redteam's
    `--swap-space` in Helm templates, were bumped past before)."""
    files = {f"{n}.yaml": PD.format(name=n, port=p, role=r, extra=', "--swap-space", "4"' if n == broken else "")
             for n, p, r in (("prefill", 8000, "kv_producer"), ("decode", 8001, "kv_consumer"))}
    root = _tree(tmp_path, files)
    out = _run("migrate", "--to", "0.33.0", ".").output
    if broken is None:
        assert all("v0.33.0" in (root / n).read_text() for n in files), out
        assert all("VLLM_USE_V1" not in (root / n).read_text() for n in files)
        return
    assert {n: (root / n).read_text() for n in files} == files, out
    assert out.count(f"kept: {broken}.yaml:10:") == 2 and "(VL302) is left for a human" in out, out


@pytest.mark.parametrize("value, kept", [("0", True), ("1", False)])
def test_a_launch_that_chose_v0_keeps_the_sign(tmp_path, value, kept):
    """mobiusml/aana_sdk: `VLLM_USE_V1=0` set in the branch of a model that needed the V0 engine
    was removed as "nothing replaces it"; the engine it chose is gone since 0.11.0, which is for a
    human to weigh, so the line stays and the finding says so."""
    text = f"FROM vllm/vllm-openai:v0.10.1\nENV VLLM_USE_V1={value}\nCMD [\"vllm\", \"serve\", \"m\"]\n"
    root = _tree(tmp_path, {"Dockerfile": text})
    out = _run("migrate", "--to", "0.33.0", ".").output
    assert ("VLLM_USE_V1=0 asked for the V0 engine, gone since vLLM 0.11.0" in out) == kept, out
    assert ("ENV VLLM_USE_V1" in (root / "Dockerfile").read_text()) == kept


def test_a_script_beside_a_kept_pin_keeps_its_config(tmp_path):
    """Found on the final code of 2026-12-05 (a helper's probe): the pin was kept for a.sh's
    removed flag, and b.sh, which runs the same pin, still had its env rewritten into a flag
    0.8.5 does not know. Every launch of a kept place keeps its config."""
    files = {"requirements.txt": "vllm==0.8.5\n",
             "a.sh": "#!/bin/bash\nvllm serve Qwen/Qwen2.5-0.5B --swap-space 4\n",
             "b.sh": "#!/bin/bash\nexport VLLM_ATTENTION_BACKEND=FLASHINFER\nvllm serve Qwen/Qwen2.5-0.5B --port 8001\n"}
    root = _tree(tmp_path, files)
    out = _run("migrate", "--to", "0.33.0", ".").output
    assert {n: (root / n).read_text() for n in files} == files, out
    assert "requirements.txt:1: pin vllm==0.8.5: kept: a.sh:2:30 (VL302) is left for a human" in out
    assert "its release stays while a.sh:2:30 (VL302) is left for a human" in out


def test_an_entrypoint_two_environments_run_keeps_its_config_for_the_blocked_one(tmp_path):
    """civo-learn/civo-vllm-docker's layout (a helper's probe): a GPU and a CPU Dockerfile copy
    one entrypoint; the CPU pin is blocked (a `+cpu` torch build), so the entrypoint keeps the
    config that release reads, while the GPU pin moves."""
    docker = "FROM python:3.12\nCOPY {req} /tmp/r.txt\nRUN pip install -r /tmp/r.txt\nCOPY entrypoint.sh /e.sh\nCMD [\"/e.sh\"]\n"
    files = {"Dockerfile": docker.format(req="requirements.txt"),
             "Dockerfile-cpu": docker.format(req="requirements-cpu.txt"),
             "requirements.txt": "vllm==0.8.5\n", "requirements-cpu.txt": "vllm==0.8.5\ntorch==2.6.0+cpu\n",
             "entrypoint.sh": "#!/bin/bash\nexport VLLM_ATTENTION_BACKEND=FLASHINFER\nvllm serve \"$MODEL\"\n"}
    root = _tree(tmp_path, files)
    out = _run("migrate", "--to", "0.33.0", ".").output
    assert (root / "entrypoint.sh").read_text() == files["entrypoint.sh"], out
    assert (root / "requirements-cpu.txt").read_text() == files["requirements-cpu.txt"]
    assert "(not fixed: its vLLM pin is not bumped, see the blocker)" in out
