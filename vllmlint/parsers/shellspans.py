"""Where the words of a shell script lie in the file, and the settings they make.

Part of the shell front end (shellscan.py's `_Scanner` mixes it in): the file span of a word
(through the scanner's offset map), the `Arg` a word becomes, the edit that removes one word,
and the environment settings words make: `VAR=value` entries, `export`, `docker run -e`.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from ..model.launch import KNOWN_OFFSETS, Arg, Edit, EnvEntry, remove_from_run, written_as_is
from .embedded import Shift
from .shell_lex import SimpleCommand, Word
from ..model.lazyre import lazy_re

ASSIGN_RE = lazy_re(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)$", re.S)


def _mapped(omap, offsets) -> list[int]:
    """`[omap[i] for i in offsets]`, without a method call per character for a Shift."""
    if type(omap) is Shift:
        base = omap.base
        return [base + i for i in offsets] if base else list(offsets)
    return [omap[i] for i in offsets]


class Compose:
    """Map through an inner mapping, then an outer one (nested `sh -c` scripts)."""

    def __init__(self, inner: Sequence[int], outer):
        self.inner, self.outer = inner, outer

    def __getitem__(self, i: int) -> int:
        return self.outer[self.inner[i]]


class ShellSpans:
    """Spans, removal edits and environment settings of the words a `_Scanner` reads."""

    # -- spans ---------------------------------------------------------
    def fstart(self, word) -> int:
        if word.start < 0:
            return word.offsets[0] if word.offsets else 0
        return self.omap[word.start]

    def fend(self, word) -> int:
        if word.start < 0:
            return word.offsets[-1] + 1 if word.offsets else 0
        return self.omap[word.end - 1] + 1

    def arg(self, word: Word) -> Arg:
        omap = self.omap
        if word.start < 0:          # a word of a variable's value: offsets are file offsets
            if not word.offsets:
                return Arg(word.value, None, None, True, word.splits)
            span = (word.offsets[0], word.offsets[-1] + 1)
            literal = span[1] - span[0] == len(word.value)
            return Arg(word.value, self.file, span, word.dynamic or not literal, word.splits,
                       locate=lambda: list(word.offsets))
        span = (self.fstart(word), self.fend(word))
        # a word written as it reads: its offsets are known now, and the Arg holds no closure
        # over the word (a parse a migrate keeps has less to collect)
        offs = written_as_is(self.file.text, span, word.value)
        if offs is not None:
            return Arg(word.value, self.file, span, word.dynamic, word.splits, KNOWN_OFFSETS, (offs,))
        return Arg(word.value, self.file, span, word.dynamic, word.splits,
                   locate=lambda: _mapped(omap, word.offsets))


    # -- removal edits ------------------------------------------------------
    def remove_word(self, words: list[Word], i: int) -> list[Edit] | None:
        """Remove words[i] and the blank that separates it from its neighbour."""
        span = remove_from_run(self.file.text, [(self.fstart(w), self.fend(w)) for w in words], i)
        return [Edit(self.file, span[0], span[1], "")] if span else None

    def entry(self, word: Word, origin: str, removal: list[Edit] | None) -> EnvEntry:
        name, _, value = word.value.partition("=")
        name = name.rstrip("+")
        return EnvEntry(name, None if word.dynamic else value, self.file,
                        (self.fstart(word), self.fend(word)), origin, removal)

    # -- environment settings -----------------------------------------------
    def _docker_env(self, words: list[Word]) -> list[EnvEntry]:
        """`docker run -e NAME=value` / `--env NAME=value` / `--env=NAME=value`."""
        found = []
        for i, w in enumerate(words):
            if w.value in ("-e", "--env") and i + 1 < len(words) and ASSIGN_RE().match(words[i + 1].value):
                pair_words, setting = words[i:i + 2], words[i + 1]
            elif w.value.startswith("--env=") and ASSIGN_RE().match(w.value[6:]):
                pair_words, setting = [w], w
            else:
                continue
            start, end = self.fstart(pair_words[0]), self.fend(pair_words[-1])
            nxt = self.fstart(words[i + len(pair_words)]) if i + len(pair_words) < len(words) else None
            removal = [Edit(self.file, start, nxt, "")] if nxt is not None and "\n" not in self.file.text[end:nxt] \
                else [Edit(self.file, self.fend(words[i - 1]), end, "")] if i > 0 else None
            value = setting.value[6:] if setting is w and w.value.startswith("--env=") else setting.value
            name, _, val = value.partition("=")
            entry = EnvEntry(name, None if setting.dynamic else val, self.file, (start, end),
                             "docker run --env", removal)
            found.append(entry)
            self.out.env.append(entry)
        return found

    def _export(self, cmd: SimpleCommand) -> None:
        words = cmd.words
        names = [w for w in words[1:] if not w.value.startswith("-")]
        for i, w in enumerate(words):
            if i == 0 or w.value.startswith("-"):
                continue
            if ASSIGN_RE().match(w.value):
                removal = self.remove_command(words) if len(names) == 1 else self.remove_word(words, i)
                entry = self.entry(w, "shell export", removal)
            elif w.value in self.assigned and re.match(r"^[A-Za-z_]\w*$", w.value):
                # `X=1` earlier, then `export X`: the setting is the assignment
                aword, acmd = self.assigned[w.value]
                removal = None if len(names) > 1 or len(acmd.assignments) > 1 else \
                    self.remove_command(acmd.assignments) + self.remove_command(words)
                entry = self.entry(aword, "shell export", removal)
            else:
                continue
            self.exported.append(entry)
            self.out.env.append(entry)
