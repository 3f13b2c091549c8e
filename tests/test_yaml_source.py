"""Tests for vllmlint.parsers.yaml_source (template masking, composition, scalar offsets)."""
from __future__ import annotations

import random
import re

import pytest
import yaml

import vllmlint.parsers.yaml_source as ys
from vllmlint.parsers.yaml_source import (
    YamlError,
    compose_all,
    iter_nodes,
    mask_templates,
    scalar_offsets,
)

BREAKS = "\r\n\x85\u2028\u2029"

# ---------------------------------------------------------------------------------------------
# Samples
# ---------------------------------------------------------------------------------------------

K8S_FLOW_ARGS = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-llama
  labels: {app: vllm, tier: "inference"}
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          args: ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "2",
                 --max-model-len, '8192', "--served-model-name=llama"]
          ports:
            - containerPort: 8000
"""

K8S_SH_SCRIPT = """\
apiVersion: v1
kind: Pod
metadata:
  name: vllm
spec:
  containers:
    - name: server
      image: vllm/vllm-openai:latest
      command: ["/bin/sh","-c"]
      args:
        - |
          pip install --no-cache-dir flashinfer && \\
          vllm serve "$MODEL" \\
            --port 8000 \\
            --override-generation-config '{"temperature": 0.2, "top_p": 0.9}' \\
            --chat-template /templates/chat.jinja

          echo "done"  # trailing comment stays in the script
      env:
        - name: MODEL
          value: "Qwen/Qwen2.5-7B-Instruct"
        - {name: VLLM_USE_V1, value: "1"}
"""

COMPOSE_FOLDED = """\
services:
  vllm:
    image: vllm/vllm-openai:latest
    # folded command: line breaks become spaces
    command: >
      --model mistralai/Mistral-7B-Instruct-v0.3
      --gpu-memory-utilization 0.9
      --max-num-seqs 128
    environment:
      - HF_TOKEN=${HF_TOKEN}
      - "VLLM_ATTENTION_BACKEND=FLASHINFER"
    ports: ["8000:8000"]
    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all, capabilities: [gpu]}]}}}
"""

DOUBLE_QUOTED_JSON = """\
args:
  - "--override-generation-config={\\"temperature\\": 0.7, \\"max_tokens\\": 512}"
  - "--kv-transfer-config"
  - "{\\"kv_connector\\":\\"PyNcclConnector\\",\\"kv_role\\":\\"kv_both\\"}"
  - "tab\\there\\nnewline \\\\ backslash \\/ slash \\x41\\u00e9\\U0001F600"
"""

SINGLE_QUOTED_JSON = """\
args:
  - '--speculative-config={"model": "ngram", "num_speculative_tokens": 5}'
  - 'it''s quoted'
  - '--compilation-config={"level": 3,
      "cudagraph_capture_sizes": [1, 2, 4]}'
"""

MULTI_DOC = """\
# leading comment
defaults: &defaults
  image: vllm/vllm-openai:latest
  args: [--dtype, bfloat16]
server:
  <<: *defaults
  extra: plain scalar that
    continues on the next line

    and keeps a paragraph
---
? complex key
: !!str 123
tagged: !custom &anc value
again: *anc
empty:
null_value: ~
...
"""

BLOCK_VARIANTS = """\
literal: |
  line one
    indented two

  after blank
strip: |-
  no trailing newline
keep: |+
  keep trailing

indicator: |2
    two extra spaces
   one extra
folded: >
  vllm serve model
  --port 8000

  new paragraph
    more indented
  back
folded_strip: >-
  a
  b
last: end
"""

CRLF_SAMPLE = (K8S_SH_SCRIPT + COMPOSE_FOLDED.replace("services:", "other:")).replace("\n", "\r\n")

HELM_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "vllm.fullname" . }}
  labels:
    {{- include "vllm.labels" . | nindent 4 }}
spec:
  {{- if not .Values.autoscaling.enabled }}
  replicas: {{ .Values.replicaCount }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "vllm.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      annotations:
        checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    spec:
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .Chart.Name }}
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          args:
            - --model={{ .Values.model.name }}
            - "--port"
            - {{ .Values.service.port | quote }}
            - '{{ .Values.dtype | default "auto" }}'
            - "{{ .Values.maxLen | default \\"4096\\" }}"
            {{- range .Values.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          ports: [{{ .Values.service.port }}, 9090]
          env:
            {{- range $key, $value := .Values.env }}
            - name: {{ $key }}
              value: {{ $value | quote }}
            {{- end }}
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
{{/* a multi-line
     comment with }} and "quotes" inside */}}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
"""

HELM_SCRIPT = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-scripts" (include "vllm.fullname" .) | trunc 63 }}
data:
  start.sh: |
    {{- if .Values.debug }}
    set -x
    {{- end }}
    exec vllm serve {{ .Values.model | quote }} \\
      --tensor-parallel-size {{ .Values.tp }} \\
      {{- if .Values.lora }}
      --enable-lora \\
      {{- end }}
      --port 8000
  config.json: {{ .Values.config | toJson | quote }}
  multi: {{ include "vllm.args" (dict
      "ctx" .
      "extra" .Values.extra) }}
"""

HELM_SAMPLES = [HELM_DEPLOYMENT, HELM_SCRIPT]

PLAIN_SAMPLES = [
    K8S_FLOW_ARGS,
    K8S_SH_SCRIPT,
    COMPOSE_FOLDED,
    DOUBLE_QUOTED_JSON,
    SINGLE_QUOTED_JSON,
    MULTI_DOC,
    BLOCK_VARIANTS,
    CRLF_SAMPLE,
]


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer("\r\n|[\r\n\x85\u2028\u2029]", text)]


def scalars(docs):
    return [n for n in iter_nodes(*docs) if isinstance(n, yaml.ScalarNode)]


def find_scalar(docs, value):
    found = [n for n in scalars(docs) if n.value == value]
    assert found, f"no scalar {value!r}"
    return found[0]


def check_offsets(text: str, node: yaml.ScalarNode, offs) -> list[int]:
    """Generic invariants; returns the positions where the source char differs from the value."""
    assert offs is not None, f"alignment failed for {node.value!r}"
    assert len(offs) == len(node.value)
    assert all(a < b for a, b in zip(offs, offs[1:])), "offsets must be strictly increasing"
    if offs:
        assert node.start_mark.index <= offs[0] and offs[-1] < max(node.end_mark.index, offs[0] + 1)
    differ = []
    for i, (v, o) in enumerate(zip(node.value, offs)):
        src = text[o]
        if src != v:
            # Only folds/normalised breaks (-> a line-break char) and escapes (-> backslash).
            if src in BREAKS:
                assert v in " \n" or v == src
            else:
                assert node.style == '"' and src == "\\", (node.value, i, v, src)
            differ.append(i)
    return differ


@pytest.fixture(params=["libyaml", "python"])
def loader(request, monkeypatch):
    if request.param == "libyaml":
        if not hasattr(yaml, "CSafeLoader"):
            pytest.skip("libyaml not available")
        monkeypatch.setattr(ys, "_LOADER", yaml.CSafeLoader)
    else:
        monkeypatch.setattr(ys, "_LOADER", yaml.SafeLoader)
    return request.param


# ---------------------------------------------------------------------------------------------
# mask_templates
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", HELM_SAMPLES + [HELM_DEPLOYMENT.replace("\n", "\r\n")])
def test_mask_preserves_length_and_lines(text):
    masked, spans = mask_templates(text)
    assert len(masked) == len(text)
    assert line_starts(masked) == line_starts(text)
    assert spans
    prev_end = -1
    for s, e in spans:
        assert s > prev_end - 1 and text.startswith("{{", s) and text[:e].endswith("}}")
        prev_end = e
        assert "{" not in masked[s:e] and "}" not in masked[s:e]
    # Outside the actions nothing changed (except an inserted '#', see block-start test).
    inside = set()
    for s, e in spans:
        inside.update(range(s, e))
    for i, (a, b) in enumerate(zip(text, masked)):
        if i not in inside:
            assert a == b or b == "#"
    assert "{{" not in masked and "}}" not in masked


@pytest.mark.parametrize("text", HELM_SAMPLES + [HELM_DEPLOYMENT.replace("\n", "\r\n")])
def test_masked_helm_composes_and_aligns(text, loader):
    masked, _ = mask_templates(text)
    docs = compose_all(masked)
    assert docs
    nodes = scalars(docs)
    assert len(nodes) > 10
    for node in nodes:
        differ = check_offsets(masked, node, scalar_offsets(masked, node))
        for i in differ:
            assert masked[scalar_offsets(masked, node)[i]] in BREAKS or node.style == '"'


def test_mask_control_lines_vanish():
    masked, spans = mask_templates(HELM_DEPLOYMENT)
    orig_lines = HELM_DEPLOYMENT.splitlines()
    for orig, m in zip(orig_lines, masked.splitlines()):
        s = orig.strip()
        if re.fullmatch(r"(\{\{.*?\}\}\s*)+", s) and "/*" not in s:
            assert m.strip() == "", orig
    assert "{{/*" in HELM_DEPLOYMENT
    # The multi-line comment vanished entirely (newline kept).
    i = HELM_DEPLOYMENT.index("{{/*")
    j = HELM_DEPLOYMENT.index("*/}}") + 4
    assert (i, j) in spans
    assert masked[i:j].strip() == "" and masked[i:j].count("\n") == 1


def test_mask_inline_values_become_scalars():
    text = (
        "image: {{ .Values.image }}\n"
        "args:\n"
        "  - --port={{ .Values.port }}\n"
        '  - "{{ .Values.x | default "a" }}"\n'
        "  - '{{ .Values.y | default ''b'' }}'\n"
        '  - "{{ .Values.z | default \\"c\\" }}"\n'
        "flow: [{{ .a }}, {{ .b | quote }}, c]\n"
        "{{ .Values.key }}: {{ .Values.val }}\n"
        "env: ${HOME}/{{ .x }}\n"
    )
    masked, spans = mask_templates(text)
    assert len(spans) == 10
    [doc] = compose_all(masked)
    data = {k.value: v for k, v in doc.value}
    assert data["image"].value == "x" * len("{{ .Values.image }}")
    args = [n.value for n in data["args"].value]
    assert args[0] == "--port=" + "x" * len("{{ .Values.port }}")
    assert args[1] == "x" * len('{{ .Values.x | default "a" }}')
    assert args[2] == "x" * len("{{ .Values.y | default ''b'' }}")
    assert args[3] == "x" * len('{{ .Values.z | default \\"c\\" }}')
    assert [n.value for n in data["flow"].value][2] == "c"
    assert data["env"].value.startswith("${HOME}/x")
    assert "x" * len("{{ .Values.key }}") in data


def test_mask_fast_path_and_envsubst():
    text = "image: ${IMAGE:-vllm/vllm-openai}\nargs: [\"--model\", \"$MODEL\"]\n"
    masked, spans = mask_templates(text)
    assert masked is text and spans == []


def test_mask_unterminated_and_odd_actions():
    for text in [
        "a: {{ .Values.x\nb: 1\n",
        "a: {{ \"unterminated }}\nb: 1\n",
        "a: {{ `raw\nstring }}` }}\nb: 1\n",
        "{{",
        "}} {{ }} {{",
        "a: {{- /* c */ -}}\n",
        "a: {{ printf \"}}\" .x }}\n",
    ]:
        masked, spans = mask_templates(text)
        assert len(masked) == len(text)
        assert line_starts(masked) == line_starts(text)
        for s, e in spans:
            assert 0 <= s < e <= len(text)
    masked, spans = mask_templates('a: {{ printf "}}" .x }}\n')
    assert spans == [(3, len('a: {{ printf "}}" .x }}'))]
    masked, spans = mask_templates("a: {{ .Values.x\nb: 1\n")
    assert masked == "a: " + "x" * 12 + "\nb: 1\n"


def test_mask_block_start_control_line():
    text = (
        "data:\n"
        "  run.sh: |\n"
        "    {{- if .Values.debug }}\n"
        "    set -x\n"
        "    {{- end }}\n"
        "    vllm serve m\n"
        "  other: 1\n"
    )
    masked, _ = mask_templates(text)
    assert masked.splitlines()[2].startswith("    #")
    assert masked.splitlines()[4].strip() == ""
    [doc] = compose_all(masked)
    script = doc.value[0][1].value[0][1]
    assert script.value.startswith("#")
    assert "set -x\n" in script.value and "vllm serve m\n" in script.value
    check_offsets(masked, script, scalar_offsets(masked, script))


# ---------------------------------------------------------------------------------------------
# compose_all
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", PLAIN_SAMPLES)
def test_all_scalars_align(text, loader):
    docs = compose_all(text)
    nodes = scalars(docs)
    assert nodes
    for node in nodes:
        raw = text[node.start_mark.index : node.end_mark.index]
        if node.style in ('"', "'"):
            assert raw.endswith(node.style)
        check_offsets(text, node, scalar_offsets(text, node))


def test_compose_matches_pyyaml(loader):
    def shape(node, seen=None):
        if isinstance(node, yaml.ScalarNode):
            return (node.tag, node.value, node.style or None, node.start_mark.index, node.end_mark.index)
        if isinstance(node, yaml.SequenceNode):
            return (node.tag, [shape(n) for n in node.value], node.start_mark.index, node.end_mark.index)
        return (node.tag, [(shape(k), shape(v)) for k, v in node.value], node.start_mark.index, node.end_mark.index)

    for text in PLAIN_SAMPLES:
        ours = [shape(d) for d in compose_all(text)]
        ref = [shape(d) for d in yaml.compose_all(text, Loader=ys._LOADER)]
        assert ours == ref


def test_compose_bom(loader):
    text = "\ufeffargs: ['--a', \"b\"]\nk: v\n"
    docs = compose_all(text)
    for node in scalars(docs):
        raw = text[node.start_mark.index : node.end_mark.index]
        assert raw.strip("'\"") == node.value
        offs = scalar_offsets(text, node)
        assert "".join(text[i] for i in offs) == node.value


def test_compose_errors(loader):
    with pytest.raises(YamlError) as ei:
        compose_all("a: 1\nb: [1, 2\nc: 3\n")
    assert ei.value.line >= 2
    assert "\n" not in str(ei.value) and str(ei.value).startswith(f"line {ei.value.line}:")
    with pytest.raises(YamlError) as ei:
        compose_all("a: 1\nb: *nope\n")
    assert ei.value.line == 2 and "nope" in str(ei.value)
    with pytest.raises(YamlError) as ei:
        compose_all("a: 1\nb: c\x07\n")
    assert ei.value.line == 2
    with pytest.raises(YamlError):
        compose_all("a: 'unterminated\n")
    with pytest.raises(YamlError):
        compose_all("a: b\n\ud800\n")
    with pytest.raises(YamlError):
        compose_all('a: "\\UFFFFFFFF"\n')  # OverflowError inside PyYAML's pure-Python scanner
    assert compose_all("") == []
    assert compose_all("# only a comment\n") == []


def test_compose_multi_doc_and_aliases(loader):
    docs = compose_all(MULTI_DOC)
    assert len(docs) == 2
    # redefined anchors are allowed; aliases share the node object
    [doc] = compose_all("- &a 1\n- &a 2\n- *a\n")
    assert doc.value[2] is doc.value[1]
    [doc] = compose_all("&r [*r, x]\n")
    assert doc.value[0] is doc  # cyclic graph: walkers must track visited ids
    assert len(list(iter_nodes(doc))) == 2


def test_deep_nesting_raises_quickly():
    with pytest.raises(YamlError) as ei:
        compose_all("[" * 20000)
    assert "nested" in str(ei.value)
    with pytest.raises(YamlError):
        compose_all("- " * 20000 + "x\n")
    with pytest.raises(YamlError):
        compose_all("{a: " * 20000)


def test_nesting_limit_boundary():
    [doc] = compose_all("- " * ys.MAX_DEPTH + "x\n")
    depth = 0
    node = doc
    while isinstance(node, yaml.SequenceNode):
        depth += 1
        node = node.value[0]
    assert depth == ys.MAX_DEPTH and node.value == "x"
    with pytest.raises(YamlError):
        compose_all("- " * (ys.MAX_DEPTH + 1) + "x\n")


def test_moderate_nesting_python_loader(monkeypatch):
    # the pure-Python composer would hit RecursionError here; ours is iterative
    monkeypatch.setattr(ys, "_LOADER", yaml.SafeLoader)
    [doc] = compose_all("- " * 900 + "x\n")
    assert isinstance(doc, yaml.SequenceNode)


BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
j: &j [*i,*i,*i,*i,*i,*i,*i,*i,*i]
"""


def test_billion_laughs_composes_quickly(loader):
    [doc] = compose_all(BILLION_LAUGHS)
    nodes = list(iter_nodes(doc))
    assert len(nodes) < 200          # aliases are shared nodes: nothing is expanded


# ---------------------------------------------------------------------------------------------
# scalar_offsets: targeted cases
# ---------------------------------------------------------------------------------------------


def test_flow_args_offsets():
    docs = compose_all(K8S_FLOW_ARGS)
    node = find_scalar(docs, "meta-llama/Llama-3.1-8B-Instruct")
    offs = scalar_offsets(K8S_FLOW_ARGS, node)
    start = K8S_FLOW_ARGS.index('"meta-llama') + 1
    assert offs == tuple(range(start, start + len(node.value)))
    node = find_scalar(docs, "8192")
    offs = scalar_offsets(K8S_FLOW_ARGS, node)
    assert K8S_FLOW_ARGS[offs[0] - 1] == "'" and K8S_FLOW_ARGS[offs[-1] + 1] == "'"


def test_literal_script_offsets(loader):
    docs = compose_all(K8S_SH_SCRIPT)
    node = [n for n in scalars(docs) if n.style == "|"][0]
    offs = scalar_offsets(K8S_SH_SCRIPT, node)
    assert check_offsets(K8S_SH_SCRIPT, node, offs) == []
    # a token inside the script maps back exactly (JSON with quotes included)
    tok = "'{\"temperature\": 0.2, \"top_p\": 0.9}'"
    i = node.value.index(tok)
    s, e = offs[i], offs[i + len(tok) - 1] + 1
    assert K8S_SH_SCRIPT[s:e] == tok
    # value line breaks map to the source '\n', backslash continuation preserved
    j = node.value.index("\\\n")
    assert K8S_SH_SCRIPT[offs[j] : offs[j] + 2] == "\\\n"


def test_folded_compose_command(loader):
    docs = compose_all(COMPOSE_FOLDED)
    node = [n for n in scalars(docs) if n.style == ">"][0]
    assert node.value == (
        "--model mistralai/Mistral-7B-Instruct-v0.3 --gpu-memory-utilization 0.9 --max-num-seqs 128\n"
    )
    offs = scalar_offsets(COMPOSE_FOLDED, node)
    differ = check_offsets(COMPOSE_FOLDED, node, offs)
    folded = [i for i, ch in enumerate(node.value) if ch == " " and COMPOSE_FOLDED[offs[i]] == "\n"]
    assert differ == folded and len(folded) == 2
    assert node.value[folded[0] - 3 : folded[0]] == "0.3"
    for tok in ["--gpu-memory-utilization", "0.9", "128"]:
        i = node.value.index(tok)
        assert COMPOSE_FOLDED[offs[i] : offs[i + len(tok) - 1] + 1] == tok


def test_folded_crlf(loader):
    text = COMPOSE_FOLDED.replace("\n", "\r\n")
    docs = compose_all(text)
    node = [n for n in scalars(docs) if n.style == ">"][0]
    offs = scalar_offsets(text, node)
    differ = check_offsets(text, node, offs)
    assert [node.value[i] for i in differ] == [" ", " ", "\n"]
    assert all(text[offs[i] : offs[i] + 2] == "\r\n" for i in differ)


def test_literal_crlf(loader):
    docs = compose_all(CRLF_SAMPLE)
    node = [n for n in scalars(docs) if n.style == "|"][0]
    offs = scalar_offsets(CRLF_SAMPLE, node)
    differ = check_offsets(CRLF_SAMPLE, node, offs)
    assert differ == [i for i, ch in enumerate(node.value) if ch == "\n"]
    assert all(CRLF_SAMPLE[offs[i]] == "\r" for i in differ)
    tok = "--chat-template"
    i = node.value.index(tok)
    assert CRLF_SAMPLE[offs[i] : offs[i + len(tok) - 1] + 1] == tok


def test_double_quoted_escapes(loader):
    docs = compose_all(DOUBLE_QUOTED_JSON)
    node = find_scalar(docs, '--override-generation-config={"temperature": 0.7, "max_tokens": 512}')
    offs = scalar_offsets(DOUBLE_QUOTED_JSON, node)
    differ = check_offsets(DOUBLE_QUOTED_JSON, node, offs)
    assert differ == [i for i, ch in enumerate(node.value) if ch == '"']
    for i in differ:
        assert DOUBLE_QUOTED_JSON[offs[i] : offs[i] + 2] == '\\"'

    node = find_scalar(docs, "tab\there\nnewline \\ backslash / slash A\u00e9\U0001F600")
    offs = scalar_offsets(DOUBLE_QUOTED_JSON, node)
    differ = check_offsets(DOUBLE_QUOTED_JSON, node, offs)
    escapes = {"\t": "\\t", "\n": "\\n", "\\": "\\\\", "/": "\\/", "A": "\\x41", "\u00e9": "\\u00e9", "\U0001F600": "\\U0001F600"}
    # "\\" maps to its (identical) backslash, so it is not among the differing positions
    assert [node.value[i] for i in differ] == ["\t", "\n", "/", "A", "\u00e9", "\U0001F600"]
    for i, ch in enumerate(node.value):
        if ch in escapes:
            esc = escapes[ch]
            assert DOUBLE_QUOTED_JSON[offs[i] : offs[i] + len(esc)] == esc
            if i + 1 < len(offs):
                assert offs[i + 1] == offs[i] + len(esc)


def test_double_quoted_folding_and_escaped_breaks(loader):
    text = 'a: "one \\\n    two\n\n    three\n    four  \\  five"\n'
    [doc] = compose_all(text)
    node = doc.value[0][1]
    assert node.value == "one two\nthree four    five"
    offs = scalar_offsets(text, node)
    differ = check_offsets(text, node, offs)
    # the escaped break vanished; the kept paragraph break maps to the (identical) second '\n'
    assert [node.value[i] for i in differ] == [" ", " "]
    nl = node.value.index("\n")
    assert text[offs[nl] - 1 : offs[nl] + 1] == "\n\n"
    assert text[offs[differ[0]]] == "\n"  # folded break -> the '\n' after "three"
    assert text[offs[differ[1]] : offs[differ[1]] + 2] == "\\ "
    i = node.value.index("two")
    assert text[offs[i] : offs[i] + 3] == "two"


def test_single_quoted(loader):
    docs = compose_all(SINGLE_QUOTED_JSON)
    node = find_scalar(docs, '--speculative-config={"model": "ngram", "num_speculative_tokens": 5}')
    offs = scalar_offsets(SINGLE_QUOTED_JSON, node)
    assert check_offsets(SINGLE_QUOTED_JSON, node, offs) == []
    node = find_scalar(docs, "it's quoted")
    offs = scalar_offsets(SINGLE_QUOTED_JSON, node)
    assert check_offsets(SINGLE_QUOTED_JSON, node, offs) == []
    i = node.value.index("'")
    assert SINGLE_QUOTED_JSON[offs[i] : offs[i] + 2] == "''"
    assert offs[i + 1] == offs[i] + 2
    node = find_scalar(docs, '--compilation-config={"level": 3, "cudagraph_capture_sizes": [1, 2, 4]}')
    offs = scalar_offsets(SINGLE_QUOTED_JSON, node)
    assert [node.value[i] for i in check_offsets(SINGLE_QUOTED_JSON, node, offs)] == [" "]


def test_plain_multiline(loader):
    docs = compose_all(MULTI_DOC)
    node = find_scalar(docs, "plain scalar that continues on the next line\nand keeps a paragraph")
    offs = scalar_offsets(MULTI_DOC, node)
    differ = check_offsets(MULTI_DOC, node, offs)
    assert [node.value[i] for i in differ] == [" "]
    assert MULTI_DOC[offs[differ[0]]] == "\n"
    nl = node.value.index("\n")
    assert MULTI_DOC[offs[nl] - 1 : offs[nl] + 1] == "\n\n"
    # tags and anchors in front of scalars are skipped
    node = find_scalar(docs, "value")
    offs = scalar_offsets(MULTI_DOC, node)
    assert MULTI_DOC[offs[0] : offs[-1] + 1] == "value"
    node = find_scalar(docs, "123")
    assert node.tag == "tag:yaml.org,2002:str"
    assert "".join(MULTI_DOC[i] for i in scalar_offsets(MULTI_DOC, node)) == "123"


def test_block_variants(loader):
    docs = compose_all(BLOCK_VARIANTS)
    [doc] = docs
    values = {k.value: v for k, v in doc.value}
    assert values["literal"].value == "line one\n  indented two\n\nafter blank\n"
    assert values["strip"].value == "no trailing newline"
    assert values["keep"].value == "keep trailing\n\n"
    assert values["indicator"].value == "  two extra spaces\n one extra\n"
    assert values["folded"].value == "vllm serve model --port 8000\nnew paragraph\n  more indented\nback\n"
    assert values["folded_strip"].value == "a b"
    for key, node in values.items():
        if isinstance(node, yaml.ScalarNode) and key != "last":
            offs = scalar_offsets(BLOCK_VARIANTS, node)
            differ = check_offsets(BLOCK_VARIANTS, node, offs)
            if node.style == "|":
                assert differ == [], key
    node = values["indicator"]
    offs = scalar_offsets(BLOCK_VARIANTS, node)
    # the two extra spaces are the content spaces after the 2-column indentation
    line = BLOCK_VARIANTS.index("    two extra")
    assert offs[:3] == (line + 2, line + 3, line + 4)
    node = values["folded"]
    offs = scalar_offsets(BLOCK_VARIANTS, node)
    i = node.value.index("  more")
    assert BLOCK_VARIANTS[offs[i] : offs[i] + 6] == "  more"


def test_empty_and_special_scalars(loader):
    text = "a:\nb: ''\nc: \"\"\nd: |\ne: !!str\nf: [!!str , &x ]\n"
    for node in scalars(compose_all(text)):
        offs = scalar_offsets(text, node)
        assert offs is not None and len(offs) == len(node.value)


def test_greedy_fallback():
    # A value that the exact decoder does not reproduce (here: a hand-made node) is still aligned
    # in order when possible: ' ' may map to a line break, blanks/quotes are skipped.
    text = "k: a\n\n  b\n"
    [doc] = compose_all(text)
    real = doc.value[0][1]
    assert real.value == "a\nb"
    fake = yaml.ScalarNode(real.tag, "a b", real.start_mark, real.end_mark)
    offs = scalar_offsets(text, fake)
    assert offs == (3, 4, 8)
    fake = yaml.ScalarNode(real.tag, "a c", real.start_mark, real.end_mark)
    assert scalar_offsets(text, fake) is None


def test_mask_multiline_action_crlf():
    text = 'a: {{ include "x" (dict\r\n   "k" 1) }}\r\nb: |\r\n  {{- if .x }}\r\n  run\r\n  {{- end }}\r\n'
    masked, spans = mask_templates(text)
    assert len(spans) == 3
    assert masked.startswith("a: " + "x" * len('{{ include "x" (dict') + "\r\n" + " " * len('   "k" 1) }}') + "\r\n")
    assert line_starts(masked) == line_starts(text)
    [doc] = compose_all(masked)
    node = doc.value[1][1]
    assert node.value.startswith("#") and "\nrun\n" in node.value
    check_offsets(masked, node, scalar_offsets(masked, node))


def test_scalar_offsets_never_raises_on_garbage():
    [doc] = compose_all("key: 'value'\n")
    node = doc.value[0][1]
    assert scalar_offsets("", node) is None
    assert scalar_offsets("key: 'other'\n", node) is None
    assert scalar_offsets(None, node) is None  # type: ignore[arg-type]
    assert scalar_offsets("x", doc) is None  # type: ignore[arg-type]
    bogus = yaml.ScalarNode("tag:yaml.org,2002:str", "abc", doc.start_mark, doc.start_mark, style="|")
    assert scalar_offsets("abc", bogus) is None


# ---------------------------------------------------------------------------------------------
# Fuzzing
# ---------------------------------------------------------------------------------------------

FUZZ_ALPHABET = list("abz019 \t\n\r'\"\\|>-:#[]{},&*!?%@`") + ["\r\n", "  ", "\\\n", "{{", "}}", "é", "\u2028"]


def _mutate(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        pos = rng.randrange(len(chars) + 1)
        if op < 0.4:
            chars.insert(pos, rng.choice(FUZZ_ALPHABET))
        elif op < 0.7 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif chars:
            chars[min(pos, len(chars) - 1)] = rng.choice(FUZZ_ALPHABET)
    return "".join(chars)


def test_fuzz_scalar_offsets_never_raise():
    rng = random.Random(20240521)
    corpus = PLAIN_SAMPLES + [mask_templates(t)[0] for t in HELM_SAMPLES] + [
        'a: "x\\ty \\\n  z"\n',
        "a: |2-\n   x\n  y\n",
        "- >+\n  a\n\n  b\n\n",
        "k: 'q''q\n  r'\n",
    ]
    composed = aligned = 0
    for _ in range(1000):
        text = _mutate(rng, rng.choice(corpus))
        masked, _spans = mask_templates(text)
        assert len(masked) == len(text)
        try:
            docs = compose_all(text)
        except YamlError as err:
            assert isinstance(err.line, int) and err.line >= 1 and "\n" not in str(err)
            continue
        composed += 1
        for node in scalars(docs):
            offs = scalar_offsets(text, node)
            if offs is None:
                continue
            aligned += 1
            assert len(offs) == len(node.value)
            assert all(a < b for a, b in zip(offs, offs[1:]))
            assert all(0 <= o < len(text) for o in offs)
            # scalar_offsets against the wrong text must not raise either
            scalar_offsets(text[: len(text) // 2], node)
    assert composed > 100 and aligned > 1000
