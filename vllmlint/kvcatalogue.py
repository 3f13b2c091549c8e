"""KV-transfer facts per vLLM release (0.27.0 - 0.33.0), read from vLLM's own source:
`vllm/config/kv_transfer.py` (KVTransferConfig, pydantic extra="forbid"),
`vllm/distributed/kv_transfer/kv_connector/factory.py` (registered connectors) and the
NixlConnector's `get_from_extra_config(...)` reads. tests/test_kvcatalogue.py cross-checks this
table against ../shared/kb/surface-vX.json.
"""
from __future__ import annotations

from .versions import parse_version

V = parse_version
FIRST, LAST = V("0.27.0"), V("0.33.0")

# field -> (first release, last release) it exists in; None = open-ended within 0.27 - 0.33
KV_FIELDS: dict[str, tuple[str | None, str | None]] = {
    "kv_connector": (None, None),
    "engine_id": (None, None),
    "kv_buffer_device": (None, None),
    "kv_buffer_size": (None, "0.31.0"),      # removed in 0.32.0 (v0.31 kv_transfer.py:71)
    "kv_role": (None, None),
    "kv_rank": (None, "0.31.0"),             # removed in 0.32.0 (v0.31 kv_transfer.py:79)
    "kv_parallel_size": (None, "0.31.0"),    # removed in 0.32.0 (v0.31 kv_transfer.py:84)
    "kv_ip": (None, "0.31.0"),               # removed in 0.32.0 (v0.31 kv_transfer.py:87)
    "kv_port": (None, None),
    "kv_connector_extra_config": (None, None),
    "kv_connector_module_path": (None, None),
    "enable_permute_local_kv": (None, None),
    "kv_load_failure_policy": (None, None),  # Literal["recompute", "fail"], v0.30 kv_transfer.py:103
}
KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
FAILURE_POLICIES = ("fail", "recompute")

CONNECTORS: dict[str, tuple[str | None, str | None]] = {
    name: (None, None) for name in (
        "ExampleConnector", "ExampleHiddenStatesConnector", "LMCacheConnectorV1", "LMCacheMPConnector",
        "NixlConnector", "NixlPullConnector", "NixlPushConnector", "MultiConnector", "MoRIIOConnector",
        "OffloadingConnector", "DecodeBenchConnector", "MooncakeConnector", "MooncakeStoreConnector",
        "FlexKVConnectorV1", "SimpleCPUOffloadConnector", "HF3FSKVConnector")
}
CONNECTORS["HiSparseConnector"] = ("0.30.0", None)    # new in 0.30 (v0.30 factory.py)

# NixlConnector kv_connector_extra_config keys that are read (get_from_extra_config)
NIXL_EXTRA_KEYS: dict[str, tuple[str | None, str | None]] = {
    "backends": (None, None), "kv_lease_duration": (None, None), "kv_recompute_threshold": (None, None),
    "bidirectional_kv_xfer": (None, None), "decoder_kv_blocks_ttl": (None, None),
    "push_registration_timeout": (None, None), "num_threads": (None, None), "engine_ttl": (None, None),
    "enforce_handshake_compat": (None, None),
    "enable_cross_layers_blocks": (None, "0.28.0"),   # gone in 0.29, silently ignored since
}


def _in(span: tuple[str | None, str | None], target: tuple[int, int, int]) -> bool:
    first, last = span
    return (first is None or target >= V(first)) and (last is None or target <= V(last))


def kv_fields(target) -> set[str]:
    return {k for k, span in KV_FIELDS.items() if _in(span, target)}


def removed_in(table: dict, key: str) -> str | None:
    """The release that removed `key`, as text, if the table knows it."""
    span = table.get(key)
    if not span or span[1] is None:
        return None
    major, minor, _ = V(span[1])
    return f"{major}.{minor + 1}.0"


def connectors(target) -> set[str]:
    return {k for k, span in CONNECTORS.items() if _in(span, target)}


def nixl_extra_keys(target) -> set[str]:
    return {k for k, span in NIXL_EXTRA_KEYS.items() if _in(span, target)}
