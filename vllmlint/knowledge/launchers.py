"""Every way vLLM is started, as text a file shows: which files are worth reading.

Reading a file costs a parse; most files of a repository never start vLLM. A file is read when
its text shows one of these markers (for its kind). The markers only decide what is *read*:
whether a launch is there is still decided by the front ends (a Ray Serve `LLMConfig` counts only
when imported from `ray.serve`, an image only when knowledge/images.py says it is vLLM's). So a
marker may be generous, never the detection itself. A new wrapper that starts vLLM under its own
name is one row here.

Triton's vLLM backend is found by its files, not its text: a `model.json` beside a
`config.pbtxt` that says `backend: "vllm"` (lint/discovery.py, parsers/triton.py).

Beside the image list (knowledge/images.py): every built-in vLLM image path names `vllm` (the
first row covers them) or has a row of its own (llm-d's `llm-d/llm-d`); a test holds that, and a
team's own `vllm-images` globs are added per run.
"""
from __future__ import annotations

import re
from functools import lru_cache

from ..model.record import record

ALL = "*"


@record(frozen=True)
class Marker:
    """One way vLLM is started, as a regular expression searched in a file's text."""
    what: str                  # who starts vLLM this way (shown by `vllmlint launches --explain`)
    pattern: str
    kinds: tuple[str, ...]     # front-end kinds it applies to: python, yaml, shell, dockerfile ("*": all)


LAUNCH_MARKERS: tuple[Marker, ...] = (
    Marker("vLLM itself: its modules (vllm, vllm.entrypoints.*), its CLI (vllm serve), its images "
           "(every built-in image path in knowledge/images.py), NVIDIA Dynamo's dynamo.vllm, Triton's "
           "`backend: \"vllm\"`, KServe's `--backend=vllm`, LLM-d and KubeAI's `vllm` engines", r"vllm", (ALL,)),
    Marker("Ray Serve LLM apps: `from ray.serve.llm import LLMConfig, build_openai_app`, a RayService "
           "`import_path: ray.serve.llm:build_openai_app` (Ray runs vLLM and never says so)",
           r"\bray\.serve\.llm\b|\bray\.llm\b|\bbuild_openai_app\b|\bbuild_llm_deployment\b", (ALL,)),
    Marker("llm-d's vLLM build `llm-d/llm-d`, whose entrypoint is vLLM's api_server (knowledge/images.py)",
           r"\bllm-d/llm-d\b", (ALL,)),
    Marker("KubeAI's Model `engine: VLLM` (the operator starts vLLM)", r"\bengine:\s*VLLM\b", ("yaml",)),
    Marker("P/D proxies and routers (vLLM's reference proxies, apps forwarding kv_transfer_params)",
           r"proxy|kv_transfer_params", ("python",)),
)


@lru_cache(maxsize=None)
def _gate(kind: str) -> re.Pattern:
    """One compiled alternation per kind, built once."""
    parts = [m.pattern for m in LAUNCH_MARKERS if ALL in m.kinds or kind in m.kinds]
    return re.compile("|".join(f"(?:{p})" for p in parts))


def may_launch(text: str, kind: str = ALL) -> bool:
    """Whether `text` (a file of `kind`) shows any way vLLM is started: worth reading."""
    return _gate(kind).search(text) is not None


def markers_in(text: str, kind: str = ALL) -> list[str]:
    """What each marker found in `text`, for explaining why a file was read (or was not)."""
    return [m.what for m in LAUNCH_MARKERS
            if (ALL in m.kinds or kind in m.kinds) and re.search(m.pattern, text)]


# Programs of other engines. A resource whose `command:` runs one of them (llmaz's BackendRuntime
# `command: [python3, -m, sglang.launch_server]` beside `recommendedConfigs[].args`) passes its
# args-only entries to that program: their flags are never read as vLLM's because they look alike
# (`--served-model-name`, `--port`). A new engine is one alternative here.
OTHER_ENGINE_PROGRAMS = (
    r"sglang(?:\.launch_server)?", r"text-generation-launcher", r"lmdeploy", r"trtllm-serve",
    r"tensorrt_llm(?:\.\w+)*", r"llama-server", r"llama_cpp\.server", r"ollama", r"tritonserver",
    r"aphrodite(?:\.endpoints\.\w+(?:\.\w+)*)?", r"mlc_llm", r"xinference(?:-local)?", r"text_generation_server",
)


@lru_cache(maxsize=1)
def _other_engine_re() -> re.Pattern:
    return re.compile(r"(?:^|[\s/])(?:" + "|".join(OTHER_ENGINE_PROGRAMS) + r")(?=$|\s)")


def other_engine(argv_text: str) -> str | None:
    """The other engine's program an argv (joined by spaces) runs, else None."""
    m = _other_engine_re().search(argv_text)
    return m.group(0).strip().rsplit("/", 1)[-1] if m else None
