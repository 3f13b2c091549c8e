"""Templates of YAML, shell and Python: Terraform (`*.tftpl`, `*.tpl`), Jinja2 (`*.j2`,
`*.jinja`, `*.jinja2`), and brace-format templates (a `*.tpl` / `*.template` written for
Python's `str.format`: `--model {model}`, `{{` and `}}` for literal braces; found on
Tandemn-Labs/tandemn-tuna, whose `vllm_server.py.tpl` and `vllm.yaml.tpl` were reported as
files that do not parse).

A template is read as the file it renders, with every branch kept (as Helm charts are read before
rendering, parsers/helm.py): directives (`%{ for x in xs ~}`, `%{ endif }`, `{% if %}`,
`{# comment #}`) become blanks, and each interpolation (`${var.model}`, `{{ model }}`) becomes a
same-length stand-in the reader of that kind accepts (a shell `${___}`, a Python name `_____`, an
`x` run in YAML). After reading, every argv token or env value that overlaps an interpolation gets
its written text back and is known only at run time: `--model=${model}` is dynamic, while the
literal flags around it are checked and fixed in place (every offset is the template's own).
Terraform's escapes `$${` and `%%{` are literal text, not interpolations.

The kind inside comes from the name before the template suffix (`start.sh.tftpl`, `app.py.j2`,
`values.yaml.jinja`), else from the first bytes (lint/discovery.py).
"""
from __future__ import annotations

import re

from . import embedded
from ..model.launch import ParsedFile, SourceFile

TEMPLATE_SUFFIXES = {".tftpl": "terraform", ".tpl": "terraform", ".j2": "jinja", ".jinja": "jinja",
                     ".jinja2": "jinja"}
INNER_KINDS = {".yaml": "yaml", ".yml": "yaml", ".json": "yaml", ".sh": "shell", ".bash": "shell", ".py": "python"}


def engine_of(name: str) -> str | None:
    """"terraform" or "jinja" for a template's file name, else None."""
    lower = name.lower()
    for suffix, engine in TEMPLATE_SUFFIXES.items():
        if lower.endswith(suffix):
            return engine
    return None


# a str.format replacement field: a name, then attributes or indexes, a conversion, a plain spec
_FORMAT_FIELD_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[[^\[\]{}]*\])*(?:![rsa])?(?::[^{}]*)?")


def format_spans(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]] | None:
    """(escapes `{{` / `}}`, fields `{name}`) of a text written for `str.format`, or None when it
    is not one: a lone `}`, a `{` that opens no field (a JSON or YAML flow mapping), a nested
    spec, or no field at all. Python's own format parser gives no offsets, hence this scan."""
    escapes: list[tuple[int, int]] = []
    fields: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while True:
        a, b = text.find("{", i), text.find("}", i)
        if a < 0 and b < 0:
            break
        if b >= 0 and (a < 0 or b < a):         # a `}` outside a field: only `}}` is allowed
            if not text.startswith("}}", b):
                return None
            escapes.append((b, b + 2))
            i = b + 2
            continue
        if text.startswith("{{", a):
            escapes.append((a, a + 2))
            i = a + 2
            continue
        end = text.find("}", a)
        if end < 0 or not _FORMAT_FIELD_RE.fullmatch(text, a + 1, end):
            return None
        fields.append((a, end + 1))
        i = end + 1
    return (escapes, fields) if fields and i <= n else None


def template_engine(name: str, text: str) -> str | None:
    """The engine a template file is written for: by its name, except that a `.tpl` /
    `.template` holding no Terraform syntax but `str.format` fields is a brace-format one."""
    engine = engine_of(name)
    if name.lower().endswith((".tpl", ".template")) and not _TERRAFORM_SYNTAX_RE.search(text) \
            and format_spans(text) is not None:
        return "format"
    return engine


# Terraform's `${x}` / `%{ if }`; `${{HOME}}` is a format template's `$` before an escaped brace
_TERRAFORM_SYNTAX_RE = re.compile(r"[$%]\{(?!\{)")


def inner_kind(name: str) -> str | None:
    """The kind a template renders, from the name before its suffix: `start.sh.tftpl` -> shell."""
    lower = name.lower()
    stem = lower[:lower.rfind(".")] if "." in lower else lower
    for suffix, kind in INNER_KINDS.items():
        if stem.endswith(suffix):
            return kind
    return None


def _close(text: str, i: int, opener: str, closer: str) -> int:
    """End (exclusive) of the construct opened at text[i] by `opener`, its braces balanced and
    its quoted strings skipped; len(text) when it never closes."""
    depth = 0
    j = i + len(opener)
    while j < len(text):
        if text.startswith(closer, j) and depth == 0:
            return j + len(closer)
        c = text[j]
        if c == '"':
            j += 1
            while j < len(text) and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        j += 1
    return len(text)


TERRAFORM_RE = re.compile(r"(?<![$%])[$%]\{")
JINJA_RE = re.compile(r"\{[{%#]")


def spans(text: str, engine: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(directives, interpolations) of a template: character spans. A brace-format template's
    escapes are its directives (each stands for one brace)."""
    directives: list[tuple[int, int]] = []
    interpolations: list[tuple[int, int]] = []
    if engine == "format":
        return format_spans(text) or ([], [])
    if engine == "terraform":
        for m in TERRAFORM_RE.finditer(text):
            if directives and m.start() < directives[-1][1] or interpolations and m.start() < interpolations[-1][1]:
                continue
            end = _close(text, m.start(), m.group(), "}")
            (directives if m.group() == "%{" else interpolations).append((m.start(), end))
    else:
        i = 0
        while True:
            m = JINJA_RE.search(text, i)
            if m is None:
                break
            closer = {"{{": "}}", "{%": "%}", "{#": "#}"}[m.group()]
            end = text.find(closer, m.end())
            end = len(text) if end < 0 else end + 2
            (interpolations if m.group() == "{{" else directives).append((m.start(), end))
            i = end
    return directives, interpolations


def _stand_in(text: str, s: int, e: int, kind: str) -> str:
    n = e - s
    if kind == "python" and _alone(text, s, e):
        # `{experimental_options_line}` alone in a call's arguments: a fragment of code, gone
        return re.sub(r"[^\r\n]", " ", text[s:e])
    if kind == "shell":
        return "${" + "_" * (n - 3) + "}" if n >= 4 else "_" * n      # a parameter expansion
    if kind == "python":
        return "_" * n                                                # a name
    if _alone(text, s, e):                     # `${yamlencode(var.args)}` on its own line: gone
        return re.sub(r"[^\r\n]", " ", text[s:e])
    # `$___`: a plain scalar anywhere (no flow indicator), and a run-time expansion to the shell
    # reader of a script written in a YAML string (`runcmd: [docker run ... IMAGE:${tag}]`)
    return "$" + "".join("_" if c not in "\r\n" else c for c in text[s + 1:e])


def _alone(text: str, s: int, e: int) -> bool:
    line_start = text.rfind("\n", 0, s) + 1
    line_end = text.find("\n", e)
    return not text[line_start:s].strip() and not text[e:line_end if line_end >= 0 else len(text)].strip()


def mask(text: str, engine: str, kind: str) -> tuple[str, list[tuple[int, int]]]:
    """The template as its kind's reader accepts it (same length), and its interpolations' spans."""
    directives, interpolations = spans(text, engine)
    out = list(text)
    if engine == "format":
        # `{{` renders `{`: a blank and the brace (`}}`: the brace, a blank); a token or value
        # that holds one is known only as written (its span is returned with the fields)
        for s, _ in directives:
            if text[s] == "}":
                out[s:s + 2] = ["}", " "]
            elif kind == "shell" and s and text[s - 1] == "$":      # `${{HOME}}`: an expansion still
                out[s:s + 2] = ["{", "_"]
            else:
                out[s:s + 2] = [" ", "{"]
        for s, e in interpolations:
            out[s:e] = _stand_in(text, s, e, kind)
        return "".join(out), sorted(directives + interpolations)
    for s, e in directives:
        for i in range(s, e):
            if out[i] not in "\r\n":
                out[i] = " "
    for s, e in interpolations:
        out[s:e] = _stand_in(text, s, e, kind)
    return "".join(out), sorted(directives + interpolations)


def written(value: str, span, masked: str, text: str, template_spans) -> str:
    for s, e in template_spans:
        if (span is None or s < span[1] and span[0] < e) and masked[s:e] in value and masked[s:e].strip():
            value = value.replace(masked[s:e], text[s:e], 1)
    return value


def restore_launches(launches, masked: str, text: str, template_spans) -> None:
    """A launch's image and `via` (read from a script inside a template) as written."""
    for launch in launches:
        if launch.image and "$_" in launch.image:
            launch.image = written(launch.image, None, masked, text, template_spans)
        if "$_" in launch.via:
            launch.via = written(launch.via, None, masked, text, template_spans)


def unmask(parsed: ParsedFile, file: SourceFile, template_spans: list[tuple[int, int]], masked: str) -> None:
    """Tokens and env values that overlap a template part: as written, known at run time."""
    if not template_spans:
        return
    import bisect
    starts = [s for s, _ in template_spans]

    def inside(o: int) -> bool:
        k = bisect.bisect_right(starts, o) - 1
        return k >= 0 and o < template_spans[k][1]

    def overlaps(span) -> bool:
        if not span:
            return False
        k = bisect.bisect_right(starts, span[1] - 1) - 1
        return k >= 0 and template_spans[k][1] > span[0]

    text = file.text
    for launch in parsed.launches:
        for arg in launch.argv:
            if arg.file is file and overlaps(arg.span):
                offs = arg.offsets
                if offs is not None:
                    arg.value = "".join(text[o] if inside(o) else ch for ch, o in zip(arg.value, offs))
                else:           # no offsets per character: put each stand-in's written text back
                    arg.value = written(arg.value, arg.span, masked, text, template_spans)
                arg.dynamic = True
        for entry in launch.env:
            if entry.file is file and entry.value is not None and overlaps(entry.span):
                entry.value = None
    for entry in parsed.env:
        if entry.file is file and entry.value is not None and overlaps(entry.span):
            entry.value = None


def read_template(source: SourceFile, kind: str) -> ParsedFile:
    """A shell or Python template read as the file it renders (YAML templates: yamlfile.py)."""
    engine = template_engine(source.path.name, source.text) or "jinja"
    masked, template_spans = mask(source.text, engine, kind)
    parsed = embedded.read_view(source, kind, masked)
    if parsed is None:
        return ParsedFile(source, notes=[f"read as a {engine} template of {kind}: it does not parse as {kind}"])
    unmask(parsed, source, template_spans, masked)
    if template_spans:
        parsed.notes.append(f"{len(template_spans)} {engine} template part(s) read as placeholders")
    return parsed
