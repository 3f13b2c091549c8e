"""`--kv-transfer-config` as structure, in every spelling vLLM accepts: one JSON token,
`--flag=JSON`, `--kv_transfer_config`, the JSON as its own list item, and dotted sub-flags
(`--kv-transfer-config.kv_role kv_producer`). Keys keep their file spans so rules can point at
them and fixes can edit one member."""
from __future__ import annotations

import json
from .record import field, record

from .jsonpos import Located, locate
from .launch import Arg, Launch, PerLaunch, SourceFile, Span, normalize_flag

FLAG = "--kv-transfer-config"
NIXL = {"NixlConnector", "NixlPullConnector", "NixlPushConnector"}
TRUE_STRINGS = {"true", "1", "yes", "on"}


def truthy(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in TRUE_STRINGS
    return bool(value) and value is not None


@record
class KVConfig:
    """A launch's KV transfer config (`--kv-transfer-config`), as JSON and where it is written."""
    launch: Launch
    arg: Arg | None = None                 # the last whole JSON value (last one wins)
    flag_arg: Arg | None = None            # the flag token itself
    data: dict = field(default_factory=dict)
    located: Located | None = None
    error: str | None = None               # malformed JSON
    unknown: bool = False                  # built at run time: nothing can be said
    dotted: dict[tuple, Arg] = field(default_factory=dict)

    # -- what it says --------------------------------------------------------------
    @property
    def connector(self) -> str | None:
        return self.data.get("kv_connector")

    @property
    def role(self) -> str | None:
        return self.data.get("kv_role")

    @property
    def extra(self) -> dict:
        extra = self.data.get("kv_connector_extra_config")
        return extra if isinstance(extra, dict) else {}

    def nixl_parts(self) -> list[tuple[tuple, dict]]:
        """(path, config) of each NixlConnector config: the top level, or MultiConnector children."""
        parts = []
        if self.connector in NIXL:
            parts.append(((), self.data))
        if self.connector == "MultiConnector":
            for i, child in enumerate(self.extra.get("connectors") or []):
                if isinstance(child, dict) and child.get("kv_connector") in NIXL:
                    parts.append((("kv_connector_extra_config", "connectors", i), child))
        return parts

    @property
    def bidirectional(self) -> bool:
        return any(truthy((c.get("kv_connector_extra_config") or {}).get("bidirectional_kv_xfer"))
                   for _, c in self.nixl_parts() if isinstance(c.get("kv_connector_extra_config") or {}, dict))

    @property
    def transfer_mode(self) -> str | None:
        names = {c.get("kv_connector") for _, c in self.nixl_parts()}
        if not names:
            return None
        return "push" if "NixlPushConnector" in names else "pull"

    # -- where it says it ------------------------------------------------------------
    @property
    def file(self) -> SourceFile:
        return self.launch.file

    def span(self, path: tuple = ()) -> Span:
        """File span of the key at `path` (its quoted name), else of the value, else the launch."""
        if path in self.dotted and self.dotted[path].span:
            return self.dotted[path].span
        if self.arg is not None:
            if path and self.located and path in self.located.members:
                m = self.located.members[path]
                sub = self.arg.sub_span(m.key_start, m.value_end)
                if sub:
                    return sub
                raw_key = json.dumps(path[-1]) if isinstance(path[-1], str) else None
                if raw_key and self.arg.span:
                    text = self.file.text[self.arg.span[0]:self.arg.span[1]]
                    for needle in (raw_key, raw_key.replace('"', '\\"')):
                        at = text.find(needle)
                        if at >= 0:
                            return self.arg.span[0] + at, self.arg.span[0] + at + len(needle)
            if self.arg.span:
                return self.arg.span
        if self.flag_arg is not None and self.flag_arg.span:
            return self.flag_arg.span
        return self.launch.span


def _dotted_value(text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


_READ = PerLaunch()


def kv_config(launch: Launch) -> KVConfig | None:
    """The launch's KV transfer config, or None when it sets none (read once per launch: the
    graph and five rules ask, at every step of a migration for the launches of files the step
    left alone)."""
    return _READ.get(launch, _read_kv_config)


def _read_kv_config(launch: Launch) -> KVConfig | None:
    cfg: KVConfig | None = None
    options = launch.argv[launch.options_start:]
    for i, arg in enumerate(options):
        raw = arg.value
        if not raw.startswith("--"):
            continue
        name, eq, inline = raw.partition("=")
        norm = normalize_flag(name)
        if norm == FLAG:
            cfg = cfg or KVConfig(launch)
            cfg.flag_arg = arg
            if eq:
                value = Arg(inline, arg.file, _tail_span(arg, len(name) + 1), arg.dynamic,
                            locate=(lambda a=arg, n=len(name) + 1: _tail_offsets(a, n)))
            elif i + 1 < len(options):
                value = options[i + 1]
            else:
                cfg.error = "the flag has no value"
                continue
            _read_json(cfg, value)
        elif norm.startswith(FLAG + "."):
            cfg = cfg or KVConfig(launch)
            path = tuple(name.split(".")[1:])
            if eq:
                val = Arg(inline, arg.file, arg.span, arg.dynamic)
            elif i + 1 < len(options):
                val = options[i + 1]
            else:
                continue
            append = path[-1].endswith("+")
            path = path[:-1] + (path[-1].rstrip("+"),)
            cfg.dotted[path] = arg
            node = cfg.data
            for key in path[:-1]:
                node = node.setdefault(key, {}) if isinstance(node.get(key, {}), dict) else {}
            if append:
                node.setdefault(path[-1], []).append(_dotted_value(val.value))
            else:
                node[path[-1]] = _dotted_value(val.value)
    return cfg


def _read_json(cfg: KVConfig, value: Arg) -> None:
    cfg.arg = value
    try:
        cfg.located = locate(value.value)
    except ValueError as err:
        if value.dynamic or "{{" in value.value or "$" in value.value:
            cfg.unknown = True
        else:
            cfg.error = str(err)
        cfg.located = None
        return
    if isinstance(cfg.located.value, dict):
        cfg.data = dict(cfg.located.value)
        cfg.error = None
    else:
        cfg.error = "the value is not a JSON object"


def _tail_span(arg: Arg, skip: int) -> Span | None:
    sub = arg.sub_span(skip, len(arg.value))
    return sub or arg.span


def _tail_offsets(arg: Arg, skip: int):
    offs = arg.offsets
    return None if offs is None else list(offs[skip:])


def _quote_style(cfg: KVConfig) -> str | None:
    """How a `"` of the JSON is written in the file: `"` or `\\"` (inside a double-quoted
    YAML or shell string). None when the JSON does not map back to the file."""
    offs = cfg.arg.offsets if cfg.arg else None
    if not offs:
        return None
    text = cfg.file.text
    for i, ch in enumerate(cfg.arg.value):
        if ch == '"':
            escaped = text[offs[i]] == "\\" or (offs[i] > 0 and text[offs[i] - 1] == "\\")
            return '\\"' if escaped else '"'
    return '"'


def move_member_edits(cfg: KVConfig, path: tuple, to_top: bool) -> list | None:
    """Edits that remove member `path` from the JSON value and, with `to_top`, add it (same
    value text) as the last member of the top-level object. None when that can't be done
    byte-exactly (the JSON is built at run time, or does not map back to the file)."""
    from .jsonpos import member_removal
    from .launch import Edit

    if cfg.arg is None or cfg.located is None or path not in cfg.located.members:
        return None
    quote = _quote_style(cfg)
    start, end = member_removal(cfg.arg.value, cfg.located, path)
    span = cfg.arg.sub_span(start, end)
    if span is None or quote is None:
        return None
    edits = [Edit(cfg.file, span[0], span[1], "")]
    if to_top:
        member = cfg.located.members[path]
        value_text = cfg.arg.value[member.value_start:member.value_end]
        close = cfg.located.objects[()][1]
        offs = cfg.arg.offsets
        key = json.dumps(path[-1])
        text = f", {key}: {value_text}" if cfg.located.value else f"{key}: {value_text}"
        edits.append(Edit(cfg.file, offs[close], offs[close], text.replace('"', quote)))
    return edits
