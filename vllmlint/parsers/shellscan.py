"""Find vLLM launches and environment settings in shell code, with file spans.

Used for shell scripts and for every place shell code hides in other kinds: `sh -c` scripts in
Kubernetes and compose, Dockerfile shell-form CMD/ENTRYPOINT, Python `shell=True` strings.
The caller says how the lexed text maps back to the file (`omap[i]` = file offset of text[i]).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from .detect import detect, docker_run_image, serve_kind
from ..model.launch import AppendSite, Arg, Edit, EnvEntry, Launch, SourceFile, remove_from_run
from .shell_lex import ArrayAssign, SimpleCommand, Word, commands

SHELLS = {"sh", "bash", "zsh", "dash", "ash", "ksh"}
ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)$", re.S)
ARRAY_REF_RE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\[[@*]\]\}$")
RUNTIME_ARGS = {"$@", "$*", "${@}", "${*}"}


class Shift:
    """Identity mapping plus a base offset, without a list per character."""

    def __init__(self, base: int = 0):
        self.base = base

    def __getitem__(self, i: int) -> int:
        return self.base + i


class Compose:
    """Map through an inner mapping, then an outer one (nested `sh -c` scripts)."""

    def __init__(self, inner: Sequence[int], outer):
        self.inner, self.outer = inner, outer

    def __getitem__(self, i: int) -> int:
        return self.outer[self.inner[i]]


@dataclass
class ShellScan:
    launches: list[Launch] = field(default_factory=list)
    env: list[EnvEntry] = field(default_factory=list)


def basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


class _Scanner:
    def __init__(self, file: SourceFile, text: str, omap, context: str, group: str,
                 inherited_env: list[EnvEntry], image: str | None, in_eval: bool, depth: int):
        self.file, self.text, self.omap = file, text, omap
        self.context, self.group, self.image = context, group, image
        self.inherited = list(inherited_env)
        self.in_eval, self.depth = in_eval, depth
        self.exported: list[EnvEntry] = []
        self.assigned: dict[str, tuple[Word, SimpleCommand]] = {}
        self.arrays: dict[str, list[Word]] = {}
        self.out = ShellScan()

    # -- spans ---------------------------------------------------------
    def fstart(self, word) -> int:
        return self.omap[word.start]

    def fend(self, word) -> int:
        return self.omap[word.end - 1] + 1

    def arg(self, word: Word) -> Arg:
        omap = self.omap
        return Arg(word.value, self.file, (self.fstart(word), self.fend(word)), word.dynamic, word.splits,
                   locate=lambda: [omap[i] for i in word.offsets])

    # -- removal edits ------------------------------------------------------
    def remove_command(self, cmd_words: list[Word]) -> list[Edit]:
        """Remove a whole command, with its own line when it stands alone on one."""
        text = self.file.text
        fs, fe = self.fstart(cmd_words[0]), self.fend(cmd_words[-1])
        line_start = text.rfind("\n", 0, fs) + 1
        end = fe
        while end < len(text) and text[end] in " \t":
            end += 1
        if text.startswith("&&", end):
            end += 2
        elif end < len(text) and text[end] == ";" and not text.startswith(";;", end):
            end += 1
        while end < len(text) and text[end] in " \t":
            end += 1
        if not text[line_start:fs].strip() and (end >= len(text) or text[end] in "\r\n"):
            if text.startswith("\r\n", end):
                end += 2
            elif end < len(text):
                end += 1
            return [Edit(self.file, line_start, end, "")]
        return [Edit(self.file, fs, end, "")]

    def remove_word(self, words: list[Word], i: int) -> list[Edit] | None:
        """Remove words[i] and the blank that separates it from its neighbour."""
        span = remove_from_run(self.file.text, [(self.fstart(w), self.fend(w)) for w in words], i)
        return [Edit(self.file, span[0], span[1], "")] if span else None

    def entry(self, word: Word, origin: str, removal: list[Edit] | None) -> EnvEntry:
        name, _, value = word.value.partition("=")
        name = name.rstrip("+")
        return EnvEntry(name, None if word.dynamic else value, self.file,
                        (self.fstart(word), self.fend(word)), origin, removal)

    # -- the walk -----------------------------------------------------------
    def run(self) -> ShellScan:
        for cmd in commands(self.text):
            for array in cmd.arrays:
                self._record_array(array)
            if not cmd.words:
                for word in cmd.assignments:
                    name = word.value.split("=", 1)[0].rstrip("+")
                    self.assigned[name] = (word, cmd)
                continue
            self._command(cmd)
        return self.out

    def _record_array(self, array: ArrayAssign) -> None:
        elems = list(array.elements)
        if array.append:
            self.arrays[array.name] = self.arrays.get(array.name, []) + elems
        else:
            self.arrays[array.name] = elems

    def _command(self, cmd: SimpleCommand) -> None:
        words = cmd.words
        head = words[0].value
        if head in ("export", "declare", "typeset") or (head == "readonly"):
            self._export(cmd)
            return
        prefix = [self.entry(w, "shell VAR=value prefix", self.remove_word(cmd.assignments + words, i))
                  for i, w in enumerate(cmd.assignments) if ASSIGN_RE.match(w.value)]
        self.out.env.extend(prefix)
        env_now = self.inherited + self.exported + prefix
        if head == "eval" and self.depth < 4:
            script_words = words[1:]
            if len(script_words) == 1:
                self._nested(script_words[0], env_now, in_eval=True)
            return
        values = [w.value for w in words]
        if basename(head) in SHELLS or (head in ("exec", "nohup") and len(words) > 1
                                         and basename(words[1].value) in SHELLS):
            script = _shell_c_script(words)
            if script is not None and self.depth < 4:
                self._nested(script, env_now, in_eval=self.in_eval)
                return
        expanded = self._expand_arrays(words)
        values = [w.value for w in expanded]
        det = detect(values)
        image_at = None if det else docker_run_image(values)
        if det is None and image_at is None:
            return
        # `env A=1 vllm ...`: assignments between `env` and the program are env too
        start = det.start if det else 0
        for i in range(start):
            if values[i] == "env":
                for j in range(i + 1, start):
                    if ASSIGN_RE.match(values[j]) and expanded[j] in words:
                        k = words.index(expanded[j])
                        entry = self.entry(expanded[j], "shell env VAR=value", self.remove_word(words, k))
                        prefix.append(entry)
                        self.out.env.append(entry)
        if det:
            opt = det.options_start
            argv = [self.arg(w) for w in expanded[det.start:]]
            options_start, kind, program, image = opt - det.start, det.kind, det.program, self.image
            head_word = expanded[det.start]
        else:
            # `docker run ... vllm/vllm-openai:TAG args`: the image's entrypoint is `vllm serve`
            assert image_at is not None
            opt = image_at + 1
            argv = [Arg("vllm"), Arg("serve")] + [self.arg(w) for w in expanded[opt:]]
            options_start, kind = 2, serve_kind(values[opt:])
            program, image, head_word = "docker run", values[image_at], expanded[image_at]
            prefix.extend(self._docker_env(expanded[:image_at]))
        launch = Launch(kind=kind, file=self.file, span=(self.fstart(head_word), self.fend(head_word)),
                        argv=argv, options_start=options_start, context=self.context, group=self.group,
                        env=self.inherited + self.exported + prefix, image=image, program=program)
        launch.append_site = AppendSite(self.file, self.fend(words[-1]), " {}")
        launch.not_editable = self._why_not_editable(expanded[opt:])
        self.out.launches.append(launch)

    def _docker_env(self, words: list[Word]) -> list[EnvEntry]:
        """`docker run -e NAME=value` / `--env NAME=value` / `--env=NAME=value`."""
        found = []
        for i, w in enumerate(words):
            if w.value in ("-e", "--env") and i + 1 < len(words) and ASSIGN_RE.match(words[i + 1].value):
                pair_words, setting = words[i:i + 2], words[i + 1]
            elif w.value.startswith("--env=") and ASSIGN_RE.match(w.value[6:]):
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

    def _why_not_editable(self, option_words: list[Word]) -> str | None:
        if self.in_eval:
            return "the command is built as a string and run with eval"
        for w in option_words:
            if (w.value in RUNTIME_ARGS and w.dynamic) or (w.splits and ARRAY_REF_RE.match(w.value)):   # not '$@'
                return f"its arguments arrive at run time ({w.value})"
        return None

    def _expand_arrays(self, words: list[Word]) -> list[Word]:
        out: list[Word] = []
        for w in words:
            m = ARRAY_REF_RE.match(w.value)
            if m and m.group(1) in self.arrays:
                out.extend(self.arrays[m.group(1)])
            else:
                out.append(w)
        return out

    def _export(self, cmd: SimpleCommand) -> None:
        words = cmd.words
        names = [w for w in words[1:] if not w.value.startswith("-")]
        for i, w in enumerate(words):
            if i == 0 or w.value.startswith("-"):
                continue
            if ASSIGN_RE.match(w.value):
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

    def _nested(self, script: Word, env_now: list[EnvEntry], in_eval: bool) -> None:
        if len(script.offsets) != len(script.value):
            return
        inner = _Scanner(self.file, script.value, Compose(script.offsets, self.omap), self.context,
                         self.group, env_now, self.image, in_eval, self.depth + 1)
        result = inner.run()
        self.out.launches.extend(result.launches)
        self.out.env.extend(result.env)


def _shell_c_script(words: list[Word]) -> Word | None:
    """The script word of `sh -c SCRIPT` / `bash -lc SCRIPT` / `exec bash -c SCRIPT`."""
    for i, w in enumerate(words[1:], 1):
        v = w.value
        if v.startswith("-") and not v.startswith("--") and "c" in v[1:]:
            if i + 1 < len(words) and words[i + 1].value == "--":     # `bash -c -- SCRIPT`
                i += 1
            return words[i + 1] if i + 1 < len(words) else None
        if not v.startswith("-") and basename(v) not in SHELLS and v not in ("exec", "nohup"):
            return None
    return None


def scan_shell(file: SourceFile, text: str, omap=None, *, context: str = "script", group: str = "",
               inherited_env: list[EnvEntry] | None = None, image: str | None = None,
               in_eval: bool = False) -> ShellScan:
    scanner = _Scanner(file, text, omap if omap is not None else Shift(0), context,
                       group or file.display, inherited_env or [], image, in_eval, 0)
    return scanner.run()


def split_words(file: SourceFile, text: str, omap) -> list[Arg]:
    """The words of a one-line command string (compose splits `command:` strings like this)."""
    out: list[Arg] = []
    for cmd in commands(text):
        for w in cmd.assignments + cmd.words:
            out.append(Arg(w.value, file, (omap[w.start], omap[w.end - 1] + 1), w.dynamic, w.splits,
                           locate=lambda w=w: [omap[i] for i in w.offsets]))
    return out


_END_MARK = "\n\n__vllmlint_end_of_script__\n"


def unterminated(text: str) -> int | None:
    """Offset of the word in which a quote, `$(`, `${` or backtick opens and never closes (bash
    refuses such a script), None when everything closes. The text is lexed with a marker word
    after it: a construct still open at the end of the text swallows the marker. An unterminated
    heredoc is not reported (bash only warns)."""
    from .shell_lex import lex

    end = len(text)
    for tok in lex(text + _END_MARK):
        if tok.start < end and tok.end > end + 2:
            return tok.start
    return None


def parse_shell(source: SourceFile):
    from ..model.launch import ParsedFile, ParseError
    bad = unterminated(source.text)
    if bad is not None:
        raise ParseError(source.line_col(bad)[0], "shell syntax error: a quote, `$(`, `${` or backtick "
                                                  "in this word is never closed")
    scan = scan_shell(source, source.text, Shift(0), context="script", group=source.display)
    return ParsedFile(source, launches=scan.launches, env=scan.env)
