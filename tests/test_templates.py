"""Terraform and Jinja templates of YAML, shell and Python (parsers/templates.py): read as the
file they render, directives blank, interpolations known at run time."""
from __future__ import annotations

from pathlib import Path

import pytest

from vllmlint.lint.discovery import classify
from vllmlint.lint.project import parse_source
from vllmlint.model.launch import SourceFile
from vllmlint.parsers import templates

ROOT = Path(__file__).resolve().parents[1]


def source(case: str, name: str, kind: str) -> SourceFile:
    path = ROOT / "fixtures/VL302" / case / "input" / name
    return SourceFile(path, name, path.read_text(), kind)


def argv(launch) -> list[tuple[str, bool]]:
    return [(a.value, a.dynamic) for a in launch.argv]


def test_mask_keeps_length_and_escapes():
    text = 'a %{ for x in xs ~}\n${x} $${HOME} %%{ no } ${f({a = "}"})}\n%{ endfor }'
    masked, spans = templates.mask(text, "terraform", "shell")
    assert len(masked) == len(text) and masked.count("\n") == text.count("\n")
    assert [text[s:e] for s, e in spans] == ["%{ for x in xs ~}", "${x}", '${f({a = "}"})}', "%{ endfor }"]
    assert "$${HOME}" in masked and "%%{ no }" in masked


def test_jinja_spans():
    d, i = templates.spans("{# c #}{% if a %}x {{ b }}{% endif %}", "jinja")
    assert d == [(0, 7), (7, 17), (26, 37)] and i == [(19, 26)]


def test_terraform_shell_template_glued_flag_is_dynamic_literal_flags_are_not():
    [launch] = parse_source(source("terraform-template-shell", "start-vllm.sh.tftpl", "shell")).launches
    got = dict(argv(launch))
    assert got["--tensor-parallel-size=${tp}"] is True
    assert got["${model}"] is True
    assert got["--max-model-len"] is False and got["8192"] is False
    assert got["--enable-mamba-fine-grained-prefix-cache"] is False
    assert launch.line == 6


def test_jinja_python_template_values_as_written():
    [launch] = parse_source(source("jinja-template-python", "serve.py.j2", "python")).launches
    assert argv(launch)[2:] == [("{{ model }}", True), ("--max-model-len={{ max_len }}", True),
                                ("--enable-mamba-fine-grained-prefix-cache", False)]


def test_jinja_shell_template():
    [launch] = parse_source(source("jinja-template-shell", "start.sh.j2", "shell")).launches
    assert ("--port={{ port }}", True) in argv(launch)
    assert ("{{ tp }}", True) in argv(launch)


def test_terraform_cloud_init_yaml():
    [launch] = parse_source(source("terraform-template-cloud-init", "cloud-init.yaml.tftpl", "yaml")).launches
    assert launch.image == "vllm/vllm-openai:${vllm_version}"
    assert ("${model}", True) in argv(launch)


def test_format_spans_fields_and_escapes():
    text = 'x={{ "a": {n} }}, port={port}, {obj.attr[0]!r:>8}'
    escapes, fields = templates.format_spans(text)
    assert [text[s:e] for s, e in fields] == ["{n}", "{port}", "{obj.attr[0]!r:>8}"]
    assert [text[s:e] for s, e in escapes] == ["{{", "}}"]


@pytest.mark.parametrize("text", [
    "no fields at all",
    "a JSON map {\"a\": 1}",              # a brace that opens no field
    "a lone } brace {x}",
    "nested {x:{width}}",
    "unclosed {x",
])
def test_format_spans_refuses_what_str_format_would_not_render(text):
    assert templates.format_spans(text) is None


@pytest.mark.parametrize("name, text, engine", [
    ("vllm.yaml.tpl", "run: vllm serve {model}\n", "format"),
    ("start.sh.tpl", "exec vllm serve ${model}\n", "terraform"),       # Terraform syntax wins
    ("start.sh.tftpl", "exec vllm serve {model}\n", "terraform"),      # the name says Terraform
    ("start.sh.j2", "exec vllm serve {{ model }}\n", "jinja"),
    ("helpers.tpl", '{{- define "x" -}}\n', "terraform"),             # Go: no single-brace field
])
def test_template_engine(name, text, engine):
    assert templates.template_engine(name, text) == engine


def test_format_python_template_parses_and_fields_are_dynamic():
    """Found on Tandemn-Labs/tandemn-tuna: a `str.format` template of a Modal app was reported as
    a Python syntax error (exit 2); its fields are now placeholders, `{{` a brace, and a field
    alone on its line (a fragment of code) a blank."""
    parsed = parse_source(source("format-template-python", "server.py.tpl", "python"))
    [launch] = parsed.launches
    assert argv(launch)[2:5] == [("{model}", True), ("--max-model-len", False), ("{max_model_len}", True)]
    assert ("--disable-log-requests", False) in argv(launch)


def test_format_yaml_and_shell_templates():
    [launch] = parse_source(source("format-template-yaml", "service.yaml.tpl", "yaml")).launches
    assert ("{model}", True) in argv(launch) and ("--swap-space", False) in argv(launch)
    [launch] = parse_source(source("format-template-shell", "launch.sh.tpl", "shell")).launches
    assert ("{port}", True) in argv(launch) and ("--disable-log-requests", False) in argv(launch)


@pytest.mark.parametrize("name, head, kind", [
    ("start-vllm.sh.tftpl", b"exec vllm serve ${model}\n", "shell"),
    ("serve.py.j2", b"import subprocess\nsubprocess.run(['vllm', 'serve'])\n", "python"),
    ("user-data.tftpl", b"#cloud-config\nruncmd:\n  - docker run vllm/vllm-openai:${v}\n", "yaml"),
    ("compose.yml.jinja", b"services:\n  vllm:\n    image: vllm/vllm-openai\n", "yaml"),
    ("app.py.jinja2", b"from ray.serve.llm import LLMConfig\n", "python"),
    ("_helpers.tpl", b'{{- define "vllm.name" -}}\nvllm\n{{- end }}\n', None),     # a Helm partial
    ("start.sh.tftpl", b"exec sglang serve ${model}\n", None),                     # no way vLLM starts
    ("notes.txt.j2", b"vllm serve {{ model }}\n", None),                            # a text, no script
    # production-stack values as a Terraform template, after a comment (found on brokedba/vllm-lab)
    ("cpu-values.tpl", b"# a Go template; Terraform fills .VarName\nservingEngineSpec:\n  modelSpec:\n"
                       b"  - name: tiny\n    repository: vllm/vllm-openai\n    tag: v0.8.5\n", "yaml"),
    ("notes.tpl", b"# notes\nsummary: vllm serve is started by the chart\n", None),      # no YAML head we read
])
def test_discovery_reads_templates_by_inner_kind(name, head, kind):
    assert classify(Path(name), head) == kind
