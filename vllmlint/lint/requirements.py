"""Upgrades that resolve: a vLLM pin is bumped together with the environment it is installed in.

`migrate` bumps a `vllm==X` pin (lint/migrate.py: find_bumps). The pin lives in an environment:
the `pip install` command of a Dockerfile `RUN` that names it, with the requirements and
constraints files that command installs (`-r`, `-c`), or a requirements file with the files it
includes; a Dockerfile's environment runs the Python of its base image where the image's tag
says it (`python:3.10-slim`, `..._py3.9_...`) and carries the torch a PyTorch image names
(`pytorch/pytorch:2.6.0-cuda12.4-...`). For each other requirement of that environment,
against what the new release's wheel requires (knowledge/catalogue/requires.py):

- an exact pin (`torch==2.6.0`) that the new release pins exactly too is bumped with it, in
  the same edit set (`torch==2.13.0`);
- what cannot be settled by an edit is a blocker: a pin outside a range the release requires
  (`huggingface_hub==0.23.4` against `>=1.31.0`), a range of the user's that excludes the
  release's exact pin, a Python the release does not support, a wheel URL or local version
  built for another torch, a base image carrying another torch, and vLLM installed as another
  engine's or a plugin's dependency (`sglang[all]==0.4.6.post5`, `vllm-ascend==0.9.1`, an
  SGLang base image). The vLLM pin of that environment is then **not** bumped (never a
  half-upgraded environment) and the summary says what a human must do.

With `migrate --check-deps`, pip itself (the user's configuration and index) is asked whether
each edited environment resolves (`pip install --dry-run --ignore-installed --report`); one
that does not is a blocker as well. Nothing is installed, nothing we lint is run.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..knowledge.versions import fmt
from ..model.launch import Edit, SourceFile
from ..model.record import field, record

# engines and plugins that depend on vLLM: a vLLM pin next to them is theirs to choose
OWNERS = {"sglang": "SGLang", "lmdeploy": "LMDeploy", "aphrodite-engine": "Aphrodite",
          "vllm-ascend": "vLLM Ascend", "vllm-gaudi": "vLLM Gaudi", "vllm-spyre": "vLLM Spyre",
          "vllm-omni": "vLLM-Omni", "vllm-neuron": "vLLM Neuron", "optimum-neuron": "Optimum Neuron",
          "vllm-tpu": "vLLM TPU"}
OWNER_IMAGES = {"lmsysorg/sglang": "SGLang", "openmmlab/lmdeploy": "LMDeploy"}
PIP_RE = re.compile(r"(?:^|[\s;&|(])(?:(?:\S*/)?python[\d.]*\s+-m\s+pip|(?:\S*/)?pip[\d.]*|uv\s+pip)\s+install\b")
TOKEN_RE = re.compile(r"""(?:"[^"]*"|'[^']*'|\\.|[^\s"'\\;&|()])+""")
WITH_VALUE = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f",
              "--find-links", "-t", "--target", "--prefix", "--root", "--python-version", "--platform",
              "--implementation", "--abi", "--src", "--upgrade-strategy", "-e", "--editable", "--cache-dir",
              "--progress-bar", "--trusted-host", "--report", "--python"}
PY_TAG_RE = re.compile(r"(?:^|[_-])py(?:thon)?-?(3)\.?(\d{1,2})(?![\d])", re.I)
FROM_RE = re.compile(r"(?im)^[ \t]*FROM[ \t]+(?:--platform=\S+[ \t]+)?(?P<image>\S+)")
TORCH_LABEL_RE = re.compile(r"(?:torch|pt)(\d)\.?(\d{1,2})", re.I)


@record
class Req:
    """One requirement of an environment, where it is written."""
    text: str                   # as written, quotes removed (`torch==2.6.0`, a URL)
    file: SourceFile
    start: int                  # of the text in the file
    name: str = ""              # canonical name ("" when unreadable)
    spec: object = None         # packaging SpecifierSet
    version: str | None = None  # a wheel URL's / file's version
    url: bool = False


@record
class Environment:
    """What one `pip install` (or requirements file) installs together."""
    where: str                  # "Dockerfile:12 (pip install)"
    reqs: list[Req] = field(default_factory=list)
    python: str | None = None   # X.Y, when the base image's tag says it
    python_from: str = ""
    base_torch: str | None = None
    base: str = ""
    owner: str = ""             # the engine/plugin whose image this is
    indexes: list[str] = field(default_factory=list)    # --index-url / --extra-index-url / --find-links


def _parse(text: str, file: SourceFile, start: int) -> Req:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    if text.endswith(".whl") and ("/" in text or text.count("-") >= 4):
        try:
            name, version, _, _ = parse_wheel_filename(text.rsplit("/", 1)[-1].split("#")[0])
            return Req(text, file, start, canonicalize_name(name), None, str(version), True)
        except (InvalidWheelFilename, ValueError):
            return Req(text, file, start, url=True)
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return Req(text, file, start)
    return Req(text, file, start, canonicalize_name(req.name), req.specifier, None, bool(req.url))


# --------------------------------------------------------------------------------------------
# Reading environments
# --------------------------------------------------------------------------------------------
def _logical_line(text: str, at: int) -> tuple[int, int]:
    """The instruction holding offset `at`: from its line start, through `\\` continuations."""
    start = text.rfind("\n", 0, at) + 1
    while start > 1 and text[start - 2] == "\\":
        start = text.rfind("\n", 0, start - 1) + 1
    end = at
    while True:
        nl = text.find("\n", end)
        if nl < 0:
            return start, len(text)
        if text[:nl].rstrip("\r").endswith("\\"):
            end = nl + 1
            continue
        return start, nl


def _pip_words(text: str, lo: int, hi: int, at: int) -> list[tuple[str, int]]:
    """(word, offset) of the `pip install` command of text[lo:hi] that holds offset `at`: its
    words up to the next shell operator."""
    begins = [m.end() for m in PIP_RE.finditer(text, lo, hi) if m.end() <= at]
    if not begins:
        return []
    words, prev_end = [], begins[-1]
    for m in TOKEN_RE.finditer(text, begins[-1], hi):
        if re.search(r"[;&|()]", text[prev_end:m.start()]):
            break
        prev_end = m.end()
        words.append((m.group(0), m.start()))
    return words


def _requirement_words(words, file: SourceFile, folder: Path, env: Environment, seen: set) -> None:
    skip = False
    for i, (word, off) in enumerate(words):
        if skip:
            skip = False
            continue
        bare = word.strip("\"'")
        if bare.startswith("-"):
            opt = bare.split("=", 1)[0]
            value = bare.split("=", 1)[1] if "=" in bare else (words[i + 1][0].strip("\"'") if i + 1 < len(words) else "")
            if opt in ("-r", "--requirement", "-c", "--constraint") and value:
                _include(folder / value, env, seen)
            if opt in INDEX_OPTIONS and value:
                env.indexes.append(value)
            if opt in WITH_VALUE and "=" not in bare:
                skip = True
            continue
        if "$" in bare or not bare:
            continue
        start = off + (1 if word[:1] in "\"'" else 0)
        env.reqs.append(_parse(bare, file, start))


def _include(path: Path, env: Environment, seen: set) -> None:
    from .sources import read_source

    try:
        path = path.resolve()
    except OSError:
        return
    if path in seen or not path.is_file():
        return
    seen.add(path)
    try:
        source = read_source(path, path.name, "requirements")
    except (OSError, ValueError):
        return
    _requirements_file(source, env, seen)


def _requirements_file(source: SourceFile, env: Environment, seen: set) -> None:
    offset = 0
    for line in source.text.splitlines(keepends=True):
        body = line.split(" #", 1)[0].rstrip("\r\n").strip()
        lead = len(line) - len(line.lstrip())
        if body.startswith(("-r ", "-c ", "--requirement", "--constraint")):
            value = body.split(None, 1)[1] if " " in body else body.split("=", 1)[-1]
            _include(source.path.parent / value.strip(), env, seen)
        elif (option := OPTION_LINE_RE.match(body)) and option.group("name") in INDEX_OPTIONS:
            env.indexes.append(option.group("value"))
        elif body and not body.startswith(("#", "-")):
            env.reqs.append(_parse(body, source, offset + lead))
        offset += len(line)


def _base(env: Environment, image: str) -> None:
    from ..knowledge.images import parse_image

    env.base = image
    ref = parse_image(image)
    if ref is None:
        return
    tag = ref.tag or ""
    if ref.path in ("python", "library/python"):
        m = re.match(r"(3)\.(\d+)", tag)
        if m:
            env.python, env.python_from = f"{m.group(1)}.{m.group(2)}", f"base image {image}"
    else:
        m = PY_TAG_RE.search(tag)
        if m:
            env.python, env.python_from = f"{m.group(1)}.{m.group(2)}", f"base image {image}"
    if ref.path.endswith("pytorch/pytorch") or ref.path == "pytorch/pytorch":
        m = re.match(r"(\d+\.\d+\.\d+)", tag)
        if m:
            env.base_torch = m.group(1)
    else:
        m = re.search(r"(?:^|_)pytorch_?(\d+\.\d+\.\d+)", tag)
        if m:
            env.base_torch = m.group(1)
    for path, who in OWNER_IMAGES.items():
        if ref.path == path or ref.path.endswith("/" + path.split("/")[-1]):
            env.owner = f"{who} (base image {image})"
    from .release_links import platform_build

    who = platform_build(image)
    if who and not env.owner:
        env.owner = f"{who} (base image {image})"


def _stage_from(text: str, at: int) -> str | None:
    froms = [m for m in FROM_RE.finditer(text) if m.start() < at]
    return froms[-1].group("image") if froms else None


def environment_of(bump, project) -> Environment | None:
    """The environment a vLLM pin bump's pin is installed in."""
    source: SourceFile = bump.file
    at = bump.edit.start
    seen: set = {source.path.resolve()}
    if source.kind == "dockerfile":
        lo, hi = _logical_line(source.text, at)
        words = _pip_words(source.text, lo, hi, at)
        if not words:
            return None
        env = Environment(f"{source.display}:{bump.line} (pip install)")
        _requirement_words(words, source, source.path.parent, env, seen)
        image = _stage_from(source.text, at)
        if image:
            _base(env, image)
        return env
    if source.kind == "requirements":
        env = Environment(f"{source.display}")
        _requirements_file(source, env, seen)
        for other in project.sources:       # a Dockerfile that installs it names its base image
            if other.kind == "dockerfile" and re.search(r"-r\s+\S*" + re.escape(source.path.name) + r"\b", other.text):
                image = _stage_from(other.text, other.text.find(source.path.name))
                if image:
                    _base(env, image)
                    env.python_from += f" ({other.display} installs {source.path.name})"
                break
        return env
    return None


# --------------------------------------------------------------------------------------------
# Deciding
# --------------------------------------------------------------------------------------------
@record
class Decision:
    co_bumps: list = field(default_factory=list)      # (Req, new version)
    blockers: list[str] = field(default_factory=list)


def _disjoint(a, b) -> bool:
    """No version satisfies both specifier sets (tried on every version either names, and just
    past each)."""
    from packaging.version import InvalidVersion, Version

    probes = set()
    for spec in list(a) + list(b):
        try:
            v = Version(spec.version.replace(".*", ""))
        except InvalidVersion:
            return False
        rel = list(v.release) + [0] * (3 - len(v.release))
        probes |= {str(v), ".".join(map(str, rel[:2] + [rel[2] + 1])), ".".join(map(str, [rel[0], rel[1] + 1, 0])),
                   f"{rel[0] + 1}.0.0"}
    return not any(a.contains(p, prereleases=True) and b.contains(p, prereleases=True) for p in probes)


def decide(env: Environment, target: tuple[int, int, int], requires: dict) -> Decision:
    from packaging.specifiers import SpecifierSet

    from ..knowledge.catalogue.requires import exact_pin, requirements

    out = Decision()
    release = fmt(target)
    if env.owner:
        out.blockers.append(f"vLLM is installed here as a dependency of {env.owner}: upgrade that instead; "
                            f"vllmlint does not bump its vLLM")
        return out
    for req in env.reqs:
        if req.name in OWNERS and req.name != "vllm":
            out.blockers.append(f"vLLM is installed here as a dependency of {OWNERS[req.name]} ({req.text}): "
                                f"upgrade {req.name} to a version built for vLLM {release} instead")
    if env.python and requires.get("python"):
        if not SpecifierSet(requires["python"]).contains(env.python + ".0", prereleases=True):
            out.blockers.append(f"vLLM {release} requires Python {requires['python']}; {env.python_from} runs "
                                f"Python {env.python}: move to a base image with a supported Python first")
    needs = requirements(requires, python=env.python)
    torch_pin = exact_pin(needs["torch"]) if "torch" in needs else None
    if env.base_torch and torch_pin and env.base_torch != torch_pin:
        out.blockers.append(f"base image {env.base} carries torch {env.base_torch}; vLLM {release} pins "
                            f"torch=={torch_pin}: pick a base image with that torch (or a plain one)")
    for req in env.reqs:
        if not req.name or req.name == "vllm":
            continue
        if req.url and req.version is not None:
            label = req.version.split("+", 1)[1] if "+" in req.version else ""
            m = TORCH_LABEL_RE.search(label + " " + req.text.rsplit("/", 1)[-1])
            if torch_pin and m and not torch_pin.startswith(f"{m.group(1)}.{m.group(2)}."):
                out.blockers.append(f"{req.text.rsplit('/', 1)[-1]} is a wheel built for torch "
                                    f"{m.group(1)}.{m.group(2)}; vLLM {release} pins torch=={torch_pin}: "
                                    f"use a build of it for that torch")
                continue
        need = needs.get(req.name)
        if need is None:
            continue
        if req.url:
            if req.version is not None and not need.specifier.contains(req.version.split("+")[0], prereleases=True):
                out.blockers.append(f"{req.text.rsplit('/', 1)[-1]} ({req.name} {req.version}) does not satisfy "
                                    f"vLLM {release}'s {need}: replace the URL by hand")
            continue
        if req.spec is None:
            continue
        mine = exact_pin(_as_requirement(req))
        theirs = exact_pin(need)
        if mine is not None:
            if "+" in mine:
                if theirs is None or mine.split("+")[0] != theirs:
                    out.blockers.append(f"{req.text} is a local build ({mine}); vLLM {release} needs {need}: "
                                        f"pick its build for that version by hand")
                continue
            if need.specifier.contains(mine, prereleases=True):
                continue
            if theirs is not None:
                out.co_bumps.append((req, theirs))
            else:
                out.blockers.append(f"{req.text} does not satisfy vLLM {release}'s {need}: choose a version of "
                                    f"{req.name} by hand")
            continue
        if not str(req.spec):
            continue
        if theirs is not None and not req.spec.contains(theirs, prereleases=True):
            out.blockers.append(f"{req.text} excludes {req.name}=={theirs}, which vLLM {release} pins: "
                                f"widen the range by hand")
        elif theirs is None and _disjoint(req.spec, need.specifier):
            out.blockers.append(f"{req.text} and vLLM {release}'s {need} admit no common version: "
                                f"change the range by hand")
    return out


def _as_requirement(req: Req):
    from packaging.requirements import Requirement

    return Requirement(req.text)


def _version_span(req: Req) -> tuple[int, int] | None:
    m = re.search(r"===?\s*([\w.+!-]+)", req.text)
    if m is None:
        return None
    return req.start + m.start(1), req.start + m.end(1)


# --------------------------------------------------------------------------------------------
# Applying to migrate's bumps
# --------------------------------------------------------------------------------------------
INDEX_OPTIONS = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links")
# an option line of a requirements file and its value: `--extra-index-url URL`, `-i=URL`
OPTION_LINE_RE = re.compile(r"(?P<name>-[-\w]+)(?:\s*=\s*|\s+)(?P<value>\S.*?)\s*$")
# PyTorch's wheel index of one CUDA or ROCm build (download.pytorch.org/whl/cu124): it serves
# the torch releases built for that toolkit only, which no file here lists
TORCH_BUILD_INDEX_RE = re.compile(r"download\.pytorch\.org/whl/(?:nightly/)?(?P<build>cu\d+|rocm[\d.]+)")
TORCH_PACKAGES = ("torch", "torchvision", "torchaudio")


def with_environments(bumps: list, project, target: tuple[int, int, int], check_deps: bool = False) -> list:
    """`bumps` (migrate.find_bumps) with each vLLM pin bump's environment settled: the exact
    pins the new release needs bumped with it (new Bump entries), or the pin left as it is with
    the blocker as its reason."""
    from ..knowledge.catalogue.requires import for_release
    from .migrate import Bump

    requires = for_release(fmt(target))
    out = list(bumps)
    for bump in bumps:
        if bump.edit is None or bump.what != "pin" or not re.match(r"vllm\b(?!-)", bump.old):
            continue
        env = environment_of(bump, project)
        if env is None:
            continue
        if requires is None:
            continue            # what the release requires is not recorded: the pin is bumped alone, as before
        decision = decide(env, target, requires)
        extra = []
        build = next((m for m in map(TORCH_BUILD_INDEX_RE.search, env.indexes) if m), None)
        for req, version in decision.co_bumps:
            span = _version_span(req)
            if build is not None and req.name in TORCH_PACKAGES:
                # found as a user on KempnerInstitute/distributed-inference-vllm: torch==2.6.0 from
                # the cu124 index bumped to 2.14.0, which that index does not serve (pip would
                # take another CUDA build from PyPI without a word)
                decision.blockers.append(f"{req.text}: vLLM {fmt(target)} pins {req.name}=={version}; the "
                                         f"environment installs {req.name} from PyTorch's {build.group('build')} "
                                         f"index, which may not serve it: choose the index and bump by hand")
                continue
            if span is None:
                decision.blockers.append(f"{req.text}: vLLM {fmt(target)} pins {req.name}=={version}; "
                                         f"bump it by hand")
                continue
            line = req.file.line_col(span[0])[0]
            extra.append(Bump(req.file, line, req.text, re.sub(r"(===?\s*)[\w.+!-]+", r"\g<1>" + version,
                                                                 req.text, count=1),
                              f"pin (vLLM {fmt(target)} needs it)", Edit(req.file, span[0], span[1], version)))
        if not decision.blockers and check_deps:
            failure = pip_resolves(env, bump, extra, target)
            if failure:
                decision.blockers.append(f"pip cannot resolve the upgraded environment: {failure}")
        if decision.blockers:
            bump.edit = None
            bump.why_not = ("blocker, not bumped (the environment would not resolve; " + env.where + "): "
                            + "; ".join(decision.blockers))
            continue
        out.extend(e for e in extra if not any(o.edit is not None and e.edit.key() == o.edit.key() for o in out))
    return out


def pip_resolves(env: Environment, bump, extra: list, target: tuple[int, int, int]) -> str:
    """"" when pip, with the user's own configuration, resolves the environment as the edits
    would leave it; else pip's last error line. Nothing is installed (`--dry-run`)."""
    import subprocess
    import sys
    import tempfile

    replaced = {(b.edit.file.path, b.edit.start): b.edit.text for b in extra}
    lines = []
    for req in env.reqs:
        # only named requirements and wheel URLs: a local path or VCS URL would be built, and
        # `--only-binary :all:` below refuses every build (nothing of the tree, nor of an sdist, runs)
        if not req.name:
            continue
        if req.url:
            if req.text.startswith("https://") and req.text.endswith(".whl"):
                lines.append(req.text)
            continue
        span = _version_span(req)
        text = req.text
        if req.name == "vllm" and span is not None:
            text = req.text[:span[0] - req.start] + fmt(target) + req.text[span[1] - req.start:]
        elif span is not None and (req.file.path, span[0]) in replaced:
            text = req.text[:span[0] - req.start] + replaced[(req.file.path, span[0])] + req.text[span[1] - req.start:]
        lines.append(text)
    with tempfile.TemporaryDirectory() as tmp:
        reqfile = Path(tmp) / "requirements.txt"
        reqfile.write_text("\n".join(lines) + "\n")
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--only-binary", ":all:", "--report", str(Path(tmp) / "report.json"), "-r", str(reqfile)]
        if env.python:
            cmd += ["--python-version", env.python, "--target", str(Path(tmp) / "t")]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"pip did not answer ({type(err).__name__})"
    if done.returncode == 0:
        return ""
    errors = [l for l in done.stderr.splitlines() if l.startswith("ERROR")] or done.stderr.splitlines()[-1:]
    return " ".join(errors[-2:]) or f"pip exit {done.returncode}"


def blocked_launches(project, target: tuple[int, int, int], check_deps: bool = False):
    """`hold(launch) -> reason` for migrate's chain: the launches that run an environment whose
    vLLM pin will not be bumped (a blocker), so no fix for the new release touches them; None
    when no environment is blocked."""
    from .migrate import find_bumps

    blocked = [b for b in with_environments(find_bumps(project, target), project, target, check_deps)
               if b.edit is None and b.why_not.startswith("blocker")]
    if not blocked:
        return None
    by_path = {b.file.path: b for b in blocked}
    by_folder = {b.file.path.parent: b for b in blocked if b.file.kind == "requirements"}
    by_place = {(b.file.path, b.line): b for b in blocked}

    def hold(launch) -> str:
        # a pin the launch runs (lint.trace), whatever release it reads: a script two images copy,
        # one of them installing the blocked pin, keeps its config for that one (found as a user:
        # an entrypoint both a GPU and a CPU Dockerfile copy, the CPU torch build blocked)
        bump = next((by_place[(n.file.path, n.line)] for n in launch.pins if (n.file.path, n.line) in by_place), None)
        bump = bump or by_path.get(launch.file.path)
        if bump is None:
            bump = next((b for b in blocked if b.file.display in launch.release_from), None)
        if bump is None and "/requirements" in launch.release_from:
            bump = next((b for folder, b in by_folder.items() if launch.file.path.is_relative_to(folder)), None)
        return f"It runs the environment of {bump.file.display}:{bump.line}, whose vLLM pin stays: {bump.why_not}" \
            if bump is not None else ""

    return hold
