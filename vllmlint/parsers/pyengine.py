"""Python front end, the engine API (ast only): `LLM(...)`, `EngineArgs(...)`, Ray Serve
`LLMConfig(engine_kwargs=...)`, the api_server's own argparse launch; keyword arguments read as
vLLM's engine arguments with their own spans.
"""
from __future__ import annotations

import ast
import json
import re
from ..model.record import record
from pathlib import Path

from ..model.launch import (ENGINE, SERVE, AppendSite, Arg, Edit, EnvEntry, KeywordArg, Launch, ParsedFile,
                             SourceFile)
from .pysource import _Offsets


# -- the engine API (ast only) -----------------------------------------------------------------
# `LLM(...)`, `EngineArgs(...)`, `AsyncEngineArgs(...)`, `X.from_engine_args(...)`,
# `AsyncEngineArgs.from_cli_args(args)`, Ray Serve `LLMConfig(engine_kwargs=...)`, and the
# api_server's own argparse launch (`make_arg_parser` ... `run_server(args)`). Keyword arguments
# are vLLM's engine arguments: `swap_space=4` is `--swap-space=4` with the keyword's own span, so
# every flag rule reads them; a rename writes the keyword's new name (KeywordArg), an added flag
# is written as a keyword (KeywordSite). Names count only when they come from vLLM: imported from
# vLLM's own modules (`from vllm import LLM`, `import vllm` then `vllm.LLM`,
# `from vllm.engine.arg_utils import EngineArgs`), never `sglang` (`sgl.Engine`), a same-named
# class of another library, or a project's own `vllm` package (`from verl.third_party.vllm import
# LLM`, a subclass for old releases with arguments of its own: found as a user on
# agents-x-project/PyVision-RL). A vLLM integration package's own `vllm` module is vLLM's, patched
# (`from lmcache_vllm.vllm import LLM`, LMCache's pre-v1 shim).

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
    return parts[0] == "vllm" or (parts[0].endswith("_vllm") or parts[0].startswith("vllm_")) and "vllm" in parts[1:]


@record(frozen=True)
class KeywordSite(AppendSite):
    """Adds an engine argument to a call as a keyword: `--enable-scale-out` -> `enable_scale_out=True`."""

    def edit(self, token: str) -> Edit:
        return Edit(self.file, self.offset, self.offset, self.template.format(flag_keyword(token)))


def keyword_of(flag: str) -> str:
    """The engine keyword of a CLI flag: `--gpu-memory-utilization` -> `gpu_memory_utilization`."""
    return flag.lstrip("-").replace("-", "_")


def as_written(token: str, keyword: bool) -> str:
    """A flag or `--flag=value` as a launch writes it: when `keyword` (an engine call's keyword, a
    key of engine arguments), `gpu_memory_utilization=0.9`, `enforce_eager=False` for
    `--no-enforce-eager`, `swap_space` for `--swap-space`; else the flag as given."""
    if not keyword:
        return token
    name, eq, _ = token.partition("=")
    if name.startswith("--no-") and not eq:
        return f"{keyword_of(name[5:])}=False"
    return flag_keyword(token) if eq else keyword_of(name)


def flag_keyword(token: str) -> str:
    name, eq, value = token.partition("=")
    key = keyword_of(name)
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


def _model_source(call: ast.Call) -> str | None:
    """`LLMConfig(model_loading_config=dict(model_source="org/m"))` (or a dict literal): "org/m"."""
    loading = next((k.value for k in call.keywords if k.arg == "model_loading_config"), None)
    if isinstance(loading, ast.Call) and isinstance(loading.func, ast.Name) and loading.func.id == "dict":
        pairs = [(k.arg, k.value) for k in loading.keywords]
    elif isinstance(loading, ast.Dict):
        pairs = [(k.value if isinstance(k, ast.Constant) else None, v) for k, v in zip(loading.keys, loading.values)]
    else:
        return None
    value = dict(pairs).get("model_source")
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None


class _EngineOptions:
    """One engine argument as a flag: a keyword, a dict entry or an attribute turned into `--flag=value`
    with its own span (mixed into _EngineScan, which gives `source`, `text`, `span`)."""

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



class _EngineScan(_EngineOptions):
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
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("ray.serve", "ray.llm")):
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
                source = _model_source(call)
                if source:          # the model vLLM serves, as the RayService reader says it (crds.py)
                    self.launches[-1].argv.insert(1, Arg("--model=" + source))
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
