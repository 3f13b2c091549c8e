"""Shapes as classes (issue 30, items 5-6): every container runner decides by the same image
table; every vLLM server module is a launch; wrappers that name an engine, printed argvs, prose
and proxies by name are not; `launches --explain` says why a file has none. Positions and fixed
bytes of the same shapes are fixture cases (fixtures/VL302/shape-*, VL304/shape-*)."""
from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main
from vllmlint.knowledge.entrypoints import NOT_SERVERS, SERVER_MODULES
from vllmlint.knowledge.images import (BUILTIN_VLLM_IMAGES, SERVER_ENTRYPOINT_IMAGES, is_vllm_image,
                                       serves_engine_args)
from vllmlint.lint.discovery import discover
from vllmlint.lint.project import load


def found(tmp_path: Path, name: str, text: str) -> list:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    candidates, _ = discover([str(path)])
    project = load(candidates)
    assert not project.problems, project.problems
    return project.launches


def concrete(glob: str) -> str:
    """An image path the glob matches: `*/vllm-openai` -> `mirror/vllm-openai`."""
    path = glob.replace("*/", "mirror/").replace("/*", "/x").replace("-*", "-cpu")
    path = ("q9t5s3a7/" + path[1:]) if path.startswith("*") else path.rstrip("*")
    assert re.fullmatch(glob.replace("*", ".*"), path), (glob, path)
    return path


def forms(path: str) -> list[str]:
    """Registry-qualified and plain references of one image path."""
    return [f"{path}:v0.8.4", f"public.ecr.aws/{path}:v0.8.4", f"localhost:5000/{path}:v0.8.4",
            f"docker.io/{path}@sha256:{'a' * 64}"]


SERVING = [ref for glob in SERVER_ENTRYPOINT_IMAGES for ref in forms(concrete(glob))]
# vLLM builds whose entrypoint is not vLLM's server (a shell, a script): given only arguments,
# no launch; given `vllm serve`, one
SHELL_BUILDS = [f"{concrete(g)}:v0.8.4" for g in BUILTIN_VLLM_IMAGES if not serves_engine_args(concrete(g))]
NOT_VLLM = ["lmsysorg/sglang:v0.4.6", "ghcr.io/huggingface/text-generation-inference:3.0",
            "public.ecr.aws/q9t5s3a7/sglang-cpu:v1", "nvcr.io/nim/meta/llama3:latest"]

# runner -> (file name, text with IMAGE and ARGS to fill); ARGS: engine arguments only
RUNNERS = {
    "docker run": ("run.sh", "docker run --rm -p 8000:8000 IMAGE --model=m --max-model-len 4096\n"),
    "podman run": ("run.sh", "podman run --rm -p 8000:8000 IMAGE --model=m --max-model-len 4096\n"),
    "nerdctl run": ("run.sh", "nerdctl run -d IMAGE --model=m --max-model-len 4096\n"),
    "docker container run": ("run.sh", "docker container run -it IMAGE --model=m --max-model-len 4096\n"),
    "apptainer run": ("run.sh", "apptainer run --nv docker://IMAGE --model=m --max-model-len 4096\n"),
    "kubectl run": ("run.sh", "kubectl run vllm --image=IMAGE -- --model=m --max-model-len 4096\n"),
    "compose": ("compose.yaml", "services:\n  llm:\n    image: IMAGE\n    command: --model=m --max-model-len 4096\n"),
    "k8s": ("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                        "    - name: llm\n      image: IMAGE\n      args: [\"--model=m\", \"--max-model-len\", \"4096\"]\n"),
    "dockerfile": ("Dockerfile", "FROM IMAGE\nCMD [\"--model=m\", \"--max-model-len\", \"4096\"]\n"),
    "docker SDK": ("app.py", "import docker\ndocker.from_env().containers.run(\"IMAGE\", [\"--model=m\", "
                             "\"--max-model-len\", \"4096\"])\n"),
    "python argv": ("app.py", "import subprocess\nsubprocess.run([\"podman\", \"run\", \"IMAGE\", \"--model=m\", "
                              "\"--max-model-len\", \"4096\"])\n"),
}


def run_with(runner: str, image: str, args: str | None = None) -> list:
    return RUNNERS[runner][0], RUNNERS[runner][1].replace("IMAGE", image)


def test_the_serving_table_is_part_of_the_vllm_table():
    for glob in SERVER_ENTRYPOINT_IMAGES:
        assert is_vllm_image(concrete(glob)), glob
    assert SHELL_BUILDS, "some vLLM builds start a shell"


@pytest.mark.parametrize("runner", sorted(RUNNERS))
@pytest.mark.parametrize("image", SERVING)
def test_every_runner_reads_every_serving_image_given_only_engine_args(tmp_path, runner, image):
    name, text = run_with(runner, image)
    [launch] = found(tmp_path, name, text)
    values = [a.value for a in launch.argv]
    assert values[:2] == ["vllm", "serve"] and "--model=m" in values and launch.kind == "serve", (runner, values)


@pytest.mark.parametrize("runner", sorted(RUNNERS))
@pytest.mark.parametrize("image", SHELL_BUILDS + NOT_VLLM)
def test_no_runner_reads_args_alone_as_vllm_for_other_images(tmp_path, runner, image):
    name, text = run_with(runner, image)
    assert found(tmp_path, name, text) == [], (runner, image)


@pytest.mark.parametrize("image", SHELL_BUILDS)
def test_a_shell_build_given_vllm_serve_is_a_launch(tmp_path, image):
    [launch] = found(tmp_path, "run.sh", f"docker run {image} vllm serve m --max-model-len 4096\n")
    assert [a.value for a in launch.argv][:3] == ["vllm", "serve", "m"]


# -- vLLM's server modules --------------------------------------------------------------------
def catalogue_modules() -> set[str]:
    base = Path(__file__).resolve().parents[1] / "vllmlint" / "knowledge" / "catalogue" / "modules"
    names: set[str] = set()
    for path in sorted(base.glob("vllm-*.json")):
        for package, members in json.loads(path.read_text())["modules"].items():
            if package.startswith("vllm.entrypoints"):
                names.update(package if m == "__init__" else f"{package}.{m}" for m in members.split())
    return names


SERVERISH = re.compile(r"(?:_server|\.entry|\.run_batch|\.main)$")


def test_every_server_module_in_the_catalogue_is_decided():
    """A release that adds `vllm.entrypoints.x_server` fails here until it is in the table."""
    named = {m for m in catalogue_modules() if SERVERISH.search(m)}
    assert named, "the catalogue lists vLLM's entrypoint modules"
    assert named - set(SERVER_MODULES) - set(NOT_SERVERS) == set()


@pytest.mark.parametrize("module", sorted(SERVER_MODULES))
def test_every_server_module_is_a_launch(tmp_path, module):
    [launch] = found(tmp_path, "serve.sh", f"python3 -m {module} --model m --port 8000\n")
    assert launch.program == f"python -m {module}" and launch.kind == SERVER_MODULES[module]


@pytest.mark.parametrize("module", sorted(SERVER_MODULES))
def test_every_server_module_in_a_pod_command(tmp_path, module):
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: s\n"
            f"      image: python:3.12\n      command: [python3, -m, {module}]\n      args: [--model, m]\n")
    [launch] = found(tmp_path, "pod.yaml", text)
    assert launch.kind == SERVER_MODULES[module]


def test_a_module_that_is_no_server_is_no_launch(tmp_path):
    assert found(tmp_path, "x.sh", "python -m vllm.entrypoints.openai.cli_args --help\n") == []


# -- false launches -----------------------------------------------------------------------------
@pytest.mark.parametrize("line", [
    "llmctl --runtime vllm serve --port 8000 --replicas 2",
    "mytool --engine vllm serve --model m",
    "ome-agent --backend vllm serve --foo bar",
    "python -m inferctl --inference-engine vllm serve --gpus 1",
    "kaito --runtime=vllm serve",
])
def test_a_wrapper_that_names_the_engine_is_not_vllms_cli(tmp_path, line):
    assert found(tmp_path, "w.sh", line + "\n") == []


@pytest.mark.parametrize("line", ["uv run --frozen vllm serve m", "srun --exclusive vllm serve m",
                                  "conda run -n vllm vllm serve m", "sudo -E vllm serve m"])
def test_wrappers_with_their_own_options_still_run_vllm(tmp_path, line):
    [launch] = found(tmp_path, "w.sh", line + "\n")
    assert [a.value for a in launch.argv][:3] == ["vllm", "serve", "m"]


def test_printing_an_argv_is_not_running_it(tmp_path):
    text = """
        #!/bin/bash
        CMD=(vllm serve m --max-model-len 4096)
        printf '%q ' "${CMD[@]}"
        echo "${CMD[@]}"
        echo "running: vllm serve m"
        exec "${CMD[@]}"
    """
    [launch] = found(tmp_path, "p.sh", text)
    assert launch.program == "vllm serve"      # the `exec` alone (at the array's words)


def test_running_an_array_alone_is_a_launch(tmp_path):
    [launch] = found(tmp_path, "p.sh", "CMD=(vllm serve m)\n\"${CMD[@]}\"\n")
    assert [a.value for a in launch.argv] == ["vllm", "serve", "m"]


@pytest.mark.parametrize("text", [
    "name: docs\nsteps:\n  - description: The vllm serve command starts the server; pass --max-model-len.\n",
    "jobs:\n  x:\n    steps:\n      - name: Start it with vllm serve then wait for the port\n        run: echo ok\n",
    "summary: |\n  To start it, use the vllm serve command with --tensor-parallel-size 2.\n",
    "# the vllm serve command is started by the operator\nkind: ConfigMap\napiVersion: v1\ndata: {a: b}\n",
    # an operator's CRD: its schema's descriptions quote the command its controller writes
    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: models.x.dev}\n"
    "spec:\n  versions:\n  - schema:\n      openAPIV3Schema:\n        properties:\n          command:\n"
    "            description: |-\n              Defaults to the standard entrypoint\n"
    "              (python3 -m vllm.entrypoints.openai.api_server); vllmArgs are appended.\n"
    "            type: array\n",
    # a custom resource's own prose fields
    "apiVersion: x.dev/v1\nkind: Model\nspec:\n  description: |\n    Served with vllm serve --tensor-parallel-size 2\n",
    "help: |\n  Runs: docker run vllm/vllm-openai --model m\n",
])
def test_prose_in_yaml_is_not_a_command(tmp_path, text):
    assert found(tmp_path, "notes.yaml", text) == []


@pytest.mark.parametrize("line", [
    "python my_proxy.py --port 9000 --upstream http://localhost:8000",
    "python3 proxy_server.py --host 0.0.0.0",
    "./auth_proxy.py --listen 8080",
])
def test_a_script_named_proxy_is_no_pd_proxy_by_its_name(tmp_path, line):
    assert found(tmp_path, "p.sh", line + "\n") == []


@pytest.mark.parametrize("line", [
    "python my_proxy.py --prefill http://p:8100 --decode http://d:8200",
    "python3 disagg_proxy_server.py --prefiller-host p --prefiller-port 8100 --decoder-host d --decoder-port 8200",
    "python toy_proxy_server.py --port 8192",
])
def test_a_proxy_by_what_it_forwards(tmp_path, line):
    [launch] = found(tmp_path, "p.sh", line + "\n")
    assert launch.kind == "proxy"


# -- launches --explain ---------------------------------------------------------------------------
def explain(tmp_path: Path, files: dict[str, str], *args: str) -> list[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip("\n"))
    result = CliRunner().invoke(main, ["launches", *args, *[str(tmp_path / n) for n in files]],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return [line.replace(str(tmp_path) + "/", "") for line in result.stdout.splitlines()]


def test_explain_names_the_kind_gate(tmp_path):
    assert explain(tmp_path, {"notes.txt": "vllm serve m\n"}, "--explain") == [
        "notes.txt: no launch: kind not recognised (not read): its name and first bytes match no kind vllmlint "
        "reads (Dockerfile, YAML, a shell script by `.sh`/`.bash` or a shebang, Makefile, justfile, systemd unit, "
        "Python, requirements)"]


def test_explain_names_the_marker_gate(tmp_path):
    [line] = explain(tmp_path, {"app.py": "import os\nprint(os.getcwd())\n"}, "--explain")
    assert line.startswith("app.py: no launch: no marker (not parsed): python: no marker of a launch")


def test_explain_says_what_the_shell_reader_saw(tmp_path):
    text = """
        docker run --gpus all lmsysorg/sglang:latest python3 -m sglang.launch_server --model-path m
        docker run rocm/vllm-dev:nightly --model m
        printf '%q ' vllm serve m
    """
    assert explain(tmp_path, {"s.sh": text}, "--explain") == [
        "s.sh: no launch: shell: 3 commands read, none runs vLLM: `docker run --gpus all ...`: image "
        "lmsysorg/sglang:latest is not vLLM's; `docker run rocm/vllm-dev:nightly --model ...`: image "
        "rocm/vllm-dev:nightly is a vLLM build whose entrypoint is not vLLM's server (a shell or a script), "
        "and no command is given; `printf %q  vllm serve ...` prints its arguments, runs nothing"]


def test_explain_says_what_the_yaml_reader_saw(tmp_path):
    text = """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: sg}
        spec:
          template:
            spec:
              containers:
                - name: sglang
                  image: lmsysorg/sglang:v0.4.6
                  command: ["python3", "-m", "sglang.launch_server"]
    """
    assert explain(tmp_path, {"d.yaml": text}, "--explain") == [
        "d.yaml: no launch: yaml: 1 document (Deployment), 1 container read, none runs vLLM: container `sglang`: "
        "image lmsysorg/sglang:v0.4.6 is not vLLM's and its command `python3 -m sglang.launch_server` starts no vLLM"]


def test_explain_reads_a_template_as_the_front_end_does(tmp_path):
    # an Ansible role's compose template (found on jsrobin888/vllm-infra): `{% for %}` and a
    # flow list of `{{ }}` are no YAML; the front end reads it with both masked, and so does
    # --explain, which names the templated image instead of "could not be read as YAML"
    text = """
        services:
        {% for model in models %}
          vllm-{{ model.name }}:
            image: {{ vllm_image }}:{{ vllm_image_tag }}
            deploy: {resources: {reservations: {devices: [{device_ids: [{{ model.gpus | join(',') }}]}]}}}
            command: --model /models/{{ model.path }} --disable-log-requests
        {% endfor %}
    """
    assert explain(tmp_path, {"docker-compose.yml.j2": text}, "--explain") == [
        "docker-compose.yml.j2: no launch: yaml: 1 document, 1 container read, none runs vLLM: container: "
        "image {{ vllm_image }}:{{ vllm_image_tag }} is a template whose value is not known here"]


def test_explain_names_the_wrapper_and_the_proxy(tmp_path):
    [line] = explain(tmp_path, {"w.sh": "llmctl --runtime vllm serve --port 8000\npython my_proxy.py --port 1\n"},
                     "-v")
    assert line == ("w.sh: no launch: shell: 2 commands read, none runs vLLM: `llmctl --runtime vllm serve ...`: "
                    "`--runtime vllm` names the engine a wrapper drives; `serve` is the wrapper's; "
                    "`python my_proxy.py --port 1`: a script named like a proxy is a P/D proxy only by what it "
                    "forwards (both prefill and decode addresses, or one of vLLM's reference proxies)")


def test_explain_says_what_the_python_reader_saw(tmp_path):
    text = """
        \"\"\"Client for a server started with vllm serve m.\"\"\"
        import subprocess
        subprocess.run(["llmctl", "--engine", "vllm", "serve", "--port", "8000"])
    """
    assert explain(tmp_path, {"c.py": text}, "--explain") == [
        "c.py: no launch: python: parsed, no call starts vLLM: line 1: `Client for a server ...`: prose: the words "
        "around it are a sentence, not a command; line 3: `llmctl --engine vllm serve ...`: `--engine vllm` names "
        "the engine a wrapper drives; `serve` is the wrapper's"]


def test_explain_is_silent_on_files_with_a_launch(tmp_path):
    lines = explain(tmp_path, {"ok.sh": "vllm serve m\n"}, "--explain")
    assert lines and all("no launch" not in l for l in lines)


def test_verbose_explains_only_named_files(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.sh").write_text("echo hi\n")
    result = CliRunner().invoke(main, ["launches", "-v", str(tmp_path / "d")], catch_exceptions=False)
    assert "no launch" not in result.output
    result = CliRunner().invoke(main, ["launches", "--explain", str(tmp_path / "d")], catch_exceptions=False)
    assert "a.sh: no launch: shell: 1 command read, none runs vLLM; the file never mentions vLLM" in result.output


# -- Helm charts with local dependencies ------------------------------------------------------------
LIBRARY = """\
{{- define "common.vllm.container" -}}
- name: vllm
  image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
  command: ["vllm", "serve", {{ .Values.model | quote }}]
  args:
  {{- range .Values.extraArgs }}
  - {{ . | quote }}
  {{- end }}
{{- end -}}
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  template:
    spec:
      containers:
        {{- include "common.vllm.container" . | nindent 8 }}
"""


def local_dependency_chart(root: Path) -> None:
    (root / "common/templates").mkdir(parents=True)
    (root / "app/templates").mkdir(parents=True)
    (root / "common/Chart.yaml").write_text("apiVersion: v2\nname: common\ntype: library\nversion: 0.1.0\n")
    (root / "common/templates/_vllm.tpl").write_text(LIBRARY)
    (root / "app/Chart.yaml").write_text("apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n"
                                         "  - name: common\n    version: 0.1.0\n    repository: file://../common\n")
    (root / "app/values.yaml").write_text("image:\n  repository: vllm/vllm-openai\n  tag: v0.29.0\n"
                                          "model: Qwen/Qwen2.5-0.5B\nextraArgs:\n  - --disable-log-requests\n")
    (root / "app/templates/deployment.yaml").write_text(DEPLOYMENT)


def test_a_chart_with_a_local_dependency_is_rendered_with_it(tmp_path):
    from vllmlint.parsers import helm

    if helm.engine() is None:
        pytest.skip("no Helm engine")
    local_dependency_chart(tmp_path / "charts")
    before = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    candidates, _ = discover([str(tmp_path / "charts")])
    project = load(candidates)           # renders each chart (parsers/helm.py expand_charts)
    [launch] = project.launches
    assert [a.value for a in launch.argv] == ["vllm", "serve", "Qwen/Qwen2.5-0.5B", "--disable-log-requests"]
    assert launch.line == 4 and launch.file.path.name == "values.yaml"         # the model's line
    notes = [n for pf in project.files for n in pf.notes]
    assert "local dependencies rendered from the tree: common (common)" in notes
    assert not any("not vendored" in n for n in notes)
    # nothing written into the tree (the dependency is vendored in a temporary copy)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == before


def test_a_values_file_named_the_other_way_round_is_a_rendering_of_its_own(tmp_path):
    from vllmlint.parsers import helm

    (tmp_path / "values.yaml").write_text("a: 1\n")
    for name in ("gaudi-values.yaml", "cpu.values.yaml", "values-prod.yaml", "myvalues.yaml", "values.yaml.bak"):
        (tmp_path / name).write_text("a: 2\n")
    assert [p.name for p in helm.sibling_values(tmp_path)] == ["cpu.values.yaml", "gaudi-values.yaml",
                                                                "values-prod.yaml"]


def test_a_template_that_validates_a_value_still_renders_the_markers(tmp_path):
    """`fail` unless a value is one of a few words: that value renders as itself, the others
    keep their provenance (OPEA's `Invalid RETRIEVER_BACKEND`)."""
    from vllmlint.parsers import helm

    if helm.engine() is None:
        pytest.skip("no Helm engine")
    root = tmp_path / "chart"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (root / "templates/d.yaml").write_text(
        '{{- if not (has .Values.backend (list "redis" "milvus")) }}{{ fail (printf "Invalid BACKEND: %s" '
        '.Values.backend) }}{{- end }}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n'
        'data: {b: {{ .Values.backend | quote }}, m: {{ .Values.model | quote }}}\n')
    text = "backend: redis\nmodel: Qwen/Qwen2.5-0.5B\n"
    vs = helm.load_values([(root / "values.yaml", text)])
    marked = helm.render_marked(root, vs, None)["c/templates/d.yaml"]
    assert 'b: "redis"' in marked
    [origin] = helm.find_value(marked, vs, "Qwen/Qwen2.5-0.5B")
    assert origin.path == "model" and origin.line == 2


def test_a_values_schema_that_refuses_markers_still_renders(tmp_path):
    """A chart's values.schema.json (an enum, a pattern) refuses the marker strings; Helm names
    the value by its JSON pointer (`at '/image/pullPolicy'`), so that value renders as itself
    and the others keep their provenance (found on ardge-timwu/vllm-helm: no launch was read)."""
    import json

    from vllmlint.parsers import helm

    if helm.engine() is None:
        pytest.skip("no Helm engine")
    root = tmp_path / "chart"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (root / "values.schema.json").write_text(json.dumps({
        "type": "object", "properties": {
            "image": {"type": "object", "properties": {"pullPolicy": {"enum": ["Always", "IfNotPresent"]}}},
            "ingress": {"type": "object", "properties": {"paths": {"type": "array", "items": {
                "type": "object", "properties": {"pathType": {"enum": ["Prefix", "Exact"]}}}}}}}}))
    (root / "templates/d.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
        "data: {p: {{ .Values.image.pullPolicy | quote }}, m: {{ .Values.model | quote }}}\n")
    text = ("image:\n  pullPolicy: IfNotPresent\ningress:\n  paths:\n    - pathType: Prefix\n"
            "model: Qwen/Qwen2.5-0.5B\n")
    vs = helm.load_values([(root / "values.yaml", text)])
    marked = helm.render_marked(root, vs, None)["c/templates/d.yaml"]
    assert 'p: "IfNotPresent"' in marked
    [origin] = helm.find_value(marked, vs, "Qwen/Qwen2.5-0.5B")
    assert origin.path == "model" and origin.line == 6


def test_vllms_api_server_copied_into_a_vllm_build_is_a_launch(tmp_path):
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: s\n"
           "      image: IMAGE\n      command: [python3, /workspace/api_server.py]\n      args: [--model, m]\n")
    [launch] = found(tmp_path, "a.yaml", pod.replace("IMAGE", "opea/vllm-rocm:latest"))
    assert launch.kind == "api-server" and launch.options_start == 2
    assert found(tmp_path, "b.yaml", pod.replace("IMAGE", "python:3.12")) == []
    [launch] = found(tmp_path, "c.sh", "docker run opea/vllm-rocm:latest python3 /workspace/api_server.py --model m\n")
    assert launch.kind == "api-server"
    assert found(tmp_path, "d.sh", "docker run python:3.12 python3 /workspace/api_server.py --model m\n") == []


def test_flags_one_mapping_below_a_vllm_image_run_that_image(tmp_path):
    """production-stack's modelSpec written as a bare list (a helmfile's values): the flags in
    `vllmConfig.extraArgs` run the `repository`/`tag` of the entry above them, so their release
    is known and `migrate` holds the fix that image's tag is not bumped with (it removed a flag
    0.8.4 reads, found as a user on oginskis/agile-vllm-stack)."""
    spec = ('- name: llama3-8b\n  repository: vllm/vllm-openai\n  tag: v0.8.4\n  modelURL: m\n  vllmConfig:\n'
            '    maxModelLen: 16384\n    extraArgs: ["--disable-log-requests", "--gpu-memory-utilization", "0.8"]\n'
            '  hf_token: {{ env "HF_TOKEN" | default "" }}\n')
    (tmp_path / "model-specs.yaml").write_text(spec)
    result = CliRunner().invoke(main, ["launches", "--format", "json", str(tmp_path)], catch_exceptions=False)
    [row] = json.loads(result.stdout)
    assert row["release"] == "0.8.4" and row["image"] == "vllm/vllm-openai:v0.8.4"
    result = CliRunner().invoke(main, ["migrate", "--to", "0.33.0", "--diff", str(tmp_path)], catch_exceptions=False)
    assert not any(line.startswith("-") and "--disable-log-requests" in line for line in result.stdout.splitlines())
    assert "model-specs.yaml:7:18: VL302" in result.output         # reported, held with the tag


def test_an_image_above_does_not_make_other_flags_vllm(tmp_path):
    values = ('image: vllm/vllm-openai:v0.8.4\nrouter:\n  settings:\n    extraArgs: ["--routing-logic", "roundrobin"]\n')
    (tmp_path / "values.yaml").write_text(values)
    result = CliRunner().invoke(main, ["launches", "--format", "json", str(tmp_path)], catch_exceptions=False)
    assert json.loads(result.stdout) == []


CONFIGMAP_SCRIPT = """
apiVersion: v1
kind: ConfigMap
metadata: {name: start}
data:
  start.sh: |
    #!/bin/sh
    exec vllm serve --model=m "$@"
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.2
          command: COMMAND
          args: ARGS
          volumeMounts: [{name: s, mountPath: /scripts}]
      volumes: [{name: s, configMap: {name: start}}]
"""


@pytest.mark.parametrize("command, args, argv, editable", [
    # the container runs the script: its args (and the command's words after it) are "$@"
    ('["/scripts/start.sh"]', '["--swap-space=4", "--port", "8000"]',
     ["--model=m", "--swap-space=4", "--port", "8000"], True),
    ('["bash", "/scripts/start.sh", "--seed", "1"]', '["--port=8000"]',
     ["--model=m", "--seed", "1", "--port=8000"], True),
    ('["/scripts/start.sh"]', '[]', ["--model=m"], True),
    # not passed as "$@": a `sh -c` string runs the script with none; a value known at run time
    ('["sh", "-c", "/scripts/start.sh"]', '["--swap-space=4"]', ["--model=m", "$@"], False),
    ('["/scripts/start.sh"]', '["--port=$(PORT)"]', ["--model=m", "$@"], False),
])
def test_a_configmap_script_gets_the_args_its_container_passes(tmp_path, command, args, argv, editable):
    text = CONFIGMAP_SCRIPT.replace("COMMAND", command).replace("ARGS", args)
    [launch] = found(tmp_path, "deploy.yaml", text)
    assert [a.value for a in launch.argv[2:]] == argv
    assert (launch.not_editable is None) == editable, launch.not_editable
    for arg in launch.argv[3:]:
        if editable:           # each passed flag is read where the manifest writes it
            assert launch.file.text[arg.span[0]:arg.span[1]].strip('"') == arg.value


def test_a_command_line_that_goes_on_in_the_next_string_is_not_edited(tmp_path):
    """A script kept as a list of line strings (`"vllm serve {model} \\\\"`, then its flags in the
    next strings): the scan sees one line, which ends in a continuation. The launch is read,
    but what follows is unknown (no "flag not set" finding) and it is not edited."""
    (tmp_path / "requirements.txt").write_text("vllm==0.31.0\n")
    [launch] = found(tmp_path, "templates.py", """
        LAUNCH_CMD = [
            "vllm serve {model_weights_path} \\\\",
            "    --allowed-origins '[\\"*\\"]' \\\\",
            "    --port 8000",
        ]
        """)
    assert launch.argv[-1].value == "\\" and launch.argv[-1].dynamic
    assert launch.not_editable and "goes on past this text" in launch.not_editable
    result = CliRunner().invoke(main, ["check", "--target-version", "0.32.0", "--fail-level", "info", str(tmp_path)])
    assert "VL307" not in result.output, result.output


@pytest.mark.parametrize("name, runs", [
    ("tests/test_deployment.py", False),       # compared in an assert: what the test expects
    ("test_chart.py", False),
    ("tests/test_server.py", True),            # the same helper, run by the test: a launch
    ("launcher/commands.py", False),           # not a test file: a helper's argv stays a launch
])
def test_an_argv_a_test_only_compares_is_not_a_launch(tmp_path, name, runs):
    run_it = "    subprocess.Popen(expected_command('0.0.0.0', 'm', 80))\n" if runs else ""
    text = ("import subprocess\n\n\ndef expected_command(host, model, port):\n"
            "    return ['python3', '-m', 'vllm.entrypoints.openai.api_server', '--host', host,\n"
            "            '--model', model, '--port', str(port)]\n\n\n"
            "def test_command(rendered):\n"
            "    assert rendered['command'] == expected_command('0.0.0.0', 'm', 80)\n" + run_it)
    assert bool(found(tmp_path, name, text)) == (runs or name.startswith("launcher/"))


@pytest.mark.parametrize("line, image", [
    ("shifter --image=vllm/vllm-openai:v0.8.3 --module=gpu vllm serve m --port 8000", "vllm/vllm-openai:v0.8.3"),
    ("shifter --image vllm/vllm-openai:v0.8.3 vllm serve m", "vllm/vllm-openai:v0.8.3"),
    ("srun -N 1 --container-image=vllm/vllm-openai:v0.9.2 --container-mounts=/m:/m vllm serve m", "vllm/vllm-openai:v0.9.2"),
    ("srun --nodes=1 vllm serve m", None),                  # no container: the host's vLLM
])
def test_hpc_runners_give_the_image_they_run(tmp_path, line, image):
    [launch] = found(tmp_path, "job.sbatch", "#!/bin/bash\n#SBATCH --nodes=1\n" + line + "\n")
    assert launch.image == image and [a.value for a in launch.argv[:3]] == ["vllm", "serve", "m"]


@pytest.mark.parametrize("line", [
    "shifter --image=nvcr.io/nvidia/pytorch:24.01-py3 python train.py --epochs 3",
    "srun --container-image=sglang/sglang:latest python -m sglang.launch_server --model m",
])
def test_hpc_runners_of_other_programs_start_no_vllm(tmp_path, line):
    assert found(tmp_path, "job.sbatch", "#!/bin/bash\n" + line + "\n") == []


def test_a_script_file_that_ends_in_a_backslash_ends_there(tmp_path):
    """A script whose last line ends in `\\` with nothing after it (found as a user on
    BjornWest/instance_scripts) is the whole command: read and edited as any other."""
    (tmp_path / "requirements.txt").write_text("vllm==0.31.0\n")
    [launch] = found(tmp_path, "serve.sh", "#!/bin/bash\nvllm serve m \\\n    --port 8000 \\\n    --host 0.0.0.0 \\")
    assert launch.not_editable is None and not any(a.dynamic for a in launch.argv)


# -- an image's registry and tag written as variables ------------------------------------------
# (found as a user on OPEA's compose files: `${REGISTRY:-opea}/vllm-rocm:${TAG:-latest}` was no
# launch while `${REGISTRY:-opea}/vllm:latest` was one). A default stands for its variable, any
# other variable for an unknown part; the repository name decides.
VARIABLE_SERVING = [
    "${REGISTRY:-opea}/vllm-rocm:${TAG:-latest}",
    "${REGISTRY:-opea}/vllm:${TAG:-latest}",
    "${REGISTRY-opea}/vllm-gaudi:${TAG-latest}",
    "${REGISTRY}/vllm-openai:${TAG}",
    "$REG/vllm-openai:$TAG",
    "${REGISTRY:-docker.io}/vllm/vllm-openai:${VLLM_TAG:-v0.8.5}",
    "${IMAGE:-${REGISTRY:-opea}/vllm:latest}",
]
# another engine's repository (or a vLLM build that starts a shell) whatever the variables hold
VARIABLE_NOT_SERVING = [
    "${REGISTRY:-opea}/tgi:${TAG}",
    "${REGISTRY:-opea}/tgi:${TAG:-latest}",
    "lmsysorg/sglang:${TAG}",
    "${REGISTRY:-lmsysorg}/sglang:${TAG:-latest}",
    "ghcr.io/huggingface/text-generation-inference:${TGI_VERSION}",
    "${REGISTRY:-rocm}/vllm-dev:${TAG:-nightly}",
]
VARIABLE_RUNNERS = sorted(r for r in RUNNERS if r not in ("dockerfile", "docker SDK", "python argv"))


@pytest.mark.parametrize("runner", VARIABLE_RUNNERS)
@pytest.mark.parametrize("image", VARIABLE_SERVING)
def test_an_image_written_with_variables_serves_by_its_repository(tmp_path, runner, image):
    name, text = run_with(runner, image)
    [launch] = found(tmp_path, name, text)
    assert [a.value for a in launch.argv][:3] == ["vllm", "serve", "--model=m"], (runner, image)


@pytest.mark.parametrize("runner", VARIABLE_RUNNERS)
@pytest.mark.parametrize("image", VARIABLE_NOT_SERVING)
def test_another_engines_image_with_variables_is_no_launch(tmp_path, runner, image):
    """`--max-model-len` looks like vLLM's, and a variable registry or tag once made a pod's or
    a service's args list vLLM's by its flags: the repository name says otherwise."""
    name, text = run_with(runner, image)
    assert found(tmp_path, name, text) == [], (runner, image)


@pytest.mark.parametrize("image", ["$REG/vllm:$TAG", "${REGISTRY:-acme}/vllm:${TAG:-latest}",
                                   "${REGISTRY:-opea}/vllmx:${TAG:-latest}"])
def test_an_unlisted_name_with_vllm_in_it_is_no_serving_image(tmp_path, image):
    """Only the table's names serve engine args; a `vllm` name outside it (no namespace the table
    knows) given generic flags is no launch, as `acme/vllm:latest` is none."""
    text = f"services:\n  llm:\n    image: {image}\n    command: --model m --port 80\n"
    assert found(tmp_path, "compose.yaml", text) == []


def test_a_default_tag_is_never_the_release_nor_bumped(tmp_path):
    text = ("services:\n  llm:\n    image: ${REGISTRY:-docker.io}/vllm/vllm-openai:${VLLM_TAG:-v0.8.5}\n"
            "    command: --model m --port 80\n")
    (tmp_path / "compose.yaml").write_text(text)
    [launch] = found(tmp_path, "compose.yaml", text)
    assert launch.image == "${REGISTRY:-docker.io}/vllm/vllm-openai:${VLLM_TAG:-v0.8.5}"
    result = CliRunner().invoke(main, ["migrate", "--to", "0.30.0", "--diff", str(tmp_path)], catch_exceptions=False)
    assert result.stdout == "" and "would change 0 files" in result.output, result.output    # no diff
    assert (tmp_path / "compose.yaml").read_text() == text


@pytest.mark.parametrize("extra, runs", [
    ("", False),                                         # OPEA's docker_image_build/build.yaml
    ("    extends: audioqna\n    container_name: vllm-rocm\n", False),
    ("    ports: [\"8000:8000\"]\n", True),                # built here and run here
    ("    command: --model m\n", True),
])
def test_a_service_that_only_builds_its_image_runs_nothing(tmp_path, extra, runs):
    text = ("services:\n  vllm-rocm:\n    build:\n      context: GenAIComps\n"
            "      dockerfile: comps/third_parties/vllm/src/Dockerfile.amd_gpu\n"
            "    image: ${REGISTRY:-opea}/vllm-rocm:${TAG:-latest}\n" + extra)
    assert len(found(tmp_path, "build.yaml", text)) == runs


# -- a virtual environment's interpreter or console script as argv[0] ---------------------------
# (found as a user on ovg-project/kvcached: `[str(venv / "bin" / "python"), "-m",
# "vllm.entrypoints.openai.api_server", ...]` was no launch while `"python"` and
# `sys.executable` were)
PYTHON_PATHS = [
    'str(Path(venv) / "bin" / "python")',
    'Path(venv) / "bin" / "python3"',
    'os.path.join(venv, "bin", "python")',
    'os.fspath(Path(venv, "bin", "python3.11"))',
    '(Path(venv) / "bin" / "python").as_posix()',
    'f"{venv}/bin/python"',
    'venv + "/bin/python3"',
    'str(Path(venv).joinpath("bin", "python"))',
    'shutil.which("python3")',
    '"{}/bin/python".format(venv)',
    '"%s/bin/python3" % venv',
]
VLLM_PATHS = ['venv / "bin" / "vllm"', 'str(venv / "bin" / "vllm")', 'os.path.join(venv, "bin", "vllm")',
              'shutil.which("vllm")', 'Path("/opt/venv/bin/vllm")']


def python_launcher(first: str, rest: str, bind: str = "") -> str:
    return ("import os\nimport shutil\nimport subprocess\nfrom pathlib import Path\n\n\n"
            f"def start(model, venv):\n{bind}    subprocess.Popen([{first}, {rest}, \"--model\", model])\n")


@pytest.mark.parametrize("path", PYTHON_PATHS)
@pytest.mark.parametrize("bound", [False, True])
def test_a_venvs_interpreter_runs_vllms_server_module(tmp_path, path, bound):
    bind = f"    python_exec = {path}\n" if bound else ""
    first = "str(python_exec)" if bound else path
    text = python_launcher(first, '"-m", "vllm.entrypoints.openai.api_server"', bind)
    [launch] = found(tmp_path, "launch.py", text)
    assert launch.kind == "api-server" and launch.program == "python -m vllm.entrypoints.openai.api_server"
    head = launch.argv[0]
    assert head.dynamic and text[head.span[0]:head.span[1]] == first      # as written, never edited
    assert [a.value for a in launch.argv[1:]] == ["-m", "vllm.entrypoints.openai.api_server", "--model", "model"]
    assert all(text[a.span[0]:a.span[1]].strip("\"") == a.value for a in launch.argv[1:])


@pytest.mark.parametrize("path", VLLM_PATHS)
def test_a_venvs_vllm_console_script_is_vllms_cli(tmp_path, path):
    text = python_launcher(path, '"serve", "m", "--port", "8000"')
    [launch] = found(tmp_path, "launch.py", text)
    assert launch.program == "vllm serve" and [a.value for a in launch.argv[1:3]] == ["serve", "m"]
    assert text[launch.argv[0].span[0]:launch.argv[0].span[1]] == path


@pytest.mark.parametrize("first, rest, bind", [
    ('str(Path(venv) / "bin" / "python")', '"-m", "sglang.launch_server"', ""),
    ('os.path.join(venv, "bin", "python")', '"-m", "mytool", "--engine", "vllm"', ""),
    ('os.path.join(venv, "bin", "text-generation-launcher")', '"--model-id", "m"', ""),
    ('venv / "bin" / exe', '"-m", "vllm.entrypoints.openai.api_server"', "    exe = pick()\n"),
    ('venv / "bin" / "vllm-router"', '"serve", "m"', ""),
    ('venv / "bin" / "pythonista"', '"-m", "vllm.entrypoints.openai.api_server"', ""),
    ('tool', '"-m", "vllm.entrypoints.openai.api_server"',
     '    tool = venv / "bin" / "python"\n    tool = venv / "bin" / "llm-router"\n'),
])
def test_a_path_that_names_another_program_is_no_launch(tmp_path, first, rest, bind):
    assert found(tmp_path, "launch.py", python_launcher(first, rest, bind)) == []
