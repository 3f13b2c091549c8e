"""Triton Inference Server's vLLM backend: a model's `model.json` holds vLLM's engine arguments.

A Triton model repository keeps `<model>/config.pbtxt` (`backend: "vllm"`) and
`<model>/1/model.json` (or `<model>/model.json`): a JSON object whose members are vLLM's
`AsyncEngineArgs` (`"gpu_memory_utilization": 0.5`, `"enforce_eager": true`). Triton starts the
engine with them, so each member is read as the flag it is (`--gpu-memory-utilization=0.5`),
mapped onto its key (a rename writes the new key) and, when written plainly, its value. A fix
removes a member with one comma (model/launch.py), and never adds one (write new members by hand).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..model.jsonpos import locate
from ..model.launch import ENGINE, Arg, KeywordArg, Launch, ParsedFile, ParseError, SourceFile

BACKEND_RE = re.compile(r"""^\s*backend\s*:\s*["']vllm["']""", re.M)


def triton_config(path: Path) -> Path | None:
    """The `config.pbtxt` beside (or one folder above) a `model.json` that names the vLLM backend."""
    for folder in (path.parent, path.parent.parent):
        config = folder / "config.pbtxt"
        try:
            if config.is_file() and BACKEND_RE.search(config.read_text(errors="replace")[:65536]):
                return config
        except OSError:
            continue
    return None


def parse_triton(source: SourceFile) -> ParsedFile:
    text = source.text
    try:
        loc = locate(text)
    except ValueError as err:
        raise ParseError(1, f"not JSON ({err})") from None
    pf = ParsedFile(source)
    if not isinstance(loc.value, dict):
        return pf
    start = loc.objects.get((), (0, 0))[0]
    argv: list[Arg] = [Arg("triton vllm backend", source, (start, start + 1))]
    for (key, *rest), member in loc.members.items():
        if rest or not re.fullmatch(r"[A-Za-z_]\w*", key):
            continue
        value = loc.value[key]
        if value is None:
            continue
        argv.append(_member_arg(source, key, value, member))
    model = next((config.parent.name for config in [triton_config(source.path)] if config), "")
    context = f"Triton vLLM backend model {model}".strip()
    launch = Launch(kind=ENGINE, file=source, span=(start, start + 1), argv=argv, options_start=1,
                    context=context, group=f"{source.display}#{context}", program="triton vllm backend",
                    via="via Triton's vLLM backend (config.pbtxt backend: vllm)")
    launch.not_editable = "a Triton model.json: new members are written by hand"
    pf.launches.append(launch)
    return pf


def _member_arg(source: SourceFile, key: str, value, member) -> Arg:
    text = source.text
    flag = "--" + key.replace("_", "-")
    ks = member.key_start + 1                        # inside the key's quotes
    name_ok = text[ks:ks + len(key)] == key and text[ks + len(key)] == '"'
    if isinstance(value, bool):
        flag = flag if value else "--no-" + key.replace("_", "-")
        rest, value_offs = "", []
    else:
        raw = text[member.value_start:member.value_end]
        if isinstance(value, str):
            rest = "=" + value
            plain = raw == json.dumps(value) and "\\" not in raw
            value_offs = list(range(member.value_start + 1, member.value_end - 1)) if plain else None
        elif isinstance(value, (int, float)):
            rest = "=" + raw
            value_offs = list(range(member.value_start, member.value_end))
        else:
            rest, value_offs = "=" + json.dumps(value), None
    arg = KeywordArg(flag + rest, source, (member.key_start, member.value_end), keyword_style="key")
    if name_ok and value_offs is not None:
        head = [ks] * (len(flag) - len(key))          # `--` and `no-` sit on the key's first character
        offsets = head + list(range(ks, ks + len(key))) + ([ks + len(key)] + value_offs if rest else [])
        if len(offsets) == len(arg.value):
            arg.locate = lambda o=offsets: o
    return arg
