"""Files a shell script writes with a here-document, read as what they are.

`kubectl apply -f - <<EOF` and `cat <<EOF > deploy.yaml` carry Kubernetes YAML, `cat > Dockerfile
<<EOF` a Dockerfile, `cat > app.def <<EOF` an Apptainer definition, `cat > run_vllm.sh <<EOF` a
launch script (or a Python launcher, `.py`), and `bash -s <<EOF`, `python3 - <<EOF` and
`ssh host <<EOF` a script run now: the body is read by the
reader of its kind, on the script's own text with everything but the body blanked (so every
offset is the script's), and what it finds is handed back bound to the script, so findings and
fixes land in the script.

The kind comes from the program that reads the body (`kubectl|oc apply|create|replace -f -`),
else the name of the file written (`> x.yaml`, `tee x.yaml`, `> run.sh`, `> app.py`), else the
body's first line (a `#!` of sh/bash or python, `apiVersion:`/`kind:`, `FROM`, `Bootstrap:`).
"""
from __future__ import annotations

import re

from . import embedded
from .embedded import Inherited, Shift
from ..model.launch import ParsedFile, SourceFile
from ..model.lazyre import lazy_re

YAML_NAME_RE = lazy_re(r"\.(?:ya?ml)$", re.I)
DOCKERFILE_NAME_RE = lazy_re(r"(?:^|/)(?:Dockerfile|Containerfile)[^/]*$|\.(?:docker|container)file$", re.I)
DEF_NAME_RE = lazy_re(r"\.def$", re.I)
SHELL_NAME_RE = lazy_re(r"\.(?:sh|bash)$", re.I)
PYTHON_NAME_RE = lazy_re(r"\.py$", re.I)
# a script's own first line: `#!/usr/bin/env bash`, `#!/bin/sh -e`, `#!/usr/bin/python3`
SHELL_SHEBANG_RE = lazy_re(r"#!\s*\S*/(?:env\s+)?(?:ba|da|k)?sh\b")
PYTHON_SHEBANG_RE = lazy_re(r"#!\s*\S*/(?:env\s+)?python[\d.]*\b")
APPTAINER_SECTIONS = ("%runscript", "%startscript")


SHELLS = frozenset({"bash", "sh", "dash", "ksh"})
PYTHON_RE = lazy_re(r"python[\d.]*$")
# ssh's options that take an argument (ssh(1)): the first other word is the host
SSH_OPTIONS_WITH_ARG = frozenset("bcDEeFIiJLlmOopQRSWw")


def _runs_stdin(base: str, words: list[str]) -> str | None:
    """"shell" or "python" when the command runs its standard input as a program now: `bash`,
    `bash -s`, `sh -e`, `python3 -`, `python3`, `ssh host`, `ssh -i key host bash -s`."""
    rest = words[1:]
    if base in SHELLS and all(w.startswith("-") for w in rest):
        return "shell"
    if PYTHON_RE().match(base) and all(w.startswith("-") for w in rest):
        return "python"
    if base == "ssh":
        i = 0
        while i < len(rest) and rest[i].startswith("-"):
            flag = rest[i]
            i += 2 if len(flag) == 2 and flag[1] in SSH_OPTIONS_WITH_ARG else 1
        remote = rest[i + 1:]
        if i < len(rest) and (not remote or remote[0].rsplit("/", 1)[-1] in SHELLS
                              and all(w.startswith("-") for w in remote[1:])):
            return "shell"
    return None


def written_to(cmd) -> list[str]:
    """The files a command's output goes to (`> x`, `>> x`, `>| x`): what a heredoc it is given
    becomes, for body_kind."""
    return [r.target.value for r in cmd.redirects if r.op in (">", ">>", ">|") and r.target]


def body_kind(head: str, words: list[str], targets: list[str], body: str) -> str | None:
    """"yaml", "dockerfile", "apptainer", "shell", "python" or None for a heredoc given to
    `words` (the command's words, program first) whose output goes to `targets`."""
    base = head.rsplit("/", 1)[-1]
    if not targets:
        runs = _runs_stdin(base, words)
        if runs:
            return runs             # the body is a script run now (`bash -s <<EOF`, `ssh host <<EOF`)
    if base in ("kubectl", "oc") and any(w in ("apply", "create", "replace") for w in words[1:3]):
        if "-" in words or "--filename=-" in words or "-f-" in words:
            return "yaml"
    names = [t for t in targets if t]
    if base == "tee":
        names += [w for w in words[1:] if not w.startswith("-")]
    for name in names:
        if YAML_NAME_RE().search(name):
            return "yaml"
        if DOCKERFILE_NAME_RE().search(name):
            return "dockerfile"
        if DEF_NAME_RE().search(name):
            return "apptainer"
        if SHELL_NAME_RE().search(name):
            return "shell"          # a launch script the script writes (`cat > run_vllm.sh <<EOF`)
        if PYTHON_NAME_RE().search(name):
            return "python"
    if base not in ("cat", "tee") or not names:
        return None
    shebang = body.lstrip("\n").split("\n", 1)[0]
    if SHELL_SHEBANG_RE().match(shebang):
        return "shell"
    if PYTHON_SHEBANG_RE().match(shebang):
        return "python"
    first = next((l.strip() for l in body.splitlines() if l.strip() and not l.lstrip().startswith("#")), "")
    if re.match(r"(?:apiVersion|kind)\s*:", first):
        return "yaml"
    if re.match(r"(?i)FROM\s+\S", first):
        return "dockerfile"
    if re.match(r"(?i)Bootstrap\s*:", first):
        return "apptainer"
    return None


def read_body(file: SourceFile, kind: str, start: int, end: int, expands: bool = False) -> ParsedFile | None:
    """Parse file.text[start:end] as `kind` through the door (parsers/embedded.py); launches and
    env come back bound to `file`. `expands`: the delimiter was not quoted, so the shell turns
    `\\\\`, `\\$` and `\\<newline>` into what the written file holds (read so for shell sections)."""
    return embedded.read(file, kind, start, end, Inherited(expands=expands))


def unescape(text: str, base: int) -> tuple[str, list[int]]:
    """What an unquoted heredoc body writes: `\\\\` -> `\\`, `\\$` -> `$`, `\\``` -> ```, a
    backslash-newline vanishes; with the file offset of each character kept."""
    out: list[str] = []
    offs: list[int] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in "\\$`":
            out.append(text[i + 1])
            offs.append(base + i + 1)
            i += 2
        elif c == "\\" and text.startswith("\n", i + 1):
            i += 2
        else:
            out.append(c)
            offs.append(base + i)
            i += 1
    return "".join(out), offs


def _apptainer(view: SourceFile, start: int, end: int, inherited: Inherited) -> ParsedFile:
    """An Apptainer/Singularity definition: `From:` names the image; `%runscript` and
    `%startscript` are shell run in it."""
    expands = inherited.expands
    pf = ParsedFile(view)
    text = view.text
    image = None
    m = re.search(r"(?im)^[ \t]*From:[ \t]*(\S+)", text[start:end])
    if m:
        image = m.group(1)
    sections = list(re.finditer(r"(?m)^[ \t]*(%\w+)[^\n]*\n", text[start:end]))
    for i, sec in enumerate(sections):
        if sec.group(1).lower() not in APPTAINER_SECTIONS:
            continue
        lo = start + sec.end()
        hi = start + sections[i + 1].start() if i + 1 < len(sections) else end
        body, omap = unescape(text[lo:hi], lo) if expands else (text[lo:hi], Shift(lo))
        scan = embedded.scan_shell(view, body, omap, context=f"{sec.group(1)} of the definition",
                                   group=f"{view.display}:{view.line_col(lo)[0]}", image=image)
        pf.launches.extend(scan.launches)
        pf.env.extend(scan.env)
    return pf


embedded.register("apptainer", _apptainer)
