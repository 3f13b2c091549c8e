"""Python front end: launchers that start vLLM with subprocess, os.system, os.exec*, ...

The linted code is never imported or run. Python's own parser (`ast.parse`: it only parses)
gives every node's line and UTF-8 column; they are turned into character offsets of
`SourceFile.text` with our own line table, so CRLF files and non-ASCII text keep exact spans.
String literals are re-read from the source text (implicit concatenations token by token,
f-strings part by part), so every decoded character keeps its source position.

What is read:
  * argv lists: any list/tuple literal whose items spell a launch for `detect()`, and the
    simple build-up of a named list in one scope (`cmd = [...]`, `cmd += [...]`,
    `cmd.extend([...])`, `cmd.append(x)`, `cmd = cmd + [...]`, `[*BASE, ...]`); every
    statement that adds to the list counts, in source order, whether or not it sits under an
    `if` (we do not evaluate conditions);
  * shell strings: strings given to `subprocess.*(..., shell=True)`, `os.system`, `os.popen`
    (directly or through a name assigned in the same scope), and any string whose value
    mentions a vLLM launch; f-string / `+` / `.format` / `%` parts are run-time placeholders;
  * environment: `os.environ[...] = `, `setdefault`, `update`, `|=`, `os.putenv`, dicts and
    `dict(...)` calls given as `env=` or bound to a name containing "env", and subscript /
    update / setdefault on such names;
  * argv lists a function of the file returns (`return [...]`, `return cmd`), where a call of
    it is used: `cmd = base_cmd(); cmd += engine_args(m)`, `["vllm", "serve"] + flags()`
    (one list per function; a function returning several different lists is not guessed);
  * docker SDK containers: `client.containers.run|create(IMAGE, COMMAND, entrypoint=...,
    environment=...)` whose IMAGE is a literal naming a vLLM build (knowledge/images.py):
    the image's `vllm serve` given COMMAND (a list, a helper's list, or a string split like
    shlex.split), or the program the entrypoint/command names (`bash -c` scripts read as
    shell); its environment is the container's own, not the Python process's;
  * argv lists that run a vLLM image: `["docker"|"podman"|"nerdctl", "run", OPTS, IMAGE, ARGS]`
    (the image's `vllm serve` given ARGS; `-e K=V` / `--env=K=V` are the container's env).
P/D proxy apps (FastAPI, aiohttp, ... forwarding `kv_transfer_params`) are read by pyproxy.py.
"""
from __future__ import annotations

import ast
import bisect
import json
import re
import unicodedata
from ..model.record import field, record
from pathlib import Path

from .detect import REFERENCE_PROXIES, container_run, detect, serve_kind
from ..model.launch import (ENGINE, SERVE, AppendSite, Arg, Edit, EnvEntry, Launch, ParsedFile, ParseError, SourceFile,
                            remove_args)
from .pyproxy import read_proxy
from .shellscan import SHELLS, scan_shell

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
JSON_DUMPS_KW = {"indent", "separators", "sort_keys", "ensure_ascii"}
LIST_MUTATORS = {"remove", "pop", "clear", "sort", "reverse", "__setitem__", "__delitem__"}
LINE_RE = re.compile(r"\r\n|\r|\n")
PYTHON_WORD_RE = re.compile(r"^python[\d.]*$")
PLACEHOLDER_RE = re.compile(r"\$\{__vlpy(\d+)__\}")
FORMAT_FIELD_RE = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
PERCENT_FIELD_RE = re.compile(r"%%|%(?:\([^)]*\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa]")
SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n",
                  "r": "\r", "t": "\t", "v": "\v"}


def parse_python(source: SourceFile) -> ParsedFile:
    text = source.text
    tree, nul = _parse(text)
    parser = _Parser(source, tree, nul)
    try:
        pf = parser.run()
    except (_TooDeep, RecursionError):
        # the walk measures depth as _check_nesting does, and stops past MAX_NESTING
        _check_nesting(tree)
        parser = _Parser(source, tree, nul, measure=False)
        pf = parser.run()
    if not nul:
        imports = [node for _, _, node in sorted(parser.imports, key=lambda x: x[:2])]
        _EngineScan(source, tree, pf, parser.env, imports, parser.offsets).run()
        read_proxy(source, tree, pf, parser.offsets.off)
    _break_cycles(parser)
    return pf


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
        raise ParseError(err.lineno or 1, f"Python syntax error: {err.msg}") from None
    except ValueError as err:
        raise ParseError(1, f"Python syntax error: {err}") from None
    return tree, nul


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


@record
class Chain:
    key: str                       # "" for a list literal / `+` expression used in place
    scope: "Scope"
    anchor: object
    segs: list[Seg] = field(default_factory=list)
    unfollowable: str | None = None
    consumed: int = 0


@record
class Scope:
    name: str                      # qualified function or class name; "" for the module
    parent: "Scope | None"
    is_class: bool = False
    chains: dict[str, Chain] = field(default_factory=dict)
    strings: dict[str, object] = field(default_factory=dict)
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


class _Parser:
    def __init__(self, source: SourceFile, module: ast.Module, nul: bool = False, measure: bool = True):
        self.source, self.text, self.module, self.nul = source, source.text, module, nul
        self.max_depth = MAX_NESTING if measure else 1 << 30
        self.offsets = _Offsets(self.text)
        self.line_starts, self.off = self.offsets.line_starts, self.offsets.off
        self.pf = ParsedFile(source)
        self.module_scope = Scope("", None)
        self.scope = self.module_scope
        self.stack: list[object] = []
        self.chains: list[Chain] = []
        self.handled: set[int] = set()         # ids of list/`+` nodes owned by a chain
        self.strings: dict[int, StringCandidate] = {}
        self.string_depth = 0
        self.forced: set[int] = set()
        self.env: list[EnvEntry] = []
        self.launch_elems: set[int] = set()
        self.placeholders: list[str] = []
        self.tokens: dict[int, list[_Tok]] = {}
        self.imports: list[tuple[int, int, object]] = []   # (tree level, order, node): for _EngineScan
        self.inside_prose = 0          # Compare, Raise and Assert nodes on the stack
        self.inside_compare = 0        # Compare nodes on the stack
        self.returns: dict[str, list[Chain | None]] = {}   # function name -> the argv lists it returns
        self.dicts: dict[str, object] = {}                   # name -> the dict literal last bound to it
        self.containers: list[tuple] = []                 # docker SDK `containers.run(...)` calls

    # -- positions -------------------------------------------------------------------------

    def span(self, node) -> tuple[int, int]:
        """Where a node is written, without the parentheses around it (those of a tuple or a
        generator expression too); a call argument with them."""
        if type(node) is _Arg:
            return self.arg_span(node)
        s, e = self.off(node.lineno, node.col_offset), self.off(node.end_lineno, node.end_col_offset)
        if type(node) is ast.GeneratorExp or (type(node) is ast.Tuple and self.own_parens(s, e)):
            if type(node) is ast.Tuple and not node.elts:
                return s + 1, s + 1
            return self.trimmed(s + 1, e - 1)
        return s, e

    def own_parens(self, s: int, e: int) -> bool:
        """Is text[s:e] one parenthesized group (the `(` at s closes at e - 1)?"""
        text = self.text
        if text[s:s + 1] != "(" or text[e - 1:e] != ")":
            return False
        depth = 0
        i = s
        while i < e:
            c = text[i]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
                if depth == 0:
                    return i == e - 1
            elif c in "'\"":
                i = _literal_end(text, i, "")
                continue
            elif c == "#":
                while i < e and text[i] not in "\r\n":
                    i += 1
                continue
            elif c.isalpha() or c == "_":
                m = _IDENT_RE.match(text, i)
                assert m
                j = m.end()
                if j < e and text[j] in "'\"" and len(m.group()) <= 2 and set(m.group().lower()) <= set("rbuf"):
                    i = _literal_end(text, j, m.group())
                else:
                    i = j
                continue
            i += 1
        return False

    def trimmed(self, s: int, e: int) -> tuple[int, int]:
        """text[s:e] without blanks and comments around it."""
        text = self.text
        s = _GAP_RE.match(text, s).end()
        last = s
        i = s
        while i < e:
            i = _GAP_RE.match(text, i).end()
            if i >= e:
                break
            c = text[i]
            if c in "'\"":
                i = _literal_end(text, i, "")
            elif c.isalpha() or c == "_":
                m = _IDENT_RE.match(text, i)
                assert m
                j = m.end()
                if j < e and text[j] in "'\"" and len(m.group()) <= 2 and set(m.group().lower()) <= set("rbuf"):
                    i = _literal_end(text, j, m.group())
                else:
                    i = j
            else:
                i += 1
            last = i
        return s, last

    def arg_span(self, arg: _Arg) -> tuple[int, int]:
        if arg.keyword is not None or arg.star:
            return self.off(arg.node.lineno, arg.node.col_offset), \
                self.off(arg.node.end_lineno, arg.node.end_col_offset)
        s, e = self.span(arg.value)
        call = arg.owner
        limit = self.off(call.end_lineno, call.end_col_offset) - 1
        text = self.text
        while True:
            ls = s
            while ls > 0 and text[ls - 1] in " \t\f\r\n":
                ls -= 1
            re_ = _GAP_RE.match(text, e).end()
            if ls > 0 and text[ls - 1] == "(" and re_ < limit and text[re_:re_ + 1] == ")":
                s, e = ls - 1, re_ + 1
            else:
                return s, e

    def code(self, node) -> str:
        s, e = self.span(node)
        return self.text[s:e]

    def line_start(self, offset: int) -> int:
        return self.line_starts[bisect.bisect_right(self.line_starts, offset) - 1]

    def context(self, scope: Scope) -> str:
        if scope.name:
            return f"python launcher {scope.name}" + ("" if scope.is_class else "()")
        return f"python launcher {Path(self.source.display).stem}"

    # -- the walk --------------------------------------------------------------------------
    def run(self) -> ParsedFile:
        self.walk(self.module)
        self.finish()
        return self.pf

    def walk(self, node, depth: int = 1) -> None:
        # depth: as _check_nesting counts it (ast.iter_child_nodes' levels)
        t = type(node)
        if t is ast.Name:                    # the commonest leaves, on a short path
            if depth + 1 > self.max_depth:
                raise _TooDeep
            return
        if t is ast.Constant:
            if depth > self.max_depth:
                raise _TooDeep
            if self.string_depth == 0 and isinstance(node.value, str):
                self.stack.append(node)
                self.strings[id(node)] = StringCandidate(node, self.scope, self.is_prose(),
                                                         forced=id(node) in self.forced)
                self.stack.pop()
            return
        if t is _Arg:
            depth -= 0 if node.keyword is not None or node.star else 1
        elif t is ast.BoolOp:
            depth += len(node.values) - 1
        elif t is ast.Import:
            self.imports.append((depth, len(self.imports), node))
            depth += max(a.name.count(".") for a in node.names)
        elif t is ast.ImportFrom:
            self.imports.append((depth, len(self.imports), node))
            depth += (node.module or "").count(".")
        if depth + (t in _LEAF_BELOW) > self.max_depth:
            raise _TooDeep
        if t is ast.arguments and depth + 1 > self.max_depth and (
                node.posonlyargs or node.args or node.vararg or node.kwonlyargs or node.kwarg):
            raise _TooDeep
        self.stack.append(node)
        visit = _VISITS.get(t)
        if visit is not None and visit[0] is not None:
            visit[0](self, node)
        is_string_root = False
        if self.string_depth == 0 and t in _STRINGISH and self.is_string_expr(node):
            is_string_root = True
            self.strings[id(node)] = StringCandidate(node, self.scope, self.is_prose(),
                                                     forced=id(node) in self.forced)
        if is_string_root:
            self.string_depth += 1
        if self.string_depth == 0 and t in _LISTISH and id(node) not in self.handled:
            self.anonymous_chain(node)
        if t is not ast.Name and t is not ast.Constant:
            prose = t is ast.Compare or t is ast.Raise or t is ast.Assert
            if prose:
                self.inside_prose += 1
                self.inside_compare += t is ast.Compare
            for child in _children(node):
                self.walk(child, depth + 1)
            if prose:
                self.inside_prose -= 1
                self.inside_compare -= t is ast.Compare
        if is_string_root:
            self.string_depth -= 1
        if visit is not None and visit[1] is not None:
            visit[1](self, node)
        self.stack.pop()

    def enter_scope(self, name: str, is_class: bool = False) -> None:
        qual = f"{self.scope.name}.{name}" if self.scope.name else name
        self.scope = Scope(qual, self.scope, is_class)

    def leave_scope(self) -> None:
        assert self.scope.parent is not None
        self.scope = self.scope.parent

    def visit_FunctionDef(self, node) -> None:
        self.enter_scope(node.name)

    def leave_FunctionDef(self, node) -> None:
        self.leave_scope()

    def visit_ClassDef(self, node) -> None:
        self.enter_scope(node.name, is_class=True)

    def leave_ClassDef(self, node) -> None:
        self.leave_scope()

    def visit_For(self, node) -> None:
        self.scope.loops += 1

    def leave_For(self, node) -> None:
        self.scope.loops -= 1

    def is_prose(self) -> bool:
        """Is the string being visited plainly text: a docstring, a message, a pattern?"""
        parent = self.stack[-2] if len(self.stack) > 1 else None
        if isinstance(parent, ast.Expr):
            return True
        if isinstance(parent, _Arg):
            if parent.keyword is not None and parent.keyword in TEXT_KEYWORDS:
                return True
            call = self.stack[-3] if len(self.stack) > 2 else None
            if isinstance(call, ast.Call) and _last_name(call.func) in TEXT_FUNCS:
                return True
        return self.inside_prose > 0       # under a comparison, raise or assert

    # -- strings ---------------------------------------------------------------------------
    def is_string_expr(self, node) -> bool:
        t = type(node)
        if t is ast.Constant:
            return isinstance(node.value, str)
        if t is ast.JoinedStr:
            return True
        if t is ast.BinOp:
            if type(node.op) is ast.Add:
                return any(self.is_string_literal(o) for o in _add_operands(node))
            if type(node.op) is ast.Mod:
                return self.is_string_literal(node.left)
            return False
        if t is ast.Call:
            return isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
                and self.is_string_literal(node.func.value)
        return False

    def is_string_literal(self, node) -> bool:
        t = type(node)
        return (t is ast.Constant and isinstance(node.value, str)) or t is ast.JoinedStr

    def str_tokens(self, node) -> list[_Tok]:
        toks = self.tokens.get(id(node))
        if toks is None:
            s, e = self.span(node)
            toks = self.tokens[id(node)] = _string_tokens(self.text, s, e)
        return toks

    def pieces(self, node) -> list[Lit | Dyn] | None:
        """The parts of a string expression; None when it cannot be read."""
        t = type(node)
        if t is ast.Constant or t is ast.JoinedStr:
            if t is ast.Constant:
                if not isinstance(node.value, str):
                    return None
                s, e = self.span(node)
                q = self.text[s]
                if q in "'\"" and e - s >= 2 and self.text[e - 1] == q and node.value == self.text[s + 1:e - 1] \
                        and q not in node.value and "\\" not in node.value and "\r" not in node.value \
                        and not (self.nul and "\x00" in node.value):
                    # one plain literal without escapes: "--port"
                    return [Lit([(c, i, i + 1) for i, c in enumerate(node.value, s + 1)])]
            toks = self.str_tokens(node)
            out: list[Lit | Dyn] = []
            text = self.text
            for tok in toks:
                prefix = tok.prefix.lower()
                if tok.parts is None:
                    if "b" in prefix:
                        return None
                    base = tok.start + len(tok.prefix) + len(tok.quote)
                    chars = decode_body(text[base:tok.end - len(tok.quote)], base, "r" in prefix, False)
                    if chars is None:
                        return None
                    if t is ast.JoinedStr or len(toks) == 1:
                        value = node.value if t is ast.Constant else _literal(text[tok.start:tok.end])
                        if "".join(c for c, _, _ in chars) != value or (self.nul and "\x00" in text[tok.start:tok.end]):
                            return None
                    out.append(Lit(chars))
                else:
                    is_raw = "r" in prefix
                    for kind, s, e in tok.parts:
                        if kind == "text":
                            chars = decode_body(text[s:e], s, is_raw, True)
                            if chars is None:
                                return None
                            out.append(Lit(chars))
                        else:
                            out.append(Dyn(text[s:e], (s, e)))
            if t is ast.Constant and len(toks) > 1:
                joined = "".join(c for p in out for c, _, _ in p.chars)
                if joined != node.value or (self.nul and "\x00" in self.code(node)):
                    return None
            return out
        if t is ast.BinOp and type(node.op) is ast.Add:
            out = []
            for operand in _add_operands(node):
                if self.is_string_literal(operand):
                    got = self.pieces(operand)
                    if got is None:
                        return None
                    out.extend(got)
                else:
                    out.append(Dyn("{" + self.code(operand) + "}", self.span(operand)))
            return out
        if t is ast.BinOp and type(node.op) is ast.Mod:
            left = self.pieces(node.left)
            return None if left is None else _fields(left, PERCENT_FIELD_RE, {"%%": "%"})
        if t is ast.Call and self.is_string_expr(node):
            receiver = self.pieces(node.func.value)
            return None if receiver is None else _fields(receiver, FORMAT_FIELD_RE, {"{{": "{", "}}": "}"})
        return None

    def literal_bodies(self, node) -> list[tuple[int, int]]:
        """Source ranges inside which text can be edited: the bodies of the literals."""
        out = []
        stack = [node]
        while stack:
            n = stack.pop()
            t = type(n)
            if t is ast.Constant and isinstance(n.value, (str, bytes)) or t is ast.JoinedStr:
                for tok in self.str_tokens(n):
                    out.append((tok.start + len(tok.prefix) + len(tok.quote), tok.end - len(tok.quote)))
            elif t is ast.BinOp:
                stack += [n.left] if type(n.op) is ast.Mod else [n.left, n.right]
            elif t is ast.Call:
                if isinstance(n.func, (ast.Attribute, ast.Subscript)):
                    stack.append(n.func.value)
        return out

    def const_str(self, node) -> str | None:
        """The value of a str literal without f-string parts (libcst's evaluated_value)."""
        if type(node) is ast.Constant and isinstance(node.value, str):
            if self.nul and "\x00" in self.code(node):
                return None
            return node.value
        return None

    # -- argv items -------------------------------------------------------------------------
    def elem_arg(self, node, splits: bool = False) -> Arg:
        span = self.span(node)
        if isinstance(node, ast.Starred):
            return Arg(self.code(node), self.source, span, dynamic=True, splits=True)
        if self.is_string_expr(node):
            pieces = self.pieces(node)
            if pieces is not None:
                value = "".join("".join(c for c, _, _ in p.chars) if isinstance(p, Lit) else p.display
                                for p in pieces)
                return Arg(value, self.source, span, dynamic=any(isinstance(p, Dyn) for p in pieces),
                           splits=splits)
        dumped = self.json_dumps(node)
        if dumped is not None:
            return Arg(dumped, self.source, span)
        if type(node) is ast.Constant and type(node.value) in (int, float) and not splits:
            return Arg(self.code(node), self.source, span)
        return Arg(self.code(node), self.source, span, dynamic=True, splits=splits)

    def json_dumps(self, node) -> str | None:
        """`json.dumps(<literal>)`: the literal is read with ast.literal_eval, nothing runs."""
        if not isinstance(node, ast.Call) or self.code(node.func).replace(" ", "") not in ("json.dumps", "dumps"):
            return None
        args = _call_args(node)
        if not args or args[0].keyword is not None or args[0].star:
            return None
        kwargs = {}
        try:
            value = ast.literal_eval(self.code(args[0].value))
            for arg in args[1:]:
                if arg.keyword is None or arg.keyword not in JSON_DUMPS_KW:
                    return None
                kwargs[arg.keyword] = ast.literal_eval(self.code(arg.value))
            return json.dumps(value, **kwargs)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None

    # -- argv lists and their build-up -------------------------------------------------------
    def key_of(self, node) -> str | None:
        """`cmd`, `self.cmd`: a name a list can be built under."""
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute) and self.key_of(node.value) is not None:
            return self.key_of(node.value) + "." + node.attr
        return None

    def find_chain(self, key: str | None) -> Chain | None:
        return None if key is None else self._in_scope("chains", key)

    def _in_scope(self, table: str, key: str):
        """`key` in this scope's `table` (chains, strings), else in the module's."""
        scope: Scope | None = self.scope
        while scope is not None:
            found = getattr(scope, table)
            if key in found:
                return found[key]
            scope = None if scope is self.module_scope else self.module_scope
        return None

    def inline(self, chain: Chain, segs: list[Seg], why: list[str]) -> None:
        chain.consumed += 1
        segs.extend(chain.segs)
        if chain.unfollowable:
            why.append(chain.unfollowable)

    def segs_of(self, node, owner: str, why: list[str]) -> tuple[list[Seg], bool]:
        """The contributions of an expression; bool: did it hold a list we can read?"""
        if isinstance(node, (ast.List, ast.Tuple)):
            self.handled.add(id(node))
            segs: list[Seg] = []
            cur: list = []
            for el in node.elts:
                base = self.find_chain(self.key_of(el.value)) if isinstance(el, ast.Starred) else None
                if base is not None:
                    segs.append(Seg("list", node, cur, owner))
                    cur = []
                    self.inline(base, segs, why)
                else:
                    cur.append(el)
            segs.append(Seg("list", node, cur, owner))
            return [s for s in segs if s.kind != "list" or s.elems or s is segs[-1]], True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            self.handled.add(id(node))
            left, lok = self.segs_of(node.left, owner, why)
            right, rok = self.segs_of(node.right, owner, why)
            return left + right, lok or rok
        base = self.find_chain(self.copied_name(node)) or self.helper_chain(node)
        if base is not None:
            segs = []
            self.inline(base, segs, why)
            return segs, True
        return [Seg("opaque", node, owner=owner)], False

    def helper_chain(self, node) -> Chain | None:
        """`build_cmd(...)` / `self.build_cmd(...)`: the one argv list a function of this file
        returns (written above the call), or None (not a call of ours, several lists, or none)."""
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "cls")) else None
        found = self.returns.get(name or "")
        if not found or len(found) != 1 or found[0] is None:
            return None
        return found[0]

    def leave_Return(self, node) -> None:
        """A function's `return [...]` / `return cmd`: the list a call of it gives."""
        if not self.scope.name or self.scope.is_class or node.value is None:
            return
        value, chain = node.value, None
        if isinstance(value, (ast.List, ast.Tuple, ast.BinOp)):
            chain = next((c for c in reversed(self.chains) if c.anchor is value), None)
        else:
            chain = self.find_chain(self.copied_name(value))
        name = self.scope.name.rsplit(".", 1)[-1]
        known = self.returns.setdefault(name, [])
        if chain not in known:
            known.append(chain)

    def copied_name(self, node) -> str | None:
        """`cmd`, `list(cmd)`, `cmd.copy()`, `cmd[:]`: a copy of the named list."""
        if isinstance(node, ast.Call):
            args = _call_args(node)
            if isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple") and len(args) == 1:
                return self.key_of(args[0].value)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "copy" and not args:
                return self.key_of(node.func.value)
            return None
        if isinstance(node, ast.Subscript):
            sl = node.slice
            if isinstance(sl, ast.Slice) and sl.lower is None and sl.upper is None and sl.step is None:
                return self.key_of(node.value)
            return None
        return self.key_of(node)

    def start_chain(self, key: str, value, anchor) -> bool:
        why: list[str] = []
        segs, ok = self.segs_of(value, key, why)
        if not ok:
            return False
        chain = Chain(key, self.scope, anchor, segs, why[0] if why else None)
        self.scope.chains[key] = chain
        self.chains.append(chain)
        for seg in segs:
            if seg.kind == "opaque":
                chain.unfollowable = chain.unfollowable or f"`{key}` is built from {self.code(seg.node)}"
        return True

    def extend_chain(self, chain: Chain, value, how: str) -> None:
        why: list[str] = []
        segs, ok = self.segs_of(value, chain.key, why)
        if self.scope.loops:
            for seg in segs:
                seg.splits = True
        chain.segs.extend(segs)
        if why:
            chain.unfollowable = chain.unfollowable or why[0]
        if any(seg.kind == "opaque" for seg in segs):
            chain.unfollowable = chain.unfollowable or f"`{chain.key}` is extended by {how}"

    def anonymous_chain(self, node) -> None:
        """A list literal or `+` of lists used in place (`Popen(["vllm", ...] + extra)`)."""
        if isinstance(node, ast.BinOp) and not (
                isinstance(node.op, ast.Add) and any(
                    isinstance(o, (ast.List, ast.Tuple)) for o in _add_operands(node))):
            return
        if self.inside_compare:
            return
        parent = self.stack[-2] if len(self.stack) > 1 else None
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)) and parent.iter is node:
            return                                  # `for word in ["vllm", "serve"]`
        why: list[str] = []
        segs, ok = self.segs_of(node, "", why)
        if not ok:
            return
        chain = Chain("", self.scope, node, segs, why[0] if why else None)
        if any(seg.kind == "opaque" for seg in segs):
            chain.unfollowable = chain.unfollowable or f"the argv is built with {self.code(node)}"
        self.chains.append(chain)

    def visit_Assign(self, node) -> None:
        self.env_assign(node)
        if len(node.targets) != 1:
            return
        self.bind(node.targets[0], node.value, node)

    def visit_AnnAssign(self, node) -> None:
        if node.value is not None:
            self.bind(node.target, node.value, node)
            self.env_dict_binding(node.target, node.value)

    def bind(self, target, value, stmt) -> None:
        key = self.key_of(target)
        if key is None:
            if isinstance(target, ast.Subscript):
                chain = self.find_chain(self.key_of(target.value))
                if chain is not None:
                    chain.unfollowable = chain.unfollowable or f"`{chain.key}` is changed by item assignment"
            return
        self.scope.strings.pop(key, None)
        if isinstance(value, (ast.Dict, ast.List)) or (isinstance(value, ast.Call) and self.code(value.func) == "dict"):
            self.dicts[key] = value
        else:
            self.dicts.pop(key, None)
        if self.is_string_expr(value):
            self.scope.chains.pop(key, None)
            self.scope.strings[key] = value
        elif not ((self.find_chain(self.copied_name(value)) is not None or self.helper_chain(value) is not None
                   or isinstance(value, (ast.List, ast.Tuple, ast.BinOp)))
                  and self.start_chain(key, value, stmt)):
            self.scope.chains.pop(key, None)      # rebound to something else: that list is done

    def visit_AugAssign(self, node) -> None:
        self.env_augassign(node)
        key = self.key_of(node.target)
        chain = self.scope.chains.get(key) if key else None
        if chain is None:
            return
        if isinstance(node.op, ast.Add):
            self.extend_chain(chain, node.value, f"+= {self.code(node.value)}")
        else:
            chain.unfollowable = chain.unfollowable or f"`{key}` is changed by {self.code(node)}"

    def visit_Delete(self, node) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0]
        if isinstance(target, ast.Subscript):
            chain = self.find_chain(self.key_of(target.value))
            if chain is not None:
                chain.unfollowable = chain.unfollowable or f"`{chain.key}` is changed by del"

    def list_method(self, node) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute):
            return
        chain = self.scope.chains.get(self.key_of(func.value) or "")
        if chain is None:
            return
        method, args = func.attr, _call_args(node)
        if method == "extend" and len(args) == 1 and not args[0].keyword:
            self.extend_chain(chain, args[0].value, self.code(node))
        elif method == "append" and len(args) == 1 and not args[0].keyword:
            chain.segs.append(Seg("item", args[0].value, owner=chain.key, splits=self.scope.loops > 0))
        elif method == "insert" and len(args) == 2:
            seg = Seg("item", args[1].value, owner=chain.key, splits=self.scope.loops > 0)
            if self.code(args[0].value) == "0":
                chain.segs.insert(0, seg)
            else:
                chain.segs.append(seg)
                chain.unfollowable = chain.unfollowable or f"`{chain.key}` is changed by {self.code(node)}"
        elif method in LIST_MUTATORS:
            chain.unfollowable = chain.unfollowable or f"`{chain.key}` is changed by {self.code(node)}"

    # -- calls -------------------------------------------------------------------------------
    def visit_Call(self, node) -> None:
        self.list_method(node)
        self.env_call(node)
        self.shell_call(node)
        self.container_call(node)

    # -- docker SDK: client.containers.run(IMAGE, COMMAND, environment=...) -------------------
    def container_call(self, node) -> None:
        """`docker.from_env().containers.run(...)` / `.containers.create(...)` /
        `APIClient().create_container(...)`: remembered with
        what its image, command and environment are bound to here; read in finish()."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and (
                func.attr in ("run", "create") and isinstance(func.value, ast.Attribute)
                and func.value.attr == "containers" or func.attr == "create_container")):
            return                  # docker-py's high-level API, or APIClient().create_container
        args = _call_args(node)
        if any(a.star for a in args):
            return
        pos = [a.value for a in args if a.keyword is None]
        kw = {a.keyword: a.value for a in args if a.keyword is not None}
        image = kw.get("image", pos[0] if pos else None)
        command = kw.get("command", pos[1] if len(pos) > 1 else None)
        if image is None:
            return
        resolved = {"written": (image, None)}
        for what, value in (("image", image), ("command", command), ("entrypoint", kw.get("entrypoint")),
                            ("environment", kw.get("environment"))):
            chain = None
            if value is not None and not isinstance(value, (ast.List, ast.Tuple, ast.BinOp)):
                key = self.key_of(value)
                if key is not None and self.is_string_expr(self.lookup_string(key) or ast.Pass()):
                    value = self.lookup_string(key)
                elif what == "environment" and key is not None and key in self.dicts:
                    value = self.dicts[key]
                else:
                    chain = self.find_chain(self.copied_name(value)) or self.helper_chain(value)
            resolved[what] = (value, chain)
        self.containers.append((node, self.scope, resolved))

    def lookup_string(self, key: str):
        return self._in_scope("strings", key)

    def shell_call(self, node) -> None:
        func = self.code(node.func).replace(" ", "")
        shell = func in SHELL_FUNCS
        args = _call_args(node)
        if not shell and (func.startswith("subprocess.") or func in SUBPROCESS_FUNCS) \
                and func.rsplit(".", 1)[-1] in SUBPROCESS_FUNCS:
            shell = any(a.keyword == "shell" and self.code(a.value) == "True" for a in args)
        if not shell:
            return
        command = next((a.value for a in args if a.keyword is None and not a.star), None)
        if command is None:
            command = next((a.value for a in args if a.keyword is not None
                            and a.keyword in ("args", "cmd", "command")), None)
        if command is None:
            return
        key = self.key_of(command)
        if key is not None:
            scope: Scope | None = self.scope
            while scope is not None and key not in scope.strings:
                scope = None if scope is self.module_scope else self.module_scope
            if scope is not None:
                target = scope.strings[key]
                self.forced.add(id(target))
                if id(target) in self.strings:
                    self.strings[id(target)].forced = True
            return
        self.forced.add(id(command))

    # -- environment -------------------------------------------------------------------------
    def is_env_target(self, node) -> tuple[bool, str]:
        """`os.environ` / `environ`, or a name (attribute) whose name contains "env"."""
        code = self.code(node).replace(" ", "")
        if code in ("os.environ", "environ"):
            return True, "python os.environ"
        name = code.rsplit(".", 1)[-1]
        if re.fullmatch(r"[A-Za-z_][\w.]*", code) and "env" in name.lower():
            return True, "python env dict"
        return False, ""

    def statement_of(self, small, parent):
        """(small statement, the statements of its line, is the line the body of a compound
        statement written after its colon, the block holding it or None for the module)."""
        if isinstance(parent, ast.Module):
            block = parent.body
        else:
            block = next((getattr(parent, f) for f in _STMT_LISTS
                          if any(s is small for s in getattr(parent, f, ()) or ())), None)
            if block is None:
                return None
        idx = next(i for i, s in enumerate(block) if s is small)
        text = self.text
        lo = idx
        while lo > 0 and _SEMI_GAP_RE.fullmatch(text, self.span(block[lo - 1])[1], self.span(block[lo])[0]):
            lo -= 1
        hi = idx
        while hi + 1 < len(block) and _SEMI_GAP_RE.fullmatch(text, self.span(block[hi])[1],
                                                             self.span(block[hi + 1])[0]):
            hi += 1
        suite = False
        if lo == 0 and not isinstance(parent, ast.Module):
            i = self.span(block[0])[0]
            while True:
                while i > 0 and text[i - 1] in " \t\f":
                    i -= 1
                if i > 1 and text[i - 1] in "\r\n":
                    j = i - 1
                    if text[j] == "\n" and j > 0 and text[j - 1] == "\r":
                        j -= 1
                    if j > 0 and text[j - 1] == "\\":
                        i = j - 1
                        continue
                break
            suite = i > 0 and text[i - 1] == ":"
        return small, block[lo:hi + 1], suite, None if isinstance(parent, ast.Module) else block

    def remove_statement(self, where) -> list[Edit] | None:
        if where is None:
            return None
        small, line, suite, block = where
        text, f = self.text, self.source
        spans = [self.span(s) for s in line]
        idx = next(i for i, s in enumerate(line) if s is small)
        s, e = spans[idx]
        if len(spans) > 1:
            if idx + 1 < len(spans):
                return [Edit(f, s, spans[idx + 1][0], "")]
            return [Edit(f, spans[idx - 1][1], e, "")]
        if suite or (block is not None and len(block) == 1):
            return [Edit(f, s, e, "pass")]        # the block must keep a statement
        ls = self.line_start(s)
        if text[ls:s].strip():
            return None
        end = _skip(text, e, " \t")
        if text.startswith(";", end):
            end = _skip(text, end + 1, " \t")
        end = self.after_line(end)
        return None if end is None else [Edit(f, ls, end, "")]

    def quote_of(self, node) -> str | None:
        if type(node) is ast.Constant and isinstance(node.value, (str, bytes)) or type(node) is ast.JoinedStr:
            return self.str_tokens(node)[-1].quote[0]
        return None

    def after_line(self, end: int) -> int | None:
        """From the end of an item: past a trailing comment and the line break; None when other
        code follows on the line."""
        text = self.text
        if text.startswith("#", end):
            while end < len(text) and text[end] not in "\r\n":
                end += 1
        if end >= len(text):
            return end
        if text.startswith("\r\n", end):
            return end + 2
        if text[end] in "\r\n":
            return end + 1
        return None

    def remove_element(self, spans: list[tuple[int, int]], idx: int) -> list[Edit]:
        """Remove item `idx` of a comma-separated list (dict items, call arguments) and the
        comma and blank that tie it to a neighbour; a whole line when it has its own."""
        text, f = self.text, self.source
        s, e = spans[idx]
        ls = self.line_start(s)
        after_comma = _skip(text, e, " \t")
        if text.startswith(",", after_comma):
            after_comma = _skip(text, after_comma + 1, " \t")
        else:
            after_comma = e
        if not text[ls:s].strip():
            end = self.after_line(_skip(text, after_comma, " \t"))
            if end is not None:
                return [Edit(f, ls, end, "")]
        if idx + 1 < len(spans):
            return [Edit(f, s, spans[idx + 1][0], "")]
        if idx > 0:
            return [Edit(f, spans[idx - 1][1], e, "")]
        end = _skip(text, e, " \t")
        return [Edit(f, s, end + 1 if text.startswith(",", end) else e, "")]

    def add_env(self, name: str, value_node, span, origin: str, removal) -> None:
        value = None
        if value_node is not None and self.is_string_literal(value_node):
            pieces = self.pieces(value_node)
            if pieces is not None and all(isinstance(p, Lit) for p in pieces):
                value = "".join(c for p in pieces for c, _, _ in p.chars)
        self.env.append(EnvEntry(name, value, self.source, span, origin, removal))

    def literal_key(self, node) -> str | None:
        return self.const_str(node)

    def env_assign(self, node) -> None:
        for target in node.targets:
            if isinstance(target, ast.Subscript):
                ok, origin = self.is_env_target(target.value)
                name = self.literal_key(target.slice)
                if ok and name:
                    removal = self.remove_statement(self.statement_of(node, self.stack[-2])) \
                        if len(node.targets) == 1 else None
                    self.add_env(name, node.value, self.span(node), origin, removal)
        if len(node.targets) == 1:
            self.env_dict_binding(node.targets[0], node.value)

    def env_dict_binding(self, target, value) -> None:
        if isinstance(target, ast.Name) and "env" in target.id.lower():
            self.env_mapping(value, "python env dict")

    def env_augassign(self, node) -> None:
        if isinstance(node.op, ast.BitOr) and self.is_env_target(node.target)[0]:
            self.env_mapping(node.value, self.is_env_target(node.target)[1])

    def env_mapping(self, value, origin: str) -> None:
        """A dict literal or `dict(..., X="v")` call: one entry per literal key."""
        if isinstance(value, ast.Dict):
            spans = [self.dict_elem_span(k, v) for k, v in zip(value.keys, value.values)]
            for i, (k, v) in enumerate(zip(value.keys, value.values)):
                if k is not None:
                    name = self.literal_key(k)
                    if name:
                        self.add_env(name, v, spans[i], origin, self.remove_element(spans, i))
        elif isinstance(value, ast.Call) and self.code(value.func) == "dict":
            self.env_kwargs(value, origin)

    def dict_elem_span(self, key, value) -> tuple[int, int]:
        if key is not None:
            return self.span(key)[0], self.span(value)[1]
        # `**x`: from the stars to the value's closing parentheses
        text = self.text
        s, e = self.span(value)
        parens = 0
        while True:
            while s > 0 and text[s - 1] in " \t\f\r\n":
                s -= 1
            if text[s - 1] == "(":
                s -= 1
                parens += 1
                continue
            break
        for _ in range(parens):
            e = _GAP_RE.match(text, e).end() + 1
        return s - 2, e

    def env_kwargs(self, call, origin: str) -> None:
        args = _call_args(call)
        spans = [self.span(a) for a in args]
        for i, arg in enumerate(args):
            if arg.keyword is not None and not arg.star:
                self.add_env(arg.keyword, arg.value, spans[i], origin, self.remove_element(spans, i))
            elif i == 0 and not arg.star:
                self.env_mapping(arg.value, origin)

    def env_call(self, node) -> None:
        func = node.func
        args = _call_args(node)
        for arg in args:
            if arg.keyword == "env":
                self.env_mapping(arg.value, "python env= argument")
        if self.code(func).replace(" ", "") == "os.putenv" and len(args) == 2:
            name = self.literal_key(args[0].value)
            if name:
                where = self.statement_of(self.stack[-2], self.stack[-3]) \
                    if isinstance(self.stack[-2], ast.Expr) else None
                self.add_env(name, args[1].value, self.span(node), "python os.putenv",
                             self.remove_statement(where))
            return
        if not isinstance(func, ast.Attribute):
            return
        ok, origin = self.is_env_target(func.value)
        if not ok:
            return
        method = func.attr
        if method == "setdefault" and len(args) == 2 and args[0].keyword is None:
            name = self.literal_key(args[0].value)
            if name:
                where = self.statement_of(self.stack[-2], self.stack[-3]) \
                    if isinstance(self.stack[-2], ast.Expr) else None
                self.add_env(name, args[1].value, self.span(node), origin, self.remove_statement(where))
        elif method == "update":
            self.env_kwargs(node, origin)

    # -- results -----------------------------------------------------------------------------
    def finish(self) -> None:
        # One Python process: every environment setting in the file is in force for every
        # launch it makes (we do not follow which function runs when, nor `env=` dicts that
        # replace os.environ) - so each launch gets all of them, in source order.
        self.pf.env.extend(self.env)
        launches: list[Launch] = []
        for call, scope, resolved in self.containers:
            launch = self.container_launch(call, scope, resolved)
            if isinstance(launch, list):
                launches.extend(launch)
            elif launch is not None:
                launches.append(launch)
        for chain in self.chains:
            if chain.consumed:
                continue
            launch = self.chain_launch(chain)
            if launch is not None:
                launches.append(launch)
        prose = 0
        for cand in self.strings.values():
            if id(cand.node) in self.launch_elems:
                continue
            if not cand.forced:
                if not self.may_mention(cand.node):
                    continue
                pieces = self.pieces(cand.node)
                value = "" if pieces is None else "".join(
                    "".join(c for c, _, _ in p.chars) if isinstance(p, Lit) else p.display for p in pieces)
                if not any(m in value for m in SHELL_MARKERS):
                    continue
                if cand.prose:
                    prose += 1
                    continue
            launches.extend(self.shell_launches(cand))
        if prose:
            self.pf.notes.append(f"{prose} string(s) mentioning vLLM read as text (docstring, message, "
                                 "comparison), not as commands")
        launches.sort(key=lambda l: l.span)
        self.pf.launches.extend(launches)

    def may_mention(self, node) -> bool:
        """Can the value of this string expression mention a launch? (A quick test before the
        string is decoded: a marker is in its source or in its literals' values.)"""
        if type(node) is ast.Constant:
            return any(m in node.value for m in SHELL_MARKERS)
        src = self.code(node)
        if any(m in src for m in SHELL_MARKERS):
            return True
        values: list[str] = []
        todo = [node]
        while todo:
            n = todo.pop()
            if type(n) is ast.Constant:
                if isinstance(n.value, str):
                    values.append(n.value)
            else:
                todo.extend(reversed(list(_children(n))))
        joined = "".join(values)
        return any(m in joined for m in SHELL_MARKERS)

    def container_launch(self, call, scope: Scope, resolved: dict) -> Launch | None:
        """A vLLM container started with the docker SDK: the image (a literal naming a vLLM
        build, knowledge/images.py) runs its entrypoint (`vllm serve`) with the command's items
        as arguments, or the program the entrypoint / command names; its environment is the
        container's own (`environment=` dict or `K=V` list), not the Python process's."""
        from ..knowledge.images import is_vllm_image as vllm_build, serves_engine_args

        image_node, _ = resolved["image"]
        pieces = self.pieces(image_node) if image_node is not None and self.is_string_expr(image_node) else None
        if not pieces:
            return None
        # `f"vllm/vllm-openai:{TAG}"`: parts known at run time do not hide what the image is
        image = "".join("".join(c for c, _, _ in p.chars) if isinstance(p, Lit) else p.display for p in pieces)
        probe = "".join("".join(c for c, _, _ in p.chars) if isinstance(p, Lit) else "x" for p in pieces)
        if not vllm_build(probe):
            return None
        words: list[Arg] = []
        consumed: list[Chain] = []
        cmd_used: Chain | None = None
        why: list[str] = []
        for what in ("entrypoint", "command"):
            node, chain = resolved.get(what, (None, None))
            if node is None:
                continue
            got = self.container_words(node, chain, why)
            if got is None:
                return None
            items, used = got
            if used is not None:
                consumed.append(used)
            if what == "command":
                cmd_used = used
            words.extend(items)
        values = [a.value for a in words]
        det = detect(values)
        written = resolved["written"][0]
        line = self.source.line_col(self.span(image_node)[0])[0]
        shown = image if written is image_node else f"{self.code(written)} = {image} (line {line})"
        via = (f"via docker SDK {'' if call.func.attr == 'create_container' else 'containers.'}"
               f"{call.func.attr}, image {shown}")
        if values and Path(values[0]).name in SHELLS and len(values) > 2 and values[1] == "-c":
            return self.container_script(call, scope, resolved, words, image, via)
        if values and det is None and not values[0].startswith("-") and (
                PYTHON_WORD_RE.match(Path(values[0]).name) or values[0].endswith((".py", ".sh"))):
            return None         # the image's entrypoint replaced by a program we do not know
        if resolved.get("entrypoint", (None,))[0] is not None:
            if det is None or det.start != 0:
                return None
            argv, opt, kind, program = words, det.options_start, det.kind, det.program
        elif det is not None and det.start == 0:
            argv, opt, kind, program = words, det.options_start, det.kind, det.program
        elif serves_engine_args(probe):     # the same table as every runner (knowledge/images.py)
            argv = [Arg("vllm"), Arg("serve")] + words
            opt, kind, program = 2, serve_kind(values), "docker containers.run"
            via += " (its entrypoint: vllm serve)"
        else:
            return None         # a vLLM build whose entrypoint is a shell (`rocm/vllm-dev`)
        for chain in consumed:
            chain.consumed += 1
        cmd_node, cmd_chain = resolved.get("command", (None, None))
        if cmd_node is not None and cmd_chain is None:
            self.launch_elems.add(id(cmd_node))         # its string is this launch, not a shell command
            if isinstance(cmd_node, (ast.List, ast.Tuple)):
                self.launch_elems.update(id(el) for el in cmd_node.elts)
        env = self.container_env(resolved.get("environment", (None, None))[0])
        context = f"docker container {image}" + (f" in {scope.name}()" if scope.name and not scope.is_class else "")
        launch = Launch(kind=kind, file=self.source, span=self.span(written), argv=argv, options_start=opt,
                        context=context, group=f"{self.source.display}#docker@{line}", env=env, image=image,
                        program=program)
        launch.via = via
        launch.append_site, launch.not_editable = self.container_site(cmd_node, cmd_used, words, why)
        return launch

    def container_script(self, call, scope: Scope, resolved: dict, words: list[Arg], image: str, via: str):
        """`command=["bash", "-c", "vllm serve ..."]` (or the shell as entrypoint): the script
        string is read as shell, in place, with the container's image and environment."""
        node = None
        for what in ("entrypoint", "command"):
            value, chain = resolved.get(what, (None, None))
            if chain is None and isinstance(value, (ast.List, ast.Tuple)):
                for el in value.elts:
                    if self.is_string_expr(el) and self.elem_arg(el).value == words[2].value:
                        node = el
        if node is None:
            return None
        self.launch_elems.add(id(node))
        found = self.shell_launches(StringCandidate(node, scope, False, forced=True))
        if not found:
            return None
        env = self.container_env(resolved.get("environment", (None, None))[0])
        line = self.source.line_col(self.span(resolved["written"][0])[0])[0]
        process = {id(e) for e in self.env}          # the Python process's own: not the container's
        for launch in found:
            launch.image = image
            launch.context = f"docker container {image}"
            launch.env = env + [e for e in launch.env if id(e) not in process]
            launch.group = f"{self.source.display}#docker@{line}"
            launch.via = f"{via}, {words[0].value} -c" + (f"; {launch.via}" if launch.via else "")
        return found

    def container_words(self, node, chain: Chain | None, why: list[str]) -> tuple[list[Arg], Chain | None] | None:
        """The argv items of a command / entrypoint: a list (literal, named, a helper's) or a
        string the SDK splits like a shell (shlex.split) without expanding anything."""
        if chain is None and isinstance(node, (ast.List, ast.Tuple, ast.BinOp)):
            chain = next((c for c in self.chains if c.anchor is node), None)
            if chain is None:
                segs, ok = self.segs_of(node, "", why)
                if not ok:
                    return None
                chain = Chain("", self.scope, node, segs)
        if chain is not None:
            if chain.unfollowable:
                why.append(chain.unfollowable)
            return self.chain_args(chain), chain
        if self.is_string_expr(node):
            pieces = self.pieces(node)
            if pieces is None:
                return None
            return _split_command(pieces, self.source), None
        return None

    def chain_args(self, chain: Chain) -> list[Arg]:
        argv = []
        for seg in chain.segs:
            if seg.kind == "list":
                argv.extend(self.elem_arg(el) for el in seg.elems)
            elif seg.kind == "item":
                argv.append(self.elem_arg(seg.node, splits=seg.splits))
            else:
                argv.append(Arg(self.code(seg.node), self.source, self.span(seg.node), dynamic=True, splits=True))
        return argv

    def container_site(self, node, chain, words: list[Arg], why: list[str]):
        if why:
            return None, why[0]
        if node is None:
            return None, "the container is given no command to add an argument to"
        if chain is not None:
            return self.chain_append_site(chain, words)
        if any(a.dynamic for a in words):
            return None, "its command string is built from Python expressions"
        if type(node) is ast.Constant and self.str_tokens(node):
            tok = self.str_tokens(node)[-1]
            if "r" not in tok.prefix.lower():
                end = tok.end - len(tok.quote)
                return _CommandStringSite(self.source, end, tok.quote[0] + "{}"), None
        return None, "its command string cannot take another argument safely"

    def container_env(self, node) -> list[EnvEntry]:
        """`environment={"K": "v"}` / `dict(K="v")` / `["K=v", ...]`: the container's own."""
        if node is None:
            return []
        existing = {(e.span, e.name): e for e in self.env}
        out: list[EnvEntry] = []
        origin = "docker SDK environment"
        if isinstance(node, ast.Dict):
            spans = [self.dict_elem_span(k, v) for k, v in zip(node.keys, node.values)]
            for i, (k, v) in enumerate(zip(node.keys, node.values)):
                name = self.literal_key(k) if k is not None else None
                if name:
                    entry = existing.get((spans[i], name))
                    if entry is None:
                        entry = EnvEntry(name, self.env_literal(v), self.source, spans[i], origin,
                                         self.remove_element(spans, i))
                        self.pf.env.append(entry)
                    out.append(entry)
        elif isinstance(node, (ast.List, ast.Tuple)):
            spans = [self.span(el) for el in node.elts]
            for i, el in enumerate(node.elts):
                text = self.const_str(el)
                if text and "=" in text:
                    name, _, value = text.partition("=")
                    entry = EnvEntry(name, value, self.source, spans[i], origin, self.remove_element(spans, i))
                    self.pf.env.append(entry)
                    out.append(entry)
        elif isinstance(node, ast.Call) and self.code(node.func) == "dict":
            args = _call_args(node)
            spans = [self.span(a) for a in args]
            for i, arg in enumerate(args):
                if arg.keyword is not None and not arg.star:
                    entry = existing.get((spans[i], arg.keyword))
                    if entry is None:
                        entry = EnvEntry(arg.keyword, self.env_literal(arg.value), self.source, spans[i], origin,
                                         self.remove_element(spans, i))
                        self.pf.env.append(entry)
                    out.append(entry)
        return out

    def env_literal(self, node) -> str | None:
        if node is not None and self.is_string_literal(node):
            pieces = self.pieces(node)
            if pieces is not None and all(isinstance(p, Lit) for p in pieces):
                return "".join(c for p in pieces for c, _, _ in p.chars)
        return None

    def docker_run_list(self, chain: Chain, argv: list[Arg], words: list[str]) -> Launch | None:
        """`["docker", "run", OPTS..., "vllm/vllm-openai:v0.29.0", ARGS...]` (podman, nerdctl):
        the image's `vllm serve` given ARGS, or the vLLM program ARGS name; `-e K=V` settings
        are the container's environment."""
        from ..knowledge.images import is_vllm_image as vllm_build, serves_engine_args

        run = container_run(words)
        if run is None or not run.runner.endswith(" run") or run.runner.startswith("kubectl") \
                or run.entrypoint is not None or argv[run.image].dynamic:
            return None
        image = words[run.image]
        if not vllm_build(image):
            return None
        args, values = argv[run.args_start:], words[run.args_start:]
        det = detect(values)
        if det is not None and det.start == 0:
            launch_argv, opt, kind, program = args, det.options_start, det.kind, det.program
        elif values and not values[0].startswith("-") and (
                Path(values[0]).name in SHELLS or PYTHON_WORD_RE.match(Path(values[0]).name)
                or values[0].endswith((".py", ".sh"))):
            return None
        elif serves_engine_args(image):
            launch_argv, opt, kind, program = [Arg("vllm"), Arg("serve")] + args, 2, serve_kind(values), run.runner
        else:
            return None         # a vLLM build whose entrypoint is a shell (`rocm/vllm-dev`)
        for seg in chain.segs:
            if seg.kind == "list":
                self.launch_elems.update(id(el) for el in seg.elems)
        env: list[EnvEntry] = []
        for i in range(run.start + 2, run.image):
            w = words[i]
            if w in ("-e", "--env") and i + 1 < run.image and re.match(r"^[A-Za-z_]\w*=", words[i + 1]):
                pair, setting = argv[i:i + 2], words[i + 1]
            elif w.startswith("--env=") and re.match(r"^[A-Za-z_]\w*=", w[6:]):
                pair, setting = argv[i:i + 1], w[6:]
            else:
                continue
            if any(a.span is None for a in pair):
                continue
            name, _, value = setting.partition("=")
            entry = EnvEntry(name, None if pair[-1].dynamic else value, self.source,
                             (pair[0].span[0], pair[-1].span[1]), f"{run.runner} --env", remove_args(pair))
            self.pf.env.append(entry)
            env.append(entry)
        context = self.context(chain.scope)
        launch = Launch(kind=kind, file=self.source, span=argv[run.image].span or self.span(chain.anchor),
                        argv=launch_argv, options_start=opt, context=context,
                        group=f"{self.source.display}#{context}",
                        env=env, image=image, program=program)
        launch.via = f"via {run.runner} argv list, image {image}" + (
            " (its entrypoint: vllm serve)" if program == run.runner else "")
        launch.append_site, launch.not_editable = self.chain_append_site(chain, argv)
        return launch

    def chain_launch(self, chain: Chain) -> Launch | None:
        argv: list[Arg] = []
        origin: list[tuple[Seg, int]] = []        # for each argv item: its seg and element index
        for seg in chain.segs:
            if seg.kind == "list":
                for i, el in enumerate(seg.elems):
                    argv.append(self.elem_arg(el))
                    origin.append((seg, i))
            elif seg.kind == "item":
                argv.append(self.elem_arg(seg.node, splits=seg.splits))
                origin.append((seg, 0))
            else:
                argv.append(Arg(self.code(seg.node), self.source, self.span(seg.node), dynamic=True, splits=True))
                origin.append((seg, 0))
        words = ["python" if a.dynamic and a.value.replace(" ", "") == "sys.executable" else a.value
                 for a in argv]
        det = detect(words)
        if det is None:
            return self.docker_run_list(chain, argv, words)
        for seg in chain.segs:
            if seg.kind == "list":
                self.launch_elems.update(id(el) for el in seg.elems)
        context = self.context(chain.scope)
        launch = Launch(kind=det.kind, file=self.source, span=argv[det.start].span or self.span(chain.anchor),
                        argv=argv[det.start:], options_start=det.options_start - det.start, context=context,
                        group=f"{self.source.display}#{context}", env=list(self.env), program=det.program)
        launch.append_site, launch.not_editable = self.chain_append_site(chain, argv)
        return launch

    def chain_append_site(self, chain: Chain, argv: list[Arg]) -> tuple[AppendSite | None, str | None]:
        if chain.unfollowable:
            return None, chain.unfollowable
        segs = chain.segs
        last = segs[-1]
        if last.kind == "opaque" or last.splits:
            return None, f"its argv ends in items known only at run time ({self.code(last.node)})"
        if last.kind == "list" and last.elems and isinstance(last.elems[-1], ast.Starred):
            return None, f"its argv ends in {self.code(last.elems[-1])}"
        # the last list literal this list owns; items appended after it must not be a flag's value
        n_after = 0
        for seg in reversed(segs):
            if seg.kind == "list" and seg.elems:
                break
            if seg.kind != "list":
                n_after += 1
        else:
            return None, "no list literal to add an item to"
        if seg.owner != chain.key:
            return None, f"its argv ends with the items of `{seg.owner}`, which other launches may share"
        if seg.elems[-1] is not (seg.node.elts[-1] if seg.node.elts else None):
            return None, "its argv ends inside a list that is spliced with *"
        if n_after:
            before, after = argv[len(argv) - n_after - 1], argv[len(argv) - n_after]
            if before.value.startswith("-") and "=" not in before.value and not after.value.startswith("-"):
                return None, f"an item after the list may be the value of {before.value}"
        return self.list_site(seg.node), None

    def list_site(self, node) -> AppendSite:
        elems = node.elts
        quote = '"'
        for el in reversed(elems):
            q = self.quote_of(el)
            if q:
                quote = q
                break
        s, e = self.span(node.elts[-1])
        ls = self.line_start(s)
        indent = self.text[ls:s]
        if not indent.strip():             # one item per line: the new item gets its own
            nl_at = LINE_RE.search(self.text, e)
            nl = nl_at.group(0) if nl_at else "\n"
            rest = self.text[e:nl_at.start() if nl_at else len(self.text)]
            if nl_at and re.fullmatch(r"\s*,\s*#.*", rest):
                # `"m",  # comment`: the new item goes on the next line, the comment stays
                return AppendSite(self.source, nl_at.start(), nl + indent + quote + "{}" + quote + ",")
            return AppendSite(self.source, e, "," + nl + indent + quote + "{}" + quote)
        return AppendSite(self.source, e, ", " + quote + "{}" + quote)

    def shell_launches(self, cand: StringCandidate) -> list[Launch]:
        """Launches of a shell command string; its own exports and prefixes reach only them."""
        pieces = self.pieces(cand.node)
        if pieces is None:
            self.pf.notes.append(f"line {self.source.line_col(self.span(cand.node)[0])[0]}: a shell "
                                 "command string vllmlint could not decode was skipped")
            return []
        chars: list[str] = []
        omap: list[int] = []
        ends: dict[int, int] = {}                  # start of a multi-character source unit -> its end
        restore: dict[str, str] = {}
        for p in pieces:
            if isinstance(p, Lit):
                for c, s, e in p.chars:
                    chars.append(c)
                    omap.append(s)
                    if e - s > 1:
                        ends[s] = e
            else:
                token = "${__vlpy%d__}" % len(self.placeholders)
                self.placeholders.append(p.display)
                restore[token] = p.display
                s, e = p.span
                chars.extend(token)
                omap.extend([s] * (len(token) - 1) + [e - 1])
        text = "".join(chars)
        bodies = self.literal_bodies(cand.node)
        context = self.context(cand.scope)
        scan = scan_shell(self.source, text, omap, context=context, group=f"{self.source.display}#{context}",
                          inherited_env=list(self.env))
        fixer = _SpanFixer(self.source, ends, bodies, restore)
        for entry in scan.env:
            fixer.entry(entry)
        own_env = {id(e) for e in self.env}
        for launch in scan.launches:
            for arg in launch.argv:
                fixer.arg(arg)
            for entry in launch.env:
                if id(entry) not in own_env:
                    fixer.entry(entry)
            if launch.span:
                launch.span = (launch.span[0], fixer.end(launch.span[1]))
            site = launch.append_site
            if site is not None:
                offset = fixer.end(site.offset)
                if not fixer.inside(offset, offset):
                    launch.append_site = None
                    launch.not_editable = launch.not_editable or \
                        "the command string is built from Python expressions"
                else:
                    launch.append_site = AppendSite(self.source, offset, site.template)
        launches = scan.launches
        if not cand.forced:
            # `VLLM = "vllm serve"`: a string that only names the command is a fragment
            launches = [l for l in launches if len(l.argv) > l.options_start]
            if not launches:
                return []
        self.pf.env.extend(scan.env)
        return launches


_VISITS = {
    ast.FunctionDef: (_Parser.visit_FunctionDef, _Parser.leave_FunctionDef),
    ast.AsyncFunctionDef: (_Parser.visit_FunctionDef, _Parser.leave_FunctionDef),
    ast.ClassDef: (_Parser.visit_ClassDef, _Parser.leave_ClassDef),
    ast.For: (_Parser.visit_For, _Parser.leave_For),
    ast.AsyncFor: (_Parser.visit_For, _Parser.leave_For),
    ast.While: (_Parser.visit_For, _Parser.leave_For),
    ast.ListComp: (_Parser.visit_For, _Parser.leave_For),
    ast.SetComp: (_Parser.visit_For, _Parser.leave_For),
    ast.GeneratorExp: (_Parser.visit_For, _Parser.leave_For),
    ast.DictComp: (_Parser.visit_For, _Parser.leave_For),
    ast.Assign: (_Parser.visit_Assign, None),
    ast.AnnAssign: (_Parser.visit_AnnAssign, None),
    ast.AugAssign: (_Parser.visit_AugAssign, None),
    ast.Delete: (_Parser.visit_Delete, None),
    ast.Call: (_Parser.visit_Call, None),
    ast.Return: (None, _Parser.leave_Return),
}


def _literal(code: str):
    """ast.literal_eval of one literal token, or None when it cannot be read."""
    try:
        return ast.literal_eval(code)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None



class _CommandStringSite(AppendSite):
    """One more word at the end of a command string literal (the SDK splits it with shlex):
    quoted for shlex, then escaped for the Python literal. `template`: the literal's quote + "{}"."""

    def edit(self, token: str) -> Edit:
        import shlex

        quote = self.template[0]
        word = shlex.quote(token).replace("\\", "\\\\").replace(quote, "\\" + quote)
        return Edit(self.file, self.offset, self.offset, " " + word)


def _split_command(pieces: list, source: SourceFile) -> list[Arg]:
    """A command string split as the docker SDK splits it (shlex.split: POSIX quoting, nothing
    expanded), each word with its span and the offset of each character of its value."""
    chars: list[tuple[str | None, int, int]] = []        # None: a run-time part
    dyn: dict[int, str] = {}
    for p in pieces:
        if isinstance(p, Lit):
            chars.extend(p.chars)
        else:
            dyn[len(chars)] = p.display
            chars.append((None, p.span[0], p.span[1]))
    words: list[Arg] = []
    i, n = 0, len(chars)
    while i < n:
        while i < n and chars[i][0] is not None and chars[i][0] in " \t\r\n\f\v":
            i += 1
        if i >= n:
            break
        start, value, offs, dynamic, quote = chars[i][1], [], [], False, None
        end = start
        while i < n:
            c, s, e = chars[i]
            if c is None:
                value.append(dyn[i])
                offs.extend([s] * len(dyn[i]))
                dynamic = True
            elif quote == "'":
                if c == "'":
                    quote = None
                else:
                    value.append(c)
                    offs.append(s)
            elif quote == '"':
                if c == '"':
                    quote = None
                elif c == "\\" and i + 1 < n and chars[i + 1][0] in ('"', "\\", "$", "`"):
                    i += 1
                    value.append(chars[i][0])
                    offs.append(chars[i][1])
                else:
                    value.append(c)
                    offs.append(s)
            elif c in " \t\r\n\f\v":
                break
            elif c in "'\"":
                quote = c
            elif c == "\\" and i + 1 < n and chars[i + 1][0] is not None:
                i += 1
                value.append(chars[i][0])
                offs.append(chars[i][1])
            else:
                value.append(c)
                offs.append(s)
            end = chars[i][2]
            i += 1
        text = "".join(value)
        located = tuple(offs) if not dynamic and len(offs) == len(text) else None
        words.append(Arg(text, source, (start, end), dynamic=dynamic,
                         locate=(lambda o=located: o) if located is not None else None))
    return words


class _SpanFixer:
    """Brings spans that scan_shell computed back onto whole source characters (an escape such
    as \\" is one character of the command) and drops those that leave a string literal."""

    def __init__(self, source: SourceFile, ends: dict[int, int], bodies, restore: dict[str, str]):
        self.source, self.ends, self.bodies, self.restore = source, ends, bodies, restore
        self.fixed: set[int] = set()

    def end(self, offset: int) -> int:
        return self.ends.get(offset - 1, offset)

    def inside(self, s: int, e: int) -> bool:
        return any(bs <= s and e <= be for bs, be in self.bodies)

    def value(self, value: str) -> tuple[str, bool]:
        found = False

        def sub(m: re.Match) -> str:
            nonlocal found
            found = True
            return self.restore.get(m.group(0), m.group(0))
        return PLACEHOLDER_RE.sub(sub, value), found

    def span(self, span):
        if span is None:
            return None
        s, e = span[0], self.end(span[1])
        return (s, e) if self.inside(s, e) else None

    def arg(self, arg: Arg) -> None:
        if id(arg) in self.fixed:
            return
        self.fixed.add(id(arg))
        arg.value, found = self.value(arg.value)
        arg.dynamic = arg.dynamic or found
        arg.span = self.span(arg.span)

    def entry(self, entry: EnvEntry) -> None:
        if id(entry) in self.fixed:
            return
        self.fixed.add(id(entry))
        if entry.value is not None:
            value, found = self.value(entry.value)
            entry.value = None if found else value
        entry.span = (entry.span[0], self.end(entry.span[1]))
        if entry.removal is not None:
            edits = [Edit(ed.file, ed.start, self.end(ed.end), ed.text) for ed in entry.removal]
            entry.removal = edits if all(self.inside(ed.start, ed.end) for ed in edits) else None


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


# -- the engine API (ast only) -----------------------------------------------------------------
# `LLM(...)`, `EngineArgs(...)`, `AsyncEngineArgs(...)`, `X.from_engine_args(...)`,
# `AsyncEngineArgs.from_cli_args(args)`, Ray Serve `LLMConfig(engine_kwargs=...)`, and the
# api_server's own argparse launch (`make_arg_parser` ... `run_server(args)`). Keyword arguments
# are vLLM's engine arguments: `swap_space=4` is `--swap-space=4` with the keyword's own span, so
# every flag rule reads them; a rename writes the keyword's new name (KeywordArg), an added flag
# is written as a keyword (KeywordSite). Names count only when they come from vLLM: imported from
# a module with a `vllm` part (`from vllm import LLM`, `import vllm` then `vllm.LLM`), never
# `sglang` (`sgl.Engine`) or a same-named class of another library.

ENGINE_CLASSES = {"LLM", "EngineArgs", "AsyncEngineArgs"}
ENGINE_HOLDERS = {"LLMEngine", "AsyncLLMEngine", "AsyncLLM", "LLM", "EngineArgs", "AsyncEngineArgs", "MQLLMEngine"}
ENGINE_FACTORIES = {"from_engine_args", "from_cli_args"}
KV_CLASSES = {"KVTransferConfig"}
ARGPARSE_FUNCS = {"make_arg_parser", "FlexibleArgumentParser", "run_server", "add_cli_args"}
RAY_LLMCONFIG = "LLMConfig"
# keywords of LLM(...) that are not engine arguments (they never reach the CLI parser)
NOT_ENGINE_KW = {"use_tqdm", "self"}


def _vllm_module(name: str | None) -> bool:
    parts = (name or "").split(".")
    return "vllm" in parts and "sglang" not in parts


@record
class KeywordArg(Arg):
    """An engine argument written as a Python keyword (`swap_space=4`), a dict entry
    (`"swap_space": 4`) or an attribute (`args.swap_space = 4`): option names are spelled
    snake_case, without dashes."""
    keyword_style: str = "keyword"        # keyword | key | attribute


@record(frozen=True)
class KeywordSite(AppendSite):
    """Adds an engine argument to a call as a keyword: `--enable-scale-out` -> `enable_scale_out=True`."""

    def edit(self, token: str) -> Edit:
        return Edit(self.file, self.offset, self.offset, self.template.format(flag_keyword(token)))


def flag_keyword(token: str) -> str:
    name, eq, value = token.partition("=")
    key = name.lstrip("-").replace("-", "_")
    if not eq:
        return f"{key}=True"
    if re.fullmatch(r"-?\d+(?:\.\d+)?", value):
        return f"{key}={value}"
    if value.startswith(("{", "[")):
        try:
            return f"{key}={json.loads(value)!r}"
        except ValueError:
            pass
    return f"{key}={value!r}"


class _EngineScan:
    def __init__(self, source: SourceFile, tree: ast.Module, pf: ParsedFile, env: list[EnvEntry],
                 import_nodes: list | None = None, offsets: "_Offsets | None" = None):
        self.source, self.text, self.tree, self.pf, self.env = source, source.text, tree, pf, env
        self.import_nodes = import_nodes     # the Import / ImportFrom nodes in ast.walk's order
        self.offsets = offsets or _Offsets(self.text)      # the parser's, when it ran first
        self.off = self.offsets.off
        self.names: dict[str, str] = {}       # local name -> what it is (LLM, AsyncEngineArgs, ...)
        self.modules: set[str] = set()         # local names bound to a vllm module
        self.dicts: dict[tuple[str, str], list] = {}   # (scope, key) -> [(stmt order, node)] bindings
        self.bound_calls: dict[tuple[str, str], ast.Call] = {}
        self.launches: list[Launch] = []
        self.splat_only: dict[int, tuple[str, str, str]] = {}
        self.splats: set[tuple[str, str, str]] = set()

    # positions

    def span(self, node) -> tuple[int, int]:
        return self.off(node.lineno, node.col_offset), self.off(node.end_lineno, node.end_col_offset)

    def code(self, node) -> str:
        s, e = self.span(node)
        return self.text[s:e]

    # what a name is
    def imports(self) -> None:
        nodes = self.import_nodes if self.import_nodes is not None else ast.walk(self.tree)
        for node in nodes:
            if isinstance(node, ast.ImportFrom) and _vllm_module(node.module):
                for a in node.names:
                    self.names[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ray.serve"):
                for a in node.names:
                    if a.name == RAY_LLMCONFIG:
                        self.names[a.asname or a.name] = RAY_LLMCONFIG
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if _vllm_module(a.name):
                        self.modules.add(a.asname or a.name.split(".")[0])

    def what(self, func) -> str | None:
        """`LLM`, `vllm.LLM`, `vllm.engine.arg_utils.AsyncEngineArgs`: the vLLM name it is."""
        if isinstance(func, ast.Name):
            return self.names.get(func.id)
        if isinstance(func, ast.Attribute):
            base = func.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in self.modules:
                return func.attr
        return None

    # walk
    def run(self) -> None:
        self.imports()
        if not self.names and not self.modules:
            return
        self.walk(self.tree, "", "")
        # `LLM(**model_args)` where model_args is only a parameter, in a class that builds the
        # same engine from a dict of that name elsewhere (`LLM(**self.model_args)`): one engine,
        # reached on another code path (e.g. one copy per data-parallel rank)
        self.launches = [l for l in self.launches if not (
            id(l) in self.splat_only and self.splat_only[id(l)][0] and self.splat_only[id(l)] in self.splats)]
        self.pf.launches.extend(self.launches)
        self.pf.launches.sort(key=lambda l: l.span)

    def walk(self, node, scope: str, cls: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.walk(child, f"{scope}.{child.name}" if scope else child.name, cls)
                continue
            if isinstance(child, ast.ClassDef):
                name = f"{scope}.{child.name}" if scope else child.name
                self.walk(child, name, name)
                continue
            if isinstance(child, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                self.binding(child, scope, cls)
            elif isinstance(child, ast.Expr) and isinstance(child.value, ast.Call):
                self.dict_method(child.value, scope, cls)
            if isinstance(child, ast.Call):
                self.call(child, scope, cls)
            self.walk(child, scope, cls)

    def key(self, node) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            k = self.key(node.value)
            return None if k is None else f"{k}.{node.attr}"
        return None

    def scopes(self, key: str, scope: str, cls: str) -> list[str]:
        out = [scope]
        if key.startswith("self.") and cls:
            out.append(cls)
        out.append("")
        return out

    def binding(self, node, scope: str, cls: str) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if value is None or len(targets) != 1:
            return
        target = targets[0]
        if isinstance(node, ast.AugAssign):
            k = self.key(target)
            if k and isinstance(node.op, ast.BitOr):
                self.add_dict(k, value, scope, cls)
            return
        if isinstance(target, ast.Subscript):          # d["swap_space"] = 4
            k = self.key(target.value)
            if k and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
                self.add_dict(k, ("item", target.slice, value, node), scope, cls)
            return
        k = self.key(target)
        if k is None:
            return
        if isinstance(value, ast.Dict) or (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                                           and value.func.id == "dict"):
            for s in {scope, cls if k.startswith("self.") and cls else scope}:
                self.dicts[(s, k)] = []
            self.add_dict(k, value, scope, cls)
        elif isinstance(value, ast.Call):
            for s in {scope, cls if k.startswith("self.") and cls else scope}:
                self.bound_calls[(s, k)] = value

    def add_dict(self, k: str, value, scope: str, cls: str) -> None:
        for s in {scope, cls if k.startswith("self.") and cls else scope}:
            if (s, k) in self.dicts:
                self.dicts[(s, k)].append(value)

    def dict_method(self, call: ast.Call, scope: str, cls: str) -> None:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "update":
            k = self.key(f.value)
            if k:
                if call.args and not call.keywords:
                    self.add_dict(k, call.args[0], scope, cls)
                elif call.keywords:
                    self.add_dict(k, call, scope, cls)

    def find_dict(self, node, scope: str, cls: str) -> list | None:
        k = self.key(node)
        if k is None:
            return None
        for s in self.scopes(k, scope, cls):
            if (s, k) in self.dicts:
                return self.dicts[(s, k)]
        return None

    def find_call(self, node, scope: str, cls: str) -> ast.Call | None:
        k = self.key(node)
        if k is None:
            return None
        for s in self.scopes(k, scope, cls):
            if (s, k) in self.bound_calls:
                return self.bound_calls[(s, k)]
        return None

    # engine calls
    def call(self, call: ast.Call, scope: str, cls: str) -> None:
        func = call.func
        what = self.what(func)
        if what in ENGINE_CLASSES:
            if self.feeds_factory(call):
                return
            self.engine_launch(call, what, scope, cls)
            return
        if what == RAY_LLMCONFIG:
            kw = next((k for k in call.keywords if k.arg == "engine_kwargs"), None)
            if kw is not None:
                self.engine_launch(call, "ray.serve.llm.LLMConfig", scope, cls, kwargs_of=kw.value)
            return
        if what == "run_server":
            self.api_server_launch(call, scope, cls)
            return
        if isinstance(func, ast.Attribute) and func.attr in ENGINE_FACTORIES:
            holder = self.what(func.value)
            if holder not in ENGINE_HOLDERS:
                return
            if func.attr == "from_cli_args":
                self.engine_launch(call, f"{holder}.from_cli_args", scope, cls, cli=True)
                return
            arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "engine_args"), None)
            if isinstance(arg, ast.Call) and (self.what(arg.func) in ENGINE_CLASSES or self.is_factory(arg)):
                return                      # counted at the inner call
            bound = self.find_call(arg, scope, cls) if arg is not None else None
            if bound is not None and (self.what(bound.func) in ENGINE_CLASSES or self.is_factory(bound)):
                return
            self.engine_launch(call, f"{holder}.{func.attr}", scope, cls, cli=True)

    def is_factory(self, call: ast.Call) -> bool:
        f = call.func
        return isinstance(f, ast.Attribute) and f.attr in ENGINE_FACTORIES and self.what(f.value) in ENGINE_HOLDERS

    def feeds_factory(self, call: ast.Call) -> bool:
        return False

    def engine_launch(self, call: ast.Call, what: str, scope: str, cls: str, kwargs_of=None, cli: bool = False) -> None:
        program = Arg(what, self.source, self.span(call.func))
        argv: list[Arg] = [program]
        opaque: list[str] = []
        if kwargs_of is not None:
            self.mapping_options(kwargs_of, argv, opaque, scope, cls)
        elif cli:
            opaque.append("its engine arguments come from the command line or another object")
        else:
            if call.args and not isinstance(call.args[0], ast.Starred) and what.endswith("LLM"):
                argv.append(self.value_arg("--model", call.args[0], self.span(call.args[0]), "positional"))
            for kw in call.keywords:
                if kw.arg is None:
                    self.mapping_options(kw.value, argv, opaque, scope, cls)
                else:
                    self.keyword_option(kw.arg, kw.value, self.span(kw), argv, "keyword")
        context = f"python engine {scope}" if scope else f"python engine {Path(self.source.display).stem}"
        launch = Launch(kind=ENGINE, file=self.source, span=self.span(call), argv=argv, options_start=1,
                        context=context, group=f"{self.source.display}#{context}", env=list(self.env),
                        program=what)
        splats = [kw.value for kw in call.keywords if kw.arg is None]
        if kwargs_of is None and not cli and len(splats) == 1 and len(argv) == 1 and opaque:
            name = self.key(splats[0])
            if name is not None:
                self.splat_only[id(launch)] = (cls.split(".")[0], what, name.rsplit(".", 1)[-1])
        elif len(splats) == 1 and self.key(splats[0]) is not None:
            self.splats.add((cls.split(".")[0], what, self.key(splats[0]).rsplit(".", 1)[-1]))
        if opaque or cli or kwargs_of is not None:
            launch.not_editable = opaque[0] if opaque else "its engine arguments are a dict given elsewhere"
        else:
            launch.append_site = self.call_site(call)
        self.launches.append(launch)

    def mapping_options(self, node, argv, opaque, scope, cls) -> None:
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if k is None:
                    self.mapping_options(v, argv, opaque, scope, cls)
                elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                    self.keyword_option(k.value, v, (self.span(k)[0], self.span(v)[1]), argv, "key", k)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            for a in node.args:
                self.mapping_options(a, argv, opaque, scope, cls)
            for kw in node.keywords:
                if kw.arg is None:
                    self.mapping_options(kw.value, argv, opaque, scope, cls)
                else:
                    self.keyword_option(kw.arg, kw.value, self.span(kw), argv, "keyword")
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
            for kw in node.keywords:
                if kw.arg is not None:
                    self.keyword_option(kw.arg, kw.value, self.span(kw), argv, "keyword")
            return
        if isinstance(node, tuple) and node[0] == "item":          # d["k"] = v
            _, k, v, stmt = node
            self.keyword_option(k.value, v, self.span(stmt), argv, "key", k)
            return
        parts = self.find_dict(node, scope, cls)
        if parts is not None:
            for part in parts:
                self.mapping_options(part, argv, opaque, scope, cls)
            return
        opaque.append(f"its engine arguments include {self.code(node)}, known only at run time")

    def keyword_option(self, name: str, value, span, argv, style: str, key_node=None) -> None:
        if name in NOT_ENGINE_KW or not re.fullmatch(r"[A-Za-z_]\w*", name):
            return
        if isinstance(value, ast.Constant) and value.value is None:
            return
        flag = "--" + name.replace("_", "-")
        if isinstance(value, ast.Constant) and isinstance(value.value, bool):
            flag = flag if value.value else "--no-" + name.replace("_", "-")
            argv.append(self.named_arg(flag, "", None, span, style, name, key_node))
            return
        argv.append(self.value_arg(flag, value, span, style, name, key_node))

    def literal(self, node):
        """The JSON-able value of a literal (dicts, lists, KVTransferConfig(...) keywords), or
        raise ValueError."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool, type(None))):
            return node.value
        if isinstance(node, ast.Dict):
            if any(k is None or not isinstance(k, ast.Constant) or not isinstance(k.value, str) for k in node.keys):
                raise ValueError
            return {k.value: self.literal(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.literal(e) for e in node.elts]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            return -node.operand.value
        if isinstance(node, ast.Call) and (self.what(node.func) in KV_CLASSES or self.what(node.func) is not None
                                           and self.what(node.func).endswith("Config")
                                           or isinstance(node.func, ast.Name) and node.func.id == "dict") \
                and not node.args and all(k.arg for k in node.keywords):
            return {k.arg: self.literal(k.value) for k in node.keywords if not (
                isinstance(k.value, ast.Constant) and k.value.value is None)}
        raise ValueError

    def value_arg(self, flag: str, value, span, style: str, name: str | None = None, key_node=None) -> Arg:
        try:
            lit = self.literal(value)
        except (ValueError, TypeError, RecursionError):
            return self.named_arg(flag, "=" + self.code(value), None, span, style, name, key_node, dynamic=True)
        vspan = self.span(value)
        if isinstance(lit, str):
            raw = self.text[vspan[0]:vspan[1]]
            m = re.fullmatch(r"([rRuU]?)('|\")(.*)\2", raw, re.S)
            offs = None
            if m and "\\" not in m.group(3) and m.group(3) == lit and "\n" not in lit:
                base = vspan[0] + len(m.group(1)) + 1
                offs = list(range(base, base + len(lit)))
            return self.named_arg(flag, "=" + lit, offs, span, style, name, key_node)
        if isinstance(lit, (int, float)):
            raw = self.text[vspan[0]:vspan[1]]
            text = raw if raw == str(lit) else str(lit)
            offs = list(range(vspan[0], vspan[0] + len(raw))) if raw == text else None
            return self.named_arg(flag, "=" + text, offs, span, style, name, key_node)
        return self.named_arg(flag, "=" + json.dumps(lit), None, span, style, name, key_node)

    def named_arg(self, flag: str, rest: str, value_offs, span, style: str, name: str | None, key_node,
                  dynamic: bool = False) -> Arg:
        """`--flag=value` mapped back to the file: the option name onto the keyword (so a rename
        writes the keyword), the value onto the literal when it is written plainly."""
        name_span = self.name_span(span, style, name, key_node)
        offsets = None
        if name_span is not None:
            ns, ne = name_span
            # `--` and the `no-` prefix sit on the keyword's first character
            head = [ns] * (len(flag) - len(name or "")) if name else []
            body = list(range(ns, ne)) if name and ne - ns == len(name) else None
            if body is not None:
                offsets = head + body
                if rest:
                    if value_offs is not None:
                        offsets += [ne] + list(value_offs)
                    else:
                        offsets = None
        arg = KeywordArg(flag + rest, self.source, span, dynamic=dynamic, keyword_style=style)
        if offsets is not None and len(offsets) == len(arg.value):
            frozen = offsets
            arg.locate = lambda o=frozen: o
        return arg

    def name_span(self, span, style: str, name: str | None, key_node) -> tuple[int, int] | None:
        if name is None:
            return None
        if style == "keyword":
            s = span[0]
            return (s, s + len(name)) if self.text.startswith(name, s) else None
        if style == "key" and key_node is not None:
            ks, ke = self.span(key_node)
            raw = self.text[ks:ke]
            if len(raw) == len(name) + 2 and raw[1:-1] == name:
                return ks + 1, ke - 1
        return None

    def call_site(self, call: ast.Call) -> AppendSite | None:
        items = [*call.args, *call.keywords]
        if not items:
            s, e = self.span(call)
            if self.text[e - 1:e] == ")" and not self.text[self.span(call.func)[1]:e - 1].strip("( \t"):
                return KeywordSite(self.source, e - 1, "{}")
            return None
        last = max(items, key=lambda n: (n.end_lineno, n.end_col_offset))
        e = self.span(last)[1]
        s = self.span(last)[0]
        ls = self.text.rfind("\n", 0, s) + 1
        indent = self.text[ls:s]
        m = re.match(r"[ \t]*(,?)[ \t]*(#[^\r\n]*)?(\r?\n)?", self.text[e:])
        if indent.strip() == "" and m and m.group(3):         # one argument per line
            if m.group(1):
                at = e + m.start(3)
                return KeywordSite(self.source, at, m.group(3) + indent + "{},")
            if m.group(2):
                return None
            return KeywordSite(self.source, e, "," + m.group(3) + indent + "{}")
        return KeywordSite(self.source, e, ", {}")

    # the api_server's own launch: make_arg_parser(...).parse_args([...]) then run_server(args)
    def api_server_launch(self, call: ast.Call, scope: str, cls: str) -> None:
        program = Arg("run_server", self.source, self.span(call.func))
        argv = [program]
        launch = Launch(kind=SERVE, file=self.source, span=self.span(call), argv=argv, options_start=1,
                        context=f"python api_server {scope or Path(self.source.display).stem}",
                        group=f"{self.source.display}#api_server", env=list(self.env),
                        program="vllm.entrypoints.openai.api_server.run_server")
        launch.not_editable = "its options are parsed with argparse in Python"
        target = call.args[0] if call.args else None
        parsed = self.parsed_args(target, scope, cls)
        if parsed is not None:
            pcall, argname = parsed
            if pcall.args and isinstance(pcall.args[0], (ast.List, ast.Tuple)):
                for el in pcall.args[0].elts:
                    argv.append(self.list_item(el))
            # `args.x = ...` set by hand on the namespace are not read: argparse never sees
            # them, and vLLM ignores names it does not define
        self.launches.append(launch)

    def parsed_args(self, target, scope: str, cls: str):
        k = self.key(target) if target is not None else None
        if k is None:
            return None
        bound = self.find_call(target, scope, cls)
        if bound is None or not (isinstance(bound.func, ast.Attribute) and bound.func.attr in
                                 ("parse_args", "parse_known_args")):
            return None
        return bound, k

    def list_item(self, el) -> Arg:
        if isinstance(el, ast.Constant) and isinstance(el.value, str):
            s, e = self.span(el)
            raw = self.text[s:e]
            m = re.fullmatch(r"([rRuU]?)('|\")(.*)\2", raw, re.S)
            if m and "\\" not in m.group(3) and m.group(3) == el.value:
                base = s + len(m.group(1)) + 1
                offs = list(range(base, base + len(el.value)))
                return Arg(el.value, self.source, (s, e), locate=lambda o=offs: o)
            return Arg(el.value, self.source, (s, e))
        return Arg(self.code(el), self.source, self.span(el), dynamic=True, splits=isinstance(el, ast.Starred))
