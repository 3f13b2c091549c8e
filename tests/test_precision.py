"""Issue 14: fixes never change what the release a launch runs today does.

`check --fix` over a copy of the whole shared corpus: for every launch whose current release
is known, no flag the fix added is one that release does not accept, and no variable the fix
removed is one that release still reads."""
from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main
from vllmlint.knowledge.catalogue import for_target, versions
from vllmlint.lint.discovery import discover
from vllmlint.lint.project import load

CORPUS = Path("/work/shared/corpus/files")
if not CORPUS.is_dir():
    CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "files"


def _flags(launch) -> set[str]:
    return {a.value.split("=", 1)[0] for a in launch.argv[launch.options_start:]
            if isinstance(a.value, str) and a.value.startswith("--")}


def _state(root: Path):
    candidates, _ = discover([str(root)])
    project = load(candidates)
    launches = defaultdict(list)
    env = defaultdict(set)
    for pf in project.files:
        for launch in pf.launches:
            launches[pf.source.display].append((launch.release, _flags(launch)))
        for entry in pf.env:
            env[pf.source.display].add(entry.name)
    releases = {pf.source.display: {l.release for l in pf.launches} for pf in project.files}
    return launches, env, releases


@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not present")
def test_fix_keeps_every_launch_on_the_release_it_runs(tmp_path, monkeypatch):
    work = tmp_path / "files"
    shutil.copytree(CORPUS, work, copy_function=shutil.copyfile)
    monkeypatch.chdir(work)
    before_launches, before_env, releases = _state(Path("."))
    CliRunner().invoke(main, ["check", "--fix", "."], catch_exceptions=False)
    after_launches, after_env, _ = _state(Path("."))
    checked = 0
    for path, launches in after_launches.items():
        old = {f for _, flags in before_launches.get(path, []) for f in flags}
        for release, flags in launches:
            if release is None or (cat := for_target(release)) is None:
                continue
            checked += 1
            for flag in flags - old:           # added by a fix
                assert cat.match(flag).kind == "exact", f"{path}: {flag} is not accepted by {release}"
    for path, names in before_env.items():
        for release in releases.get(path, set()):
            if release is None or (cat := for_target(release)) is None:
                continue
            for name in names - after_env.get(path, set()):     # removed by a fix
                assert not cat.reads_env(name), f"{path}: {name} removed but {release} reads it"
    assert checked > 0


def test_disable_log_requests_fixed_only_with_the_release(tmp_path, monkeypatch):
    """The pinned 0.9.0 service keeps its flag under --fix; migrate removes it with the bump."""
    (tmp_path / "docker-compose.yml").write_text(
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.9.0\n"
        '    command: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--disable-log-requests"]\n')
    monkeypatch.chdir(tmp_path)
    before = (tmp_path / "docker-compose.yml").read_bytes()
    result = CliRunner().invoke(main, ["check", "--fix", "."], catch_exceptions=False)
    assert result.exit_code == 1
    assert (tmp_path / "docker-compose.yml").read_bytes() == before
    assert "vllmlint migrate --to 0.30.0" in result.stdout


def test_kubeai_model_runs_the_operators_oldest_vllm_image(tmp_path, monkeypatch):
    """A KubeAI Model names no image: KubeAI's operator runs one of `modelServers.VLLM.images`.
    With the operator's chart values in the tree, the Model runs the oldest release they name
    (v0.8.3 here: `--attention-backend` does not exist there, so `--fix` must not swap
    VLLM_ATTENTION_BACKEND for it; migrate does, with the bump). Without them: unknown, so the
    fix is held back too, until the user names the release (`--target-version`)."""
    model = """\
apiVersion: kubeai.org/v1
kind: Model
metadata: {name: qwen}
spec:
  engine: VLLM
  url: hf://Qwen/Qwen2.5-7B-Instruct
  args:
    - --max-model-len=8192
  env:
    VLLM_ATTENTION_BACKEND: FLASHINFER
"""
    (tmp_path / "models").mkdir()
    (tmp_path / "models/qwen.yaml").write_text(model)
    (tmp_path / "chart").mkdir()
    (tmp_path / "chart/values.yaml").write_text(
        "modelServers:\n  VLLM:\n    images:\n      default: \"vllm/vllm-openai:v0.9.2\"\n"
        "      nvidia-gpu: \"vllm/vllm-openai:v0.8.3\"\n      cpu: \"substratusai/vllm:v0.6.3-cpu\"\n"
        "  OLlama:\n    images:\n      default: \"ollama/ollama:latest\"\n")
    monkeypatch.chdir(tmp_path)
    launches, _, _ = _state(Path("models"))                # the Model without the chart: unknown
    assert [release for release, _ in launches["models/qwen.yaml"]] == [None]
    launches, _, _ = _state(Path("."))
    assert [release for release, _ in launches["models/qwen.yaml"]] == [(0, 8, 3)]
    result = CliRunner().invoke(main, ["check", "--fix", "."], catch_exceptions=False)
    assert "VLLM_ATTENTION_BACKEND" in (tmp_path / "models/qwen.yaml").read_text()
    assert "runs 0.8.3 today" in result.stdout
    shutil.rmtree(tmp_path / "chart")
    result = CliRunner().invoke(main, ["check", "--fix", "."], catch_exceptions=False)
    assert "VLLM_ATTENTION_BACKEND" in (tmp_path / "models/qwen.yaml").read_text()
    assert "its vLLM release is unknown" in result.stdout
    CliRunner().invoke(main, ["check", "--fix", "--target-version", "0.30.0", "."], catch_exceptions=False)
    assert "--attention-backend=FLASHINFER" in (tmp_path / "models/qwen.yaml").read_text()


@pytest.mark.parametrize("args", [["check", "--target-version", "0.99.0"], ["check", "--target-version", "0.5.0"],
                                  ["migrate", "--to", "9.9.9"], ["migrate", "--from", "0.1.0", "--to", "0.30.0"]])
def test_unknown_release_is_a_usage_error(tmp_path, args):
    result = CliRunner().invoke(main, args + [str(tmp_path)])
    assert result.exit_code == 2
    assert f"0.6.6-{versions()[-1]}" in result.output and "vllmlint catalogue add" in result.output


def test_latest_is_the_newest_catalogued(tmp_path):
    (tmp_path / "serve.sh").write_text("vllm serve m --disable-log-requests\n")
    result = CliRunner().invoke(main, ["check", "--show-details", "--target-version", "latest", str(tmp_path)])
    assert result.exit_code == 1 and f"vLLM {versions()[-1]} refuses to start" in result.stdout


KUSTOMIZATION = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
images:
  - name: pytorch/torchserve-kfs
    newTag: 0.9.0
  - name: vllm
    newName: vllm/vllm-openai
    newTag: v0.29.0
  - name: kserve/router
    newTag: v0.15.0
"""


def _migrate(tmp_path, files: dict[str, str], *args):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = CliRunner().invoke(main, ["migrate", "--to", "0.30.0", *args, str(tmp_path)], catch_exceptions=False)
    return result, {name: (tmp_path / name).read_text() for name in files}


KUSTOMIZED_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm
          command: ["vllm", "serve", "m"]
"""


def test_kustomize_bumps_only_the_vllm_entry(tmp_path):
    """The newTag of the entry that retags the image a launch of the kustomization runs; a
    kustomization whose vLLM image no launch runs is listed, never bumped (issue 29)."""
    result, out = _migrate(tmp_path, {"kustomization.yaml": KUSTOMIZATION, "deployment.yaml": KUSTOMIZED_DEPLOYMENT})
    assert out["kustomization.yaml"] == KUSTOMIZATION.replace("newTag: v0.29.0", "newTag: v0.30.0")
    assert "0.9.0" not in result.output.replace("0.29.0", "")
    alone = tmp_path / "alone"
    alone.mkdir()
    result, out = _migrate(alone, {"kustomization.yaml": KUSTOMIZATION})
    assert out["kustomization.yaml"] == KUSTOMIZATION
    assert "named where no launch reads them (1 place in 1 file)" in result.output


def test_four_part_tag_replaced_whole_and_variant_left(tmp_path):
    compose = ("services:\n  a:\n    image: vllm/vllm-openai:v0.9.0.1\n"
               "  b:\n    image: vllm/vllm-openai:v0.29.0-cu129\n"
               "  c:\n    image: vllm/vllm-openai:latest\n")
    result, out = _migrate(tmp_path, {"docker-compose.yml": compose})
    assert out["docker-compose.yml"] == compose.replace("v0.9.0.1", "v0.30.0")
    assert "v0.30.0.1" not in result.output
    assert "variant suffix" in result.output


@pytest.mark.parametrize("image,tag", [("vllm/vllm-openai:latest", "latest"), ("vllm/vllm-openai:nightly", "nightly"),
                                       ("vllm/vllm-openai:nightly-3f2a1b9c", "nightly-3f2a1b9c"),
                                       ("vllm/vllm-openai-cpu:latest", "latest"),
                                       ("vllm/vllm-openai:0a1b2c3d4e5f", "0a1b2c3d4e5f"),
                                       ("vllm/vllm-openai", "latest")])
def test_floating_tags_are_left_alone_and_reported(tmp_path, image, tag):
    compose = f"services:\n  a:\n    image: {image}\n    command: [\"--model\", \"m\"]\n"
    result, out = _migrate(tmp_path, {"compose.yaml": compose})
    assert out["compose.yaml"] == compose
    [line] = [l for l in result.output.splitlines() if "names no release" in l]
    assert "compose.yaml:3: image tag" in line and f"tag {tag} names no release" in line


def test_floating_tag_text_is_not_an_image(tmp_path):
    script = "#!/bin/sh\n# see vllm/vllm-openai on Docker Hub\nvllm serve m\n"
    result, out = _migrate(tmp_path, {"run.sh": script})
    assert "names no release" not in result.output


@pytest.mark.parametrize("value", ["0.99.0", "0.5.0", "abc"])
def test_settings_target_version_is_checked_like_the_flag(tmp_path, monkeypatch, value):
    (tmp_path / "pyproject.toml").write_text(f'[tool.vllmlint]\ntarget-version = "{value}"\n')
    (tmp_path / "run.sh").write_text("vllm serve m --swap-space 4\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "."], catch_exceptions=False)
    assert result.exit_code == 2 and "target-version" in result.output and "not a catalogued vLLM release" in result.output


def test_settings_target_version_latest(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.vllmlint]\ntarget-version = "latest"\n')
    (tmp_path / "run.sh").write_text("vllm serve m --swap-space 4\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "."], catch_exceptions=False)
    assert result.exit_code == 1 and "VL302" in result.output


def test_image_tags_in_python_test_code_are_reported_not_bumped(tmp_path):
    (tmp_path / "tests").mkdir()
    test_code = ('def test_renders_image():\n    job = {"image": "vllm/vllm-openai:v0.8.5"}\n'
                 '    assert render(job)["image"] == "vllm/vllm-openai:v0.8.5"\n')
    # a Modal launcher: its function runs `vllm serve` in the registry image (issue 29: only an
    # image a launch runs is bumped; the test's data runs nowhere, so it is listed)
    launcher = ('import modal, subprocess\nimage = modal.Image.from_registry("vllm/vllm-openai:v0.8.5")\n'
                'app = modal.App("x")\n\n@app.function(image=image)\ndef serve():\n'
                '    subprocess.Popen(["vllm", "serve", "m"])\n')
    result, out = _migrate(tmp_path, {"tests/test_render.py": test_code, "deploy.py": launcher}, "--verbose")
    assert out["tests/test_render.py"] == test_code
    assert out["deploy.py"] == launcher.replace("v0.8.5", "v0.30.0")
    assert "tests/test_render.py:2: vllm/vllm-openai:v0.8.5" in result.output


@pytest.mark.parametrize("image, release, unnamed", [
    ("rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715", (0, 9, 1), False),     # ROCm's tags carry the release
    ("rocm/vllm-dev:open-mi300-08052025", None, True),                 # a dated build: pinned, unnamed
    ("vllm/vllm-openai:v0.29.0", (0, 29, 0), False),
    ("vllm/vllm-openai:latest", None, False),                          # moves with releases: not unnamed
    ("vllm/vllm-openai:nightly-2f3c4d5", None, False),
    ("vllm/vllm-openai", None, False),
    ("vllm/vllm-openai:${TAG}", None, False),                          # set at run time
    ("lmsysorg/sglang:v0.4.0", None, False),                           # not vLLM at all
])
def test_release_named_by_an_image_tag(image, release, unnamed):
    from vllmlint.lint.releases import release_from_image, unnamed_release
    assert release_from_image(image) == release
    assert bool(unnamed_release(image)) is unnamed
