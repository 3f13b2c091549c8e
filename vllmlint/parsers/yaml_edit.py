"""Span edits on YAML source: remove one item of a collection, append one item to a sequence.

Everything is computed from PyYAML marks (character offsets), so the rest of the file -
comments, quoting, indentation, CRLF - is never re-serialised.
"""
from __future__ import annotations

import re

import yaml

from ..model.launch import AppendSite, Edit, SourceFile


def content_end(node: yaml.Node) -> int:
    """End offset of the last character a node owns (block collections' end marks can lie
    several lines further, after comments that belong to what follows)."""
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        return content_end(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return content_end(node.value[-1])
    return node.end_mark.index


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _after_line(text: str, end: int) -> int:
    """Extend `end` over the rest of its line and the line break (trailing comment included)."""
    if end > 0 and text[end - 1] == "\n":
        return end
    nl = text.find("\n", end)
    return len(text) if nl < 0 else nl + 1


def _dash_of(text: str, item_start: int) -> int | None:
    """Offset of the `-` that introduces a block sequence item, or None."""
    i = item_start - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    if i >= 0 and text[i] == "-" and not text[_line_start(text, i):i].strip():
        return i
    return None


def _block_item_region(text: str, start: int, node_end: int) -> tuple[int, int] | None:
    line_start = _line_start(text, start)
    if text[line_start:start].strip():
        return None
    return line_start, _after_line(text, node_end)


_SPANS: dict[int, tuple[yaml.Node, list[tuple[int, int]]]] = {}


def item_spans(collection: yaml.Node) -> list[tuple[int, int]]:
    """(start, end) of each item, computed once per collection (one env list -> n removals)."""
    cached = _SPANS.get(id(collection))
    if cached is not None and cached[0] is collection:
        return cached[1]
    if isinstance(collection, yaml.SequenceNode):
        spans = [(n.start_mark.index, content_end(n)) for n in collection.value]
    else:
        spans = [(k.start_mark.index, content_end(v)) for k, v in collection.value]
    if len(_SPANS) > 256:
        _SPANS.clear()
    _SPANS[id(collection)] = (collection, spans)
    return spans


def remove_item(file: SourceFile, text: str, collection: yaml.Node, index: int,
                parent_pair: tuple[yaml.Node, yaml.Node] | None) -> list[Edit] | None:
    """Edits that remove item `index` of a sequence (or pair `index` of a mapping)."""
    spans = item_spans(collection)
    start, end = spans[index]
    if collection.flow_style:
        if len(spans) == 1:
            return [Edit(file, start, end, "")]
        if index + 1 < len(spans):
            return [Edit(file, start, spans[index + 1][0], "")]
        return [Edit(file, spans[index - 1][1], end, "")]
    if len(spans) == 1:
        # the only item: remove the key that holds the collection, so no `env:` is left empty
        if parent_pair is None:
            return None
        key, value = parent_pair
        region = _block_item_region(text, key.start_mark.index, content_end(value))
        return None if region is None else [Edit(file, region[0], region[1], "")]
    if isinstance(collection, yaml.SequenceNode):
        dash = _dash_of(text, start)
        if dash is None:
            return None
        start = dash
    region = _block_item_region(text, start, end)
    return None if region is None else [Edit(file, region[0], region[1], "")]


def append_site(file: SourceFile, text: str, seq: yaml.SequenceNode) -> AppendSite | None:
    """Where a new last item of `seq` goes, written in the style of its current last item."""
    if not seq.value:
        inner = text[seq.start_mark.index:seq.end_mark.index]
        if seq.flow_style and re.fullmatch(r"\[[ \t]*\]", inner):     # `[]`: the first item goes inside
            return AppendSite(file, seq.start_mark.index + 1, '"{}"')
        return None
    last = seq.value[-1]
    if not isinstance(last, yaml.ScalarNode) or last.style in ("|", ">"):
        return None
    quote = last.style if last.style in ("'", '"') else ""
    if seq.flow_style:
        return AppendSite(file, last.end_mark.index, ", " + quote + "{}" + quote)
    dash = _dash_of(text, last.start_mark.index)
    if dash is None:
        return None
    line_start = _line_start(text, dash)
    nl = text.find("\n", last.end_mark.index)
    if nl < 0:
        nl = len(text)
        newline = "\r\n" if "\r\n" in text else "\n"
        offset = nl
    else:
        newline = "\r\n" if text[nl - 1:nl] == "\r" else "\n"
        offset = nl - 1 if newline == "\r\n" else nl
    return AppendSite(file, offset, newline + text[line_start:dash] + "- " + quote + "{}" + quote)


def new_key_site(file: SourceFile, text: str, mapping: yaml.MappingNode, key: str) -> AppendSite | None:
    """Where a new `key: ["{}"]` line goes at the end of a block mapping (`vllmConfig:` without
    its `extraArgs`), indented as the mapping's keys; None for a flow or empty mapping."""
    if not isinstance(mapping, yaml.MappingNode) or mapping.flow_style or not mapping.value:
        return None
    first = mapping.value[0][0]
    line_start = _line_start(text, first.start_mark.index)
    indent = text[line_start:first.start_mark.index]
    if indent.strip(" "):
        return None                  # `- key: ...`: the first key shares its line with a dash
    end = content_end(mapping.value[-1][1])
    nl = text.find("\n", end)
    if nl < 0:
        newline = "\r\n" if "\r\n" in text else "\n"
        offset = len(text)
    else:
        newline = "\r\n" if text[nl - 1:nl] == "\r" else "\n"
        offset = nl - 1 if newline == "\r\n" else nl
    return AppendSite(file, offset, newline + indent + key + ': ["{}"]')
