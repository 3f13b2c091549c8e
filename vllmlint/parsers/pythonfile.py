"""Python front end: launchers that start vLLM with subprocess, os.system, os.exec*, ...

The linted code is never imported or run. libcst parses it (lazily imported: it is slow to
import) and keeps every token's position; positions are turned into character offsets of
`SourceFile.text` with our own line table, so CRLF files and non-ASCII text keep exact spans.

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
    update / setdefault on such names.
"""
from __future__ import annotations

import ast
import bisect
import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .detect import REFERENCE_PROXIES, detect
from ..model.launch import AppendSite, Arg, Edit, EnvEntry, Launch, ParsedFile, ParseError, SourceFile
from .shellscan import scan_shell

cst: Any = None          # libcst, imported on first use by parse_python

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
PLACEHOLDER_RE = re.compile(r"\$\{__vlpy(\d+)__\}")
FORMAT_FIELD_RE = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
PERCENT_FIELD_RE = re.compile(r"%%|%(?:\([^)]*\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa]")
SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n",
                  "r": "\r", "t": "\t", "v": "\v"}


def parse_python(source: SourceFile) -> ParsedFile:
    global cst
    if cst is None:
        import libcst
        cst = libcst
    from libcst.metadata import MetadataWrapper, PositionProvider

    _guard_nesting(source.text)
    try:
        module = cst.parse_module(source.text)
    except cst.ParserSyntaxError as err:
        raise _syntax_error(source.text, max(1, err.raw_line), err.message) from None
    except (ValueError, TypeError) as err:       # the native parser's other complaints
        raise _syntax_error(source.text, 1, str(err)) from None
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return _Parser(source, module, positions).run()


# libcst's native parser recurses once per nesting level (and once per operand of an
# `a and b and ...` chain or part of a dotted import): a few thousand levels overflow the C stack
# and kill the interpreter, a few hundred make it slow. Real launchers nest a few dozen levels.
MAX_NESTING = 100


def _guard_nesting(text: str) -> None:
    """Refuse, before libcst sees it, code nested deeper than MAX_NESTING. Python's own parser
    measures it (ast.parse only parses: nothing is compiled or run; it fails cleanly on deep
    input); when it cannot parse the file (newer syntax libcst may still accept) brackets are
    counted instead."""
    too_deep = ParseError(1, f"Python code nested too deeply (more than {MAX_NESTING} levels)")
    # a dotted name of thousands of parts also takes CPython's parser quadratic time
    if any(m.group().count(".") > MAX_NESTING for m in re.finditer(r"[\w.]{%d,}" % (2 * MAX_NESTING), text)):
        raise too_deep
    try:
        tree = ast.parse(text)
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
        return
    except ValueError:          # e.g. a NUL byte: libcst reports it
        return
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
            raise ParseError(getattr(node, "lineno", 1), too_deep.reason)
        todo.extend((child, depth) for child in ast.iter_child_nodes(node))


def _evaluated(node):
    """libcst's `evaluated_value` (ast.literal_eval of the literal), or None when this Python
    cannot read the literal (a NUL byte, an unknown `\\N{...}` name, syntax newer than this
    Python that libcst still accepts)."""
    try:
        return node.evaluated_value
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _syntax_error(text: str, line: int, message: str) -> ParseError:
    """libcst sometimes places an error where it gave up rather than where it is: ask Python's
    own parser (ast.parse only parses; nothing is compiled or run) for the line and wording."""
    try:
        ast.parse(text)
    except SyntaxError as err:
        if err.lineno:
            return ParseError(err.lineno, f"Python syntax error: {err.msg}")
    except (ValueError, MemoryError, RecursionError):
        pass
    return ParseError(line, f"Python syntax error: {message}")


# -- string literals ---------------------------------------------------------------------------

@dataclass
class Lit:
    """Decoded characters of a literal: (char, source start, source end) each."""
    chars: list[tuple[str, int, int]]


@dataclass
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

@dataclass
class Seg:
    """One contribution to an argv list: items of a list literal, one appended item, or an
    expression we cannot read (its items are unknown)."""
    kind: str                      # list | item | opaque
    node: Any                      # the list literal, the item, or the opaque expression
    elems: list = field(default_factory=list)    # kind == list: the element nodes taken
    owner: str = ""                # key of the named list that wrote it ("" for anonymous)
    splits: bool = False           # item added in a loop: any number of items


@dataclass
class Chain:
    key: str                       # "" for a list literal / `+` expression used in place
    scope: "Scope"
    anchor: Any
    segs: list[Seg] = field(default_factory=list)
    unfollowable: str | None = None
    consumed: int = 0


@dataclass
class Scope:
    name: str                      # qualified function or class name; "" for the module
    parent: "Scope | None"
    is_class: bool = False
    chains: dict[str, Chain] = field(default_factory=dict)
    strings: dict[str, Any] = field(default_factory=dict)
    loops: int = 0


@dataclass
class StringCandidate:
    node: Any
    scope: Scope
    prose: bool                    # docstring, log message, comparison, ...
    forced: bool = False           # handed to a shell (shell=True, os.system, ...)


class _Parser:
    def __init__(self, source: SourceFile, module, positions):
        self.source, self.text, self.module, self.positions = source, source.text, module, positions
        self.line_starts = [0] + [m.end() for m in LINE_RE.finditer(self.text)]
        self.shift = self.formfeed_shifts()
        self.pf = ParsedFile(source)
        self.module_scope = Scope("", None)
        self.scope = self.module_scope
        self.stack: list[Any] = []
        self.chains: list[Chain] = []
        self.handled: set[int] = set()         # ids of list/`+` nodes owned by a chain
        self.strings: dict[int, StringCandidate] = {}
        self.string_depth = 0
        self.forced: set[int] = set()
        self.env: list[EnvEntry] = []
        self.launch_elems: set[int] = set()
        self.placeholders: list[str] = []

    # -- positions -------------------------------------------------------------------------
    def off(self, pos) -> int:
        return self.line_starts[pos.line - 1] + pos.column + self.shift.get(pos.line, 0)

    def formfeed_shifts(self) -> dict[int, int]:
        """libcst counts characters, except that a form feed in the indentation of a line that
        starts a statement restarts that line's columns (as CPython's tokenizer does)."""
        shifts: dict[int, int] = {}
        for n, start in enumerate(self.line_starts, 1):
            m = re.match(r"[ \t\x0c]*\x0c", self.text[start:start + 200])
            if m:
                shifts[n] = m.end()
        if not shifts:
            return {}
        starts: set[int] = set()
        kinds = (cst.BaseStatement, cst.Else, cst.ExceptHandler, cst.Finally, cst.Decorator,
                 cst.ExceptStarHandler, cst.MatchCase)
        stack = [self.module]
        while stack:
            node = stack.pop()
            if isinstance(node, kinds):
                starts.add(self.positions[node].start.line)
            if isinstance(node, (cst.Module, cst.BaseSuite, cst.BaseStatement, cst.Else, cst.ExceptHandler,
                                 cst.ExceptStarHandler, cst.Finally, cst.MatchCase, cst.If)):
                stack.extend(node.children)
        return {line: k for line, k in shifts.items() if line in starts}

    def span(self, node) -> tuple[int, int]:
        r = self.positions[node]
        return self.off(r.start), self.off(r.end)

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

    def walk(self, node) -> None:
        self.stack.append(node)
        name = type(node).__name__
        visit = getattr(self, "visit_" + name, None)
        if visit is not None:
            visit(node)
        is_string_root = False
        if self.string_depth == 0 and self.is_string_expr(node):
            is_string_root = True
            self.strings[id(node)] = StringCandidate(node, self.scope, self.is_prose(),
                                                     forced=id(node) in self.forced)
        if is_string_root:
            self.string_depth += 1
        if self.string_depth == 0 and isinstance(node, (cst.List, cst.Tuple, cst.BinaryOperation)) \
                and id(node) not in self.handled:
            self.anonymous_chain(node)
        for child in node.children:
            self.walk(child)
        if is_string_root:
            self.string_depth -= 1
        leave = getattr(self, "leave_" + name, None)
        if leave is not None:
            leave(node)
        self.stack.pop()

    def enter_scope(self, name: str, is_class: bool = False) -> None:
        qual = f"{self.scope.name}.{name}" if self.scope.name else name
        self.scope = Scope(qual, self.scope, is_class)

    def leave_scope(self) -> None:
        assert self.scope.parent is not None
        self.scope = self.scope.parent

    def visit_FunctionDef(self, node) -> None:
        self.enter_scope(node.name.value)

    def leave_FunctionDef(self, node) -> None:
        self.leave_scope()

    def visit_ClassDef(self, node) -> None:
        self.enter_scope(node.name.value, is_class=True)

    def leave_ClassDef(self, node) -> None:
        self.leave_scope()

    def visit_For(self, node) -> None:
        self.scope.loops += 1

    def leave_For(self, node) -> None:
        self.scope.loops -= 1

    visit_While, leave_While = visit_For, leave_For
    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_For
    leave_ListComp = leave_SetComp = leave_GeneratorExp = leave_DictComp = leave_For

    def is_prose(self) -> bool:
        """Is the string being visited plainly text: a docstring, a message, a pattern?"""
        parent = self.stack[-2] if len(self.stack) > 1 else None
        if isinstance(parent, cst.Expr):
            return True
        if isinstance(parent, cst.Arg):
            if parent.keyword is not None and parent.keyword.value in TEXT_KEYWORDS:
                return True
            call = self.stack[-3] if len(self.stack) > 2 else None
            if isinstance(call, cst.Call) and _last_name(call.func) in TEXT_FUNCS:
                return True
        return any(isinstance(n, (cst.Comparison, cst.Raise, cst.Assert)) for n in self.stack[:-1])

    # -- strings ---------------------------------------------------------------------------
    def is_string_expr(self, node) -> bool:
        if isinstance(node, cst.SimpleString):
            return "b" not in node.prefix.lower()
        if isinstance(node, cst.ConcatenatedString):
            return not isinstance(_evaluated(node), bytes)
        if isinstance(node, cst.FormattedString):
            return True
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.Add):
                return any(self.is_string_literal(o) for o in _add_operands(node))
            if isinstance(node.operator, cst.Modulo):
                return self.is_string_literal(node.left)
            return False
        if isinstance(node, cst.Call):
            return isinstance(node.func, cst.Attribute) and node.func.attr.value == "format" \
                and self.is_string_literal(node.func.value)
        return False

    def is_string_literal(self, node) -> bool:
        return isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)) \
            and self.is_string_expr(node)

    def pieces(self, node) -> list[Lit | Dyn] | None:
        """The parts of a string expression; None when it cannot be read."""
        if isinstance(node, cst.SimpleString):
            if "b" in node.prefix.lower():
                return None
            s, _ = self.span(node)
            base = s + len(node.prefix) + len(node.quote)
            chars = decode_body(node.raw_value, base, "r" in node.prefix.lower(), False)
            if chars is None or "".join(c for c, _, _ in chars) != _evaluated(node):
                return None
            return [Lit(chars)]
        if isinstance(node, cst.ConcatenatedString):
            left, right = self.pieces(node.left), self.pieces(node.right)
            return None if left is None or right is None else left + right
        if isinstance(node, cst.FormattedString):
            out: list[Lit | Dyn] = []
            is_raw = "r" in node.prefix.lower()
            for part in node.parts:
                if isinstance(part, cst.FormattedStringText):
                    s, _ = self.span(part)
                    chars = decode_body(part.value, s, is_raw, True)
                    if chars is None:
                        return None
                    out.append(Lit(chars))
                else:
                    out.append(Dyn(self.code(part), self.span(part)))
            return out
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
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
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
            left = self.pieces(node.left)
            return None if left is None else _fields(left, PERCENT_FIELD_RE, {"%%": "%"})
        if isinstance(node, cst.Call) and self.is_string_expr(node):
            receiver = self.pieces(node.func.value)
            return None if receiver is None else _fields(receiver, FORMAT_FIELD_RE, {"{{": "{", "}}": "}"})
        return None

    def literal_bodies(self, node) -> list[tuple[int, int]]:
        """Source ranges inside which text can be edited: the bodies of the literals."""
        out = []
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.SimpleString):
                s, e = self.span(n)
                out.append((s + len(n.prefix) + len(n.quote), e - len(n.quote)))
            elif isinstance(n, cst.FormattedString):
                s, e = self.span(n)
                out.append((s + len(n.start), e - len(n.end)))
            elif isinstance(n, cst.ConcatenatedString):
                stack += [n.left, n.right]
            elif isinstance(n, cst.BinaryOperation):
                stack += [n.left] if isinstance(n.operator, cst.Modulo) else [n.left, n.right]
            elif isinstance(n, cst.Call):
                stack.append(n.func.value)
        return out

    # -- argv items -------------------------------------------------------------------------
    def elem_arg(self, node, splits: bool = False) -> Arg:
        span = self.span(node)
        if isinstance(node, cst.StarredElement):
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
        if isinstance(node, (cst.Integer, cst.Float)) and not splits:
            return Arg(self.code(node), self.source, span)
        return Arg(self.code(node), self.source, span, dynamic=True, splits=splits)

    def json_dumps(self, node) -> str | None:
        """`json.dumps(<literal>)`: the literal is read with ast.literal_eval, nothing runs."""
        if not isinstance(node, cst.Call) or self.code(node.func).replace(" ", "") not in ("json.dumps", "dumps"):
            return None
        if not node.args or node.args[0].keyword is not None or node.args[0].star:
            return None
        kwargs = {}
        try:
            value = ast.literal_eval(self.code(node.args[0].value))
            for arg in node.args[1:]:
                if arg.keyword is None or arg.keyword.value not in JSON_DUMPS_KW:
                    return None
                kwargs[arg.keyword.value] = ast.literal_eval(self.code(arg.value))
            return json.dumps(value, **kwargs)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None

    # -- argv lists and their build-up -------------------------------------------------------
    def key_of(self, node) -> str | None:
        """`cmd`, `self.cmd`: a name a list can be built under."""
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute) and self.key_of(node.value) is not None:
            return self.key_of(node.value) + "." + node.attr.value
        return None

    def find_chain(self, key: str | None) -> Chain | None:
        if key is None:
            return None
        scope: Scope | None = self.scope
        while scope is not None:
            if key in scope.chains:
                return scope.chains[key]
            scope = None if scope is self.module_scope else self.module_scope
        return None

    def inline(self, chain: Chain, segs: list[Seg], why: list[str]) -> None:
        chain.consumed += 1
        segs.extend(chain.segs)
        if chain.unfollowable:
            why.append(chain.unfollowable)

    def segs_of(self, node, owner: str, why: list[str]) -> tuple[list[Seg], bool]:
        """The contributions of an expression; bool: did it hold a list we can read?"""
        if isinstance(node, (cst.List, cst.Tuple)):
            self.handled.add(id(node))
            segs: list[Seg] = []
            cur: list = []
            for el in node.elements:
                base = self.find_chain(self.key_of(el.value)) if isinstance(el, cst.StarredElement) else None
                if base is not None:
                    segs.append(Seg("list", node, cur, owner))
                    cur = []
                    self.inline(base, segs, why)
                else:
                    cur.append(el.value if isinstance(el, cst.Element) else el)
            segs.append(Seg("list", node, cur, owner))
            return [s for s in segs if s.kind != "list" or s.elems or s is segs[-1]], True
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
            self.handled.add(id(node))
            left, lok = self.segs_of(node.left, owner, why)
            right, rok = self.segs_of(node.right, owner, why)
            return left + right, lok or rok
        base = self.find_chain(self.copied_name(node))
        if base is not None:
            segs = []
            self.inline(base, segs, why)
            return segs, True
        return [Seg("opaque", node, owner=owner)], False

    def copied_name(self, node) -> str | None:
        """`cmd`, `list(cmd)`, `cmd.copy()`, `cmd[:]`: a copy of the named list."""
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Name) and node.func.value in ("list", "tuple") and len(node.args) == 1:
                return self.key_of(node.args[0].value)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "copy" and not node.args:
                return self.key_of(node.func.value)
            return None
        if isinstance(node, cst.Subscript) and len(node.slice) == 1:
            sl = node.slice[0].slice
            if isinstance(sl, cst.Slice) and sl.lower is None and sl.upper is None and sl.step is None:
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
        if isinstance(node, cst.BinaryOperation) and not (
                isinstance(node.operator, cst.Add) and any(
                    isinstance(o, (cst.List, cst.Tuple)) for o in _add_operands(node))):
            return
        if any(isinstance(n, cst.Comparison) for n in self.stack[:-1]):
            return
        parent = self.stack[-2] if len(self.stack) > 1 else None
        if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is node:
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
        target = node.targets[0].target
        self.bind(target, node.value, node)

    def visit_AnnAssign(self, node) -> None:
        if node.value is not None:
            self.bind(node.target, node.value, node)
            self.env_dict_binding(node.target, node.value)

    def bind(self, target, value, stmt) -> None:
        key = self.key_of(target)
        if key is None:
            if isinstance(target, cst.Subscript):
                chain = self.find_chain(self.key_of(target.value))
                if chain is not None:
                    chain.unfollowable = chain.unfollowable or f"`{chain.key}` is changed by item assignment"
            return
        self.scope.strings.pop(key, None)
        if self.is_string_expr(value):
            self.scope.chains.pop(key, None)
            self.scope.strings[key] = value
        elif not ((self.find_chain(self.copied_name(value)) is not None
                   or isinstance(value, (cst.List, cst.Tuple, cst.BinaryOperation)))
                  and self.start_chain(key, value, stmt)):
            self.scope.chains.pop(key, None)      # rebound to something else: that list is done

    def visit_AugAssign(self, node) -> None:
        self.env_augassign(node)
        key = self.key_of(node.target)
        chain = self.scope.chains.get(key) if key else None
        if chain is None:
            return
        if isinstance(node.operator, cst.AddAssign):
            self.extend_chain(chain, node.value, f"+= {self.code(node.value)}")
        else:
            chain.unfollowable = chain.unfollowable or f"`{key}` is changed by {self.code(node)}"

    def visit_Del(self, node) -> None:
        target = node.target
        if isinstance(target, cst.Subscript):
            chain = self.find_chain(self.key_of(target.value))
            if chain is not None:
                chain.unfollowable = chain.unfollowable or f"`{chain.key}` is changed by del"

    def list_method(self, node) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        chain = self.scope.chains.get(self.key_of(func.value) or "")
        if chain is None:
            return
        method, args = func.attr.value, node.args
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

    def shell_call(self, node) -> None:
        func = self.code(node.func).replace(" ", "")
        shell = func in SHELL_FUNCS
        if not shell and (func.startswith("subprocess.") or func in SUBPROCESS_FUNCS) \
                and func.rsplit(".", 1)[-1] in SUBPROCESS_FUNCS:
            shell = any(a.keyword is not None and a.keyword.value == "shell" and self.code(a.value) == "True"
                        for a in node.args)
        if not shell:
            return
        command = next((a.value for a in node.args if a.keyword is None and not a.star), None)
        if command is None:
            command = next((a.value for a in node.args if a.keyword is not None
                            and a.keyword.value in ("args", "cmd", "command")), None)
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

    def statement_of(self, expr_depth: int):
        """(small statement, its line, its block) when stack[-expr_depth] is a whole statement."""
        st = self.stack
        if len(st) < expr_depth + 2:
            return None
        small, line, block = st[-expr_depth], st[-expr_depth - 1], st[-expr_depth - 2]
        if not isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            return None
        return small, line, block

    def remove_statement(self, where) -> list[Edit] | None:
        if where is None:
            return None
        small, line, block = where
        text, f = self.text, self.source
        spans = [self.span(s) for s in line.body]
        idx = next(i for i, s in enumerate(line.body) if s is small)
        s, e = spans[idx]
        if len(spans) > 1:
            if idx + 1 < len(spans):
                return [Edit(f, s, spans[idx + 1][0], "")]
            return [Edit(f, spans[idx - 1][1], e, "")]
        if isinstance(line, cst.SimpleStatementSuite) or (
                isinstance(block, cst.IndentedBlock) and len(block.body) == 1):
            return [Edit(f, s, e, "pass")]        # the block must keep a statement
        ls = self.line_start(s)
        if text[ls:s].strip():
            return None
        end = _skip(text, e, " \t")
        if text.startswith(";", end):
            end = _skip(text, end + 1, " \t")
        end = self.after_line(end)
        return None if end is None else [Edit(f, ls, end, "")]

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
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
            value = _evaluated(node)
            return value if isinstance(value, str) else None
        return None

    def env_assign(self, node) -> None:
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Subscript) and len(target.slice) == 1 \
                    and isinstance(target.slice[0].slice, cst.Index):
                ok, origin = self.is_env_target(target.value)
                name = self.literal_key(target.slice[0].slice.value)
                if ok and name:
                    removal = self.remove_statement(self.statement_of(1)) if len(node.targets) == 1 else None
                    self.add_env(name, node.value, self.span(node), origin, removal)
        if len(node.targets) == 1:
            self.env_dict_binding(node.targets[0].target, node.value)

    def env_dict_binding(self, target, value) -> None:
        if isinstance(target, cst.Name) and "env" in target.value.lower():
            self.env_mapping(value, "python env dict")

    def env_augassign(self, node) -> None:
        if isinstance(node.operator, cst.BitOrAssign) and self.is_env_target(node.target)[0]:
            self.env_mapping(node.value, self.is_env_target(node.target)[1])

    def env_mapping(self, value, origin: str) -> None:
        """A dict literal or `dict(..., X="v")` call: one entry per literal key."""
        if isinstance(value, cst.Dict):
            spans = [self.dict_elem_span(el) for el in value.elements]
            for i, el in enumerate(value.elements):
                if isinstance(el, cst.DictElement):
                    name = self.literal_key(el.key)
                    if name:
                        self.add_env(name, el.value, spans[i], origin, self.remove_element(spans, i))
        elif isinstance(value, cst.Call) and self.code(value.func) == "dict":
            self.env_kwargs(value, origin)

    def dict_elem_span(self, el) -> tuple[int, int]:
        if isinstance(el, cst.DictElement):
            return self.span(el.key)[0], self.span(el.value)[1]
        return self.span(el)

    def env_kwargs(self, call, origin: str) -> None:
        spans = [self.span(a) for a in call.args]
        for i, arg in enumerate(call.args):
            if arg.keyword is not None and not arg.star:
                self.add_env(arg.keyword.value, arg.value, spans[i], origin, self.remove_element(spans, i))
            elif i == 0 and not arg.star:
                self.env_mapping(arg.value, origin)

    def env_call(self, node) -> None:
        func = node.func
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "env":
                self.env_mapping(arg.value, "python env= argument")
        if self.code(func).replace(" ", "") == "os.putenv" and len(node.args) == 2:
            name = self.literal_key(node.args[0].value)
            if name:
                where = self.statement_of(2) if isinstance(self.stack[-2], cst.Expr) else None
                self.add_env(name, node.args[1].value, self.span(node), "python os.putenv",
                             self.remove_statement(where))
            return
        if not isinstance(func, cst.Attribute):
            return
        ok, origin = self.is_env_target(func.value)
        if not ok:
            return
        method = func.attr.value
        if method == "setdefault" and len(node.args) == 2 and node.args[0].keyword is None:
            name = self.literal_key(node.args[0].value)
            if name:
                where = self.statement_of(2) if isinstance(self.stack[-2], cst.Expr) else None
                self.add_env(name, node.args[1].value, self.span(node), origin, self.remove_statement(where))
        elif method == "update":
            self.env_kwargs(node, origin)

    # -- results -----------------------------------------------------------------------------
    def finish(self) -> None:
        # One Python process: every environment setting in the file is in force for every
        # launch it makes (we do not follow which function runs when, nor `env=` dicts that
        # replace os.environ) - so each launch gets all of them, in source order.
        self.pf.env.extend(self.env)
        launches: list[Launch] = []
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
            return None
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
        if last.kind == "list" and last.elems and isinstance(last.elems[-1], cst.StarredElement):
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
        if seg.elems[-1] is not _last_element_value(seg.node):
            return None, "its argv ends inside a list that is spliced with *"
        if n_after:
            before, after = argv[len(argv) - n_after - 1], argv[len(argv) - n_after]
            if before.value.startswith("-") and "=" not in before.value and not after.value.startswith("-"):
                return None, f"an item after the list may be the value of {before.value}"
        return self.list_site(seg.node), None

    def list_site(self, node) -> AppendSite:
        elems = [el.value if isinstance(el, cst.Element) else el for el in node.elements]
        quote = '"'
        for el in reversed(elems):
            q = _quote_of(el)
            if q:
                quote = q
                break
        s, e = self.span(node.elements[-1].value if isinstance(node.elements[-1], cst.Element)
                         else node.elements[-1])
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
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        return _add_operands(node.left) + _add_operands(node.right)
    return [node]


def _last_name(func) -> str:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return ""


def _last_element_value(node):
    if not node.elements:
        return None
    el = node.elements[-1]
    return el.value if isinstance(el, cst.Element) else el


def _quote_of(node) -> str | None:
    if isinstance(node, cst.SimpleString):
        return node.quote[0]
    if isinstance(node, cst.FormattedString):
        return node.end[0]
    if isinstance(node, cst.ConcatenatedString):
        return _quote_of(node.right)
    return None
