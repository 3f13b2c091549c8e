"""KV-transfer facts per vLLM release, read from the generated release catalogue
(`vllmlint/catalogue/`, written by `scripts/extract_catalogue.py` from each wheel's
`vllm/config/kv_transfer.py` (KVTransferConfig, pydantic extra="forbid"),
`vllm/distributed/kv_transfer/kv_connector/factory.py` (registered connectors) and the
NixlConnector's `get_from_extra_config(...)` reads). Nothing is loaded until a rule asks.
tests/test_kvcatalogue.py cross-checks it against ../shared/kb/surface-vX.json.
"""
from __future__ import annotations

from collections.abc import Mapping

from .versions import parse_version

V = parse_version
FIRST, LAST = V("0.27.0"), V("0.33.0")
KV_FLAG = "--kv-transfer-config"


class _Spans(Mapping):
    """name -> (first release, last release) it exists in over the catalogued releases; None =
    already in the oldest / still in the newest. Built on first use."""

    def __init__(self, build):
        self._build = build
        self._data: dict | None = None

    def _table(self) -> dict:
        if self._data is None:
            self._data = self._build()
        return self._data

    def __getitem__(self, key):
        return self._table()[key]

    def __iter__(self):
        return iter(self._table())

    def __len__(self):
        return len(self._table())


def _spans(runs_by_name: dict) -> dict[str, tuple[str | None, str | None]]:
    from .catalogue import versions

    vs = versions()
    out = {}
    for name, runs in runs_by_name.items():
        runs = runs["runs"] if isinstance(runs, dict) else runs
        first, last = runs[-1]
        out[name] = (None if first == vs[0] else first, None if last == vs[-1] else last)
    return out


def _history(key: str, flag: str | None = None) -> dict:
    from .catalogue import index_section

    table = index_section(key)
    return table.get(flag, {}) if flag else table


def _connector_spans() -> dict:
    from .catalogue import load, versions

    present: dict[str, list[bool]] = {}
    vs = versions()
    for i, v in enumerate(vs):
        for name in load(v).kv.get("connectors", []):
            present.setdefault(name, [False] * len(vs))[i] = True
    runs = {}
    for name, flags in present.items():
        start = None
        for i, here in enumerate(flags + [False]):
            if here and start is None:
                start = i
            elif not here and start is not None:
                runs.setdefault(name, []).append([vs[start], vs[i - 1]])
                start = None
    return _spans(runs)


# field -> (first release, last release) it exists in
KV_FIELDS: Mapping[str, tuple[str | None, str | None]] = _Spans(lambda: _spans(_history("json_fields", KV_FLAG)))
KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
FAILURE_POLICIES = ("fail", "recompute")
CONNECTORS: Mapping[str, tuple[str | None, str | None]] = _Spans(_connector_spans)
# NixlConnector kv_connector_extra_config keys that are read (get_from_extra_config)
NIXL_EXTRA_KEYS: Mapping[str, tuple[str | None, str | None]] = _Spans(lambda: _spans(_history("nixl_extra_keys")))


def _in(span: tuple[str | None, str | None], target: tuple[int, int, int]) -> bool:
    first, last = span
    return (first is None or target >= V(first)) and (last is None or target <= V(last))


def _release(target):
    from .catalogue import for_target

    return for_target(tuple(target))


def kv_fields(target) -> set[str]:
    cat = _release(target)
    if cat is None:
        return {k for k, span in KV_FIELDS.items() if _in(span, target)}
    return set(cat.json.get(KV_FLAG, {}).get("fields", {}))


def removed_in(table, key: str) -> str | None:
    """The release that removed `key`, as text, if the table knows it."""
    from .catalogue import versions

    span = table.get(key)
    if not span or span[1] is None:
        return None
    vs = versions()
    if span[1] in vs and vs.index(span[1]) + 1 < len(vs):
        return vs[vs.index(span[1]) + 1]
    major, minor, _ = V(span[1])
    return f"{major}.{minor + 1}.0"


def connectors(target) -> set[str]:
    cat = _release(target)
    if cat is None:
        return {k for k, span in CONNECTORS.items() if _in(span, target)}
    return set(cat.kv.get("connectors", []))


def nixl_extra_keys(target) -> set[str]:
    cat = _release(target)
    if cat is None:
        return {k for k, span in NIXL_EXTRA_KEYS.items() if _in(span, target)}
    return set(cat.nixl_extra_keys)
