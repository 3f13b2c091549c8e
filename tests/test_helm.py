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
    assert "vllm serve facebook/opt-125m" in launches and "release 0.29.0 from" in launches
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


# --------------------------------------------------------------------------------------------
# Issue 15, second part: --values, fixes in the values file, values without their chart,
# migrate on a chart
# --------------------------------------------------------------------------------------------
MIGRATED_VALUES = OUR_VALUES.replace('tag: "v0.29.0"', 'tag: "v0.30.0"').replace(
    'extraArgs: ["--disable-log-requests"]', 'extraArgs: ["--enable-scale-out"]').replace(
    '    env:\n      - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS\n        value: "1"\n', "")


def _run(args, cwd=None, env=None):
    """The real CLI in a subprocess (stdout and stderr apart, the environment as given)."""
    import os
    import subprocess
    import sys
    full = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "vllmlint", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=300)


def _with_and_without_chart(tmp_path, values: str):
    """production-stack's chart with `values` as values-prod.yaml, and the same values file alone."""
    if not STACK.is_dir():
        pytest.skip("no shared corpus")
    root = _stack_copy(tmp_path)
    (root / "values-prod.yaml").write_text(values)
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "values-prod.yaml").write_text(values)
    return root, alone


def _stack_copy(tmp_path):
    import shutil
    root = tmp_path / "chart"
    shutil.copytree(STACK, root)
    (root / "values-example.yaml").unlink()
    return root


def _found(stdout: str, codes=("VL001", "VL302", "VL303")) -> list[tuple[str, int, int, str]]:
    """(file name, line, column, code) of the JSON findings of `codes` (None: all)."""
    import json
    return sorted((Path(f["path"]).name, f["line"], f["column"], f["code"]) for f in json.loads(stdout)
                  if codes is None or f["code"] in codes)


def test_production_stack_values_outside_the_chart_migrate(tmp_path):
    """Our values file (old tag, VLLM_ENABLE_SCALE_OUT_ENDPOINTS, --disable-log-requests) given
    with --values: findings at its lines; migrate bumps the tag, removes the flag and the variable
    and adds --enable-scale-out to vllmConfig.extraArgs; the chart rendered again starts exactly
    the fixed launch."""
    if not STACK.is_dir():
        pytest.skip("no shared corpus")
    root = _stack_copy(tmp_path)
    values = tmp_path / "deploy" / "values-prod.yaml"
    values.parent.mkdir()
    values.write_text(OUR_VALUES)
    chart_before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    out = _run(["check", "--format", "json", "chart", "--values", "deploy/values-prod.yaml"], cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert _found(out.stdout) == [("values-prod.yaml", 12, 20, "VL302"), ("values-prod.yaml", 14, 9, "VL001")]
    import json
    sarif = json.loads(_run(["check", "--format", "sarif", "chart", "--values", "deploy/values-prod.yaml"],
                            cwd=tmp_path).stdout)
    where = {(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
              r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in sarif["runs"][0]["results"]}
    assert {("VL001", "deploy/values-prod.yaml", 14), ("VL302", "deploy/values-prod.yaml", 12)} <= where
    mig = _run(["migrate", "--to", "0.30.0", "chart", "--values", "deploy/values-prod.yaml"], cwd=tmp_path)
    assert mig.returncode in (0, 1), mig.stdout + mig.stderr     # 1: VL307's silent default changes listed
    assert "VL001" not in mig.stdout.split("Left for a human")[-1] and "VL302" not in mig.stdout.split("Left for a human")[-1]
    assert "image tag vllm/vllm-openai tag v0.29.0 -> v0.30.0" in mig.stdout
    assert values.read_text() == MIGRATED_VALUES
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == chart_before
    # rendered again: the engine runs 0.30.0 with --enable-scale-out, without the old flag and variable
    vs = helm.load_values([(root / "values.yaml", (root / "values.yaml").read_text()), (values, values.read_text())])
    d = helm.render(root, vs.real)["vllm-stack/templates/deployment-vllm-multi.yaml"]
    assert "vllm/vllm-openai:v0.30.0" in d and '- "--enable-scale-out"' in d
    assert "--disable-log-requests" not in d and "VLLM_ENABLE_SCALE_OUT_ENDPOINTS" not in d
    again = _run(["check", "chart", "--values", "deploy/values-prod.yaml"], cwd=tmp_path)
    assert again.returncode == 0, again.stdout


def test_same_values_without_the_chart_same_findings_same_migration(tmp_path):
    """production-stack's values shape is read without the chart: the same findings, at the same
    places, and the same migrated bytes as with the chart rendered by Helm."""
    root, alone = _with_and_without_chart(tmp_path, OUR_VALUES)
    for target in ([], ["--target-version", "0.29.0"], ["--target-version", "0.31.0"]):
        with_chart = _run(["check", "--format", "json", *target, str(root)]).stdout
        without = _run(["check", "--format", "json", *target, str(alone)]).stdout
        assert _found(with_chart, None) == _found(without, None) and _found(without)
    launches = _run(["launches", str(alone)]).stdout
    assert "vllm serve facebook/opt-125m --host 0.0.0.0 --port 8000 --no-enable-prefix-caching " \
           "--disable-log-requests" in launches and "release 0.29.0 from" in launches
    assert _run(["migrate", "--to", "0.30.0", str(alone)]).returncode in (0, 1)
    assert (alone / "values-prod.yaml").read_text() == MIGRATED_VALUES
    assert _run(["migrate", "--to", "0.30.0", str(root)]).returncode in (0, 1)
    assert (root / "values-prod.yaml").read_text() == MIGRATED_VALUES


def test_helm_values_setting_and_modes(tmp_path):
    """`helm-values` in pyproject.toml picks the values set; -v says which engine rendered the
    chart; without a Helm engine an info note says the templates were read masked."""
    if not STACK.is_dir():
        pytest.skip("no shared corpus")
    _stack_copy(tmp_path)
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "prod.yaml").write_text(OUR_VALUES)
    (tmp_path / "pyproject.toml").write_text('[tool.vllmlint]\nhelm-values = {"chart" = ["envs/prod.yaml"]}\n')
    out = _run(["check", "-v", "--format", "json", "chart"], cwd=tmp_path)
    assert _found(out.stdout) == [("prod.yaml", 12, 20, "VL302"), ("prod.yaml", 14, 9, "VL001")]
    assert "rendered with Helm's engine (helm-python-sdk) with 1 values set(s): values.yaml + prod.yaml" in out.stderr
    assert "dependencies not vendored under charts/ (not fetched): kube-prometheus-stack" in out.stderr
    masked = _run(["check", "--format", "json", "chart"], cwd=tmp_path, env={"VLLMLINT_HELM": "none"})
    assert "info: chart/Chart.yaml: Helm chart not rendered (no Helm engine" in masked.stderr
    assert masked.returncode in (0, 1) and "xxxx" not in masked.stdout
    quiet = _run(["check", "-q", "chart"], cwd=tmp_path, env={"VLLMLINT_HELM": "none"})
    assert "not rendered" not in quiet.stderr


def test_fix_that_changes_more_is_left_to_a_human(tmp_path):
    """A values list that a template also writes elsewhere (an annotation): removing the item
    would change more than the launch, so the finding keeps no fix and says why."""
    import shutil
    case = Path(__file__).resolve().parents[1] / "fixtures/VL302/helm-chart-values/input"
    shutil.copytree(case, tmp_path / "t")
    out = _run(["check", "--select", "VL302", str(tmp_path / "t")])
    assert "annotated/values.yaml:4:5: VL302" in out.stdout
    assert "no automatic fix: rendered again, it changes more than this in templates/deployment.yaml" in out.stdout
    assert "deployments.yaml:18:15: VL302" in out.stdout and "edit the template by hand" in out.stdout


def test_own_chart_fix_rendered_again(tmp_path):
    """The VL001 fixture chart after --fix: rendered by Helm, the engine has --enable-scale-out
    after its values' flags and no VLLM_ENABLE_SCALE_OUT_ENDPOINTS; every other line of the
    rendering is what it was."""
    import shutil
    case = Path(__file__).resolve().parents[1] / "fixtures/VL001/helm-chart-values"
    root = tmp_path / "chart"
    shutil.copytree(case / "input/chart", root)
    before = helm.render(root, helm.load_values([(root / "values.yaml", (root / "values.yaml").read_text())]).real)
    assert _run(["check", "--fix", "--select", "VL001", str(root)]).returncode == 0
    assert (root / "values.yaml").read_bytes() == (case / "fixed/chart/values.yaml").read_bytes()
    after = helm.render(root, helm.load_values([(root / "values.yaml", (root / "values.yaml").read_text())]).real)
    a, b = before["serving/templates/deployment.yaml"], after["serving/templates/deployment.yaml"]
    assert b.replace('            - "--enable-scale-out"\n', "") == a.replace(
        "            - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS\n              value: \"1\"\n", "")
    assert {k: v for k, v in before.items() if "deployment.yaml" not in k} == \
           {k: v for k, v in after.items() if "deployment.yaml" not in k}


def test_migrate_bumps_app_version_and_values_tag(tmp_path):
    """A chart whose image tag falls back to appVersion: migrate bumps appVersion; a values
    `tag:` beside a vLLM repository is bumped; a tag beside another image is not."""
    root = tmp_path / "chart"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text('apiVersion: v2\nname: c\nversion: 1.0.0\nappVersion: "v0.29.0"\n')
    (root / "templates/d.yaml").write_text("""\
apiVersion: apps/v1
kind: Deployment
metadata: {name: c}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
          args: [{{ .Values.model | quote }}]
        - name: proxy
          image: "{{ .Values.proxy.repository }}:{{ .Values.proxy.tag }}"
""")
    (root / "values.yaml").write_text("image:\n  repository: vllm/vllm-openai\nmodel: m\n"
                                      "proxy:\n  repository: envoyproxy/envoy\n  tag: v0.29.0\n")
    (tmp_path / "values-gpu.yaml").write_text("image:\n  repository: vllm/vllm-openai\n  tag: 0.29.0\n")
    out = _run(["migrate", "--to", "0.30.0", str(root), "--values", str(tmp_path / "values-gpu.yaml")])
    assert out.returncode in (0, 1), out.stdout + out.stderr
    assert 'appVersion: "v0.30.0"' in (root / "Chart.yaml").read_text()
    assert (tmp_path / "values-gpu.yaml").read_text().endswith("tag: 0.30.0\n")
    assert "envoyproxy/envoy\n  tag: v0.29.0" in (root / "values.yaml").read_text()


# the vLLM charts' container runs the image's own entrypoint (`vllm serve`): a launch reads the
# image (issue 29: a tag no launch runs is never bumped); the front end runs a shell script
_UI_SCRIPT = """\
          command: ["/bin/sh"]
          args:
            - -c
            - |
              case "$RUNTIME" in
                vllm) echo openai ;;
                *) echo other ;;
              esac
"""
_SERVE_ARGS = """\
          args: ["--model", "m"]
"""


def test_migrate_leaves_app_version_of_a_chart_that_runs_no_vllm_image(tmp_path):
    """appVersion is bumped only when the image whose tag falls back to it is vLLM's: written
    in the template line, or a values `repository` naming vLLM. A front-end chart on `python`
    whose script merely says `vllm)` (kaito's DemoUI) keeps its appVersion; the same chart on a
    literal `vllm/vllm-openai:{{ .Chart.AppVersion }}` is bumped."""
    def chart(name, image, repository):
        root = tmp_path / name
        (root / "templates").mkdir(parents=True)
        (root / "Chart.yaml").write_text('apiVersion: v2\nname: ui\nversion: 0.1.0\nappVersion: "0.29.0"\n')
        (root / "values.yaml").write_text(f"image:\n  repository: {repository}\n  pullPolicy: IfNotPresent\n")
        (root / "templates/d.yaml").write_text(f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: ui}}
spec:
  template:
    spec:
      containers:
        - name: ui
          image: {image}
""" + (_UI_SCRIPT if repository == "python" and "vllm/" not in image else _SERVE_ARGS))
        return root
    values_python = chart("ui", '"{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"',
                          "python")
    values_vllm = chart("served", '"{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"',
                        "vllm/vllm-openai")
    literal = chart("literal", '"vllm/vllm-openai:{{ .Chart.AppVersion }}"', "python")
    out = _run(["migrate", "--to", "0.30.0", str(tmp_path)])
    assert out.returncode in (0, 1), out.stdout + out.stderr
    assert 'appVersion: "0.29.0"' in (values_python / "Chart.yaml").read_text(), out.stdout
    assert 'appVersion: "0.30.0"' in (values_vllm / "Chart.yaml").read_text(), out.stdout
    assert 'appVersion: "0.30.0"' in (literal / "Chart.yaml").read_text(), out.stdout


@pytest.mark.parametrize("name, bumped", [("vllm/vllm-openai", True), ("python", False)])
def test_app_version_behind_an_image_name_key_and_the_root_context(name, bumped, tmp_path):
    """`"{{ .Values.image.name }}:{{ .Values.image.tag | default $.Chart.AppVersion }}"`: the
    image's name under `name:` and `$.Chart` (found on open-source-ai-dev/vllm-helm-chart, whose
    appVersion was read as the launch's release but never bumped). Another image's chart keeps it."""
    root = tmp_path / "chart"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.1\nappVersion: 0.29.0\n")
    (root / "values.yaml").write_text(f'model: m\nimage:\n  name: "{name}"\n  tag: ""\n')
    (root / "templates/d.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: c}\nspec:\n  template:\n    spec:\n"
        "      containers:\n        - name: vllm\n          command: [\"/bin/sh\", \"-c\"]\n"
        '          image: "{{ .Values.image.name }}:{{ .Values.image.tag | default $.Chart.AppVersion }}"\n'
        '          args: ["vllm serve {{ .Values.model }} --port 8000"]\n')
    out = _run(["migrate", "--to", "0.30.0", str(root)])
    assert out.returncode in (0, 1), out.stdout + out.stderr
    assert ("appVersion: 0.30.0" if bumped else "appVersion: 0.29.0") in (root / "Chart.yaml").read_text(), out.stdout


def test_generic_values_image_beside_args(tmp_path):
    """Values of some chart: a vLLM image beside an args list and an env list, read without the
    chart: the launch runs the image's release, its env is the list beside it; an SGLang image
    beside an args list is not vLLM."""
    (tmp_path / "values.yaml").write_text("""\
engine:
  image:
    repository: vllm/vllm-openai
    tag: v0.29.0
  args:
    - --model
    - Qwen/Qwen2.5-7B-Instruct
  env:
    - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS
      value: "1"
other:
  image:
    repository: lmsysorg/sglang
    tag: v0.4.0
  args:
    - --model-path
    - Qwen/Qwen2.5-7B-Instruct
""")
    launches = _run(["launches", str(tmp_path)]).stdout
    assert len(launches.splitlines()) == 1 and "release 0.29.0 from" in launches
    assert "VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1" in launches
    out = _run(["check", "--format", "json", str(tmp_path)])
    assert ("values.yaml", 9, 7, "VL001") in _found(out.stdout)
    assert _run(["migrate", "--to", "0.30.0", str(tmp_path)]).returncode in (0, 1)
    text = (tmp_path / "values.yaml").read_text()
    assert "tag: v0.30.0" in text and "- --enable-scale-out" in text and "VLLM_ENABLE" not in text
    assert "tag: v0.4.0" in text


@pytest.mark.parametrize("root", [STACK, CHARTS / "InftyAI__llmaz/chart", CHARTS / "substratusai__kubeai/charts/models"])
def test_shared_charts_lint_and_fix_without_crash(root, tmp_path):
    """The three real charts: check exits 0/1, never 2; --fix on a copy leaves every template as
    it was (fixes land in values files only) and a second --fix changes nothing."""
    import shutil
    if not root.is_dir():
        pytest.skip("no shared corpus")
    out = _run(["check", "--format", "json", str(root)])
    assert out.returncode in (0, 1), out.stderr
    copy = tmp_path / "c"
    shutil.copytree(root, copy)
    templates = {p: p.read_bytes() for p in (copy / "templates").rglob("*") if p.is_file()}
    _run(["check", "--fix", str(copy)])
    assert {p: p.read_bytes() for p in (copy / "templates").rglob("*") if p.is_file()} == templates
    once = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    _run(["check", "--fix", str(copy)])
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == once


RENAME_VALUES = """\
servingEngineSpec:
  modelSpec:
  - name: "opt125m"
    repository: "vllm/vllm-openai"
    tag: "v0.30.0"
    modelURL: "facebook/opt-125m"
    requestCPU: 6
    requestMemory: "16Gi"
    requestGPU: 1
    vllmConfig:
      maxModelLen: 4096
      extraArgs:
        - "--enable-mamba-fine-grained-prefix-cache"
        - "--disable-log-requests"
    env:
      - name: VLLM_USE_V1
        value: "1"
      - name: HF_TOKEN_PATH
        value: /secrets/hf
  - name: "off"
    enabled: false
    repository: "vllm/vllm-openai"
    tag: "v0.30.0"
    modelURL: "facebook/opt-350m"
    vllmConfig:
      extraArgs: ["--disable-log-requests"]
"""


def test_rename_and_env_removal_with_and_without_the_chart(tmp_path):
    """migrate --to 0.31.0: a renamed flag is renamed in place (quotes kept), a removed variable's
    env item goes, the tags are bumped; with the chart and without it the same bytes. A model with
    `enabled: false` starts nothing (the chart skips it): no finding there (its tag is bumped
    with the others: it names the same vLLM image)."""
    root, alone = _with_and_without_chart(tmp_path, RENAME_VALUES)
    found = _found(_run(["check", "--format", "json", "--target-version", "0.31.0", str(root)]).stdout)
    assert found == [("values-prod.yaml", 13, 12, "VL302"), ("values-prod.yaml", 14, 12, "VL302"),
                     ("values-prod.yaml", 16, 9, "VL303")]
    assert _found(_run(["check", "--format", "json", "--target-version", "0.31.0", str(alone)]).stdout) == found
    for tree in (root, alone):
        assert _run(["migrate", "--to", "0.31.0", str(tree)]).returncode in (0, 1)
    want = RENAME_VALUES.replace('tag: "v0.30.0"', 'tag: "v0.31.0"').replace(
        '        - "--enable-mamba-fine-grained-prefix-cache"\n        - "--disable-log-requests"\n',
        '        - "--enable-mamba-shared-prefix-checkpoint"\n').replace(
        '      - name: VLLM_USE_V1\n        value: "1"\n', "")
    assert (root / "values-prod.yaml").read_text() == want
    assert (alone / "values-prod.yaml").read_text() == want


NO_EXTRA_ARGS_VALUES = """\
servingEngineSpec:
  modelSpec:
  - name: "opt125m"
    repository: "vllm/vllm-openai"
    tag: "v0.29.0"
    modelURL: "facebook/opt-125m"
    requestCPU: 6
    requestMemory: "16Gi"
    requestGPU: 1
    vllmConfig:
      maxModelLen: 4096  # fits the GPU
    env:
      - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS
        value: "1"
  - name: "bare"
    repository: "vllm/vllm-openai"
    tag: "v0.29.1"
    modelURL: "facebook/opt-350m"
    requestCPU: 6
    requestMemory: "16Gi"
    requestGPU: 1
    env:
      - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS
        value: "1"
"""


def test_vllm_config_without_extra_args_gets_the_list(tmp_path):
    """`vllmConfig:` without `extraArgs`: migrate adds `extraArgs: ["--enable-scale-out"]` to it
    (the chart renders exactly that flag more); a model without `vllmConfig` is left to a human
    (adding one would also switch prefix caching off in this chart), and its tag stays with it
    (2026-12-05: bumped, its endpoints would be gone on 0.30.0)."""
    root, alone = _with_and_without_chart(tmp_path, NO_EXTRA_ARGS_VALUES)
    want = NO_EXTRA_ARGS_VALUES.replace('"v0.29.0"', '"v0.30.0"').replace(
        '      maxModelLen: 4096  # fits the GPU\n    env:\n      - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS\n'
        '        value: "1"\n', '      maxModelLen: 4096  # fits the GPU\n      extraArgs: ["--enable-scale-out"]\n', 1)
    for tree in (root, alone):
        out = _run(["migrate", "--to", "0.30.0", str(tree)])
        assert out.returncode == 1 and "values-prod.yaml:21:9: VL001" in out.stdout
        assert (tree / "values-prod.yaml").read_text() == want


IMAGE_FROM_VALUES_TEMPLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    spec:
      containers:
        - name: engine
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
          args: ["--model", "{{ .Values.model }}", "--swap-space", "4"]
"""


def test_image_from_values_args_only_container(tmp_path):
    """The most common chart shape: the image from `repository` + `tag` values and only args in
    the template. The marker rendering must find the launch the real one finds (its image is a
    marker there); the template's own flag is reported at the template; `repository:` without a
    tag on its line is no floating tag."""
    root = tmp_path / "chart"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: engine\nversion: 0.1.0\n")
    (root / "values.yaml").write_text(
        "image:\n  repository: vllm/vllm-openai\n  tag: v0.29.0\nmodel: Qwen/Qwen2.5-7B\n")
    (root / "templates/deployment.yaml").write_text(IMAGE_FROM_VALUES_TEMPLATE)
    launches = _run(["launches", "--format", "json", str(root)])
    import json
    [launch] = json.loads(launches.stdout)
    assert launch["argv"] == ["vllm", "serve", "--model", "Qwen/Qwen2.5-7B", "--swap-space", "4"]
    assert launch["release"] == "0.29.0"
    out = _run(["check", str(root)]).stdout
    assert f"{root}/templates/deployment.yaml:11:53: VL302" in out
    migrated = _run(["migrate", "--to", "0.30.0", "--diff", str(root)])
    # the template's `--swap-space` is left for a human: the tag stays with it (2026-12-05)
    assert migrated.stdout == "" and "values.yaml:3: image tag vllm/vllm-openai tag v0.29.0: kept: " in migrated.stderr
    assert "templates/deployment.yaml:11:53 (VL302) is left for a human" in migrated.stderr
    assert "no tag" not in migrated.stderr + migrated.stdout


def test_helm_error_items_are_listed_in_a_stable_order():
    # Helm's schema validation lists its `- at ...` items in Go map order (a new order each run);
    # the note quotes the first 240 characters, so it must not depend on that order
    from vllmlint.parsers.helm import _stable_error

    a = "values don't meet the schema:\naibrix:\n- at '/b': bad\n- at '/a': bad\nend"
    b = "values don't meet the schema:\naibrix:\n- at '/a': bad\n- at '/b': bad\nend"
    assert _stable_error(a) == _stable_error(b) == b


def test_a_value_a_template_only_compares_is_rendered_as_itself(tmp_path):
    """`{{ if eq .Values.mode "server" }}`: the marker rendering (values replaced by markers, to
    trace them to their lines) took the other branch, the two renderings did not pair, and the
    chart's only launch was lost (found on Josca/vllm-chart). A value no marked output shows is
    rendered as itself; one the output shows keeps its line (the model, reported in values.yaml)."""
    root = tmp_path / "chart"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (root / "values.yaml").write_text('image: vllm/vllm-openai:v0.10.0\nmodel: org/m\nmode: server\n'
                                      'extra: "--disable-log-requests"\n')
    (root / "templates" / "d.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n"
        "      containers:\n      - name: vllm\n        image: '{{ .Values.image }}'\n"
        '      {{- if eq .Values.mode "server" }}\n'
        '        args: ["--model", "{{ .Values.model }}", "{{ .Values.extra }}"]\n'
        "      {{- else }}\n"
        '        command: ["sleep", "infinity"]\n'
        "      {{- end }}\n")
    found = _found(_check(["check", "--format", "json", "--target-version", "0.30.0", str(tmp_path)]).stdout)
    assert found == [("values.yaml", 4, 9, "VL302")]
    # Josca/vllm-chart's own shape: the values inside one `bash -c` string (still traced)
    text = (root / "templates" / "d.yaml").read_text().replace(
        '        args: ["--model", "{{ .Values.model }}", "{{ .Values.extra }}"]\n',
        '        command: ["/bin/bash", "-c"]\n        args: ["vllm serve {{ .Values.model }} {{ .Values.extra }}"]\n')
    (root / "templates" / "d.yaml").write_text(text)
    found = _found(_check(["check", "--format", "json", "--target-version", "0.30.0", str(tmp_path)]).stdout)
    assert found == [("values.yaml", 4, 9, "VL302")]
