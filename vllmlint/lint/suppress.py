"""Suppressions: in the file, on the workload, or in the config.

    vllm serve m --port 8000  # vllmlint: disable=VL002 -- the router is being retired
    # vllmlint: disable=VL101 -- replay shows no mismatch for our clients
    # vllmlint: disable-file=VL201
    metadata: {annotations: {vllmlint.io/ignore: "VL101"}}     (Kubernetes, the whole resource)

A directive on a line of its own applies to the next line; at the end of a line, to that line.
Every file kind vllmlint reads uses `#` comments, so one syntax serves all five.
"""
from __future__ import annotations

from ..model.record import field, record

from ..model.launch import OPTIONS_FILE_KIND, Finding, SourceFile
from ..model.lazyre import lazy_re

DIRECTIVE_RE = lazy_re(
    r"#\s*vllmlint:\s*(?P<kind>disable-file|disable)\s*=\s*(?P<codes>[A-Za-z0-9_,\s]+?)\s*(?:--\s*(?P<reason>.*?))?\s*$")


@record
class Directive:
    """A `# vllmlint: disable=...` comment: the codes it silences, and where."""
    file: SourceFile
    line: int                 # the line the directive is written on
    applies_to: int | None    # the line it covers; None: the whole file
    codes: list[str]
    reason: str
    span: tuple[int, int]     # the comment, for the unused-suppression fix
    used: set[str] = field(default_factory=set)


def directives(source: SourceFile) -> list[Directive]:
    found: list[Directive] = []
    if "vllmlint:" not in source.text:
        return found
    offset = 0
    for number, line in enumerate(source.text.splitlines(keepends=True), 1):
        m = DIRECTIVE_RE().search(line.rstrip("\r\n"))
        if m:
            codes = [c.strip().upper() for c in m.group("codes").split(",") if c.strip()]
            own_line = not line[:m.start()].strip()
            applies = None if m.group("kind") == "disable-file" else (number + 1 if own_line else number)
            found.append(Directive(source, number, applies, codes, (m.group("reason") or "").strip(),
                                   (offset + m.start(), offset + len(line.rstrip("\r\n")))))
        offset += len(line)
    return found


@record
class Suppressed:
    """A finding that was silenced, and by what."""
    finding: Finding
    reason: str
    how: str                  # "comment" | "annotation" | "config"


def apply(findings: list[Finding], dirs: list[Directive], ranges, per_file) -> tuple[list[Finding], list[Suppressed]]:
    """Split findings into kept and suppressed. `ranges`: (file, start, end, codes, reason) from
    Kubernetes annotations; `per_file(finding) -> codes` from the config."""
    by_file: dict[int, list[Directive]] = {}
    by_path: dict = {}
    for d in dirs:
        by_file.setdefault(id(d.file), []).append(d)
        by_path.setdefault(d.file.path, []).append(d)
    kept, gone = [], []
    for f in findings:
        line = f.line_col[0]
        hit = None
        # an options file (`--config FILE`, parsers.options_file) is read again for its launch:
        # the comments that count are those of the tree's own reading of that file
        mine = by_file.get(id(f.file)) or (by_path.get(f.file.path, []) if f.file.kind == OPTIONS_FILE_KIND else [])
        for d in mine:
            if (d.applies_to is None or d.applies_to == line) and _matches(f.code, d.codes):
                d.used.add(f.code)
                hit = Suppressed(f, d.reason, "comment")
                break
        if hit is None:
            for file, start, end, codes, reason in ranges:
                if file is f.file and start <= f.span[0] < end and _matches(f.code, codes):
                    hit = Suppressed(f, reason, "annotation")
                    break
        if hit is None and _matches(f.code, per_file(f)):
            hit = Suppressed(f, "per-file-ignores in the config", "config")
        (gone if hit else kept).append(hit or f)
    return kept, gone


def _matches(code: str, codes: list[str]) -> bool:
    return any(c == "ALL" or code.startswith(c) for c in codes)
