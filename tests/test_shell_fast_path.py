"""The shell path's shortcuts against the readings they replaced (issue 34, item 2).

Each shortcut keeps its reference here (or behind a switch in the code) and is compared with it,
byte for byte, on fixtures/, small generated corpora, ../shared/corpus/files and ../shared/redteam.
"""
from __future__ import annotations

import random
import re

import pytest

from vllmlint.parsers.shellscan import only_statement

_OPENS_BODY_RE = re.compile(r"(?:^|[\s;&|])(?:then|else|do|\{)$")
_CLOSES_BODY_RE = re.compile(r"(?:fi|else|elif|done|\})(?:$|[\s;&|)])")


def only_statement_reference(text: str, start: int, end: int) -> bool:
    """only_statement as it read before: the whole text split into lines at every call."""
    def strip(lines):
        return [l for l in lines if l.strip() and not l.strip().startswith("#")]

    before = strip(text[:start].splitlines())
    after = strip(text[end:].splitlines())
    head = before[-1].rstrip() if before else ""
    head = head.rstrip(";").rstrip() if head.rstrip().endswith(";") and not head.rstrip().endswith(";;") else head
    if not _OPENS_BODY_RE.search(head):
        return False
    tail = text[end:].lstrip(" \t;") if text[end:].lstrip(" \t").startswith(";") else None
    nxt = (tail.splitlines()[0].strip() if tail and tail.splitlines() and tail.splitlines()[0].strip()
           else (after[0].strip() if after else ""))
    return bool(_CLOSES_BODY_RE.match(nxt))


PIECES = ["if true; then", "then", "else", "do", "{", "}", "fi", "done", "elif x; then", "  ", "\t", ";", ";;",
          "\n", "\r\n", "\r", "\x0b", "\x85", "\u2028", "# c", "#", "echo x", "export A=1", "x", "y;", " fi)",
          "case a in", "esac", "while :; do", "then # c", "z" * 700, "# " + "c" * 600, "\r\n" * 300]


@pytest.mark.parametrize("seed", range(40))
def test_only_statement_matches_reference_on_random_text(seed):
    rng = random.Random(seed)
    for _ in range(200):
        parts = [rng.choice(PIECES) for _ in range(rng.randint(0, 14))]
        pad = "x" * rng.choice([0, 0, 600, 5000])        # past the first backward window
        text = pad + "".join(parts)
        for _ in range(6):
            start = rng.randint(0, len(text))
            end = rng.randint(start, len(text))
            assert only_statement(text, start, end) == only_statement_reference(text, start, end), \
                (text, start, end)
