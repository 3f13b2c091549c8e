"""A fix that depends on the release needs the release; a vLLM pin moves with its environment.

fixtures/releases/<case>/   trees whose launch's release is written in another file (a workflow's
                            env or matrix, a Dockerfile that COPYs the launcher, compose build:,
                            a config's image:), declared (directive, settings), unknown, or a
                            platform build's: `check --fix` keeps the config unless the release is
                            known and the fix keeps behaviour there; `launches` says where from.
fixtures/deps/<case>/       `migrate` on a vLLM pin with the other pins of its environment.
Network: never (pip is pointed at a folder of wheels built here, its own config ignored).
"""
from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
VAR = "VLLM_MM_HASHER_ALGORITHM"          # read by vLLM up to 0.29.0; its flag from 0.30.0 on


def run(args, cwd: Path, env: dict | None = None):
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, catch_exceptions=False, env=env)
    finally:
        os.chdir(old)


def copy(case: str, tmp_path: Path) -> Path:
    work = tmp_path / "tree"
    shutil.copytree(FIXTURES / case, work)
    return work


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------------------------
# Releases
# --------------------------------------------------------------------------------------------
HELD = {   # case -> (the launch's file, what `launches` says its release is from)
    "workflow-env": ("bench/serve.sh", "release 0.22.0 from VLLM_VERSION=0.22.0 in .github/workflows/bench.yml:7"),
    "workflow-matrix": ("ci/run_server.sh", "release 0.24.0 from VLLM_IMAGE=vllm/vllm-openai:v0.24.0 in "
                                            ".github/workflows/e2e.yml:7 (the oldest of its matrix)"),
    "dockerfile-copy": ("scripts/start.sh", "release 0.22.0 from image vllm/vllm-openai:v0.22.0 in Dockerfile, "
                                            "which copies it (Dockerfile:2)"),
    "dockerfile-copy-pin": ("app/launch.py", "release 0.22.0 from pin vllm==0.22.0 in Dockerfile, which copies it "
                                             "(Dockerfile:3)"),
    "compose-build": ("compose.yaml", "release 0.23.0 from image vllm/vllm-openai:v0.23.0 in server/Dockerfile, "
                                      "which `build:` names (compose.yaml)"),
    "script-build": ("deploy.yaml", "release 0.22.0 from image vllm/vllm-openai:v0.22.0 in docker/Dockerfile, which "
                                    "build.sh:5 builds as registry.example.com/ml/vllm-vl:2024-06"),
    "make-build": ("compose.yaml", "release 0.23.0 from pin vllm==0.23.0 in server/Dockerfile, which Makefile:5 "
                                   "builds as acme/vl-server:0.4.1"),
    "config-image": ("run_bench.py", "release 0.22.0 from image vllm/vllm-openai:v0.22.0 in configs/bench.yaml:2"),
    "settings": ("bench/serve.sh", "release 0.22.0 from setting releases 'bench/**' = '0.22.0' in pyproject.toml"),
}


# the release comes through a link to a file `migrate` does not bump for the launch: its fixes
# for the target wait for that file's upgrade (found as a user: a script's flags fixed while the
# Dockerfile that copies it stayed on its old image)
LINKED = ("workflow-env", "workflow-matrix", "dockerfile-copy", "dockerfile-copy-pin", "config-image")


@pytest.mark.parametrize("case", LINKED)
def test_migrate_does_not_fix_a_launch_whose_linked_release_stays(case, tmp_path):
    work = copy(f"releases/{case}", tmp_path)
    path, source = HELD[case]
    before = snapshot(work)
    result = run(["migrate", "--to", "0.30.0", "."], work)
    assert snapshot(work)[path] == before[path], result.output
    assert "not fixed by the migration: its release is the " + source.removeprefix("release 0.22.0 from ")\
        .removeprefix("release 0.24.0 from ") in result.output, result.output


@pytest.mark.parametrize("case", sorted(HELD))
def test_fix_held_back_on_the_release_another_file_names(case, tmp_path):
    work = copy(f"releases/{case}", tmp_path)
    path, source = HELD[case]
    shown = run(["launches", "."], work)
    assert f"[{source}]" in shown.output, shown.output
    before = snapshot(work)
    for args in (["check", "--fix", "."], ["check", "--fix", "--target-version", "0.30.0", "."]):
        result = run(args, work)
        assert snapshot(work) == before, f"{args}: the release it runs still reads {VAR}"
        if case in LINKED:      # migrate holds the fixes of a linked release (test above): by hand
            assert "today, set in a file it is linked to: upgrade that first" in result.output
            assert "fix with `vllmlint migrate" not in result.output
        else:
            assert "today: fix with `vllmlint migrate --to 0.30.0`" in result.output
    assert (work / path).read_text().count(VAR) == 1


def test_a_tag_built_from_several_dockerfiles_stays_unknown(tmp_path):
    work = copy("releases/script-build-ambiguous", tmp_path)
    assert "[release" not in run(["launches", "."], work).output
    assert "not fixed: its vLLM release is unknown" in run(["check", "--fix", "."], work).output


BUILDS = {   # builder file -> text, the tag keys it builds (the Dockerfile is ./Dockerfile or d/Dockerfile)
    "build.sh": ('SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n'
                 'docker buildx build --platform linux/amd64 --tag=acme/a:1 "$SCRIPT_DIR"\n', ["acme/a:1"]),
    "bud.sh": ("buildah bud -t localhost/acme/b -f d/Dockerfile .\n", ["acme/b:latest"]),
    "comment.sh": ("# docker build -t acme/c:1 .\necho 'docker' build\n", []),
    "unset.sh": ('docker build -t "acme/d:${VERSION}" .\n', []),          # a tag the caller sets
    "twice.sh": ("T=acme/e:1\nT=acme/e:2\ndocker build -t $T .\n", []),   # two values: which one?
    "stdin.sh": ("docker build -t acme/f:1 - < Dockerfile\n", []),
    "sub.sh": ('id=$(docker image build -q -t acme/g:1 d)\n', ["acme/g:1"]),
}


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_builds_a_script_names(name, tmp_path):
    from vllmlint.lint.release_links import builds_in

    (tmp_path / "d").mkdir()
    for folder in (tmp_path, tmp_path / "d"):
        (folder / "Dockerfile").write_text("FROM vllm/vllm-openai:v0.22.0\n")
    text, keys = BUILDS[name]
    (tmp_path / name).write_text(text)
    assert [k for k, _, _ in builds_in(tmp_path / name, text, tmp_path)] == keys


def test_a_workflow_builds_from_the_repository_root(tmp_path):
    from vllmlint.lint.release_links import Repo

    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "Dockerfile").write_text("FROM vllm/vllm-openai:v0.22.0\n")
    (tmp_path / ".github" / "workflows" / "image.yml").write_text(
        "on: push\njobs:\n  b:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: docker build -t ghcr.io/acme/serving:main -f serving/Dockerfile serving\n")
    built = Repo(tmp_path).built_tags()
    assert [(k, d.relative_to(tmp_path).as_posix()) for k, v in built.items() for d, _, _ in v] == \
        [("ghcr.io/acme/serving:main", "serving/Dockerfile")]


def test_a_workflow_build_push_action_builds_the_tag(tmp_path):
    """`docker/build-push-action` with `file:` and written-out `tags:` (a `${{ }}` tag is not
    followed), as a `run: docker build` is."""
    from vllmlint.lint.release_links import Repo

    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "Dockerfile.vllm").write_text("FROM vllm/vllm-openai:v0.22.0\n")
    (tmp_path / ".github" / "workflows" / "image.yml").write_text(
        "on: push\njobs:\n  b:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: docker/build-push-action@v6\n        with:\n          context: serving\n"
        "          file: serving/Dockerfile.vllm\n          push: true\n"
        "          tags: |\n            ghcr.io/acme/serving:stable\n            ghcr.io/acme/serving:${{ github.sha }}\n")
    built = Repo(tmp_path).built_tags()
    assert [(k, d.name) for k, v in built.items() for d, _, _ in v] == [("ghcr.io/acme/serving:stable", "Dockerfile.vllm")]


def test_unknown_release_is_held_until_named(tmp_path):
    work = copy("releases/unknown", tmp_path)
    result = run(["check", "--fix", "."], work)
    assert VAR in (work / "serve.sh").read_text()
    assert "not fixed: its vLLM release is unknown" in result.output
    detail = json.loads(run(["check", "--format", "json", "."], work).stdout)
    assert any("# vllmlint: release=X.Y.Z" in f["detail"] and "[tool.vllmlint.releases]" in f["detail"]
               for f in detail)
    run(["check", "--fix", "--target-version", "0.30.0", "."], work)
    assert VAR not in (work / "serve.sh").read_text()
    assert "--mm-hasher-algorithm=sha256" in (work / "serve.sh").read_text()


def test_directive_names_the_release(tmp_path):
    work = copy("releases/directive", tmp_path)
    assert "[release 0.30.0 from directive at serve.sh:2]" in run(["launches", "."], work).output
    run(["check", "--fix", "."], work)
    assert VAR not in (work / "serve.sh").read_text()


def test_platform_builds_are_never_fixed_automatically(tmp_path):
    work = copy("releases/platform", tmp_path)
    shown = run(["launches", "."], work).output
    assert "opea/vllm-rocm:1.3.0 is built by or for OPEA" in shown          # not vLLM 1.3.0
    assert "pytorch-inference-vllm-neuronx:0.9.1-neuronx-py310-sdk2.24.0-ubuntu22.04 is built by or for " \
           "AWS Neuron" in shown
    assert "habanalabs/pytorch-installer-2.6.0:latest is built by or for Intel Gaudi" in shown
    assert "[release 0.9.1 from image rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715]" in shown   # the tag names it
    before = snapshot(work)
    run(["check", "--fix", "--target-version", "0.30.0", "."], work)
    assert snapshot(work) == before


def test_releases_setting_is_validated(tmp_path):
    (tmp_path / ".vllmlint.toml").write_text('[releases]\n"bench/**" = "latest"\n')
    result = run(["check", "."], tmp_path)
    assert result.exit_code == 2
    assert "releases: 'bench/**' = 'latest' is not a release X.Y.Z" in result.output
    (tmp_path / ".vllmlint.toml").write_text('releases = ["bench/**"]\n')
    assert run(["check", "."], tmp_path).exit_code == 2


# --------------------------------------------------------------------------------------------
# Environments
# --------------------------------------------------------------------------------------------
def test_torch_is_bumped_with_vllm(tmp_path):
    work = copy("deps/torch-with-vllm", tmp_path)
    result = run(["migrate", "--to", "0.30.0", "."], work)
    assert result.exit_code in (0, 1), result.output
    text = (work / "Dockerfile").read_text()
    assert "vllm==0.30.0 torch==2.13.0 \\\n    torchvision==0.28.0 \"transformers>=5.10\"" in text
    assert "pin (vLLM 0.30.0 needs it) torch==2.11.0 -> torch==2.13.0" in result.output


@pytest.mark.parametrize("index", [
    "--extra-index-url https://download.pytorch.org/whl/cu124\n",
    "--index-url=https://download.pytorch.org/whl/rocm6.2\n",
    "-f https://download.pytorch.org/whl/cu121/torch_stable.html\n",
])
def test_torch_from_a_cuda_build_index_is_left_for_a_human(index, tmp_path):
    """PyTorch's index of one CUDA/ROCm build serves the torch releases of that toolkit only:
    bumping torch==2.6.0 to what vLLM needs would make pip take another build from PyPI, so the
    environment's vLLM pin waits (found as a user on KempnerInstitute/distributed-inference-vllm)."""
    (tmp_path / "requirements.txt").write_text(index + "torch==2.6.0\nvllm==0.8.5\n")
    (tmp_path / "serve.sh").write_text("#!/bin/sh\nvllm serve m --port 8000\n")
    before = snapshot(tmp_path)
    result = run(["migrate", "--to", "0.30.0", "."], tmp_path)
    assert snapshot(tmp_path) == before, result.output
    assert "installs torch from PyTorch's" in result.output and "choose the index and bump by hand" in result.output


def test_constraints_file_moves_with_requirements(tmp_path):
    work = copy("deps/requirements-constraints", tmp_path)
    run(["migrate", "--to", "0.30.0", "."], work)
    assert "vllm==0.30.0" in (work / "requirements.txt").read_text()
    assert (work / "constraints.txt").read_text() == "torch==2.13.0\ntorchvision==0.28.0\n"
    assert "torchaudio==2.11.0  # audio models" in (work / "requirements.txt").read_text()   # 0.30.0 pins it too


BLOCKED = {   # case, target -> what the summary says
    ("range-conflict", "0.30.0"): "huggingface_hub<1.0 and vLLM 0.30.0's huggingface_hub>=1.31.0 admit no common version",
    ("exact-conflict", "0.30.0"): "huggingface_hub==0.23.4 does not satisfy vLLM 0.30.0's huggingface_hub>=1.31.0",
    ("python310", "0.33.0"): "vLLM 0.33.0 requires Python <3.15,>=3.11; base image python:3.10-slim runs Python 3.10",
    ("wheel-url", "0.30.0"): "is a wheel built for torch 2.6; vLLM 0.30.0 pins torch==2.13.0",
}


@pytest.mark.parametrize("case,target", sorted(BLOCKED))
def test_blocked_environment_keeps_its_vllm(case, target, tmp_path):
    work = copy(f"deps/{case}", tmp_path)
    before = snapshot(work)
    result = run(["migrate", "--to", target, "--report", str(tmp_path / "pr.md"), "."], work)
    assert snapshot(work) == before, "never a half-upgraded environment"
    assert BLOCKED[(case, target)] in result.output
    assert "blocker, not bumped" in (tmp_path / "pr.md").read_text()


def test_sglang_environment_keeps_its_vllm(tmp_path):
    # vLLM as SGLang's dependency (in `pip install sglang[all] vllm`, and in an SGLang base image):
    # no vLLM launch runs that environment (the image runs SGLang), so its pins are never bumped;
    # migrate lists them among the places no launch reads (issue 29: every edit traced to a launch)
    work = copy("deps/sglang-dep", tmp_path)
    before = snapshot(work)
    result = run(["migrate", "--to", "0.30.0", "--verbose", "."], work)
    assert snapshot(work) == before
    assert "vLLM pins named where no launch reads them (2 places in 2 files)" in result.output
    assert "Dockerfile:2: vllm==0.27.0" in result.output and "Dockerfile.base:2: vllm==0.27.0" in result.output


# --------------------------------------------------------------------------------------------
# --check-deps: pip asked, against a local folder of wheels
# --------------------------------------------------------------------------------------------
def wheel(folder: Path, name: str, version: str, requires: list[str] = (), python: str = "") -> None:
    """A metadata-only wheel (pip's resolver reads nothing else in a dry run)."""
    dist = f"{name}-{version}.dist-info"
    meta = [f"Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Python: {python}"] if python else []
    meta += [f"Requires-Dist: {r}" for r in requires]
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{dist}/METADATA", "\n".join(meta) + "\n")
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{dist}/RECORD", "")


@pytest.fixture
def local_index(tmp_path):
    links = tmp_path / "wheels"
    links.mkdir()
    wheel(links, "vllm", "0.27.0", ["torch==2.11.0"])
    wheel(links, "vllm", "0.30.0", ["torch==2.13.0", "torchvision==0.28.0"])
    for name, version in (("torch", "2.11.0"), ("torch", "2.13.0"), ("torchvision", "0.26.0"),
                          ("torchvision", "0.28.0")):
        wheel(links, name, version)
    wheel(links, "transformers", "5.10.4")
    return {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_CONSTRAINT": ""}


def test_check_deps_resolves_with_pip(tmp_path, local_index):
    work = copy("deps/torch-with-vllm", tmp_path)
    result = run(["migrate", "--to", "0.30.0", "--check-deps", "."], work, env=local_index)
    assert "vllm==0.30.0 torch==2.13.0" in (work / "Dockerfile").read_text(), result.output


def test_check_deps_blocks_what_pip_cannot_resolve(tmp_path, local_index):
    work = copy("deps/torch-with-vllm", tmp_path)
    dockerfile = work / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace('"transformers>=5.10"', "tokenizers==0.99.0"))
    before = snapshot(work)
    result = run(["migrate", "--to", "0.30.0", "--check-deps", "."], work, env=local_index)
    assert snapshot(work) == before
    assert "pip cannot resolve the upgraded environment" in result.output
    assert "tokenizers" in result.output


def test_blocked_environment_keeps_its_launch_config(tmp_path):
    """The launch that runs a blocked environment keeps what its release reads: the fixes for
    the new release wait with the pin."""
    work = copy("deps/blocked-launch-kept", tmp_path)
    before = snapshot(work)
    result = run(["migrate", "--to", "0.30.0", "."], work)
    assert snapshot(work) == before
    assert "(not fixed: its vLLM pin is not bumped, see the blocker)" in result.output


@pytest.mark.parametrize("image, release, unnamed", [
    ("opea/vllm-rocm:1.3.0", None, True),                      # OPEA's 1.3.0, not vLLM's
    ("intel/vllm:0.10.2-xpu", None, True),
    ("rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715", (0, 9, 1), False),     # the tag names the release
    ("quay.io/ascend/vllm-ascend:v0.9.1", None, True),         # the plugin's version
    ("vault.habana.ai/gaudi-docker/1.21.0/ubuntu22.04/habanalabs/pytorch-installer-2.6.0:latest", None, True),
    ("vllm/vllm-tpu:v0.9.0", (0, 9, 0), False),                # vLLM's own TPU image: vLLM's tags
    ("public.ecr.aws/q9t5s3a7/vllm-openai:v0.22.0", (0, 22, 0), False),    # a mirror of vLLM's own
])
def test_platform_build_tags_are_not_vllm_releases(image, release, unnamed):
    from vllmlint.lint.releases import release_from_image, unnamed_release

    assert release_from_image(image) == release
    assert bool(unnamed_release(image)) is unnamed


@pytest.mark.parametrize("image,release", [
    ("lmcache/vllm-openai:v0.3.7", None),               # LMCache's release, not vLLM 0.3.7
    ("docker.io/lmcache/vllm-openai:v0.3.7", None),
    ("ghcr.io/acme/vllm-openai:v0.9.1", (0, 9, 1)),     # a mirror of vLLM's image keeps vLLM's tags
    ("vllm/vllm-openai:v0.29.0", (0, 29, 0)),
])
def test_a_publishers_own_build_is_not_read_as_a_mirror(image, release):
    from vllmlint.lint.releases import release_from_image, unnamed_release

    assert release_from_image(image) == release
    assert ("its tags are not vLLM's releases" in unnamed_release(image)) == (release is None)


def test_requirements_pin_reaches_scripts_folders_below_it(tmp_path):
    """A launch runs the environment of the nearest requirements file above its folder, however
    deep: scripts/experimental/serve.sh under ./requirements.txt (found as a user on
    JamesFincher/vllm-server-config: a script two folders down read as of unknown release, so
    migrate removed its VLLM_USE_V1=0 while the blocked pin kept vLLM 0.10.0). A requirements
    file in a sibling folder says nothing of it; a nearer one wins."""
    (tmp_path / "requirements.txt").write_text("vllm==0.10.0\n")
    for rel in ("scripts/experimental/serve.sh", "a/b/c/serve.sh", "tools/serve.sh", "near/x/serve.sh"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("#!/bin/sh\nvllm serve m --port 8000\n")
    (tmp_path / "near" / "requirements.txt").write_text("vllm==0.11.0\n")
    (tmp_path / "sibling").mkdir()
    (tmp_path / "sibling" / "requirements.txt").write_text("vllm==0.9.0\n")
    lines = {line.split(":")[0]: line for line in run(["launches", "."], tmp_path).output.splitlines() if line}
    for rel in ("scripts/experimental/serve.sh", "a/b/c/serve.sh", "tools/serve.sh"):
        assert "release 0.10.0 from pin vllm==0.10.0" in lines[rel], lines[rel]
    assert "release 0.11.0 from pin vllm==0.11.0 in near/requirements" in lines["near/x/serve.sh"]


def test_deep_script_under_a_blocked_pin_keeps_its_config(tmp_path):
    """The deep script's fixes wait with the blocked pin, as a script next to it would."""
    (tmp_path / "requirements.txt").write_text("vllm==0.10.0\ntransformers==4.40.0\n")
    script = tmp_path / "scripts" / "experimental" / "serve_v0.sh"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\nexport VLLM_USE_V1=1\nvllm serve m --port 8000\n")
    before = snapshot(tmp_path)
    result = run(["migrate", "--to", "0.30.0", "."], tmp_path)
    assert snapshot(tmp_path) == before, result.output
    assert "its vLLM pin is not bumped" in result.output, result.output


def test_deep_script_moves_with_its_pin(tmp_path):
    """Neighbour: the same script under a pin that resolves: the pin and the script move together."""
    (tmp_path / "requirements.txt").write_text("vllm==0.10.0\n")
    script = tmp_path / "scripts" / "experimental" / "serve_v0.sh"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\nexport VLLM_USE_V1=1\nvllm serve m --port 8000\n")
    result = run(["migrate", "--to", "0.30.0", "."], tmp_path)
    assert (tmp_path / "requirements.txt").read_text() == "vllm==0.30.0\n", result.output
    assert script.read_text() == "#!/bin/sh\nvllm serve m --port 8000\n", result.output


def test_requirements_pin_is_the_hosts_not_a_containers(tmp_path):
    """A GitHub Actions `run:` step runs on the runner, in the environment a requirements file
    pins; a Kubernetes manifest or custom resource beside the same file runs a container, whose
    release that file does not say (found on vllm-project/production-stack: a VLLMRuntime's
    `extraArgs` two folders under requirements-test.txt read as running its vllm==0.13.0)."""
    (tmp_path / "requirements-test.txt").write_text("vllm==0.13.0\n")
    wf = tmp_path / ".github" / "workflows" / "e2e.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text("on: push\njobs:\n  e2e:\n    runs-on: ubuntu-latest\n    steps:\n"
                  "      - run: pip install -r requirements-test.txt\n"
                  "      - run: vllm serve facebook/opt-125m --port 8001 &\n")
    k8s = tmp_path / "deploy" / "k8s" / "serve.yaml"
    k8s.parent.mkdir(parents=True)
    k8s.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: s\nspec:\n  template:\n    spec:\n"
                   "      containers:\n        - name: vllm\n          command: [vllm, serve, m, --port, '8000']\n")
    (tmp_path / "cr.yaml").write_text("apiVersion: production-stack.vllm.ai/v1alpha1\nkind: VLLMRuntime\n"
                                      "metadata:\n  name: r\nspec:\n  vllmConfig:\n    extraArgs:\n"
                                      "      - \"--max-num-seqs\"\n      - \"8\"\n")
    out = run(["launches", "."], tmp_path).output
    lines = {line.split(":")[0]: line for line in out.splitlines() if line}
    assert "release 0.13.0 from pin vllm==0.13.0" in lines[".github/workflows/e2e.yml"], out
    assert "release 0.13.0" not in lines["deploy/k8s/serve.yaml"], out
    assert all("release 0.13.0" not in line for name, line in lines.items() if name == "cr.yaml"), out


@pytest.mark.parametrize("pyproject, release", [
    ('[project]\nname = "x"\ndependencies = ["ray[default]>=2.40", "vllm==0.13.0"]\n', "0.13.0"),
    ('[tool.poetry.dependencies]\npython = "^3.11"\nvllm = "0.13.0"\n', "0.13.0"),
    ('[tool.poetry.dependencies]\nvllm = {version = "==0.13.0", extras = ["audio"]}\n', "0.13.0"),
    ('[project]\ndependencies = ["vllm>=0.13.0"]\n', None),                          # a range: unknown
    ('[project.optional-dependencies]\nllm = ["vllm==0.13.0"]\n', None),              # an extra may not be installed
    ('[dependency-groups]\ntest = ["vllm==0.13.0"]\n', None),
    ('[project\ndependencies = ["vllm==0.13.0"]\n', None),                             # not TOML
])
def test_pyproject_pin_is_the_release_of_the_projects_launches(pyproject, release, tmp_path):
    """Found on LQR471814/x.vllm-distributed: a Makefile runs `uv run vllm serve`, pyproject.toml
    (and uv.lock) pin vllm==0.13.0; the launch's release was unknown, so `migrate --to 0.33.0`
    would have written 0.33.0's config into a project that still installs 0.13.0."""
    (tmp_path / "pyproject.toml").write_text(pyproject)
    (tmp_path / "Makefile").write_text("serve:\n\tuv run vllm serve m --disable-log-requests\n")
    said = run(["launches", "."], tmp_path).output
    if release is None:
        assert "release 0." not in said, said
        return
    assert f"release {release} from pin vllm=={release} in " in said and "/pyproject.toml" in said, said
    before = snapshot(tmp_path)
    result = run(["migrate", "--to", "0.33.0", "."], tmp_path)
    assert snapshot(tmp_path) == before            # neither the pin nor the launch is edited
    assert "which `migrate` does not bump (a lock file resolves it): bump the pin and re-lock" in result.output
    checked = run(["check", "--target-version", "0.33.0", "."], tmp_path)
    assert "runs 0.13.0 today, the pin vllm==0.13.0 in" in checked.output and "re-lock" in checked.output


@pytest.mark.parametrize("name, text, line", [
    ("run.sh", "#!/bin/sh\npip install vllm==0.10.0\nexport VLLM_USE_V1=1\nvllm serve m --port 8000\n", 2),
    ("serve.dstack.yml", "type: service\nenv:\n  - VLLM_USE_V1=1\ncommands:\n  - pip install vllm==0.10.0\n"
                         "  - vllm serve m --port 8000\n", 5),
    # Modal's image builder (found on DeEvade/ia150x-simpilot, as in Modal's own vLLM example)
    ("app.py", 'import os\nimport subprocess\n\nimport modal\n\nimage = modal.Image.debian_slim().pip_install(\n'
               '    "vllm==0.10.0",\n    "huggingface_hub==0.26.2",\n)\napp = modal.App("x")\n\n\n'
               '@app.function(image=image)\ndef serve():\n    os.environ["VLLM_USE_V1"] = "1"\n'
               '    subprocess.Popen(["vllm", "serve", "m", "--port", "8000"])\n', 6),
])
def test_a_script_that_installs_its_vllm_runs_that_release(name, text, line, tmp_path):
    """Found as a user on a dstack service (`commands: [pip install vllm==0.10.0, vllm serve]`,
    with `VLLM_USE_V1=0` in its `env:`): the launch's release was unknown, so `migrate` removed
    VLLM_USE_V1=0 and left the install at 0.10.0, turning the V0 engine into V1. The pin now gives
    the release; `migrate` does not bump it, so the fix waits and says why."""
    (tmp_path / name).write_text(text)
    said = run(["launches", "."], tmp_path).output
    assert f"release 0.10.0 from pin vllm==0.10.0 installed by {name}:{line}" in said, said
    before = snapshot(tmp_path)
    result = run(["migrate", "--to", "0.30.0", "."], tmp_path)
    assert snapshot(tmp_path) == before
    assert "which `migrate` does not bump: bump it by hand with the packages installed beside it" in result.output


@pytest.mark.parametrize("text", [
    "#!/bin/sh\n# pip install vllm==0.10.0 (the old way)\nvllm serve m\n",           # a comment
    "#!/bin/sh\npip install vllm==0.10.0\npip install vllm==0.11.0\nvllm serve m\n",  # two pins: unknown
    "#!/bin/sh\npip install 'vllm>=0.10.0'\nvllm serve m\n",                       # a range
])
def test_a_script_pin_that_says_no_one_release(text, tmp_path):
    (tmp_path / "run.sh").write_text(text)
    assert "installed by" not in run(["launches", "."], tmp_path).output


def test_a_dstack_env_list_is_the_env_of_its_commands(tmp_path):
    (tmp_path / "serve.dstack.yml").write_text(
        "type: service\nimage: vllm/vllm-openai:v0.30.0\nenv:\n  - MODEL=m\n  - VLLM_USE_V1=1\n"
        "commands:\n  - vllm serve $MODEL --port 8000\n")
    said = run(["launches", "."], tmp_path).output
    assert "[env: MODEL=m VLLM_USE_V1=1]" in said, said
    fixed = run(["check", "--fix", "."], tmp_path)
    assert "VLLM_USE_V1" not in (tmp_path / "serve.dstack.yml").read_text(), fixed.output


def test_a_project_of_its_own_stops_the_search_for_pins_above(tmp_path):
    """A launch under a folder that is a Python project or environment of its own (pyproject.toml
    with [project], a conda environment.yml, setup.py, a lock file) runs that environment: a
    vllm pin further up is not its release (found as a user on
    KempnerInstitute/distributed-inference-vllm). A requirements file of its own (extra tools,
    often installed on top of the environment above) and a tool-only pyproject.toml do not
    stop it."""
    (tmp_path / "requirements.txt").write_text("vllm==0.10.0\n")
    projects = {
        "envs/src/pyproject.toml": "[project]\nname = 'x'\ndependencies = ['torch']\n",
        "envs/conda/environment.yml": "name: x\ndependencies:\n  - pip:\n    - torch==2.6.0\n",
        "envs/reqs/requirements.txt": "torch==2.6.0\n",
        "incl/requirements.txt": "-r ../requirements.txt\nrich\n",
        "tooled/pyproject.toml": "[tool.ruff]\nline-length = 100\n",
    }
    for rel, text in projects.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
        (tmp_path / rel).parent.joinpath("serve.sh").write_text("#!/bin/sh\nvllm serve m --port 8000\n")
    lines = {line.split(":")[0]: line for line in run(["launches", "."], tmp_path).output.splitlines() if line}
    for rel in ("envs/src", "envs/conda"):
        assert "release" not in lines[f"{rel}/serve.sh"], lines[f"{rel}/serve.sh"]
    for rel in ("envs/reqs", "incl", "tooled"):
        assert "release 0.10.0 from pin vllm==0.10.0" in lines[f"{rel}/serve.sh"], lines[f"{rel}/serve.sh"]


def test_a_file_checked_alone_still_runs_the_pin_beside_it(tmp_path):
    """`check serve.sh` (a pre-commit hook passes the files it changed): the requirements file
    beside it, not among the files checked, still says the release it runs, so a fix for a
    newer release is held as it is when the folder is checked. Read up to the git repository's
    root only; outside a repository nothing but the files named is read."""
    (tmp_path / "requirements.txt").write_text("vllm==0.8.5\n")
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "serve.sh"
    script.write_text("#!/bin/bash\nvllm serve m --disable-log-requests --port 8000\n")
    alone = run(["launches", "scripts/serve.sh"], tmp_path).output
    assert "release" not in alone, alone                       # no repository: not read
    (tmp_path / ".git").mkdir()
    alone = run(["launches", "scripts/serve.sh"], tmp_path).output
    assert "release 0.8.5 from pin vllm==0.8.5 in" in alone and "(not among the files checked)" in alone, alone
    before = script.read_text()
    fixed = run(["check", "--fix", "--target-version", "0.33.0", "scripts/serve.sh"], tmp_path)
    assert script.read_text() == before, fixed.output
    assert "runs 0.8.5 today" in fixed.output
    whole = run(["launches", "."], tmp_path).output
    assert "release 0.8.5 from pin vllm==0.8.5 in" in whole and "not among the files checked" not in whole


@pytest.mark.parametrize("pin", ["  - pip:\n      - vllm==0.8.5.post1\n", "  - vllm=0.8.5\n"])
def test_a_conda_environment_is_the_release_of_the_launches_below_it(pin, tmp_path):
    """`environment.yml` (pip list or conda dependency) pins the vLLM of the scripts beside and
    below it; `migrate` does not bump it, so their fixes for a newer release wait and the pin is
    left for a human (found as a user on KempnerInstitute/distributed-inference-vllm)."""
    (tmp_path / "environment.yml").write_text("name: serve\ndependencies:\n  - python=3.12\n" + pin)
    (tmp_path / "slurm").mkdir()
    script = tmp_path / "slurm" / "serve.sh"
    script.write_text("#!/bin/bash\nconda activate serve\nvllm serve m --disable-log-requests\n")
    shown = run(["launches", "."], tmp_path).output
    assert "release 0.8.5 from pin vllm==0.8.5 in" in shown and "environment.yml" in shown, shown
    before = snapshot(tmp_path)
    result = run(["migrate", "--to", "0.30.0", "."], tmp_path)
    assert snapshot(tmp_path) == before, result.output
    assert "environment.yml:" in result.output and "a conda environment's pin" in result.output
