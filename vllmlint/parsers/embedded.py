"""One door for embedded content: text of one kind written inside a file of another.

Shell in YAML (`command: [sh, -c, ...]`, block scalars), heredocs, `bash -c` strings, Python
strings given to a shell, a ConfigMap's `data:` entries, templates: a front end that meets such
text hands it here with its kind (or None: guess from the content), where it lies in the outer
file and what it inherits there (`Inherited`: image, env, container). The reader of that kind
reads it on the outer file's own text (everything else blanked, so every offset, finding and fix
is the outer file's) and what it finds comes back bound to the outer file.

Front ends import this module, never each other: each registers its readers here when it is
imported (`register`, `register_shell`). The door imports a front end the first time content of
its kind arrives (`HOMES`), so the table is full whatever a caller imported first, and a one-file
check imports only the front ends that file needs (no YAML library for a Dockerfile: start-up,
docs/development/startup.md). A new embedding is a call of `read()`; a new kind is one
`register()` in its front end and its module named in `HOMES`.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from ..model.launch import AppendSite, EnvEntry, ParsedFile, ParseError, SourceFile
from ..model.record import field, record, replace
from ..model.lazyre import lazy_re


@record
class Inherited:
    """What embedded content gets from where it sits: the container it runs in (its image and
    env), how launches found in it are named, and the shell variables known around it."""
    image: str | None = None
    env: list[EnvEntry] = field(default_factory=list)
    context: str = ""            # "container vllm (Deployment/llm)"; "" : the reader's own
    group: str = ""              # deployment unit of its launches; "" : the reader's own
    via: str = ""                # prefixed to each launch's `via` ("ConfigMap serve, key run.py")
    expands: bool = False        # an unquoted heredoc: `\\$` is `$` in what the file holds


# kind -> reader(view, start, end, inherited): `view` is the outer file with everything outside
# [start, end) blanked; the reader returns what it found on `view`.
Reader = Callable[[SourceFile, int, int, Inherited], ParsedFile]
_READERS: dict[str, Reader] = {}
# the shell front end's fragment readers (an offset map per character, not a blanked view)
_SHELL: dict[str, Callable] = {}
# kind -> the front end (a module of this package) that registers its reader when imported
HOMES = {"yaml": "yamlfile", "dockerfile": "dockerfile", "python": "pythonfile", "shell": "shellscan",
         "apptainer": "heredoc"}


def _reader(kind: str) -> Reader | None:
    """The reader of `kind`, its front end imported on first use; None: no such kind."""
    reader = _READERS.get(kind)
    if reader is None and kind in HOMES:
        import importlib

        importlib.import_module(f"{__package__}.{HOMES[kind]}")
        reader = _READERS.get(kind)
    return reader


def _shell(name: str) -> Callable:
    if not _SHELL:
        _reader("shell")
    return _SHELL[name]


class Shift:
    """Identity mapping plus a base offset, without a list per character: the offset map of text
    that lies contiguous in the file (`omap[i]` is the file offset of character i)."""

    def __init__(self, base: int = 0):
        self.base = base

    def __getitem__(self, i: int) -> int:
        return self.base + i


def register(kind: str, reader: Reader) -> None:
    _READERS[kind] = reader


def register_shell(scan: Callable, words: Callable) -> None:
    """The shell front end: `scan(file, text, omap, **context)` reads a script whose characters lie
    at `omap[i]` of the file; `words(file, text, omap)` splits one command line."""
    _SHELL["scan"], _SHELL["words"] = scan, words


def kinds() -> list[str]:
    for kind in HOMES:
        _reader(kind)
    return sorted(_READERS)


class MappedText:
    """Text of another kind built piece by piece from a file, with the file offset of every
    character (recipe lines, a unit's command line): what `scan_shell` takes as `omap`."""

    def __init__(self) -> None:
        self.chars: list[str] = []
        self.omap: list[int] = []

    def add(self, text: str, offset: int) -> None:
        self.chars.extend(text)
        self.omap.extend(range(offset, offset + len(text)))

    def put(self, text: str, at: int) -> None:
        self.chars.extend(text)
        self.omap.extend([at] * len(text))

    def stretch(self, text: str, start: int, end: int) -> None:
        """`text` stands for file[start:end]: first and last characters map to its ends."""
        n = len(text)
        self.chars.extend(text)
        self.omap.extend(start if i < n - 1 else end - 1 for i in range(n))

    @property
    def text(self) -> str:
        return "".join(self.chars)

    def empty(self) -> bool:
        return not self.chars


def lines_with_offsets(text: str):
    """(start offset, line without its newline) for every line."""
    pos = 0
    for raw in text.splitlines(keepends=True):
        body = raw.rstrip("\r\n")
        yield pos, body, pos + len(raw)
        pos += len(raw)


def scan_shell(file: SourceFile, text: str, omap=None, **context):
    """A shell fragment (a YAML string, a RUN line, a Python string given to a shell): its launches
    and env (parsers.shellscan.ShellScan)."""
    return _shell("scan")(file, text, omap, **context)


def split_words(file: SourceFile, text: str, omap):
    return _shell("words")(file, text, omap)


PYTHON_HINT_RE = lazy_re(r"^(?:from[ \t]+[\w.]+[ \t]+import[ \t]|import[ \t]+[\w.]+|def[ \t]+\w+\(|"
                            r"if __name__ == |@\w+)", re.M)
SHELL_HINT_RE = lazy_re(r"^(?:set -\w+|exec[ \t]|export[ \t]+\w+=|\w+=\S*$|echo[ \t]|cd[ \t]|"
                           r"(?:\S*/)?(?:vllm|python[\d.]*|uv|docker|podman)[ \t])", re.M)


def guess_kind(text: str, name: str = "") -> str | None:
    """The kind of an embedded text from its name (`serve.py`, `start.sh`), else its shebang,
    else its first lines: "python", "shell", "yaml", "dockerfile" or None."""
    lower = name.lower()
    if lower.endswith(".py"):
        return "python"
    if lower.endswith((".sh", ".bash")):
        return "shell"
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    head = text.lstrip()[:4096]
    if head.startswith("#!"):
        words = [w.rsplit("/", 1)[-1] for w in head[2:].split("\n", 1)[0].split()]
        if words and words[0] == "env":
            words = [w for w in words[1:] if not w.startswith("-")]
        prog = words[0] if words else ""
        if prog.startswith("python"):
            return "python"
        if prog in ("sh", "bash", "zsh", "dash", "ash", "ksh"):
            return "shell"
        return None
    if re.match(r"(?:apiVersion|kind)\s*:", head):
        return "yaml"
    if re.match(r"FROM\s+\S", head):              # (lower case: Python's `from x import y`)
        return "dockerfile"
    if PYTHON_HINT_RE().search(head):
        return "python"
    if SHELL_HINT_RE().search(head):
        return "shell"
    return None


def blanked(text: str, start: int, end: int) -> str:
    """`text` with everything outside [start, end) turned to blanks (line breaks kept)."""
    blank = lambda s: re.sub(r"[^\r\n]", " ", s)     # noqa: E731
    return blank(text[:start]) + text[start:end] + blank(text[end:])


def read(file: SourceFile, kind: str | None, start: int, end: int,
         inherited: Inherited | None = None, name: str = "") -> ParsedFile | None:
    """Read file.text[start:end] as `kind` (None: guessed from `name` and the content); what is
    found comes back bound to `file`. None: no reader for that kind, or the text is not what it
    looked like (an embedded text that does not parse is never an error of the outer file)."""
    inherited = inherited or Inherited()
    if kind is None:
        kind = guess_kind(file.text[start:end], name)
    reader = _reader(kind or "")
    if reader is None:
        return None
    view = SourceFile(file.path, file.display, blanked(file.text, start, end), file.kind, file.bom)
    try:
        parsed = reader(view, start, end, inherited)
    except Exception:           # a body that is not what it looked like: nothing to read
        return None
    parsed = rebind(parsed, view, file)
    inherit(parsed, inherited)
    return parsed


def read_view(file: SourceFile, kind: str, text: str, inherited: Inherited | None = None) -> ParsedFile | None:
    """Read `text`, a same-length stand-in for all of file.text (a template with its directives
    blanked), as `kind`; what is found comes back bound to `file`. A whole file that does not
    parse raises the reader's ParseError (`path:line: why`), as the file itself would."""
    reader = _reader(kind)
    if reader is None or len(text) != len(file.text):
        return None
    inherited = inherited or Inherited()
    view = SourceFile(file.path, file.display, text, kind, file.bom)
    try:
        parsed = reader(view, 0, len(text), inherited)
    except ParseError:
        raise
    except Exception:
        return None
    parsed = rebind(parsed, view, file)
    inherit(parsed, inherited)
    return parsed


def inherit(parsed: ParsedFile, inherited: Inherited) -> None:
    """Launches of a script run in a container get its image and env (their own env wins)."""
    for launch in parsed.launches:
        if inherited.image and not launch.image:
            launch.image = inherited.image
        if inherited.env:
            own = {e.name for e in launch.env}
            launch.env = [e for e in inherited.env if e.name not in own] + launch.env
        if inherited.context:
            launch.context = inherited.context
        if inherited.group:
            launch.group = inherited.group
        if inherited.via:
            launch.via = inherited.via + (f"; {launch.via}" if launch.via else "")


def rebind(parsed: ParsedFile, view: SourceFile, file: SourceFile) -> ParsedFile:
    """Everything that points at `view` points at `file` instead (same offsets)."""
    def edits(found):
        return None if found is None else [replace(e, file=file) if e.file is view else e for e in found]

    def env(entry: EnvEntry) -> EnvEntry:
        if entry.file is view:
            entry.file = file
            entry.removal = edits(entry.removal)
        return entry

    for entry in parsed.env:
        env(entry)
    for entries in parsed.configmaps.values():
        for entry in entries:
            env(entry)
    for launch in parsed.launches:
        if launch.file is view:
            launch.file = file
        for arg in launch.argv:
            if arg.file is view:
                arg.file = file
        launch.env = [env(e) for e in launch.env]
        site = launch.append_site
        if isinstance(site, AppendSite) and site.file is view:
            launch.append_site = replace(site, file=file)     # its own kind kept (a Python keyword site)
    parsed.source = file
    return parsed
