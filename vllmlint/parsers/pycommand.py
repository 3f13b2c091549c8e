"""Python front end, string commands: strings given to a shell (`os.system`,
`subprocess.*(..., shell=True)`) or naming a vLLM launch, read as shell with run-time parts
as placeholders, and spans mapped back into the Python literal.
"""
from __future__ import annotations

import re

from ..model.launch import AppendSite, Arg, Edit, EnvEntry, Launch, SourceFile
from .embedded import scan_shell     # read through the door
from .pysource import Lit, PLACEHOLDER_RE, SHELL_FUNCS, SUBPROCESS_FUNCS, Scope, StringCandidate, _call_args


class StringCommands:
    """shell command strings (mixed into pythonfile._Parser)."""

    def lookup_string(self, key: str):
        return self._in_scope("strings", key)

    def shell_call(self, node) -> None:
        func = self.code(node.func).replace(" ", "")
        shell = func in SHELL_FUNCS
        args = _call_args(node)
        if not shell and (func.startswith("subprocess.") or func in SUBPROCESS_FUNCS) \
                and func.rsplit(".", 1)[-1] in SUBPROCESS_FUNCS:
            shell = any(a.keyword == "shell" and self.code(a.value) == "True" for a in args)
        if not shell:
            return
        command = next((a.value for a in args if a.keyword is None and not a.star), None)
        if command is None:
            command = next((a.value for a in args if a.keyword is not None
                            and a.keyword in ("args", "cmd", "command")), None)
        if command is None:
            return
        key = self.key_of(command)
        if key is not None:
            scope: Scope | None = self.scope
            while scope is not None and key not in scope.strings:
                scope = None if scope is self.module_scope else self.module_scope
            if scope is not None:
                target = scope.strings[key]
                self.forced.add(id(target))
                if id(target) in self.strings:
                    self.strings[id(target)].forced = True
            return
        self.forced.add(id(command))

    def shell_launches(self, cand: StringCandidate) -> list[Launch]:
        """Launches of a shell command string; its own exports and prefixes reach only them."""
        pieces = self.pieces(cand.node)
        if pieces is None:
            self.pf.notes.append(f"line {self.source.line_col(self.span(cand.node)[0])[0]}: a shell "
                                 "command string vllmlint could not decode was skipped")
            return []
        chars: list[str] = []
        omap: list[int] = []
        ends: dict[int, int] = {}                  # start of a multi-character source unit -> its end
        restore: dict[str, str] = {}
        for p in pieces:
            if isinstance(p, Lit):
                for c, s, e in p.chars:
                    chars.append(c)
                    omap.append(s)
                    if e - s > 1:
                        ends[s] = e
            else:
                token = "${__vlpy%d__}" % len(self.placeholders)
                self.placeholders.append(p.display)
                restore[token] = p.display
                s, e = p.span
                chars.extend(token)
                omap.extend([s] * (len(token) - 1) + [e - 1])
        text = "".join(chars)
        bodies = self.literal_bodies(cand.node)
        context = self.context(cand.scope)
        scan = scan_shell(self.source, text, omap, context=context, group=f"{self.source.display}#{context}",
                          inherited_env=list(self.env))
        fixer = _SpanFixer(self.source, ends, bodies, restore)
        for entry in scan.env:
            fixer.entry(entry)
        own_env = {id(e) for e in self.env}
        for launch in scan.launches:
            for arg in launch.argv:
                fixer.arg(arg)
            for entry in launch.env:
                if id(entry) not in own_env:
                    fixer.entry(entry)
            if launch.span:
                launch.span = (launch.span[0], fixer.end(launch.span[1]))
            site = launch.append_site
            if site is not None:
                offset = fixer.end(site.offset)
                if not fixer.inside(offset, offset):
                    launch.append_site = None
                    launch.not_editable = launch.not_editable or \
                        "the command string is built from Python expressions"
                else:
                    launch.append_site = AppendSite(self.source, offset, site.template)
        launches = scan.launches
        if not cand.forced:
            # `VLLM = "vllm serve"`: a string that only names the command is a fragment
            launches = [l for l in launches if len(l.argv) > l.options_start]
            if not launches:
                return []
        self.pf.env.extend(scan.env)
        return launches




class _SpanFixer:
    """Brings spans that scan_shell computed back onto whole source characters (an escape such
    as \\" is one character of the command) and drops those that leave a string literal."""

    def __init__(self, source: SourceFile, ends: dict[int, int], bodies, restore: dict[str, str]):
        self.source, self.ends, self.bodies, self.restore = source, ends, bodies, restore
        self.fixed: set[int] = set()

    def end(self, offset: int) -> int:
        return self.ends.get(offset - 1, offset)

    def inside(self, s: int, e: int) -> bool:
        return any(bs <= s and e <= be for bs, be in self.bodies)

    def value(self, value: str) -> tuple[str, bool]:
        found = False

        def sub(m: re.Match) -> str:
            nonlocal found
            found = True
            return self.restore.get(m.group(0), m.group(0))
        return PLACEHOLDER_RE.sub(sub, value), found

    def span(self, span):
        if span is None:
            return None
        s, e = span[0], self.end(span[1])
        return (s, e) if self.inside(s, e) else None

    def arg(self, arg: Arg) -> None:
        if id(arg) in self.fixed:
            return
        self.fixed.add(id(arg))
        arg.value, found = self.value(arg.value)
        arg.dynamic = arg.dynamic or found
        arg.span = self.span(arg.span)

    def entry(self, entry: EnvEntry) -> None:
        if id(entry) in self.fixed:
            return
        self.fixed.add(id(entry))
        if entry.value is not None:
            value, found = self.value(entry.value)
            entry.value = None if found else value
        entry.span = (entry.span[0], self.end(entry.span[1]))
        if entry.removal is not None:
            edits = [Edit(ed.file, ed.start, self.end(ed.end), ed.text) for ed in entry.removal]
            entry.removal = edits if all(self.inside(ed.start, ed.end) for ed in edits) else None


