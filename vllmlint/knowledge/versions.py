"""vLLM release numbers as comparable tuples."""
from __future__ import annotations

import re

VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int]:
    m = VERSION_RE.match(text.strip())
    if not m:
        raise ValueError(f"not a vLLM version: {text!r} (expected e.g. 0.30.0)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def fmt(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))
