import re

from vllmlint.model.launch import Edit, Fix
from vllmlint.lint.registry import Rule
from vllmlint.model.lazyre import lazy_re

# shell words, JSON/YAML list items, and comment lines between them (a suppression comment)
SEP = r"""["']?(?:[ \t,]|\n(?:[ \t]*\#[^\n]*\n)*[ \t]*-[ \t]|\\\n)+["']?"""
# a Python file that imports vLLM at all (cheap test before its syntax tree is built)
IMPORTS_VLLM_RE = lazy_re(r"(?m)^[ \t]*(?:from[ \t]+vllm\b|import[ \t][^\n#]*\bvllm\b)|\bimport_module\(|__import__\(")
# a cheap test before PY_M_RE (slow on long files): `vllm.` and a `-m` word (a literal prefix: fast)
PY_M_HINT = lazy_re(r"-m[\s\"',\\]")
PY_M_RE = lazy_re(r"(?<![\w.-])python[\d.]*" + f"(?:{SEP}-[a-zA-Z]+)*?{SEP}-m{SEP}" + r"(?P<mod>vllm(?:\.\w+)+)")


def _imports_vllm(pf) -> bool:
    """IMPORTS_VLLM_RE on the file, kept on the parsed file (a migration asks at every step)."""
    found = pf.__dict__.get("_imports_vllm")
    if found is None:
        found = pf._imports_vllm = bool(IMPORTS_VLLM_RE().search(pf.source.text))
    return found


class PythonModuleMoved(Rule):
    """A `vllm.*` module that the target vLLM release moved or removed, imported by a Python
    launcher or started with `python -m`.

    ## What it does
    Reads the imports of every Python file (`import vllm.a.b`, `import vllm.a.b as c`,
    `from vllm.a.b import x`, `from vllm.a import b` where `b` is a module) and the
    `python -m vllm.a.b` commands of every file kind, and looks each `vllm.*` module up in the
    catalogue's module index, generated from the wheels' file lists: a module an earlier
    release had and the target does not is reported, with its new path when it moved (the
    target adds exactly one module of the same name the release it went away in:
    `vllm.entrypoints.launchers.cli_args` -> `vllm.entrypoints.common.cli_args` in 0.33.0,
    followed across several moves). Modules the index has never seen are left alone.

    ## Why
    The launcher stops with `ModuleNotFoundError` before vLLM starts; `python -m` says
    "No module named ...". Custom launchers that build vLLM's argument parser
    (`make_arg_parser`) import it from `cli_args`, which moved twice (0.29.0, 0.33.0).

    ## Example
    ```python
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    ```
    On 0.33.0: moved to `vllm.entrypoints.common.cli_args`; the fix rewrites the import.

    ## Fix safety
    Safe for `from OLD import names` when every imported name is defined at the new path in the
    target (the catalogue keeps the top-level names of the `vllm.entrypoints` modules), and for
    `import OLD as alias` when the new module defines every public name the old one did. Gated
    by the release the launch runs today (the new path may not exist there). No fix for
    `import OLD` without an alias (every use spells the old path), for a removed module, or for
    `python -m`.
    """

    fixes_code = True              # an import statement: applied in test code too (Rule.fixes_code)
    code = "VL306"
    name = "python-module-moved"
    severity = "error"
    min_version = "0.28.0"         # the first release after the first with a module index
    fix = "sometimes"

    def check(self, project):
        from vllmlint.knowledge.catalogue import for_target, history

        cat = for_target(self.target)
        if cat is None:
            return
        hist = None
        for pf in project.files:
            source = pf.source
            imports = source.kind == "python" and _imports_vllm(pf)
            python_m = "vllm." in source.text and PY_M_HINT().search(source.text)
            if not (imports or python_m):
                continue
            if not cat.has_modules:     # asked only here: the module lists are a file of their own
                return
            hist = hist or history()
            if imports:
                yield from self._imports(pf, cat, hist, project)
            if python_m:
                yield from self._python_m(pf, cat, hist)

    # -- what happened to one module ---------------------------------------------------------
    def _fate(self, module, cat, hist):
        """(message part, new module or None, release it moved in) or None when it is fine."""
        if cat.has_module(module):
            return None
        gone = hist.module_gone(module, self.target)
        if gone is None:
            return None
        moved = hist.module_moved(module, self.target)
        if moved and cat.has_module(moved[0]):
            new, when, hops = moved
            path = f"moved to `{new}` in vLLM {when}" if len(hops) == 1 else \
                "moved " + ", then ".join(f"to `{m}` in {v}" for m, v in hops)
            return f"`{module}` {path}", new, when
        return f"`{module}` was removed in vLLM {gone.removed_in} (last in {gone.last})", None, None

    # -- imports -------------------------------------------------------------------------------
    def _imports(self, pf, cat, hist, project):
        import ast
        source = pf.source
        nodes = pf.vllm_imports         # the parser's walk met them (a check parsed it once, not twice)
        if nodes is None:
            try:
                nodes = ast.walk(ast.parse(source.text))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return
        starts = [0] + [m.end() for m in re.finditer("\n", source.text)]
        t = self.target_str

        def offset(line, col):                    # ast columns are UTF-8 bytes
            start = starts[line - 1]
            text = source.text[start:starts[line] if line < len(starts) else len(source.text)]
            return start + len(text.encode("utf-8")[:col].decode("utf-8", "replace"))

        def span_of(node, dotted, after=0):
            a = offset(node.lineno, node.col_offset)
            b = offset(node.end_lineno, node.end_col_offset)
            seg = source.text[a:b]
            m = re.search(r"(?<![\w.])" + re.escape(dotted) + r"(?![\w.])", seg[after:])
            return (a + after + m.start(), a + after + m.end()) if m else None

        for node in nodes:
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                    (node.module == "vllm" or node.module.startswith("vllm.")):
                fate = self._fate(node.module, cat, hist) if node.module != "vllm" else None
                if fate:
                    msg, new, when = fate
                    where = span_of(node, node.module) or (offset(node.lineno, node.col_offset),) * 2
                    names = [a.name for a in node.names]
                    fix, why = None, ""
                    if new:
                        have = cat.exports(new)
                        missing = [n for n in names if n != "*" and (have is None or n not in have)]
                        if "*" in names:
                            why = "; `import *` is not rewritten"
                        elif missing:
                            why = f"; not rewritten: {', '.join(missing)} not defined at `{new}` in vLLM {t}"
                        elif where[0] != where[1]:
                            fix = Fix([Edit(source, where[0], where[1], new)], f"import from {new}")
                    yield self.finding(source, where,
                                       f"{msg}: importing it fails on vLLM {t}",
                                       fix, launches=self._runs_on(pf, project), min_release=_v(when),
                                       detail=f"ModuleNotFoundError{why}.")
                    continue
                for alias in node.names:             # `from vllm.a import b`, b a module
                    sub = f"{node.module}.{alias.name}"
                    fate = self._fate(sub, cat, hist)
                    if not fate:
                        continue
                    msg, new, when = fate
                    where = span_of(node, alias.name, after=len("from " + node.module)) or \
                        (offset(node.lineno, node.col_offset),) * 2
                    yield self.finding(source, where,
                                       f"{msg}" + (f": write `from {new.rsplit('.', 1)[0]} import {new.rsplit('.', 1)[1]}`"
                                                   if new else f": importing it fails on vLLM {t}"),
                                       detail=f"vLLM {t}: ImportError.")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if not alias.name.startswith("vllm."):
                        continue
                    fate = self._fate(alias.name, cat, hist)
                    if not fate:
                        continue
                    msg, new, when = fate
                    where = span_of(node, alias.name) or (offset(node.lineno, node.col_offset),) * 2
                    fix, why = None, ""
                    if new and alias.asname:
                        old_names = self._old_exports(alias.name, gone_cat=hist, cat=cat)
                        have = cat.exports(new)
                        if old_names is not None and have is not None and old_names <= have \
                                and where[0] != where[1]:
                            fix = Fix([Edit(source, where[0], where[1], new)], f"import {new}")
                        else:
                            why = f"; not rewritten: `{new}` may not define every name `{alias.name}` did"
                    elif new:
                        why = "; not rewritten: every use spells the old path"
                    yield self.finding(source, where,
                                       f"{msg}: importing it fails on vLLM {t}",
                                       fix, launches=self._runs_on(pf, project), min_release=_v(when),
                                       detail=f"ModuleNotFoundError{why}.")

    def _runs_on(self, pf, project):
        """The launches whose release gates a fix of this file: its own, else the file itself
        read as a launcher run where the nearest requirements file's `vllm==` pin is installed."""
        if any(l.release for l in pf.launches):
            return list(pf.launches)
        from vllmlint.lint.releases import pinned_versions
        from vllmlint.knowledge.versions import fmt

        folder = pf.source.path.parent
        reqs = [s for s in project.others if s.kind == "requirements"]
        while reqs:
            pins = set()
            for s in reqs:
                if s.path.parent == folder:
                    pins |= pinned_versions(s.text)
            if len(pins) == 1:
                version = next(iter(pins))
                return [_Runs(version, f"pin vllm=={fmt(version)} in {folder.name or '.'}/requirements", pf.source)]
            if pins or folder.parent == folder:
                break
            folder = folder.parent
        return list(pf.launches)

    def _old_exports(self, module, gone_cat, cat):
        from vllmlint.knowledge.catalogue import load

        rem = gone_cat.module_gone(module, self.target)
        return load(rem.last).exports(module) if rem else None

    # -- python -m ---------------------------------------------------------------------------
    def _python_m(self, pf, cat, hist):
        source = pf.source
        t = self.target_str
        for m in PY_M_RE().finditer(source.text):
            line_start = source.text.rfind("\n", 0, m.start()) + 1
            if source.text[line_start:m.start()].lstrip().startswith("#"):
                continue                            # a comment
            fate = self._fate(m.group("mod"), cat, hist)
            if not fate:
                continue
            msg, new, _ = fate
            yield self.finding(source, (m.start("mod"), m.end("mod")),
                               f"`python -m`: {msg}" + (f": run `python -m {new}`" if new else ""),
                               detail=f"vLLM {t} says \"No module named {m.group('mod')}\".")


class _Runs:
    """A stand-in launch for a Python file that starts no vLLM but imports it: the release of
    the requirements pin beside it, with what the release gates (engine.gate_fixes_by_release,
    migrate.hold_back, releases.unbumped_pin) and migrate's report read of a launch. No launch
    reaches that pin, so `migrate` does not bump it (release_pin "requirements"): a fix that
    needs a newer release waits for the pin to be bumped by hand. (The gates read a launch's
    image, which this stand-in lacked: `check` and `migrate` stopped with an AttributeError.)"""
    image = None
    via = ""
    release_unnamed = ""
    release_pin = "requirements"
    release_linked = False
    kind = "other"
    count = 1

    def __init__(self, release, release_from, source):
        self.release, self.release_from = release, release_from
        self.file = source
        self.span = (0, 0)
        self.line = 1
        self.context = "python module"
        self.pins: list = []
        self.image_refs: list = []


def _v(text):
    from vllmlint.knowledge.versions import parse_version

    return parse_version(text) if text else None
