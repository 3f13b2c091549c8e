"""The KV catalogue agrees with vLLM's source as extracted in ../shared/kb."""
import json
from pathlib import Path

import pytest

from vllmlint.knowledge.kvcatalogue import connectors, kv_fields, nixl_extra_keys
from vllmlint.knowledge.versions import parse_version

KB = Path(__file__).resolve().parents[2] / "shared" / "kb"
VERSIONS = ["0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"]


@pytest.mark.skipif(not KB.is_dir(), reason="../shared/kb is not here")
@pytest.mark.parametrize("version", VERSIONS)
def test_agrees_with_kb(version):
    kv = json.loads((KB / f"surface-v{version}.json").read_text())["kv_transfer"]
    target = parse_version(version)
    assert kv_fields(target) == set(kv["config_class_fields"])
    assert connectors(target) == set(kv["connector_registry"])
    assert nixl_extra_keys(target) == set(kv["nixl_kv_connector_extra_config_keys"])
