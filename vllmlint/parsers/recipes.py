"""Makefile and Justfile recipes: their command lines are shell, read with file offsets.

A recipe's lines are handed to the shell scanner as one script whose characters map back into
the file, so a finding points at the recipe line and a fix edits the Makefile itself.

- Makefile: a recipe line starts with a tab (a line ending in `\\` carries on); the `@`, `-`,
  `+` prefixes are dropped, `$$` is the shell's `$` and `$(VAR)` a make variable (read as
  dynamic). `export NAME := value` / `export NAME = value` reaches every recipe.
- Justfile: a recipe is a `name args: deps` line followed by indented lines; `@`/`-` prefixes are
  dropped and `{{expr}}` is an interpolation (read as dynamic). `export NAME := "value"` reaches
  every recipe.
"""
from __future__ import annotations

import re

from ..model.launch import Edit, EnvEntry, ParsedFile, SourceFile
from .embedded import MappedText, lines_with_offsets, scan_shell     # recipe lines are shell: read through the door

MAKE_EXPORT_RE = re.compile(r"^export[ \t]+([A-Za-z_]\w*)[ \t]*(?:[:+?!]{0,2}=)[ \t]*(.*?)[ \t]*$")
MAKE_RULE_RE = re.compile(r"^([^\s:=#][^:=#]*?)\s*::?(?!=)")
JUST_EXPORT_RE = re.compile(r"^export[ \t]+([A-Za-z_][\w-]*)[ \t]*:=[ \t]*(.*?)[ \t]*$")
JUST_RECIPE_RE = re.compile(r"^@?([A-Za-z_][\w-]*)(?:[ \t][^:]*)?:(?!=)")
JUST_INTERP_RE = re.compile(r"\{\{(?!\{)(.*?)\}\}")


def _export(source: SourceFile, m: re.Match, start: int, line_end: int, origin: str) -> EnvEntry:
    name, value = m.group(1), m.group(2)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    dynamic = "$" in value or "{{" in value or "`" in value
    return EnvEntry(name, None if dynamic else value, source, (start, start + len(m.group(0))), origin,
                    [Edit(source, start, line_end, "")])


def parse_makefile(source: SourceFile) -> ParsedFile:
    pf = ParsedFile(source)
    exported: list[EnvEntry] = []
    recipes: list[tuple[str, MappedText]] = []
    current: MappedText | None = None
    target = "?"
    continuing = False
    in_define = False
    for start, line, end in lines_with_offsets(source.text):
        if in_define:
            in_define = not re.match(r"^\s*endef\b", line)
            continue
        if continuing or (line.startswith("\t") and current is not None):
            body_at = start
            if line.startswith("\t"):
                body_at += 1
            if not continuing:
                # a new recipe line: drop `@`, `-`, `+` and the blanks around them
                while body_at < end and source.text[body_at] in "@-+ \t":
                    body_at += 1
            assert current is not None
            i = body_at
            stop = start + len(line)
            while i < stop:
                if source.text.startswith("$$", i):
                    current.add("$", i)
                    i += 2
                else:
                    current.add(source.text[i], i)
                    i += 1
            current.put("\n", stop)
            continuing = line.endswith("\\") and not line.endswith("\\\\")
            continue
        continuing = False
        if re.match(r"^\s*define\b", line):
            in_define = True
            continue
        if _take_export(MAKE_EXPORT_RE.match(line), source, pf, exported, start, end, "Makefile export"):
            continue
        m = MAKE_RULE_RE.match(line)
        if m and not line.startswith((" ", "\t")):
            target = m.group(1).strip()
            current = MappedText()
            recipes.append((target, current))
            rest = line[m.end():]
            if ";" in rest:         # `target: deps ; command`
                semi = start + m.end() + rest.index(";") + 1
                current.add(source.text[semi:start + len(line)], semi)
                current.put("\n", start + len(line))
        elif line.strip() and not line.startswith(("\t", "#")):
            current = None          # a variable assignment, include, conditional...
    _scan_recipes(source, pf, recipes, exported)
    return pf


def parse_justfile(source: SourceFile) -> ParsedFile:
    pf = ParsedFile(source)
    exported: list[EnvEntry] = []
    recipes: list[tuple[str, MappedText]] = []
    current: MappedText | None = None
    indent: str | None = None
    continuing = False
    for start, line, end in lines_with_offsets(source.text):
        if current is not None and (line[:1] in (" ", "\t") or continuing or not line.strip()):
            if not line.strip():
                current.put("\n", start + len(line))
                continuing = False
                continue
            if indent is None:
                indent = line[:len(line) - len(line.lstrip(" \t"))]
            body_at = start + (len(indent) if line.startswith(indent) else len(line) - len(line.lstrip(" \t")))
            if not continuing:
                while body_at < start + len(line) and source.text[body_at] in "@-":
                    body_at += 1
            _add_just(current, source.text, body_at, start + len(line))
            current.put("\n", start + len(line))
            continuing = line.endswith("\\")
            continue
        current, indent, continuing = None, None, False
        if _take_export(JUST_EXPORT_RE.match(line), source, pf, exported, start, end, "Justfile export"):
            continue
        m = JUST_RECIPE_RE.match(line)
        if m and not line.startswith(("set ", "alias ", "import ", "mod ")):
            current = MappedText()
            recipes.append((m.group(1), current))
    _scan_recipes(source, pf, recipes, exported)
    return pf


def _take_export(m, source: SourceFile, pf: ParsedFile, exported: list[EnvEntry],
                 start: int, end: int, what: str) -> bool:
    """An `export NAME = value` line (make or just): it reaches every recipe's launches."""
    if not m:
        return False
    entry = _export(source, m, start, end, what)
    exported.append(entry)
    pf.env.append(entry)
    return True


def _add_just(b: MappedText, text: str, i: int, stop: int) -> None:
    while i < stop:
        m = JUST_INTERP_RE.match(text, i, stop)
        if m:
            # `{{model}}` is filled in by just: read it as an unknown value, `${J_model}`
            name = re.sub(r"\W+", "_", m.group(1).strip()) or "X"
            b.stretch("${J_" + name + "}", m.start(), m.end())
            i = m.end()
        else:
            b.add(text[i], i)
            i += 1


def _scan_recipes(source: SourceFile, pf: ParsedFile, recipes, exported: list[EnvEntry]) -> None:
    for name, builder in recipes:
        if builder.empty():
            continue
        scan = scan_shell(source, builder.text, builder.omap, context=f"recipe {name}",
                          group=f"{source.display}:{name}", inherited_env=exported)
        pf.launches.extend(scan.launches)
        pf.env.extend(scan.env)
