"""What every `--fix` (and `migrate`) must guarantee, checked from the outside.

Shared by tests/test_invariants.py and tests/test_fuzz.py.

How "bytes outside the edit spans are identical" is decided
-----------------------------------------------------------
`EditRecorder` wraps `vllmlint.lint.engine.apply_edits`, the one function that turns span edits into
new text, and records every call: the text it was given, the edits, and the text it returned.
Calls whose result was dropped (the re-parse refused it) are recognised because the next call on
that file starts again from the same text. For the accepted calls of one file, in order, every
edit span is mapped back to a span of the *original* text (through the edits of the earlier
passes), which gives the set of original regions a fix was allowed to touch. Every region of the
original outside that set is then mapped forward to the file *as written on disk* (decoded, BOM
removed) and must be found there unchanged, in order. So the check reads the real bytes that
were written - encoding, BOM, line endings, the rename - and only trusts the engine for where
it said it would edit, never for what it wrote. A file that changed without any recorded edit
fails outright.
"""
from __future__ import annotations

import codecs
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from vllmlint.lint import engine
from vllmlint.model.launch import ParseError, SourceFile


@dataclass
class Applied:
    path: Path
    before: str
    edits: list[tuple[int, int, str]]
    after: str


@dataclass
class EditRecorder:
    calls: list[Applied] = field(default_factory=list)

    def install(self, monkeypatch) -> "EditRecorder":
        real = engine.apply_edits

        def recording(text, edits):
            out = real(text, edits)
            if edits:
                self.calls.append(Applied(edits[0].file.path, text,
                                          [(e.start, e.end, e.text) for e in edits], out))
            return out

        monkeypatch.setattr(engine, "apply_edits", recording)
        return self

    def for_path(self, path: Path) -> list[Applied]:
        return [c for c in self.calls if c.path == path]


def snapshot(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def modes(root: Path) -> dict[Path, int]:
    return {p: stat.S_IMODE(p.lstat().st_mode) for p in sorted(root.rglob("*"))}


def _decode(raw: bytes) -> tuple[str, bool]:
    bom = raw.startswith(codecs.BOM_UTF8)
    return raw[3:].decode("utf-8") if bom else raw.decode("utf-8"), bom


def _back(p: int, edits: list[tuple[int, int, str]], side: str) -> int:
    """Position `p` of the text after `edits` -> position in the text before them. A position
    inside (or on the edge of) a replacement maps to the edge of the span it replaced."""
    shift = 0
    for start, end, text in sorted(edits):
        new_start = start + shift
        new_end = new_start + len(text)
        if p < new_start:
            return p - shift
        if p <= new_end:
            return start if side == "lo" else end
        shift += len(text) - (end - start)
    return p - shift


def _forward(p: int, edits: list[tuple[int, int, str]], side: str) -> int:
    """Position `p` of the text before `edits` (never strictly inside an edited span) -> the same
    place after them. An insertion at `p` lies before a region that starts at `p` and after a
    region that ends at `p`."""
    shift = 0
    for start, end, text in edits:
        if end < p or (end == p and (side == "lo" or start < end)):
            shift += len(text) - (end - start)
    return p + shift


def touched_and_final_map(original: str, calls: list[Applied], final: str):
    """The accepted edit chain: (touched spans of the original, [edits of each accepted pass])."""
    chain: list[list[tuple[int, int, str]]] = []
    touched: list[tuple[int, int]] = []
    current = original
    for i, call in enumerate(calls):
        if call.before == original != current:
            # migrate ran its chain again from the tree (lint.migrate.migrate_chain: a tag kept
            # while an error is left for a human): what is written is the last run's
            chain, touched, current = [], [], original
        assert call.before == current, "a fix was computed on a text that is not the file's current text"
        if call.after == call.before:
            continue
        nxt = calls[i + 1] if i + 1 < len(calls) else None
        accepted = (nxt.before == call.after) if nxt is not None else (final == call.after)
        if not accepted:
            continue
        for start, end, _ in call.edits:
            lo, hi = start, end
            for earlier in reversed(chain):
                lo, hi = _back(lo, earlier, "lo"), _back(hi, earlier, "hi")
            touched.append((lo, hi))
        chain.append(sorted(call.edits))
        current = call.after
    assert current == final, "the file on disk is not what the accepted edits produced"
    return touched, chain


def untouched_regions(length: int, touched: list[tuple[int, int]]) -> list[tuple[int, int]]:
    cuts = sorted(touched)
    out, pos = [], 0
    for lo, hi in cuts:
        if lo > pos:
            out.append((pos, lo))
        pos = max(pos, hi)
    if pos < length:
        out.append((pos, length))
    # an insertion (empty span) inside a region splits it
    points = sorted({lo for lo, hi in touched if lo == hi})
    split = []
    for lo, hi in out:
        inner = [p for p in points if lo < p < hi]
        bounds = [lo, *inner, hi]
        split.extend(zip(bounds, bounds[1:]))
    return split


def check_outside_edits(original: str, final: str, calls: list[Applied]) -> None:
    touched, chain = touched_and_final_map(original, calls, final)
    last = 0
    for lo, hi in untouched_regions(len(original), touched):
        flo, fhi = lo, hi
        for edits in chain:
            flo, fhi = _forward(flo, edits, "lo"), _forward(fhi, edits, "hi")
        assert fhi - flo == hi - lo and flo >= last, f"region {lo}:{hi} moved inconsistently"
        assert final[flo:fhi] == original[lo:hi], (
            f"bytes outside the edits changed near offset {lo}: {original[lo:hi][:80]!r} -> {final[flo:fhi][:80]!r}")
        last = fhi


def _indent_chars(text: str) -> set[str]:
    chars: set[str] = set()
    for line in text.splitlines():
        lead = line[:len(line) - len(line.lstrip(" \t"))]
        chars.update(lead)
    return chars


def check_style(original: str, final: str, display: str) -> None:
    """Line endings, trailing newline and indentation style survive a fix."""
    if "\r\n" in original and "\n" not in original.replace("\r\n", ""):
        assert "\n" not in final.replace("\r\n", ""), f"{display}: a CRLF file got a bare LF"
    if "\r" not in original:
        assert "\r" not in final, f"{display}: an LF file got a CR"
    if original:
        assert original.endswith("\n") == final.endswith("\n"), f"{display}: trailing newline changed"
    orig_lines = set(original.splitlines())
    new_lines = [l for l in final.splitlines() if l not in orig_lines]
    used = _indent_chars(original)
    if used:
        for line in new_lines:
            lead = set(line[:len(line) - len(line.lstrip(" \t"))])
            assert lead <= used, f"{display}: a new line is indented with {lead - used} the file never uses: {line!r}"


def check_parses(path: Path, text: str, kind: str) -> None:
    from vllmlint.lint.project import parse_source

    try:
        parse_source(SourceFile(path, str(path), text, kind))
    except ParseError as err:
        raise AssertionError(f"{path}: the fixed file no longer parses: line {err.line}: {err.reason}") from None


def check_fix_invariants(before: dict[Path, bytes], after: dict[Path, bytes], recorder: EditRecorder,
                         mode_before: dict[Path, int] | None = None, kinds: dict[Path, str] | None = None) -> int:
    """Every invariant of a fix run over one tree. Returns how many files changed."""
    assert set(after) == set(before), f"files appeared or vanished: {set(after) ^ set(before)}"
    changed = 0
    for path, old in before.items():
        new = after[path]
        calls = recorder.for_path(path)
        if new == old:
            continue
        changed += 1
        assert calls, f"{path} changed but no edit was recorded for it"
        old_text, old_bom = _decode(old)
        new_text, new_bom = _decode(new)
        assert old_bom == new_bom, f"{path}: BOM lost or added"
        check_outside_edits(old_text, new_text, calls)
        check_style(old_text, new_text, str(path))
        if kinds and path in kinds:
            check_parses(path, new_text, kinds[path])
    if mode_before is not None:
        for path, mode in mode_before.items():
            if path.exists() or path.is_symlink():
                assert stat.S_IMODE(path.lstat().st_mode) == mode, f"{path}: mode changed"
    return changed


def leftover_temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".vllmlint")]


def kinds_of(root: Path) -> dict[Path, str]:
    from vllmlint.lint.discovery import discover

    candidates, _ = discover([str(root)])
    return {c.path: c.kind for c in candidates if c.kind != "requirements"}


def writable_copy(src: Path, dst: Path) -> Path:
    """Copy a tree keeping symlinks, with every file writable (the corpus is read-only)."""
    import shutil

    shutil.copytree(src, dst, symlinks=True, copy_function=shutil.copyfile)
    for p in dst.rglob("*"):
        if p.is_file() and not p.is_symlink():
            os.chmod(p, 0o644)
    return dst
