"""Validating routers: `vllmlint router` is detected and linked to its P/D pair, and the
`vllmlint.io/validating-router` marker is read from every place it may be written - so the
VL101 negative fixtures are negative for the right reason, not because nothing was found."""
from __future__ import annotations

from pathlib import Path

import pytest

from vllmlint.parsers.detect import detect
from vllmlint.lint.discovery import discover
from vllmlint.lint.graph import graph_of
from vllmlint.model.launch import PROXY
from vllmlint.lint.project import load

VL101 = Path(__file__).resolve().parent.parent / "fixtures" / "VL101"


def proxy_of(case: str):
    candidates, _ = discover([str(VL101 / case / "input")])
    graph = graph_of(load(candidates))
    [proxy] = graph.proxies
    return proxy


@pytest.mark.parametrize("case,flavour,validating", [
    ("vllmlint-router-compose", "validating", "vllmlint router"),
    ("python-m-router-k8s", "validating", "python -m vllmlint.router"),
    ("vllmlint-router-unguarded", "vllmlint-unguarded", ""),
    ("annotation-validating", "reference-multiturn", "annotation vllmlint.io/validating-router"),
    ("annotation-false", "reference-multiturn", ""),
    ("compose-label-validating", "reference-multiturn", "label vllmlint.io/validating-router"),
    ("env-validating", "reference-multiturn", "VLLMLINT_VALIDATING_ROUTER=1"),
    ("compose-stack", "reference-multiturn", ""),
])
def test_router_flavour_and_marker(case, flavour, validating):
    proxy = proxy_of(case)
    assert (proxy.flavour, proxy.validating) == (flavour, validating)
    assert proxy.resolved and proxy.prefill and proxy.decode


@pytest.mark.parametrize("words,program,options", [
    (["vllmlint", "router", "--port", "8000"], "vllmlint router", 2),
    (["/usr/local/bin/vllmlint", "router"], "vllmlint router", 2),
    (["python3", "-m", "vllmlint.router", "--port", "1"], "python -m vllmlint.router", 3),
    (["python", "-m", "vllmlint.cli", "router", "--port", "1"], "vllmlint router", 4),
    (["uv", "run", "vllmlint", "router"], "vllmlint router", 4),
])
def test_router_launches_are_detected(words, program, options):
    found = detect(words)
    assert found is not None and found.kind == PROXY and found.program == program
    assert found.options_start == options


def test_other_vllmlint_commands_are_not_launches():
    assert detect(["vllmlint", "check", "."]) is None


def test_k8s_label_on_the_pod_template_counts(tmp_path):
    base = (VL101 / "annotation-validating" / "input" / "proxy.yaml").read_text()
    text = base.replace('  annotations:\n    # our fork of disagg_proxy_multiturn.py compares rendered token ids before '
                        'reusing D\'s blocks\n    vllmlint.io/validating-router: "true"\n', "")
    text = text.replace("  template:\n    spec:\n", "  template:\n    metadata:\n      labels:\n"
                        "        vllmlint.io/validating-router: \"true\"\n    spec:\n")
    assert "validating-router" in text and "annotations" not in text
    for name in ("prefill.yaml", "decode.yaml"):
        (tmp_path / name).write_text((VL101 / "annotation-validating" / "input" / name).read_text())
    (tmp_path / "proxy.yaml").write_text(text)
    candidates, _ = discover([str(tmp_path)])
    [proxy] = graph_of(load(candidates)).proxies
    assert proxy.validating == "label vllmlint.io/validating-router"


def test_a_marker_on_another_service_does_not_count(tmp_path):
    text = (VL101 / "compose-stack" / "input" / "compose.yaml").read_text()
    text = text.replace("  decode:\n", "  decode:\n    labels: {vllmlint.io/validating-router: \"true\"}\n", 1)
    (tmp_path / "compose.yaml").write_text(text)
    candidates, _ = discover([str(tmp_path)])
    [proxy] = graph_of(load(candidates)).proxies
    assert proxy.validating == ""
