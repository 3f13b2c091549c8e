"""Recognise a vLLM launch (or a reference proxy) inside an argv, whatever wraps it.

Shared by every front end: a parser hands over the words of one command and learns whether
they start vLLM, which kind of launch it is and where vLLM's own options begin. Wrappers
(`exec`, `nohup`, `env A=1`, `numactl ...`, `uv run`, `python -m`) need no list: we look for
the program words themselves.
"""
from __future__ import annotations

import re
from ..model.record import record

from ..model.launch import API_SERVER, OTHER, PROXY, RENDER, SERVE, TOKENS_ONLY, normalize_flag
from ..model.lazyre import lazy_re
from ..knowledge.entrypoints import server_module
from ..knowledge.images import DEFAULTED_RE, serves_engine_args

# vLLM's reference routers; the multi-turn one is the subject of VL101.
REFERENCE_PROXIES = {
    "disagg_proxy_multiturn.py": "reference-multiturn",
    "disagg_proxy_demo.py": "reference-demo",
    "toy_proxy_server.py": "reference-toy",
    "disagg_prefill_proxy_server.py": "reference-demo",
}
# Routers that check token-id continuation before reusing decode's KV blocks (VL101 stays quiet;
# vllmlint/validating.py also honours a `vllmlint.io/validating-router` marker on other routers).
VALIDATING_ROUTERS = {
    "vllmlint router": "validating",
    "python -m vllmlint.router": "validating",
}
PYTHON_RE = re.compile(r"^(?:.*/)?python[\d.]*$")
VLLM_SUBCOMMANDS = {"serve", "launch", "bench", "chat", "complete", "collect-env", "run-batch"}


@record(frozen=True)
class Detected:
    """A command recognised as a launch: its kind, and where its program and options start."""
    kind: str
    start: int          # index of the first program word (`vllm`, `python`, the proxy script)
    options_start: int  # index of the first option/positional that vLLM (or the proxy) parses
    program: str        # "vllm", "python -m vllm.entrypoints.openai.api_server", proxy name


TEMPLATE_ACTION_RE = lazy_re(r"\{\{.*?\}\}")     # `vllm/vllm-openai:{{ .Values.tag }}`


SHELLS = {"sh", "bash", "zsh", "dash", "ash", "ksh"}


def basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


# `${REGISTRY:-opea}/vllm:${TAG:-latest}` (compose, shell): a default stands for its variable,
# any other variable for an unknown name part (`${REG}/vllm-openai:${TAG}`)
_VAR_DEFAULT_RE = lazy_re(r"\$\{\w+:?-([^{}$]*)\}")
_VAR_RE = lazy_re(r"\$(?:\{[^{}]*\}|[A-Za-z_]\w*)")
UNKNOWN = "\x00"       # a part of an image reference chosen at run time (never in a written one)


def image_family(image: str) -> str:
    """The reference that decides what an image is: `${VAR:-default}` stands for its default
    (`${REGISTRY:-opea}/vllm-rocm:${TAG:-latest}` -> `opea/vllm-rocm:latest`, innermost first),
    any other variable and a template action for an unknown part (UNKNOWN); quotes and a
    transport (`docker://`) dropped. Only the family is decided from it: a tag a default gives
    is no release of the launch (the launch keeps its image as written, so its tag stays unknown
    and is never bumped)."""
    image = strip_transport(TEMPLATE_ACTION_RE().sub(UNKNOWN, image.strip().strip("'\"")))
    m = DEFAULTED_RE().match(image)        # the whole reference one variable's default
    image = m.group(1) if m else image
    for _ in range(3):      # innermost defaults first: `${IMAGE:-${REGISTRY:-opea}/vllm:latest}`
        if "$" not in image:
            break
        image = _VAR_DEFAULT_RE().sub(lambda d: d.group(1) or UNKNOWN, image)
    return _VAR_RE().sub(UNKNOWN, image) if "$" in image else image


def repository_unknown(image: str) -> bool:
    """The image's repository name (its last path part, tag and digest dropped) is chosen at run
    time (`${IMAGE}`, `${REGISTRY}/${NAME}:${TAG}`, `{{ .Values.image.repository }}:...`); a
    variable registry, namespace or tag leaves the name to decide (`${REGISTRY:-opea}/tgi:${TAG}`
    is TGI's)."""
    name = image_family(image).split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
    return UNKNOWN in name or not name


def is_vllm_image(image: str | None) -> bool:
    """An image whose entrypoint is vLLM's server, so that a container of it given only arguments
    is `vllm serve ARGS`: decided by knowledge/images.py's table (`serves_engine_args`), the same
    for every runner (docker/podman/nerdctl, apptainer, kubectl run, compose, Kubernetes,
    Dockerfiles). Builds like `rocm/vllm-dev` are vLLM but start a shell, so a container of
    theirs given no command is no launch. Template actions and variables count as unknown name
    parts; `${VAR:-default}` as its default (`image_family`)."""
    if not image:
        return False
    return serves_engine_args(image_family(image).replace(UNKNOWN, "x"))


def serve_kind(options: list[str]) -> str:
    return TOKENS_ONLY if any(normalize_flag(o.split("=", 1)[0]) == "--tokens-only"
                              for o in options if o.startswith("--")) else SERVE


# `llmctl --runtime vllm serve`, `mytool --engine vllm serve`, `--backend vllm`: an option that
# names the engine a wrapper drives; `serve` after it is the wrapper's own sub-command.
ENGINE_NAME_OPTION_RE = lazy_re(
    r"^--?(?:[a-z]+[-_])*(?:runtime|engine|backend|framework|provider|server|platform)(?:[-_](?:type|name|kind))?$",
    re.I)
# Words no wrapper program is named: `vllm serve` after one is prose ("Start it with vllm serve",
# "The vllm serve command ..." in a YAML description or a doc string read as a script).
PROSE_WORDS = frozenset({
    "the", "a", "an", "with", "using", "use", "via", "by", "to", "and", "or", "of", "our", "your",
    "this", "that", "is", "are", "as", "in", "on", "for", "from", "when", "which", "like", "see",
    "try", "then", "than", "it", "its", "can", "will", "should", "must", "we", "you", "e.g.", "i.e.",
})


def _named_not_run(words: list[str], i: int) -> str | None:
    """Why the `vllm` at words[i] is not a program being run, else None: the value of an option
    that names an engine, or a word in a sentence."""
    if i == 0:
        return None
    before = words[i - 1]
    if ENGINE_NAME_OPTION_RE().match(before):
        return f"`{before} vllm` names the engine a wrapper drives; `serve` is the wrapper's"
    if before.lower().rstrip(",:;") in PROSE_WORDS or before.endswith((",", ".", ":", ";")) \
            or (words[0][:1].isupper() and words[0][1:].isalpha() and words[0][1:].islower()):
        return "prose: the words around it are a sentence, not a command"
    return None


def detect(words: list[str]) -> Detected | None:
    """Find the first vLLM launch or proxy in `words` (values after quote removal)."""
    for i, word in enumerate(words):
        base = basename(word)
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if base == "vllm" and nxt in VLLM_SUBCOMMANDS and _named_not_run(words, i) is None:
            if nxt == "serve":
                return Detected(serve_kind(words[i + 2:]), i, i + 2, "vllm serve")
            if nxt == "launch":
                sub = words[i + 2] if i + 2 < len(words) else ""
                kind = RENDER if sub == "render" else OTHER
                return Detected(kind, i, i + 3, f"vllm launch {sub}".strip())
            return Detected(OTHER, i, i + 2, f"vllm {nxt}")
        if base == "vllmlint" and nxt == "router":
            return Detected(PROXY, i, i + 2, "vllmlint router")
        if PYTHON_RE.match(word) or base in ("uv", "uvx"):
            found = _python_module(words, i)
            if found:
                return found
        if base in REFERENCE_PROXIES or (base.endswith(".py") and _pd_router_options(words[i + 1:])):
            return Detected(PROXY, i, i + 1, base)
    return None


def _python_module(words: list[str], i: int) -> Detected | None:
    for j in range(i + 1, min(i + 6, len(words))):
        if words[j] == "-m" and j + 1 < len(words):
            module = words[j + 1]
            kind = server_module(module)     # every vLLM server module (knowledge/entrypoints.py)
            if kind is not None:
                return Detected(kind, i, j + 2, f"python -m {module}")
            if module == "vllmlint.router":
                return Detected(PROXY, i, j + 2, "python -m vllmlint.router")
            if module in ("vllmlint", "vllmlint.cli") and j + 2 < len(words) and words[j + 2] == "router":
                return Detected(PROXY, i, j + 3, "vllmlint router")
            if module == "dynamo.vllm":       # NVIDIA Dynamo's worker takes vLLM's engine args
                return Detected(OTHER, i, j + 2, "python -m dynamo.vllm")
            if module in ("vllm.entrypoints.cli.main", "vllm") and j + 2 < len(words):
                sub = words[j + 2]
                if sub == "serve":
                    return Detected(serve_kind(words[j + 3:]), i, j + 3, f"python -m {module} serve")
                if sub == "launch" and j + 3 < len(words) and words[j + 3] == "render":
                    return Detected(RENDER, i, j + 4, f"python -m {module} launch render")
            return None
        if words[j].endswith(".py"):
            base = basename(words[j])
            # a proxy by what it forwards: vLLM's reference proxies, or both P/D sides given (a
            # `*proxy*.py` name alone is no evidence: an auth proxy, a forward proxy, a test)
            if base in REFERENCE_PROXIES or _pd_router_options(words[j + 1:]):
                return Detected(PROXY, j, j + 1, base)
            return None
    return None


def copied_server(words: list[str], image: str | None) -> Detected | None:
    """`python3 /workspace/api_server.py ARGS` in a vLLM build: vLLM's OpenAI server module copied
    into the image as a script (OPEA's ROCm build copies vllm/entrypoints/openai/api_server.py to
    /workspace/api_server.py and runs it). Only beside an image the table names vLLM's: a script
    of that name anywhere else is somebody's own server."""
    from ..knowledge.images import is_vllm_image as vllm_build

    if not image or not vllm_build(TEMPLATE_ACTION_RE().sub("x", image)):
        return None
    for i, word in enumerate(words[:3]):
        if PYTHON_RE.match(word) and i + 1 < len(words) and basename(words[i + 1]) == "api_server.py":
            return Detected(API_SERVER, i, i + 2, f"python {words[i + 1]} (vLLM's api_server, copied into the image)")
    return None


PD_ROUTER_OPTION_RE = lazy_re(r"^--(?:prefill|prefiller|decode|decoder)(?:[-_](?:hosts?|ports?|urls?|endpoints?|addr(?:ess)?))?(?:=|$)")


def _pd_router_options(words: list[str]) -> bool:
    """`python router.py --prefill http://p:8100 --decode http://d:8200`: a script given both
    a prefill and a decode address is a P/D router (whatever its name)."""
    sides = {m.group(0).lstrip("-")[:3] for w in words if (m := PD_ROUTER_OPTION_RE().match(w))}
    return sides >= {"pre", "dec"}


# `docker|podman|nerdctl run` options that take no value; every other option takes one
# (`--name N`, `-e K=V`) unless written `--opt=value` or glued (`-p8000:8000`).
RUN_BOOLEANS = frozenset({
    "-d", "--detach", "-i", "--interactive", "-t", "--tty", "--rm", "--privileged", "--init", "--read-only",
    "-P", "--publish-all", "--sig-proxy", "--no-healthcheck", "--oom-kill-disable", "--disable-content-trust",
    "-q", "--quiet", "--replace", "--rmi", "--no-hosts", "--env-host", "--read-only-tmpfs", "--http-proxy",
    "--help", "--tls-verify",
})
_SHORT_BOOL_LETTERS = frozenset("ditPq")
# apptainer/singularity options that take no value
APPTAINER_BOOLEANS = frozenset({
    "--nv", "--rocm", "--nvccli", "--cleanenv", "-e", "--contain", "-c", "--containall", "-C", "--writable",
    "-w", "--writable-tmpfs", "--fakeroot", "-f", "--no-home", "--compat", "--no-init", "--no-privs",
    "--userns", "-u", "--ipc", "-i", "--pid", "-p", "--net", "-n", "--disable-cache", "--no-https",
    "--no-eval", "--unsquash", "--keep-privs", "--allow-setuid", "--boot", "--no-umask", "--containlibs",
    "--quiet", "-q", "--debug", "-d", "--silent", "-s", "--verbose", "-v",
})
CONTAINER_RUNNERS = ("docker", "podman", "nerdctl")
APPTAINERS = ("apptainer", "singularity")


RUNTIME_OPTIONS_RE = lazy_re(r"^\$(?:\{\w+\[[@*]\]\}|[@*]|\{[@*]\}|\{?\w*(?i:opt|flag|arg)\w*\}?)$")


@record(frozen=True)
class ContainerRun:
    """`docker|podman|nerdctl run [OPTS] IMAGE [ARGS]` or `apptainer|singularity exec|run|
    instance start [OPTS] IMAGE [ARGS]`, by index into the words."""

    runner: str            # "docker run", "podman run", "apptainer exec", ...
    start: int             # index of the runner word
    image: int             # index of the image word
    entrypoint: int | None  # index of the `--entrypoint` value word, when set
    runs_command: bool     # apptainer exec: ARGS is the command (no image entrypoint involved)
    args: int = -1         # index of the first ARG (default: right after the image)
    image_text: str | None = None   # the image when glued to its option (`--image=IMG`)

    @property
    def args_start(self) -> int:
        return self.args if self.args >= 0 else self.image + 1


def container_run(words: list[str]) -> ContainerRun | None:
    """The first container run in `words` (values after quote removal), found by parsing the
    runner's own options, so the image is the first word that is not an option or its value."""
    for i, word in enumerate(words[:-1]):
        base = basename(word)
        if base in CONTAINER_RUNNERS:
            j = i + 1
            if words[j] == "container" and j + 1 < len(words):
                j += 1
            if words[j] != "run":
                continue
            return _runner_options(words, i, j + 1, f"{base} run", RUN_BOOLEANS, _SHORT_BOOL_LETTERS, False)
        if base in ("kubectl", "oc") and words[i + 1] == "run":
            return _kubectl_run(words, i)
        if base in IMAGE_OPTION_RUNNERS:
            found = _image_option_run(words, i, base)
            if found is not None:
                return found
        if base in APPTAINERS:
            sub = words[i + 1]
            j = i + 2
            if sub == "instance" and j < len(words) and words[j] == "start":
                sub, j = "instance start", j + 1
            elif sub not in ("exec", "run"):
                continue
            return _runner_options(words, i, j, f"{base} {sub}", APPTAINER_BOOLEANS, frozenset(), sub == "exec")
    return None


# HPC runners that take the image as an option and run the command after their options in it:
# NERSC's `shifter --image=IMG CMD`, Slurm's pyxis plugin `srun --container-image=IMG CMD`
# (found as a user on KempnerInstitute/distributed-inference-vllm: read as a bare `vllm serve`)
IMAGE_OPTION_RUNNERS = {"shifter": "--image", "srun": "--container-image"}


def _image_option_run(words: list[str], i: int, base: str) -> ContainerRun | None:
    """`shifter [--image=IMG | --image IMG] [OPTS] CMD`, `srun [OPTS] --container-image=IMG CMD`:
    the command starts at the first word after the options (a valued option after the image,
    `--module gpu`, leaves its value in front of it: detection finds the command after it)."""
    option = IMAGE_OPTION_RUNNERS[base]
    image_at, image_text = None, None
    j = i + 1
    # up to the image option every word is an option or its value (`-N 1`); after it, the
    # command starts at the first word that is not an option
    while j < len(words) and (image_at is None or words[j].startswith("-")):
        w = words[j]
        if w.startswith(option + "="):
            image_at, image_text = j, w.split("=", 1)[1]
        elif w == option and j + 1 < len(words):
            image_at, image_text = j + 1, words[j + 1]
            j += 1
        j += 1
    if image_at is None or not image_text or j >= len(words):
        return None
    return ContainerRun(base, i, image_at, None, True, args=j, image_text=image_text)


def _kubectl_run(words: list[str], i: int) -> ContainerRun | None:
    """`kubectl run NAME --image=IMG [--command] [-- ARGS]`: ARGS are the container's args (its
    command with `--command`)."""
    image_at, image_text, command = None, None, False
    j = i + 2
    while j < len(words) and words[j] != "--":
        w = words[j]
        if w.startswith("--image="):
            image_at, image_text = j, w.split("=", 1)[1]
        elif w == "--image" and j + 1 < len(words):
            image_at, image_text = j + 1, words[j + 1]
            j += 1
        elif w == "--command":
            command = True
        j += 1
    if image_at is None:
        return None
    return ContainerRun("kubectl run", i, image_at, None, command, args=min(j + 1, len(words)),
                        image_text=image_text)


def _runner_options(words, start, j, runner, booleans, short_bools, runs_command) -> ContainerRun | None:
    entrypoint = None
    while j < len(words):
        w = words[j]
        if w == "--":
            j += 1
            break
        if RUNTIME_OPTIONS_RE().match(w):
            j += 1                       # `"${run_opts[@]}"`, `$GPU_FLAGS`: options known at run time
            continue
        if not w.startswith("-") or w == "-":
            break
        name = w.split("=", 1)[0]
        if name == "--entrypoint":
            if "=" in w:
                entrypoint = j          # value glued: the caller splits it
                j += 1
            else:
                entrypoint = j + 1
                j += 2
            continue
        if "=" in w or name in booleans:
            j += 1
        elif not w.startswith("--") and len(w) > 2:
            j += 1                       # `-itd` (booleans) or `-p8000:8000` (glued value)
        else:
            j += 2
    if j >= len(words):
        return None
    return ContainerRun(runner, start, j, entrypoint, runs_command)


def strip_transport(image: str) -> str:
    """`docker://vllm/vllm-openai:v0.30.0` (apptainer) -> the image reference."""
    for prefix in ("docker://", "oras://", "library://", "docker-daemon:", "docker-archive:"):
        if image.startswith(prefix):
            return image[len(prefix):]
    return image


def docker_run_image(words: list[str]) -> int | None:
    """Index of a vllm/vllm-openai image in `docker|podman run ... IMAGE args`, if any."""
    for i, word in enumerate(words[:-1]):
        if basename(word) in ("docker", "podman", "nerdctl") and "run" in words[i + 1:i + 3]:
            for j in range(i + 2, len(words)):
                if is_vllm_image(words[j]):
                    return j
    return None
