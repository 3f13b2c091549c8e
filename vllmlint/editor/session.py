"""One workspace folder linted as `vllmlint check` lints it, with open buffers in place of disk.

Everything here is the engine's: discovery picks the files, `lint.project.load` reads them (an
open buffer's text overrides the file's), `lint.engine` runs the rules and their fixes. This
module only chooses what to run on and turns offsets into LSP positions (line, code units).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..knowledge.versions import parse_version
from ..lint.config import ConfigError, Settings, load_settings
from ..lint.discovery import MAX_SNIFF, Candidate, classify, discover
from ..lint.engine import Outcome, _keep_no_final_newline, apply_edits, check_and_fix
from ..lint.project import ParseCache, Problem, parse_source
from ..lint.registry import selected_rules
from ..model.launch import Edit, Finding, SourceFile
from ..model.record import replace

LINE_BREAK = re.compile(r"\r\n|\r|\n")      # LSP's line breaks: no more (str.splitlines has eight)


# -- positions ----------------------------------------------------------------------------
def line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in LINE_BREAK.finditer(text)]


def utf16_units(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def units_of(encoding: str):
    if encoding == "utf-8":
        return lambda s: len(s.encode("utf-8"))
    if encoding == "utf-32":
        return len
    return utf16_units


def to_position(text: str, offset: int, units=utf16_units, starts: list[int] | None = None) -> tuple[int, int]:
    """(line, character) of a character offset; character in the client's code units."""
    import bisect

    starts = starts or line_starts(text)
    line = bisect.bisect_right(starts, offset) - 1
    return line, units(text[starts[line]:offset])


def line_bounds(text: str, first: int, last: int, starts: list[int] | None = None) -> tuple[int, int]:
    """Offsets of the start of line `first` and the end of line `last` (before its line break)."""
    starts = starts or line_starts(text)
    lo = starts[min(first, len(starts) - 1)]
    end_line = min(last, len(starts) - 1)
    hi = starts[end_line + 1] if end_line + 1 < len(starts) else len(text)
    while hi > lo and text[hi - 1] in "\r\n":
        hi -= 1
    return lo, hi


def to_offset(text: str, line: int, character: int, units=utf16_units, starts: list[int] | None = None) -> int:
    starts = starts or line_starts(text)
    if line >= len(starts):
        return len(text)
    start = starts[line]
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    seen = 0
    for i in range(start, end):
        if seen >= character or text[i] in "\r\n":
            return i
        seen += units(text[i])
    return end


# -- settings and candidates ---------------------------------------------------------------
@dataclass
class Config:
    settings: Settings
    rules: list
    error: str | None = None        # a bad settings file: reported, defaults used


def load_config(root: Path | None) -> Config:
    """The settings `vllmlint check` would use when run in `root`: [tool.vllmlint] in
    pyproject.toml or .vllmlint.toml, searched upwards."""
    error = None
    try:
        settings = load_settings(root or Path.cwd())
    except ConfigError as err:
        settings, error = Settings(), str(err)
    if root is not None and settings.source is None:
        settings.root = root
    try:
        target = parse_version(settings.target_version)
    except ValueError as err:
        error = f"{settings.source}: {err}"
        settings.target_version = "0.30.0"
        target = parse_version(settings.target_version)
    options = {"topology": settings.topology, "model_config": settings.model_config,
               "prompt_tokens": settings.prompt_tokens, "target_explicit": settings.target_explicit}
    return Config(settings, list(selected_rules(target, settings.select, settings.ignore, options)), error)


def kind_of(path: Path, text: str) -> str | None:
    return classify(path, text.encode("utf-8", "surrogatepass")[:MAX_SNIFF])


def candidates_for(root: Path | None, overrides: dict[Path, str], settings: Settings) -> list[Candidate]:
    """What `vllmlint check` in `root` reads (displays relative to it), with the open buffers:
    a buffer decides its own kind (a shebang just typed counts), a new buffer not on disk yet is
    read too. Without a root: the open buffers alone."""
    found: dict[Path, Candidate] = {}
    if root is not None:
        for cand in discover([str(root)])[0]:
            rel = _relative(cand.path, root)
            found[cand.path] = replace(cand, display=rel)
    for path, text in overrides.items():
        if root is not None and not _inside(path, root):
            continue
        if root is not None and path not in found and path.is_file() and _disk_kind(path) is not None:
            continue      # on disk, of a kind we read, and still not found: ignored (.gitignore, .venv)
        kind = kind_of(path, text)
        if kind is None:
            found.pop(path, None)
        else:
            display = _relative(path, root) if root is not None else str(path)
            found[path] = Candidate(path, found[path].display if path in found else display, kind,
                                    unsaved=not path.exists())
    if root is None:
        found = {p: c for p, c in found.items() if p in overrides}
    return sorted((c for c in found.values() if not (settings.exclude and settings.excluded(c.display, c.path))),
                  key=lambda c: c.display)


def _disk_kind(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            return classify(path, fh.read(MAX_SNIFF))
    except OSError:
        return None


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


# -- a run ---------------------------------------------------------------------------------
@dataclass
class Run:
    """One run over a folder: findings and problems by absolute path, and every file's text."""

    root: Path | None
    findings: dict[Path, list[Finding]] = field(default_factory=dict)
    problems: dict[Path, list[Problem]] = field(default_factory=dict)
    sources: dict[Path, SourceFile] = field(default_factory=dict)
    overrides: dict[Path, str] = field(default_factory=dict)       # the buffers it ran on
    config_error: str | None = None
    other_problems: list[str] = field(default_factory=list)        # not tied to a file (a rule's bug)

    def paths(self) -> set[Path]:
        return set(self.findings) | set(self.problems)


class Workspace:
    """A workspace folder (or None: files opened outside any folder). Parsed files are cached
    across runs, so a keystroke re-parses only the buffer that changed."""

    def __init__(self, root: Path | None):
        self.root = root
        self.cache = ParseCache()

    def _prepare(self, overrides: dict[Path, str]):
        config = load_config(self.root)
        return config, candidates_for(self.root, overrides, config.settings)

    def check(self, overrides: dict[Path, str]) -> Run:
        """Findings as `check` reports them; fixes kept on the findings, unsafe ones too (the
        editor offers them marked), withheld the way `check` withholds them."""
        config, cands = self._prepare(overrides)
        outcome = check_and_fix(cands, config.rules, fix=False, unsafe=True, settings=config.settings,
                                cache=self.cache, buffers=overrides)
        run = Run(self.root, overrides=dict(overrides), config_error=config.error)
        by_display = {c.display: c.path for c in cands}
        for source in outcome.project.sources:       # parsed files and the ones only read (requirements)
            run.sources.setdefault(source.path, source)
        for f in outcome.findings:
            run.findings.setdefault(f.file.path, []).append(f)
        for p in outcome.problems:
            path = by_display.get(p.display)
            if path is None:
                run.other_problems.append(str(p))
            else:
                run.problems.setdefault(path, []).append(p)
        return run

    def fix_all(self, overrides: dict[Path, str], path: Path) -> tuple[str, str] | None:
        """(text now, text after `check --fix`) of one file: the safe fixes, every pass of them,
        exactly as `vllmlint check --fix` would write them. None: nothing to change there."""
        config, cands = self._prepare(overrides)
        outcome: Outcome = check_and_fix(cands, config.rules, fix=True, settings=config.settings,
                                         cache=self.cache, buffers=overrides)
        changed = outcome.changed().get(path)
        if changed is None:
            return None
        orig, new = changed
        return orig.text, new


# -- edits ---------------------------------------------------------------------------------
def fix_edits(finding: Finding) -> dict[Path, tuple[SourceFile, list[Edit]]]:
    """A finding's fix as edits per file, as the engine applies them."""
    out: dict[Path, tuple[SourceFile, list[Edit]]] = {}
    for edit in finding.fix.edits if finding.fix else []:
        source, edits = out.setdefault(edit.file.path, (edit.file, []))
        if edit.key() not in {e.key() for e in edits}:
            edits.append(edit)
    return {p: (s, _keep_no_final_newline(s.text, e)) for p, (s, e) in out.items()}


def minimal_edit(old: str, new: str) -> tuple[int, int, str]:
    """One replacement turning `old` into `new`: (start, end in old, text)."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    return start, end_old, new[start:end_new]


SUPPRESS_PLACEHOLDER = "TODO: say why"
_DIRECTIVE_LINE = re.compile(r"#!|#\s*(?:syntax|escape|check)\s*=|#.*coding[:=]", re.I)


def suppress_edit(finding: Finding, reason: str = SUPPRESS_PLACEHOLDER) -> tuple[Edit, str] | None:
    """The suppression comment for one finding (`# vllmlint: disable=CODE -- reason`, the one
    form every file kind vllmlint reads takes, lint/suppress.py), placed where it changes nothing
    else: on its own line above the finding's line, else at the end of that line, else as
    `disable-file` at the top. A place is taken only if the file still parses to the same
    launches and env settings and the directive covers the finding. (edit, where) or None."""
    from ..lint import suppress
    from ..lint.registry import load_rules

    rule = load_rules().get(finding.code)
    if rule is not None and getattr(rule, "post", False):
        return None           # VL900 judges the suppressions themselves: its fix removes the comment
    source = finding.file
    text = source.text
    starts = line_starts(text)
    line = finding.line_col[0] - 1
    if line >= len(starts):
        return None
    begin = starts[line]
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    body = text[begin:end]
    eol_match = re.search(r"(?:\r\n|\r|\n)$", body)
    eol = eol_match.group(0) if eol_match else ("\r\n" if "\r\n" in text else "\n")
    content = body[:eol_match.start()] if eol_match else body
    indent = content[:len(content) - len(content.lstrip(" \t"))]
    comment = f"# vllmlint: disable={finding.code} -- {reason}"
    first = 0        # after a shebang, Dockerfile parser directives, a coding line
    while first < len(text) and _DIRECTIVE_LINE.match(text, first):
        nxt = LINE_BREAK.search(text, first)
        first = nxt.end() if nxt else len(text)
    places = [
        ("line above", Edit(source, begin, begin, f"{indent}{comment}{eol}"), finding.line_col[0] + 1),
        ("end of line", Edit(source, begin + len(content), begin + len(content), f"  {comment}"),
         finding.line_col[0]),
        ("whole file", Edit(source, first, first,
                            f"# vllmlint: disable-file={finding.code} -- {reason}{eol}"), None),
    ]
    before = _signature(source, text)
    if before is None:
        return None
    for where, edit, covers in places:
        new_text = apply_edits(text, [edit])
        probe = SourceFile(source.path, source.display, new_text, source.kind, source.bom)
        if _signature(source, new_text) != before:
            continue
        if any(d.applies_to == covers and finding.code in d.codes for d in suppress.directives(probe)):
            return edit, where
    return None


def _signature(source: SourceFile, text: str):
    """What the file means to vLLM: its launches (argv, env, image) and env settings; for YAML
    also the documents' data. None: it does not parse."""
    probe = SourceFile(source.path, source.display, text, source.kind, source.bom)
    try:
        parsed = parse_source(probe)
    except Exception:
        return None
    if parsed is None:
        return ()
    launches = tuple((l.kind, tuple(a.value for a in l.argv), tuple((e.name, e.value) for e in l.env), l.image)
                     for l in parsed.launches)
    env = tuple((e.name, e.value) for e in parsed.env)
    data = None
    if source.kind in ("yaml", "compose", "k8s"):
        import yaml

        try:
            data = repr(list(yaml.safe_load_all(text)))
        except yaml.YAMLError:
            data = "unreadable"
    return launches, env, data
