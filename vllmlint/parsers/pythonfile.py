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

The reader is split by what it reads: pysource (string literals, offsets), pywalk (the walk,
scopes), pyargv (argv lists), pyenv (environment), pycontainer (container SDKs, docker argv),
pycommand (shell command strings), pyengine (the engine API); `_Parser` mixes them.
"""
from __future__ import annotations

import ast

from ..model.launch import Launch, ParsedFile, SourceFile, is_test_code
from . import embedded
from .pyproxy import read_proxy
from .pyargv import ArgvLists
from .pycommand import StringCommands
from .pycontainer import ContainerCalls
from .pyengine import _EngineScan
from .pyenv import EnvReader
from .pysource import Lit, SHELL_MARKERS, _TooDeep, _break_cycles, _check_nesting, _children, _parse
from .pywalk import ParserBase, _VISITS


def _only_compared(module: ast.Module, names: set[str]) -> set[str]:
    """The functions among `names` that are called, and only ever inside an `assert` or a
    comparison (`assert argv == expected_cmd(...)`): what they return is expected, not run."""
    calls: dict[str, list[bool]] = {}
    stack = [(module, False)]
    while stack:
        node, compared = stack.pop()
        if isinstance(node, ast.Call):
            func = node.func
            fn = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if fn in names:
                calls.setdefault(fn, []).append(compared)
        inside = compared or isinstance(node, (ast.Assert, ast.Compare))
        stack.extend((child, inside) for child in ast.iter_child_nodes(node))
    return {fn for fn, where in calls.items() if where and all(where)}


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
        pf.vllm_imports = [node for _, _, node in parser.imports if _names_vllm(node)]
        _EngineScan(source, tree, pf, parser.env, imports, parser.offsets).run()
        read_proxy(source, tree, pf, parser.offsets.off)
    _break_cycles(parser)
    return pf




def _names_vllm(node) -> bool:
    """An import statement of a `vllm` module (what VL306 reads)."""
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and bool(node.module) and (node.module == "vllm" or node.module.startswith("vllm."))
    return any(a.name.startswith("vllm.") for a in node.names)


class _Parser(ArgvLists, EnvReader, ContainerCalls, StringCommands, ParserBase):
    """One file's reader: the walk (pywalk) with each reader mixed in."""

    # -- calls -------------------------------------------------------------------------------
    def visit_Call(self, node) -> None:
        self.list_method(node)
        self.env_call(node)
        self.shell_call(node)
        self.container_call(node)

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
        expected = self.expected_argvs()
        for chain in self.chains:
            if chain.consumed or id(chain) in expected:
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

    def expected_argvs(self) -> set[int]:
        """The argv lists a test's helper returns and nothing in the file runs
        (`def get_expected_command(): return ["python3", "-m", "vllm.entrypoints...", ...]`
        compared in an `assert`): what a test expects a chart or a wrapper to write, not a launch
        (found as a user on neuralmagic/helm-charts). Only in test code (model.launch.is_test_code:
        `test_*.py`, `*_test.py`, `conftest.py`, a `tests/` folder); a helper a test file runs is kept."""
        if not self.returns or not is_test_code(self.source):
            return set()
        compared = _only_compared(self.module, set(self.returns))
        return {id(c) for fn, found in self.returns.items() if fn in compared for c in found if c is not None}

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


_VISITS.update({
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
})


def _embedded(view: SourceFile, start: int, end: int, inherited) -> ParsedFile:
    """Python written inside another file (a heredoc, a ConfigMap entry): read in place
    (parsers/embedded.py). Indented as a whole (a YAML block scalar), it is read as the body of an
    `if 1:` written over the blank line above it, so every offset stays the outer file's."""
    view.kind = "python"
    text = view.text
    first = next((i for i in range(start, end) if text[i] not in " \t\r\n"), None)
    if first is not None:
        line = text.rfind("\n", 0, first) + 1
        if first > line:                                  # indented: Python needs a block opener
            above = text.rfind("\n", 0, line - 1) + 1 if line else -1
            if above < 0 or line - 1 - above < 5 or text[above:line - 1].strip():
                raise ValueError("an indented script with no blank line above it to open a block")
            view.text = text[:above] + "if 1:" + text[above + 5:]
    return parse_python(view)


embedded.register("python", _embedded)
