"""Files a shell script writes with a here-document, read as what they are.

`kubectl apply -f - <<EOF` and `cat <<EOF > deploy.yaml` carry Kubernetes YAML, `cat > Dockerfile
<<EOF` a Dockerfile, `cat > app.def <<EOF` an Apptainer definition: the body is read by the
reader of its kind, on the script's own text with everything but the body blanked (so every
offset is the script's), and what it finds is handed back bound to the script, so findings and
fixes land in the script.

The kind comes from the program that reads the body (`kubectl|oc apply|create|replace -f -`),
else the name of the file written (`> x.yaml`, `tee x.yaml`), else the body's first line
(`apiVersion:`/`kind:`, `FROM`, `Bootstrap:`).
"""
from __future__ import annotations

import re
from ..model.record import replace

from ..model.launch import AppendSite, Edit, EnvEntry, ParsedFile, SourceFile
from ..model.lazyre import lazy_re

YAML_NAME_RE = lazy_re(r"\.(?:ya?ml)$", re.I)
DOCKERFILE_NAME_RE = lazy_re(r"(?:^|/)(?:Dockerfile|Containerfile)[^/]*$|\.(?:docker|container)file$", re.I)
DEF_NAME_RE = lazy_re(r"\.def$", re.I)
APPTAINER_SECTIONS = ("%runscript", "%startscript")


def body_kind(head: str, words: list[str], targets: list[str], body: str) -> str | None:
    """"yaml", "dockerfile", "apptainer" or None for a heredoc given to `words` (the command's
    words, program first) whose output goes to `targets`."""
    base = head.rsplit("/", 1)[-1]
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
    if base not in ("cat", "tee") or not names:
        return None
    first = next((l.strip() for l in body.splitlines() if l.strip() and not l.lstrip().startswith("#")), "")
    if re.match(r"(?:apiVersion|kind)\s*:", first):
        return "yaml"
    if re.match(r"(?i)FROM\s+\S", first):
        return "dockerfile"
    if re.match(r"(?i)Bootstrap\s*:", first):
        return "apptainer"
    return None


def blanked(text: str, start: int, end: int) -> str:
    """`text` with everything outside [start, end) turned to blanks (line breaks kept)."""
    blank = lambda s: re.sub(r"[^\r\n]", " ", s)     # noqa: E731
    return blank(text[:start]) + text[start:end] + blank(text[end:])


def read_body(file: SourceFile, kind: str, start: int, end: int, expands: bool = False) -> ParsedFile | None:
    """Parse file.text[start:end] as `kind`; launches and env come back bound to `file`.
    `expands`: the delimiter was not quoted, so the shell turns `\\\\`, `\\$` and `\\<newline>`
    into what the written file holds (read so for shell sections)."""
    view = SourceFile(file.path, file.display, blanked(file.text, start, end), file.kind, file.bom)
    try:
        if kind == "yaml":
            from .yamlfile import parse_yaml
            view.kind = "k8s"
            parsed = parse_yaml(view)
        elif kind == "dockerfile":
            from .dockerfile import parse_dockerfile
            view.kind = "dockerfile"
            parsed = parse_dockerfile(view)
        elif kind == "apptainer":
            parsed = _apptainer(view, start, end, expands)
        else:
            return None
    except Exception:           # a body that is not what it looked like: nothing to read
        return None
    return rebind(parsed, view, file)


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


def _apptainer(view: SourceFile, start: int, end: int, expands: bool) -> ParsedFile:
    """An Apptainer/Singularity definition: `From:` names the image; `%runscript` and
    `%startscript` are shell run in it."""
    from .shellscan import Shift, scan_shell

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
        scan = scan_shell(view, body, omap, context=f"{sec.group(1)} of the definition",
                          group=f"{view.display}:{view.line_col(lo)[0]}", image=image)
        pf.launches.extend(scan.launches)
        pf.env.extend(scan.env)
    return pf


def rebind(parsed: ParsedFile, view: SourceFile, file: SourceFile) -> ParsedFile:
    """Everything that points at `view` points at `file` instead (same offsets)."""
    def edits(found):
        return None if found is None else [replace(e, file=file) if e.file is view else e for e in found]

    def env(entry: EnvEntry) -> EnvEntry:
        if entry.file is view:
            entry.file = file
            entry.removal = edits(entry.removal)
        return entry

    for entry in parsed.env:
        env(entry)
    for entries in parsed.configmaps.values():
        for entry in entries:
            env(entry)
    for launch in parsed.launches:
        if launch.file is view:
            launch.file = file
        for arg in launch.argv:
            if arg.file is view:
                arg.file = file
        launch.env = [env(e) for e in launch.env]
        site = launch.append_site
        if isinstance(site, AppendSite) and site.file is view:
            launch.append_site = AppendSite(file, site.offset, site.template)
    parsed.source = file
    return parsed


__all__ = ["body_kind", "read_body", "rebind", "blanked", "Edit"]
