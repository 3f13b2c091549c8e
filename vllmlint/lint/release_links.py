"""The release of a launch whose own file does not say it, followed where the repository
links it explicitly, and the builds whose tags are not vLLM's.

`releases.assign_releases` reads a launch's own image and pins. What is still unknown after it
is looked for, in this order, only through links written in the repository (nothing guessed
from a folder's name or a file lying near):

1. a directive in the launch's file, `# vllmlint: release=0.22.0` (the user says);
2. a Dockerfile that `COPY`s or `ADD`s the launcher's file (or a folder holding it, named: not
   `COPY . .`): the launcher runs in that image, so it runs the release of the Dockerfile's
   vLLM base image (`FROM vllm/vllm-openai:v0.22.0`) or of its one `vllm==X` pin;
3. a compose service that `build:`s its image from a Dockerfile: the release of that Dockerfile;
4. a CI workflow (`.github/workflows/*.yml`) that runs the launcher (its `run:` names the file)
   and sets, in `env:` or a `matrix:`, a variable the launcher reads by name (`$VLLM_VERSION`,
   `${VLLM_IMAGE}`, `os.environ["VLLM_VERSION"]`) to a release or a vLLM image of one; a matrix
   of several: the oldest (a fix must keep behaviour on each);
5. a config file the launcher names (`bench.py --config configs/bench.yaml`) whose `image:` is
   a vLLM image of a release (several: the oldest);
6. a container whose image is a tag the repository builds itself: a script, Makefile or CI
   workflow runs `docker build -t TAG` (podman, buildx, buildah alike) and that Dockerfile is
   found without guessing (`-f FILE` or the context's `Dockerfile`, from the script's folder or
   the repository root: one file, else nothing). The container runs that Dockerfile's release.
   Only the release is read: the image is still not one `migrate` bumps, so a fix that needs a
   release stays held on it (migrate.stays_behind), as on a compose `build:`.

Then `declare` (with the settings) fills what is still unknown from `[tool.vllmlint.releases]`
(path globs -> release). The tree's own evidence wins over what the user declares: a directive
or a setting left behind after an upgrade never hides the image or pin the launch now runs.

A build that carries a platform plugin or a fork (Gaudi/Habana, Neuron, Ascend, Spyre, vLLM-Omni,
vendor images republished by another project: OPEA, ROCm builds, Intel) versions its own tags:
such a tag is never read as a vLLM release unless it names one (`rocm6.4.1_vllm_0.9.1_...`),
and the launch's release stays unknown with the reason (no automatic removal on it).
"""
from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path

from ..knowledge.images import is_vllm_image, parse_image, plugin_of
from ..knowledge.versions import fmt, parse_version
from ..model.launch import Launch
from ..model.lazyre import lazy_re

DIRECTIVE_RE = lazy_re(r"(?m)#[ \t]*vllmlint:[ \t]*release[ \t]*=[ \t]*[\"']?(?P<v>[^\s\"'#]+)")
# images of vLLM built by another project, or carrying a platform plugin or fork: their tags are
# that project's versions (`opea/vllm:1.3`, `vault.habana.ai/gaudi-docker/1.21.0/...`)
PLATFORM_BUILDS = {     # the publishing project first: `opea/vllm-rocm` is OPEA's
    "rocm/*": "AMD ROCm", "opea/*": "OPEA", "intel/*": "Intel", "intelanalytics/*": "Intel IPEX-LLM",
    "lmcache/*": "LMCache",     # `lmcache/vllm-openai:v0.3.7`: LMCache's release, not vLLM 0.3.7
    "*habana*": "Intel Gaudi (Habana)", "*gaudi*": "Intel Gaudi (Habana)",
    "*neuron*": "AWS Neuron", "*ascend*": "Ascend", "*spyre*": "IBM Spyre", "*vllm-omni*": "vLLM-Omni",
    "*vllm-rocm*": "ROCm", "*ipex*": "Intel IPEX-LLM", "*xpu*": "Intel XPU", "*tpu*": "TPU",
}
# vLLM's own images, whose tags are vLLM's even when a pattern above matches their path
OWN_IMAGES = ("vllm/*", "*/vllm-openai", "*/vllm-openai-*", "*vllm-cpu-release-repo*")
# `vllm_0.9.1`, `vllm-v0.9.1`, `vllm0.8.3` inside a platform build's tag: it names the release
EMBEDDED_RE = lazy_re(r"(?:^|[_.-])vllm[_-]?v?(\d+)\.(\d+)\.(\d+)(?!\d)", re.I)
RELEASE_VALUE_RE = lazy_re(r"^[\"']?(?:vllm\s*==\s*)?v?(\d+\.\d+\.\d+)(?:\.post\d+)?[\"']?$")
COPY_RE = lazy_re(r"(?im)^[ \t]*(?:COPY|ADD)[ \t]+(?P<args>.+)$")
FROM_RE = lazy_re(r"(?im)^[ \t]*FROM[ \t]+(?:--platform=\S+[ \t]+)?(?P<image>\S+)")
VLLM_PIN_RE = lazy_re(r"(?<![\w./-])vllm(?:\[[\w,\s-]+\])?\s*==\s*(\d+\.\d+\.\d+)(?:\.post\d+)?(?![\w.])")
CONFIG_NAME_RE = lazy_re(r"[\w./-]+\.(?:ya?ml|json)\b")
SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", "site-packages"}
MAX_SCAN = 4000          # files looked at under one repository root


@lru_cache(maxsize=4096)
def platform_build(image: str | None) -> str:
    """The plugin, fork or vendor a build of vLLM comes from when its tags are not vLLM's
    (`opea/vllm:1.3` -> "OPEA"), else "". Memoised (a pure function of the reference; a migrate
    asks again for every launch at every step)."""
    ref = parse_image(image)
    if ref is None:
        return ""
    for glob, who in PLATFORM_BUILDS.items():     # a publisher's own repository first:
        if "/" in glob and not glob.startswith("*") and fnmatchcase(ref.path, glob):
            return who                              # `lmcache/vllm-openai` is LMCache's, not a mirror
    if any(fnmatchcase(ref.path, g) for g in OWN_IMAGES) and not plugin_of(image):
        return ""
    plugin = plugin_of(image)
    if plugin:
        return plugin
    for glob, who in PLATFORM_BUILDS.items():
        if fnmatchcase(ref.path, glob) or fnmatchcase(ref.name.lower(), glob):
            return who
    return ""


def platform_release(image: str | None) -> tuple[int, int, int] | None:
    """The vLLM release a platform build's tag names itself (`..._vllm_0.9.1_...`), else None."""
    ref = parse_image(image)
    m = EMBEDDED_RE().search(ref.tag or "") if ref is not None else None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def _release(text: str) -> tuple[int, int, int] | None:
    m = RELEASE_VALUE_RE().match(text.strip())
    return parse_version(m.group(1)) if m else None


def _image_release(value: str, extra_images: tuple[str, ...]) -> tuple[int, int, int] | None:
    from .releases import release_from_image

    value = value.strip().strip("'\"")
    if platform_build(value):
        return platform_release(value)
    return release_from_image(value, extra_images) if is_vllm_image(value, extra_images) else None


def _value_release(value: str, extra_images: tuple[str, ...]) -> tuple[int, int, int] | None:
    """A release named by a variable's value: `0.22.0`, `v0.22.0`, `vllm==0.22.0`, a vLLM image."""
    return _release(value) or _image_release(value, extra_images)


# --------------------------------------------------------------------------------------------
# The repository around the launches
# --------------------------------------------------------------------------------------------
class Repo:
    """Files of one repository root, read on first use (only when a launch's release is unknown)."""

    def __init__(self, root: Path):
        self.root = root
        self._files: list[Path] | None = None
        self._texts: dict[Path, str | None] = {}
        self._copies: dict[Path, list] | None = None
        self._kinds: dict[str, list[Path]] = {}     # dockerfiles/workflows/composes, listed once
        self._existing: dict[tuple[Path, str], Path | None] = {}
        self._built: dict | None = None
        self._resolved: dict[Path, Path] = {}

    def files(self) -> list[Path]:
        if self._files is None:
            found: list[Path] = []
            for folder, dirs, names in os.walk(self.root):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and (not d.startswith(".") or d == ".github"))
                found.extend(Path(folder) / n for n in sorted(names))
                if len(found) > MAX_SCAN:
                    break
            self._files = found
        return self._files

    def existing(self, base: Path, name: str) -> Path | None:
        """(base / name).resolve() when it is a file, else None: asked per launch and per name a
        launcher mentions (`config.yaml` in every file of a folder), answered once."""
        key = (base, name)
        if key not in self._existing:
            path = (base / name).resolve()
            self._existing[key] = path if path.is_file() else None
        return self._existing[key]

    def resolved(self, path: Path) -> Path:
        """path.resolve(), answered once per path (asked per launch at every load of a chain)."""
        hit = self._resolved.get(path)
        if hit is None:
            hit = self._resolved[path] = path.resolve()
        return hit

    def text(self, path: Path) -> str | None:
        if path not in self._texts:
            try:
                self._texts[path] = path.read_text(encoding="utf-8", errors="replace") \
                    if path.stat().st_size < 2_000_000 else None
            except OSError:
                self._texts[path] = None
        return self._texts[path]

    def _listed(self, kind: str, keep) -> list[Path]:
        """The files `keep` accepts, listed once per repository: a listing per launch was
        O(launches x files) (bench/gen_corpus.py's 1000 scripts: 1M Path.suffix calls)."""
        if kind not in self._kinds:
            self._kinds[kind] = [p for p in self.files() if keep(p)]
        return self._kinds[kind]

    def dockerfiles(self) -> list[Path]:
        return self._listed("dockerfiles", lambda p: p.name == "Dockerfile" or p.name.startswith("Dockerfile.")
                            or p.name.endswith(".Dockerfile") or p.name.endswith(".dockerfile"))

    def copy_sources(self) -> dict[Path, list[tuple[tuple[int, int, int], Path, int]]]:
        """Each path a Dockerfile COPYs/ADDs from the build context, resolved, with where: built
        once per repository (a scan per launch was O(launches x Dockerfiles))."""
        if self._copies is None:
            self._copies = {}
            for d_order, dockerfile in enumerate(self.dockerfiles()):
                text = self.text(dockerfile)
                if not text:
                    continue
                for m_order, m in enumerate(COPY_RE().finditer(text)):
                    if any(w.startswith("--from") for w in m.group("args").split()):
                        continue
                    words = [w.strip("\"'") for w in m.group("args").replace("[", " ").replace("]", " ")
                             .replace(",", " ").split() if not w.startswith("--")]
                    for s_order, src in enumerate(words[:-1]):
                        if src in (".", "./", "*") or "$" in src:
                            continue
                        path = (dockerfile.parent / src).resolve()
                        self._copies.setdefault(path, []).append(((d_order, m_order, s_order), dockerfile, m.start()))
        return self._copies

    def workflows(self) -> list[Path]:
        return self._listed("workflows", lambda p: p.suffix in (".yml", ".yaml") and in_github_workflows(p))

    def composes(self) -> list[Path]:
        return self._listed("composes", lambda p: p.suffix in (".yml", ".yaml") and "compose" in p.name)

    def built_tags(self) -> dict[str, list[tuple[Path, Path, int]]]:
        """tag key -> (Dockerfile, builder, offset) of each image the repository's scripts,
        Makefiles and workflows build: read once per repository."""
        if self._built is None:
            self._built = {}
            for builder in self._listed("builders", is_builder):
                text = self.text(builder)
                found = builds_in(builder, text, self.root) if text and BUILD_RE().search(text) else []
                if text and "build-push-action" in text and in_github_workflows(builder):
                    found += build_push_actions(text, self.root)
                for key, dockerfile, at in found:
                    self._built.setdefault(key, []).append((dockerfile, builder, at))
        return self._built


def in_github_workflows(path: Path) -> bool:
    """A file of `.github/workflows/`: GitHub Actions runs its `run:` steps on the runner."""
    return path.parent.name == "workflows" and path.parent.parent.name == ".github"


def _root_finder(fallback: Path):
    """repo_root(path, fallback), walked up once per folder: it depends only on the path's
    folder, and a walk per launch (stat calls up to the root) was paid by every script."""
    roots: dict[Path, Path] = {}

    def root_of(path: Path) -> Path:
        folder = path.parent
        if folder not in roots:
            roots[folder] = repo_root(path, fallback)
        return roots[folder]
    return root_of


def repo_root(path: Path, fallback: Path) -> Path:
    """The folder holding `.git` or `.github` above `path`, else `fallback` (the tree checked)."""
    for folder in path.parents:
        if (folder / ".git").exists() or (folder / ".github").is_dir():
            return folder
        if folder == fallback:
            break
    return fallback


def dockerfile_release(text: str, display: str, extra_images: tuple[str, ...]) -> tuple:
    """(release, why, platform reason) of the image a Dockerfile builds: its vLLM base image's
    release, else its one `vllm==X` pin; a platform base: (None, "", why)."""
    froms = [m.group("image") for m in FROM_RE().finditer(text)]
    stages = {m.group(1).lower() for m in re.finditer(r"(?im)^[ \t]*FROM[ \t]+\S+[ \t]+AS[ \t]+(\S+)", text)}
    final = next((f for f in reversed(froms) if f.lower() not in stages), None)
    if final is not None:
        who = platform_build(final)
        if who:
            found = platform_release(final)
            if found is not None:
                return found, f"image {final} in {display}", ""
            return None, "", f"{display} builds on {final}, built by or for {who}: its tags are not vLLM's releases"
        found = _image_release(final, extra_images)
        if found is not None:
            return found, f"image {final} in {display}", ""
    pins = {parse_version(v) for v in VLLM_PIN_RE().findall(text)}
    if len(pins) == 1:
        release = next(iter(pins))
        return release, f"pin vllm=={fmt(release)} in {display}", ""
    return None, "", ""


def _display(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _line_of(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


# --------------------------------------------------------------------------------------------
# Following the links
# --------------------------------------------------------------------------------------------
# root -> Repo kept across the loads of a run that does not write before it ends (a migrate
# chain: every pass of every step loads the project again, the files on disk stay as they
# were), else None: each load reads the repositories again. Set by keep_repos().
KEPT_REPOS: dict | None = None
# (question, folder) -> what the disk answered, kept with KEPT_REPOS: the pins and project files
# that assign_releases reads beside a launch (releases._PinsOnDisk, own_project)
KEPT_DISK: dict | None = None


class keep_repos:
    """While active, follow_links reads each repository's files on disk once, not once per load,
    and assign_releases asks the disk each question about a folder once (disk_answer)."""

    def __enter__(self):
        global KEPT_REPOS, KEPT_DISK
        # nested (a migrate command around its chain): the outer run's repositories stay
        self.before = KEPT_REPOS, KEPT_DISK
        if KEPT_REPOS is None:
            KEPT_REPOS, KEPT_DISK = {}, {}
        return self

    def __exit__(self, *exc):
        global KEPT_REPOS, KEPT_DISK
        KEPT_REPOS, KEPT_DISK = self.before
        return False


def disk_answer(question, folder: Path):
    """question(folder), asked of the disk once while keep_repos is active (else every time)."""
    if KEPT_DISK is None:
        return question(folder)
    key = question, folder
    if key not in KEPT_DISK:
        KEPT_DISK[key] = question(folder)
    return KEPT_DISK[key]


def follow_links(project, extra_images: tuple[str, ...] = ()) -> None:
    """Set the release of launches `assign_releases` left unknown, through explicit links."""
    unknown = [l for l in project.launches if l.release is None and _followable(l)]
    if not unknown:
        return
    sources = project.sources
    fallback = _common_root([s.path for s in sources])
    repos: dict[Path, Repo] = KEPT_REPOS if KEPT_REPOS is not None else {}
    root_of = _root_finder(fallback)
    for launch in unknown:
        if _directive(launch):
            continue
        root = root_of(launch.file.path)
        repo = repos.setdefault(root, Repo(root))
        # a container of a literal image not vLLM's runs that image: only a build of it says more
        steps = (_compose_build, _built_tag) if _literal_image(launch) else \
            (_copied_into, _compose_build, _workflow_env, _named_config)
        for step in steps:
            if step(launch, repo, extra_images):
                break


def _literal_image(launch: Launch) -> bool:
    return bool(launch.image) and "$" not in launch.image and "{" not in launch.image


def _followable(launch: Launch) -> bool:
    """Its release may come from elsewhere: it has no image of its own, or one named by a
    variable (`vllm/vllm-openai:${VLLM_VERSION}`), or one built from a Dockerfile (compose
    `build:`, a tag a script builds): an image vLLM does not publish, whose release is not
    already known to be unknowable (a platform build, a placeholder)."""
    if not _literal_image(launch):
        return True
    return not launch.release_unnamed and not is_vllm_image(launch.image) and parse_image(launch.image) is not None


def _common_root(paths: list[Path]) -> Path:
    if not paths:
        return Path.cwd()
    try:
        return Path(os.path.commonpath([str(p.parent) for p in paths]))
    except ValueError:
        return paths[0].parent


def _set(launch: Launch, release, why: str, linked: bool = False) -> bool:
    launch.release, launch.release_from, launch.release_pin = release, why, ""
    launch.release_linked = linked
    return True


def _directive(launch: Launch) -> bool:
    m = DIRECTIVE_RE().search(launch.file.text)
    if m is None:
        return False
    try:
        release = parse_version(m.group("v").lstrip("v"))
    except ValueError:
        launch.release_unnamed = (f"the directive `vllmlint: release={m.group('v')}` at {launch.file.display}:"
                                  f"{_line_of(launch.file.text, m.start())} names no release X.Y.Z")
        return True
    return _set(launch, release, f"directive at {launch.file.display}:{_line_of(launch.file.text, m.start())}")


def _copied_into(launch: Launch, repo: Repo, extra_images) -> bool:
    """A Dockerfile that COPYs/ADDs the launcher's file, or a folder holding it, by name."""
    target = launch.file.path
    resolved = repo.resolved(target)
    index = repo.copy_sources()
    hits = []
    for candidate in (resolved, *resolved.parents):
        for hit in index.get(candidate, ()):
            if candidate == resolved or candidate.is_dir():
                hits.append(hit)
    # in the order a scan of every Dockerfile, COPY line and source would meet them
    for _order, dockerfile, start in sorted(hits, key=lambda h: h[0]):
        text = repo.text(dockerfile)
        if target.name not in text and not any(p.name in text for p in target.parents
                                                if p != repo.root and repo.root in p.parents):
            continue
        release, why, platform = dockerfile_release(text, _display(dockerfile, repo.root), extra_images)
        where = f"{_display(dockerfile, repo.root)}:{_line_of(text, start)}"
        if platform:
            launch.release_unnamed = f"it is copied into the image of {where}: {platform}"
            return True
        if release is not None:
            return _set(launch, release, f"{why}, which copies it ({where})", linked=True)
    return False


def _compose_build(launch: Launch, repo: Repo, extra_images) -> bool:
    """A compose service whose image is built (`build:`) from a Dockerfile."""
    if launch.file.kind != "compose" or not launch.context.startswith("service "):
        return False
    import yaml
    from ..parsers.yaml_source import load_data

    try:
        data = load_data(launch.file.text)       # (libyaml: the pure-Python safe_load was a third of a compose check)
    except yaml.YAMLError:
        return False
    service = (data or {}).get("services", {}).get(launch.context.split()[1]) if isinstance(data, dict) else None
    build = service.get("build") if isinstance(service, dict) else None
    if build is None:
        return False
    context = build if isinstance(build, str) else build.get("context", ".") if isinstance(build, dict) else None
    name = build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile"
    if not isinstance(context, str) or not isinstance(name, str) or "$" in context + name:
        return False
    dockerfile = (launch.file.path.parent / context / name).resolve()
    text = repo.text(dockerfile)
    if text is None:
        return False
    release, why, platform = dockerfile_release(text, _display(dockerfile, repo.root), extra_images)
    if platform:
        launch.release_unnamed = f"service {launch.context.split()[1]} is built from {platform}"
        return True
    return release is not None and _set(launch, release, f"{why}, which `build:` names ({launch.file.display})")


def _built_tag(launch: Launch, repo: Repo, extra_images) -> bool:
    """A script, Makefile or workflow of the repository that builds the launch's image."""
    builds = repo.built_tags().get(_tag_key(launch.image))
    if not builds:
        return False
    if len({b[0] for b in builds}) > 1:
        return False        # built from several Dockerfiles: which one runs is the user's to say (a directive)
    dockerfile, builder, at = builds[0]
    text = repo.text(dockerfile) or ""
    shown = _display(dockerfile, repo.root)
    where = f"{_display(builder, repo.root)}:{_line_of(repo.text(builder) or '', at)}"
    release, why, platform = dockerfile_release(text, shown, extra_images)
    if platform:
        launch.release_unnamed = f"image {launch.image} is built by {where}: {platform}"
        return True
    if release is None:
        bases = [m.group("image") for m in FROM_RE().finditer(text)]
        what = f"whose base image {bases[-1]} names no vLLM release" if bases else "which names no vLLM release"
        launch.release_unnamed = f"image {launch.image} is built by {where} from {shown}, {what}"
        return True
    return _set(launch, release, f"{why}, which {where} builds as {launch.image}")


def _tag_key(image: str | None) -> str:
    """An image as a build names it: Docker Hub's and a local registry's prefixes dropped,
    `:latest` when untagged (`docker.io/library/x:local` and `x:local` are one image)."""
    ref = parse_image(image)
    if ref is None:
        return ""
    path = ref.path[len("library/"):] if ref.path.startswith("library/") and ref.registry in (None, "docker.io", "index.docker.io") else ref.path
    registry = "" if ref.registry in (None, "docker.io", "index.docker.io", "localhost") else ref.registry + "/"
    return f"{registry}{path}:{ref.tag or 'latest'}"


# `docker build`, `docker buildx build`, `docker image build`, `podman build`, `buildah bud`
BUILD_RE = lazy_re(r"(?<![\w-])(?:(?:docker|podman)(?:[ \t]+(?:buildx|image))?[ \t]+build|buildah[ \t]+(?:bud|build))(?![\w-])")
SHELL_ASSIGN_RE = lazy_re(r"(?m)^[ \t]*(?:export[ \t]+|readonly[ \t]+|local[ \t]+)?(?P<name>[A-Za-z_]\w*)=(?P<value>.*)$")
MAKE_ASSIGN_RE = lazy_re(r"(?m)^[ \t]*(?:export[ \t]+)?(?P<name>[A-Za-z_]\w*)[ \t]*(?:\?=|:=|::=|=)[ \t]*(?P<value>.*)$")
SCRIPT_DIR_RE = lazy_re(r"dirname|BASH_SOURCE|\$0")


def is_builder(path: Path) -> bool:
    """A file whose commands may build an image: a script, a Makefile, a justfile, a workflow."""
    return path.suffix in (".sh", ".bash", ".mk") or path.name in ("Makefile", "makefile", "GNUmakefile", "justfile") \
        or (path.suffix in (".yml", ".yaml") and in_github_workflows(path))


def builds_in(builder: Path, text: str, root: Path) -> list[tuple[str, Path, int]]:
    """(tag key, Dockerfile, offset) of each image build in `builder` whose tag and Dockerfile
    are written out (a variable assigned one literal value in the same file counts)."""
    import shlex

    out = []
    make = builder.name.lower() in ("makefile", "gnumakefile") or builder.suffix == ".mk"
    values: dict[str, set[str]] = {}
    for m in (MAKE_ASSIGN_RE() if make else SHELL_ASSIGN_RE()).finditer(text):
        values.setdefault(m.group("name"), set()).add(m.group("value").strip())

    def expand(word: str) -> str | None:
        def one(m):
            name = m.group(1) or m.group(2) or m.group(3)
            found = values.get(name, set())
            if len(found) != 1:
                raise KeyError(name)
            value = next(iter(found))
            if not make and SCRIPT_DIR_RE().search(value) and "pwd" in value:
                return "\0SCRIPT_DIR\0"        # `$(cd "$(dirname "$0")" && pwd)`: the script's folder
            value = value.split(" #", 1)[0].strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            if not value or any(c in value for c in "$`;&| \t"):
                raise KeyError(name)             # not one literal word
            return value
        try:
            return re.sub(r"\$\{(\w+)\}|\$\((\w+)\)|\$(\w+)", one, word)
        except KeyError:
            return None

    for m in BUILD_RE().finditer(text):
        if _in_comment_line(text, m.start()):
            continue
        end = m.end()
        while True:                    # the command, continuation lines joined
            nl = text.find("\n", end)
            nl = len(text) if nl < 0 else nl
            end = nl
            if text[nl - 1:nl] == "\\" and nl < len(text):
                end = nl + 1
                continue
            break
        command = text[m.end():end].replace("\\\n", " ")
        if make:                       # make's `$(IMG)` is shell's `${IMG}`: not the end of a `$( )`
            command = re.sub(r"\$\((\w+)\)", r"${\1}", command)
        command = re.split(r"[;&|]|\)|`", command, maxsplit=1)[0]
        try:
            words = shlex.split(command, comments=True)
        except ValueError:
            continue
        tags, file, positional = [], None, []
        i = 0
        while i < len(words):
            w = words[i]
            if w in ("-t", "--tag") and i + 1 < len(words):
                tags.append(words[i + 1]); i += 2; continue
            if w.startswith("--tag=") or (w.startswith("-t") and len(w) > 2 and not w.startswith("--")):
                tags.append(w.split("=", 1)[1] if w.startswith("--tag=") else w[2:]); i += 1; continue
            if w in ("-f", "--file") and i + 1 < len(words):
                file = words[i + 1]; i += 2; continue
            if w.startswith("--file="):
                file = w.split("=", 1)[1]; i += 1; continue
            if w.startswith("-"):
                # an option with a value (--build-arg X=1, --platform p): its value is not the context
                if "=" not in w and i + 1 < len(words) and not words[i + 1].startswith("-") and w in VALUED_BUILD_OPTIONS:
                    i += 2
                else:
                    i += 1
                continue
            positional.append(w); i += 1
        if len(positional) != 1 or not tags:
            continue
        context = expand(positional[0])
        named_file = file
        file = expand(file) if file is not None else None
        if context is None or (named_file is not None and file is None) or "://" in context or context == "-":
            continue
        bases = [root] if in_github_workflows(builder) else \
            [builder.parent] if make or builder.name == "justfile" else [builder.parent, root]
        found = set()
        for base in bases:
            here = Path(context.replace("\0SCRIPT_DIR\0", str(builder.parent)))
            ctx = here if here.is_absolute() else base / here
            if file is not None:
                f = Path(file.replace("\0SCRIPT_DIR\0", str(builder.parent)))
                path = f if f.is_absolute() else base / f
            else:
                path = ctx / "Dockerfile"
            if "$" not in str(path) and path.is_file():
                found.add(path.resolve())
        if len(found) != 1:
            continue
        dockerfile = found.pop()
        for tag in tags:
            tag = expand(tag)
            if tag and "$" not in tag and "\0" not in tag and _tag_key(tag):
                out.append((_tag_key(tag), dockerfile, m.start()))
    return out


def build_push_actions(text: str, root: Path) -> list[tuple[str, Path, int]]:
    """(tag key, Dockerfile, offset) of each `docker/build-push-action` step of a workflow
    whose tags are written out (`${{ }}` expressions are not followed): its `file:`, else its
    `context:` (default the repository root) and `Dockerfile` there."""
    import yaml

    from ..parsers.yaml_source import YamlError, compose_all, iter_nodes

    try:
        docs = compose_all(text)
    except YamlError:
        return []
    out = []
    for node in iter_nodes(*docs):       # each node once, aliases included
        if not isinstance(node, yaml.MappingNode):
            continue
        items = {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}
        uses = items.get("uses")
        with_ = items.get("with")
        if isinstance(uses, yaml.ScalarNode) and uses.value.startswith("docker/build-push-action@") \
                and isinstance(with_, yaml.MappingNode):
            given = {k.value: v.value for k, v in with_.value
                     if isinstance(k, yaml.ScalarNode) and isinstance(v, yaml.ScalarNode)}
            context = given.get("context", ".").strip() or "."
            file = given.get("file", "").strip()
            if "${{" in context + file or "://" in context:
                continue
            path = (root / file) if file else (root / context / "Dockerfile")
            if not path.is_file():
                continue
            tags = [t.strip() for t in re.split(r"[,\n]", given.get("tags", "")) if t.strip()]
            for tag in tags:
                if "${{" not in tag and "$" not in tag and _tag_key(tag):
                    out.append((_tag_key(tag), path.resolve(), uses.start_mark.index))
    return out


VALUED_BUILD_OPTIONS = frozenset({"--build-arg", "--platform", "--target", "--label", "--cache-from",
                                  "--cache-to", "--secret", "--ssh", "--network", "--progress", "--output",
                                  "-o", "--iidfile", "--add-host", "--build-context", "--shm-size",
                                  "--ulimit", "--memory", "-m", "--cpuset-cpus", "--isolation", "--format"})


def _in_comment_line(text: str, at: int) -> bool:
    start = text.rfind("\n", 0, at) + 1
    return "#" in text[start:at] and text[start:at].lstrip().startswith("#")


def _reads(text: str, name: str) -> bool:
    return re.search(r"\$\{?" + re.escape(name) + r"\b|environ(?:\.get\(|\[)\s*[\"']" + re.escape(name)
                     + r"[\"']|getenv\(\s*[\"']" + re.escape(name) + r"[\"']", text) is not None


def _workflow_env(launch: Launch, repo: Repo, extra_images) -> bool:
    """A CI workflow that runs the launcher and sets a variable it reads to a release."""
    name = launch.file.path.name
    for workflow in repo.workflows():
        text = repo.text(workflow)
        if not text or name not in text:
            continue
        found = []
        for var, value, at in _workflow_values(text):
            if not _reads(launch.file.text, var):
                continue
            release = _value_release(value, extra_images)
            if release is not None:
                found.append((release, var, value, at))
        if found:
            release, var, value, at = min(found)
            many = len({f[0] for f in found}) > 1
            where = f"{_display(workflow, repo.root)}:{_line_of(text, at)}"
            return _set(launch, release, f"{var}={value.strip()} in {where}"
                        + (" (the oldest of its matrix)" if many else ""), linked=True)
    return False


def _workflow_values(text: str):
    """(name, value, offset) of each `env:` entry and each `matrix:` value of a workflow."""
    import yaml

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return
    stack = [(root, None)]
    while stack:
        node, key = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                kv = k.value if isinstance(k, yaml.ScalarNode) else None
                if key in ("env", "matrix") and isinstance(v, yaml.ScalarNode):
                    yield kv, v.value, v.start_mark.index
                elif key == "matrix" and isinstance(v, yaml.SequenceNode):
                    for item in v.value:
                        if isinstance(item, yaml.ScalarNode):
                            yield kv, item.value, item.start_mark.index
                stack.append((v, kv))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, key) for item in node.value)


def _config_names(text: str):
    """CONFIG_NAME_RE's matches in `text`; none without a `.yml`/`.yaml`/`.json` in it (a match
    needs one, and the search tries every offset of the text: most scripts name no config)."""
    if ".yml" not in text and ".yaml" not in text and ".json" not in text:
        return ()
    return CONFIG_NAME_RE().finditer(text)


def _named_config(launch: Launch, repo: Repo, extra_images) -> bool:
    """A config file the launcher names whose `image:` is a vLLM image of a release."""
    for m in _config_names(launch.file.text):
        for base in (launch.file.path.parent, repo.root):
            path = repo.existing(base, m.group(0))
            if path is None:
                continue
            config = repo.text(path) or ""
            found = []
            for im in re.finditer(r"(?m)\bimage[\"']?\s*:\s*[\"']?(?P<v>[^\s\"',}]+)", config):
                release = _image_release(im.group("v"), extra_images)
                if release is not None:
                    found.append((release, im.group("v"), im.start("v")))
            if found:
                release, value, at = min(found)
                return _set(launch, release, f"image {value} in {_display(path, repo.root)}:{_line_of(config, at)}",
                            linked=True)
            break
    return False


# --------------------------------------------------------------------------------------------
# What the user declares: [tool.vllmlint.releases]
# --------------------------------------------------------------------------------------------
def declare(project, settings) -> None:
    """Launches still of unknown release whose path matches a `releases` glob of the settings run
    that release (a launch of a platform build keeps its reason: its tags are not vLLM's)."""
    releases = getattr(settings, "releases", None) if settings is not None else None
    if not releases:
        return
    from .config import _match, _relative

    for launch in project.launches:
        if launch.release is not None or launch.release_unnamed:
            continue            # known, or a build whose tags are not vLLM's: the user cannot override it by path
        rel = _relative(launch.file.path, settings.root)
        for pattern, version in releases.items():
            if _match(rel, pattern) or _match(launch.file.display, pattern):
                launch.release = parse_version(version)
                launch.release_from = f"setting releases {pattern!r} = {version!r} in {_shown(settings.source)}"
                break


def _shown(path: str | None) -> str:
    """A settings file as the user knows it: relative to the current folder when inside it."""
    if not path:
        return "the settings"
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path
