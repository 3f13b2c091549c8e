"""The package reads as its rooms, and imports only go down:

    cli -> editor -> pd -> verify -> lint (+ vllmlint.rules) -> parsers -> knowledge -> model

Every `import` and `from ... import` in the package (at module level or inside a function) is
checked; `vllmlint/__init__.py` holds constants only (version, URLs) and may be imported anywhere.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS = ["model", "knowledge", "parsers", "lint", "verify", "pd", "editor", "cli"]
ROOMS = {"model", "knowledge", "parsers", "lint", "rules", "verify", "pd", "editor"}


def room_of(module: str) -> str:
    """vllmlint.lint.engine -> lint; vllmlint.rules.x -> lint; vllmlint.cli -> cli."""
    parts = module.split(".")
    if parts == ["vllmlint"] or parts[1].isupper() or parts[1] == "__version__":
        return "root"          # the package's constants (`from .. import DOCS_URL`)
    room = parts[1]
    if room == "rules":
        return "lint"
    return room if room in ROOMS else "cli"      # cli.py, __main__.py, the router entry shim


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "vllmlint").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        found[".".join(rel.parts).removesuffix(".__init__")] = path
    for path in sorted((ROOT / "rules").glob("*.py")):
        found[("vllmlint.rules." + path.stem).removesuffix(".__init__")] = path
    return found


def imports_of(module: str, path: Path) -> list[tuple[int, str]]:
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module is None:      # `from . import a`: a is a module of that package
                out += [(node.lineno, f"{target}.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, target))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return [(line, t) for line, t in out if t == "vllmlint" or t.startswith("vllmlint.")]


def test_every_module_lives_in_a_room():
    loose = [m for m in modules() if m.count(".") == 1 and room_of(m) == "cli"
             and m not in ("vllmlint.cli", "vllmlint.entry", "vllmlint.__main__", "vllmlint.router")]
    assert loose == [], "put these modules in a room (model, knowledge, parsers, lint, verify, pd, editor)"


def test_every_room_says_what_it_holds():
    for room in ("model", "knowledge", "parsers", "lint", "verify", "pd", "editor"):
        doc = ast.get_docstring(ast.parse((ROOT / "vllmlint" / room / "__init__.py").read_text()))
        assert doc and "import" in doc, f"vllmlint/{room}/__init__.py: say what lives here and who may import it"


@pytest.mark.parametrize("module", sorted(modules()))
def test_imports_only_go_down(module):
    path = modules()[module]
    mine = room_of(module)
    if mine == "root":
        assert imports_of(module, path) == [], "vllmlint/__init__.py holds constants only"
        return
    upward = []
    for line, target in imports_of(module, path):
        theirs = room_of(target)
        if theirs != "root" and LAYERS.index(theirs) > LAYERS.index(mine):
            upward.append(f"{path.relative_to(ROOT)}:{line}: {mine} imports {target} ({theirs})")
    assert upward == []


# -- the front ends (vllmlint/parsers/) ---------------------------------------------------------
# Front ends hand embedded content to the door (parsers/embedded.py), which looks the reader up in
# a registry the front ends fill: no front end imports another one that imports it back. Imports
# inside functions count too, so a cycle cannot hide in a function body.

def parser_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in modules().items():
        if module != "vllmlint.parsers" and not module.startswith("vllmlint.parsers."):
            continue         # the package itself counts: it imports every front end
        graph[module] = {t for _, t in imports_of(module, path)
                         if (t == "vllmlint.parsers" or t.startswith("vllmlint.parsers.")) and t != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_parsers():
    assert cycles(parser_graph()) == [], "front ends import the door (parsers/embedded.py), not each other"


# A class a reader can hold in mind. Classes over the limit that are not split yet, with why:
MAX_CLASS_LINES = 400
OVERSIZE_CLASSES: dict[str, str] = {}


def test_no_class_over_the_limit_in_parsers():
    over = {}
    for path in sorted((ROOT / "vllmlint" / "parsers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                over[f"{path.relative_to(ROOT).as_posix()}:{node.name}"] = node.end_lineno - node.lineno + 1
    assert set(over) == set(OVERSIZE_CLASSES), \
        f"classes over {MAX_CLASS_LINES} lines: {over} (split them, or list the ones that wait, with why)"
