"""Why a file holds no launch (`vllmlint launches --explain PATH`, and `-v` for named files).

A file can miss at three places, and the explanation names the first it failed:

  1. the kind gate: discovery recognises no kind from its name or first bytes (not read at all);
  2. the marker gate: its kind is read, but its text has no marker of a launch (not parsed);
  3. the reader: it was parsed and no command starts vLLM. The reader of its kind then says
     what it saw: how many commands or containers it read, and for those that came near a
     launch why each is none (`docker run lmsysorg/sglang:...`: image is not vLLM's; `printf
     '%q ' "${CMD[@]}"`: prints an argv; `--runtime vllm serve`: a wrapper's sub-command).

The explanation re-reads the file with the parsers' own predicates (detect.py, the images
table); it never changes what is detected, and costs nothing unless asked for.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..model.launch import SourceFile

MAX_REASONS = 3        # examples per file; the rest are counted
VLLM_WORD = re.compile(r"(?<![\w.:/-])vllm(?![\w:/-])", re.I)    # `vllm serve`, `vllm.entrypoints`


def not_read(path: str) -> str:
    return (f"{path}: no launch: kind not recognised (not read): its name and first bytes match no kind vllmlint reads "
            f"(Dockerfile, YAML, a shell script by `.sh`/`.bash` or a shebang, Makefile, justfile, "
            f"systemd unit, Python, requirements)")


def explain(source: SourceFile, gate: str | None) -> str:
    """One line: `path: no launch: WHY`. `gate`: why the file was not parsed (project.gate)."""
    if gate:
        return f"{source.display}: no launch: no marker (not parsed): {gate}"
    reader = {"shell": _shell, "make": _shell, "just": _shell, "systemd": _systemd, "yaml": _yaml, "k8s": _yaml,
              "compose": _yaml, "dockerfile": _dockerfile, "python": _python}.get(source.kind)
    said = reader(source) if reader else f"{source.kind}: read, never holds a launch"
    return f"{source.display}: no launch: {said}"


def _cap(reasons: list[str]) -> str:
    seen: list[str] = []
    for r in reasons:
        if r not in seen:
            seen.append(r)
    more = f"; and {len(seen) - MAX_REASONS} more" if len(seen) > MAX_REASONS else ""
    return "; ".join(seen[:MAX_REASONS]) + more


def _short(words: list[str], n: int = 4) -> str:
    text = " ".join(words[:n]) + (" ..." if len(words) > n else "")
    return text if len(text) <= 80 else text[:77] + "..."


def command_reason(values: list[str]) -> str | None:
    """Why one command (its words after quote removal) that comes near a launch is none; None
    when it does not come near (no vLLM word, no container run, no Python script)."""
    from ..knowledge.images import is_vllm_image as vllm_build
    from ..parsers.detect import (_named_not_run, basename, container_run, detect, is_vllm_image,
                                  strip_transport, VLLM_SUBCOMMANDS)
    from ..parsers.shellscan import PRINTERS

    if not values:
        return None
    shown = f"`{_short(values)}`"
    # near a launch: the program word `vllm` or a vLLM module (`vllm-router-service`, a metric
    # named `vllm:...` or a file `vllm_grafana.json` are not)
    near = any(basename(v) == "vllm" or v.startswith("vllm.") for v in values)
    if basename(values[0]) in PRINTERS:
        return f"{shown} prints its arguments, runs nothing" if near else None
    if detect(values) is not None:
        return None
    run = container_run(values)
    if run is not None:
        image = strip_transport(run.image_text if run.image_text is not None else values[run.image])
        args = values[run.args_start:]
        if not vllm_build(image) and not is_vllm_image(image):
            if "$" in image:
                return f"{shown}: image {image} is chosen at run time and its name does not say vLLM"
            return f"{shown}: image {image} is not vLLM's"
        if run.entrypoint is not None or run.runs_command or args and not args[0].startswith("-"):
            return f"{shown}: image {image} is vLLM's, but the program it is given starts no vLLM"
        if not is_vllm_image(image):
            return (f"{shown}: image {image} is a vLLM build whose entrypoint is not vLLM's server "
                    f"(a shell or a script), and no command is given")
        return None
    for i, v in enumerate(values):
        if basename(v) == "vllm":
            why = _named_not_run(values, i)
            if why:
                return f"{shown}: {why}"
            nxt = values[i + 1] if i + 1 < len(values) else ""
            if nxt and nxt not in VLLM_SUBCOMMANDS:
                return f"{shown}: `vllm {nxt}` is no vLLM sub-command"
        if v == "-m" and i + 1 < len(values) and values[i + 1].startswith("vllm."):
            return f"{shown}: {values[i + 1]} is not one of vLLM's server modules"
        if v.endswith(".py") and "proxy" in basename(v):
            return (f"{shown}: a script named like a proxy is a P/D proxy only by what it forwards "
                    f"(both prefill and decode addresses, or one of vLLM's reference proxies)")
    if near:
        return f"{shown} mentions vLLM but does not start it"
    return None


def _shell(source: SourceFile) -> str:
    from ..parsers.shell_lex import commands

    try:
        cmds = [c for c in commands(source.text) if c.words]
    except Exception:           # the parser reported it already
        return "shell: could not be read"
    reasons = [r for c in cmds if (r := command_reason([w.value for w in c.words]))]
    head = f"shell: {len(cmds)} command{'s' if len(cmds) != 1 else ''} read, none runs vLLM"
    if reasons:
        return head + ": " + _cap(reasons)
    return head + _mentions(source)


def _systemd(source: SourceFile) -> str:
    from ..parsers.systemd import COMMAND_KEYS, unit_settings

    try:
        found = [value for section, key, value in unit_settings(source.text)
                 if section == "Service" and key in COMMAND_KEYS]
    except Exception:           # the parser reported it already
        return "systemd unit: could not be read"
    reasons = [r for value in found if (r := command_reason(value.split()))]
    head = f"systemd unit: {len(found)} command{'s' if len(found) != 1 else ''} in [Service] read, none runs vLLM"
    return head + (": " + _cap(reasons) if reasons else _mentions(source))


def _yaml(source: SourceFile) -> str:
    import yaml

    from ..knowledge.images import is_vllm_image as vllm_build
    from ..parsers.detect import is_vllm_image

    try:
        docs = [d for d in yaml.compose_all(source.text, Loader=yaml.SafeLoader) if d is not None]
    except yaml.YAMLError:
        from ..parsers.yamlfile import masked_yaml

        try:        # a template: read as the front end reads it (actions stand for values)
            docs = [d for d in yaml.compose_all(masked_yaml(source), Loader=yaml.SafeLoader) if d is not None]
        except yaml.YAMLError:
            return "yaml: could not be read as YAML (a template?)"
    kinds: list[str] = []
    reasons: list[str] = []
    containers = 0
    for doc in docs:
        kind = _get(doc, "kind")
        kinds.append(kind.value if isinstance(kind, yaml.ScalarNode) else "")
        for node in _mappings(doc):
            image = _get(node, "image")
            if not isinstance(image, yaml.ScalarNode) or not image.value:
                continue
            containers += 1
            name = _get(node, "name")
            label = f"container `{name.value}`" if isinstance(name, yaml.ScalarNode) else "container"
            words = [n.value for part in ("entrypoint", "command", "args") for n in _words(_get(node, part))]
            written = source.text[image.start_mark.index:image.end_mark.index]
            if "{{" in written:
                reasons.append(f"{label}: image {written.strip()} is a template whose value is not known here")
            elif not vllm_build(image.value) and not is_vllm_image(image.value):
                cmd = f" and its command {_quote(words)} starts no vLLM" if words else ""
                reasons.append(f"{label}: image {image.value} is not vLLM's{cmd}")
            elif not words and not is_vllm_image(image.value):
                reasons.append(f"{label}: image {image.value} is a vLLM build whose entrypoint is not vLLM's "
                               f"server, and no command is given")
            elif words:
                reasons.append(f"{label}: image {image.value}, but its command {_quote(words)} starts no vLLM")
        for text in _strings(doc):
            if re.search(r"\bvllm\s+serve\b", text, re.I):
                values = text.split()
                i = next((k for k, v in enumerate(values) if v.lower() == "vllm"), None)
                from ..parsers.detect import _named_not_run
                why = _named_not_run(values, i) if i is not None else None
                if why:
                    reasons.append(f"`{_short(values, 6)}`: {why}")
    named = ", ".join(k for k in dict.fromkeys(kinds) if k)
    head = (f"yaml: {len(docs)} document{'s' if len(docs) != 1 else ''}" + (f" ({named})" if named else "")
            + f", {containers} container{'s' if containers != 1 else ''} read, none runs vLLM")
    if reasons:
        return head + ": " + _cap(reasons)
    return head + _mentions(source)


def _dockerfile(source: SourceFile) -> str:
    froms = re.findall(r"(?im)^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", source.text)
    last = froms[-1] if froms else "?"
    from ..parsers.detect import is_vllm_image

    steps = re.findall(r"(?im)^\s*(ENTRYPOINT|CMD)\s+(.+)$", source.text)
    what = f"{steps[-1][0].upper()} {steps[-1][1].strip()[:60]}" if steps else "no ENTRYPOINT or CMD"
    image = "a vLLM image whose entrypoint is vLLM's server" if is_vllm_image(last) else "not an image that serves vLLM"
    return (f"dockerfile: {len(froms)} stage{'s' if len(froms) != 1 else ''}, the last FROM {last} ({image}); "
            f"{what} starts no vLLM" + _mentions(source))


def _python(source: SourceFile) -> str:
    head = ("python: parsed, no call starts vLLM (an argv list or command string naming `vllm serve` or a "
            "server module, vLLM's engine classes, a container SDK run of a vLLM image, Ray Serve's LLMConfig)")
    reasons = []
    import ast

    try:
        tree = ast.parse(source.text)
    except (SyntaxError, ValueError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        # argv lists of literal strings, and strings that read like a command line
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts and \
                all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            words = [e.value for e in node.elts]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and " " in node.value.strip() \
                and VLLM_WORD.search(node.value):
            words = node.value.split()
        else:
            continue
        why = command_reason(words)
        if why:
            reasons.append(f"line {node.lineno}: {why}")
    if reasons:
        return "python: parsed, no call starts vLLM: " + _cap(reasons)
    return head + _mentions(source)


def _mentions(source: SourceFile) -> str:
    lines = [i + 1 for i, line in enumerate(source.text.splitlines()) if "vllm" in line.lower()]
    if not lines:
        return "; the file never mentions vLLM"
    shown = ", ".join(map(str, lines[:5])) + (", ..." if len(lines) > 5 else "")
    return f"; vLLM is mentioned on line{'s' if len(lines) > 1 else ''} {shown}, in no command that starts it"


# -- YAML helpers -------------------------------------------------------------------------
def _get(node, key: str):
    import yaml

    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


def _mappings(node):
    import yaml

    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, yaml.MappingNode):
            yield n
            stack.extend(v for _, v in reversed(n.value))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(reversed(n.value))


def _strings(node):
    import yaml

    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, yaml.ScalarNode):
            yield n.value
        elif isinstance(n, yaml.MappingNode):
            stack.extend(v for _, v in reversed(n.value))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(reversed(n.value))


def _words(node) -> list:
    import yaml

    if isinstance(node, yaml.SequenceNode):
        return [n for n in node.value if isinstance(n, yaml.ScalarNode)]
    if isinstance(node, yaml.ScalarNode) and node.value.strip():
        return [yaml.ScalarNode(node.tag, w) for w in node.value.split()]
    return []


def _quote(words: list[str]) -> str:
    return f"`{_short(words)}`"


def explanations(arguments: list[str], candidates: list, project, every: bool) -> list[str]:
    """`path: no launch: why` for each file without a launch: every file read (and every file
    named) when `every` (--explain), else only the files named on the command line (-v)."""
    from .project import gate

    with_launch = {l.file.path for l in project.launches if l.file is not None}
    problems = {p.display for p in project.problems}
    parsed = {pf.source.path: pf.source for pf in project.files}
    out: list[str] = []
    known = {c.display for c in candidates}
    for arg in arguments:
        if Path(arg).is_file() and arg not in known:
            out.append(not_read(arg))
    for cand in candidates:
        if not (every or cand.explicit) or cand.display in problems or cand.kind in ("requirements", "pyproject"):
            continue
        source = parsed.get(cand.path)
        if source is None or source.path in with_launch:
            continue
        out.append(explain(source, gate(source)))
    return out
