"""Helm charts rendered by Helm's engine, and rendered values traced to their values.yaml line."""
import time
from pathlib import Path

import pytest

from vllmlint.parsers import helm

CHARTS = Path("/work/shared/corpus/charts")
STACK = CHARTS / "vllm-project__production-stack/helm"

pytestmark = pytest.mark.skipif(helm.engine() is None, reason="no Helm engine")

OUR_VALUES = """\
servingEngineSpec:
  modelSpec:
  - name: "opt125m"
    repository: "vllm/vllm-openai"
    tag: "v0.29.0"
    modelURL: "facebook/opt-125m"
    replicaCount: 1
    requestCPU: 6
    requestMemory: "16Gi"
    requestGPU: 1
    vllmConfig:
      extraArgs: ["--disable-log-requests"]
    env:
      - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS
        value: "1"
"""


def _render(root, files):
    vs = helm.load_values(files)
    return vs, helm.render(root, vs.real), helm.render(root, vs.marked)


def test_own_chart_range_toyaml_include_if_required_subchart(tmp_path):
    root = tmp_path / "chart"
    (root / "templates").mkdir(parents=True)
    (root / "charts/sub/templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: mine\nversion: 0.1.0\n")
    (root / "charts/sub/Chart.yaml").write_text("apiVersion: v2\nname: sub\nversion: 0.1.0\n")
    (root / "charts/sub/templates/cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sub}\ndata: {k: {{ .Values.k | quote }}}\n")
    (root / "templates/_h.tpl").write_text('{{- define "mine.name" -}}{{ .Chart.Name }}-x{{- end -}}\n')
    (root / "templates/d.yaml").write_text("""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "mine.name" . }}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: "{{ required "repo" .Values.image.repository }}:{{ .Values.image.tag }}"
          args:
          {{- range .Values.extraArgs }}
          - {{ . | quote }}
          {{- end }}
          {{- if hasKey .Values "maxModelLen" }}
          - "--max-model-len"
          - {{ .Values.maxModelLen | quote }}
          {{- end }}
          env:
          {{- toYaml .Values.env | nindent 10 }}
""")
    values = """\
image:
  repository: vllm/vllm-openai
  tag: v0.29.0
extraArgs:
  - --model
  - m
maxModelLen: 4096
env:
  - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS
    value: "1"
sub:
  k: v
"""
    (root / "values.yaml").write_text(values)
    vs, real, marked = _render(root, [(root / "values.yaml", values)])
    d = real["mine/templates/d.yaml"]
    assert "name: mine-x" in d and "vllm/vllm-openai:v0.29.0" in d and "- \"--model\"" in d
    assert "VLLM_ENABLE_SCALE_OUT_ENDPOINTS" in d and '"4096"' in d
    assert "k: \"v\"" in real["mine/charts/sub/templates/cm.yaml"]
    [o] = helm.find_value(marked["mine/templates/d.yaml"], vs, "VLLM_ENABLE_SCALE_OUT_ENDPOINTS")
    assert (o.line, o.column, o.path) == (9, 11, "env[0].name")
    [t] = helm.find_value(marked["mine/templates/d.yaml"], vs, "v0.29.0")
    assert t.path == "image.tag" and t.line == 3
    # `required` fails the rendering: reported, never a crash
    with pytest.raises(helm.RenderError):
        helm.render(root, {"image": {"repository": None}})


def test_production_stack_values_traced_to_their_lines(tmp_path):
    if not STACK.is_dir():
        pytest.skip("no shared corpus")
    start = time.perf_counter()
    vs, real, marked = _render(STACK, [(STACK / "values.yaml", (STACK / "values.yaml").read_text()),
                                       (tmp_path / "values-ours.yaml", OUR_VALUES)])
    elapsed = time.perf_counter() - start
    d = real["vllm-stack/templates/deployment-vllm-multi.yaml"]
    assert '"facebook/opt-125m"' in d and "vllm/vllm-openai:v0.29.0" in d and "--disable-log-requests" in d
    m = marked["vllm-stack/templates/deployment-vllm-multi.yaml"]
    found = {o.path: o.line for needle in ("VLLM_ENABLE_SCALE_OUT_ENDPOINTS", "v0.29.0", "--disable-log-requests")
             for o in helm.find_value(m, vs, needle) if o.file.name == "values-ours.yaml"}
    assert found == {"servingEngineSpec.modelSpec[0].env[0].name": 14,
                     "servingEngineSpec.modelSpec[0].tag": 5,
                     "servingEngineSpec.modelSpec[0].vllmConfig.extraArgs[0]": 12}
    assert elapsed < 5


@pytest.mark.parametrize("root,extra", [
    (STACK, "values-example.yaml"),
    (CHARTS / "InftyAI__llmaz/chart", "values.global.yaml"),
    (CHARTS / "substratusai__kubeai/charts/models", None),
])
def test_shared_charts_render(root, extra):
    if not root.is_dir():
        pytest.skip("no shared corpus")
    assert helm.chart_root(root / "values.yaml") == root
    files = [(root / "values.yaml", (root / "values.yaml").read_text())]
    if extra:
        assert root / extra in helm.sibling_values(root)
        files.append((root / extra, (root / extra).read_text()))
    vs, real, marked = _render(root, files)
    assert real and set(real) == set(marked)


def _check(args):
    from click.testing import CliRunner
    from vllmlint.cli import main
    return CliRunner().invoke(main, args)


def test_check_reports_at_the_values_lines(tmp_path):
    """production-stack's real chart with a values file of ours: the rendered launch is read and
    its findings land on our values file's lines; a second --fix changes nothing."""
    import shutil
    if not STACK.is_dir():
        pytest.skip("no shared corpus")
    root = tmp_path / "chart"
    shutil.copytree(STACK, root)
    (root / "values-example.yaml").unlink()
    (root / "values-prod.yaml").write_text(OUR_VALUES)
    out = _check(["check", str(root)]).output
    assert f"{root}/values-prod.yaml:14:9: VL001" in out
    assert f"{root}/values-prod.yaml:12:20: VL302" in out
    launches = _check(["launches", str(root)]).output
    assert "vllm serve facebook/opt-125m" in launches and "runs 0.29.0" in launches
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    _check(["check", "--fix", str(root)])
    _check(["check", "--fix", str(root)])
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before   # nothing it may edit


def test_template_only_launch_reported_at_the_template(tmp_path):
    root = CHARTS / "InftyAI__llmaz/chart"
    if not root.is_dir():
        pytest.skip("no shared corpus")
    out = _check(["check", str(root)]).output
    assert "templates/backends/vllm.yaml:" in out and "VL302" in out and "values.yaml:1:1" not in out
