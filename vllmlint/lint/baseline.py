"""Baselines: record today's findings, fail CI only on new ones.

A finding's fingerprint is (path, code, its source line with blanks collapsed); the baseline
keeps a count per fingerprint. Moving a line keeps its fingerprint; a second finding of the same
code on another line is new, and so is one more copy of a line than the baseline counted.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

from ..model.launch import Finding

VERSION = 1


def fingerprint(f: Finding) -> str:
    line = " ".join(f.file.line_text(f.line_col[0]).split())
    return hashlib.sha256(f"{f.file.display}\0{f.code}\0{line}".encode()).hexdigest()[:20]


def write(path: Path, findings: list[Finding]) -> None:
    counts = Counter(fingerprint(f) for f in findings)
    data = {"version": VERSION, "tool": "vllmlint", "findings": dict(sorted(counts.items()))}
    path.write_text(json.dumps(data, indent=1) + "\n")


def read(path: Path) -> Counter:
    data = json.loads(path.read_text())
    if data.get("version") != VERSION:
        raise ValueError(f"{path}: not a vllmlint baseline (version {data.get('version')!r})")
    return Counter(data.get("findings", {}))


def new_findings(findings: list[Finding], known: Counter) -> list[Finding]:
    left = Counter(known)
    fresh = []
    for f in findings:
        key = fingerprint(f)
        if left[key] > 0:
            left[key] -= 1
        else:
            fresh.append(f)
    return fresh
