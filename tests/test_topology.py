"""Topology parsing, model geometry lookup and KV-transfer estimates (vllmlint.knowledge.topology).

Matrix samples are real `nvidia-smi` output copied from public GitHub issues (matrix and
legend text only); the source is named above each one. Where a sample was adapted, the
comment says how.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from vllmlint.knowledge.topology import (
    BANDWIDTH,
    POPULAR_MODELS,
    Link,
    ModelGeometry,
    Topology,
    TransferEstimate,
    dtype_bytes,
    estimate,
    find_geometry,
    geometry_from_config,
    parse_cuda_visible_devices,
    parse_topology,
)

LEGEND_M = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""

LEGEND_P2P = """
Legend:

  X    = Self
  OK   = Status Ok
  CNS  = Chipset not supported
  GNS  = GPU not supported
  TNS  = Topology not supported
  NS   = Not supported
  DR   = Disabled by regkey
  U    = Unknown
"""

# 8x H100 SXM, NV18 everywhere, nine NIC columns and NIC rows, tab separated.
# NVIDIA/nccl issue #1453 ("Poor NCCL allreduce performance"); NIC rows after NIC5 were cut
# off in the copy, so the sample ends there.
H100_NV18 = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tNIC2\tNIC3\tNIC4\tNIC5\tNIC6\tNIC7\tNIC8\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tSYS\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tNODE\tPIX\t0-79\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tSYS\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tPIX\tNODE\t0-79\t0\t\tN/A\n"
    "GPU2\tNV18\tNV18\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tSYS\tSYS\tSYS\tSYS\tSYS\tNODE\tPIX\tNODE\tNODE\t0-79\t0\t\tN/A\n"
    "GPU3\tNV18\tNV18\tNV18\t X \tNV18\tNV18\tNV18\tNV18\tSYS\tSYS\tSYS\tSYS\tSYS\tPIX\tNODE\tNODE\tNODE\t0-79\t0\t\tN/A\n"
    "GPU4\tNV18\tNV18\tNV18\tNV18\t X \tNV18\tNV18\tNV18\tSYS\tNODE\tNODE\tNODE\tPIX\tSYS\tSYS\tSYS\tSYS\t80-159\t1\t\tN/A\n"
    "GPU5\tNV18\tNV18\tNV18\tNV18\tNV18\t X \tNV18\tNV18\tSYS\tNODE\tNODE\tPIX\tNODE\tSYS\tSYS\tSYS\tSYS\t80-159\t1\t\tN/A\n"
    "GPU6\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\t X \tNV18\tSYS\tNODE\tPIX\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t80-159\t1\t\tN/A\n"
    "GPU7\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\t X \tSYS\tPIX\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t80-159\t1\t\tN/A\n"
    "NIC0\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\n"
    "NIC1\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tNODE\tPIX\tSYS\t X \tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\n"
    "NIC2\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tPIX\tNODE\tSYS\tNODE\t X \tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\n"
    "NIC3\tSYS\tSYS\tSYS\tSYS\tNODE\tPIX\tNODE\tNODE\tSYS\tNODE\tNODE\t X \tNODE\tSYS\tSYS\tSYS\tSYS\n"
    "NIC4\tSYS\tSYS\tSYS\tSYS\tPIX\tNODE\tNODE\tNODE\tSYS\tNODE\tNODE\tNODE\t X \tSYS\tSYS\tSYS\tSYS\n"
    "NIC5\tNODE\tNODE\tNODE\tPIX\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tNODE\tNODE\tNODE\n"
    + LEGEND_M
)

# 4x RTX 3090 in two NVLinked pairs, space separated.
# aikitoria/open-gpu-kernel-modules pull request #18.
QUAD_3090_NV4 = """$ nvidia-smi topo -m
        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      PHB     NV4     NODE    0-23    0               N/A
GPU1    PHB      X      NODE    NV4     0-23    0               N/A
GPU2    NV4     NODE     X      PHB     0-23    0               N/A
GPU3    NODE    NV4     PHB      X      0-23    0               N/A
""" + LEGEND_M + "\n$ nvidia-smi topo -p2p r\n"

# 8x V100 hybrid cube mesh (NV1/NV2/SYS) with old-style mlx5_N NIC columns and only a
# CPU Affinity column. NVIDIA/nccl-tests issue #29 (the last affinity cell, cut off in the
# copy, is completed as 24-47,72-95 like its neighbours).
V100_CUBE_MESH = """\
        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    mlx5_0  mlx5_1  CPU Affinity
GPU0     X      NV2     NV2     NV1     NV1     SYS     SYS     SYS     NODE    NODE    0-23,48-71
GPU1    NV2      X      NV1     NV2     SYS     NV1     SYS     SYS     NODE    NODE    0-23,48-71
GPU2    NV2     NV1      X      NV1     SYS     SYS     NV2     SYS     PIX     PIX     0-23,48-71
GPU3    NV1     NV2     NV1      X      SYS     SYS     SYS     NV2     PIX     PIX     0-23,48-71
GPU4    NV1     SYS     SYS     SYS      X      NV2     NV2     NV1     SYS     SYS     24-47,72-95
GPU5    SYS     NV1     SYS     SYS     NV2      X      NV1     NV2     SYS     SYS     24-47,72-95
GPU6    SYS     SYS     NV2     SYS     NV2     NV1      X      NV1     SYS     SYS     24-47,72-95
GPU7    SYS     SYS     SYS     NV2     NV1     NV2     NV1      X      SYS     SYS     24-47,72-95
"""

# 4x T4, one on the other socket. NVIDIA/nccl issue #428.
T4_SYS_NODE = """\
        GPU0    GPU1    GPU2    GPU3    CPU Affinity
GPU0     X      SYS     SYS     SYS     0-15,32-47
GPU1    SYS      X      NODE    NODE    16-31,48-63
GPU2    SYS     NODE     X      NODE    16-31,48-63
GPU3    SYS     NODE    NODE     X      16-31,48-63
"""

# 2x RTX 5090 peer-access matrix (`topo -p2p rw`): leading space, tabs, trailing tab.
# noonghunna/club-3090 issue #1124.
P2P_5090_GNS = " \tGPU0\tGPU1\t\n GPU0\tX\tGNS\t\n GPU1\tGNS\tX\t\n" + LEGEND_P2P

# 5 GPUs all OK (`topo -p2p p`, same layout as -p2p r), tabs.
# aikitoria/open-gpu-kernel-modules issue #13.
P2P_5_OK = (
    "(base) root@epyc:~# nvidia-smi topo -p2p p\n"
    " \tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\t\n"
    " GPU0\tX\tOK\tOK\tOK\tOK\t\n"
    " GPU1\tOK\tX\tOK\tOK\tOK\t\n"
    " GPU2\tOK\tOK\tX\tOK\tOK\t\n"
    " GPU3\tOK\tOK\tOK\tX\tOK\t\n"
    " GPU4\tOK\tOK\tOK\tOK\tX\t\n"
    + LEGEND_P2P
)

# The vLLM guide's two-L40S box (CNS), in the real -p2p layout above. Constructed.
P2P_L40S_CNS = " \tGPU0\tGPU1\t\n GPU0\tX\tCNS\t\n GPU1\tCNS\tX\t\n" + LEGEND_P2P

# 4 GPUs, two pairs behind one switch each: pairs OK, across pairs CNS. Constructed in the
# real -p2p layout, to pair with the NV4 sample's shape.
P2P_4_MIXED = (
    " \tGPU0\tGPU1\tGPU2\tGPU3\t\n"
    " GPU0\tX\tOK\tCNS\tCNS\t\n"
    " GPU1\tOK\tX\tCNS\tCNS\t\n"
    " GPU2\tCNS\tCNS\tX\tOK\t\n"
    " GPU3\tCNS\tCNS\tOK\tX\t\n"
    + LEGEND_P2P
)


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


# --------------------------------------------------------------------------------------
# The guide's worked example
# --------------------------------------------------------------------------------------

def test_qwen25_7b_kv_bytes_per_token_matches_the_guide():
    g = POPULAR_MODELS["qwen2.5-7b-instruct"]
    assert (g.num_layers, g.num_kv_heads, g.head_dim) == (28, 4, 128)
    assert g.kv_bytes_per_token() == 2 * 28 * 4 * 128 * 2 == 57_344


def test_qwen25_7b_8k_prompt_over_pcie_without_p2p():
    g = POPULAR_MODELS["qwen2.5-7b-instruct"]
    est = estimate(g, 8192, Link("pcie-no-p2p", "CNS", False))
    assert est.bytes == 469_762_048
    assert abs(est.bytes / 1e6 - 469.8) / 469.8 < 0.01
    assert est.seconds == pytest.approx(1.3, rel=0.01)
    assert est.describe() == (
        "~469.8 MB of KV per 8,192-token prompt; ~1.30 s over PCIe without peer-to-peer (CNS)"
    )


def test_bandwidth_table_is_complete_and_ordered():
    assert set(BANDWIDTH) == {"nvlink", "p2p", "pcie-no-p2p", "rdma", "network", "unknown"}
    assert BANDWIDTH["pcie-no-p2p"] == pytest.approx(470e6 / 1.3)
    assert BANDWIDTH["nvlink"] > BANDWIDTH["p2p"] > BANDWIDTH["pcie-no-p2p"]
    assert BANDWIDTH["rdma"] > BANDWIDTH["network"]
    assert BANDWIDTH["unknown"] <= BANDWIDTH["p2p"]


def test_estimate_scales_with_link_and_dtype():
    g = POPULAR_MODELS["qwen2.5-7b-instruct"]
    slow = estimate(g, 8192, Link("pcie-no-p2p", "PHB", False))
    fast = estimate(g, 8192, Link("nvlink", "NV4", True))
    assert fast.seconds < slow.seconds / 100
    assert "ms over NVLink (NV4)" in fast.describe()
    fp8 = estimate(g, 8192, Link("pcie-no-p2p", "CNS", False), bytes_per_element=1)
    assert fp8.bytes * 2 == slow.bytes
    # A kind the table does not know is costed like "unknown".
    odd = estimate(g, 8192, Link("carrier-pigeon", "?", False))
    assert odd.seconds == pytest.approx(slow.bytes / BANDWIDTH["unknown"])
    assert isinstance(odd, TransferEstimate)
    with pytest.raises(ValueError):
        estimate(g, -1, Link("p2p", "OK", True))


def test_describe_large_model_in_gb():
    g = POPULAR_MODELS["llama-3.3-70b-instruct"]
    est = estimate(g, 8192, Link("rdma", "ConnectX-7", True))
    assert est.bytes == 2 * 80 * 8 * 128 * 2 * 8192
    assert est.describe().startswith("~2.68 GB of KV per 8,192-token prompt; ~")
    assert "over RDMA (ConnectX-7)" in est.describe()


# --------------------------------------------------------------------------------------
# nvidia-smi topo -m
# --------------------------------------------------------------------------------------

def test_h100_nv18_with_nic_rows_and_columns():
    topo = parse_topology(H100_NV18)
    assert isinstance(topo, Topology)
    assert topo.source == "link-matrix"
    assert topo.gpus == [f"GPU{i}" for i in range(8)]
    for a in range(8):
        for b in range(8):
            if a != b:
                link = topo.link(a, b)
                assert link == Link("nvlink", "NV18", True)


def test_quad_3090_nv4_pairs_and_host_bridge_paths():
    topo = parse_topology(QUAD_3090_NV4)
    assert topo.source == "link-matrix"
    assert topo.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert topo.link(0, 2) == Link("nvlink", "NV4", True)
    assert topo.link(1, 3).kind == "nvlink"
    assert topo.link(0, 1) == Link("pcie-no-p2p", "PHB", False)
    assert topo.link(0, 3) == Link("pcie-no-p2p", "NODE", False)
    assert topo.link(3, 0) == topo.link(0, 3)


def test_v100_cube_mesh_with_mlx5_columns():
    topo = parse_topology(V100_CUBE_MESH)
    assert len(topo.gpus) == 8
    assert topo.link(0, 1).detail == "NV2"
    assert topo.link(0, 3).detail == "NV1"
    assert topo.link(0, 5) == Link("pcie-no-p2p", "SYS", False)
    # mlx5 columns are NICs, never GPUs
    with pytest.raises(KeyError):
        topo.link(0, 8)


def test_t4_sys_node_crlf():
    topo = parse_topology(crlf(T4_SYS_NODE))
    assert topo.gpus == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert topo.link(0, 1) == Link("pcie-no-p2p", "SYS", False)
    assert topo.link(1, 2) == Link("pcie-no-p2p", "NODE", False)
    assert not any(link.p2p for _, _, link in topo.pairs())
    assert len(topo.pairs()) == 6


def test_pix_and_pxb_mean_peer_to_peer_through_a_switch():
    text = (
        "\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tPIX\tPXB\t0-31\t0\t\tN/A\n"
        "GPU1\tPIX\t X \tPXB\t0-31\t0\t\tN/A\n"
        "GPU2\tPXB\tPXB\t X \t0-31\t0\t\tN/A\n"
    )
    topo = parse_topology(text)
    pix = topo.link(0, 1)
    assert (pix.kind, pix.p2p) == ("p2p", True)
    assert pix.detail.startswith("PIX") and "topo -p2p r" in pix.detail
    assert topo.link(0, 2).detail.startswith("PXB")


def test_single_gpu_matrix_has_no_links():
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-31\t0\t\tN/A\n" + LEGEND_M
    topo = parse_topology(text)
    assert topo.gpus == ["GPU0"]
    assert topo.source == "link-matrix"
    assert topo.pairs() == []
    with pytest.raises(KeyError):
        topo.link(0, 1)
    with pytest.raises(KeyError):
        topo.link(0, 0)


def test_markdown_pipes_and_surrounding_junk():
    text = (
        "Here is my box, please help!\n\n"
        "| | GPU0 | GPU1 | CPU Affinity | NUMA Affinity | GPU NUMA ID |\n"
        "|---|---|---|---|---|---|\n"
        "| GPU0 | X | NV4 | 0-31 | 0 | N/A |\n"
        "| GPU1 | NV4 | X | 0-31 | 0 | N/A |\n\n"
        "thanks in advance\n"
    )
    topo = parse_topology(text)
    assert topo.gpus == ["GPU0", "GPU1"]
    assert topo.link(0, 1) == Link("nvlink", "NV4", True)


# --------------------------------------------------------------------------------------
# nvidia-smi topo -p2p r
# --------------------------------------------------------------------------------------

def test_p2p_cns_is_no_peer_to_peer():
    topo = parse_topology(P2P_L40S_CNS)
    assert topo.source == "p2p-matrix"
    assert topo.gpus == ["GPU0", "GPU1"]
    assert topo.link(0, 1) == Link("pcie-no-p2p", "CNS", False)
    est = estimate(POPULAR_MODELS["qwen2.5-7b-instruct"], 8192, topo.link(0, 1))
    assert est.seconds == pytest.approx(1.3, rel=0.01)


def test_p2p_gns_real_sample_crlf():
    topo = parse_topology(crlf(P2P_5090_GNS))
    assert topo.link(1, 0) == Link("pcie-no-p2p", "GNS", False)


def test_p2p_ok_five_gpus():
    topo = parse_topology(P2P_5_OK)
    assert topo.source == "p2p-matrix"
    assert len(topo.gpus) == 5
    assert all(link == Link("p2p", "OK", True) for _, _, link in topo.pairs())
    assert len(topo.pairs()) == 10


def test_p2p_ok_vs_cns_per_pair():
    topo = parse_topology(P2P_4_MIXED)
    assert topo.link(0, 1) == Link("p2p", "OK", True)
    assert topo.link(2, 3).p2p is True
    assert topo.link(0, 2) == Link("pcie-no-p2p", "CNS", False)
    assert topo.link(3, 1).p2p is False


@pytest.mark.parametrize("code", ["CNS", "GNS", "TNS", "NS", "DR", "U"])
def test_every_non_ok_p2p_code_means_no_p2p(code):
    topo = parse_topology(f" \tGPU0\tGPU1\t\n GPU0\tX\t{code}\t\n GPU1\t{code}\tX\t\n")
    link = topo.link(0, 1)
    assert (link.kind, link.detail, link.p2p) == ("pcie-no-p2p", code, False)


# --------------------------------------------------------------------------------------
# Both matrices in one file
# --------------------------------------------------------------------------------------

def test_both_matrices_nvlink_from_m_verdict_from_p2p():
    topo = parse_topology(QUAD_3090_NV4 + P2P_4_MIXED)
    assert topo.source == "p2p-matrix"
    assert set(topo.sources) == {"p2p-matrix", "link-matrix"}
    # -m says NV4 for 0-2: NVLink wins even though -p2p r says CNS there
    assert topo.link(0, 2) == Link("nvlink", "NV4", True)
    # PHB in -m, but the driver says OK for 0-1: the verdict wins
    assert topo.link(0, 1) == Link("p2p", "OK", True)
    # NODE in -m and CNS in -p2p r
    assert topo.link(0, 3) == Link("pcie-no-p2p", "CNS", False)


def test_both_matrices_order_does_not_matter():
    a = parse_topology(QUAD_3090_NV4 + P2P_4_MIXED)
    b = parse_topology(crlf(P2P_4_MIXED + "\n" + QUAD_3090_NV4))
    assert a.pairs() == b.pairs()


# --------------------------------------------------------------------------------------
# Garbage
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "",
    "hello world\n",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
    LEGEND_M,
    "GPU0 is fine, GPU1 is on fire\n",
    "\tGPU0\tGPU1\nGPU0\tNV4\tNV4\nGPU1\tNV4\tNV4\n",   # no X diagonal
    "\tGPU0\tGPU1\n",                                  # header without rows
])
def test_garbage_raises_value_error_with_one_line(text):
    with pytest.raises(ValueError) as info:
        parse_topology(text)
    message = str(info.value)
    assert message and "\n" not in message


# --------------------------------------------------------------------------------------
# Model geometry
# --------------------------------------------------------------------------------------

QWEN25_7B_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "torch_dtype": "bfloat16",
    "model_type": "qwen2",
}


def test_geometry_from_config_defaults():
    g = geometry_from_config(QWEN25_7B_CONFIG, "Qwen2.5-7B-Instruct")
    assert g == ModelGeometry("Qwen2.5-7B-Instruct", 28, 4, 128)
    # num_key_value_heads defaults to num_attention_heads (multi-head attention)
    mha = geometry_from_config({"num_hidden_layers": 32, "num_attention_heads": 32, "hidden_size": 4096})
    assert (mha.num_kv_heads, mha.head_dim) == (32, 128)
    # explicit head_dim wins over hidden_size // heads (Gemma 2: 3584 // 16 = 224, head_dim 256)
    gemma = geometry_from_config({"num_hidden_layers": 42, "num_attention_heads": 16,
                                  "num_key_value_heads": 8, "hidden_size": 3584, "head_dim": 256})
    assert gemma.head_dim == 256
    # head_dim: null falls back too
    nulled = geometry_from_config({**QWEN25_7B_CONFIG, "head_dim": None})
    assert nulled.head_dim == 128
    assert nulled.name == "qwen2"


@pytest.mark.parametrize("config", [
    {},
    {"num_hidden_layers": 28},
    {"num_hidden_layers": 28, "num_attention_heads": 28},          # no head_dim, no hidden_size
    {"num_hidden_layers": "28", "num_attention_heads": 28, "hidden_size": 3584},
    {"num_hidden_layers": 0, "num_attention_heads": 28, "hidden_size": 3584},
    {"num_hidden_layers": True, "num_attention_heads": 28, "hidden_size": 3584},
    # MLA (DeepSeek-V3 style) caches a latent, not K and V: not modelled
    {"num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
     "hidden_size": 7168, "kv_lora_rank": 512, "qk_rope_head_dim": 64},
    [],
])
def test_geometry_from_config_missing_fields(config):
    assert geometry_from_config(config) is None


def test_geometry_from_nested_text_config():
    config = {
        "architectures": ["Qwen2_5_VLForConditionalGeneration"],
        "vision_config": {"depth": 32, "hidden_size": 1280, "num_heads": 16},
        "text_config": {"num_hidden_layers": 28, "num_attention_heads": 28,
                        "num_key_value_heads": 4, "hidden_size": 3584},
    }
    assert geometry_from_config(config, "vl") == ModelGeometry("vl", 28, 4, 128)
    # top-level keys fill in what text_config leaves out
    partial = {"head_dim": 256, "text_config": {"num_hidden_layers": 34, "num_attention_heads": 8,
                                                "num_key_value_heads": 4}}
    assert geometry_from_config(partial, "m") == ModelGeometry("m", 34, 4, 256)


def write_config(directory: Path, config: dict) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_find_geometry_explicit_config_file_and_directory(tmp_path):
    path = write_config(tmp_path / "cfg", {**QWEN25_7B_CONFIG, "num_key_value_heads": 2})
    got = find_geometry("Qwen/Qwen2.5-7B-Instruct", model_config=str(path), hf_home=str(tmp_path))
    assert got is not None
    geometry, where = got
    assert geometry.num_kv_heads == 2          # the file beats the built-in table
    assert where == f"config.json at {path}"
    geometry, where = find_geometry("whatever", model_config=str(tmp_path / "cfg"),
                                    hf_home=str(tmp_path))
    assert geometry.num_kv_heads == 2 and where.startswith("config.json at ")


def test_find_geometry_local_model_directory(tmp_path):
    model_dir = tmp_path / "models" / "my-finetune"
    path = write_config(model_dir, QWEN25_7B_CONFIG)
    geometry, where = find_geometry(str(model_dir), hf_home=str(tmp_path / "empty"))
    assert (geometry.num_layers, geometry.num_kv_heads, geometry.head_dim) == (28, 4, 128)
    assert geometry.name == "my-finetune"
    assert where == f"config.json at {path}"


def make_hf_cache(hf_home: Path, repo: str, config: dict, commit: str = "0123abcd") -> Path:
    repo_dir = hf_home / "hub" / ("models--" + repo.replace("/", "--"))
    path = write_config(repo_dir / "snapshots" / commit, config)
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / "main").write_text(commit)
    return path


def test_find_geometry_hf_cache_layout(tmp_path):
    make_hf_cache(tmp_path, "acme/Tiny-Model", {"num_hidden_layers": 4, "num_attention_heads": 8,
                                               "num_key_value_heads": 2, "hidden_size": 512})
    geometry, where = find_geometry("acme/Tiny-Model", hf_home=str(tmp_path))
    assert where == "HF cache"
    assert (geometry.num_layers, geometry.num_kv_heads, geometry.head_dim) == (4, 2, 64)
    # loosely cased ids still find the cache folder
    assert find_geometry("ACME/tiny-model", hf_home=str(tmp_path))[1] == "HF cache"


def test_find_geometry_hf_cache_beats_table_and_env_is_used(tmp_path, monkeypatch):
    make_hf_cache(tmp_path, "Qwen/Qwen2.5-7B-Instruct", {**QWEN25_7B_CONFIG, "num_hidden_layers": 30})
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    geometry, where = find_geometry("Qwen/Qwen2.5-7B-Instruct")
    assert where == "HF cache" and geometry.num_layers == 30
    # the hf_home parameter overrides the environment
    geometry, where = find_geometry("Qwen/Qwen2.5-7B-Instruct", hf_home=str(tmp_path / "nowhere"))
    assert where == "built-in table" and geometry.num_layers == 28


def test_find_geometry_hf_cache_without_refs_uses_a_snapshot(tmp_path):
    repo_dir = tmp_path / "hub" / "models--acme--NoRefs"
    write_config(repo_dir / "snapshots" / "feedbeef", QWEN25_7B_CONFIG)
    geometry, where = find_geometry("acme/NoRefs", hf_home=str(tmp_path))
    assert where == "HF cache" and geometry.num_kv_heads == 4


def test_find_geometry_table_fallback(tmp_path):
    empty = str(tmp_path)
    for model in ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b-instruct", "/models/Qwen2.5-7B-Instruct/",
                  "Qwen/Qwen2.5-7B-Instruct/"):
        geometry, where = find_geometry(model, hf_home=empty)
        assert where == "built-in table"
        assert geometry.kv_bytes_per_token() == 57_344
    assert find_geometry("acme/never-heard-of-it", hf_home=empty) is None
    assert find_geometry("", hf_home=empty) is None


def test_find_geometry_never_raises_on_bad_files(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text("{not json")
    undecodable = tmp_path / "undecodable"
    undecodable.mkdir()
    (undecodable / "config.json").write_bytes(b"\xff\xfe\x00garbage")
    incomplete = write_config(tmp_path / "incomplete", {"model_type": "x"})
    # bad explicit config: falls through to the table
    assert find_geometry("Qwen/Qwen3-8B", model_config=str(bad), hf_home=str(tmp_path))[1] == "built-in table"
    assert find_geometry("Qwen/Qwen3-8B", model_config=str(undecodable / "config.json"),
                         hf_home=str(tmp_path))[1] == "built-in table"
    assert find_geometry("Qwen/Qwen3-8B", model_config=str(incomplete), hf_home=str(tmp_path))[1] == "built-in table"
    assert find_geometry("Qwen/Qwen3-8B", model_config=str(tmp_path / "missing.json"),
                         hf_home=str(tmp_path))[1] == "built-in table"
    assert find_geometry(str(bad), hf_home=str(tmp_path)) is None
    # a broken cache entry is "not found"
    repo_dir = tmp_path / "hub" / "models--acme--Broken"
    (repo_dir / "snapshots" / "abc").mkdir(parents=True)
    (repo_dir / "snapshots" / "abc" / "config.json").write_text("[]")
    assert find_geometry("acme/Broken", hf_home=str(tmp_path)) is None
    # a snapshot whose config.json links to a blob that was never fetched
    dangling = tmp_path / "hub" / "models--acme--Dangling" / "snapshots" / "abc"
    dangling.mkdir(parents=True)
    (dangling / "config.json").symlink_to(tmp_path / "hub" / "blobs-missing" / "deadbeef")
    assert find_geometry("acme/Dangling", hf_home=str(tmp_path)) is None
    # config.json that is a directory
    (tmp_path / "odd" / "config.json").mkdir(parents=True)
    assert find_geometry(str(tmp_path / "odd"), model_config=str(tmp_path / "odd"),
                         hf_home=str(tmp_path)) is None


@pytest.mark.skipif(os.name == "nt" or (hasattr(os, "geteuid") and os.geteuid() == 0),
                    reason="root ignores file permissions")
def test_find_geometry_unreadable_file(tmp_path):
    path = write_config(tmp_path / "locked", QWEN25_7B_CONFIG)
    path.chmod(0)
    try:
        assert find_geometry("nope/nope", model_config=str(path), hf_home=str(tmp_path)) is None
    finally:
        path.chmod(0o644)


def test_popular_models_table():
    expected = {
        "qwen2.5-0.5b-instruct": (24, 2, 64),
        "qwen2.5-1.5b-instruct": (28, 2, 128),
        "qwen2.5-3b-instruct": (36, 2, 128),
        "qwen2.5-7b-instruct": (28, 4, 128),
        "qwen2.5-14b-instruct": (48, 8, 128),
        "qwen2.5-32b-instruct": (64, 8, 128),
        "qwen2.5-72b-instruct": (80, 8, 128),
        "qwen3-8b": (36, 8, 128),
        "qwen3-14b": (40, 8, 128),
        "qwen3-32b": (64, 8, 128),
        "llama-3.1-8b-instruct": (32, 8, 128),
        "llama-3.1-70b-instruct": (80, 8, 128),
        "llama-3.3-70b-instruct": (80, 8, 128),
        "mistral-7b-instruct-v0.3": (32, 8, 128),
        "gemma-2-9b-it": (42, 8, 256),
    }
    for key, dims in expected.items():
        g = POPULAR_MODELS[key]
        assert (g.num_layers, g.num_kv_heads, g.head_dim) == dims, key
    for key in POPULAR_MODELS:
        assert key == key.lower()
    assert POPULAR_MODELS["qwen/qwen2.5-7b-instruct"] is POPULAR_MODELS["qwen2.5-7b-instruct"]
    assert POPULAR_MODELS["meta-llama/llama-3.1-8b-instruct"].kv_bytes_per_token() == 131_072


# --------------------------------------------------------------------------------------
# dtype and CUDA_VISIBLE_DEVICES
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,kv,expected", [
    (None, None, 2),
    ("auto", None, 2),
    ("bfloat16", None, 2),
    ("float16", "auto", 2),
    ("half", None, 2),
    ("float32", None, 4),
    ("FLOAT32", "auto", 4),
    ("float32", "fp8", 1),
    ("bfloat16", "fp8_e4m3", 1),
    (None, "fp8_e5m2", 1),
    ("float32", "bfloat16", 2),
])
def test_dtype_bytes(dtype, kv, expected):
    assert dtype_bytes(dtype, kv) == expected


@pytest.mark.parametrize("value,expected", [
    ("0,1", [0, 1]),
    ("0", [0]),
    (" 2, 3 ", [2, 3]),
    ("3,1", [3, 1]),
    ('"0,1"', [0, 1]),
    ("0,2,-1,1", [0, 2]),       # CUDA stops at the first invalid index
    ("-1", []),
    (None, None),
    ("", None),
    ("all", None),
    ("GPU-8f3c2a1e-1b2c-4d5e-9f00-112233445566", None),
    ("MIG-GPU-8f3c2a1e-1b2c-4d5e-9f00-112233445566/1/0", None),
    ("0,GPU-8f3c2a1e", None),
    ("zero", None),
])
def test_parse_cuda_visible_devices(value, expected):
    assert parse_cuda_visible_devices(value) == expected
