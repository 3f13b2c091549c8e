"""What shell variables and arrays hold, as far as the script itself says.

Part of the shell front end (shellscan.py's `_Scanner` mixes it in): assignments and appends
(values of exclusive if/case arms kept as alternatives), arrays, what a word most likely holds
(`resolve`), the expansion of `$X` / `${A[@]}` into words, `BASH_REMATCH` after `[[ s =~ re ]]`,
and how many times the `for` loops around a command run.
"""
from __future__ import annotations

import re
from ..model.record import record

from .detect import basename
from .shell_lex import ArrayAssign, Word, exclusive
from .shellspans import ASSIGN_RE, _mapped
from ..model.lazyre import lazy_re

ARRAY_REF_RE = lazy_re(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\[[@*]\]\}$")
VAR_REF_RE = lazy_re(r"^\$(?:([A-Za-z_]\w*)|\{([A-Za-z_]\w*)(?::?-(.*))?\})$", re.S)
WHICH_RE = lazy_re(r"^\$\((?:which|command\s+-v|type\s+-p)\s+([\w./-]+)\s*\)$")
# programs whose words may hold a variable that expands to the launch's program or flags
# (`exec $CMD`, `docker run $IMAGE $ARGS`, `vllm serve $M $EXTRA`); `echo $CMD` is no launch
EXPANDING_HEADS = {"exec", "nohup", "setsid", "sudo", "env", "time", "timeout", "srun", "mpirun", "mpiexec",
                   "numactl", "taskset", "nice", "ionice", "stdbuf", "chrt", "conda", "mamba", "micromamba",
                   "uv", "uvx", "pixi", "poetry", "docker", "podman", "nerdctl", "apptainer", "singularity",
                   "vllm", "torchrun", "ray", "xargs"}
PYTHON_HEAD_RE = lazy_re(r"^python[\d.]*$")
# the script's own folder as scripts write it: `$(dirname "$0")`, `$(dirname "${BASH_SOURCE[0]}")`,
# `$(cd "$(dirname "$0")" && pwd)`, `$(dirname "$(realpath "$0")")`, `${BASH_SOURCE%/*}`
_SELF = r'"?\$(?:0|\{0\}|BASH_SOURCE|\{BASH_SOURCE(?:\[0\])?\})"?'
_DIRNAME = r'\$\(\s*dirname\s+(?:' + _SELF + r'|"?\$\(\s*(?:realpath|readlink\s+-f)\s+' + _SELF + r'\s*\)"?)\s*\)'
SCRIPT_DIR_RE = lazy_re(r'^(?:"?' + _DIRNAME + r'"?|\$\(\s*cd\s+"?' + _DIRNAME +
                        r'"?\s*(?:&&|;)\s*pwd(?:\s+-P)?\s*\)|\$\{(?:BASH_SOURCE|0)%/\*\})(?=/)')
# a file a script sources is read for its plain assignments when it is no bigger than this
SOURCED_MAX_BYTES = 64 * 1024


@record
class VarValue:
    """One value a shell variable may hold: its text and the file offset of each character.
    `branch` is the if/case arm it was assigned in (values of exclusive arms are alternatives);
    `line` the line of the assignment; `append_at` the file offset just before the closing quote
    of the assignment that started it (where one more word can be written), if quoted."""

    value: str
    offsets: list[int]
    branch: tuple
    line: int
    append_at: int | None = None
    appended: bool = False

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, value, offsets, branch, line, append_at=None, appended=False):
        self.value = value
        self.offsets = offsets
        self.branch = branch
        self.line = line
        self.append_at = append_at
        self.appended = appended


def var_ref(value: str) -> tuple[str, str | None] | None:
    """`$X`, `${X}`, `${X:-default}` -> (X, default or None)."""
    m = VAR_REF_RE().match(value)
    if not m:
        return None
    return (m.group(1) or m.group(2)), m.group(3)


class ShellVariables:
    """Variables, arrays and loop counts of the script a `_Scanner` reads."""

    # -- loops ----------------------------------------------------------------
    def _loops_count(self, loops: tuple) -> int | None:
        """Iterations of the `for` loops around a command (a `while` loop counts once: it
        restarts, it does not multiply); None when a count is only known at run time."""
        total = 1
        for header in loops:
            if header is None:
                continue
            n = self._for_count(list(header))
            if n is None:
                return None
            total *= n
        return total

    def _int(self, expr: str) -> int | None:
        expr = expr.strip()
        if re.fullmatch(r"[A-Za-z_]\w*", expr):
            expr = "$" + expr
        value = self.resolve(expr).strip().strip("'\"")
        return int(value) if re.fullmatch(r"-?\d+", value) else None

    def _for_count(self, header: list[Word]) -> int | None:
        if len(header) == 1 and header[0].value.startswith("(("):
            m = re.fullmatch(r"\(\(\s*(\w+)\s*=\s*([^;]+?)\s*;\s*\1\s*(<=?)\s*([^;]+?)\s*;\s*"
                             r"(?:\1\s*\+\+|\+\+\s*\1|\1\s*\+=\s*1)\s*\)\)", header[0].value)
            if not m:
                return None
            lo, hi = self._int(m.group(2)), self._int(m.group(4))
            if lo is None or hi is None:
                return None
            return max(0, hi - lo + (1 if m.group(3) == "<=" else 0))
        if len(header) < 2 or header[1].value != "in":
            return None                      # `for x; do`: the script's arguments
        total = 0
        for w in header[2:]:
            n = self._items(w)
            if n is None:
                return None
            total += n
        return total

    def _items(self, w: Word) -> int | None:
        """How many words a `for ... in` item gives."""
        v = w.value
        m = ARRAY_REF_RE().match(v)
        if m:
            return len(self.arrays[m.group(1)]) if m.group(1) in self.arrays else None
        brace = re.fullmatch(r"\{(-?\d+)\.\.(-?\d+)\}", v)
        if brace:
            return abs(int(brace.group(2)) - int(brace.group(1))) + 1
        seq = re.fullmatch(r"\$\(\s*seq\s+(\S+)(?:\s+(\S+))?\s*\)", v)
        if seq:
            a, b = (self._int("1"), self._int(seq.group(1))) if seq.group(2) is None else \
                (self._int(seq.group(1)), self._int(seq.group(2)))
            return None if a is None or b is None else max(0, b - a + 1)
        if not w.dynamic:
            return 1
        value = self.resolve(v)
        if "$" in value or "`" in value:
            return None
        return len(value.split()) if w.splits else 1

    def _regex_test(self, words: list[Word]) -> None:
        """`[[ STR =~ RE ]]` with both known: BASH_REMATCH holds the groups, as bash sets them."""
        values = [w.value for w in words]
        if "=~" not in values or "]]" not in values:
            return
        i, j = values.index("=~"), len(values) - 1 - values[::-1].index("]]")
        if i == 0 or j <= i + 1:
            return
        subject = self.resolve(values[i - 1])
        pattern = self.text[words[i].end:words[j].start].strip()
        core = pattern[:-1] if pattern.endswith("$") else pattern
        if "$" in subject or "$" in core:
            return
        try:
            m = re.search(pattern, subject)
        except re.error:
            return
        self.rematch = [m.group(0)] + [g or "" for g in m.groups()] if m else []

    # -- variables ----------------------------------------------------------
    def _assign(self, word: Word, branch: tuple) -> None:
        """Record `NAME=value` / `NAME+=value` / `NAME="$NAME more"`: appends extend every value
        the variable may hold; a plain assignment replaces them, except values assigned in an
        exclusive arm (`if ...; X=a; else X=b; fi`), which stay alternatives."""
        m = ASSIGN_RE().match(word.value)
        if not m:
            return
        name, value = m.group(1), m.group(2)
        append = word.value[len(name)] == "+"
        k = len(word.value) - len(value)
        offs = _mapped(self.omap, word.offsets[k:])
        ref = re.match(r"\$(?:\{%s\}|%s(?!\w))" % (name, name), value) if value.startswith("$") else None
        if ref:
            append, value, offs = True, value[ref.end():], offs[ref.end():]
        line = self.file.line_col(self.fstart(word))[0]
        text = self.file.text
        close = self.fend(word)
        append_at = close - 1 if close - 1 < len(text) and text[close - 1] in "\"'" and word.value != text[self.fstart(word):close] \
            else None
        current = self.vars.get(name, [])
        if append and current:
            for alt in current:
                if not exclusive(alt.branch, branch):
                    alt.value += value
                    alt.offsets = alt.offsets + offs
                    alt.appended = True
            return
        keep = [alt for alt in current if exclusive(alt.branch, branch)]
        self.vars[name] = keep + [VarValue(value, offs, branch, line, append_at)]

    def _sourced(self, word: Word, branch: tuple) -> None:
        """`source F` / `. F`: the plain assignments of F (`IMG="vllm/vllm-openai:v0.24.0"`,
        `export MODEL=...`: literal values only) become values of this script's variables, so an
        image or a flag set in a config file the script sources is known (found as a user on
        yangyuxin-hub/H100-llm-deploy: `source config/serving.env` then `docker run
        "${VLLM_DOCKER_IMAGE}"`). They have no place in this file: nothing is edited through
        them. F is found from the script's folder (`$(dirname "$0")/...`, or a relative path
        from the script's folder or one of the three above it, where scripts are run from, and
        never outside the third folder above it); an absolute path or one built from other
        variables is not read, nor one sourced in a container's command, a heredoc or a string."""
        if self.file.kind != "shell" or self.depth or len(self.text) != len(self.file.text):
            return      # a script's own commands only: in a container, a heredoc or a string, F is elsewhere
        path = self._sourced_path(word)
        if path is None:
            return
        try:
            if path.stat().st_size > SOURCED_MAX_BYTES:
                return
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeError):
            return
        from .shell_lex import commands

        try:
            cmds = commands(text)
        except Exception:           # not a script we can read: nothing known from it
            return
        line = self.file.line_col(self.fstart(word))[0]
        for cmd in cmds:
            if cmd.words and cmd.words[0].value not in ("export", "declare", "typeset", "readonly"):
                continue
            for w in cmd.assignments + cmd.words[1:]:
                m = ASSIGN_RE().match(w.value)
                if m and not w.dynamic and "$" not in m.group(2) and "`" not in m.group(2) \
                        and w.value[len(m.group(1))] != "+":
                    self.vars[m.group(1)] = [VarValue(m.group(2), [], branch, line)]

    def _sourced_path(self, word: Word):
        from pathlib import Path

        here = Path(self.file.path).parent
        value = self.resolve(word.value)
        m = SCRIPT_DIR_RE().match(value)
        if m:
            rest = value[m.end():].lstrip("/")
            folders = [here]
        else:
            rest = value
            folders = [here, *list(here.parents)[:3]]
        if not rest or "$" in rest or "`" in rest or rest.startswith(("/", "~")):
            return None
        top = ([here] + list(here.parents))[min(3, len(here.parents))].resolve()
        for folder in folders:
            candidate = folder / rest
            if candidate.is_file() and candidate.resolve().is_relative_to(top):
                return candidate
        return None

    def _values(self, name: str) -> list[VarValue]:
        return self.vars.get(name, [])

    def resolve(self, value: str, depth: int = 0) -> str:
        """What a word most likely holds, for recognising a program or an image: known
        variables substituted (their first value), `${X:-default}` as its default when X is
        unknown, `$(which vllm)` as `vllm`. Unknown variables stay as written."""
        if "$" not in value or depth > 4:
            return value
        which = WHICH_RE().match(value)
        if which:
            return which.group(1)

        def sub(m: re.Match) -> str:
            name, default = m.group(1) or m.group(2), m.group(3)
            for alt in self._values(name):
                own = var_ref(alt.value)
                if own and own[0] == name:          # `X="${X:-default}"`: the default, unless set outside
                    if own[1] is not None:
                        return self.resolve(own[1], depth + 1)
                    continue
                return self.resolve(alt.value, depth + 1)
            if default is not None:
                return self.resolve(default, depth + 1)
            return m.group(0)

        def element(m: re.Match) -> str:
            name, index = m.group(1), int(m.group(2))
            items = self.rematch if name == "BASH_REMATCH" else [w.value for w in self.arrays.get(name, [])]
            return items[index] if index < len(items) else m.group(0)

        value = re.sub(r"\$\{([A-Za-z_]\w*)\[(\d+)\]\}", element, value)
        return re.sub(r"\$(?:([A-Za-z_]\w*)|\{([A-Za-z_]\w*)(?::?-((?:[^{}]|\{[^{}]*\})*))?\})", sub, value)

    def _split_value(self, alt: VarValue) -> list[Word]:
        """An unquoted `$X` word-splits its value (no quote removal): words with file offsets."""
        out = []
        for m in re.finditer(r"\S+", alt.value):
            offs = tuple(alt.offsets[m.start():m.end()]) if alt.offsets else ()
            dyn = "$" in m.group() or "`" in m.group()
            out.append(Word(m.group(), -1, -1, offs, dyn, dyn))
        return out

    def _expand_vars(self, words: list[Word]) -> tuple[list[Word], list[str]]:
        """Unquoted `$X` words in command position, or among the words of a program that runs
        its arguments (`exec`, `docker run`, `vllm serve`): replaced by the words of every value
        X may hold. Returns the words and a note per expansion (for `via`)."""
        if not any(w.splits for w in words):      # no unquoted `$X`: nothing to expand
            return words, []
        head = basename(self.resolve(words[0].value))
        out: list[Word] = []
        notes: list[str] = []
        for i, w in enumerate(words):
            ref = var_ref(w.value) if w.splits else None
            alts = self._values(ref[0]) if ref else []
            if alts and (i == 0 or head in EXPANDING_HEADS or PYTHON_HEAD_RE().match(head)):
                # only values that split into several words: `$MODEL` stays a word of its own
                if all((a.offsets or not a.value) and "$(" not in a.value and "`" not in a.value for a in alts) and \
                        (i == 0 or any(len(a.value.split()) > 1 for a in alts)):
                    for alt in alts:
                        out.extend(self._split_value(alt))
                    lines = ", ".join(str(a.line) for a in alts)
                    notes.append(f"${ref[0]} assigned at line {lines}")
                    continue
            out.append(w)
        return out, notes

    def _record_array(self, array: ArrayAssign) -> None:
        elems = list(array.elements)
        if array.append:
            self.arrays[array.name] = self.arrays.get(array.name, []) + elems
        else:
            self.arrays[array.name] = elems

    def _expand_arrays(self, words: list[Word]) -> list[Word]:
        if not self.arrays:
            return list(words)
        out: list[Word] = []
        for w in words:
            m = ARRAY_REF_RE().match(w.value)
            if m and m.group(1) in self.arrays:
                out.extend(self.arrays[m.group(1)])
            else:
                out.append(w)
        return out
