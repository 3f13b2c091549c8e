"""Which container images are vLLM, and what release a tag names.

One place for both questions, shared by detection (a container given only arguments is the
image's `vllm serve` when the image is vLLM's), by the release a launch runs today, and by
`migrate`'s tag bumps (only vLLM's tags are ever touched).

An image reference is `[REGISTRY[:PORT]/]PATH[:TAG][@DIGEST]`. `is_vllm_image` matches the PATH
(registry dropped) against BUILTIN_VLLM_IMAGES plus a team's own globs (setting `vllm-images`).
`parse_tag` splits a tag into the release and a variant: only `X.Y.Z`, `vX.Y.Z` and
`vX.Y.Z.N` / `X.Y.Z.postN` name a release exactly; `v0.30.0-cu129` is a release plus a variant
(bump by hand); `latest`, `nightly` and commit tags name none.
"""
from __future__ import annotations

from ..model.record import record
from fnmatch import fnmatchcase
from functools import lru_cache

from ..model.lazyre import lazy_re

# Image paths (without registry) that are builds of vLLM's OpenAI server. Globs, matched whole.
BUILTIN_VLLM_IMAGES = (
    "vllm-openai",                     # a local build of vLLM's Dockerfile (`docker build -t vllm-openai`)
    "vllm-openai-*",
    "vllm/vllm-openai",
    "vllm/vllm-openai-*",              # vllm-openai-cpu, -rocm, ...
    "vllm/vllm-tpu",
    "*/vllm-openai",                   # mirrors: public.ecr.aws/q9t5s3a7/vllm-..., quay.io/x/vllm-openai
    "*/vllm-openai-*",
    "*vllm-cpu-release-repo",
    "*vllm-cpu-release-repo/*",
    "vllm-cpu-env",                    # vLLM's CPU guide: `docker build -f docker/Dockerfile.cpu --tag vllm-cpu-env`
    "*/vllm-cpu-env",
    "rocm/vllm",
    "rocm/vllm-*",
    "rocm/vllm-dev",
    "lmcache/vllm-openai",
    "opea/vllm",
    "opea/vllm-*",
    "intel/vllm",
    "intelanalytics/ipex-llm-serving-xpu-vllm*",
    "vllm-project/*",
    "llm-d/llm-d",                     # llm-d's vLLM build (ghcr.io/llm-d/llm-d:0.0.8)
)

# The builds among those whose entrypoint is vLLM's OpenAI server (`vllm serve`, or the
# api_server module in older tags): a container of one given only arguments (`podman run IMAGE
# --model M`, compose `command: --model M`, a pod's `args:`) hands them to vLLM, so it is a launch
# whatever the runner. The other builds start a shell or a script of their own (`rocm/vllm-dev`,
# `vllm/vllm-tpu`, Intel's XPU images): given no command they start no vLLM. Decided per build:
#   * vllm-cpu-release-repo: vLLM's CPU release, Dockerfile.cpu's `vllm-openai` target;
#   * opea/vllm, opea/vllm-gaudi, ...: OPEA's vLLM builds (vLLM's Dockerfile.cpu, HabanaAI's fork
#     for Gaudi); OPEA's own compose files give them engine arguments only
#     (`command: --model $LLM_MODEL_ID --host 0.0.0.0 --port 80`);
#   * `vllm-openai`, `vllm-openai-*` without a namespace: a local build of vLLM's Dockerfile;
#   * `vllm-cpu-env`: the tag vLLM's CPU installation guide builds Dockerfile.cpu's `vllm-openai`
#     target as and runs with engine arguments only (`docker run ... vllm-cpu-env --model=M`;
#     found on dbrugger946/rh-ibm-ai-various, whose podman scripts ran it);
#   * `llm-d/llm-d`: llm-d's vLLM build; its Dockerfile ends in `ENTRYPOINT ["python3", "-m",
#     "vllm.entrypoints.openai.api_server"]` and GKE's P/D examples give its pods engine arguments
#     only (found on llm-on-gke/vllm-inference). Its later images (`llm-d-cuda`, ...) are not
#     listed: their charts always name `vllm serve`, which is read whatever the image.
SERVER_ENTRYPOINT_IMAGES = (
    "vllm-openai",
    "vllm-openai-*",
    "vllm/vllm-openai",
    "vllm/vllm-openai-*",
    "*/vllm-openai",
    "*/vllm-openai-*",
    "*vllm-cpu-release-repo",
    "*vllm-cpu-release-repo/*",
    "vllm-cpu-env",
    "*/vllm-cpu-env",
    "lmcache/vllm-openai",
    "opea/vllm",
    "opea/vllm-*",
    "llm-d/llm-d",
)

# vLLM builds whose tags number their maker's releases, not vLLM's (OPEA's `opea/vllm:1.3`,
# `opea/vllm-gaudi:1.22.0`, llm-d's `llm-d/llm-d:0.0.8`): such a tag names the build, never the vLLM release it runs, and is
# never bumped to one. (Plugin images below are the same: their tags are the plugin's versions.)
FOREIGN_TAG_IMAGES = (
    "opea/vllm",
    "opea/vllm-*",
    "llm-d/llm-d",
)

# Images of vLLM with a platform or model plugin that adds its own flags to `vllm serve`
# (vLLM-Omni's `--omni`, vLLM Ascend's options): their tags are the plugin's versions, not vLLM's,
# and a flag vLLM does not know may be the plugin's, so such a flag is `info`, never an error.
PLUGIN_IMAGES = {
    "vllm/vllm-omni": "vLLM-Omni",
    "*/vllm-omni": "vLLM-Omni",
    "*/vllm-ascend": "vLLM Ascend",
    "ascend/vllm-ascend": "vLLM Ascend",
    "*/vllm-gaudi": "vLLM Gaudi",
    "*/vllm-spyre": "vLLM Spyre",
    "*/vllm-openvino": "vLLM OpenVINO",     # reads VLLM_OPENVINO_* (upstream vLLM dropped them in 0.8.5)
}

# `${IMAGE:-vllm/vllm-openai:v0.29.0}` / `${IMAGE-...}`: the default is the image when unset (one
# variable for the whole reference: `${REGISTRY:-opea}/vllm:${TAG:-latest}` is no image's text).
DEFAULTED_RE = lazy_re(r"^\$\{\w+:?-([^{}]*)\}$")
_REF_RE = lazy_re(
    r"^(?P<path>[a-z0-9][\w.\-/]*?)(?::(?P<tag>[\w][\w.\-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-fA-F]{16,}))?$")


@record(frozen=True)
class ImageRef:
    """A container image reference, split into registry, path, tag and digest."""
    registry: str | None      # "nvcr.io", "localhost:5000", None for Docker Hub
    path: str                 # "vllm/vllm-openai"
    tag: str | None           # "v0.29.0"
    digest: str | None        # "sha256:..."

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, registry, path, tag, digest):
        d = self.__dict__                  # frozen: its own __setattr__ refuses
        d["registry"] = registry
        d["path"] = path
        d["tag"] = tag
        d["digest"] = digest

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.path}" if self.registry else self.path


def unwrap_default(text: str) -> str:
    """The image a compose/shell `${VAR:-default}` falls back to; other text as given."""
    text = text.strip().strip("'\"")
    m = DEFAULTED_RE().match(text)
    return m.group(1).strip().strip("'\"") if m else text


_PARSED: dict = {}       # text -> ImageRef | None (frozen: shared); bounded below


def parse_image(text: str | None) -> ImageRef | None:
    """Split an image reference; None when it is not one (empty, or holds unexpanded `$`)."""
    if not text:
        return None
    try:
        return _PARSED[text]
    except (KeyError, TypeError):
        pass
    ref = _parse_image(text)
    if len(_PARSED) > 4096:          # the images of a tree repeat: a few dozen, not thousands
        _PARSED.clear()
    _PARSED[text] = ref
    return ref


def _parse_image(text: str) -> ImageRef | None:
    text = unwrap_default(text)
    if not text or "$" in text or "{{" in text or " " in text:
        return None
    registry = None
    first, sep, rest = text.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        registry, text = first, rest
    m = _REF_RE().match(text.lower() if not registry else text)
    if not m:
        return None
    return ImageRef(registry, m.group("path").lower(), m.group("tag"), m.group("digest"))


def is_vllm_image(text: str | ImageRef | None, extra: tuple[str, ...] = ()) -> bool:
    """True when the image is a build of vLLM: the built-in list, or a glob of `extra` (matched
    against the path and against registry/path, so `registry.corp/ml/vllm-*` works)."""
    ref = text if isinstance(text, ImageRef) else parse_image(text)
    if ref is None:
        return False
    if _builtin_vllm_path(ref.path):
        return True
    return any(fnmatchcase(ref.path, p) or fnmatchcase(ref.name, p) for p in extra)


@lru_cache(maxsize=4096)
def _builtin_vllm_path(path: str) -> bool:
    # memoised: the images of a tree repeat, and a migrate asks again at every step
    return any(fnmatchcase(path, pattern) for pattern in BUILTIN_VLLM_IMAGES)


def serves_engine_args(text: str | ImageRef | None) -> bool:
    """True when the image's own entrypoint is vLLM's OpenAI server: a container of it given only
    arguments (no command) is `vllm serve ARGS` (SERVER_ENTRYPOINT_IMAGES)."""
    ref = text if isinstance(text, ImageRef) else parse_image(text)
    if ref is None:
        return False
    return any(fnmatchcase(ref.path, pattern) for pattern in SERVER_ENTRYPOINT_IMAGES)


def tag_is_vllm_release(text: str | ImageRef | None) -> bool:
    """False when the image's tags number another project's releases (FOREIGN_TAG_IMAGES, a
    plugin image): its tag says nothing of the vLLM release inside."""
    ref = text if isinstance(text, ImageRef) else parse_image(text)
    if ref is None:
        return False
    return _tags_are_vllms(ref.path, ref.name)


@lru_cache(maxsize=4096)
def _tags_are_vllms(path: str, name: str) -> bool:
    if any(fnmatchcase(path, pattern) for pattern in FOREIGN_TAG_IMAGES):
        return False
    return not any(fnmatchcase(path, glob) or fnmatchcase(name, glob) for glob in PLUGIN_IMAGES)


_TAG_RE = lazy_re(r"^(?P<v>v?)(?P<x>\d+)\.(?P<y>\d+)\.(?P<z>\d+)(?P<n>(?:\.\d+|\.post\d+)?)(?P<variant>-[\w.\-]+)?$")


@record(frozen=True)
class Tag:
    """An image tag read as a vLLM release: the release it names, and its build variant."""
    text: str
    version: tuple[int, int, int] | None   # the release it names, None for latest/nightly/commits
    variant: str = ""                      # "-cu129", "-rocm": a build of that release
    exact: bool = False                    # `vX.Y.Z`, `X.Y.Z`, `vX.Y.Z.N`: safe to replace whole

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, text, version, variant="", exact=False):
        d = self.__dict__                  # frozen: its own __setattr__ refuses
        d["text"] = text
        d["version"] = version
        d["variant"] = variant
        d["exact"] = exact

    def bumped(self, target: tuple[int, int, int]) -> str | None:
        """The tag for `target` in this tag's style (`v` kept), or None when only a human can
        choose it (a variant, no version)."""
        if not self.exact or self.version is None:
            return None
        return ("v" if self.text.startswith("v") else "") + ".".join(map(str, target))


def parse_tag(tag: str | None) -> Tag | None:
    if not tag:
        return None
    m = _TAG_RE().match(tag)
    if not m:
        return Tag(tag, None)
    version = (int(m.group("x")), int(m.group("y")), int(m.group("z")))
    variant = m.group("variant") or ""
    return Tag(tag, version, variant, exact=not variant)


def plugin_of(image: str | None) -> str | None:
    """The vLLM plugin an image carries (`vllm/vllm-omni:v0.20.0` -> "vLLM-Omni"), else None."""
    if not image:
        return None
    ref = parse_image(image)
    if ref is None:
        return None
    if ref not in _PLUGINS:
        if len(_PLUGINS) > 4096:
            _PLUGINS.clear()
        _PLUGINS[ref] = next((plugin for glob, plugin in PLUGIN_IMAGES.items()
                              if fnmatchcase(ref.path, glob) or fnmatchcase(ref.name, glob)), None)
    return _PLUGINS[ref]


_PLUGINS: dict = {}      # ImageRef -> its plugin or None (the globs tried once per image)
