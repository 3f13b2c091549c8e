"""Shell lexer with exact source offsets.

We never run a shell: this module only lexes text. It must never raise on any input
(unterminated quotes, stray parens, binary junk): it degrades to best-effort tokens.
"""
from __future__ import annotations

import re
from ..model.record import MISSING, field, record


# Word and Operator are built once per token, so they are slotted records (no dict per
# instance) with a written-out __init__; record does not slot frozen classes (pickling).
# They are never changed after lexing; unsafe_hash keeps them hashable by value as frozen
# ones were.
@record(slots=True, unsafe_hash=True)
class Word:
    """One shell word.

    value:   the word after quote removal and backslash-escape removal, *without* expansion:
             `"--model=$M"` -> `--model=$M`, `'a b'` -> `a b`, `a\\ b` -> `a b`,
             `"${X:-1}"` -> `${X:-1}`. A line continuation (backslash-newline) disappears.
    start/end: offsets of the raw word in the lexed string (end exclusive).
    offsets: for each character of `value`, the offset in the lexed string of the source
             character it came from (len(offsets) == len(value)). Used to re-lex `sh -c "..."`
             script words and map their tokens back to the file.
    dynamic: True when the word contains a parameter expansion ($X, ${X}, $1, $@, $*),
             command substitution ($(...), `...`) or arithmetic ($((...))) outside single quotes.
    splits:  True when the word contains such an expansion *unquoted* (it may split into
             several argv items at run time), or is exactly "$@" / "${ARR[@]}" / $* .
    """

    value: str
    start: int
    end: int
    offsets: tuple[int, ...] = field(repr=False)
    dynamic: bool = False
    splits: bool = False

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, value, start, end, offsets, dynamic=False, splits=False):
        self.value = value
        self.start = start
        self.end = end
        self.offsets = offsets
        self.dynamic = dynamic
        self.splits = splits


@record(slots=True, unsafe_hash=True)
class Operator:
    """Control operator or separator: one of  ; & && || | |& ;; ( ) { } and '\\n' (newline)."""

    text: str
    start: int
    end: int

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, text, start, end):
        self.text = text
        self.start = start
        self.end = end


@record(frozen=True)
class ArrayAssign:
    """`NAME=( elem elem ... )` or `NAME+=(...)`, comments and newlines allowed inside."""

    name: str
    append: bool
    elements: tuple[Word, ...]
    start: int
    end: int


def lex(src: str, redirects: bool = False) -> list[Word | Operator | ArrayAssign]:
    """Tokenize `src`. Comments are dropped, redirections (`>f`, `2>&1`, `<in`, `&>f`) are
    dropped with their target word, heredoc bodies (`<<EOF`, `<<-EOF`, `<<'EOF'`) are
    skipped entirely. `\\r` counts as whitespace. `redirects=True` keeps each redirection as
    a `Redirect` token (with where a heredoc's body lies)."""
    tokens = _Lexer(_as_text(src)).run()
    return tokens if redirects else [t for t in tokens if not isinstance(t, Redirect)]


@record
class Heredoc:
    """A here-document: `<<DELIM` (`<<-`, quoted delimiter) and where its body lies.
    body_start/body_end: the body lines (terminator line excluded); -1 until the body is read.
    quoted: the delimiter was quoted (`<<'EOF'`): no expansion happens in the body."""

    delim: str
    strip_tabs: bool
    quoted: bool
    start: int
    body_start: int = -1
    body_end: int = -1


@record
class Redirect:
    """A redirection kept for readers that need it (`> x.yaml`, `<<EOF`); `target` is the
    word it names (None for a heredoc)."""

    op: str
    start: int
    end: int
    target: Word | None = None
    heredoc: Heredoc | None = None


@record
class SimpleCommand:
    assignments: list[Word]   # leading NAME=value words (value part not split out)
    arrays: list[ArrayAssign]  # array assignments in this command position
    words: list[Word]         # the command words after the assignments
    start: int
    end: int
    # where it sits in if/elif/else and case arms: ((construct id, arm), ...) outermost first;
    # two commands are in exclusive arms when they share a construct id with different arms
    branch: tuple[tuple[int, int], ...] = ()
    redirects: list[Redirect] = field(default_factory=list)
    # the `for` loops around it, outermost first: each the words of its header (`i in 0 1 2`,
    # `(( i=0; i<N; i++ ))`); a `while`/`until` loop is None
    loops: tuple = ()

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, assignments, arrays, words, start, end, branch=(), redirects=MISSING, loops=()):
        self.assignments = assignments
        self.arrays = arrays
        self.words = words
        self.start = start
        self.end = end
        self.branch = branch
        self.redirects = [] if redirects is MISSING else redirects
        self.loops = loops


def exclusive(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> bool:
    """True when commands at branch paths `a` and `b` can never both run (different arms of
    one if/case)."""
    for (ida, arma), (idb, armb) in zip(a, b):
        if ida != idb:
            return False
        if arma != armb:
            return True
    return False


# The text commands() lexed last, and its tokens: compose and Kubernetes read one `command:`
# string twice (scan_shell, then split_words when it held no launch). Tokens are never
# changed after lexing, so two readers can share them.
_last_lexed: tuple[str, list] = ("", [])


def commands(src: str, tokens: list | None = None) -> list[SimpleCommand]:
    """Split lexed tokens into simple commands at operators; reserved words that open or
    separate compound commands (if then elif else fi for while until do done case esac
    in-case-patterns function-headers `name()`, `{`, `}`, `!`, `[[ ... ]]` kept as words)
    are not part of the next command's words. A command with only assignments is kept
    (it is how `X=1` and arrays are recorded). `tokens`: `lex(src, redirects=True)` when the
    caller has it already (lex_checked)."""
    global _last_lexed
    text = _as_text(src)
    if tokens is None:
        last_text, tokens = _last_lexed
        if text != last_text:
            tokens = lex(text, redirects=True)
            _last_lexed = (text, tokens)
    return _CommandSplitter(text, tokens).run()


_END_MARK = "\n\n__vllmlint_end_of_script__\n"


def lex_checked(text: str) -> tuple[int | None, list | None]:
    """(offset of the word in which a quote, `$(`, `${` or backtick opens and never closes, or
    None; `lex(text, redirects=True)` when it could be read off the same pass, else None).

    The text is lexed with a marker word after it: a construct still open at the end of the
    text swallows the marker (bash refuses such a script; an unterminated heredoc is not
    reported: bash only warns). When nothing straddles the end and the text ends with a plain
    newline, the tokens before the marker are the text's own (the lexer reads left to right and
    its look-aheads never match the marker), so the caller need not lex again."""
    end = len(text)
    lexer = _Lexer(text + _END_MARK)
    tokens = lexer.run()
    # Tokens come in order and never overlap, so those starting before `end` are a prefix and
    # only the last of them can straddle it; the few after it are the marker's.
    k = len(tokens)
    while k and tokens[k - 1].start >= end:
        k -= 1
    last = tokens[k - 1] if k else None
    bad = last.start if last is not None and not isinstance(last, Redirect) and last.end > end + 2 else None
    reusable = bad is None and text.endswith("\n") and not text.endswith("\\\n") and not (
        last is not None and last.end > end) and not any(
        t.start < end and _heredoc_reaches(t, end) for t in lexer.heredocs)
    return bad, (tokens[:k] if reusable else None)


def _heredoc_reaches(redirect: Redirect, end: int) -> bool:
    """The heredoc's body is not closed within the first `end` characters."""
    doc = redirect.heredoc
    return not (0 <= doc.body_start <= doc.body_end <= end)


# --------------------------------------------------------------------------------------
# Implementation (private). Everything below is best-effort: the scanners always return a
# position in [0, len(src)] and never index past the end, so `lex` cannot raise.
# --------------------------------------------------------------------------------------

# Characters that end an unquoted word (bash metacharacters, plus \r treated as a blank).
_WORD_STOP = frozenset(" \t\r\n;&|()<>")
# Blanks between tokens; a backslash-newline continuation counts as a blank there.
_BLANKS_RE = re.compile(r"(?:[ \t\r]|\\\r?\n)+")
_CONTINUATIONS_RE = re.compile(r"(?:\\\r?\n)+")
# Runs of characters that need no special handling (fast path, keeps lexing linear).
_PLAIN_RE = re.compile(r"[^ \t\r\n;&|()<>'\"\\$`]+")
# After a plain run these chars surely end the word (`(` may continue an extglob).
_PLAIN_WORD_END = frozenset(" \t\r\n;&|)<>")
# The lexer's main fast path: blanks and a comment (a `#` where a token would start), then
# (1) a plain word followed by a char that surely ends it, or (2) a newline, or (3) an
# operator other than `(` (which may open `((`) and `&` of `&>`, `&>>` (a redirection).
_NEXT_TOKEN_RE = re.compile(r"""
    (?:[ \t\r]|\\\r?\n)*+ (?:\#[^\n]*+)?
    (?: ([^ \t\r\n;&|()<>'"\\$`]++)(?=[ \t\r\n;&|)<>]|\Z)
      | (\n)
      | (;;&|;;|;&|;|&&|&(?!>)|\|\||\|&|\||\))
    )?""", re.X)
# First chars of a plain word that is an fd glued to a redirection (`2>f`, `{fd}>f`) when
# `<` or `>` follows.
_FD_START = frozenset("{0123456789")
_DQ_PLAIN_RE = re.compile(r'[^"\\$`]+')
_BRACE_PLAIN_RE = re.compile(r"[^\\{}'\"$`]+")
_BACKTICK_PLAIN_RE = re.compile(r"[^\\`]+")
_PAREN_PLAIN_RE = re.compile(r"[^\\'\"$`()#<\nce]+")
_ANSI_PLAIN_RE = re.compile(r"[^\\']+")

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_ARRAY_HEAD_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=\(")
# `2>`, `10<`, `{fd}>`: an fd prefix glued to a redirection operator.
_FD_PREFIX_RE = re.compile(r"(?:[0-9]+|\{[A-Za-z_][A-Za-z0-9_]*\})(?=[<>])")
_REDIR_OP_RE = re.compile(r"<<<|<<-|<<|<>|<&|>&|>>|>\||&>>|&>|<|>")
# Inside `[[ ... ]]` these are test operators, not shell operators.
_DBRACKET_OP_RE = re.compile(r"&&|\|\||[&|<>()]")
# Quoted expansions that still expand to several words: "$@", "${a[@]}", "${@:2}", "${!a[@]}".
_QUOTED_SPLIT_RE = re.compile(r"\$(?:@|\{!?(?:@|[A-Za-z_][A-Za-z0-9_]*\[@\]))")

_SPECIAL_PARAMS = frozenset("@*#?$!-0123456789")
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_DQ_ESCAPABLE = frozenset('"\\$`')
_REDIR_START = frozenset("<>&{0123456789")  # first chars of `>f`, `&>f`, `2>f`, `{fd}>f`
# Words after which `[[` / `case` still sit in command position.
_LEADING_RESERVED = frozenset({"if", "elif", "then", "else", "while", "until", "do", "!", "{", "time"})

_ANSI_SIMPLE = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}
_HEX = frozenset("0123456789abcdefABCDEF")
_OCT = frozenset("01234567")

# Nesting limit for $( ${ " ` inside each other: deeper input is scanned flat instead of
# recursively, so hostile input cannot hit Python's recursion limit.
_MAX_DEPTH = 48


def _as_text(src: object) -> str:
    """Accept bytes too (latin-1 keeps offsets equal to byte offsets); never raise."""
    if isinstance(src, str):
        return src
    if isinstance(src, (bytes, bytearray)):
        return bytes(src).decode("latin-1")
    return "" if src is None else str(src)


class _Scanner:
    """Finds where nested constructs ($(..), ${..}, quotes, backticks) end, without
    building values. Each method takes the index just after the opening delimiter and
    returns the index just after the closing one (or len(src) when unterminated)."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.n = len(src)

    def squote_close(self, i: int) -> int:
        """Index of the closing `'` (len(src) when unterminated)."""
        j = self.src.find("'", i)
        return self.n if j < 0 else j

    def squote_end(self, i: int) -> int:
        return min(self.squote_close(i) + 1, self.n)

    def ansi_end(self, i: int) -> int:
        src, n = self.src, self.n
        while i < n:
            m = _ANSI_PLAIN_RE.match(src, i)
            if m:
                i = m.end()
                continue
            if src[i] == "'":
                return i + 1
            i += 2  # backslash escape
        return n

    def backtick_end(self, i: int) -> int:
        src, n = self.src, self.n
        while i < n:
            m = _BACKTICK_PLAIN_RE.match(src, i)
            if m:
                i = m.end()
                continue
            if src[i] == "`":
                return i + 1
            i += 2  # backslash escape
        return n

    def dquote_end(self, i: int, depth: int) -> int:
        src, n = self.src, self.n
        while i < n:
            m = _DQ_PLAIN_RE.match(src, i)
            if m:
                i = m.end()
                continue
            c = src[i]
            if c == '"':
                return i + 1
            if c == "\\":
                i += 2
            elif c == "$":
                i = self.dollar_end(i, depth, in_dq=True)
            else:  # backtick
                i = self.backtick_end(i + 1)
        return n

    def dollar_end(self, i: int, depth: int, in_dq: bool) -> int:
        """`i` is at a `$`. Returns the end of the expansion, or i+1 for a literal `$`."""
        src, n = self.src, self.n
        j = i + 1
        if j >= n:
            return n
        c = src[j]
        if c == "(":
            if depth >= _MAX_DEPTH:
                return j
            arith = j + 1 < n and src[j + 1] == "("
            return self.paren_scan(j + 1, depth + 1, arith)[0]
        if c == "{":
            if depth >= _MAX_DEPTH:
                return j
            return self.brace_end(j + 1, depth + 1, in_dq)
        if c in _NAME_START:
            m = _NAME_RE.match(src, j)
            return m.end() if m else j + 1
        if c in _SPECIAL_PARAMS:
            return j + 1
        return j

    def brace_end(self, i: int, depth: int, in_dq: bool) -> int:
        """Body of `${...}`: braces nest; quotes and expansions inside are skipped."""
        src, n = self.src, self.n
        level = 0
        while i < n:
            m = _BRACE_PLAIN_RE.match(src, i)
            if m:
                i = m.end()
                continue
            c = src[i]
            if c == "}":
                if level == 0:
                    return i + 1
                level -= 1
                i += 1
            elif c == "{":
                level += 1
                i += 1
            elif c == "\\":
                i += 2
            elif c == "'":
                # Inside "${...}" a single quote is an ordinary character.
                i = i + 1 if in_dq else self.squote_end(i + 1)
            elif c == '"':
                i = self.dquote_end(i + 1, depth)
            elif c == "$":
                i = self.dollar_end(i, depth, in_dq)
            else:  # backtick
                i = self.backtick_end(i + 1)
        return n

    def paren_scan(self, i: int, depth: int, arith: bool = False) -> tuple[int, bool]:
        """Body of `$(...)` (or `((...))`, `<(...)`): parens nest, quotes/expansions are
        skipped, and - unless `arith` - comments, heredoc bodies and `case` patterns
        (whose `)` does not close anything) are understood. Returns (end, closed)."""
        src, n = self.src, self.n
        lo = i
        level = 0
        cases = 0
        pending: list[tuple[str, bool]] = []
        while i < n:
            m = _PAREN_PLAIN_RE.match(src, i)
            if m:
                i = m.end()
                continue
            c = src[i]
            if c == "(":
                level += 1
                i += 1
            elif c == ")":
                if level > 0:
                    level -= 1
                elif cases == 0 or arith:
                    return i + 1, True
                i += 1  # a case pattern's `)`
            elif c == "\\":
                i += 2
            elif c == "'":
                i = self.squote_end(i + 1)
            elif c == '"':
                i = self.dquote_end(i + 1, depth)
            elif c == "`":
                i = self.backtick_end(i + 1)
            elif c == "$":
                if i + 1 < n and src[i + 1] == "'":
                    i = self.ansi_end(i + 2)
                else:
                    i = self.dollar_end(i, depth, in_dq=False)
            elif arith:
                i += 1
            elif c == "#" and (i == lo or src[i - 1] in _WORD_STOP):
                j = src.find("\n", i)
                i = n if j < 0 else j
            elif c == "\n":
                i += 1
                if pending:
                    i = self.skip_heredoc_bodies(i, pending)
            elif c == "<":
                i = self._heredoc_op(i, pending)
            elif self._keyword_at(i, "case", lo):
                cases += 1
                i += 4
            elif cases and self._keyword_at(i, "esac", lo):
                cases -= 1
                i += 4
            else:
                i += 1
        return n, False

    def _heredoc_op(self, i: int, pending: list[tuple[str, bool]]) -> int:
        """`i` at `<` inside a command substitution: record `<<DELIM` for later."""
        src = self.src
        if src.startswith("<<<", i):
            return i + 3
        if not src.startswith("<<", i):
            return i + 1
        i += 2
        strip = i < self.n and src[i] == "-"
        i = self.skip_blanks(i + strip)
        delim, i = self.read_heredoc_delim(i)
        if delim is not None:
            pending.append((delim, strip))
        return i

    def _keyword_at(self, i: int, kw: str, lo: int) -> bool:
        """`kw` as a whole word in command position (so `echo case` is not a case)."""
        src = self.src
        end = i + len(kw)
        if not src.startswith(kw, i) or (end < self.n and src[end] not in _WORD_STOP):
            return False
        j = i - 1
        while j >= lo and src[j] in " \t\r":
            j -= 1
        if j < lo or src[j] in ";&|(\n":
            return True
        k = j
        while k >= lo and j - k < 6 and src[k] not in _WORD_STOP:
            k -= 1
        return src[k + 1 : j + 1] in _LEADING_RESERVED

    def skip_blanks(self, i: int) -> int:
        m = _BLANKS_RE.match(self.src, i)
        return m.end() if m else i

    def read_heredoc_delim(self, i: int) -> tuple[str | None, int]:
        """The heredoc delimiter word, quote-removed (`'EOF'`, `"EOF"`, `\\EOF` -> EOF)."""
        src, n = self.src, self.n
        start = i
        parts: list[str] = []
        while i < n:
            c = src[i]
            if c in _WORD_STOP:
                break
            if c == "'":
                close = self.squote_close(i + 1)
                parts.append(src[i + 1 : close])
                i = close + 1
            elif c == '"':
                j = i + 1
                while j < n and src[j] != '"':
                    if src[j] == "\\" and j + 1 < n and src[j + 1] in _DQ_ESCAPABLE:
                        j += 1
                    parts.append(src[j])
                    j += 1
                i = j + 1
            elif c == "\\":
                if i + 1 < n:
                    parts.append(src[i + 1])
                i += 2
            elif c == "$" and i + 1 < n and src[i + 1] in "'\"":
                i += 1
            else:
                parts.append(c)
                i += 1
        if i == start:
            return None, i
        return "".join(parts), min(i, n)

    def skip_heredoc_bodies(self, i: int, pending: list[tuple[str, bool]]) -> int:
        """`i` is at the start of the line after a `<<DELIM` command: skip each pending
        body in order, up to and including its terminator line (or to end of input)."""
        src, n = self.src, self.n
        for delim, strip_tabs in pending:
            while i < n:
                j = src.find("\n", i)
                line_end = n if j < 0 else j
                line = src[i:line_end]
                i = line_end + 1 if j >= 0 else n
                if line.endswith("\r"):  # CRLF files
                    line = line[:-1]
                if strip_tabs:
                    line = line.lstrip("\t")
                if line == delim:
                    break
        pending.clear()
        return i


# 0, 1, 2, ...: a word's offsets are a slice of it, 3x faster than tuple(range(...)), and the
# words share the int objects. Made on first use; a longer text gets its own.
_SHARED_POSITIONS = 1 << 14
_positions: tuple[int, ...] = ()


def _positions_for(n: int) -> tuple[int, ...]:
    global _positions
    if n >= _SHARED_POSITIONS:
        return tuple(range(n + 1))
    if not _positions:
        _positions = tuple(range(_SHARED_POSITIONS))
    return _positions


class _Lexer(_Scanner):
    def __init__(self, src: str) -> None:
        super().__init__(src)
        self.positions = _positions_for(self.n)
        self.tokens: list[Word | Operator | ArrayAssign] = []
        self.pending: list[tuple[str, bool]] = []  # heredocs whose bodies come next line
        self.pending_docs: list[Heredoc] = []
        self.heredocs: list[Redirect] = []  # every heredoc's redirection, for lex_checked
        self.in_dbracket = False
        self.probe_arith = True

    def run(self) -> list[Word | Operator | ArrayAssign]:
        try:
            self._run()
        except RecursionError:  # only reachable when the caller is already very deep
            pass
        return self.tokens

    def _run(self) -> None:
        src, n = self.src, self.n
        tokens, positions = self.tokens, self.positions
        next_token = _NEXT_TOKEN_RE.match
        i = 0
        while i < n:
            # Fast paths, the common cases: blanks and a comment, then a plain word, a newline
            # or an operator other than `(`, all in one regex match.
            m = next_token(src, i)
            i = m.end()
            kind = m.lastindex
            if kind == 1:
                start = m.start(1)
                raw = m.group(1)
                if raw[0] in _FD_START and i < n and src[i] in "<>":
                    i = start  # `2>f`, `{fd}>f`: a redirection
                else:
                    if self.in_dbracket:
                        if raw == "]]":
                            self.in_dbracket = False
                    elif raw == "{" or raw == "}":
                        tokens.append(Operator(raw, start, i))
                        continue
                    elif raw == "[[" and self._in_command_position():
                        self.in_dbracket = True
                    tokens.append(Word(raw, start, i, positions[start:i]))
                    continue
            elif kind == 2:
                tokens.append(Operator("\n", i - 1, i))
                self.in_dbracket = False
                if self.pending:
                    i = self._bodies(i)
                continue
            elif kind == 3:
                op = m.group(3)
                if op[0] == ";" or not self.in_dbracket:
                    # `;;&` and `;&` also end a case item
                    tokens.append(Operator(";;" if op[0] == ";" and len(op) > 1 else op, m.start(3), i))
                    self.in_dbracket = False  # `;` (or anything else) ends an unterminated `[[`
                    continue
                i = m.start(3)
            if i >= n:
                break
            c = src[i]
            if self.in_dbracket and c != ";":
                i = self._dbracket_token(i)
            elif c in _REDIR_START and (j := self._redirection(i)) is not None:
                i = j
            elif c in ";&|()":
                i = self._operator(i)
            elif c in _NAME_START and (m := _ARRAY_HEAD_RE.match(src, i)) is not None:
                i = self._array(i, m)
            else:
                i = self._plain_word(i)

    # -- tokens ---------------------------------------------------------------------

    def _operator(self, i: int) -> int:
        src = self.src
        self.in_dbracket = False  # `;` (or anything else) ends an unterminated `[[`
        if self.probe_arith and src.startswith("((", i):
            end, closed = self.paren_scan(i + 1, 0, arith=True)
            if closed and src[end - 2 : end] == "))":
                # `(( expr ))` arithmetic command: one opaque word, not two subshells.
                self.tokens.append(Word(src[i:end], i, end, self.positions[i:end], True, False))
                return end
            if not closed:
                # The probe ran to end of input; probing again later could make
                # `((((...` quadratic, so later `((` are lexed as plain parens.
                self.probe_arith = False
        for op in (";;&", ";;", ";&", "&&", "||", "|&"):
            if src.startswith(op, i):
                text = ";;" if op[0] == ";" else op  # ;& and ;;& also end a case item
                self.tokens.append(Operator(text, i, i + len(op)))
                return i + len(op)
        self.tokens.append(Operator(src[i], i, i + 1))
        return i + 1

    def _redirection(self, i: int) -> int | None:
        """Drop a redirection and its target word; heredocs are queued for skipping."""
        src, n = self.src, self.n
        m = _FD_PREFIX_RE.match(src, i)
        j = m.end() if m else i
        op_m = _REDIR_OP_RE.match(src, j)
        if op_m is None:
            return None
        op = op_m.group()
        k = op_m.end()
        if op in ("<", ">") and k < n and src[k] == "(":
            if j == i:
                return None  # process substitution `<(cmd)`: a word
            return self.paren_scan(k + 1, 0)[0]
        k = self.skip_blanks(k)
        if op in ("<<", "<<-"):
            dstart = k
            delim, k = self.read_heredoc_delim(k)
            if delim is not None:
                self.pending.append((delim, op == "<<-"))
                doc = Heredoc(delim, op == "<<-", any(ch in "'\"\\" for ch in src[dstart:k]), i)
                self.pending_docs.append(doc)
                redirect = Redirect(op, i, k, None, doc)
                self.tokens.append(redirect)
                self.heredocs.append(redirect)
            return k
        target = None
        if k < n and (src[k] not in _WORD_STOP or src.startswith(("<(", ">("), k)):
            target, k = self._read_word(k)
        self.tokens.append(Redirect(op, i, k, target))
        return k

    def _bodies(self, i: int) -> int:
        """Skip the pending heredoc bodies, recording where each one lies."""
        docs, self.pending_docs = self.pending_docs, []
        if len(docs) != len(self.pending):
            return self.skip_heredoc_bodies(i, self.pending)
        for doc, item in zip(docs, list(self.pending)):
            doc.body_start = i
            end = self.skip_heredoc_bodies(i, [item])
            # the terminator line is the last line skipped
            term = self.src.rfind("\n", i, max(i, end - 1))
            doc.body_end = i if term < 0 else term + 1
            if end >= self.n and not self._ends_with_delim(i, end, item[0]):
                doc.body_end = self.n
            i = end
        self.pending.clear()
        return i

    def _ends_with_delim(self, i: int, end: int, delim: str) -> bool:
        last = self.src[i:end].rstrip("\n").rsplit("\n", 1)[-1].rstrip("\r").lstrip("\t")
        return last == delim

    def _plain_word(self, i: int) -> int:
        word, end = self._read_word(i)
        if end <= i:  # cannot happen for a non-stop char; guard against looping forever
            return i + 1
        raw = self.src[word.start : word.end]
        if raw in ("{", "}"):
            self.tokens.append(Operator(raw, word.start, word.end))
            return end
        if raw == "[[" and self._in_command_position():
            self.in_dbracket = True
        self.tokens.append(word)
        return end

    def _in_command_position(self) -> bool:
        if not self.tokens:
            return True
        last = self.tokens[-1]
        return isinstance(last, Operator) or (
            isinstance(last, Word) and last.value in _LEADING_RESERVED
        )

    def _dbracket_token(self, i: int) -> int:
        """Inside `[[ ... ]]`: `<`, `&&`, `(` ... are test operators, kept as words."""
        src = self.src
        m = _DBRACKET_OP_RE.match(src, i)
        if m:
            end = m.end()
            self.tokens.append(Word(m.group(), i, end, self.positions[i:end]))
            return end
        word, end = self._read_word(i)
        if end <= i:
            return i + 1
        if src[word.start : word.end] == "]]":
            self.in_dbracket = False
        self.tokens.append(word)
        return end

    def _array(self, i: int, head: re.Match[str]) -> int:
        """`NAME=( ... )`: elements are words; blanks, newlines and comments separate."""
        src, n = self.src, self.n
        elements: list[Word] = []
        k = head.end()
        while k < n:
            m = _BLANKS_RE.match(src, k)
            if m:
                k = m.end()
                continue
            c = src[k]
            if c == ")":
                k += 1
                break
            if c == "\n":
                k += 1
                if self.pending:
                    k = self.skip_heredoc_bodies(k, self.pending)
            elif c == "#":
                j = src.find("\n", k)
                k = n if j < 0 else j
            elif c in _WORD_STOP and not src.startswith(("<(", ">("), k):
                k += 1  # stray metacharacter: a syntax error for bash; ignore it
            else:
                word, end = self._read_word(k)
                elements.append(word)
                k = max(end, k + 1)
        name, plus = head.group(1), head.group(2)
        self.tokens.append(ArrayAssign(name, plus == "+", tuple(elements), i, min(k, n)))
        return k

    # -- words ----------------------------------------------------------------------

    def _read_word(self, i: int) -> tuple[Word, int]:
        """Read one word starting at `i`; returns it and the index after it."""
        src, n = self.src, self.n
        start = i
        m = _PLAIN_RE.match(src, i)
        if m and (m.end() >= n or src[m.end()] in _PLAIN_WORD_END):
            # Fast path: the whole word is ordinary characters (the common case).
            end = m.end()
            return Word(m.group(), start, end, self.positions[start:end]), end
        vals: list[str] = []
        offs: list[int] = []
        dynamic = splits = False

        def keep_raw(a: int, b: int) -> None:
            vals.append(src[a:b])
            offs.extend(range(a, b))

        while i < n:
            m = _PLAIN_RE.match(src, i)
            if m:
                keep_raw(i, m.end())
                i = m.end()
                continue
            c = src[i]
            if c in _WORD_STOP:
                if c in "<>" and i == start and i + 1 < n and src[i + 1] == "(":
                    end = self.paren_scan(i + 2, 0)[0]  # process substitution
                    keep_raw(i, end)
                    dynamic = True
                    i = end
                    continue
                if c == "(" and i > start and src[i - 1] in "@!+*?":
                    end = self.paren_scan(i + 1, 0, arith=True)[0]  # extglob @(a|b)
                    keep_raw(i, end)
                    i = end
                    continue
                break
            if c == "'":
                close = self.squote_close(i + 1)
                keep_raw(i + 1, close)
                i = min(close + 1, n)
            elif c == '"':
                i, d, s = self._double_quoted(i + 1, vals, offs)
                dynamic |= d
                splits |= s
            elif c == "\\":
                cont = _CONTINUATIONS_RE.match(src, i)
                if cont:
                    # Line continuation: vanishes; it never ends a word by itself, but a
                    # trailing one before a blank belongs to the gap, not the word.
                    if cont.end() >= n or src[cont.end()] in _WORD_STOP:
                        break
                    i = cont.end()
                elif i + 1 < n:
                    vals.append(src[i + 1])
                    offs.append(i + 1)
                    i += 2
                else:  # backslash at end of input stays literal
                    keep_raw(i, i + 1)
                    i += 1
            elif c == "$":
                nxt = src[i + 1] if i + 1 < n else ""
                if nxt == "'":
                    i = self._ansi_c(i + 2, vals, offs)
                elif nxt == '"':
                    i += 1  # $"..." locale string: treat as "..."
                else:
                    end = self.dollar_end(i, 0, in_dq=False)
                    keep_raw(i, end)
                    if end > i + 1:
                        dynamic = splits = True
                    i = end
            else:  # backtick
                end = self.backtick_end(i + 1)
                keep_raw(i, end)
                dynamic = splits = True
                i = end
        end = min(i, n)
        return Word("".join(vals), start, end, tuple(offs), dynamic, splits), end

    def _double_quoted(self, i: int, vals: list[str], offs: list[int]) -> tuple[int, bool, bool]:
        """Body of "...": only \\" \\\\ \\$ \\` and backslash-newline are escapes."""
        src, n = self.src, self.n
        dynamic = splits = False
        while i < n:
            m = _DQ_PLAIN_RE.match(src, i)
            if m:
                vals.append(m.group())
                offs.extend(range(i, m.end()))
                i = m.end()
                continue
            c = src[i]
            if c == '"':
                return i + 1, dynamic, splits
            if c == "\\":
                cont = _CONTINUATIONS_RE.match(src, i)
                if cont:
                    i = cont.end()
                elif i + 1 < n and src[i + 1] in _DQ_ESCAPABLE:
                    vals.append(src[i + 1])
                    offs.append(i + 1)
                    i += 2
                else:
                    vals.append("\\")
                    offs.append(i)
                    i += 1
                continue
            if c == "$":
                end = self.dollar_end(i, 0, in_dq=True)
                if end > i + 1:
                    dynamic = True
                    splits |= _QUOTED_SPLIT_RE.match(src, i) is not None
            else:  # backtick
                end = self.backtick_end(i + 1)
                dynamic = True
            vals.append(src[i:end])
            offs.extend(range(i, end))
            i = end
        return n, dynamic, splits

    def _ansi_c(self, i: int, vals: list[str], offs: list[int]) -> int:
        """Body of $'...': decode escapes; a decoded char maps to its backslash."""
        src, n = self.src, self.n
        while i < n:
            m = _ANSI_PLAIN_RE.match(src, i)
            if m:
                vals.append(m.group())
                offs.extend(range(i, m.end()))
                i = m.end()
                continue
            if src[i] == "'":
                return i + 1
            char, end = self._ansi_escape(i)
            if char is None:  # unknown escape: bash keeps the backslash
                vals.append("\\")
                offs.append(i)
                i += 1
            else:
                vals.append(char)
                offs.append(i)
                i = end
        return n

    def _ansi_escape(self, i: int) -> tuple[str | None, int]:
        """`i` at a backslash inside $'...'. Returns (decoded char or None, end)."""
        src, n = self.src, self.n
        if i + 1 >= n:
            return None, i + 1
        c = src[i + 1]
        if c in _ANSI_SIMPLE:
            return _ANSI_SIMPLE[c], i + 2
        if c == "c" and i + 2 < n and src[i + 2] != "'":
            return chr(ord(src[i + 2]) & 0x1F), i + 3
        if c in _OCT:
            digits, base = _take(src, i + 1, 3, _OCT), 8
        elif c in "xuU":
            digits, base = _take(src, i + 2, {"x": 2, "u": 4, "U": 8}[c], _HEX), 16
            if not digits:
                return None, i + 1
        else:
            return None, i + 1
        code = int(digits, base)
        if code > 0x10FFFF:
            return None, i + 1
        start = i + 1 if base == 8 else i + 2
        return chr(code), start + len(digits)


def _take(src: str, i: int, limit: int, allowed: frozenset[str]) -> str:
    """Up to `limit` characters of `allowed` starting at `i`."""
    j = i
    while j < len(src) and j - i < limit and src[j] in allowed:
        j += 1
    return src[i:j]


# --------------------------------------------------------------------------------------
# commands(): a small state machine over the token stream.
# --------------------------------------------------------------------------------------

# Reserved words that open/separate compound commands: skipped, the next word is still
# in command position. (`time` is deliberately treated as a normal word.)
_SKIP_RESERVED = frozenset(
    {"if", "then", "elif", "else", "fi", "while", "until", "do", "done", "!", "coproc"}
)


# Modes in which words are a header's, not a command's (see _CommandSplitter._skipped).
_HEADER_MODES = frozenset({"for_head", "case_head", "case_pattern", "func_name"})


class _CommandSplitter:
    def __init__(self, src: str, tokens: list[Word | Operator | ArrayAssign]) -> None:
        self.src = src
        self.tokens = tokens
        self.out: list[SimpleCommand] = []
        self.cur: SimpleCommand | None = None
        # "normal", "for_head" (until ; or newline), "case_head" (until `in`),
        # "case_pattern" (until `)`), "func_name", "func_parens".
        self.mode = "normal"
        self.case_depth = 0
        # open if/case constructs: [construct id, arm, "if"|"case"]
        self.branches: list[list] = []
        self.next_branch = 0
        self.loose_redirects: list[Redirect] = []
        self.loops: list = []
        self.header: list[Word] | None = None

    def _open(self, what: str) -> None:
        self.next_branch += 1
        self.branches.append([self.next_branch, 0, what])

    def _arm(self, what: str) -> None:
        if self.branches and self.branches[-1][2] == what:
            self.branches[-1][1] += 1

    def _close(self, what: str) -> None:
        if self.branches and self.branches[-1][2] == what:
            self.branches.pop()

    def run(self) -> list[SimpleCommand]:
        toks = self.tokens
        src = self.src
        n = len(toks)
        i = 0
        while i < n:
            tok = toks[i]
            kind = type(tok)
            # Fast paths, the common cases: a word inside a command, an operator in normal mode.
            if kind is Word and self.cur is not None and self.mode not in _HEADER_MODES:
                self.mode = "normal"
                cmd = self.cur
                if not cmd.words and _ASSIGN_RE.match(src, tok.start) and tok.end > tok.start:
                    cmd.assignments.append(tok)
                else:
                    cmd.words.append(tok)
                if tok.end > cmd.end:
                    cmd.end = tok.end
                i += 1
                continue
            if kind is Operator and self.mode == "normal" and tok.text != ";;":
                if self.cur is not None:
                    self.out.append(self.cur)
                    self.cur = None
                i += 1
                continue
            if kind is Redirect:
                if self.cur is not None:
                    self.cur.redirects.append(tok)
                else:
                    self.loose_redirects.append(tok)
            elif kind is Operator:
                self._operator(tok)
            elif self.mode in _HEADER_MODES:
                self._skipped(tok)
            elif kind is ArrayAssign:
                self.mode = "normal"
                self._add(tok).arrays.append(tok)
            else:
                self.mode = "normal"
                if self.cur is None and self._is_function_header(i):
                    i += 3  # `name ( )`
                    continue
                self._word(tok)
            i += 1
        self._flush()
        return self.out

    def _operator(self, op: Operator) -> None:
        self._flush()
        if self.mode == "case_pattern":
            if op.text == ")":
                self.mode = "normal"
        elif self.mode == "case_head":
            if op.text != "\n":  # `case x; ...` without `in`: give up on this case
                self._end_case()
        elif self.mode == "func_parens" and op.text in "()":
            pass
        elif op.text == ";;" and self.case_depth:
            self.mode = "case_pattern"
            self._arm("case")
        else:
            self.mode = "normal"

    def _skipped(self, tok: Word | ArrayAssign) -> None:
        """Tokens of a `for`/`case` header, a case pattern or a function name."""
        if self.mode == "for_head" and isinstance(tok, Word) and self.header is not None:
            self.header.append(tok)
        value = tok.value if isinstance(tok, Word) and self._unquoted(tok) else None
        if self.mode == "case_head" and value == "in":
            self.mode = "case_pattern"
        elif self.mode == "case_pattern" and value == "esac":
            self._end_case()
        elif self.mode == "case_pattern" and value is not None:
            pass
        elif self.mode == "func_name":
            self.mode = "func_parens"

    def _word(self, w: Word) -> None:
        if self.cur is None and self._unquoted(w):
            v = w.value
            if v in _SKIP_RESERVED:
                if v in ("while", "until"):
                    self.header = None
                elif v == "do":
                    self.loops.append(tuple(self.header) if self.header is not None else None)
                    self.header = None
                elif v == "done" and self.loops:
                    self.loops.pop()
                if v == "if":
                    self._open("if")
                elif v in ("elif", "else"):
                    self._arm("if")
                elif v == "fi":
                    self._close("if")
                return
            if v == "esac":
                self._end_case()
                return
            if v in ("for", "select"):
                self.mode = "for_head"
                self.header = [] if v == "for" else None
                return
            if v == "case":
                self.mode = "case_head"
                self.case_depth += 1
                self._open("case")
                return
            if v == "function":
                self.mode = "func_name"
                return
        cmd = self._add(w)
        if not cmd.words and _ASSIGN_RE.match(self.src, w.start) and w.end > w.start:
            cmd.assignments.append(w)
        else:
            cmd.words.append(w)

    def _is_function_header(self, i: int) -> bool:
        toks = self.tokens
        return (
            i + 2 < len(toks)
            and type(toks[i + 1]) is Operator and toks[i + 1].text == "("
            and type(toks[i + 2]) is Operator and toks[i + 2].text == ")"
        )

    def _end_case(self) -> None:
        self._close("case")
        self.case_depth = max(0, self.case_depth - 1)
        self.mode = "normal"

    def _unquoted(self, w: Word) -> bool:
        return self.src[w.start : w.end] == w.value

    def _add(self, tok: Word | ArrayAssign) -> SimpleCommand:
        if self.cur is None:
            branch = tuple([(b[0], b[1]) for b in self.branches]) if self.branches else ()
            self.cur = SimpleCommand([], [], [], tok.start, tok.end, branch, loops=tuple(self.loops))
            if self.loose_redirects:
                self.cur.redirects.extend(self.loose_redirects)
                self.loose_redirects = []
        self.cur.end = max(self.cur.end, tok.end)
        return self.cur

    def _flush(self) -> None:
        if self.cur is not None:
            self.out.append(self.cur)
            self.cur = None
