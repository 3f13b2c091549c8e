"""The door for embedded content (parsers/embedded.py) and ConfigMap scripts read through it."""
from __future__ import annotations

from pathlib import Path

from vllmlint.parsers import embedded
from vllmlint.parsers.yamlfile import parse_yaml
from vllmlint.model.launch import SourceFile

ROOT = Path(__file__).resolve().parents[1]


def yaml_file(text: str) -> SourceFile:
    return SourceFile(Path("/x/deploy.yaml"), "deploy.yaml", text, "k8s")


def test_every_front_end_registers_with_the_door():
    assert {"yaml", "dockerfile", "python", "shell", "apptainer"} <= set(embedded.kinds())


def test_guess_kind():
    g = embedded.guess_kind
    assert g("anything", "serve.py") == "python"
    assert g("anything", "start.sh") == "shell"
    assert g("#!/usr/bin/env python3\nprint(1)\n") == "python"
    assert g("#!/bin/bash\nvllm serve m\n") == "shell"
    assert g("from ray import serve\n") == "python"
    assert g("set -euo pipefail\nexec vllm serve m\n") == "shell"
    assert g("apiVersion: v1\nkind: Pod\n") == "yaml"
    assert g("max_model_len = 8192\n# a config\n") is None
    assert g("#!/usr/bin/env node\n") is None


def test_unknown_kind_reads_nothing():
    f = yaml_file("x: 1\n")
    assert embedded.read(f, "cobol", 0, 4) is None


def test_configmap_python_script_gets_the_pod_that_mounts_it():
    text = (ROOT / "fixtures/VL302/configmap-python-script-ray-serve/input/ray-serve.yaml").read_text()
    pf = parse_yaml(yaml_file(text))
    [launch] = pf.launches
    assert launch.program == "ray.serve.llm.LLMConfig"
    assert launch.line == 10 and launch.file is pf.source
    assert "run by container ray-head (RayCluster/llm)" in launch.context
    assert launch.image is None                 # rayproject/ray-llm is not a vLLM build: no release from it
    keyword = next(a for a in launch.argv if a.value.startswith("--enable-mamba"))
    s, e = keyword.span
    assert text[s:e] == "enable_mamba_fine_grained_prefix_cache=True"      # the block scalar's own bytes


def test_configmap_shell_script_inherits_image_and_env():
    text = (ROOT / "fixtures/VL302/configmap-shell-script-mounted/input/start.yaml").read_text()
    [launch] = parse_yaml(yaml_file(text)).launches
    assert launch.image == "vllm/vllm-openai:v0.31.0"
    assert [(e.name, e.value) for e in launch.env] == [("MODEL", "ibm-granite/granite-4.0-tiny-preview")]
    assert launch.line == 9
    assert "run by container vllm (Deployment/vllm)" in launch.context


def test_configmap_script_no_pod_mounts_is_read_without_image():
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n" \
           "  run.sh: |\n    vllm serve m --max-model-len 4\n"
    [launch] = parse_yaml(yaml_file(text)).launches
    assert launch.image is None and launch.env == []
    assert [a.value for a in launch.argv] == ["vllm", "serve", "m", "--max-model-len", "4"]


def test_configmap_pod_mounting_but_never_running_the_script_gives_nothing():
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  run.sh: |\n"
            "    vllm serve m\n---\n"
            "kind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: c\n      image: vllm/vllm-openai:v0.30.0\n"
            "      args: [other]\n      volumeMounts: [{name: v, mountPath: /s}]\n"
            "  volumes: [{name: v, configMap: {name: s}}]\n")
    launches = parse_yaml(yaml_file(text)).launches
    script = [l for l in launches if "ConfigMap" in l.context]
    assert len(script) == 1 and script[0].image is None


def test_configmap_data_that_is_no_script_is_not_read():
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  notes.txt: |\n    vllm is used here\n" \
           "  VLLM_LOGGING_LEVEL: DEBUG\n"
    pf = parse_yaml(yaml_file(text))
    assert pf.launches == []
    assert [e.name for e in pf.configmaps["s"]] == ["notes.txt", "VLLM_LOGGING_LEVEL"]


def test_configmap_python_script_in_a_chart_template_keeps_its_actions():
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-serve\ndata:\n"
            "  serve.py: |\n    from ray.serve.llm import LLMConfig\n"
            "    LLMConfig(engine_kwargs=dict(max_model_len={{ .Values.maxLen }}, enforce_eager=True))\n")
    [launch] = parse_yaml(yaml_file(text)).launches
    assert [(a.value, a.dynamic) for a in launch.argv[1:]] == [
        ("--max-model-len={{ .Values.maxLen }}", True), ("--enforce-eager", False)]
