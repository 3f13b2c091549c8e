"""What the YAML front end reads from a node: values, spans, env entries, template actions.

Part of the YAML front end (yamlfile.py's `YamlParser` mixes it in): a scalar's offsets and the
`Arg` it becomes, env lists and maps as `EnvEntry`s (each removable with its item), a value
with its Go template actions as written, and `_add`, which hands launches to the parsed file.
"""
from __future__ import annotations

import bisect
from functools import partial

import yaml

from ..model.launch import KNOWN_OFFSETS, Arg, EnvEntry, Launch, written_as_is
from .yaml_edit import remove_item
from .yaml_source import get, pair, scalar, scalar_offsets


class YamlNodes:
    """Scalars, env entries and templated values of the document a `YamlParser` reads."""

    # -- scalars ----------------------------------------------------------
    def offsets(self, node: yaml.ScalarNode):
        return scalar_offsets(self.masked, node)

    def is_templated(self, node: yaml.Node) -> bool:
        s, e = node.start_mark.index, node.end_mark.index
        return any(ts < e and s < te for ts, te in self.templated)

    def arg(self, node: yaml.Node) -> Arg:
        span = (node.start_mark.index, node.end_mark.index)
        if not isinstance(node, yaml.ScalarNode):
            return Arg(self.text[span[0]:span[1]], self.source, span, dynamic=True)
        value = node.value
        dynamic = "$" in value
        if self.templated and self.is_templated(node):
            offs = self.offsets(node)
            if offs is not None:
                value = "".join(self.text[o] for o in offs)
            dynamic = True
        else:
            # most tokens are written as they read (bare, or quoted without escapes): their
            # offsets are a range known now, and the Arg holds no node (a parse a migrate keeps
            # for its next pass then keeps no composed tree: less memory, less to collect)
            offs = written_as_is(self.masked, span, value)
            if offs is not None:
                return Arg(value, self.source, span, dynamic, False, KNOWN_OFFSETS, (offs,))
        # the closure holds the text and this scalar only, not the parser (its whole document)
        return Arg(value, self.source, span, dynamic=dynamic, locate=partial(scalar_offsets, self.masked, node))

    # -- env ----------------------------------------------------------------
    def env_entries(self, container: yaml.Node, origin: str) -> list[EnvEntry]:
        entries: list[EnvEntry] = []
        env_pair = pair(container, "env") or pair(container, "environment")
        if env_pair is None:
            return entries
        env = env_pair[1]
        if isinstance(env, yaml.SequenceNode):
            for i, item in enumerate(env.value):
                if isinstance(item, yaml.MappingNode):          # k8s: {name, value|valueFrom}
                    name = scalar(get(item, "name"))
                    value_node = get(item, "value")
                    value = scalar(value_node) if value_node is not None else None
                    if value_node is None and get(item, "valueFrom") is None:
                        value = ""
                elif isinstance(item, yaml.ScalarNode):          # compose list: NAME=value
                    name, eq, value = item.value.partition("=")
                    value = value if eq else None
                else:
                    continue
                if not name:
                    continue
                entries.append(EnvEntry(name, value, self.source,
                                        (item.start_mark.index, item.end_mark.index), origin,
                                        remove_item(self.source, self.text, env, i, env_pair)))
        elif isinstance(env, yaml.MappingNode):                  # compose map: NAME: value
            entries += self.map_env(env, env_pair, origin)
        self.pf.env.extend(entries)
        return entries

    def map_env(self, env: yaml.MappingNode, env_pair, origin: str) -> list[EnvEntry]:
        """`NAME: value` entries of an env map (compose, Ray's runtime_env.env_vars), each
        removable with its line."""
        out = []
        for i, (k, v) in enumerate(env.value):
            if isinstance(k, yaml.ScalarNode):
                value = scalar(v)
                out.append(EnvEntry(k.value, "" if value is None else value, self.source,
                                    (k.start_mark.index, v.end_mark.index), origin,
                                    remove_item(self.source, self.text, env, i, env_pair)))
        return out

    def argv_nodes(self, node: yaml.Node | None) -> list[yaml.Node]:
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        return []

    # -- templated values, launches handed to the parsed file --------------
    def plain(self, node: yaml.Node | None) -> str | None:
        """A scalar's value with its template actions as written (`{{ .Values.name }}`), never
        the mask that let it parse."""
        value = scalar(node)
        if value is None or not self.templated or not self.is_templated(node):
            return value
        offs = self.offsets(node)
        return self._restore(value, offs) if offs is not None else value

    def _in_template(self, offset: int) -> bool:
        i = bisect.bisect_right(self._template_starts, offset) - 1
        return i >= 0 and offset < self.templated[i][1]

    def _restore(self, value: str, offs) -> str:
        if len(offs) != len(value):
            return value
        return "".join(self.text[o] if self._in_template(o) else ch for ch, o in zip(value, offs))

    def _unmask(self, launch: Launch) -> None:
        """Args and env of a templated file read as written: an action glued to a flag
        (`--max-model-len={{ .Values.len }}`) stays one token, known only at run time."""
        for arg in launch.argv:
            if arg.file is self.source and arg.span and any(ts < arg.span[1] and arg.span[0] < te
                                                            for ts, te in self.templated):
                offs = arg.offsets
                if offs is not None:
                    arg.value = self._restore(arg.value, offs)
                arg.dynamic = True
        for entry in launch.env:
            if entry.file is self.source and entry.value is not None and \
                    any(ts < entry.span[1] and entry.span[0] < te for ts, te in self.templated):
                entry.value = None       # known at render time only

    def _add(self, launches: list[Launch], env_from: list[str]) -> None:
        for launch in launches:
            if self.templated:
                self._unmask(launch)
            launch.env_from = list(env_from)
            launch.hostnames = list(self._where.get("hostnames", []))
            launch.labels = dict(self._where.get("labels", {}))
            launch.gpus = self._where.get("gpus")
            launch.gpu_count = self._where.get("gpu_count")
            if launch.span == (0, 0):
                launch.span = self._anchor
        self.pf.launches.extend(launches)
