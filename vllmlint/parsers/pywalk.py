"""Python front end, the walk: one pass over the tree with scopes, positions and string
reading; the readers (pyargv, pyenv, pycontainer, pycommand) are mixed into it by pythonfile.py.
"""
from __future__ import annotations

import ast
import bisect
import json
from pathlib import Path

from ..model.launch import Arg, EnvEntry, ParsedFile, SourceFile
from .pysource import (Chain, Dyn, FORMAT_FIELD_RE, JSON_DUMPS_KW, Lit, MAX_NESTING, PERCENT_FIELD_RE, Scope,
                       StringCandidate, TEXT_FUNCS, TEXT_KEYWORDS, _Arg, _GAP_RE, _IDENT_RE, _LEAF_BELOW, _LISTISH,
                       _Offsets, _STRINGISH, _Tok, _TooDeep, _add_operands, _call_args, _children, _fields, _last_name,
                       _literal, _literal_end, _string_tokens, decode_body, descriptive_key)
# node type -> (visit, leave) methods of the composed parser: filled by pythonfile.py once the
# readers are mixed in (a module global: the walk looks it up once per node)
_VISITS: dict = {}


class ParserBase:
    """The walk and what every reader needs: positions, scopes, string pieces."""

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
        self._dict_keys: dict[int, dict] = {}              # id(dict node) -> id(value) -> its key (is_prose)

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
        if type(parent) is ast.Dict:            # `"example": "vllm serve ..."`: text about a command
            keys = self._dict_keys.get(id(parent))
            if keys is None:                    # once per dict: a data dict may hold thousands
                keys = self._dict_keys[id(parent)] = {id(v): k for k, v in zip(parent.keys, parent.values)}
            k = keys.get(id(self.stack[-1]))
            if type(k) is ast.Constant and isinstance(k.value, str) and descriptive_key(k.value):
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

