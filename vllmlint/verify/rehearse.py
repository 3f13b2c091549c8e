"""Upgrade rehearsal on real vLLM releases.

`verify_matrix`: the same deployment verified on several releases (one cached venv each, see
releases.py), as a matrix release x probe -> pass/fail (`verify --vllm-version 0.29.0,0.30.0`).

`rehearse_migration` (`migrate --to X --verify`): verify the tree on the release it pins (it must
pass there: a failure is reported first and the rehearsal stops), migrate a copy in a temporary
folder, verify the copy on the target. The caller writes the migration to the real tree only when
the target passed.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .releases import Refused, check_release, ensure
from .runner import EXIT_OK, EXIT_START, Outcome, Verifier

COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", ".vllm-venv", "node_modules", "__pycache__", ".tox")


@dataclass
class Column:
    release: str
    outcome: Outcome | None = None
    error: str | None = None            # refused / install failed: nothing ran
    path: str | None = None             # the tree verified: row names are relative to it
    path_is_dir: bool | None = None     # noted when verified (a rehearsal's copy is gone by the report)

    def _rel(self, name: str) -> str:
        """`/tmp/x/deploy/compose.yaml:17 service llm` -> `compose.yaml:17 service llm`, so that a
        tree and its migrated copy share rows."""
        if not self.path:
            return name
        for root in sorted({self.path, str(Path(self.path).absolute())}, key=len, reverse=True):
            root = root.rstrip("/")
            if self.path_is_dir if self.path_is_dir is not None else Path(root).is_dir():
                name = name.replace(root + "/", "")
            else:
                name = name.replace(root, Path(root).name)
        return name

    @property
    def exit_code(self) -> int:
        return EXIT_START if self.error else self.outcome.exit_code

    def cells(self) -> dict[str, bool]:
        """Row name -> passed, in report order."""
        out: dict[str, bool] = {}
        if self.outcome is None:
            return out
        for unit in self.outcome.units:
            for s in unit.servers:
                name = self._rel(s.plan.name)
                out[f"{name}: starts"] = s.healthy_s is not None and not s.error_line
                for p in s.probes:
                    out[f"{name}: {p.name}"] = p.ok
            for p in unit.probes:
                out[f"{self._rel(unit.name)}: {p.name}"] = p.ok
        return out

    def as_dict(self) -> dict:
        return {"release": self.release, "error": self.error, "exit_code": self.exit_code,
                "cells": self.cells(), "verify": self.outcome.as_dict() if self.outcome else None}


@dataclass
class Matrix:
    path: str
    columns: list[Column] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return max((c.exit_code for c in self.columns), default=EXIT_OK)

    def rows(self) -> list[str]:
        rows: list[str] = []
        for c in self.columns:
            rows += [r for r in c.cells() if r not in rows]
        return rows

    def as_dict(self) -> dict:
        return {"path": self.path, "exit_code": self.exit_code, "seconds": round(self.seconds, 1),
                "releases": [c.release for c in self.columns], "rows": self.rows(),
                "columns": [c.as_dict() for c in self.columns]}

    def text(self) -> str:
        rows = self.rows()
        heads = [c.release for c in self.columns]
        width = max([len("probe")] + [len(r) for r in rows])
        colw = [max(len(h), 4) for h in heads]
        lines = [f"upgrade rehearsal: {self.path}", "",
                 "  ".join(["probe".ljust(width)] + [h.ljust(w) for h, w in zip(heads, colw)])]
        for r in rows:
            marks = []
            for c, w in zip(self.columns, colw):
                cells = c.cells()
                marks.append(("-" if r not in cells else "pass" if cells[r] else "FAIL").ljust(w))
            lines.append("  ".join([r.ljust(width)] + marks).rstrip())
        lines.append("")
        for c in self.columns:
            if c.error:
                lines.append(f"not run on {c.release}: {c.error}")
                continue
            o = c.outcome
            failed = [(name, ok) for name, ok in c.cells().items() if not ok]
            verdict = ("every probe passed" if o.exit_code == EXIT_OK else
                       o.error or f"{len(failed)} failed")
            lines.append(f"vLLM {c.release} ({o.vllm_version or '?'}, {o.seconds:.0f} s): {verdict}")
            for unit in o.units:
                for p in unit.all_probes:
                    if not p.ok:
                        lines.append(f"  FAIL {p.name}: {p.status if p.status is not None else '-'} {p.evidence}")
                for s in unit.servers:
                    if s.error_line:
                        lines.append(f"  {s.plan.name} did not start: {s.error_line}")
        if self.seconds:
            lines.append(f"({self.seconds:.0f} s)")
        return "\n".join(lines)


def verify_on(release: str, path: str, echo=None, **verifier) -> Column:
    """Install `release` if needed, then verify `path` on it."""
    echo = echo or (lambda s: None)
    try:
        exe = ensure(release, echo)
    except Refused as err:
        return Column(release, error=str(err), path=path, path_is_dir=Path(path).is_dir())
    echo(f"verifying {path} on vLLM {release}...")
    return Column(release, Verifier([path], vllm=str(exe), echo=echo, **verifier).run(), path=path,
                  path_is_dir=Path(path).is_dir())


def verify_matrix(path: str, releases: list[str], echo=None, **verifier) -> Matrix:
    t0 = time.monotonic()
    matrix = Matrix(path)
    for release in releases:
        matrix.columns.append(verify_on(release, path, echo, **verifier))
    matrix.seconds = time.monotonic() - t0
    return matrix


@dataclass
class Rehearsal:
    source: str | None                    # the release the tree pins
    target: str
    pinned_where: str = ""
    before: Column | None = None          # the tree on the release it pins
    after: Column | None = None           # the migrated copy on the target
    error: str | None = None
    changed: list[str] = field(default_factory=list)     # files the migration changes (relative)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return (self.error is None and self.before is not None and self.before.exit_code == EXIT_OK
                and self.after is not None and self.after.exit_code == EXIT_OK)

    def matrix(self) -> Matrix:
        m = Matrix("before (pinned release) / after migration (target)")
        for label, col in (("before", self.before), ("after", self.after)):
            if col is not None:
                m.columns.append(Column(f"{col.release} {label}", col.outcome, col.error, col.path, col.path_is_dir))
        return m

    def as_dict(self) -> dict:
        return {"from": self.source, "pinned": self.pinned_where, "to": self.target, "passed": self.passed,
                "error": self.error, "changed": self.changed, "seconds": round(self.seconds, 1),
                "before": self.before.as_dict() if self.before else None,
                "after": self.after.as_dict() if self.after else None}


def rehearse_migration(path: str, target: str, source: str | None, pinned_where: str, migrate_copy,
                       echo=None, **verifier) -> Rehearsal:
    """`migrate_copy(copy_root: Path) -> list[str]` migrates the copy in place and returns the
    changed files (relative). Stops at the first thing that fails."""
    echo = echo or (lambda s: None)
    t0 = time.monotonic()
    reh = Rehearsal(source, target, pinned_where)
    try:
        if source is None:
            reh.error = ("cannot tell which vLLM release the configs pin (no vllm/vllm-openai tag or vllm== pin): "
                         "pass --from X.Y.Z")
            return reh
        try:            # both ends checked before anything is installed or started
            check_release(source), check_release(target)
        except Refused as err:
            reh.error = str(err)
            return reh
        reh.before = verify_on(source, path, echo, **verifier)
        if reh.before.exit_code != EXIT_OK:
            return reh
        src = Path(path)
        tmp = Path(tempfile.mkdtemp(prefix="vllmlint-rehearsal-"))
        try:
            copy = tmp / (src.name or "tree")
            if src.is_dir():
                shutil.copytree(src, copy, ignore=COPY_IGNORE, symlinks=True)
            else:
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, copy)
            echo(f"migrating a copy ({copy}) to vLLM {target}...")
            reh.changed = migrate_copy(copy)
            reh.after = verify_on(target, str(copy), echo, **verifier)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return reh
    finally:
        reh.seconds = time.monotonic() - t0
