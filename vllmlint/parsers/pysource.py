"""Python front end, the source text: string literals re-read with each character's
position, ast children, call arguments and (line, column) -> character offsets.

Shared by the front end's readers (pywalk, pyargv, pyenv, pycontainer, pycommand, pyengine).
"""
from __future__ import annotations

import ast
import re
import unicodedata
from ..model.record import field, record

from .detect import REFERENCE_PROXIES
from ..model.launch import ParseError

# A string mentioning one of these is read as a shell command (unless it is plainly prose).
SHELL_MARKERS = ("vllm serve", "vllm launch", "api_server", "-m vllm") + tuple(REFERENCE_PROXIES)
SHELL_FUNCS = {"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput",
               "getoutput", "getstatusoutput", "asyncio.create_subprocess_shell",
               "create_subprocess_shell", "commands.getoutput"}
SUBPROCESS_FUNCS = {"Popen", "run", "call", "check_call", "check_output"}
# Calls whose string arguments are text, not commands.
TEXT_FUNCS = {"print", "log", "debug", "info", "warning", "warn", "error", "exception", "critical",
              "fatal", "echo", "secho", "write", "startswith", "endswith", "find", "rfind", "index",
              "rindex", "count", "replace", "split", "rsplit", "partition", "rpartition", "strip",
              "lstrip", "rstrip", "removeprefix", "removesuffix", "match", "search", "fullmatch",
              "sub", "subn", "findall", "finditer", "compile", "add_argument", "Exception",
              "ValueError", "RuntimeError", "TypeError", "KeyError", "AssertionError", "SystemExit"}
TEXT_KEYWORDS = {"help", "description", "epilog", "usage", "msg", "message", "doc", "title"}
# a dict key with one of these words holds text about a command, not one that runs
# (`"deployment_equivalent": f"vllm serve {model} ..."` in a status dict: found on
# robbypambudi/ray-vllm-benchmark, where `migrate` appended a flag to two such strings)
DESCRIPTIVE_KEY_WORDS = TEXT_KEYWORDS | {"equivalent", "example", "examples", "hint", "note", "notes", "comment",
                                         "summary", "explanation", "caption", "tooltip", "docs"}
_KEY_WORD_RE = re.compile(r"[a-z0-9]+")


def descriptive_key(key: str) -> bool:
    return any(w in DESCRIPTIVE_KEY_WORDS for w in _KEY_WORD_RE.findall(key.lower()))
JSON_DUMPS_KW = {"indent", "separators", "sort_keys", "ensure_ascii"}
LIST_MUTATORS = {"remove", "pop", "clear", "sort", "reverse", "__setitem__", "__delitem__"}
LINE_RE = re.compile(r"\r\n|\r|\n")
PYTHON_WORD_RE = re.compile(r"^python[\d.]*$")
PLACEHOLDER_RE = re.compile(r"\$\{__vlpy(\d+)__\}")
FORMAT_FIELD_RE = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
PERCENT_FIELD_RE = re.compile(r"%%|%(?:\([^)]*\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa]")
SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n",
                  "r": "\r", "t": "\t", "v": "\v"}


# Python's parser measures nesting for us, but our own walk recurses once per level, and a few
# hundred levels make any tool slow. Real launchers nest a few dozen levels.
MAX_NESTING = 100


def _parse(text: str) -> tuple[ast.Module, bool]:
    """Parse with Python's own parser (ast.parse only parses: nothing is compiled or run; it
    fails cleanly on deep input), refusing code nested deeper than MAX_NESTING. bool: the text
    holds NUL bytes, which ast.parse refuses: they are read as blanks (one byte, one character:
    positions are kept), and no literal holding one is read."""
    too_deep = ParseError(1, f"Python code nested too deeply (more than {MAX_NESTING} levels)")
    # a dotted name of thousands of parts also takes CPython's parser quadratic time
    if any(m.group().count(".") > MAX_NESTING for m in re.finditer(r"[\w.]{%d,}" % (2 * MAX_NESTING), text)):
        raise too_deep
    nul = "\x00" in text
    try:
        tree = ast.parse(text.replace("\x00", " ") if nul else text)
    except (RecursionError, MemoryError):
        raise too_deep from None
    except SyntaxError as err:
        if "too many" in str(err.msg) or "too deeply" in str(err.msg):
            raise ParseError(err.lineno or 1, too_deep.reason) from None
        depth = deepest = 0
        for m in re.finditer(r"[()\[\]{}]", text):
            depth = depth + 1 if m.group() in "([{" else max(0, depth - 1)
            deepest = max(deepest, depth)
        if deepest > MAX_NESTING:
            raise too_deep from None
        raise ParseError(err.lineno or 1, f"Python syntax error: {err.msg}{_newer_syntax(err)}") from None
    except ValueError as err:
        raise ParseError(1, f"Python syntax error: {err}") from None
    return tree, nul


def _newer_syntax(err: SyntaxError) -> str:
    """Why a file may still be valid Python: an f-string error before 3.12 is often PEP 701
    syntax (quotes reused inside the braces), which only 3.12's parser reads (found on
    robbypambudi/ray-vllm-benchmark: a valid 3.12 script was an E000 on 3.11)."""
    import sys

    # a backslash inside the braces (`f"{a + "\n"}"`) fails before the f-string is seen (found
    # as a user on zhijie-group/d2f_vllm): "unexpected character after line continuation character"
    in_braces = re.search(r"(?i)(?<![\w])[rb]?f[rb]?[\"'].*\{[^}]*\\", err.text or "")
    if sys.version_info < (3, 12) and (str(err.msg).startswith("f-string") or in_braces):
        return (f" (Python 3.12 reads f-strings that reuse their quotes or hold backslashes; this is Python "
                f"{sys.version_info[0]}.{sys.version_info[1]}: run vllmlint on 3.12 or later to read this file)")
    return ""


class _TooDeep(Exception):
    """The walk went deeper than MAX_NESTING: _check_nesting says where."""


def _check_nesting(tree: ast.Module) -> None:
    """Refuse code nested deeper than MAX_NESTING (each node one level below its parent; an
    `a and b and ...` chain one level per operand, a dotted import one per part)."""
    todo = [(tree, 0)]
    while todo:
        node, depth = todo.pop()
        depth += 1
        if isinstance(node, ast.BoolOp):
            depth += len(node.values) - 1
        elif isinstance(node, ast.Import):
            depth += max(a.name.count(".") for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            depth += (node.module or "").count(".")
        if depth > MAX_NESTING:
            raise ParseError(getattr(node, "lineno", 1),
                             f"Python code nested too deeply (more than {MAX_NESTING} levels)")
        todo.extend((child, depth) for child in ast.iter_child_nodes(node))


# -- string literals ---------------------------------------------------------------------------

@record
class Lit:
    """Decoded characters of a literal: (char, source start, source end) each."""
    chars: list[tuple[str, int, int]]

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, chars):
        self.chars = chars


@record
class Dyn:
    """A part known only at run time: how it is written, and where."""
    display: str
    span: tuple[int, int]


def decode_body(raw: str, base: int, is_raw: bool, fstring: bool) -> list[tuple[str, int, int]] | None:
    """Decode the body of a str literal, keeping where every character comes from."""
    out: list[tuple[str, int, int]] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\r":                       # Python reads any line break as "\n"
            step = 2 if raw.startswith("\r\n", i) else 1
            out.append(("\n", base + i, base + i + step))
            i += step
            continue
        if fstring and c in "{}" and raw.startswith(c + c, i):
            out.append((c, base + i, base + i + 2))
            i += 2
            continue
        if c == "\\" and i + 1 < n and not is_raw:
            nxt = raw[i + 1]
            if nxt == "\n":
                i += 2
                continue
            if nxt == "\r":
                i += 3 if raw.startswith("\r\n", i + 1) else 2
                continue
            if nxt in SIMPLE_ESCAPES:
                out.append((SIMPLE_ESCAPES[nxt], base + i, base + i + 2))
                i += 2
                continue
            if nxt in "01234567":
                m = re.match(r"[0-7]{1,3}", raw[i + 1:])
                assert m
                out.append((chr(int(m.group(0), 8)), base + i, base + i + 1 + m.end()))
                i += 1 + m.end()
                continue
            width = {"x": 2, "u": 4, "U": 8}.get(nxt)
            if width:
                digits = raw[i + 2:i + 2 + width]
                if len(digits) != width or not re.fullmatch(r"[0-9a-fA-F]+", digits):
                    return None
                out.append((chr(int(digits, 16)), base + i, base + i + 2 + width))
                i += 2 + width
                continue
            if nxt == "N":
                m = re.match(r"\{([^}]*)\}", raw[i + 2:])
                if not m:
                    return None
                try:
                    ch = unicodedata.lookup(m.group(1))
                except KeyError:
                    return None
                out.append((ch, base + i, base + i + 2 + m.end()))
                i += 2 + m.end()
                continue
            # an unknown escape keeps its backslash
        out.append((c, base + i, base + i + 1))
        i += 1
    return out


def _fields(pieces: list[Lit | Dyn], pattern: re.Pattern, escapes: dict[str, str]) -> list[Lit | Dyn]:
    """Turn `{...}` (str.format) or `%s` (printf) fields of literal pieces into Dyn parts."""
    out: list[Lit | Dyn] = []
    for piece in pieces:
        if isinstance(piece, Dyn):
            out.append(piece)
            continue
        text = "".join(c for c, _, _ in piece.chars)
        pos, cur = 0, []
        for m in pattern.finditer(text):
            cur.extend(piece.chars[pos:m.start()])
            chunk = piece.chars[m.start():m.end()]
            if m.group(0) in escapes:
                cur.append((escapes[m.group(0)], chunk[0][1], chunk[-1][2]))
            else:
                if cur:
                    out.append(Lit(cur))
                    cur = []
                out.append(Dyn(m.group(0), (chunk[0][1], chunk[-1][2])))
            pos = m.end()
        cur.extend(piece.chars[pos:])
        if cur:
            out.append(Lit(cur))
    return out


# -- the parser --------------------------------------------------------------------------------

@record
class Seg:
    """One contribution to an argv list: items of a list literal, one appended item, or an
    expression we cannot read (its items are unknown)."""
    kind: str                      # list | item | opaque
    node: object                      # the list literal, the item, or the opaque expression
    elems: list = field(default_factory=list)    # kind == list: the element nodes taken
    owner: str = ""                # key of the named list that wrote it ("" for anonymous)
    splits: bool = False           # item added in a loop: any number of items


# Chain and Scope point at each other (a scope's chains, a chain's scope): compared by identity,
# as graph nodes are (a generated field-by-field __eq__ recursed without end on two equal chains
# of a function defined twice)
@record(eq=False)
class Chain:
    key: str                       # "" for a list literal / `+` expression used in place
    scope: "Scope"
    anchor: object
    segs: list[Seg] = field(default_factory=list)
    unfollowable: str | None = None
    consumed: int = 0


@record(eq=False)
class Scope:
    name: str                      # qualified function or class name; "" for the module
    parent: "Scope | None"
    is_class: bool = False
    chains: dict[str, Chain] = field(default_factory=dict)
    strings: dict[str, object] = field(default_factory=dict)
    programs: dict[str, str] = field(default_factory=dict)   # name -> the program its path names
    loops: int = 0


@record
class StringCandidate:
    node: object
    scope: Scope
    prose: bool                    # docstring, log message, comparison, ...
    forced: bool = False           # handed to a shell (shell=True, os.system, ...)

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, node, scope, prose, forced=False):
        self.node = node
        self.scope = scope
        self.prose = prose
        self.forced = forced


class _Arg:
    """An argument of a call or class statement, as written: `x`, `*x`, `k=x`, `**x` (ast keeps
    positional and keyword arguments apart; the walk and the fixes want them in source order)."""
    __slots__ = ("keyword", "star", "value", "node", "owner")

    def __init__(self, keyword: str | None, star: str, value, node, owner):
        self.keyword, self.star, self.value, self.node, self.owner = keyword, star, value, node, owner


class _Wrap:
    """A parameter's annotation (ast puts an `arg` node between it and the parameter list)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _Tok:
    """One string literal token of an (implicitly concatenated) ast string node."""
    __slots__ = ("start", "end", "prefix", "quote", "parts")

    def __init__(self, start: int, end: int, prefix: str, quote: str, parts):
        self.start, self.end, self.prefix, self.quote, self.parts = start, end, prefix, quote, parts


# fields that never hold a child we walk (names, operators, expression contexts, flags)
_NOT_CHILD_FIELDS = {"ctx", "op", "ops", "id", "attr", "name", "names", "arg", "asname", "module", "level",
                     "conversion", "kind", "type_comment", "is_async", "type_ignores", "tag", "lineno"}
_FIELDS: dict[type, tuple[str, ...]] = {ast.Constant: ()}
_STRINGISH = {ast.Constant, ast.JoinedStr, ast.BinOp, ast.Call}
_LISTISH = {ast.List, ast.Tuple, ast.BinOp}
# nodes with a leaf below them that ast.iter_child_nodes counts (a context or an operator)
_LEAF_BELOW = {ast.Name, ast.Attribute, ast.Subscript, ast.Starred, ast.List, ast.Tuple, ast.BinOp,
               ast.UnaryOp, ast.BoolOp, ast.AugAssign, ast.Compare, ast.Import, ast.ImportFrom}
_STMT_LISTS = ("body", "orelse", "finalbody")
_GAP_RE = re.compile(r"(?:[ \t\f\r\n]+|\\\r?\n|\\\r|#[^\r\n]*)*")
_STR_START_RE = re.compile(r"([rRuUbBfF]{0,2})('''|\"\"\"|'|\")")
_STR_END_RE = {q: re.compile(r"(?:[^\\]|\\.)*?" + q, re.S) for q in ("'", '"', "'''", '"""')}
_SEMI_GAP_RE = re.compile(r"[ \t\f]*(?:\\(?:\r\n|\r|\n)[ \t\f]*)*;[ \t\f]*(?:\\(?:\r\n|\r|\n)[ \t\f]*)*")
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _string_end(text: str, i: int, quote: str) -> int:
    """End of a plain string literal whose body starts at i."""
    m = _STR_END_RE[quote].match(text, i)
    assert m
    return m.end()


def _fstring_scan(text: str, i: int, quote: str, is_raw: bool) -> tuple[list[tuple[str, int, int]], int]:
    """Top-level parts of an f-string body starting at i: ("text", s, e) runs and ("expr", s, e)
    replacement fields (braces included), and the end of the literal."""
    parts: list[tuple[str, int, int]] = []
    run = i
    while True:
        if text.startswith(quote, i):
            if i > run:
                parts.append(("text", run, i))
            return parts, i + len(quote)
        c = text[i]
        if c == "\\":
            if not is_raw and text.startswith("N{", i + 1):
                i = text.index("}", i) + 1
            elif text[i + 1:i + 2] in ("{", "}"):
                i += 1
            else:
                i += 2
        elif c == "{":
            if text.startswith("{{", i):
                i += 2
                continue
            if i > run:
                parts.append(("text", run, i))
            j = _fexpr_end(text, i + 1)
            parts.append(("expr", i, j))
            run = i = j
        elif c == "}":
            i += 2
        else:
            i += 1


def _fexpr_end(text: str, i: int) -> int:
    """From just inside a replacement field's `{`: the index after its closing `}`."""
    depth = 0
    while True:
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "}":
            if depth == 0:
                return i + 1
            depth -= 1
        elif c == ":" and depth == 0:
            i += 1
            while True:                      # the format spec: text and nested fields
                c = text[i]
                if c == "{":
                    i = _fexpr_end(text, i + 1)
                    continue
                if c == "}":
                    return i + 1
                i += 1
        elif c in "'\"":
            i = _literal_end(text, i, "")
            continue
        elif c == "#":
            while text[i] not in "\r\n":
                i += 1
            continue
        elif c.isalpha() or c == "_":
            m = _IDENT_RE.match(text, i)
            assert m
            j = m.end()
            if j < len(text) and text[j] in "'\"" and len(m.group()) <= 2 \
                    and set(m.group().lower()) <= set("rbuf"):
                i = _literal_end(text, j, m.group())
            else:
                i = j
            continue
        i += 1


def _literal_end(text: str, i: int, prefix: str) -> int:
    """End of the literal whose quote starts at i."""
    q = text[i:i + 3] if text[i:i + 3] in ("'''", '"""') else text[i]
    if "f" in prefix.lower():
        return _fstring_scan(text, i + len(q), q, "r" in prefix.lower())[1]
    return _string_end(text, i + len(q), q)


def _string_tokens(text: str, s: int, e: int) -> list[_Tok]:
    """The literal tokens of an ast string node spanning text[s:e]."""
    out = []
    i = s
    while i < e:
        m = _STR_START_RE.match(text, i)
        assert m, (text[i:i + 20], s, e)
        prefix, quote = m.group(1), m.group(2)
        body = m.end()
        if "f" in prefix.lower():
            parts, end = _fstring_scan(text, body, quote, "r" in prefix.lower())
        else:
            parts, end = None, _string_end(text, body, quote)
        out.append(_Tok(i, end, prefix, quote, parts))
        i = _GAP_RE.match(text, end).end()
    return out


def _children(node):
    """The child nodes in source order (ast's field order differs for a few node types)."""
    t = type(node)
    if t is ast.Call:
        yield node.func
        yield from _call_args(node)
        return
    if t is ast.Dict:
        for k, v in zip(node.keys, node.values):
            if k is not None:
                yield k
            yield v
        return
    if t is ast.FunctionDef or t is ast.AsyncFunctionDef:
        yield from node.decorator_list
        yield from getattr(node, "type_params", ())
        yield node.args
        if node.returns is not None:
            yield node.returns
        yield from node.body
        return
    if t is ast.ClassDef:
        yield from node.decorator_list
        yield from getattr(node, "type_params", ())
        yield from _call_args(node, bases=True)
        yield from node.body
        return
    if t is ast.arguments:
        positional = node.posonlyargs + node.args
        defaults = [None] * (len(positional) - len(node.defaults)) + list(node.defaults)
        for a, d in zip(positional, defaults):
            if a.annotation is not None:
                yield _Wrap(a.annotation)
            if d is not None:
                yield d
        if node.vararg is not None and node.vararg.annotation is not None:
            yield _Wrap(node.vararg.annotation)
        for a, d in zip(node.kwonlyargs, node.kw_defaults):
            if a.annotation is not None:
                yield _Wrap(a.annotation)
            if d is not None:
                yield d
        if node.kwarg is not None and node.kwarg.annotation is not None:
            yield _Wrap(node.kwarg.annotation)
        return
    if t is ast.IfExp:
        yield node.body
        yield node.test
        yield node.orelse
        return
    if t is ast.MatchMapping:
        for k, p in zip(node.keys, node.patterns):
            yield k
            yield p
        return
    if t is _Arg or t is _Wrap:
        yield node.value
        return
    fields = _FIELDS.get(t)
    if fields is None:
        fields = _FIELDS[t] = tuple(f for f in t._fields if f not in _NOT_CHILD_FIELDS)
    for name in fields:
        v = getattr(node, name, None)
        if isinstance(v, ast.AST):
            yield v
        elif isinstance(v, list):
            for item in v:
                if isinstance(item, ast.AST):
                    yield item


def _call_args(node, bases: bool = False) -> list[_Arg]:
    """Arguments of a call (or the bases and keywords of a class) in source order."""
    cached = getattr(node, "_vl_args", None)
    if cached is not None:
        return cached
    items = []
    for a in (node.bases if bases else node.args):
        if isinstance(a, ast.Starred):
            items.append(_Arg(None, "*", a.value, a, node))
        else:
            items.append(_Arg(None, "", a, a, node))
    for k in node.keywords:
        items.append(_Arg(k.arg, "" if k.arg is not None else "**", k.value, k, node))
    if node.keywords and len(items) > 1:
        items.sort(key=lambda a: (a.node.lineno, a.node.col_offset))
    node._vl_args = items
    _ARGS_CACHED.append(node)
    return items


# Calls whose _vl_args the parse of one file set: `_Arg.owner` points back at the call, a cycle
# the collector (off for lint commands) would never free; parse_python drops them when done.
_ARGS_CACHED: list = []


def _break_cycles(parser) -> None:
    for node in _ARGS_CACHED:
        node.__dict__.pop("_vl_args", None)
    _ARGS_CACHED.clear()
    for chain in parser.chains:
        chain.scope = None          # Scope.chains <-> Chain.scope


class _Offsets:
    """ast's (line, UTF-8 byte column) positions as character offsets of the text; one per
    file, shared by the parser and the engine-API scan."""

    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0] + [m.end() for m in LINE_RE.finditer(text)]
        self.ascii_lines: dict[int, bool] = {}

    def off(self, line: int, col: int) -> int:
        start = self.line_starts[line - 1]
        ok = self.ascii_lines.get(line)
        if ok is None:
            end = self.line_starts[line] if line < len(self.line_starts) else len(self.text)
            ok = self.ascii_lines[line] = self.text[start:end].isascii()
        if ok:
            return start + col
        end = self.line_starts[line] if line < len(self.line_starts) else len(self.text)
        return start + len(self.text[start:end].encode("utf-8")[:col].decode("utf-8", "replace"))



def _literal(code: str):
    """ast.literal_eval of one literal token, or None when it cannot be read."""
    try:
        return ast.literal_eval(code)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None




def _skip(text: str, i: int, chars: str) -> int:
    while i < len(text) and text[i] in chars:
        i += 1
    return i


def _add_operands(node) -> list:
    if type(node) is ast.BinOp and type(node.op) is ast.Add:
        return _add_operands(node.left) + _add_operands(node.right)
    return [node]


def _last_name(func) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""

