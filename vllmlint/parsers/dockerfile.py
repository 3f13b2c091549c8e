"""Dockerfile front end: ENV settings reach the stage's CMD/ENTRYPOINT, the launch.

A small line reader of our own rather than dockerfile-parse: that library reports lines, and a
byte-exact fix needs the column of every token inside continued instructions.
"""
from __future__ import annotations

import json
import re
from ..model.record import record

from .detect import detect, is_vllm_image, serve_kind
from ..model.launch import AppendSite, Arg, Edit, EnvEntry, Launch, ParsedFile, ParseError, SourceFile, remove_from_run
from . import embedded
from .embedded import scan_shell     # RUN/CMD shell: read through the door
from .detect import SHELLS
from .shell_lex import commands

DIRECTIVE_RE = re.compile(r"^#\s*escape\s*=\s*(\S)", re.I)


@record
class Instruction:
    keyword: str          # upper case
    start: int            # file offset of the keyword
    end: int              # file offset just past the instruction's last line break
    args: str             # the arguments, continuations joined
    omap: list[int]       # file offset of each character of args

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, keyword, start, end, args, omap):
        self.keyword = keyword
        self.start = start
        self.end = end
        self.args = args
        self.omap = omap

    def fspan(self, i: int, j: int) -> tuple[int, int]:
        return self.omap[i], self.omap[j - 1] + 1


_KEYWORD_RE = re.compile(r"(\S+)\s*")
HEREDOC_RE = re.compile(r"<<(-?)\s*([\"']?)([A-Za-z_][\w]*)\2")
# a JSON string of an exec form as far as its closing quote: a backslash escapes any one character
# (what json.loads then accepts is its business); one match instead of a loop per character
_JSON_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)


def instructions(text: str) -> list[Instruction]:
    escape = "\\"
    out: list[Instruction] = []
    lines = text.splitlines(keepends=True)
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line)
    for line in lines[:5]:
        m = DIRECTIVE_RE.match(line)
        if m:
            escape = m.group(1)
        if not line.startswith("#"):
            break
    i = 0
    while i < len(lines):
        line, base = lines[i], offsets[i]
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        lead = len(line) - len(line.lstrip())
        m = _KEYWORD_RE.match(line, lead)
        keyword = m.group(1).upper() if m else ""
        args_parts: list[str] = []      # each line's share of the arguments
        omap: list[int] = []
        start_col = m.end() if m else lead
        j, col = i, start_col
        while j < len(lines):
            body = lines[j].rstrip("\r\n")
            if j > i and body.lstrip().startswith("#"):      # comment lines inside a continuation
                j += 1
                col = 0
                continue
            content = body.rstrip()
            continued = content.endswith(escape) and j + 1 < len(lines)
            if continued:
                content = content[:-1]
            args_parts.append(content[col:])        # the line's text at once, each character's offset beside it
            omap.extend(range(offsets[j] + col, offsets[j] + len(content)))
            j += 1
            col = 0
            if not continued:
                break
        if keyword in ("RUN", "COPY", "ADD"):
            # BuildKit here-documents (`RUN python3 - <<'PY'`): their bodies are not instructions
            for hd in HEREDOC_RE.finditer("".join(args_parts)):
                delim, strip = hd.group(3), bool(hd.group(1))
                while j < len(lines):
                    body_line = lines[j].rstrip("\r\n")
                    j += 1
                    if (body_line.lstrip("\t") if strip else body_line) == delim:
                        break
        end = offsets[j - 1] + len(lines[j - 1]) if j - 1 < len(lines) else len(text)
        out.append(Instruction(keyword, base + lead, end, "".join(args_parts), omap))
        i = j
    return out


def exec_form(ins: Instruction, file: SourceFile) -> list[Arg] | None:
    """`["vllm", "serve"]` -> Args with spans; None when it is not a JSON array of strings."""
    s = ins.args
    i = len(s) - len(s.lstrip())
    if not s.startswith("[", i):
        return None
    i += 1
    out: list[Arg] = []
    while True:
        while i < len(s) and s[i] in " \t":
            i += 1
        if i < len(s) and s[i] == "]" and not out:
            return out if not s[i + 1:].strip() else None
        if i >= len(s) or s[i] != '"':
            return None
        m = _JSON_STRING_RE.match(s, i)       # to the closing quote, stepping over escapes
        if m is None:
            return None
        j = m.end() - 1
        try:
            value = json.loads(s[i:j + 1])
        except ValueError:
            return None
        out.append(Arg(value, file, ins.fspan(i, j + 1), dynamic="$" in value,
                       locate=lambda i=i, j=j: _json_string_offsets(s, i, j, ins.omap)))
        i = j + 1
        while i < len(s) and s[i] in " \t":
            i += 1
        if i < len(s) and s[i] == ",":
            i += 1
            continue
        if i < len(s) and s[i] == "]" and not s[i + 1:].strip():
            return out
        return None


def _json_string_offsets(s: str, i: int, j: int, omap: list[int]) -> list[int]:
    """File offset of each decoded character of the JSON string s[i:j+1] (an escape maps to
    its backslash)."""
    out, k = [], i + 1
    while k < j:
        out.append(omap[k])
        if s[k] == "\\":
            k += 6 if s[k + 1:k + 2] == "u" else 2
        else:
            k += 1
    return out


class _Stage:
    def __init__(self, image: str, name: str, env: list[EnvEntry]):
        self.image, self.name, self.env = image, name, env
        self.cmd: Instruction | None = None
        self.entrypoint: Instruction | None = None
        self.from_ins: Instruction | None = None


KEYWORDS = {"ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
            "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR"}


def _check_keywords(found: list[Instruction], source: SourceFile) -> None:
    """`docker build` refuses an unknown instruction: so do we, rather than guess. Skipped when a
    heredoc (`RUN <<EOF`) is present - its body lines are not instructions - and for lines that
    are not words (template tags such as `{% if %}`)."""
    if any("<<" in ins.args for ins in found):
        return
    for ins in found:
        if ins.keyword not in KEYWORDS and re.fullmatch(r"[A-Z]+", ins.keyword):
            raise ParseError(source.line_col(ins.start)[0],
                             f"Dockerfile syntax error: unknown instruction {ins.keyword}")


def parse_dockerfile(source: SourceFile) -> ParsedFile:
    pf = ParsedFile(source)
    stages: list[_Stage] = []
    by_name: dict[str, _Stage] = {}
    found = instructions(source.text)
    _check_keywords(found, source)
    for ins in found:
        if ins.keyword == "FROM":
            words = [w.value for c in commands(ins.args) for w in c.words]
            words = [w for w in words if not w.startswith("--platform")]
            image = words[0] if words else ""
            parent = by_name.get(image.lower())
            stage = _Stage(parent.image if parent else image, words[2] if len(words) > 2 else "",
                           list(parent.env) if parent else [])
            if parent:
                stage.cmd, stage.entrypoint = parent.cmd, parent.entrypoint
            stage.from_ins = ins
            stages.append(stage)
            if stage.name:
                by_name[stage.name.lower()] = stage
        elif not stages:
            continue
        elif ins.keyword == "ENV":
            entries = _env(ins, source)
            stages[-1].env.extend(entries)
            pf.env.extend(entries)
        elif ins.keyword == "CMD":
            stages[-1].cmd = ins
        elif ins.keyword == "ENTRYPOINT":
            stages[-1].entrypoint = ins
            stages[-1].cmd = None     # Docker resets an inherited CMD when ENTRYPOINT is set
    for n, stage in enumerate(stages):
        _stage_launch(pf, source, stage, n)
    return pf


def _env(ins: Instruction, file: SourceFile) -> list[EnvEntry]:
    words = [w for c in commands(ins.args) for w in c.assignments + c.words]
    whole = [Edit(file, _line_start(file.text, ins.start), ins.end, "")]
    if words and "=" not in words[0].value.split(" ")[0]:
        # legacy `ENV NAME value with spaces`: one variable per instruction
        name = words[0].value
        value = ins.args[len(ins.args) - len(ins.args.lstrip()) + len(name):].strip()
        return [EnvEntry(name, value, file, (ins.start, ins.omap[-1] + 1), "Dockerfile ENV", whole)]
    out = []
    spans = [(ins.omap[w.start], ins.omap[w.end - 1] + 1) for w in words]
    for i, w in enumerate(words):
        name, _, value = w.value.partition("=")
        if len(words) == 1:
            removal = whole
        else:
            span = remove_from_run(file.text, spans, i)
            removal = [Edit(file, span[0], span[1], "")] if span else None
        out.append(EnvEntry(name, None if w.dynamic else value, file, spans[i], "Dockerfile ENV", removal))
    return out


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _shell_c(pf: ParsedFile, file: SourceFile, argv: list[Arg], context: str, group: str, stage) -> bool:
    """`["/bin/bash", "-c", "exec vllm serve ..."]`: the launch is inside the script string."""
    if not argv or argv[0].value.rsplit("/", 1)[-1] not in SHELLS:
        return False
    for i, arg in enumerate(argv[1:-1], 1):
        if arg.value.startswith("-") and not arg.value.startswith("--") and "c" in arg.value[1:]:
            script = argv[i + 1]
            offs = script.offsets
            if offs is None:
                return False
            scan = scan_shell(file, script.value, list(offs), context=context, group=group,
                              inherited_env=stage.env, image=stage.image)
            pf.launches.extend(scan.launches)
            pf.env.extend(e for e in scan.env if e not in pf.env)
            return bool(scan.launches)
    return False


def _configures_engine(stage: _Stage) -> bool:
    return any(entry.name.startswith("VLLM_") for entry in stage.env)


def _stage_launch(pf: ParsedFile, file: SourceFile, stage: _Stage, n: int) -> None:
    context, group = f"stage {stage.name or n + 1} (FROM {stage.image})", f"{file.display}#stage{n}"
    ep, cmd = stage.entrypoint, stage.cmd
    ep_args = exec_form(ep, file) if ep else None
    cmd_args = exec_form(cmd, file) if cmd else None
    for shell_ins, shell_args in ((ep, ep_args), (cmd, cmd_args)):
        # shell-form CMD runs as the command when there is no ENTRYPOINT, or an empty `ENTRYPOINT []`
        if shell_ins is not None and shell_args is None and not (shell_ins is cmd and ep is not None and ep_args != []):
            scan = scan_shell(file, shell_ins.args, shell_ins.omap, context=context, group=group,
                              inherited_env=stage.env, image=stage.image)
            pf.launches.extend(scan.launches)
            return
    argv = (ep_args or []) + (cmd_args if cmd_args is not None and (ep is None or ep_args is not None) else [])
    last_ins = cmd if cmd_args else ep
    last_list = cmd_args if cmd_args else ep_args
    site = None
    if last_list:
        site = AppendSite(file, last_list[-1].span[1], ', "{}"') if last_list[-1].span else None
    if _shell_c(pf, file, argv, context, group, stage):
        return
    det = detect([a.value for a in argv])
    anchor = (last_ins.start, last_ins.start) if last_ins else (stage.from_ins.start, stage.from_ins.start)
    if det:
        pf.launches.append(Launch(det.kind, file, argv[det.start].span or anchor, argv[det.start:],
                                  det.options_start - det.start, context, group, list(stage.env),
                                  site, None, stage.image, program=det.program))
    elif ep is None and is_vllm_image(stage.image) and (cmd is not None or _configures_engine(stage)):
        # A stage with neither CMD nor ENTRYPOINT only builds an image: whatever runs it (a pod
        # spec, compose) gives the arguments, and that is the launch. It is one here only when
        # the stage sets vLLM's own environment, which configures the engine the image runs.
        launch = Launch(serve_kind([a.value for a in argv]), file, anchor, [Arg("vllm"), Arg("serve")] + argv,
                        2, context, group, list(stage.env), site, None, stage.image, program="image entrypoint")
        if site is None:
            launch.not_editable = "the arguments come at run time (no CMD in this Dockerfile)"
        pf.launches.append(launch)


def _embedded(view: SourceFile, start: int, end: int, inherited) -> ParsedFile:
    """dockerfile written inside another file (a heredoc, a ConfigMap entry): read in place (parsers/embedded.py)."""
    view.kind = "dockerfile"
    return parse_dockerfile(view)


embedded.register("dockerfile", _embedded)
