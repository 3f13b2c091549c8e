"""Which images are vLLM's, and what release a tag names (vllmlint.knowledge.images)."""
import pytest

from vllmlint.knowledge.images import is_vllm_image, parse_image, parse_tag


@pytest.mark.parametrize("ref", [
    "vllm/vllm-openai:v0.29.0", "docker.io/vllm/vllm-openai:latest", "vllm/vllm-openai-cpu:v0.30.0",
    "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.10.1", "rocm/vllm:latest", "rocm/vllm-dev:nightly",
    "lmcache/vllm-openai:2025-05-27", "opea/vllm:1.2", "quay.io/someone/vllm-openai:v0.8.5",
    "${VLLM_IMAGE:-vllm/vllm-openai:v0.29.0}", "vllm/vllm-openai@sha256:" + "a" * 64, "localhost:5000/vllm/vllm-openai:v0.30.0",
    "vllm-cpu-env", "vllm-cpu-env:latest", "registry.example.com/ml/vllm-cpu-env:v0.9.0",    # vLLM's CPU guide's tag
])
def test_vllm_images(ref):
    assert is_vllm_image(ref)


@pytest.mark.parametrize("ref", [
    "lmsysorg/sglang:v0.4.6", "ghcr.io/huggingface/text-generation-inference:3.0", "ollama/ollama",
    "nvcr.io/nvidia/tritonserver:24.08-trtllm-python-py3", "pytorch/torchserve-kfs:0.9.0", "kserve/router:v0.15.0",
    "python:3.11", "$IMAGE", "", None, "ghcr.io/ggerganov/llama.cpp:server", "acme/vllm-cpu-env-tools:1.0",
])
def test_not_vllm_images(ref):
    assert not is_vllm_image(ref)


def test_team_images_by_glob():
    assert is_vllm_image("registry.corp/ml/vllm-serving:1.0", ("registry.corp/ml/vllm-*",))
    assert is_vllm_image("registry.corp/ml/vllm-serving:1.0", ("ml/vllm-*",))
    assert not is_vllm_image("registry.corp/ml/other:1.0", ("registry.corp/ml/vllm-*",))


def test_parse_image():
    ref = parse_image("localhost:5000/vllm/vllm-openai:v0.30.0@sha256:" + "b" * 64)
    assert (ref.registry, ref.path, ref.tag) == ("localhost:5000", "vllm/vllm-openai", "v0.30.0")
    assert ref.digest.startswith("sha256:")


@pytest.mark.parametrize("tag,version,variant,exact,bumped", [
    ("v0.29.0", (0, 29, 0), "", True, "v0.30.0"),
    ("0.29.0", (0, 29, 0), "", True, "0.30.0"),
    ("v0.9.0.1", (0, 9, 0), "", True, "v0.30.0"),
    ("v0.8.5.post1", (0, 8, 5), "", True, "v0.30.0"),
    ("v0.30.0-cu129", (0, 30, 0), "-cu129", False, None),
    ("latest", None, "", False, None),
    ("nightly", None, "", False, None),
    ("2a3b4c5d", None, "", False, None),
])
def test_parse_tag(tag, version, variant, exact, bumped):
    t = parse_tag(tag)
    assert (t.version, t.variant, t.exact, t.bumped((0, 30, 0))) == (version, variant, exact, bumped)


def test_the_cpu_guides_image_given_arguments_is_a_launch(tmp_path):
    """vLLM's CPU installation guide builds Dockerfile.cpu as `vllm-cpu-env` and runs it with
    engine arguments only (found on dbrugger946/rh-ibm-ai-various: `podman run ... vllm-cpu-env:latest
    --model=...` was no launch)."""
    from click.testing import CliRunner
    from vllmlint.cli import main

    (tmp_path / "run.sh").write_text("podman run --rm -p 8000:8000 -e VLLM_CPU_KVCACHE_SPACE=30 \\\n"
                                     "  vllm-cpu-env:latest --model=ibm-granite/granite-3.2-2b --dtype=bfloat16\n")
    out = CliRunner().invoke(main, ["launches", str(tmp_path)], catch_exceptions=False).output
    assert "serve (script): vllm serve --model=ibm-granite/granite-3.2-2b --dtype=bfloat16" in out, out
