"""Regular expressions compiled on their first use.

A one-file run (pre-commit, an editor save) uses a fraction of the patterns its modules
define; compiling every one at import cost such a run several milliseconds (issue 16). A
pattern defined with `lazy_re` is compiled once, when first asked for:

    SHEBANG_RE = lazy_re(rb"^#!\\s*\\S*?python")
    ...
    if SHEBANG_RE().match(head): ...
"""
from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache


def lazy_re(pattern: str | bytes, flags: int = 0) -> Callable[[], re.Pattern]:
    """A function that returns `re.compile(pattern, flags)`, compiling it on its first call."""
    @cache
    def compiled() -> re.Pattern:
        return re.compile(pattern, flags)
    return compiled
