"""Which images are vLLM's, and what release a tag names (vllmlint.knowledge.images)."""
import pytest

from vllmlint.knowledge.images import is_vllm_image, parse_image, parse_tag


@pytest.mark.parametrize("ref", [
    "vllm/vllm-openai:v0.29.0", "docker.io/vllm/vllm-openai:latest", "vllm/vllm-openai-cpu:v0.30.0",
    "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.10.1", "rocm/vllm:latest", "rocm/vllm-dev:nightly",
    "lmcache/vllm-openai:2025-05-27", "opea/vllm:1.2", "quay.io/someone/vllm-openai:v0.8.5",
    "${VLLM_IMAGE:-vllm/vllm-openai:v0.29.0}", "vllm/vllm-openai@sha256:" + "a" * 64, "localhost:5000/vllm/vllm-openai:v0.30.0",
    "vllm-cpu-env", "vllm-cpu-env:latest", "registry.example.com/ml/vllm-cpu-env:v0.9.0",    # vLLM's CPU guide's tag
    "ghcr.io/llm-d/llm-d:0.0.8",            # llm-d's vLLM build
])
def test_vllm_images(ref):
    assert is_vllm_image(ref)


@pytest.mark.parametrize("ref", [
    "lmsysorg/sglang:v0.4.6", "ghcr.io/huggingface/text-generation-inference:3.0", "ollama/ollama",
    "nvcr.io/nvidia/tritonserver:24.08-trtllm-python-py3", "pytorch/torchserve-kfs:0.9.0", "kserve/router:v0.15.0",
    "python:3.11", "$IMAGE", "", None, "ghcr.io/ggerganov/llama.cpp:server", "acme/vllm-cpu-env-tools:1.0",
    "ghcr.io/llm-d/llm-d-inference-scheduler:v0.1.0", "ghcr.io/llm-d/llm-d-routing-sidecar:0.0.6",
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


LLM_D_POD = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm-prefiller
spec:
  template:
    spec:
      containers:
        - name: vllm-prefiller
          image: ghcr.io/llm-d/llm-d:0.0.8
          args:
            - "--model"
            - "meta-llama/Llama-3.1-8B-Instruct"
            - "--disable-log-requests"
            - "--kv-transfer-config"
            - '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
        - name: routing-proxy
          image: ghcr.io/llm-d/llm-d-routing-sidecar:0.0.6
          args: ["--port=8000", "--vllm-port=8200", "--connector=nixlv2"]
"""


def test_llm_d_build_given_arguments_is_a_launch_migrate_never_bumps(tmp_path):
    """llm-d's `ghcr.io/llm-d/llm-d` runs vLLM's api_server as its entrypoint; GKE's P/D
    examples give its pods engine arguments only (found on llm-on-gke/vllm-inference: two
    NixlConnector pods were no launch). Its tags are llm-d's: the release is unknown, so the
    removed flag is reported, never removed, and the tag is never bumped. The routing sidecar
    beside it is not vLLM."""
    from click.testing import CliRunner
    from vllmlint.cli import main

    (tmp_path / "prefill.yaml").write_text(LLM_D_POD)
    out = CliRunner().invoke(main, ["launches", str(tmp_path)], catch_exceptions=False).output
    assert out.count("(container ") == 1 and "vllm-prefiller" in out and "release unknown" in out, out
    out = CliRunner().invoke(main, ["check", str(tmp_path)], catch_exceptions=False).output
    assert "VL302" in out and "not fixed" in out, out
    result = CliRunner().invoke(main, ["migrate", "--to", "0.33.0", str(tmp_path)], catch_exceptions=False)
    assert (tmp_path / "prefill.yaml").read_text() == LLM_D_POD, result.output
    assert "would change 0 files" in result.output or "changed 0 files" in result.output or "0 files" in result.output, result.output
