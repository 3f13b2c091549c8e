"""Python front end, the environment: `os.environ[...] =`, `setdefault`, `update`,
`os.putenv`, env dicts given as `env=` or bound to an env-named name, and their removal edits.
"""
from __future__ import annotations

import ast
import re

from ..model.launch import Edit, EnvEntry
from .pysource import Lit, _GAP_RE, _SEMI_GAP_RE, _STMT_LISTS, _call_args, _skip

# a Modal app: `image.env({...})` is the environment of its functions
_MODAL_IMPORT_RE = re.compile(r"^[ \t]*(?:import modal\b|from modal\b)", re.M)


class EnvReader:
    """environment writes (mixed into pythonfile._Parser)."""

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

    def imports_modal(self) -> bool:
        found = getattr(self, "_imports_modal", None)
        if found is None:
            found = self._imports_modal = bool(_MODAL_IMPORT_RE.search(self.text))
        return found

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
        if isinstance(func, ast.Attribute) and func.attr == "env" and len(args) == 1 and args[0].keyword is None \
                and not args[0].star and self.imports_modal():
            # Modal: `image.env({"VLLM_USE_V1": "1"})` is the environment the functions run with
            # (found on DeEvade/ia150x-simpilot, as in Modal's own vLLM example)
            self.env_mapping(args[0].value, "Modal image env")
            return
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

