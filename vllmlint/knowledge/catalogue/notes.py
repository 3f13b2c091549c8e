"""What a release changed that the generator does not see, researched by hand with evidence
(`notes.json` beside this file; README of the file: its `about`).

    default_note("0.34.0", "--gpu-memory-utilization")   # {"means", "advice", "evidence"} or None
    env_note("0.34.0", "VLLM_MARLIN_INPUT_DTYPE")        # {"refuses", "say", "replaced_by", ...} or None
    release_notes("0.34.0")                              # the whole entry ({} when none)

Read once per process, on first use (a check that meets no changed default or removed variable
never reads it).
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

FILE = Path(__file__).resolve().parent / "notes.json"


@lru_cache(maxsize=1)
def _all() -> dict:
    return json.loads(FILE.read_text(encoding="utf-8"))["releases"]


def release_notes(release: str) -> dict:
    return _all().get(release, {})


def default_note(release: str, flag: str) -> dict | None:
    """What `flag`'s new default in `release` means and what to do; an alias (`same_as`) gives
    its flag's note."""
    notes = release_notes(release).get("defaults", {})
    note = notes.get(flag)
    if note and note.get("same_as"):
        note = notes.get(note["same_as"])
    return note


def env_note(release: str, name: str) -> dict | None:
    """What `release` does with the removed variable `name` still set, and what replaced it."""
    return release_notes(release).get("env", {}).get(name)


def refuses(note: dict, value: str | None) -> bool | None:
    """Whether the release refuses to start with the variable set to `value` (None: unknown,
    a value known only at run time)."""
    if not note.get("refuses"):
        return False
    allowed = note.get("refuses_unless")
    if allowed is None:
        return True
    if value is None:
        return None
    return value.strip().strip("'\"") != allowed


def released() -> list[str]:
    """The releases with notes."""
    return list(_all())


__all__ = ["default_note", "env_note", "refuses", "release_notes", "released"]
