"""Python P/D proxies: a web app that forwards requests to prefill and decode servers.

A Python file is read as a P/D proxy (a launch of kind PROXY, the file being the program) when
all of these hold - each is evidence that the file *is* a router, not a client or a server:

  * it builds a web app: `FastAPI()`, `APIRouter()`, `Starlette()`, `Quart()`, `Flask()` or
    aiohttp's `web.Application()`, with its framework imported;
  * it handles `kv_transfer_params` in code (a dict key, a subscript, `.get(...)`, a keyword or
    an attribute; a docstring or log message does not count);
  * it calls other servers over HTTP (`httpx`, `aiohttp.ClientSession`, `requests`: a `.post`,
    `.stream`, `.request` or `.send` call that is not a route decorator);
  * it names both sides (`prefill...` and `decode...` in its code).

What it does with decode's `kv_transfer_params` decides VL101 (`ProxyInfo.flavour`):

  * `custom-multiturn`: it stores values derived from `kv_transfer_params` under a key derived
    from a client conversation/session id (`conversation_id`, `session_id`, `x-session-id`,
    `chat_id`, `thread_id`: `CACHE[conv_id] = params`, `cache.set(f"kv:{sid}", ...)`) and
    nowhere looks at token ids (`token_ids`, a tokenizer, `apply_chat_template`, `input_ids`).
    That is the reference `disagg_proxy_multiturn.py`'s behaviour: reuse by the client's word,
    never checked against the tokens, so VL101 reports it as it reports the reference proxy.
  * `custom`: anything else - one-way forwarding, reuse that looks at tokens, state we cannot
    follow (the client carries the params, an external store). We cannot tell whether it is
    safe, so VL101 says at most `info` for it (precision beats recall).

Prefill and decode addresses are read from URL or `host:port` literals bound to a name, dict
key, keyword, `os.getenv` variable or argparse option that says `prefill` or `decode`
(`PREFILL_URL = "http://prefill:8000"`, `add_argument("--decode-url", default=...)`); they
become the launch's `--prefill-hosts` / `--decode-hosts`, so the graph links the proxy to the
servers it calls. With none found, VL101 counts every bidirectional P and D in the tree, as for
the reference proxy launched with hosts it cannot resolve. When a command in the tree starts
the app (`python router.py --prefill http://p:8100 --decode http://d:8200`: detect.py reads a
script given both addresses as a router, whatever its name), the graph gives the app that
command's servers (lint/graph.py `_adopt_apps`) and the command is not judged again.
"""
from __future__ import annotations

import ast
import re
from pathlib import PurePosixPath

from ..model.launch import PROXY, Arg, Launch, ParsedFile, SourceFile
from ..model.lazyre import lazy_re

# app constructor -> (framework label, the modules that provide it)
APP_CLASSES = {
    "FastAPI": ("FastAPI", ("fastapi",)),
    "APIRouter": ("FastAPI", ("fastapi",)),
    "Starlette": ("Starlette", ("starlette",)),
    "Quart": ("Quart", ("quart",)),
    "Flask": ("Flask", ("flask",)),
    "Application": ("aiohttp", ("aiohttp",)),
}
HTTP_METHODS = {"post", "stream", "request", "send"}
HTTP_MODULES = ("httpx", "aiohttp", "requests")
KV_KEY = "kv_transfer_params"
# a client's conversation id (not an HTTP client session: `aiohttp.ClientSession() as session`)
SESSION_RE = lazy_re(r"conversation|sess(?:ion)?[_\-]?(?:id|key)|conv[_\-]?id|chat[_\-]?id|thread[_\-]?id"
                     r"|dialog(?:ue)?[_\-]?id", re.I)
TOKEN_RE = lazy_re(r"token_ids|tokeniz|apply_chat_template|input_ids", re.I)
SIDE_RE = lazy_re(r"(prefill|decode)", re.I)     # `prefiller`, `decoder` too
HOSTPORT_RE = lazy_re(r"^(?:https?://)?(?P<host>[A-Za-z0-9_.\-]+|\[[0-9a-fA-F:]+\])(?::(?P<port>\d{1,5}))?(?:/\S*)?$")
STORE_METHODS = {"set", "put", "setdefault", "setex", "hset", "add", "__setitem__"}


def _last(func) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


class _Reader:
    def __init__(self, source: SourceFile, tree: ast.Module, offset):
        self.source, self.tree, self.off = source, tree, offset
        self.modules: set[str] = set()       # top-level names of imported modules
        self.from_names: dict[str, str] = {}  # local name -> module it was imported from
        self.prose: set[int] = set()         # ids of docstring / message constants
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.modules.add(a.name.split(".")[0])
                    self.from_names[(a.asname or a.name).split(".")[0]] = a.name
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                self.modules.add(node.module.split(".")[0])
                for a in node.names:
                    self.from_names[a.asname or a.name] = node.module
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                self.prose.add(id(node.value))         # docstrings and bare strings
            elif isinstance(node, ast.Call) and _last(node.func) in (
                    "print", "debug", "info", "warning", "error", "exception", "critical", "log"):
                for sub in ast.walk(node):
                    self.prose.add(id(sub))

    # -- is it a proxy? -------------------------------------------------------------------
    def app_call(self) -> tuple[ast.Call, str] | None:
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Call):
                continue
            name = _last(node.func)
            if name not in APP_CLASSES:
                continue
            label, mods = APP_CLASSES[name]
            if name == "Application":
                # aiohttp's `web.Application()` (`from aiohttp import web`), never another Application
                base = node.func.value if isinstance(node.func, ast.Attribute) else None
                origin = self.from_names.get(_dotted(base).split(".")[0]) if base is not None else \
                    self.from_names.get("Application")
                if not origin or not origin.startswith("aiohttp"):
                    continue
            elif not any(m in self.modules for m in mods):
                continue
            return node, label
        return None

    def kv_uses(self) -> list[ast.AST]:
        uses = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Constant) and node.value == KV_KEY and id(node) not in self.prose:
                uses.append(node)
            elif isinstance(node, ast.keyword) and node.arg == KV_KEY:
                uses.append(node)
            elif isinstance(node, ast.Attribute) and node.attr == KV_KEY:
                uses.append(node)
        return uses

    def forwards(self) -> bool:
        if not any(m in self.modules for m in HTTP_MODULES):
            return False
        decorators = {id(d) for n in ast.walk(self.tree)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for d in n.decorator_list}
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in HTTP_METHODS
                   and id(n) not in decorators for n in ast.walk(self.tree))

    def names_both_sides(self) -> bool:
        words = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name):
                words.add(node.id.lower())
            elif isinstance(node, ast.Attribute):
                words.add(node.attr.lower())
            elif isinstance(node, ast.arg):
                words.add(node.arg.lower())
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in self.prose:
                words.add(node.value.lower())
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                words.add(node.name.lower())
        joined = " ".join(words)
        return "prefill" in joined and "decode" in joined

    # -- what it does with decode's parameters ----------------------------------------------
    @staticmethod
    def _mentions(node, names: set[str], pattern: re.Pattern | None = None, literal: str | None = None) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and (sub.id in names or (pattern and pattern.search(sub.id))):
                return True
            if isinstance(sub, ast.Attribute) and (pattern and pattern.search(sub.attr) or sub.attr == literal):
                return True
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and (
                    (pattern and pattern.search(sub.value)) or (literal and sub.value == literal)):
                return True
        return False

    def _tainted(self, body_owner, pattern: re.Pattern | None, literal: str | None) -> set[str]:
        """Names in one function (or the module) assigned from an expression that mentions
        the pattern / literal or another such name (two passes: loops and late assignments)."""
        names: set[str] = set()
        stmts = [n for n in ast.walk(body_owner) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign,
                                                                   ast.For, ast.AsyncFor, ast.withitem,
                                                                   ast.NamedExpr))]
        for _ in range(3):
            for st in stmts:
                if isinstance(st, (ast.For, ast.AsyncFor)):
                    targets, value = [st.target], st.iter
                elif isinstance(st, ast.withitem):
                    targets, value = [st.optional_vars] if st.optional_vars else [], st.context_expr
                elif isinstance(st, ast.Assign):
                    targets, value = st.targets, st.value
                else:
                    targets, value = [st.target], st.value
                if value is None or not self._mentions(value, names, pattern, literal):
                    continue
                for t in targets:
                    for sub in ast.walk(t):
                        if isinstance(sub, ast.Name):
                            names.add(sub.id)
        return names

    def session_store(self) -> tuple[int, str] | None:
        """(line, key) of the first store of decode's parameters under a session key."""
        owners = [self.tree] + [n for n in ast.walk(self.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for owner in owners:
            kv = self._tainted(owner, None, KV_KEY)
            sess = self._tainted(owner, SESSION_RE(), None)
            for node in ast.walk(owner):
                pairs = []
                if isinstance(node, ast.Assign):
                    pairs = [(t.slice, node.value, t.value) for t in node.targets if isinstance(t, ast.Subscript)]
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr in STORE_METHODS and len(node.args) >= 2:
                    pairs = [(node.args[0], node.args[-1] if node.func.attr != "hset" else node.args[1:],
                              node.func.value)]
                for key, value, holder in pairs:
                    values = value if isinstance(value, list) else [value]
                    if isinstance(key, ast.Constant) and key.value == KV_KEY:
                        continue             # `req["kv_transfer_params"] = ...`: attaching, not storing
                    if not any(self._mentions(v, kv, None, KV_KEY) for v in values):
                        continue
                    if self._mentions(key, sess, SESSION_RE()):
                        return node.lineno, ast.unparse(key)
        return None

    def token_aware(self) -> bool:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and TOKEN_RE().search(node.id):
                return True
            if isinstance(node, ast.Attribute) and TOKEN_RE().search(node.attr):
                return True
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in self.prose \
                    and TOKEN_RE().search(node.value):
                return True
        return False

    # -- where the two sides are -----------------------------------------------------------
    def sides(self) -> dict[str, list[tuple[str, ast.AST]]]:
        """side -> ("host[:port]", node) found; and, for argparse options written like the
        reference proxies' (`--prefiller-hosts` default ["localhost"], `--prefiller-ports`
        default [8100]), "host" / ":port" entries paired by the graph like theirs."""
        found: dict[str, list[tuple[str, ast.AST]]] = {"prefill": [], "decode": []}
        self.split_sides: dict[str, dict[str, list[str]]] = {"prefill": {"hosts": [], "ports": []},
                                                             "decode": {"hosts": [], "ports": []}}
        seen: set[tuple[str, str]] = set()

        def split_option(side: str, name: str, value) -> bool:
            """`--prefiller-hosts` / `--decoder-ports` with literal defaults."""
            kind = "ports" if "port" in name.lower() else "hosts" if "host" in name.lower() else None
            if kind is None:
                return False
            for sub in ast.walk(value):
                if isinstance(sub, ast.Constant) and not isinstance(sub.value, bool) and (
                        isinstance(sub.value, int) if kind == "ports" else isinstance(sub.value, str)):
                    text = str(sub.value)
                    hm = HOSTPORT_RE().match(text) if kind == "hosts" else None
                    if hm:             # `http://prefill:8000/v1` -> `prefill:8000`
                        text = hm.group("host") + (":" + hm.group("port") if hm.group("port") else "")
                    self.split_sides[side][kind].append(text)
            return True

        def take(name: str | None, value, option: bool = False) -> None:
            if not name or value is None:
                return
            m = SIDE_RE().search(name)
            if not m:
                return
            side = m.group(1).lower()
            if option and split_option(side, name, value):
                return
            for sub in ast.walk(value):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    for part in re.split(r"[\s,]+", sub.value.strip()):
                        hm = HOSTPORT_RE().match(part)
                        if not hm or not (hm.group("port") or part.startswith("http")):
                            continue
                        host = hm.group("host")
                        if host.replace(".", "").isdigit() and not hm.group("port"):
                            continue
                        hp = host + (":" + hm.group("port") if hm.group("port") else "")
                        if (side, hp) not in seen:
                            seen.add((side, hp))
                            found[side].append((hp, sub))

        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    take(_dotted(t) or None, node.value)
            elif isinstance(node, ast.AnnAssign):
                take(_dotted(node.target) or None, node.value)
            elif isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        take(k.value, v)
            elif isinstance(node, ast.Call):
                name = _last(node.func)
                for kw in node.keywords:
                    if kw.arg and kw.arg != "default":
                        take(kw.arg, kw.value)
                if name in ("getenv", "get") and len(node.args) >= 2 and isinstance(node.args[0], ast.Constant) \
                        and isinstance(node.args[0].value, str):
                    take(node.args[0].value, node.args[1])
                if name == "add_argument":
                    flag = next((a.value for a in node.args if isinstance(a, ast.Constant)
                                 and isinstance(a.value, str) and a.value.startswith("--")), None)
                    default = next((kw.value for kw in node.keywords if kw.arg == "default"), None)
                    take(flag, default, option=True)
        return found


def read_proxy(source: SourceFile, tree: ast.Module, pf: ParsedFile, offset) -> None:
    """Append the PROXY launch of a Python P/D proxy app to `pf` (see the module docstring).
    `offset(line, col)` turns ast positions into character offsets of the text."""
    if KV_KEY not in source.text:
        return
    reader = _Reader(source, tree, offset)
    app = reader.app_call()
    if app is None or not reader.kv_uses() or not reader.forwards() or not reader.names_both_sides():
        return
    call, framework = app
    start = offset(call.lineno, call.col_offset)
    func_end = offset(call.func.end_lineno, call.func.end_col_offset)
    store = reader.session_store()
    tokens = reader.token_aware()
    if store and not tokens:
        flavour = "custom-multiturn"
        how = (f"stores decode's kv_transfer_params under {store[1]} (line {store[0]}) and compares no "
               f"token ids, like vLLM's reference multi-turn proxy")
    else:
        flavour = "custom"
        how = ("reuse of decode's kv_transfer_params not classified"
               + (f" (stores them under {store[1]} at line {store[0]} but also reads token ids)" if store else ""))
    program = PurePosixPath(source.display.replace("\\", "/")).name
    argv = [Arg(program, source, (start, func_end))]
    for side, entries in reader.sides().items():
        split = reader.split_sides[side]
        hosts = [hp for hp, _ in entries] + split["hosts"]
        if hosts:
            argv.append(Arg(f"--{side}-hosts"))
            argv.extend(Arg(h) for h in hosts)
        if split["ports"] and not entries:
            argv.append(Arg(f"--{side}-ports"))
            argv.extend(Arg(p) for p in split["ports"])
    context = f"python proxy app ({framework})"
    launch = Launch(kind=PROXY, file=source, span=(start, func_end), argv=argv, options_start=1, context=context,
                    group=f"{source.display}#proxy-app", env=list(pf.env), program=program)
    launch.proxy_flavour = flavour
    launch.via = f"via {framework} app forwarding kv_transfer_params to prefill and decode; {how}"
    launch.append_site = None
    launch.not_editable = "a proxy app: its addresses are read from its Python code"
    pf.launches.append(launch)
    pf.launches.sort(key=lambda l: l.span)
