"""Which files to read, and what kind each one is.

Inside a git work tree the file list comes from git (so .gitignore is respected); elsewhere we
walk the tree and skip the usual vendored and cache folders.
"""
from __future__ import annotations

import os
import re
from ..model.record import record
from pathlib import Path

from ..knowledge.launchers import may_launch
from ..parsers.templates import engine_of, inner_kind
from ..model.lazyre import lazy_re

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".tox",
             ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", "site-packages"}
YAML_SUFFIXES = (".yaml", ".yml")
SHELL_SHEBANG = lazy_re(rb"^#!\s*\S*?(?:/env\s+)?(?:ba|z|da|k|a)?sh\b")
PYTHON_SHEBANG = lazy_re(rb"^#!\s*\S*?python")
MAX_SNIFF = 2048
# a template of YAML: cloud-init, a manifest, a compose file, or production-stack values (a
# Terraform `.tpl` of `servingEngineSpec:`, found on brokedba/vllm-lab), after comment lines
TEMPLATE_YAML_HEAD = lazy_re(rb"(?:[ \t]*#(?!cloud-config)[^\n]*\n|\s*\n)*\s*"
                             rb"(?:#cloud-config|apiVersion:|kind:|services:|servingEngineSpec:)")
# `dockerfile.py`, `Dockerfile.dockerignore`, `dockerfile.md`: named after Dockerfiles, not ones
NOT_DOCKERFILE = (".py", ".pyc", ".pyi", ".md", ".rst", ".adoc", ".txt", ".json", ".go", ".rs", ".js", ".ts",
                  ".dockerignore", ".html", ".toml", ".cfg", ".ini", ".lock", ".orig", ".rej", ".bak", ".swp",
                  ".diff", ".patch", ".png", ".svg")


@record(frozen=True)
class Candidate:
    """A file to check: where it is, how it is reported, and what kind of file it is."""
    path: Path        # absolute
    display: str      # as reported: the argument joined with the relative path
    kind: str         # dockerfile | yaml | shell | make | just | systemd | python | requirements | pyproject | triton
    explicit: bool = False   # named on the command line (not found by walking a folder)
    unsaved: bool = False    # an editor buffer with no file on disk yet: read from the buffer alone


def classify(path: Path, head: bytes) -> str | None:
    """Kind of a file from its name, then its first bytes. None: not a file we read."""
    name = path.name
    lower = name.lower()
    # a file named like a config is read even when it holds binary: it is reported, not skipped
    if (lower.startswith(("dockerfile", "containerfile")) and not lower.endswith(NOT_DOCKERFILE)) \
            or lower.endswith((".dockerfile", ".containerfile")):
        return "dockerfile"
    if lower.endswith(YAML_SUFFIXES) or lower.endswith((".yaml.tpl", ".yml.tpl", ".yaml.template")):
        return "yaml"
    if lower.endswith((".sh", ".bash")):
        return "shell"
    if lower in ("makefile", "gnumakefile") or lower.endswith(".mk"):
        return "make"
    if lower in ("justfile", ".justfile") or lower.endswith(".just"):
        return "just"
    if lower.endswith(SYSTEMD_SUFFIXES):
        return "systemd"        # a service unit: ExecStart= and Environment= (parsers/systemd.py)
    if lower.endswith(".py"):
        return "python"
    if re.match(r"^requirements.*\.(txt|in)$", lower):
        return "requirements"
    if lower == "pyproject.toml":
        return "pyproject"      # its `vllm==X` dependency says the release of the launches it installs
    if b"\0" in head[:MAX_SNIFF]:
        return None
    if lower == "model.json" and _triton_config(path):
        return "triton"        # Triton's vLLM backend: the engine arguments of a model (parsers/triton.py)
    if lower.endswith(NOT_SCRIPT):
        return None
    # found by their first bytes whatever their name: `run.sbatch`, `job.slurm`, `start`, and a
    # Dockerfile kept under another name (`docker/gpu.build`, `Dockerfile` renamed in a copy)
    if SHELL_SHEBANG().match(head):
        return "shell"
    if PYTHON_SHEBANG().match(head):
        return "python"
    if lower.endswith((".tpl", ".template")) and (b"apiVersion:" in head or b"services:" in head):
        return "yaml"
    if re.search(r"\.(?:ya?ml|json)\.(?:j2|jinja2?)$", lower) and may_launch(head.decode("utf-8", "replace").lower()):
        return "yaml"          # a Jinja template of YAML or JSON that shows a way vLLM is started
    if engine_of(lower) and may_launch(head.decode("utf-8", "replace").lower()):
        # a Terraform or Jinja template (`start.sh.tftpl`, `cloud-init.yaml.tftpl`, `app.py.j2`)
        # that shows a way vLLM is started: read as the kind it renders (parsers/templates.py)
        kind = inner_kind(lower) or ("yaml" if TEMPLATE_YAML_HEAD().match(head) else None)
        if kind:
            return kind
    if _looks_like_dockerfile(head):
        return "dockerfile"
    return None


# systemd service units, and the copies a repository keeps to be installed (`vllm.service.example`)
SYSTEMD_SUFFIXES = (".service", ".service.in", ".service.example", ".service.template", ".service.tmpl")
# names that are documents or data even when they start like a script or a Dockerfile
NOT_SCRIPT = (".md", ".rst", ".adoc", ".txt", ".json", ".html", ".csv", ".tsv", ".log", ".ipynb", ".xml",
              ".js", ".ts", ".go", ".rs", ".c", ".h", ".cpp", ".java", ".patch", ".diff", ".orig", ".rej")
_DOCKER_FROM = lazy_re(rb"^FROM[ \t]+(?:--platform=\S+[ \t]+)?[\w${}.:/@\-]+(?:[ \t]+AS[ \t]+[\w.\-]+)?[ \t]*\r?$",
                       re.I | re.M)
_DOCKER_FIRST = lazy_re(rb"^(?:FROM|ARG)[ \t]", re.I)
_DOCKER_OTHER = lazy_re(rb"^(?:RUN|CMD|ENTRYPOINT|ENV|COPY|ADD|WORKDIR|EXPOSE|USER|LABEL)[ \t]", re.I | re.M)


def _triton_config(path: Path):
    from ..parsers.triton import triton_config      # here: only a file named model.json needs it

    return triton_config(path)


def _looks_like_dockerfile(head: bytes) -> bool:
    """The first instruction (after comments, parser directives and blank lines) is FROM or ARG,
    a FROM line names an image, and another instruction follows."""
    for line in head.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(b"#"):
            continue
        return bool(_DOCKER_FIRST().match(stripped) and _DOCKER_FROM().search(head) and _DOCKER_OTHER().search(head))
    return False


def _git_files(root: Path) -> list[Path] | None:
    try:
        import subprocess          # only for a folder: named files need no git

        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return [root / p.decode("utf-8", "surrogateescape") for p in out.stdout.split(b"\0") if p]


def _walk(root: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            found.append(Path(dirpath) / name)
    return found


def _in_git(path: Path) -> bool:
    for parent in [path, *path.parents]:
        if (parent / ".git").exists():
            return True
    return False


def discover(arguments: list[str], explicit_kinds: bool = True) -> tuple[list[Candidate], list[str]]:
    """Files to check, and `path: reason` lines for arguments that do not exist."""
    found: dict[Path, Candidate] = {}
    errors: list[str] = []
    for arg in arguments:
        given = Path(arg)
        path = given.absolute()
        if path.is_file():
            kind = _sniff(path) if explicit_kinds else None
            if kind:        # a link named on the command line: its target is read and written
                real = path.resolve() if path.is_symlink() else path
                found.setdefault(real, Candidate(real, arg, kind, explicit=True))
            continue
        if not path.is_dir():
            errors.append(f"{arg}:0: no such file or directory")
            continue
        files = (_git_files(path) if _in_git(path) else None) or _walk(path)
        targets: set[Path] | None = None     # every regular file, resolved: what a link may point to
        for f in sorted(files):
            if any(part in SKIP_DIRS for part in f.relative_to(path).parts[:-1]):
                continue
            real = f
            if f.is_symlink():
                if not _inside(f, path):
                    continue      # never follow a link out of the tree
                real = f.resolve()   # checked (and fixed) once, as its target: the link stays a link
                if targets is None:
                    targets = {g.resolve() for g in files if not g.is_symlink()}
                if real in targets:
                    continue
            if not f.is_file():
                continue
            kind = _sniff(f)
            if kind:
                rel = f.relative_to(path).as_posix()
                display = rel if arg in (".", "./") else f"{arg.rstrip('/')}/{rel}"
                found.setdefault(real, Candidate(real, display, kind))
    return sorted(found.values(), key=lambda c: c.display), errors


def _inside(link: Path, root: Path) -> bool:
    try:
        link.resolve().relative_to(root.resolve())
        return True
    except (ValueError, OSError):
        return False


def _sniff(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(MAX_SNIFF)
    except OSError:
        return None
    return classify(path, head)
