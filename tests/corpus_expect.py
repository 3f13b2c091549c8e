"""What a whole-corpus run of `../shared/corpus/files` must answer, shared by the corpus tests.

One corpus file is itself broken shell (`bash -n` rejects it: an unclosed quote). The right
answer is its `path:line:col: E000 error: reason` on stderr and exit 2, with every other file still checked;
a run over the corpus must report exactly that and nothing else on stderr.
"""
from __future__ import annotations

import re

BROKEN = {
    "jasonacox__TinyLLM/vllm__run-awq.sh":
        re.compile(r"vllm__run-awq\.sh:48:\d+: E000 error: shell syntax error: a quote, `\$\(`, `\$\{` or backtick in this word is never closed"),
}


def assert_only_broken_files_fail(result, allowed: tuple[int, ...] = (2,)) -> None:
    """`result` is a CliRunner result over the whole corpus: exit 2 (or `allowed`), and every
    `path:line:col: E00N error: reason` line on stderr is one of BROKEN's, each of which is present."""
    assert "Traceback" not in result.output and "internal error" not in result.stderr, result.output
    assert result.exit_code in allowed, result.stderr
    lines = [l for l in result.stderr.splitlines() if re.match(r"^\S+:\d+:\d+: E\d+ error: ", l)]
    for name, pattern in BROKEN.items():
        assert any(pattern.search(l) for l in lines), f"{name}: expected its parse error on stderr\n{result.stderr}"
    stray = [l for l in lines if not any(p.search(l) for p in BROKEN.values())]
    assert stray == [], stray
