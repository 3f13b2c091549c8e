"""Extract one vLLM release's configuration surface from its wheel, without importing vLLM.

    vllmlint catalogue add --builtin WHEEL_OR_DIR [...] [-o DIR]     # the built-in catalogue
    python scripts/extract_catalogue.py WHEEL_OR_DIR [...] [-o DIR]   # the same (main() below)
    vllmlint catalogue add WHEEL_OR_DIR --name NAME                   # a user's release (added.py)

WHEEL_OR_DIR is a `vllm-X-*.whl` (read in place: only its `vllm/*.py` members are parsed) or
a folder holding an unpacked wheel (`DIR/vllm/...`). The release number comes from
`vllm/_version.py` (or the wheel's name; `--version` overrides). Writes
`OUT/vllm-X.json`: the flags `vllm serve` accepts (aliases, `--no-` forms, how many values
each takes, choices, types, defaults, the config class field behind it, deprecation text), the
`VLLM_*` environment variables `vllm/envs.py` reads (with defaults, and the flag that replaces
a deprecated one), the JSON config flags and their fields, the subcommands, deprecated launch
modules, the KV-connector facts (registered connectors, NixlConnector extra-config keys and
their defaults, the `raise NotImplementedError` sites of bidirectional transfer), every
`vllm.*` module of the wheel's file list and the top-level names of the `vllm.entrypoints`
modules. `index.json` adds the runs of each setting and module and the modules moved between
two releases.

Everything is read with `ast` and a small symbolic interpreter of the argparse-building code
(`make_arg_parser` -> `FrontendArgs.add_cli_args` -> `EngineArgs.add_cli_args` ->
`get_kwargs(ConfigClass)`), which mirrors `vllm/engine/arg_utils.py:_compute_kwargs`. Nothing
of vLLM (nor torch) is imported or executed. Standard library only.

Known limits: flags that platform plugins add at run time (`pre_register_and_update`) are not
seen; choices computed at run time (registries) are left out.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import re
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

# the built-in layout's module lists, apart: as catalogue/__init__.py reads them (this file is also
# loaded on its own, without its package: tests/test_catalogue.py checks the two agree)
MODULES_DIR = "modules"
RELEASE_MODULE_KEYS = ("modules", "exports")
INDEX_MODULE_KEYS = ("modules", "moved_modules")

GENERATOR = "scripts/extract_catalogue.py"
SCHEMA = 1
MAX_DEFAULT = 48          # characters of a default's source kept
MAX_TEXT = 200            # characters of a deprecation message kept
EXPORTS_UNDER = "vllm/entrypoints/"   # modules whose top-level names are kept (launchers import them)


# --------------------------------------------------------------------------------------------
# The wheel: a folder or a zip, read lazily, only .py files under vllm/
# --------------------------------------------------------------------------------------------
class Tree:
    def __init__(self, path: Path):
        self.path = path
        self._zip = None
        self._texts: dict[str, str | None] = {}
        if path.is_file() and zipfile.is_zipfile(path):
            self._zip = zipfile.ZipFile(path)
            self.names = sorted(n for n in self._zip.namelist() if n.startswith("vllm/") and n.endswith(".py"))
        else:
            base = path
            if not (base / "vllm").is_dir():
                raise SystemExit(f"{path}: neither a wheel nor a folder holding vllm/")
            self.names = sorted(p.relative_to(base).as_posix() for p in (base / "vllm").rglob("*.py"))
        self._set = set(self.names)

    def exists(self, rel: str) -> bool:
        return rel in self._set

    def read(self, rel: str) -> str | None:
        if rel not in self._texts:
            if rel not in self._set:
                self._texts[rel] = None
            elif self._zip is not None:
                self._texts[rel] = self._zip.read(rel).decode("utf-8", "replace")
            else:
                self._texts[rel] = (self.path / rel).read_text(encoding="utf-8", errors="replace")
        return self._texts[rel]

    def module_file(self, dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        for cand in (base + ".py", base + "/__init__.py"):
            if cand in self._set:
                return cand
        return None

    def version(self) -> str | None:
        text = self.read("vllm/_version.py") or ""
        m = re.search(r"""(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", text)
        if m:
            return m.group(1)
        m = re.search(r"vllm-(\d+\.\d+\.\d+(?:\.post\d+)?)", self.path.name)
        return m.group(1) if m else None


# --------------------------------------------------------------------------------------------
# Modules and name resolution
# --------------------------------------------------------------------------------------------
@dataclass
class Module:
    tree: Tree
    rel: str
    dotted: str
    node: ast.Module
    text: str
    defs: dict = field(default_factory=dict)      # name -> ast node (ClassDef, FunctionDef, value expr)
    imports: dict = field(default_factory=dict)   # name -> (module dotted, original name or None)

    _starts: list | None = None

    def raw(self, node) -> str | None:
        """The source text of `node` (ast.get_source_segment, without re-splitting the file
        at every call)."""
        if getattr(node, "end_lineno", None) is None:
            return None
        if self._starts is None:
            starts, pos = [0], 0
            for line in self.text.splitlines(keepends=True):
                pos += len(line)
                starts.append(pos)
            self._starts = starts
        try:
            a = self._starts[node.lineno - 1]
            b = self._starts[node.end_lineno - 1]
            line_a = self._line(node.lineno).encode("utf-8")
            line_b = self._line(node.end_lineno).encode("utf-8")
            start = a + len(line_a[:node.col_offset].decode("utf-8", "replace"))
            end = b + len(line_b[:node.end_col_offset].decode("utf-8", "replace"))
            return self.text[start:end]
        except (IndexError, TypeError):
            return None

    def _line(self, lineno: int) -> str:
        return self.text[self._starts[lineno - 1]:self._starts[lineno]]

    def seg(self, node) -> str:
        src = self.raw(node)
        return " ".join((src if src is not None else ast.unparse(node)).split())


class Index:
    def __init__(self, tree: Tree):
        self.tree = tree
        self._mods: dict[str, Module | None] = {}

    def module(self, dotted: str) -> Module | None:
        if dotted in self._mods:
            return self._mods[dotted]
        rel = self.tree.module_file(dotted)
        mod = None
        if rel:
            text = self.tree.read(rel) or ""
            try:
                node = ast.parse(text)
            except SyntaxError:
                node = None
            if node is not None:
                mod = Module(self.tree, rel, dotted, node, text)
                self._collect(mod, node.body, top=True)
        self._mods[dotted] = mod
        return mod

    def module_at(self, rel: str) -> Module | None:
        dotted = rel[:-3].replace("/", ".")
        if dotted.endswith(".__init__"):
            dotted = dotted[:-9]
        return self.module(dotted)

    def _collect(self, mod: Module, body, top: bool) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                mod.defs.setdefault(stmt.name, stmt)
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        mod.defs[target.id] = stmt.value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                mod.defs[stmt.target.id] = stmt.value
            elif isinstance(stmt, ast.ImportFrom):
                base = self._absolute(mod, stmt.module, stmt.level)
                for alias in stmt.names:
                    if alias.name != "*":
                        mod.imports.setdefault(alias.asname or alias.name, (base, alias.name))
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        mod.imports.setdefault(alias.asname, (alias.name, None))
                    else:
                        mod.imports.setdefault(alias.name.split(".")[0], (alias.name.split(".")[0], None))
            elif isinstance(stmt, ast.If):       # `if TYPE_CHECKING:` imports and defs
                self._collect(mod, stmt.body, top)
                self._collect(mod, stmt.orelse, top)
            elif isinstance(stmt, ast.Try):
                self._collect(mod, stmt.body, top)
                for handler in stmt.handlers:
                    self._collect(mod, handler.body, top)

    def _absolute(self, mod: Module, name: str | None, level: int) -> str:
        if not level:
            return name or ""
        parts = mod.dotted.split(".")
        if not mod.rel.endswith("__init__.py"):
            parts = parts[:-1]
        parts = parts[: len(parts) - (level - 1)] if level > 1 else parts
        return ".".join(parts + ([name] if name else []))

    def resolve(self, mod: Module, name: str, depth: int = 0):
        """(module, node) defining `name` as seen from `mod`, following imports."""
        if mod is None or depth > 12:
            return None
        if name in mod.defs:
            return mod, mod.defs[name]
        if name in mod.imports:
            target, orig = mod.imports[name]
            if orig is None:
                sub = self.module(target)
                return (sub, None) if sub else None
            sub = self.module(target)
            if sub is not None:
                found = self.resolve(sub, orig, depth + 1)
                if found:
                    return found
            sub = self.module(f"{target}.{orig}")      # `from pkg import submodule`
            if sub is not None:
                return sub, None
        return None

    def resolve_expr(self, mod: Module, node, depth: int = 0):
        """Resolve a Name or dotted Attribute (`envs.X`, `vllm.config.CacheConfig`)."""
        if isinstance(node, ast.Name):
            return self.resolve(mod, node.id, depth)
        if isinstance(node, ast.Attribute):
            base = self.resolve_expr(mod, node.value, depth + 1)
            if base is None:
                return None
            bmod, bnode = base
            if bnode is None and bmod is not None:          # a module
                found = self.resolve(bmod, node.attr, depth + 1)
                if found:
                    return found
                sub = self.module(f"{bmod.dotted}.{node.attr}")
                return (sub, None) if sub else None
            if isinstance(bnode, ast.ClassDef):
                for stmt in bnode.body:
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == node.attr:
                        return bmod, stmt
        return None


# --------------------------------------------------------------------------------------------
# Classes and their fields
# --------------------------------------------------------------------------------------------
@dataclass
class FieldInfo:
    name: str
    annotation: ast.AST
    type_src: str
    default_src: str | None
    line: int
    doc: str
    kind: str                    # field | classvar | initvar
    mod: Module
    owner: str                   # class name


@dataclass(frozen=True)
class ClassRef:
    mod: Module
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return self.node.name

    def __hash__(self):
        return hash((self.mod.rel, self.node.name))

    def __eq__(self, other):
        return isinstance(other, ClassRef) and (self.mod.rel, self.node.name) == (other.mod.rel, other.node.name)


class Classes:
    def __init__(self, index: Index):
        self.index = index
        self._fields: dict = {}

    def ref(self, mod: Module, node) -> ClassRef | None:
        found = self.index.resolve_expr(mod, node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if found and isinstance(found[1], ast.ClassDef):
            return ClassRef(found[0], found[1])
        return None

    def bases(self, cls: ClassRef) -> list[ClassRef]:
        out = []
        for base in cls.node.bases:
            node = base.value if isinstance(base, ast.Subscript) else base
            ref = self.ref(cls.mod, node)
            if ref is not None and ref != cls:
                out.append(ref)
        return out

    def mro(self, cls: ClassRef, seen=None) -> list[ClassRef]:
        seen = seen if seen is not None else set()
        if cls in seen:
            return []
        seen.add(cls)
        out = [cls]
        for base in self.bases(cls):
            for c in self.mro(base, seen):
                if c not in out:
                    out.append(c)
        return out

    def is_config(self, cls: ClassRef) -> bool:
        """A dataclass / pydantic config class: its fields can be given as JSON."""
        for c in self.mro(cls):
            for deco in c.node.decorator_list:
                text = ast.unparse(deco)
                if re.search(r"\b(dataclass|config)\b", text):
                    return True
            for base in c.node.bases:
                if re.search(r"\bBaseModel\b", ast.unparse(base)):
                    return True
        return False

    def is_enum(self, cls: ClassRef) -> bool:
        return any(re.search(r"\bEnum\b|IntEnum|StrEnum", ast.unparse(b)) for c in self.mro(cls) for b in c.node.bases)

    def fields(self, cls: ClassRef) -> dict[str, FieldInfo]:
        key = cls
        if key in self._fields:
            return self._fields[key]
        out: dict[str, FieldInfo] = {}
        for c in reversed(self.mro(cls)):
            body = c.node.body
            for i, stmt in enumerate(body):
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                ann = ast.unparse(stmt.annotation)
                kind = "classvar" if re.match(r"^(typing\.)?ClassVar\b", ann) else \
                    "initvar" if re.match(r"^(dataclasses\.)?InitVar\b", ann) else "field"
                doc = ""
                if i + 1 < len(body) and isinstance(body[i + 1], ast.Expr) and \
                        isinstance(body[i + 1].value, ast.Constant) and isinstance(body[i + 1].value.value, str):
                    doc = body[i + 1].value.value
                name = stmt.target.id
                out.pop(name, None)
                out[name] = FieldInfo(name, stmt.annotation, c.mod.seg(stmt.annotation),
                                      c.mod.seg(stmt.value) if stmt.value is not None else None,
                                      stmt.lineno, doc, kind, c.mod, c.node.name)
        self._fields[key] = out
        return out


# --------------------------------------------------------------------------------------------
# Type hints -> argparse behaviour (mirrors vllm/engine/arg_utils.py:_compute_kwargs)
# --------------------------------------------------------------------------------------------
@dataclass
class TypeAtoms:
    atoms: set = field(default_factory=set)       # bool str int float dict list tuple set None other literal enum
    literals: list = field(default_factory=list)
    config: ClassRef | None = None
    enum: ClassRef | None = None
    tuple_len: int | None = None                  # fixed-length tuple


class Types:
    BUILTIN = {"bool": "bool", "str": "str", "int": "int", "float": "float", "dict": "dict", "Dict": "dict",
               "list": "list", "List": "list", "tuple": "tuple", "Tuple": "tuple", "set": "set", "Set": "set",
               "None": "None", "NoneType": "None", "Mapping": "dict", "Sequence": "list", "Iterable": "list"}

    def __init__(self, index: Index, classes: Classes):
        self.index = index
        self.classes = classes

    def analyze(self, mod: Module, node, depth: int = 0, out: TypeAtoms | None = None) -> TypeAtoms:
        out = out or TypeAtoms()
        if depth > 15 or node is None:
            out.atoms.add("other")
            return out
        if isinstance(node, ast.Constant):
            if node.value is None:
                out.atoms.add("None")
            elif isinstance(node.value, str):        # forward reference
                try:
                    self.analyze(mod, ast.parse(node.value, mode="eval").body, depth + 1, out)
                except SyntaxError:
                    out.atoms.add("other")
            else:
                out.atoms.add("other")
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            self.analyze(mod, node.left, depth + 1, out)
            self.analyze(mod, node.right, depth + 1, out)
            return out
        if isinstance(node, ast.Subscript):
            head = ast.unparse(node.value).split(".")[-1]
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head in ("Optional",):
                self.analyze(mod, args[0], depth + 1, out)
                out.atoms.add("None")
            elif head == "Union":
                for a in args:
                    self.analyze(mod, a, depth + 1, out)
            elif head == "Annotated":
                self.analyze(mod, args[0], depth + 1, out)
            elif head == "Literal":
                out.atoms.add("literal")
                for a in args:
                    self._literal(mod, a, depth + 1, out)
            elif head in ("ClassVar", "InitVar", "Final", "Required", "NotRequired"):
                self.analyze(mod, args[0], depth + 1, out)
            elif head in self.BUILTIN:
                kind = self.BUILTIN[head]
                out.atoms.add(kind)
                if kind == "tuple":
                    out.tuple_len = None if any(isinstance(a, ast.Constant) and a.value is Ellipsis for a in args) \
                        else len(args)
            else:
                self._name(mod, node.value, depth, out)
            return out
        if isinstance(node, (ast.Name, ast.Attribute)):
            self._name(mod, node, depth, out)
            return out
        out.atoms.add("other")
        return out

    def _literal(self, mod, node, depth, out):
        if isinstance(node, ast.Constant):
            out.literals.append(node.value)
        elif isinstance(node, (ast.Name, ast.Attribute)):
            found = self.index.resolve_expr(mod, node)
            if found and found[1] is not None and not isinstance(found[1], (ast.ClassDef, ast.FunctionDef)):
                sub = self.analyze(found[0], found[1], depth + 1)
                out.literals.extend(sub.literals)
        elif isinstance(node, ast.Subscript):
            sub = self.analyze(mod, node, depth + 1)
            out.literals.extend(sub.literals)

    def _name(self, mod, node, depth, out):
        text = ast.unparse(node)
        last = text.split(".")[-1]
        if last in self.BUILTIN:
            out.atoms.add(self.BUILTIN[last])
            return
        found = self.index.resolve_expr(mod, node)
        if not found or found[1] is None:
            out.atoms.add("other")
            return
        fmod, fnode = found
        if isinstance(fnode, ast.ClassDef):
            ref = ClassRef(fmod, fnode)
            if self.classes.is_enum(ref):
                out.atoms.add("enum")
                out.enum = out.enum or ref
            elif self.classes.is_config(ref):
                out.atoms.add("config")
                out.config = out.config or ref
            else:
                out.atoms.add("other")
            return
        if isinstance(fnode, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.atoms.add("other")
            return
        if isinstance(fnode, ast.Call) and ast.unparse(fnode.func).endswith("TypeVar"):
            out.atoms.add("other")
            return
        self.analyze(fmod, fnode, depth + 1, out)        # a type alias

    def enum_members(self, ref: ClassRef) -> list[str]:
        names = []
        for stmt in ref.node.body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else \
                [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value is not None else []
            for t in targets:
                if isinstance(t, ast.Name) and not t.id.startswith("_"):
                    names.append(t.id)
        return names

    def field_kwargs(self, f: FieldInfo, optional_bool_str: bool) -> dict:
        """The argparse kwargs `get_kwargs()` builds for one field (as facts, not callables)."""
        t = self.analyze(f.mod, f.annotation)
        atoms = t.atoms
        kw: dict = {"nargs": 1}
        if t.config is not None:
            kw["json"] = t.config
        elif optional_bool_str and atoms == {"bool", "str", "None"}:
            kw["nargs"] = "?"
        elif "bool" in atoms:
            kw["action"] = "BooleanOptionalAction"
            kw["nargs"] = 0
        elif "literal" in atoms:
            values = [v for v in t.literals if isinstance(v, (str, int, float))]
            if values and "str" not in atoms:
                kw["choices"] = values
        elif "tuple" in atoms:
            kw["nargs"] = "+" if t.tuple_len is None else t.tuple_len
        elif "list" in atoms or "set" in atoms:
            kw["nargs"] = "+"
        return kw


# --------------------------------------------------------------------------------------------
# The symbolic interpreter of argparse-building code
# --------------------------------------------------------------------------------------------
class Unknown:
    def __init__(self, src: str = "?"):
        self.src = src

    def __repr__(self):
        return f"Unknown({self.src})"


@dataclass
class FieldKw:
    """`get_kwargs(Cls)["field"]`: a mutable kwargs dict tied to a config field."""
    cls: ClassRef
    field: FieldInfo
    kw: dict


@dataclass
class KwTable:
    cls: ClassRef
    entries: dict          # field name -> FieldKw


@dataclass
class Func:
    mod: Module
    node: ast.FunctionDef
    owner: ClassRef | None = None       # the class whose method this is
    bound: ClassRef | None = None       # `cls` for classmethods


@dataclass
class Flag:
    names: list
    kw: dict
    mod: Module
    line: int
    computed_name: bool
    source: str
    cfg: FieldKw | None


class Interp:
    MAX_DEPTH = 12

    def __init__(self, index: Index, classes: Classes, types: Types, optional_bool_str: bool):
        self.index, self.classes, self.types = index, classes, types
        self.optional_bool_str = optional_bool_str
        self.flags: list[Flag] = []
        self.positionals: list[str] = []
        self.depth = 0
        self.calls = 0

    # -- functions ------------------------------------------------------------------------
    def call(self, func: Func, args: list, kwargs: dict):
        if self.depth >= self.MAX_DEPTH or self.calls > 4000:
            return Unknown("depth")
        params = func.node.args
        names = [a.arg for a in params.posonlyargs + params.args]
        env: dict = {}
        is_static = any(ast.unparse(d) == "staticmethod" for d in func.node.decorator_list)
        if func.owner is not None and not is_static and names:
            first = names.pop(0)
            env[first] = func.bound or func.owner if first == "cls" else ("self", func.bound or func.owner)
        for name, value in zip(names, args):
            env[name] = value
        for name, value in kwargs.items():
            env[name] = value
        self.depth += 1
        self.calls += 1
        try:
            return self.run(func, func.node.body, env)
        except _Return as ret:
            return ret.value
        finally:
            self.depth -= 1

    def run(self, func: Func, body, env):
        for stmt in body:
            self.stmt(func, stmt, env)
        return None

    def stmt(self, func: Func, stmt, env):
        if isinstance(stmt, ast.Return):
            raise _Return(self.ev(func, stmt.value, env) if stmt.value is not None else None)
        if isinstance(stmt, ast.Expr):
            self.ev(func, stmt.value, env)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            if stmt.value is None:
                return
            value = self.ev(func, stmt.value, env)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and not isinstance(value, (FieldKw, KwTable)):
                    # `kwargs["x"]["default"] = ...`: keep how it is written, as add_argument(x=...) does
                    self.assign(func, target, _Src(func.mod.seg(stmt.value), value), env)
                else:
                    self.assign(func, target, value, env)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Subscript):
                    obj = self.ev(func, target.value, env)
                    key = self.ev(func, target.slice, env)
                    d = _kwdict(obj)
                    if d is not None and isinstance(key, str):
                        d.pop(key, None)
        elif isinstance(stmt, ast.If):
            test = self.ev(func, stmt.test, env)
            if test is True:
                self.run(func, stmt.body, env)
            elif test is False:
                self.run(func, stmt.orelse, env)
            else:                               # unknown at build time: both branches can add flags
                self.run(func, stmt.body, env)
                self.run(func, stmt.orelse, env)
        elif isinstance(stmt, ast.For):
            items = _plain(self.ev(func, stmt.iter, env))
            if isinstance(items, (list, tuple)):
                for item in items:
                    self.assign(func, stmt.target, item, env)
                    try:
                        self.run(func, stmt.body, env)
                    except _Continue:
                        continue
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            self.run(func, stmt.body, env)
        elif isinstance(stmt, ast.Try):
            self.run(func, stmt.body, env)
            self.run(func, stmt.orelse, env)
            self.run(func, stmt.finalbody, env)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            env[stmt.name] = Func(func.mod, stmt, func.owner, func.bound)
        elif isinstance(stmt, ast.Continue):
            raise _Continue()

    def assign(self, func, target, value, env):
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (list, tuple)) and len(value) == len(target.elts):
                for t, v in zip(target.elts, value):
                    self.assign(func, t, v, env)
            else:
                for t in target.elts:
                    self.assign(func, t, Unknown(), env)
        elif isinstance(target, ast.Subscript):
            obj = self.ev(func, target.value, env)
            key = self.ev(func, target.slice, env)
            if isinstance(key, str):
                if isinstance(obj, KwTable):
                    if isinstance(value, FieldKw):
                        obj.entries[key] = value
                else:
                    d = _kwdict(obj)
                    if d is not None:
                        d[key] = value

    # -- expressions ----------------------------------------------------------------------
    def ev(self, func: Func, node, env):
        mod = func.mod
        if node is None:
            return None
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.id]
            return _Ref(mod, node)
        if isinstance(node, ast.Attribute):
            base = self.ev(func, node.value, env)
            if isinstance(base, tuple) and base and base[0] == "self":
                return _Ref(mod, node)
            return _Ref(mod, node)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    v = self.ev(func, elt.value, env)
                    if isinstance(v, (list, tuple)):
                        out.extend(v)
                else:
                    out.append(self.ev(func, elt, env))
            return out
        if isinstance(node, ast.Dict):
            out: dict = {}
            cfg = None
            for k, v in zip(node.keys, node.values):
                if k is None:                       # **other
                    other = self.ev(func, v, env)
                    if isinstance(other, FieldKw):
                        cfg = other
                        out.update(other.kw)
                    elif isinstance(other, dict):
                        out.update(other)
                        cfg = cfg or other.get("__cfg__")
                else:
                    key = self.ev(func, k, env)
                    if isinstance(key, str):
                        out[key] = _Src(mod.seg(v), self.ev(func, v, env))
            if cfg is not None:
                out["__cfg__"] = cfg
            return out
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    val = _plain(self.ev(func, v.value, env))
                    if not isinstance(val, (str, int, float)):
                        return Unknown(mod.seg(node))
                    parts.append(str(val))
            return "".join(parts)
        if isinstance(node, ast.Subscript):
            obj = self.ev(func, node.value, env)
            key = self.ev(func, node.slice, env)
            if isinstance(obj, KwTable) and isinstance(key, str):
                return obj.entries.get(key, Unknown(mod.seg(node)))
            d = _kwdict(obj)
            if d is not None and isinstance(key, str):
                return d.get(key, Unknown(mod.seg(node)))
            return Unknown(mod.seg(node))
        if isinstance(node, ast.Call):
            return self.call_expr(func, node, env)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            left = self.ev(func, node.left, env)
            right = self.ev(func, node.comparators[0], env)
            d = _kwdict(right)
            if isinstance(left, str) and d is not None:
                return (left in d) == isinstance(node.ops[0], ast.In)
            return Unknown(mod.seg(node))
        return Unknown(mod.seg(node))

    def call_expr(self, func: Func, node: ast.Call, env):
        mod = func.mod
        fn = node.func
        # method calls on evaluated objects
        if isinstance(fn, ast.Attribute):
            attr = fn.attr
            if attr in ("add_argument",):
                self.add_argument(func, node, env)
                return Unknown("action")
            if attr in ("add_argument_group", "add_mutually_exclusive_group", "add_parser", "add_subparsers"):
                return Unknown("group")
            obj = self.ev(func, fn.value, env)
            if attr == "items" and isinstance(obj, KwTable):
                return [(k, v) for k, v in obj.entries.items()]
            if attr == "items" and isinstance(obj, dict):
                return [(k, v) for k, v in obj.items() if k != "__cfg__"]
            if attr in ("keys",) and isinstance(obj, KwTable):
                return list(obj.entries)
            d = _kwdict(obj)
            if attr == "pop" and d is not None:
                args = [self.ev(func, a, env) for a in node.args]
                if args and isinstance(args[0], str):
                    return d.pop(args[0], args[1] if len(args) > 1 else None)
                return Unknown()
            if attr == "update" and d is not None:
                for a in node.args:
                    other = self.ev(func, a, env)
                    if isinstance(other, dict):
                        d.update({k: v for k, v in other.items() if k != "__cfg__"})
                for kw in node.keywords:
                    if kw.arg:
                        d[kw.arg] = _Src(mod.seg(kw.value), self.ev(func, kw.value, env))
                return None
            if attr == "get" and d is not None:
                args = [self.ev(func, a, env) for a in node.args]
                if args and isinstance(args[0], str):
                    return d.get(args[0], args[1] if len(args) > 1 else None)
            if attr == "replace" and isinstance(obj, str):
                args = [self.ev(func, a, env) for a in node.args]
                if len(args) == 2 and all(isinstance(a, str) for a in args):
                    return obj.replace(args[0], args[1])
            if attr in ("lower", "upper", "strip") and isinstance(obj, str):
                return getattr(obj, attr)()
            if attr == "copy" and isinstance(obj, (dict, list)):
                return obj
            if attr == "copy" and isinstance(obj, FieldKw):
                return obj
            # Class.method(...), cls.method(...), super().method(...)
            target = self._method(func, fn, env)
            if target is not None:
                return self.invoke(func, target, node, env)
            return Unknown(mod.seg(node))
        if isinstance(fn, ast.Name):
            name = fn.id
            if name in ("get_kwargs", "_compute_kwargs") and node.args:
                cls = self._class_of(func, node.args[0], env)
                if cls is not None:
                    return self.kwtable(cls)
                return Unknown("kwargs")
            if name in ("deepcopy", "dict", "copy") and node.args:
                return self.ev(func, node.args[0], env)
            if name == "super":
                return Unknown("super")
            target = env.get(name)
            if isinstance(target, Func):
                return self.invoke(func, target, node, env)
            found = self.index.resolve(mod, name)
            if found and isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)) and self._worth(found[0], found[1]):
                return self.invoke(func, Func(found[0], found[1]), node, env)
            if found and isinstance(found[1], ast.ClassDef):
                return ("instance", ClassRef(found[0], found[1]))
        return Unknown(mod.seg(node))

    def invoke(self, func, target: Func, node, env):
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.ev(func, a.value, env)
                if isinstance(v, (list, tuple)):
                    args.extend(v)
            else:
                args.append(self.ev(func, a, env))
        kwargs = {kw.arg: self.ev(func, kw.value, env) for kw in node.keywords if kw.arg}
        return self.call(target, args, kwargs)

    def _worth(self, mod: Module, node) -> bool:
        src = mod.raw(node) or ""
        return "add_argument" in src or "get_kwargs" in src or "add_cli_args" in src

    def _class_of(self, func: Func, node, env) -> ClassRef | None:
        if isinstance(node, ast.Name) and node.id in env:
            v = env[node.id]
            if isinstance(v, ClassRef):
                return v
            if isinstance(v, tuple) and v and v[0] == "self":
                return v[1]
            return None
        return self.classes.ref(func.mod, node)

    def _method(self, func: Func, fn: ast.Attribute, env) -> Func | None:
        """Resolve `X.meth` where X is a class, `cls`, `self` or `super()`."""
        owner_expr = fn.value
        start: ClassRef | None = None
        bound: ClassRef | None = None
        if isinstance(owner_expr, ast.Call) and isinstance(owner_expr.func, ast.Name) and owner_expr.func.id == "super":
            if func.owner is None:
                return None
            bound = func.bound or func.owner
            mro = self.classes.mro(bound)
            try:
                mro = mro[mro.index(func.owner) + 1:]
            except ValueError:
                mro = mro[1:]
            return self._find_method(mro, fn.attr, bound)
        start = self._class_of(func, owner_expr, env)
        if start is None:
            return None
        bound = start
        return self._find_method(self.classes.mro(start), fn.attr, bound)

    def _find_method(self, mro, name, bound) -> Func | None:
        for c in mro:
            for stmt in c.node.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                    if not self._worth(c.mod, stmt) and name != "_customize_cli_kwargs":
                        return None
                    return Func(c.mod, stmt, c, bound)
        return None

    def kwtable(self, cls: ClassRef) -> KwTable:
        entries = {}
        for name, f in self.classes.fields(cls).items():
            if f.kind != "field":
                continue
            entries[name] = FieldKw(cls, f, self.types.field_kwargs(f, self.optional_bool_str))
        return KwTable(cls, entries)

    def add_argument(self, func: Func, node: ast.Call, env):
        mod = func.mod
        names: list = []
        computed = False
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = _plain(self.ev(func, a.value, env))
                if isinstance(v, (list, tuple)):
                    names.extend(x for x in map(_plain, v) if isinstance(x, str))
                continue
            v = _plain(self.ev(func, a, env))
            if isinstance(v, str):
                names.append(v)
                if not isinstance(a, ast.Constant):
                    computed = True
        kw: dict = {}
        cfg: FieldKw | None = None
        for k in node.keywords:
            if k.arg is None:
                other = self.ev(func, k.value, env)
                if isinstance(other, FieldKw):
                    cfg = other
                    kw.update(other.kw)
                elif isinstance(other, dict):
                    cfg = other.get("__cfg__") or cfg
                    kw.update({kk: vv for kk, vv in other.items() if kk != "__cfg__"})
            else:
                kw[k.arg] = _Src(mod.seg(k.value), self.ev(func, k.value, env))
        if not names:
            return
        if not any(n.startswith("-") for n in names):
            self.positionals.extend(names)
            return
        owner = func.owner.name + "." if func.owner else ""
        self.flags.append(Flag(names, kw, mod, node.lineno, computed, owner + func.node.name, cfg))


class _Return(Exception):
    def __init__(self, value):
        self.value = value


class _Continue(Exception):
    pass


@dataclass
class _Src:
    """A keyword argument as written (`src`) and as far as it could be evaluated (`value`)."""
    src: str
    value: object


@dataclass
class _Ref:
    mod: Module
    node: ast.AST


def _kwdict(obj):
    if isinstance(obj, FieldKw):
        return obj.kw
    if isinstance(obj, dict):
        return obj
    return None


def _plain(v):
    return v.value if isinstance(v, _Src) else v


# --------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------
def _extra_config_reads(mod):
    """The calls of a module that read one kv_connector_extra_config key:
    `get_from_extra_config("k", ...)` and `...extra_config.get("k", ...)`."""
    for node in ast.walk(mod.node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            if node.func.attr == "get_from_extra_config" or \
                    (node.func.attr == "get" and ast.unparse(node.func.value).endswith("extra_config")):
                yield node


def _short(text: str | None, limit: int = MAX_DEFAULT) -> str | None:
    if text is None:
        return None
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


DEPRECATION_RE = re.compile(r"^\W*deprecated\b|\b(is|are|has been|was)\s+(now\s+)?deprecated\b|^\s*Deprecated:",
                            re.I | re.M)


def is_deprecation(text: str) -> bool:
    """`X is deprecated ...` / `Deprecated: ...`, not `allow deprecated quantization methods`."""
    return bool(DEPRECATION_RE.search(text))


SELF_DEPRECATION_RE = re.compile(
    r"^\W*deprecated\b|^\s*Deprecated:|\b(this|the)\s+(parameter|option|flag|field|argument|setting)\s+"
    r"(is|has been)\s+(now\s+)?deprecated|\b(flag|option|parameter|argument)\s+(is|has been)\s+(now\s+)?deprecated"
    r"|^\W*--[a-z0-9-]+`?\s+(is|has been)\s+deprecated", re.I | re.M)


def says_itself_deprecated(doc: str, name: str | None = None) -> bool:
    """A help text or field docstring that deprecates the flag/field it documents (not one that
    mentions a deprecated *value*: `The "lm-format-enforcer" backend is deprecated`)."""
    if SELF_DEPRECATION_RE.search(doc):
        return True
    if name:
        spelled = re.escape(name).replace("_", "[_ -]")
        return bool(re.match(rf"^\W*{spelled}\W*\s+(is|has been)\s+(now\s+)?deprecated", doc, re.I))
    return False


def help_hash(text: str) -> str:
    norm = " ".join(text.split()).strip().lower()
    return hashlib.sha1(norm.encode()).hexdigest()[:8] if norm else ""


def string_of(mod: Module, node, index: Index, depth: int = 0) -> str | None:
    """The text of a string expression: constants, implicit concatenation, `+`, names of
    module-level constants, f-strings (placeholders kept as {..})."""
    if depth > 6 or node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
                       for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = string_of(mod, node.left, index, depth + 1), string_of(mod, node.right, index, depth + 1)
        return a + b if a is not None and b is not None else None
    if isinstance(node, (ast.Name, ast.Attribute)):
        found = index.resolve_expr(mod, node)
        if found and found[1] is not None and not isinstance(found[1], (ast.ClassDef, ast.FunctionDef)):
            return string_of(found[0], found[1], index, depth + 1)
    return None


class Extractor:
    def __init__(self, tree: Tree, version: str | None = None):
        self.tree = tree
        self.version = version or tree.version() or "unknown"
        self.index = Index(tree)
        self.classes = Classes(self.index)
        self.types = Types(self.index, self.classes)
        self.problems: list[str] = []

    # -- serve flags ----------------------------------------------------------------------
    def find_parser_builder(self) -> tuple[Module, ast.FunctionDef] | None:
        # the serve subcommand's own import first, then any make_arg_parser under entrypoints
        serve = self.index.module("vllm.entrypoints.cli.serve")
        if serve is not None:
            found = self.index.resolve(serve, "make_arg_parser")
            if found and isinstance(found[1], ast.FunctionDef):
                return found
        for rel in self.tree.names:
            if rel.startswith("vllm/entrypoints/") and rel.endswith("cli_args.py"):
                text = self.tree.read(rel) or ""
                if "def make_arg_parser" in text:
                    mod = self.index.module_at(rel)
                    if mod and isinstance(mod.defs.get("make_arg_parser"), ast.FunctionDef):
                        return mod, mod.defs["make_arg_parser"]
        return None

    def flags(self) -> tuple[dict, dict]:
        builder = self.find_parser_builder()
        if builder is None:
            self.problems.append("no make_arg_parser found")
            return {}, {}
        mod, fn = builder
        arg_utils = self.tree.read("vllm/engine/arg_utils.py") or ""
        optional_bool_str = "{bool, str, type(None)}" in arg_utils
        interp = Interp(self.index, self.classes, self.types, optional_bool_str)
        interp.call(Func(mod, fn), [Unknown("parser")], {})
        meta = {"parser": f"{mod.rel}:{fn.lineno} {fn.name}", "positional": interp.positionals}
        flags: dict = {}
        for flag in interp.flags:
            self._flag_entries(flag, flags)
        return flags, meta

    def _flag_entries(self, flag: Flag, out: dict) -> None:
        kw = {k: v for k, v in flag.kw.items()}
        longs = [n for n in flag.names if n.startswith("--")]
        shorts = [n for n in flag.names if n.startswith("-") and not n.startswith("--")]
        if not longs:
            return
        entry: dict = {}
        cfg = flag.cfg
        if flag.computed_name and cfg is not None:
            entry["at"] = f"{cfg.field.mod.rel}:{cfg.field.line}"
        else:
            entry["at"] = f"{flag.mod.rel}:{flag.line}"
        action = kw.get("action")
        action_src = action.src if isinstance(action, _Src) else (action if isinstance(action, str) else None)
        action_val = _plain(action)
        action_text = action_val if isinstance(action_val, str) else (action_src or "")
        nargs = _plain(kw.get("nargs", 1))
        bool_opt = "BooleanOptional" in action_text
        if action_text in ("store_true", "store_false", "store_const", "count", "help", "version") or bool_opt:
            nargs = 0
        elif action_text and "Deprecated" in action_text and "nargs" not in kw:
            nargs = self._action_nargs(flag.mod, action) if isinstance(action, _Src) else 1
        if nargs not in (0, 1, "?", "+", "*") and not isinstance(nargs, int):
            nargs = 1
        if nargs != 1:
            entry["n"] = nargs
        if bool_opt:
            entry["neg"] = ["--no-" + n[2:] for n in longs]
        choices = _plain(kw.get("choices"))
        if isinstance(kw.get("choices"), _Src) and not isinstance(choices, list):
            choices = self._choices(flag.mod, kw["choices"].src)
        if isinstance(choices, list) and choices and all(isinstance(c, (str, int, float)) and not isinstance(c, bool)
                                                          for c in choices):
            entry["choices"] = [c for c in choices]
        if cfg is not None:
            entry["cfg"] = f"{cfg.cls.name}.{cfg.field.name}"
            entry["type"] = _short(cfg.field.type_src, 60)
            default = kw.get("default")
            entry["default"] = _short(cfg.field.default_src if default is None or isinstance(_plain(default), Unknown)
                                      else (default.src if isinstance(default, _Src) else repr(default)))
            if "json" in cfg.kw and "json" in kw:
                entry["json"] = kw["json"].name
            atoms = self.types.analyze(cfg.field.mod, cfg.field.annotation)
            if atoms.enum is not None and "choices" not in entry:
                members = self.types.enum_members(atoms.enum)
                if members:
                    entry["enum"] = members
        else:
            typ = kw.get("type")
            if isinstance(typ, _Src):
                entry["type"] = _short(typ.src, 60)
            default = kw.get("default")
            if isinstance(default, _Src):
                entry["default"] = _short(default.src)
            json_cls = self._json_class_of_type(flag.mod, typ)
            if json_cls:
                entry["json"] = json_cls
        dest = _plain(kw.get("dest"))
        if isinstance(dest, str) and dest != longs[0][2:].replace("-", "_"):
            entry["dest"] = dest
        # deprecation
        dep = None
        if _plain(kw.get("deprecated")) is True:
            dep = "deprecated"
        help_src = kw.get("help")
        help_text = None
        if isinstance(help_src, _Src):
            help_text = _plain(help_src) if isinstance(_plain(help_src), str) else None
            if help_text is None:
                try:
                    help_text = string_of(flag.mod, ast.parse(help_src.src, mode="eval").body, self.index)
                except SyntaxError:
                    help_text = None
        if help_text is None and cfg is not None:
            help_text = cfg.field.doc
        if help_text and says_itself_deprecated(help_text):
            dep = help_text
        if dep is None and action_text and "Deprecat" in action_text and isinstance(action, _Src):
            dep = self._action_message(flag.mod, action) or "deprecated"
        if dep is None and cfg is not None and says_itself_deprecated(cfg.field.doc or "", cfg.field.name):
            dep = cfg.field.doc
        if dep:
            entry["dep"] = _short(dep, MAX_TEXT)
        if help_text:
            entry["h"] = help_hash(help_text)
        for i, name in enumerate(longs):
            e = dict(entry)
            aliases = [n for n in longs if n != name] + shorts
            if aliases:
                e["alias"] = aliases
            if "neg" in e:
                e["neg"] = ["--no-" + name[2:]]
            if name not in out:
                out[name] = _ordered(e)

    def _action_class(self, mod: Module, action: _Src):
        try:
            node = ast.parse(action.src, mode="eval").body
        except SyntaxError:
            return None
        return self.classes.ref(mod, node)

    def _action_nargs(self, mod, action) -> int | str:
        ref = self._action_class(mod, action)
        if ref is not None:
            src = ref.mod.raw(ref.node) or ""
            m = re.search(r"nargs\s*=\s*(0|['\"][?*+]['\"])", src)
            if m:
                v = m.group(1).strip("'\"")
                return 0 if v == "0" else v
        return 1

    def _action_message(self, mod, action) -> str | None:
        ref = self._action_class(mod, action)
        if ref is None:
            return None
        for node in ast.walk(ref.node):
            if isinstance(node, ast.Call) and node.args:
                text = string_of(ref.mod, node.args[0], self.index)
                if text and "deprecat" in text.lower():
                    return text
        return None

    def _choices(self, mod: Module, src: str):
        try:
            node = ast.parse(src, mode="eval").body
        except SyntaxError:
            return None
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("get_args", "list", "sorted") \
                and node.args:
            t = self.types.analyze(mod, node.args[0])
            if t.literals:
                return list(t.literals)
        return None

    def _json_class_of_type(self, mod: Module, typ) -> str | None:
        if not isinstance(typ, _Src):
            return None
        m = re.search(r"(\w+)\.(?:from_cli|model_validate_json)\b", typ.src)
        if m:
            return m.group(1)
        return None

    # -- JSON config flags ------------------------------------------------------------------
    def json_configs(self, flags: dict) -> dict:
        out: dict = {}
        candidates: dict[str, ClassRef] = {}
        of_vllm_config: set[str] = set()
        vmod = self.index.module("vllm.config")
        found = self.index.resolve(vmod, "VllmConfig") if vmod else None
        if found and isinstance(found[1], ast.ClassDef):
            vcls = ClassRef(found[0], found[1])
            for name, f in self.classes.fields(vcls).items():
                if f.kind != "field":
                    continue
                t = self.types.analyze(f.mod, f.annotation)
                if t.config is not None and t.config.mod.rel.startswith("vllm/config"):
                    candidates["--" + name.replace("_", "-")] = t.config
                    of_vllm_config.add("--" + name.replace("_", "-"))
        # flags whose value is a config class (older releases: `type=X.from_cli`)
        for flag, e in flags.items():
            if "json" in e and flag not in candidates:
                ref = self._find_class(e["json"])
                if ref is not None:
                    candidates[flag] = ref
        for flag, ref in candidates.items():
            fields = {}
            for name, f in self.classes.fields(ref).items():
                if f.kind != "field":
                    continue
                fe: dict = {"type": _short(f.type_src, 60), "line": f.line}
                if f.mod.rel != ref.mod.rel:
                    fe["file"] = f.mod.rel
                lits = self.types.analyze(f.mod, f.annotation)
                if "literal" in lits.atoms and lits.literals and "str" not in lits.atoms:
                    fe["choices"] = [v for v in lits.literals if isinstance(v, (str, int, float))]
                if says_itself_deprecated(f.doc or "", name):
                    fe["dep"] = _short(f.doc, MAX_TEXT)
                fields[name] = fe
            out[flag] = {"class": ref.name, "file": ref.mod.rel, "line": ref.node.lineno,
                         "cli": flag in flags, "vllm_config": flag in of_vllm_config, "fields": fields}
        return dict(sorted(out.items()))

    def _find_class(self, name: str) -> ClassRef | None:
        for dotted in ("vllm.config", "vllm.engine.arg_utils"):
            mod = self.index.module(dotted)
            found = self.index.resolve(mod, name) if mod else None
            if found and isinstance(found[1], ast.ClassDef):
                return ClassRef(found[0], found[1])
        return None

    # -- environment variables ------------------------------------------------------------
    def env(self) -> dict:
        mod = self.index.module("vllm.envs")
        out: dict = {}
        if mod is None:
            self.problems.append("no vllm/envs.py")
            return out
        table = None
        for stmt in ast.walk(mod.node):
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                if any(isinstance(t, ast.Name) and t.id == "environment_variables" for t in targets) \
                        and isinstance(stmt.value, ast.Dict):
                    table = stmt.value
                    break
        if table is None:
            self.problems.append("no environment_variables table in vllm/envs.py")
            return out
        for key, value in zip(table.keys, table.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                continue
            name = key.value
            entry: dict = {"line": key.lineno}
            default, choices = self._env_default(mod, name, value)
            if default is not None:
                entry["default"] = _short(default)
            if choices:
                entry["choices"] = choices
            out[name] = entry
        # later additions: environment_variables["X"] = ...
        for stmt in ast.walk(mod.node):
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Subscript) and ast.unparse(t.value) == "environment_variables" and \
                            isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                        out.setdefault(t.slice.value, {"line": stmt.lineno})
        return out

    def _env_default(self, mod: Module, name: str, value) -> tuple[str | None, list | None]:
        for node in ast.walk(value):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and first.value == name):
                continue
            fname = ast.unparse(node.func).split(".")[-1]
            default = mod.seg(node.args[1]) if len(node.args) > 1 else None
            for kw in node.keywords:
                if kw.arg == "default":
                    default = mod.seg(kw.value)
            choices = None
            if "choices" in fname and len(node.args) > 2 and isinstance(node.args[2], (ast.List, ast.Tuple)):
                choices = [e.value for e in node.args[2].elts if isinstance(e, ast.Constant)]
            if fname in ("getenv", "get", "env_with_choices", "env_list_with_choices", "env_set_with_choices",
                         "get_env_or_set_default", "environ_get") or "choices" in fname:
                return default, choices
        return None, None

    ADHOC_RE = re.compile(r"""(?:os\.getenv|os\.environ\.get|os\.environ\[|environ\.get|getenv)\(?\s*["'](VLLM_[A-Z0-9_]+)["']""")

    def adhoc_env(self, known: dict) -> dict:
        out: dict = {}
        for rel in self.tree.names:
            if rel == "vllm/envs.py" or "/tests/" in rel:
                continue
            text = self.tree.read(rel) or ""
            if "VLLM_" not in text:
                continue
            for m in self.ADHOC_RE.finditer(text):
                name = m.group(1)
                if name in known:
                    continue
                line = text.count("\n", 0, m.start()) + 1
                out.setdefault(name, []).append(f"{rel}:{line}")
        return dict(sorted(out.items()))

    # -- deprecations -----------------------------------------------------------------------
    SURFACE = re.compile(r"^vllm/(engine/arg_utils\.py|envs\.py|config(/.*)?\.py|entrypoints/.*\.py|"
                         r"utils/argparse_utils\.py|distributed/kv_transfer/.*\.py)$")

    def deprecations(self, env: dict, flags: dict, json_cfg: dict) -> dict:
        """Deprecated env vars (with the flag that replaces them), deprecated values of flags,
        deprecated launch modules, and the deprecation messages themselves."""
        notes = []
        modules: dict = {}
        dest_to_flag = {}
        for flag, e in flags.items():
            dest = e.get("dest") or flag[2:].replace("-", "_")
            dest_to_flag.setdefault(dest, flag)
            if "cfg" in e:
                dest_to_flag.setdefault(e["cfg"].split(".", 1)[1], flag)
        cfg_to_flags: dict = {}
        for flag, e in flags.items():
            if "cfg" in e:
                cfg_to_flags.setdefault(e["cfg"], []).append(flag)
        values: list = []
        for rel in self.tree.names:
            if not self.SURFACE.match(rel):
                continue
            text = self.tree.read(rel) or ""
            if "deprecat" not in text.lower() and "from_deprecated_env" not in text:
                continue
            mod = self.index.module_at(rel)
            if mod is None:
                continue
            for node in ast.walk(mod.node):
                if isinstance(node, ast.Call):
                    fname = ast.unparse(node.func).split(".")[-1]
                    if fname in ("get_from_deprecated_env_if_set", "set_from_deprecated_env_if_set"):
                        self._deprecated_env_call(mod, node, fname, env, dest_to_flag)
                        continue
                    if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and \
                            node.func.value.id == "self":
                        self._deprecated_env_method(mod, node, env, flags, json_cfg, cfg_to_flags)
                    for arg in node.args[:1]:
                        msg = string_of(mod, arg, self.index)
                        if msg and re.search(r"deprecat", msg, re.I):
                            loc = f"{rel}:{node.lineno}"
                            notes.append([loc, _short(msg, MAX_TEXT)])
                            self._link_env(msg, loc, env, flags, dest_to_flag)
                            self._link_flag(msg, flags)
                            m = re.search(r"python -m (vllm(?:\.\w+)+)`?\s+(?:command\s+)?(?:is|has been)\s+deprecated",
                                          msg)
                            if m:
                                modules.setdefault(m.group(1), {"at": loc, "text": _short(msg, MAX_TEXT)})
                if isinstance(node, ast.If):
                    self._deprecated_value(mod, node, values)
        for cls_field, value, loc, msg in values:
            for flag in cfg_to_flags.get(cls_field, []):
                flags[flag].setdefault("dep_values", {})[str(value)] = f"{loc}: {_short(msg, MAX_TEXT)}"
            cls, fld = cls_field.split(".", 1)
            for jflag, j in json_cfg.items():
                if j["class"] == cls and fld in j["fields"]:
                    j["fields"][fld].setdefault("dep_values", {})[str(value)] = f"{loc}: {_short(msg, MAX_TEXT)}"
        notes.sort()
        return {"modules": dict(sorted(modules.items())), "notes": notes}

    def _deprecated_env_call(self, mod, node, fname, env, dest_to_flag):
        args = node.args if fname.startswith("get") else node.args[1:]
        consts = [a.value if isinstance(a, ast.Constant) else None for a in args]
        kws = {k.arg: (k.value.value if isinstance(k.value, ast.Constant) else None) for k in node.keywords}
        name = consts[0] if consts else kws.get("env_name")
        removal = consts[1] if len(consts) > 1 else kws.get("removal_version")
        fld = consts[2] if len(consts) > 2 else kws.get("field_name")
        if not isinstance(name, str) or name not in env:
            return
        e = env[name]
        loc = f"{mod.rel}:{node.lineno}"
        e["dep"] = _short(f"deprecated, removal {removal}" + (f"; use {fld}" if fld else ""), MAX_TEXT)
        e["dep_at"] = loc
        if isinstance(fld, str) and fld in dest_to_flag:
            e["use"] = dest_to_flag[fld]

    def _deprecated_env_method(self, mod, node, env, flags, json_cfg, cfg_to_flags):
        """`self._set_from_env_if_set("backend", "VLLM_ATTENTION_BACKEND")` in a config class,
        where the called method warns that the variable is deprecated."""
        consts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        names = [c for c in consts if c in env]
        if len(consts) < 2 or len(names) != 1:
            return
        cls = self._enclosing_class(mod, node)
        if cls is None:
            return
        method = next((s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and s.name == node.func.attr), None)
        if method is None:
            return
        src = mod.raw(method) or ""
        if "deprecat" not in src.lower():
            return
        ref = ClassRef(mod, cls)
        fields = self.classes.fields(ref)
        field_name = next((c for c in consts if c in fields), None)
        if field_name is None:
            return
        name = names[0]
        e = env[name]
        if "dep" in e:
            return
        use = None
        direct = cfg_to_flags.get(f"{cls.name}.{field_name}")
        if direct:
            use = direct[0]
        else:
            for jflag, j in json_cfg.items():
                if j["class"] == cls.name and j.get("cli"):
                    use = f"{jflag}.{field_name}"
                    break
        e["dep"] = _short(f"deprecated: set {cls.name}.{field_name}" + (f" ({use})" if use else "") + " instead",
                          MAX_TEXT)
        e["dep_at"] = f"{mod.rel}:{node.lineno}"
        if use:
            e["use"] = use

    def _link_env(self, msg, loc, env, flags, dest_to_flag):
        names = re.findall(r"\b(VLLM_[A-Z0-9_]+)\b", msg)
        if not names or not is_deprecation(msg):
            return
        subject = names[0]
        if subject not in env:
            return
        e = env[subject]
        if "dep" in e:
            return
        e["dep"] = _short(msg, MAX_TEXT)
        e["dep_at"] = loc
        others = [n for n in names[1:] if n in env and n != subject]
        flag = re.search(r"(--[a-z0-9][a-z0-9-]+)", msg)
        if flag and flag.group(1) in flags:
            e["use"] = flag.group(1)
        elif others and re.search(r"renamed|use\s+`?" + re.escape(others[0]), msg, re.I):
            e["use"] = others[0]

    FLAG_NOTE = re.compile(r"^\W*(?:\w+\s+\()?(--[a-z0-9][a-z0-9-]*)\)?`?\s+(?:is|are|has been)\s+deprecated")

    def _link_flag(self, msg, flags):
        """`--flag is deprecated ...` / `field (--flag) is deprecated ...` warned at run time."""
        m = self.FLAG_NOTE.match(msg)
        if m and m.group(1) in flags and "dep" not in flags[m.group(1)]:
            flags[m.group(1)]["dep"] = _short(msg, MAX_TEXT)

    def _deprecated_value(self, mod, node: ast.If, out: list):
        """`if self.F == "V": warn("... deprecated ...")` inside a config class (or a
        field_validator("F") taking the value as a parameter)."""
        test = node.test
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.In))):
            return
        comp = test.comparators[0]
        values = [comp.value] if isinstance(comp, ast.Constant) else \
            [e.value for e in comp.elts if isinstance(e, ast.Constant)] if isinstance(comp, (ast.Tuple, ast.List, ast.Set)) \
            else []
        if not values:
            return
        msg = None
        for sub in ast.walk(ast.Module(body=node.body, type_ignores=[])):
            if isinstance(sub, ast.Call) and sub.args:
                text = string_of(mod, sub.args[0], self.index)
                if text and "deprecat" in text.lower():
                    msg = text
                    break
        if msg is None:
            return
        left = test.left
        field_name = None
        if isinstance(left, ast.Attribute) and isinstance(left.value, ast.Name) and left.value.id == "self":
            field_name = left.attr
        cls = self._enclosing_class(mod, node)
        if cls is None:
            return
        if field_name is None and isinstance(left, ast.Name):
            fn = self._enclosing_func(cls, node)
            if fn is not None:
                for deco in fn.decorator_list:
                    if isinstance(deco, ast.Call) and "validator" in ast.unparse(deco.func) and deco.args and \
                            isinstance(deco.args[0], ast.Constant):
                        field_name = deco.args[0].value
        if field_name is None:
            return
        for v in values:
            out.append((f"{cls.name}.{field_name}", v, f"{mod.rel}:{node.lineno}", msg))

    def _enclosing_class(self, mod, target):
        for node in mod.node.body:
            if isinstance(node, ast.ClassDef):
                for sub in ast.walk(node):
                    if sub is target:
                        return node
        return None

    def _enclosing_func(self, cls, target):
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for sub in ast.walk(node):
                    if sub is target:
                        return node
        return None

    # -- subcommands ------------------------------------------------------------------------
    def subcommands(self) -> list[str]:
        out: set[str] = set()
        main = self.index.module("vllm.entrypoints.cli.main")
        cli_rels = [r for r in self.tree.names if r.startswith("vllm/entrypoints/cli/")]
        if main is None:
            for rel in ("vllm/scripts.py",):
                text = self.tree.read(rel) or ""
                out.update(re.findall(r"""add_parser\(\s*["']([\w-]+)["']""", text))
            return sorted(out)
        # every CLISubcommand class with a `name`, and what they nest
        classes: dict[str, tuple] = {}
        for rel in cli_rels:
            mod = self.index.module_at(rel)
            if mod is None:
                continue
            for node in mod.node.body:
                if isinstance(node, ast.ClassDef):
                    classes[node.name] = (mod, node)
        def name_of(node):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "name" for t in stmt.targets) \
                        and isinstance(stmt.value, ast.Constant):
                    return stmt.value.value
            return None
        tops = []
        for rel in cli_rels:
            mod = self.index.module_at(rel)
            if mod is None or "cmd_init" not in mod.defs:
                continue
            for sub in ast.walk(mod.defs["cmd_init"]):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in classes:
                    tops.append(sub.func.id)
        for cname in tops:
            mod, node = classes[cname]
            top = name_of(node)
            if not top:
                continue
            out.add(top)
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
                    if sub.func.attr == "add_parser" and sub.args and isinstance(sub.args[0], ast.Constant) \
                            and isinstance(sub.args[0].value, str) and sub.args[0].value != top:
                        out.add(f"{top} {sub.args[0].value}")
                    if sub.func.attr == "__subclasses__" and isinstance(sub.func.value, ast.Name):
                        base = sub.func.value.id
                        for other, (omod, onode) in classes.items():
                            if any(ast.unparse(b).split(".")[-1] == base for b in onode.bases):
                                n = name_of(onode)
                                if n:
                                    out.add(f"{top} {n}")
        return sorted(out)

    # -- KV connector facts -------------------------------------------------------------------
    def kv(self, json_cfg: dict) -> dict:
        out: dict = {}
        factory = "vllm/distributed/kv_transfer/kv_connector/factory.py"
        text = self.tree.read(factory)
        if text:
            mod = self.index.module_at(factory)
            names = []
            for node in ast.walk(mod.node):
                if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("register_connector") and \
                        node.args and isinstance(node.args[0], ast.Constant):
                    names.append(node.args[0].value)
                # early releases: `supported_kv_connector = ["PyNcclConnector", ...]`
                if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)) and \
                        any("support" in ast.unparse(t).lower() for t in node.targets):
                    names.extend(e.value for e in node.value.elts
                                 if isinstance(e, ast.Constant) and isinstance(e.value, str))
            out["connectors"] = sorted(set(names))
            registered = self._registered_modules(mod)
        else:
            registered = {}
        keys: dict = {}
        defaults: dict = {}
        unsupported: list = []
        others: dict = {}
        for rel in self.tree.names:
            if "kv_connector/v1/nixl" not in rel:
                owner_names = self._connectors_of(rel, registered)
                if owner_names:
                    for key in self._extra_keys(rel):
                        others.setdefault(key, set()).update(owner_names)
                continue
            mod = self._reads_extra_config(rel)
            if mod is None:
                continue
            for node in _extra_config_reads(mod):
                keys.setdefault(node.args[0].value, f"{rel}:{node.lineno}")
                if len(node.args) > 1 and node.args[0].value not in defaults:
                    defaults[node.args[0].value] = _short(mod.seg(node.args[1]))
            unsupported.extend(self._bidirectional_raises(mod))
        if keys:
            out["nixl_extra_keys"] = dict(sorted(keys.items()))
            out["nixl_extra_defaults"] = {k: defaults[k] for k in sorted(defaults) if k in keys}
        if unsupported:
            out["bidirectional_unsupported"] = sorted(unsupported, key=lambda r: r["at"])
        if others:
            out["other_extra_keys"] = {k: sorted(v) for k, v in sorted(others.items())}
        kvc = json_cfg.get("--kv-transfer-config")
        if kvc and "kv_role" in kvc["fields"]:
            mod = self.index.module(kvc["file"][:-3].replace("/", "."))
            found = self.index.resolve(mod, "KVRole") if mod else None
            if found and found[1] is not None:
                t = self.types.analyze(found[0], found[1])
                if t.literals:
                    out["roles"] = sorted(set(t.literals))
        return out

    @staticmethod
    def _registered_modules(factory: Module) -> dict:
        """`register_connector("Name", "module.path", "Class")` -> {module path: {names}}."""
        out: dict = {}
        for node in ast.walk(factory.node):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("register_connector") and \
                    len(node.args) >= 2 and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                                for a in node.args[:2]):
                out.setdefault(node.args[1].value, set()).add(node.args[0].value)
        return out

    @staticmethod
    def _connectors_of(rel: str, registered: dict) -> set:
        """The registered connectors a file under kv_connector/v1/ belongs to: its own module,
        or a module of the connector's own package (`mooncake/utils.py` -> MooncakeConnector)."""
        if "kv_transfer/kv_connector/v1/" not in rel:
            return set()
        dotted = rel[:-3].replace("/", ".")
        if dotted.endswith(".__init__"):
            dotted = dotted[:-9]
        names: set = set()
        for path, owners in registered.items():
            pkg = path.rsplit(".", 1)[0]
            if dotted == path or (not pkg.endswith("kv_connector.v1") and dotted.startswith(pkg + ".")):
                names |= owners
        return names

    def _extra_keys(self, rel: str) -> list[str]:
        """The kv_connector_extra_config keys a file reads (`get_from_extra_config("k", ...)`,
        `...extra_config.get("k", ...)`)."""
        mod = self._reads_extra_config(rel)
        return [node.args[0].value for node in _extra_config_reads(mod)] if mod is not None else []

    def _reads_extra_config(self, rel: str):
        """The module at `rel` when its text mentions extra_config (a cheap filter before parsing)."""
        text = self.tree.read(rel) or ""
        return self.index.module_at(rel) if "extra_config" in text else None

    def _bidirectional_raises(self, mod: Module) -> list[dict]:
        """`raise NotImplementedError` under an `if` whose test (or whose class) ties it to
        bidirectional transfer: what the release rejects, as `file:line` evidence. `when` says
        which combination: `pcp` (prefill context parallel > 1) or `push` (the push connector)."""
        found = []

        def visit(node, cls):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    visit(child, child.name)
                    continue
                if isinstance(child, ast.If):
                    test = mod.seg(child.test)
                    for stmt in child.body:
                        if not (isinstance(stmt, ast.Raise) and stmt.exc is not None
                                and "NotImplementedError" in mod.seg(stmt.exc)):
                            continue
                        msg = mod.seg(stmt.exc)
                        if "bidirectional" not in (test + msg).lower():
                            continue
                        when = "pcp" if re.search(r"\bpcp|prefill_context_parallel", test) else \
                            "push" if "push" in (cls or "").lower() or "push" in msg.lower() else None
                        if when:
                            text = re.findall(r"['\"](.*?)['\"]", msg)
                            found.append({"at": f"{mod.rel}:{stmt.lineno}", "when": when, "test": _short(test, MAX_TEXT),
                                          "text": _short(" ".join(text), MAX_TEXT)})
                visit(child, cls)

        visit(mod.node, None)
        return found

    # -- Python modules: where each lives, what the launcher-facing ones define ---------------
    def modules(self) -> dict:
        """Every `vllm.*` module in the wheel's file list, grouped by package:
        `{"vllm.entrypoints.common": "__init__ chat_utils cli_args ..."}` (`__init__`: the
        package itself is a module)."""
        out: dict[str, list[str]] = {}
        for rel in self.tree.names:
            parts = rel[:-3].split("/")
            out.setdefault(".".join(parts[:-1]), []).append(parts[-1])
        return {pkg: " ".join(sorted(leaves)) for pkg, leaves in sorted(out.items())}

    def exports(self) -> dict:
        """The public names each `vllm.entrypoints` module defines at its top level (classes,
        functions, assignments; re-exported imports are left out, so a check that asks for a
        name here errs towards "not there")."""
        out = {}
        for rel in self.tree.names:
            if not rel.startswith(EXPORTS_UNDER):
                continue
            mod = self.index.module_at(rel)
            if mod is None:
                continue
            names = sorted(n for n in mod.defs if not n.startswith("_"))
            out[mod.dotted] = " ".join(names)
        return dict(sorted(out.items()))

    # -- all of it --------------------------------------------------------------------------
    def extract(self) -> dict:
        flags, meta = self.flags()
        json_cfg = self.json_configs(flags)
        env = self.env()
        adhoc = self.adhoc_env(env)
        deps = self.deprecations(env, flags, json_cfg)
        cat = {
            "version": self.version,
            "generator": f"{GENERATOR} (schema {SCHEMA})",
            "parser": meta.get("parser"),
            "positional": meta.get("positional", []),
            "flags": dict(sorted(flags.items())),
            "env": dict(sorted(env.items())),
            "env_adhoc": adhoc,
            "json": json_cfg,
            "subcommands": self.subcommands(),
            "deprecated_modules": deps["modules"],
            "kv": self.kv(json_cfg),
            "deprecation_notes": deps["notes"],
            "modules": self.modules(),
            "exports": self.exports(),
        }
        if self.problems:
            cat["problems"] = self.problems
        requires = wheel_requires(self.tree.path)       # the wheel's METADATA: Requires-Python, Requires-Dist
        if requires is not None:
            cat["requires"] = requires
        return cat


def _ordered(entry: dict) -> dict:
    order = ["at", "n", "alias", "neg", "choices", "enum", "type", "default", "cfg", "json", "dest", "dep", "dep_values",
             "h"]
    return {k: entry[k] for k in order if k in entry and entry[k] not in (None, [], {})}


def _write_table(out: io.StringIO, key: str, table: dict, comma: str) -> None:
    """`"key": {` then one compact entry a line, then `}` (small diffs between releases)."""
    out.write(f"{json.dumps(key)}: {{\n")
    sub = list(table.items())
    for j, (k, v) in enumerate(sub):
        out.write(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False, separators=(',', ':'))}"
                  f"{',' if j + 1 < len(sub) else ''}\n")
    out.write(f"}}{comma}\n")


def dumps(cat: dict) -> str:
    """Compact JSON, one entry a line under the big tables (small diffs between releases)."""
    out = io.StringIO()
    out.write("{\n")
    items = list(cat.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i + 1 < len(items) else ""
        if isinstance(value, dict) and key in ("flags", "env", "env_adhoc", "deprecated_modules", "modules", "exports") and value:
            _write_table(out, key, value, comma)
        elif key == "json" and value:
            out.write(f"{json.dumps(key)}: {{\n")
            sub = list(value.items())
            for j, (k, v) in enumerate(sub):
                head = {kk: vv for kk, vv in v.items() if kk != "fields"}
                out.write(f" {json.dumps(k)}: {json.dumps(head, separators=(',', ':'))[:-1]},\"fields\":{{\n")
                fields = list(v["fields"].items())
                for n, (fk, fv) in enumerate(fields):
                    out.write(f"  {json.dumps(fk)}: {json.dumps(fv, ensure_ascii=False, separators=(',', ':'))}"
                              f"{',' if n + 1 < len(fields) else ''}\n")
                out.write(f" }}}}{',' if j + 1 < len(sub) else ''}\n")
            out.write(f"}}{comma}\n")
        elif key == "deprecation_notes" and value:
            out.write(f"{json.dumps(key)}: [\n")
            for j, note in enumerate(value):
                out.write(f" {json.dumps(note, ensure_ascii=False)}{',' if j + 1 < len(value) else ''}\n")
            out.write(f"]{comma}\n")
        else:
            out.write(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False, separators=(',', ':'))}{comma}\n")
    out.write("}\n")
    return out.getvalue()


def _vkey(version: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:4])


def _runs(present: list[bool], versions: list[str]) -> list[list[str]]:
    runs, start = [], None
    for i, here in enumerate(present + [False]):
        if here and start is None:
            start = i
        elif not here and start is not None:
            runs.append([versions[start], versions[i - 1]])
            start = None
    return runs


def build_index(folder: Path) -> dict:
    """What every catalogued release had: the versions each flag, `--no-` form, env var, JSON
    field and NixlConnector extra key was present in (runs of consecutive catalogued
    releases), the last deprecation text and replacement known for each, and the flags
    renamed between two releases (removed in one, added in the next with the same help)."""
    cats = {}
    for path in folder.glob("vllm-*.json"):
        cat = json.loads(path.read_text(encoding="utf-8"))
        side = folder / MODULES_DIR / path.name
        if side.is_file():
            cat.update(json.loads(side.read_text(encoding="utf-8")))
        cats[cat["version"]] = cat
    return index_of(cats, sorted(cats, key=_vkey))


def index_of(cats: dict, versions: list[str]) -> dict:
    """`build_index` over catalogues given by name, in the order given (an added release sits
    among the built-in ones under its own name)."""
    flags: dict = {}
    env: dict = {}
    fields: dict = {}
    nixl: dict = {}
    for i, v in enumerate(versions):
        cat = cats[v]
        for name, e in cat["flags"].items():
            for form in [name] + e.get("neg", []):
                rec = flags.setdefault(form, {"present": [False] * len(versions)})
                rec["present"][i] = True
                rec["last"] = {k: e[k] for k in ("dep", "n") if k in e}
                if form != name:
                    rec["last"]["neg_of"] = name
        for name, e in list(cat["env"].items()) + [(k, {}) for k in cat.get("env_adhoc", {})]:
            rec = env.setdefault(name, {"present": [False] * len(versions)})
            rec["present"][i] = True
            rec["last"] = {k: e[k] for k in ("dep", "use") if k in e}
        for flag, j in cat["json"].items():
            if not j.get("cli"):
                continue
            for fname, fe in j["fields"].items():
                rec = fields.setdefault(flag, {}).setdefault(fname, [False] * len(versions))
                rec[i] = True
        for key in cat.get("kv", {}).get("nixl_extra_keys", {}):
            nixl.setdefault(key, [False] * len(versions))[i] = True
    mods_index, moved = _module_history(cats, versions)
    renamed: dict = {}
    for a, b in zip(versions, versions[1:]):
        fa, fb = cats[a]["flags"], cats[b]["flags"]
        added = [n for n in fb if n not in fa]
        for name in fa:
            if name in fb or not fa[name].get("h"):
                continue
            same = [n for n in added if fb[n].get("h") == fa[name]["h"]]
            if len(same) == 1:
                renamed[name] = {"in": b, "to": same[0]}
    out = {
        "versions": versions,
        "generator": f"{GENERATOR} --index (schema {SCHEMA})",
        "flags": {k: {"runs": _runs(r["present"], versions), **r["last"]} for k, r in sorted(flags.items())},
        "env": {k: {"runs": _runs(r["present"], versions), **r["last"]} for k, r in sorted(env.items())},
        "json_fields": {f: {k: _runs(p, versions) for k, p in sorted(d.items())} for f, d in sorted(fields.items())},
        "nixl_extra_keys": {k: _runs(p, versions) for k, p in sorted(nixl.items())},
        "renamed_flags": dict(sorted(renamed.items())),
        "modules": mods_index,
        "moved_modules": moved,
    }
    return out


def module_set(cat: dict) -> set[str]:
    """The dotted `vllm.*` modules of one catalogued release (empty: not recorded)."""
    out = set()
    for pkg, leaves in cat.get("modules", {}).items():
        for leaf in leaves.split():
            out.add(pkg if leaf == "__init__" else f"{pkg}.{leaf}")
    return out


def _module_history(cats: dict, versions: list[str]) -> tuple[dict, dict]:
    """Runs of the modules that are not in every release with a recorded module list (the
    others never moved), and the modules moved between two such releases: gone in B, and B
    adds exactly one module with the same last name (`launchers.cli_args` -> `common.cli_args`)."""
    with_mods = [v for v in versions if cats[v].get("modules")]
    sets = {v: module_set(cats[v]) for v in with_mods}
    if not with_mods:
        return {}, {}
    everywhere = set.intersection(*sets.values())
    changing = sorted(set().union(*sets.values()) - everywhere)
    runs = {m: _runs([m in sets[v] for v in with_mods], with_mods) for m in changing}
    moved: dict = {}
    for a, b in zip(with_mods, with_mods[1:]):
        gone, new = sets[a] - sets[b], sets[b] - sets[a]
        by_leaf: dict = {}
        for m in new:
            by_leaf.setdefault(m.rsplit(".", 1)[-1], []).append(m)
        for m in sorted(gone):
            hits = by_leaf.get(m.rsplit(".", 1)[-1], [])
            if len(hits) == 1:
                moved[m] = {"in": b, "to": hits[0]}
    return runs, dict(sorted(moved.items()))


def dumps_index(index: dict) -> str:
    out = io.StringIO()
    out.write("{\n")
    items = list(index.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i + 1 < len(items) else ""
        if isinstance(value, dict) and value:
            _write_table(out, key, value, comma)
        else:
            out.write(f"{json.dumps(key)}: {json.dumps(value, separators=(',', ':'))}{comma}\n")
    out.write("}\n")
    return out.getvalue()


def extract(path: Path, version: str | None = None) -> dict:
    return Extractor(Tree(path), version).extract()


def write_release(path: Path, out: Path, version: str | None = None) -> tuple[Path, dict]:
    """Extract the release at `path` into `out/vllm-X.json` (the built-in catalogue's layout:
    its module lists in `out/modules/vllm-X.json`)."""
    cat = extract(path, version)
    out.mkdir(parents=True, exist_ok=True)
    requires = cat.pop("requires", None)
    if requires is not None:        # the built-in releases' requirements are one file (requires.py)
        record_requires(out / "requires.json", cat["version"], requires)
    return write_split(out, f"vllm-{cat['version']}.json", cat, RELEASE_MODULE_KEYS, dumps), cat


def metadata_requires(text: str, origin: str = "") -> dict:
    """{"python", "dist", "from"} of a core-metadata file (METADATA / PKG-INFO)."""
    from email.parser import HeaderParser

    msg = HeaderParser().parsestr(text)
    return {"python": (msg.get("Requires-Python") or "").strip(),
            "dist": [" ".join(v.split()) for v in msg.get_all("Requires-Dist") or []],
            "from": origin}


def wheel_requires(path: Path) -> dict | None:
    """The requirements in a wheel's (or an unpacked wheel's or site-packages folder's)
    vllm-*.dist-info/METADATA; None when it has none (a source tree)."""
    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if re.fullmatch(r"vllm[^/]*\.dist-info/METADATA", n)]
            if names:
                return metadata_requires(zf.read(names[0]).decode("utf-8", "replace"), f"{path.name}:{names[0]}")
        return None
    if path.is_dir():
        for meta in sorted(path.glob("vllm*.dist-info/METADATA")):
            return metadata_requires(meta.read_text(encoding="utf-8", errors="replace"),
                                     f"{meta.parent.name}/METADATA")
    return None


def dumps_requires(data: dict) -> str:
    """requires.json: one release per block, one requirement per line (a new release is a readable diff)."""
    blocks = []
    for version in sorted(data, key=_vkey):
        entry = data[version]
        dist = ",\n    ".join(json.dumps(d) for d in entry.get("dist", []))
        blocks.append(f' {json.dumps(version)}: {{"python": {json.dumps(entry.get("python", ""))}, '
                      f'"from": {json.dumps(entry.get("from", ""))},\n   "dist": [\n    {dist}]}}')
    return "{\n" + ",\n".join(blocks) + "\n}\n"


def record_requires(path: Path, version: str, requires: dict) -> None:
    """Write `requires` as release `version`'s entry of `path` (requires.json), the others kept."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    data[version] = requires
    path.write_text(dumps_requires(data), encoding="utf-8")


def write_index(out: Path) -> tuple[Path, dict]:
    """Rewrite `out/index.json` (and `out/modules/index.json`) from the `vllm-X.json` next to it."""
    index = build_index(out)
    return write_split(out, "index.json", index, INDEX_MODULE_KEYS, dumps_index), index


def write_split(out: Path, name: str, data: dict, module_keys: tuple[str, ...], dump) -> Path:
    """Write `data` to `out/name`, its sections `module_keys` apart in `out/modules/name`: only
    Python module checks read them, so a one-file check of a manifest never parses them."""
    main = {k: v for k, v in data.items() if k not in module_keys}
    modules = {k: data[k] for k in module_keys if k in data}
    (out / name).write_text(dump(main), encoding="utf-8")
    side = out / MODULES_DIR / name
    if modules:
        side.parent.mkdir(exist_ok=True)
        side.write_text(dump(modules), encoding="utf-8")
    elif side.exists():
        side.unlink()               # an earlier extraction's lists; this one records none
    return out / name


def summary(cat: dict) -> str:
    return (f"{len(cat['flags'])} flags, {len(cat['env'])} env vars, {len(cat['json'])} JSON config flags"
            + (f"; problems: {cat['problems']}" if cat.get("problems") else ""))


def main(argv=None) -> int:
    """The maintainers' entry (`scripts/extract_catalogue.py`); `vllmlint catalogue add --builtin`
    runs the same write_release/write_index."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", type=Path, help="vllm-X-*.whl or a folder with an unpacked wheel")
    ap.add_argument("-o", "--out", type=Path, default=Path(__file__).resolve().parent)
    ap.add_argument("--version", help="release number (default: vllm/_version.py)")
    ap.add_argument("--stdout", action="store_true", help="print instead of writing")
    ap.add_argument("--no-index", action="store_true", help="do not rewrite OUT/index.json afterwards")
    args = ap.parse_args(argv)
    for path in args.paths:
        if args.stdout:
            sys.stdout.write(dumps(extract(path, args.version)))
            continue
        dest, cat = write_release(path, args.out, args.version)
        print(f"{dest}: {summary(cat)}", file=sys.stderr)
    if not args.stdout and not args.no_index and any(args.out.glob("vllm-*.json")):
        dest, index = write_index(args.out)
        print(f"{dest}: {len(index['versions'])} releases, {len(index['flags'])} flag spellings, "
              f"{len(index['env'])} env vars, {len(index['renamed_flags'])} renamed flags", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
