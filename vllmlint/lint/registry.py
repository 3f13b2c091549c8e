"""The rule catalogue: every module in `vllmlint.rules` (the repo's top-level rules/ folder)
defines one Rule subclass. Importing them registers them; nothing else lists rules."""
from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Iterable, Iterator

from ..model.launch import Finding, Fix, SourceFile, Span
from ..knowledge.versions import fmt, parse_version

DOC_SECTIONS = ("What it does", "Why", "Example", "Fix safety")
SEVERITIES = ("error", "warning", "info")
_REGISTRY: dict[str, type["Rule"]] = {}


class Rule:
    """Base of every rule. Subclasses set the metadata and implement `check`.

    The class docstring is the rule's documentation, in Markdown, with the sections
    `## What it does`, `## Why`, `## Example` and `## Fix safety`.
    """

    code: str = ""
    name: str = ""
    severity: str = "error"
    min_version: str | None = None     # first vLLM release the rule applies to
    max_version: str | None = None     # last vLLM release it applies to
    fix: str = "none"                  # none | safe | unsafe | sometimes
    summary: str = ""
    # True: the rule's findings on a launch depend only on the launches of that launch's file as
    # its parser made them (argv, spans, image): not on linking (ConfigMap env), releases, the
    # deployment graph or other files. Such a rule runs in the worker processes that parse a big
    # tree (lint/project.py), so findings travel back instead of every launch being re-read here.
    per_launch: bool = False
    # True: the rule's fixes edit code that runs (imports), never a command held as a string, so
    # they are applied in Python test code too (lint.engine.hold_test_data holds the others)
    fixes_code: bool = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.code:
            if cls.code in _REGISTRY and _REGISTRY[cls.code] is not cls:
                raise RuntimeError(f"duplicate rule code {cls.code}")
            _REGISTRY[cls.code] = cls

    def __init__(self, target: tuple[int, int, int], options: dict | None = None):
        self.target = target
        self.options = options or {}     # run options some rules read (--topology, --model-config, ...)

    @classmethod
    def applies_to(cls, target: tuple[int, int, int]) -> bool:
        if cls.min_version and target < parse_version(cls.min_version):
            return False
        if cls.max_version and target > parse_version(cls.max_version):
            return False
        return True

    @classmethod
    def versions(cls) -> str:
        low = cls.min_version or "any"
        return f">= {low}" if not cls.max_version else f"{low} - {cls.max_version}"

    @classmethod
    def doc(cls) -> str:
        return _dedent(cls.__doc__ or "")

    @classmethod
    def doc_sections(cls) -> dict[str, str]:
        parts = re.split(r"^## +(.+?)\s*$", cls.doc(), flags=re.M)
        return {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}

    def finding(self, file: SourceFile, span: Span, message: str, fix: Fix | None = None,
                severity: str | None = None, launches: list | None = None,
                min_release: tuple[int, int, int] | None = None, detail: str = "") -> Finding:
        """`message`: one line, the what and the what-to-do (about 120 characters); `detail`: the
        why and the evidence (file:line in vLLM, numbers), shown in JSON, SARIF, the editor and
        with `--show-details`. `launches`: the launches the fix changes; `min_release`: the first
        release on which the fixed config is right (engine.gate_fixes_by_release leaves the fix to
        `migrate` for a launch that runs an older release today)."""
        if fix is not None and launches:
            fix.launches = list(launches)
            fix.min_release = min_release
        return Finding(self.code, self.name, severity or self.severity, file, span, message,
                       fix, fix is not None, detail)

    def check(self, project) -> Iterable[Finding]:   # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def target_str(self) -> str:
        """`0.30.0`; for an added release in use (`vllmlint catalogue add`), its own name."""
        from ..knowledge.catalogue import active

        added = active()
        key = (tuple(self.target), added)
        shown = _TARGET_NAMES.get(key)
        if shown is None:
            shown = fmt(self.target)
            if added is not None and key[0] == added.vtuple and added.name != shown:
                shown = added.name
            _TARGET_NAMES[key] = shown
        return shown


# (target, the added release in use) -> its name: asked for every message a rule writes
_TARGET_NAMES: dict = {}


def _dedent(doc: str) -> str:
    lines = doc.expandtabs().splitlines()
    if not lines:
        return ""
    indents = [len(l) - len(l.lstrip()) for l in lines[1:] if l.strip()]
    cut = min(indents) if indents else 0
    return "\n".join([lines[0].strip()] + [l[cut:] for l in lines[1:]]).strip() + "\n"


def load_rules() -> dict[str, type[Rule]]:
    package = importlib.import_module("vllmlint.rules")
    for name in module_names(tuple(package.__path__)):
        if not name.startswith("_"):
            importlib.import_module(f"vllmlint.rules.{name}")
    return dict(sorted(_REGISTRY.items()))


@functools.cache
def module_names(folders: tuple[str, ...]) -> tuple[str, ...]:
    """The modules and packages in `folders`, as pkgutil.iter_modules names them (without
    importing pkgutil, which imports typing: 2 ms of a one-file run's start-up)."""
    from importlib.machinery import all_suffixes

    suffixes = sorted(all_suffixes(), key=len, reverse=True)     # `.cpython-311-x86_64-linux-gnu.so` before `.so`

    def module_name(filename: str) -> str | None:
        return next((filename[:-len(s)] for s in suffixes if filename.endswith(s)), None)

    found: list[str] = []
    for folder in folders:
        try:
            filenames = sorted(os.listdir(folder))      # sorted: a package before a same-named module
        except OSError:
            continue
        for filename in filenames:
            name = module_name(filename)
            if name == "__init__" or name in found:
                continue
            path = os.path.join(folder, filename)
            if not name and os.path.isdir(path) and "." not in filename:
                try:
                    if not any(module_name(f) == "__init__" for f in os.listdir(path)):
                        continue        # a folder, not a package
                except OSError:
                    continue
                name = filename
            if name and "." not in name and name not in found:
                found.append(name)
    return tuple(found)


def selected_rules(target, select: Iterable[str] = (), ignore: Iterable[str] = (),
                   options: dict | None = None) -> Iterator[Rule]:
    select, ignore = [s.upper() for s in select], [s.upper() for s in ignore]
    for code, cls in load_rules().items():
        if select and not any(code.startswith(s) for s in select):
            continue
        if any(code.startswith(s) for s in ignore):
            continue
        if cls.applies_to(target):
            yield cls(target, options)
