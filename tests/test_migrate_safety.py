"""Issue 29: every edit traced to a launch, and every edited file parses back.

tests/data/migrate_safety is a synthetic tree of the shapes that real repositories had
`migrate` edit blind: an append-only changelog YAML naming vLLM image upgrades, a prose
annotation and a comment naming images, a Modal launcher whose docstring and comment give image
examples, a recipe in a YAML format vllmlint does not read as launches, and a script whose
`if` body holds only the variable a fix removes."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main

TREE = Path(__file__).parent / "data" / "migrate_safety"


@pytest.fixture
def tree(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(TREE, root)
    monkeypatch.chdir(root)          # paths are reported relative to the tree, as a user runs it
    return root


def _migrate(root: Path, *args: str):
    return CliRunner().invoke(main, ["migrate", "--to", "0.30.0", *args, "."], catch_exceptions=False)


def test_only_images_a_launch_runs_are_bumped(tree):
    originals = {p: p.read_text() for p in tree.rglob("*") if p.is_file()}
    result = _migrate(tree, "--verbose")
    deploy = (tree / "deploy/vllm.yaml").read_text()
    # the container's image: bumped; its prose annotation and the comment above it: not
    assert "image: vllm/vllm-openai:v0.30.0" in deploy
    assert 'description: "Serves the model on vllm/vllm-openai:v0.22.0 (upgraded from vllm/vllm-openai:v0.21.0)"' in deploy
    assert "# image: vllm/vllm-openai:v0.21.0 was the previous release" in deploy
    # the changelog and the recipe: untouched, listed for a human
    assert (tree / "CHANGELOG.yaml").read_text() == originals[tree / "CHANGELOG.yaml"]
    assert (tree / "recipes/qwen.yaml").read_text() == originals[tree / "recipes/qwen.yaml"]
    # the Modal image its function runs: bumped; the docstring and comment examples: not
    modal = (tree / "tools/modal_serve.py").read_text()
    assert 'from_registry("vllm/vllm-openai:v0.30.0")' in modal
    assert "such as 'vllm/vllm-openai:v0.22.0'" in modal
    assert "# image: 'vllm/vllm-openai:v0.21.0' -> 'vllm/vllm-openai:v0.22.0'" in modal
    assert "Starts vLLM in vllm/vllm-openai:v0.22.0." in modal
    out = result.output
    assert "Left for a human: vLLM images named where no launch reads them (12 places in 4 files)" in out
    assert "recipes/qwen.yaml:5: vllm/vllm-openai:v0.22.0" in out
    assert "CHANGELOG.yaml:6: vllm/vllm-openai:v0.21.0" in out


def test_without_verbose_the_unread_places_are_counted_once(tree):
    result = _migrate(tree, "--diff")
    assert "named where no launch reads them (12 places in 4 files); never bumped (--verbose lists them)" \
        in result.output
    assert "recipes/qwen.yaml:5" not in result.output


def test_the_only_statement_of_an_if_body_becomes_a_no_op(tree):
    script = tree / "scripts/start.sh"
    result = CliRunner().invoke(main, ["check", "--fix", "--target-version", "0.30.0", str(script)])
    text = script.read_text()
    assert "if [ \"${LEGACY:-0}\" = 1 ]; then\n  :\nfi\n" in text, result.output
    if shutil.which("bash"):
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    again = CliRunner().invoke(main, ["check", "--fix", "--target-version", "0.30.0", str(script)])
    assert script.read_text() == text, again.output       # a second --fix changes nothing


@pytest.mark.parametrize("script, fixed", [
    ("if a; then export VLLM_USE_V1=1; fi\nvllm serve m\n", "if a; then :; fi\n"),
    ("for i in 1; do\n  # why\n  export VLLM_USE_V1=1\ndone\nvllm serve m\n", "do\n  # why\n  :\ndone\n"),
    ("f() {\n  export VLLM_USE_V1=1\n}\nf\nvllm serve m\n", "f() {\n  :\n}\n"),
    ("if a; then\n  export VLLM_USE_V1=1\nelse\n  echo no\nfi\nvllm serve m\n", "then\n  :\nelse\n"),
    ("if a; then\n  export VLLM_USE_V1=1\n  echo x\nfi\nvllm serve m\n", "then\n  echo x\nfi\n"),   # not alone
])
def test_a_removal_never_leaves_an_empty_compound_body(tmp_path, script, fixed):
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/bash\n" + script)
    CliRunner().invoke(main, ["check", "--fix", "--target-version", "0.30.0", str(path)])
    assert fixed in path.read_text()
    if shutil.which("bash"):
        assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


def test_report_names_the_launch_its_release_and_the_evidence(tree, tmp_path):
    report = tmp_path / "migration.md"
    _migrate(tree, "--diff", "--report", str(report))
    text = report.read_text()
    assert ("line 13: image tag `vllm/vllm-openai:v0.22.0` -> `vllm/vllm-openai:v0.30.0`; run by container vllm "
            "(Deployment/llm) at `deploy/vllm.yaml:14`, which ran 0.22.0 (image vllm/vllm-openai:v0.22.0 at "
            "deploy/vllm.yaml:13)") in text
    assert "## vLLM images named where no launch reads them (12 places in 4 files)" in text
    assert "- `recipes/qwen.yaml:5`: `vllm/vllm-openai:v0.22.0`" in text


@pytest.mark.parametrize("kind, name, good, bad", [
    ("shell", "a.sh", "if a; then\n  :\nfi\n", "if a; then\nfi\n"),
    # a launch script the script writes: bash -n reads its body as data, so it is checked apart
    ("shell", "gen.sh", "cat > run.sh <<EOF\nif a; then\n  :\nfi\nEOF\n", "cat > run.sh <<EOF\nif a; then\nfi\nEOF\n"),
    ("shell", "ssh.sh", "ssh h <<'EOF'\nif a; then\n  :\nfi\nEOF\n", "ssh h <<'EOF'\nif a; then\nfi\nEOF\n"),
    ("yaml", "a.yaml", "a: [1, 2]\n", "a: [1, 2\n"),
    ("k8s", "a.json", '{"a": 1}', '{"a": 1,}'),
    ("python", "a.py", "x = [1]\n", "x = [1\n"),
])
def test_parse_back_in_the_files_own_language(kind, name, good, bad):
    from vllmlint.lint.parseback import native_error

    if kind == "shell" and not shutil.which("bash"):
        pytest.skip("bash is not on PATH")
    assert native_error(kind, Path(name), good, good) is None
    assert native_error(kind, Path(name), good, bad)
    assert native_error(kind, Path(name), bad, bad) is None     # did not parse before: not the edit's doing


def test_a_heredoc_that_is_no_script_is_not_checked_as_one():
    from vllmlint.lint.parseback import native_error

    if not shutil.which("bash"):
        pytest.skip("bash is not on PATH")
    notes = "cat > notes.txt <<EOF\nif a; then\n  :\nfi\nEOF\n"
    assert native_error("shell", Path("a.sh"), notes, notes.replace("  :\n", "")) is None


def test_the_parse_back_checks_the_heredoc_scripts_the_front_end_read():
    """The shell front end says which heredoc bodies it read as scripts (its variables resolved:
    `$RUNNER <<EOF` with RUNNER=bash); the parse-back checks those, without lexing again."""
    from vllmlint.lint.parseback import native_error
    from vllmlint.lint.project import parse_source
    from vllmlint.model.launch import SourceFile

    if not shutil.which("bash"):
        pytest.skip("bash is not on PATH")
    good = "RUNNER=bash\n$RUNNER <<EOF\nif a; then\n  :\nfi\nvllm serve m\nEOF\n"
    bad = good.replace("  :\n", "")
    parsed = parse_source(SourceFile(Path("gen.sh"), "gen.sh", bad, "shell"))
    body = bad.index("if a")
    assert parsed.scripts == [(body, bad.index("EOF\n", body))]
    assert native_error("shell", Path("gen.sh"), good, bad) is None      # found by name only: not a script
    error = native_error("shell", Path("gen.sh"), good, bad, after_scripts=parsed.scripts)
    assert error and "heredoc script from line 3" in error


@pytest.mark.parametrize("before, after", [
    ("a: 1\n---\nb: [1, 2]\n", "a: 1\n---\nb: [1, 2]\nc: !!int x\n"),       # constructs: no
    ("a: 1\n---\nb: 2\n", "a: 1\n---\nb: 3\n"),
    ("base: &b {x: 1}\nc:\n  <<: *b\n", "base: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n"),
])
def test_the_yaml_parse_back_reuses_the_front_ends_composition(before, after):
    """The native check of an edited YAML file constructs the documents the front end composed
    of that very text, and gives the verdict a fresh load gives."""
    from vllmlint.lint import parseback
    from vllmlint.parsers.yaml_source import compose_all, composed

    compose_all(after)
    assert composed(after) is not None
    reused = parseback._yaml_error_c_first(after), parseback._yaml_error_edited(before, after)
    parseback_fresh = parseback._yaml_error(after)
    assert reused == (parseback_fresh, parseback_fresh)
    assert (parseback_fresh is None) == ("!!int x" not in after)


def test_a_fix_whose_result_bash_cannot_read_is_not_written(tmp_path, monkeypatch):
    """Our own front end accepts what bash refuses: the native parser is the judge, the file
    is left as it was and the run says why."""
    from vllmlint.parsers import shellscan

    if not shutil.which("bash"):
        pytest.skip("bash is not on PATH")
    monkeypatch.setattr(shellscan, "only_statement", lambda text, start, end: False)   # the old edit
    path = tmp_path / "run.sh"
    original = "#!/bin/bash\nif a; then\n  export VLLM_USE_V1=1\nfi\nvllm serve m\n"
    path.write_text(original)
    result = CliRunner().invoke(main, ["check", "--fix", "--target-version", "0.30.0", str(path)])
    assert path.read_text() == original
    assert "fix not applied, the result would not parse (bash -n:" in result.output
    assert "VLLM_USE_V1" in result.output and "(not fixed: the result would not parse: bash -n:" in result.output


def test_the_arg_a_from_takes_its_tag_from_is_bumped_a_build_only_from_is_listed(tmp_path, monkeypatch):
    """`ARG V=v0.22.0` + `FROM vllm/vllm-openai:${V}` of a stage that serves: the ARG is the tag
    of the image that launch runs. A Dockerfile that only builds on the image (no launch) is
    listed, never bumped."""
    (tmp_path / "serve").mkdir()
    (tmp_path / "build").mkdir()
    served = 'ARG VLLM_VERSION=v0.22.0\nFROM vllm/vllm-openai:${VLLM_VERSION}\nENTRYPOINT ["vllm", "serve", "m"]\n'
    built = "FROM vllm/vllm-openai:v0.22.0\nCOPY ray_init.sh /vllm-workspace/ray_init.sh\n"
    (tmp_path / "serve/Dockerfile").write_text(served)
    (tmp_path / "build/Dockerfile").write_text(built)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["migrate", "--to", "0.30.0", "--verbose", "."], catch_exceptions=False)
    assert (tmp_path / "serve/Dockerfile").read_text() == served.replace("v0.22.0", "v0.30.0")
    assert (tmp_path / "build/Dockerfile").read_text() == built
    assert "build/Dockerfile:1: vllm/vllm-openai:v0.22.0" in result.output


def test_an_image_beside_a_field_that_names_the_same_release_is_left_for_a_human(tmp_path, monkeypatch):
    """A provenance field (`frameworks.vllm: "0.23.0"`) beside the image: bumping the image
    alone would make the two disagree (issue 29), so neither is bumped and the summary says why."""
    deployment = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  annotations:
    frameworks.vllm: "0.23.0"
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.23.0
          args: ["--model", "m"]
"""
    (tmp_path / "d.yaml").write_text(deployment)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["migrate", "--to", "0.30.0", "."], catch_exceptions=False)
    assert (tmp_path / "d.yaml").read_text() == deployment
    assert 'line 6 names the same release (`frameworks.vllm: "0.23.0"`): bump both by hand, together' in result.output


# The default of an image variable (`image: ${VLLM_IMAGE:-vllm/vllm-openai:v0.26.0}`, compose or a
# script): the image the launch runs unless the variable is set. Found as a user (a DGX stack's
# compose file, issue 29): it was neither bumped nor listed, so migrate said "0 files" while the
# launch stayed on 0.26.0.
IMAGE_DEFAULT_COMPOSE = """services:
  vllm:
    image: ${VLLM_IMAGE:-vllm/vllm-openai:v0.26.0}
    command: >
      --model ${MODEL:-Qwen/Qwen3-8B}
      --port 8000
"""


def test_image_variable_default_is_bumped(tmp_path, monkeypatch):
    (tmp_path / "compose.yaml").write_text(IMAGE_DEFAULT_COMPOSE)
    monkeypatch.chdir(tmp_path)
    result = _migrate(tmp_path)
    assert "image: ${VLLM_IMAGE:-vllm/vllm-openai:v0.30.0}" in (tmp_path / "compose.yaml").read_text()
    assert "compose.yaml:3: image tag vllm/vllm-openai:v0.26.0 -> vllm/vllm-openai:v0.30.0" in result.output


def test_image_variable_set_in_an_env_file_is_left_for_a_human(tmp_path, monkeypatch):
    (tmp_path / "compose.yaml").write_text(IMAGE_DEFAULT_COMPOSE)
    (tmp_path / ".env").write_text("VLLM_IMAGE=registry.example/vllm/vllm-openai:v0.26.0\n")
    monkeypatch.chdir(tmp_path)
    result = _migrate(tmp_path)
    assert (tmp_path / "compose.yaml").read_text() == IMAGE_DEFAULT_COMPOSE
    assert "VLLM_IMAGE is set in .env" in result.output


# A build migrate neither recognises as vLLM's release image nor bumps (an OpenVINO build
# republished by a user, found as a user in a KServe ServingRuntime): its launch keeps whatever
# vLLM it ships, so a removal of a variable that build still reads is held, with the reason.
OPENVINO_RUNTIME = """apiVersion: v1
kind: Pod
metadata: {name: ov}
spec:
  containers:
    - name: kserve-container
      image: quay.io/someone/vllm-openvino:latest
      command: ["python", "-m", "vllm.entrypoints.openai.api_server"]
      args: ["--port=8080", "--model=/mnt/models"]
      env:
        - name: VLLM_OPENVINO_DEVICE
          value: "CPU"
"""


@pytest.mark.parametrize("image", ["quay.io/someone/vllm-custom:latest", "quay.io/someone/vllm-openvino:latest"])
def test_fix_held_on_an_image_migrate_does_not_bump(tmp_path, monkeypatch, image):
    """A build `migrate` neither knows nor bumps keeps its config; an OpenVINO build (a plugin's
    image since 2026-12-05) reads VLLM_OPENVINO_DEVICE itself: not even reported."""
    text = OPENVINO_RUNTIME.replace("quay.io/someone/vllm-openvino:latest", image)
    (tmp_path / "runtime.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    result = _migrate(tmp_path)
    assert (tmp_path / "runtime.yaml").read_text() == text
    held = (f"not fixed by the migration: it runs {image}, which `migrate` does not know as a vLLM release image "
            f"and does not bump")
    assert (held in result.output) == ("openvino" not in image), result.output


def test_pin_bump_moves_a_launch_on_a_python_base_image(tmp_path, monkeypatch):
    (tmp_path / "Dockerfile").write_text('FROM python:3.12\nRUN pip install vllm==0.29.0\n'
                                         'ENV VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nCMD ["vllm", "serve", "m"]\n')
    monkeypatch.chdir(tmp_path)
    _migrate(tmp_path)
    assert (tmp_path / "Dockerfile").read_text() == ('FROM python:3.12\nRUN pip install vllm==0.30.0\n'
                                                     'CMD ["vllm", "serve", "m", "--enable-scale-out"]\n')


COMPOSE_WITH_CONFIG = """services:
  vllm:
    image: vllm/vllm-openai:v0.21.0
    volumes:
      - ./config.yaml:/app/config.yaml:ro
    entrypoint: ["vllm", "serve", "Qwen/Qwen3-8B", {config}]
"""


@pytest.mark.parametrize("config", ['"--config", "/app/config.yaml"', '"--config=/app/config.yaml"'])
def test_a_launch_with_options_in_a_config_file_is_left_for_a_human(tmp_path, monkeypatch, config):
    """vLLM reads `--config FILE`'s keys as more options; vllmlint does not read that file, so
    the options the bump would move are unknown: the tag is left for a human, with why."""
    (tmp_path / "docker-compose.yml").write_text(COMPOSE_WITH_CONFIG.format(config=config))
    (tmp_path / "config.yaml").write_text("max-model-len: 8192\nenable-prefix-caching: true\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["migrate", "--to", "0.34.0", "--diff", "."], catch_exceptions=False)
    assert "+++" not in result.output
    assert "reads more options from `--config /app/config.yaml`, which vllmlint does not read" in result.output


def test_config_format_is_no_config_file(tmp_path, monkeypatch):
    (tmp_path / "docker-compose.yml").write_text(
        COMPOSE_WITH_CONFIG.format(config='"--config-format", "auto"'))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["migrate", "--to", "0.34.0", "--diff", "."], catch_exceptions=False)
    assert "+    image: vllm/vllm-openai:v0.34.0" in result.output


BLOCK_SCALAR_STEP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: env
data:
  VLLM_ATTENTION_BACKEND: "FLASHINFER"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: x
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.16.0
          command: ["/bin/sh", "-c"]
          args:
            - |
              exec vllm serve m \\
              --gpu-memory-utilization \\
              0.9 \\
              --disable-log-requests
          envFrom:
            - configMapRef:
                name: env
"""


def test_a_word_that_starts_its_line_keeps_the_lines_indentation(tmp_path):
    """One step of a chain appends `--attention-backend` after the last word of a block-scalar
    script (VL303); the next pass removes that word (VL302). The word starts its line, so the
    blank before it is the indentation that keeps the line inside the block scalar: it stays
    (it was taken with the word, the result did not parse back and the fix was refused, E001;
    found on bench/gen_corpus2.py's manifests). The same for a shell script's continued line."""
    (tmp_path / "a.yaml").write_text(BLOCK_SCALAR_STEP)
    result = CliRunner().invoke(main, ["migrate", "--to", "0.30.0", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code != 2 and "E001" not in result.output, result.output
    fixed = (tmp_path / "a.yaml").read_text()
    assert "              0.9 \\\n              --attention-backend=FLASHINFER\n          envFrom:" in fixed, fixed
    assert "--disable-log-requests" not in fixed
    (tmp_path / "a.yaml").unlink()
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/sh\n# vllmlint: release=0.30.0\nvllm serve m \\\n    --disable-log-requests --port 8000\n")
    CliRunner().invoke(main, ["check", "--fix", str(script)], catch_exceptions=False)
    assert script.read_text() == "#!/bin/sh\n# vllmlint: release=0.30.0\nvllm serve m \\\n    --port 8000\n"


def test_a_ray_workers_image_moves_with_the_head_it_joins(tmp_path, monkeypatch):
    """A KubeRay (or AIBrix fleet) worker runs `ray start`, no launch of its own; it joins the
    head's cluster, so its vLLM image is the head's and is bumped with it (a worker left on the
    old release breaks the cluster)."""
    text = ("apiVersion: orchestration.aibrix.ai/v1alpha1\nkind: RayClusterFleet\nmetadata:\n  name: f\nspec:\n"
            "  template:\n    spec:\n      headGroupSpec:\n        template:\n          spec:\n            containers:\n"
            "            - name: ray-head\n              image: vllm/vllm-openai:v0.11.0\n"
            "              command: [/bin/bash, -c]\n              args: [\"ray start --head && vllm serve m\"]\n"
            "      workerGroupSpecs:\n      - groupName: g\n        template:\n          spec:\n            containers:\n"
            "            - name: ray-worker\n              image: vllm/vllm-openai:v0.11.0\n")
    (tmp_path / "fleet.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    _migrate(tmp_path)
    assert (tmp_path / "fleet.yaml").read_text() == text.replace("v0.11.0", "v0.30.0")


def test_no_fix_is_written_into_python_test_code(tmp_path, monkeypatch):
    """Found on Tandemn-Labs/tandemn-tuna: `migrate` removed a flag from the command strings of
    four tests' fixtures (data fed to the code under test), not from the template the code
    renders. Test code is reported, never edited; the template and the script are fixed."""
    (tmp_path / "tests").mkdir()
    test = tmp_path / "tests/test_provider.py"
    test.write_text('import pytest\n\n\n@pytest.fixture\ndef vllm_cmd():\n'
                    '    return "vllm serve Qwen/Qwen3-0.6B --port 8001 --disable-log-requests"\n')
    (tmp_path / "serve.sh").write_text("#!/bin/sh\nexec vllm serve Qwen/Qwen3-0.6B --disable-log-requests\n")
    (tmp_path / "conftest.py").write_text(
        'import subprocess\n\n\ndef start():\n'
        '    return subprocess.Popen(["vllm", "serve", "m", "--disable-log-requests"])\n')
    # an import is code that runs: VL306 (Rule.fixes_code) still moves it in test code
    (tmp_path / "tests/server.py").write_text("from vllm.entrypoints.openai.cli_args import make_arg_parser\n")
    before = test.read_text(), (tmp_path / "conftest.py").read_text()
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["migrate", "--to", "0.33.0", "."], catch_exceptions=False)
    assert (test.read_text(), (tmp_path / "conftest.py").read_text()) == before
    assert "vllm.entrypoints.common.cli_args" in (tmp_path / "tests/server.py").read_text()
    assert "--disable-log-requests" not in (tmp_path / "serve.sh").read_text()
    assert "(not fixed: Python test code)" in result.output
    fixed = CliRunner().invoke(main, ["check", "--target-version", "0.33.0", "--fix", "."], catch_exceptions=False)
    assert (test.read_text(), (tmp_path / "conftest.py").read_text()) == before, fixed.output


# --------------------------------------------------------------------------------------------
# A launch whose release is unknown, beside a pin no launch is linked to
# --------------------------------------------------------------------------------------------
SERVE_SH = "#!/bin/bash\nvllm serve Qwen/Qwen3-8B --port 8000 --disable-log-requests\n"


def _stray_tree(root: Path, pin: str | None) -> Path:
    (root / "app/scripts").mkdir(parents=True)
    (root / "app/scripts/serve.sh").write_text(SERVE_SH)
    if pin is not None:
        (root / "app/config").mkdir()
        (root / "app/config/requirements.txt").write_text(pin)
    return root


def _migrate_to(root: Path, to: str, *args: str):
    import os

    here = os.getcwd()
    os.chdir(root)          # paths reported relative to the tree, as a user runs it
    try:
        return CliRunner().invoke(main, ["migrate", "--to", to, *args, "."], catch_exceptions=False)
    finally:
        os.chdir(here)


def test_an_older_pin_no_launch_is_linked_to_holds_the_unknown_launchs_fixes(tmp_path):
    """The tree pins vLLM in an environment file that is not above the launcher (found on
    UIUC-Chatbot/llm-serving: `ray_serving/config/requirements.txt` pinned vllm==0.4.2 and
    `migrate --to 0.33.0` rewrote `ray_serving/models/...` for 0.29.0): the launcher may run that
    pin, which migrate does not bump, so its release-dependent fixes are reported, not written."""
    root = _stray_tree(tmp_path, "fastapi\nvllm==0.4.2\n")
    result = _migrate_to(root, "0.33.0")
    assert (root / "app/scripts/serve.sh").read_text() == SERVE_SH, result.output
    assert (root / "app/config/requirements.txt").read_text() == "fastapi\nvllm==0.4.2\n"
    assert ("not fixed by the migration: its vLLM release is not known, and the tree pins vllm==0.4.2 at "
            "app/config/requirements.txt:2") in result.output
    assert "vLLM pins named where no launch reads them (1 place in 1 file)" in result.output


@pytest.mark.parametrize("pin", [None, "vllm==0.33.0\n", "# vllm==0.4.2 (the old stack)\nfastapi\n"],
                         ids=["no pin", "a pin as new as the target", "a pin in a comment"])
def test_without_an_older_stray_pin_the_named_target_is_what_runs(tmp_path, pin):
    """Neighbours: nothing in the tree says otherwise, so `--to` states what runs and the fix is
    written (the policy before), as it is beside a pin at the target or one in a comment."""
    root = _stray_tree(tmp_path, pin)
    result = _migrate_to(root, "0.33.0")
    assert "--disable-log-requests" not in (root / "app/scripts/serve.sh").read_text(), result.output


def test_a_module_that_starts_no_vllm_gets_the_release_of_its_pin(tmp_path):
    """VL306 on a module that starts no vLLM stands in a launch for the requirements pin beside
    it; the release gates read that stand-in's image, which it lacked: `check` and `migrate`
    stopped with an AttributeError. No launch reaches that pin, so migrate does not bump it and
    the import waits for it."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app/requirements.txt").write_text("vllm==0.28.0\n")
    code = "from vllm.entrypoints.openai.cli_args import make_arg_parser\nprint(make_arg_parser)\n"
    (tmp_path / "app/tool.py").write_text(code)
    result = _migrate_to(tmp_path, "0.33.0")
    assert (tmp_path / "app/tool.py").read_text() == code
    assert "which `migrate` does not bump: bump it by hand" in result.output, result.output
    out = CliRunner().invoke(main, ["check", str(tmp_path)], catch_exceptions=False).output
    assert "VL306" in out and "runs 0.28.0 today, the pin vllm==0.28.0 in app/requirements: bump it to 0.29.0" in out


@pytest.mark.parametrize("files, where", [
    ({"pyproject.toml": '[project]\nname = "x"\nversion = "0.1"\ndependencies = ["vllm==0.21.0"]\n',
      "serve.sh": "#!/bin/bash\nvllm serve m --port 8000\n"},
     "pyproject.toml:4: pin vllm==0.21.0: a pyproject.toml dependency"),
    ({"serve.sh": "#!/bin/bash\npip install vllm==0.21.0\nvllm serve m --port 8000\n"},
     "serve.sh:2: pin vllm==0.21.0: installed by its own script"),
])
def test_a_pin_migrate_does_not_bump_is_left_for_a_human(tmp_path, files, where):
    """A launch whose release is a pin `migrate` does not bump keeps that release: the migration
    says so, and exits 1, even when it has nothing else to change."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = CliRunner().invoke(main, ["migrate", "--to", "0.33.0", "--diff", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "Left for a human (1):" in result.output and where in result.output, result.output
    assert "serve.sh:3 runs it" in result.output or "serve.sh:2 runs it" in result.output


def test_diff_names_the_lines_of_the_files_on_disk(tmp_path):
    """`--diff` writes nothing, so what is left for a human is placed on the files as they are;
    a migration that writes places it on the files it wrote."""
    text = ("services:\n  vllm:\n    image: vllm/vllm-openai:v0.10.1\n    environment:\n"
            "      - VLLM_ATTENTION_BACKEND=FLASHINFER\n      - VLLM_USE_FLASH_ATTN=1\n    command: --model m\n")
    (tmp_path / "docker-compose.yml").write_text(text)
    dry = CliRunner().invoke(main, ["migrate", "--to", "0.33.0", "--diff", str(tmp_path)], catch_exceptions=False)
    assert "docker-compose.yml:6:9: VL303 info: VLLM_USE_FLASH_ATTN" in dry.output, dry.output
    done = CliRunner().invoke(main, ["migrate", "--to", "0.33.0", str(tmp_path)], catch_exceptions=False)
    assert "docker-compose.yml:5:9: VL303 info: VLLM_USE_FLASH_ATTN" in done.output, done.output
    assert (tmp_path / "docker-compose.yml").read_text().splitlines()[4] == "      - VLLM_USE_FLASH_ATTN=1"


@pytest.mark.parametrize("runner", ["apptainer exec --nv", "singularity run --nv"])
def test_a_docker_uri_of_apptainer_is_the_tag_bumped(runner, tmp_path):
    """`apptainer exec docker://vllm/vllm-openai:v0.8.3 vllm serve ...`: the launch runs that
    image, so migrate bumps its tag in place, `docker://` kept (found as a user on
    KempnerInstitute/distributed-inference-vllm: "set where migrate finds no tag to bump")."""
    script = tmp_path / "job.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes=1\n{runner} docker://vllm/vllm-openai:v0.29.0 "
                      "vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000\n")
    result = CliRunner().invoke(main, ["migrate", "--to", "0.30.0", str(tmp_path)])
    assert f"{runner} docker://vllm/vllm-openai:v0.30.0 vllm serve" in script.read_text(), result.output


@pytest.mark.parametrize("comment, held", [
    ("# Pin to v0.29.0: the last tag that ships Volta kernels", True),
    ("# compatible with our CUDA 12.1 driver only", True),
    ("# Launch vLLM's OpenAI-compatible server", False),    # says what it serves, not why this tag
])
def test_a_comment_that_chooses_the_release_holds_the_bump(comment, held, tmp_path):
    script = tmp_path / "serve.sh"
    script.write_text(f"#!/bin/sh\n{comment}\ndocker run --gpus all vllm/vllm-openai:v0.29.0 --model m\n")
    result = CliRunner().invoke(main, ["migrate", "--to", "0.30.0", str(tmp_path)])
    assert ("vllm/vllm-openai:v0.29.0" in script.read_text()) == held, result.output
    assert ("a comment says this release is chosen on purpose" in result.output) == held
