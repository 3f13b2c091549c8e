"""GPU topology and KV-cache transfer estimates for prefill/decode (P/D) disaggregation.

In a disaggregated deployment every request pays one KV-cache transfer from the prefill
instance to the decode instance. How long that takes depends on two things this module
can work out offline, without a GPU and without the network:

* how many bytes of KV a prompt produces, from the model geometry
  (2 (K and V) x num_hidden_layers x num_key_value_heads x head_dim x bytes per element,
  per token), read from a local ``config.json``, the local Hugging Face cache, or a small
  built-in table; and
* what the two GPUs are connected by, from ``nvidia-smi topo -m`` (link types) and/or
  ``nvidia-smi topo -p2p r`` (peer-to-peer read verdicts) output pasted into a file.

Worked example from vLLM's disaggregated-serving guide: Qwen2.5-7B-Instruct in bf16 is
2 x 28 x 4 x 128 x 2 = 57,344 B per token, so an 8,192-token prompt carries 469,762,048 B
(~469.8 MB). On one box with two L40S over PCIe without peer-to-peer that took ~1.3 s to
reach decode (median TTFT 2.2 s split vs 0.7 s collocated).

Pure standard library; nothing here downloads anything or touches a GPU.
"""
from __future__ import annotations

import json
import os
import re
from ..model.record import record
from pathlib import Path

from ..model.lazyre import lazy_re

__all__ = [
    "BANDWIDTH",
    "Link",
    "ModelGeometry",
    "POPULAR_MODELS",
    "Topology",
    "TransferEstimate",
    "dtype_bytes",
    "estimate",
    "find_geometry",
    "geometry_from_config",
    "parse_cuda_visible_devices",
    "parse_topology",
]


# --------------------------------------------------------------------------------------
# Links and topology
# --------------------------------------------------------------------------------------

@record(frozen=True)
class Link:
    """How two GPUs (or two hosts) are connected, as far as a KV transfer is concerned."""

    kind: str      # "nvlink" | "p2p" | "pcie-no-p2p" | "rdma" | "network" | "unknown"
    detail: str    # what the evidence said, e.g. "NV4", "OK", "CNS", "PHB", "SYS"
    p2p: bool      # True only for nvlink and p2p (and rdma for cross-host)


LINK_KINDS = ("nvlink", "p2p", "pcie-no-p2p", "rdma", "network", "unknown")

# Cells of `nvidia-smi topo -p2p r|w|n|a|p`. Legend printed by nvidia-smi:
#   X = Self, OK = Status Ok, CNS = Chipset not supported, GNS = GPU not supported,
#   TNS = Topology not supported, NS = Not supported, DR = Disabled by regkey, U = Unknown
P2P_CODES = frozenset({"OK", "CNS", "GNS", "TNS", "NS", "DR", "U"})

# Cells of `nvidia-smi topo -m` between two devices (legend printed by nvidia-smi):
#   NV#  = Connection traversing a bonded set of # NVLinks
#   PIX  = Connection traversing at most a single PCIe bridge
#   PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
#   PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
#   NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges
#          within a NUMA node
#   SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes
#          (e.g., QPI/UPI); older drivers printed SOC for the same thing
_NV_RE = lazy_re(r"NV\d+")
_PCIE_SWITCH_CODES = frozenset({"PIX", "PXB"})
_HOST_PATH_CODES = frozenset({"PHB", "NODE", "SYS", "SOC"})
_LINK_MATRIX_CODES = _PCIE_SWITCH_CODES | _HOST_PATH_CODES

_PIX_DETAIL = {
    "PIX": "PIX, one PCIe switch: peer-to-peer usually works; confirm with nvidia-smi topo -p2p r",
    "PXB": "PXB, PCIe switches below the host bridge: peer-to-peer usually works; "
           "confirm with nvidia-smi topo -p2p r",
}


def _link_from_matrix_code(code: str) -> Link:
    """Map one `nvidia-smi topo -m` cell to a Link.

    Mapping (and why):
      NV#            -> "nvlink", p2p True: a bonded set of NVLinks, the fastest path.
      PIX, PXB       -> "p2p", p2p True: the GPUs meet at a PCIe switch below the host
                        bridge, where peer-to-peer normally works. The matrix does not
                        prove it (ACS, IOMMU or a GeForce driver can still refuse), so the
                        detail says it is assumed and how to confirm.
      PHB, NODE, SYS -> "pcie-no-p2p", p2p False: the path goes through the CPU's host
      (and old SOC)     bridge, between host bridges, or across the inter-socket link
                        (QPI/UPI/xGMI). There peer-to-peer is typically disabled by the
                        driver or chipset ("CNS") or slow, so data is staged through host
                        memory -- the L40S case from the vLLM guide.
      anything else  -> "unknown", p2p False.
    """
    if _NV_RE().fullmatch(code):
        return Link("nvlink", code, True)
    if code in _PCIE_SWITCH_CODES:
        return Link("p2p", _PIX_DETAIL[code], True)
    if code in _HOST_PATH_CODES:
        return Link("pcie-no-p2p", code, False)
    return Link("unknown", code, False)


def _link_from_p2p_code(code: str) -> Link:
    """Map one `nvidia-smi topo -p2p r` cell: OK -> peer-to-peer read works; else it does not."""
    if code == "OK":
        return Link("p2p", "OK", True)
    return Link("pcie-no-p2p", code, False)


class Topology:
    """GPU-to-GPU links parsed from nvidia-smi output.

    `gpus` lists the GPU labels as printed ("GPU0", "GPU1", ...); `link(a, b)` takes the GPU
    indices from those labels (the numbers nvidia-smi prints, i.e. physical indices before
    any CUDA_VISIBLE_DEVICES remapping).
    """

    def __init__(self, gpus: list[str], links: dict[tuple[int, int], Link], source: str,
                 sources: tuple[str, ...] | None = None) -> None:
        self.gpus: list[str] = list(gpus)
        self._links = dict(links)
        self._source = source
        # Every matrix kind that contributed (both, when -m and -p2p r were pasted together).
        self.sources: tuple[str, ...] = sources if sources is not None else (source,)

    @property
    def source(self) -> str:
        """"p2p-matrix" when a `topo -p2p` matrix supplied the verdicts, else "link-matrix"."""
        return self._source

    @property
    def indices(self) -> list[int]:
        return [int(g[3:]) for g in self.gpus]

    def link(self, a: int, b: int) -> Link:
        """The link between GPU indices a and b (a != b). KeyError if the output did not say."""
        if a == b:
            raise KeyError(f"GPU{a} to itself is not a link")
        if (a, b) in self._links:
            return self._links[(a, b)]
        if (b, a) in self._links:
            return self._links[(b, a)]
        raise KeyError(f"no link between GPU{a} and GPU{b} in the topology")

    def pairs(self) -> list[tuple[int, int, Link]]:
        """Every known unordered pair (a < b) with its link."""
        seen: dict[tuple[int, int], Link] = {}
        for (a, b), link in sorted(self._links.items()):
            key = (min(a, b), max(a, b))
            seen.setdefault(key, link)
        return [(a, b, link) for (a, b), link in sorted(seen.items())]

    def __repr__(self) -> str:
        return f"Topology(gpus={self.gpus!r}, source={self._source!r}, links={len(self._links)})"


_GPU_LABEL = lazy_re(r"GPU(\d+)")
# Device column labels in a matrix header: GPU0, NIC0, mlx5_0 (older drivers), NVMe0, ...
_DEVICE_LABEL = lazy_re(r"[A-Za-z][A-Za-z0-9_.:-]*\d")
_RULE_LINE = lazy_re(r"\s*\|?[\s|:+=-]*-[\s|:+=-]*")


@record
class _Matrix:
    kind: str                              # "p2p-matrix" | "link-matrix"
    gpus: list[int]                        # GPU indices in row order
    cells: dict[tuple[int, int], str]      # (row gpu, column gpu) -> cell text


def _tokens(line: str) -> list[str]:
    # Tolerate tabs or spaces, and table pipes from Markdown pastes.
    return line.replace("|", " ").split()


def _header_columns(tokens: list[str]) -> list[str] | None:
    if not tokens or not _GPU_LABEL().fullmatch(tokens[0]):
        return None
    columns: list[str] = []
    for tok in tokens:
        if not _DEVICE_LABEL().fullmatch(tok) or tok in columns:
            break
        columns.append(tok)
    return columns


def _find_matrices(text: str) -> list[_Matrix]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    found: list[_Matrix] = []
    i = 0
    while i < len(lines):
        tokens = _tokens(lines[i])
        columns = _header_columns(tokens)
        if not columns:
            i += 1
            continue
        header_rest = " ".join(tokens[len(columns):])
        labels = set(columns)
        rows: dict[str, list[str]] = {}
        j = i + 1
        while j < len(lines):
            if _RULE_LINE().fullmatch(lines[j]):
                j += 1     # Markdown table separator (|---|---|) under a pasted header
                continue
            row = _tokens(lines[j])
            if not row or row[0] not in labels or row[0] in rows:
                break
            rows[row[0]] = row[1:1 + len(columns)]
            j += 1
        gpu_cols = [(k, int(m.group(1))) for k, c in enumerate(columns)
                    if (m := _GPU_LABEL().fullmatch(c))]
        gpu_rows = [(int(m.group(1)), cells) for label, cells in rows.items()
                    if (m := _GPU_LABEL().fullmatch(label))]
        if not gpu_rows:
            i += 1
            continue
        cells: dict[tuple[int, int], str] = {}
        for r, row_cells in gpu_rows:
            for k, c in gpu_cols:
                if k < len(row_cells) and c != r:
                    cells[(r, c)] = row_cells[k].upper()
        # The diagonal must read X (self) for this to be an nvidia-smi matrix.
        diag_ok = all(
            row_cells[k].upper() == "X"
            for r, row_cells in gpu_rows for k, c in gpu_cols if c == r and k < len(row_cells)
        )
        if not diag_ok:
            i += 1
            continue
        values = set(cells.values())
        if values and values <= P2P_CODES:
            kind = "p2p-matrix"
        elif values and all(v in _LINK_MATRIX_CODES or _NV_RE().fullmatch(v) for v in values):
            kind = "link-matrix"
        elif values:
            # Mixed or unfamiliar codes: call it by majority, unknown cells map to "unknown".
            p2p_votes = sum(v in P2P_CODES for v in cells.values())
            link_votes = sum(v in _LINK_MATRIX_CODES or bool(_NV_RE().fullmatch(v))
                             for v in cells.values())
            kind = "p2p-matrix" if p2p_votes > link_votes else "link-matrix"
        else:
            # Single GPU: only the -m matrix carries the affinity columns.
            kind = "link-matrix" if "AFFINITY" in header_rest.upper() else "p2p-matrix"
        found.append(_Matrix(kind, [r for r, _ in gpu_rows], cells))
        i = j
    return found


def parse_topology(text: str) -> Topology:
    """Parse `nvidia-smi topo -m` and/or `nvidia-smi topo -p2p r` output.

    Leading/trailing junk, the legend, NIC rows and columns, CPU/NUMA affinity columns, tabs
    or spaces and CRLF line endings are all tolerated. When both matrices are present the
    -m matrix decides where it says NV# (NVLink), and the -p2p verdict decides every other
    pair (it is what the driver actually allows); pairs only one matrix covers use that one.
    If several matrices of one kind are present the first wins.

    Raises ValueError with a one-line reason when no GPU matrix is found.
    """
    if not isinstance(text, str):
        raise ValueError("topology input is not text")
    matrices = _find_matrices(text)
    if not matrices:
        raise ValueError(
            "no nvidia-smi GPU matrix found (expected `nvidia-smi topo -m` or "
            "`nvidia-smi topo -p2p r` output with a GPU0 header row and an X diagonal)"
        )
    p2p = next((m for m in matrices if m.kind == "p2p-matrix"), None)
    lm = next((m for m in matrices if m.kind == "link-matrix"), None)

    links: dict[tuple[int, int], Link] = {}
    if lm is not None:
        for pair, code in lm.cells.items():
            links[pair] = _link_from_matrix_code(code)
    if p2p is not None:
        for pair, code in p2p.cells.items():
            current = links.get(pair)
            if current is not None and current.kind == "nvlink":
                continue  # NVLink info from -m is the better description of that pair
            links[pair] = _link_from_p2p_code(code)

    indices: list[int] = []
    for m in (lm, p2p):
        if m is not None:
            for g in m.gpus:
                if g not in indices:
                    indices.append(g)
    indices.sort()
    sources = tuple(m.kind for m in (p2p, lm) if m is not None)
    source = "p2p-matrix" if p2p is not None else "link-matrix"
    return Topology([f"GPU{g}" for g in indices], links, source, sources)


# --------------------------------------------------------------------------------------
# Bandwidths
# --------------------------------------------------------------------------------------

# Effective bytes/second used for estimates. They are deliberately round, conservative,
# "what a KV transfer realistically sees" figures, not line rates.
BANDWIDTH: dict[str, float] = {
    # NVLink: DeepSeek measured ~160 GB/s one-way on H800 (NVLink cut to 400 GB/s
    # bidirectional; deepseek-ai/DeepSeek-V3 issue #28). Full H100 NVLink4 measures ~376 GB/s
    # one-way (NVIDIA/nccl issue #1264) and A100 ~230 GB/s (NVIDIA/nccl-tests issue #149);
    # consumer NV4 bridges are lower (~50 GB/s). 160 GB/s is a middle, data-center figure.
    "nvlink": 160e9,
    # PCIe with peer-to-peer: nvbandwidth device_to_device_memcpy_read_ce between A6000s on
    # PCIe Gen4 x16 reads ~22-26 GB/s (NVIDIA/nvbandwidth issue #50, "almost 80% of full
    # PCIe Gen 4"). Gen5 boards do about twice that.
    "p2p": 22e9,
    # PCIe without peer-to-peer: the vLLM disaggregated-serving guide measured ~470 MB
    # reaching decode in ~1.3 s on two L40S (CNS), i.e. ~0.36 GB/s effective end to end
    # (staging through host memory plus connector overhead), far below the PCIe line rate.
    "pcie-no-p2p": 470e6 / 1.3,
    # Cross-host RDMA: one 200 Gb/s InfiniBand HDR / RoCE port = 25 GB/s line rate; a
    # 400 Gb/s NDR/ConnectX-7 port is ~50 GB/s (the figure DeepSeek-V3 quotes for IB).
    "rdma": 25e9,
    # Cross-host TCP without RDMA: 10 GbE line rate, 1.25 GB/s. 25/100 GbE hosts do better,
    # but TCP through the host rarely reaches line rate for one transfer.
    "network": 1.25e9,
    # Unknown link: assume the worst same-host case (PCIe without peer-to-peer) so an
    # estimate errs toward warning.
    "unknown": 470e6 / 1.3,
}


# --------------------------------------------------------------------------------------
# Model geometry
# --------------------------------------------------------------------------------------

@record(frozen=True)
class ModelGeometry:
    name: str
    num_layers: int
    num_kv_heads: int
    head_dim: int

    def kv_bytes_per_token(self, bytes_per_element: int = 2) -> int:
        """K and V for every layer: 2 x layers x kv heads x head_dim x bytes per element."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * bytes_per_element


def _g(name: str, layers: int, kv_heads: int, head_dim: int) -> ModelGeometry:
    return ModelGeometry(name, layers, kv_heads, head_dim)


# Values from the models' public config.json files (num_hidden_layers,
# num_key_value_heads, head_dim or hidden_size // num_attention_heads). Instruct and base
# checkpoints of one size share the architecture.
_TABLE: list[tuple[str, ModelGeometry, tuple[str, ...]]] = [
    # Qwen2.5-0.5B: 24 layers, 14 heads, 2 KV heads, hidden 896 -> head_dim 64
    ("Qwen/Qwen2.5-0.5B-Instruct", _g("Qwen2.5-0.5B-Instruct", 24, 2, 64), ("Qwen/Qwen2.5-0.5B",)),
    # Qwen2.5-1.5B: 28 layers, 12 heads, 2 KV heads, hidden 1536 -> 128
    ("Qwen/Qwen2.5-1.5B-Instruct", _g("Qwen2.5-1.5B-Instruct", 28, 2, 128), ("Qwen/Qwen2.5-1.5B",)),
    # Qwen2.5-3B: 36 layers, 16 heads, 2 KV heads, hidden 2048 -> 128
    ("Qwen/Qwen2.5-3B-Instruct", _g("Qwen2.5-3B-Instruct", 36, 2, 128), ("Qwen/Qwen2.5-3B",)),
    # Qwen2.5-7B: 28 layers, 28 heads, 4 KV heads, hidden 3584 -> 128
    ("Qwen/Qwen2.5-7B-Instruct", _g("Qwen2.5-7B-Instruct", 28, 4, 128), ("Qwen/Qwen2.5-7B",)),
    # Qwen2.5-14B: 48 layers, 40 heads, 8 KV heads, hidden 5120 -> 128
    ("Qwen/Qwen2.5-14B-Instruct", _g("Qwen2.5-14B-Instruct", 48, 8, 128), ("Qwen/Qwen2.5-14B",)),
    # Qwen2.5-32B: 64 layers, 40 heads, 8 KV heads, hidden 5120 -> 128
    ("Qwen/Qwen2.5-32B-Instruct", _g("Qwen2.5-32B-Instruct", 64, 8, 128), ("Qwen/Qwen2.5-32B",)),
    # Qwen2.5-72B: 80 layers, 64 heads, 8 KV heads, hidden 8192 -> 128
    ("Qwen/Qwen2.5-72B-Instruct", _g("Qwen2.5-72B-Instruct", 80, 8, 128), ("Qwen/Qwen2.5-72B",)),
    # Qwen3 dense: explicit head_dim 128
    ("Qwen/Qwen3-8B", _g("Qwen3-8B", 36, 8, 128), ()),     # 36 layers, 32 heads, 8 KV
    ("Qwen/Qwen3-14B", _g("Qwen3-14B", 40, 8, 128), ()),   # 40 layers, 40 heads, 8 KV
    ("Qwen/Qwen3-32B", _g("Qwen3-32B", 64, 8, 128), ()),   # 64 layers, 64 heads, 8 KV
    # Llama 3.1 8B: 32 layers, 32 heads, 8 KV heads, hidden 4096 -> 128
    ("meta-llama/Llama-3.1-8B-Instruct", _g("Llama-3.1-8B-Instruct", 32, 8, 128),
     ("meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B")),
    # Llama 3.1 / 3.3 70B: 80 layers, 64 heads, 8 KV heads, hidden 8192 -> 128
    ("meta-llama/Llama-3.1-70B-Instruct", _g("Llama-3.1-70B-Instruct", 80, 8, 128),
     ("meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B")),
    ("meta-llama/Llama-3.3-70B-Instruct", _g("Llama-3.3-70B-Instruct", 80, 8, 128), ()),
    # Mistral 7B v0.3: 32 layers, 32 heads, 8 KV heads (k_proj 4096 -> 1024), head_dim 128
    ("mistralai/Mistral-7B-Instruct-v0.3", _g("Mistral-7B-Instruct-v0.3", 32, 8, 128),
     ("mistralai/Mistral-7B-v0.3",)),
    # Gemma 2 9B: 42 layers, 16 heads, 8 KV heads, explicit head_dim 256
    ("google/gemma-2-9b-it", _g("gemma-2-9b-it", 42, 8, 256), ("google/gemma-2-9b",)),
]


def _build_popular() -> dict[str, ModelGeometry]:
    table: dict[str, ModelGeometry] = {}
    for hf_id, geometry, aliases in _TABLE:
        for ident in (hf_id, *aliases):
            table[ident.lower()] = geometry
            table[ident.rsplit("/", 1)[-1].lower()] = geometry
    return table


# Keys: lower-cased Hugging Face ids, both with and without the org ("qwen/qwen2.5-7b-instruct"
# and "qwen2.5-7b-instruct").
POPULAR_MODELS: dict[str, ModelGeometry] = _build_popular()


def _positive_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, float) and value.is_integer() and value > 0:
        return int(value)
    return None


def geometry_from_config(config: dict, name: str = "") -> ModelGeometry | None:
    """ModelGeometry from a Hugging Face config.json dict, or None when fields are missing.

    Uses num_hidden_layers, num_key_value_heads (default num_attention_heads) and head_dim
    (default hidden_size // num_attention_heads). Multimodal configs that keep the language
    model under "text_config" are handled. Multi-head latent attention models (DeepSeek-V2/V3
    style, with kv_lora_rank) cache one compressed latent per token instead of K and V, which
    this formula does not describe, so they return None.
    """
    if not isinstance(config, dict):
        return None
    sub = config.get("text_config")
    # The language model's own fields win; top-level keys fill what text_config leaves out.
    cfg = {**config, **sub} if isinstance(sub, dict) else config
    if cfg.get("kv_lora_rank") is not None:
        return None
    layers = _positive_int(cfg.get("num_hidden_layers"))
    heads = _positive_int(cfg.get("num_attention_heads"))
    kv_heads = _positive_int(cfg.get("num_key_value_heads"))
    if kv_heads is None:
        kv_heads = heads
    head_dim = _positive_int(cfg.get("head_dim"))
    if head_dim is None:
        hidden = _positive_int(cfg.get("hidden_size"))
        if hidden is not None and heads is not None and hidden % heads == 0:
            head_dim = hidden // heads
    if layers is None or kv_heads is None or head_dim is None:
        return None
    if not name:
        raw = config.get("_name_or_path") or cfg.get("_name_or_path") or config.get("model_type") or ""
        name = str(raw)
    return ModelGeometry(name, layers, kv_heads, head_dim)


def _read_config(path: Path, name: str) -> ModelGeometry | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return geometry_from_config(data, name)


def _config_file(path: Path) -> Path | None:
    try:
        if path.is_dir():
            candidate = path / "config.json"
            return candidate if candidate.is_file() else None
        if path.is_file():
            return path
    except OSError:
        return None
    return None


def _hub_dirs(hf_home: str | None) -> list[Path]:
    if hf_home:
        return [Path(hf_home).expanduser() / "hub"]
    dirs: list[Path] = []
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]).expanduser())
    if os.environ.get("HF_HOME"):
        dirs.append(Path(os.environ["HF_HOME"]).expanduser() / "hub")
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg).expanduser() if xdg else Path("~/.cache").expanduser()
        dirs.append(base / "huggingface" / "hub")
    return dirs


def _looks_like_repo_id(model: str) -> bool:
    if not model or model.startswith(("/", ".", "~")) or "\\" in model:
        return False
    parts = model.split("/")
    return 1 <= len(parts) <= 2 and all(parts)


def _snapshot_config(repo_dir: Path) -> Path | None:
    snapshots = repo_dir / "snapshots"
    try:
        ref = repo_dir / "refs" / "main"
        if ref.is_file():
            commit = ref.read_text(encoding="utf-8").strip()
            candidate = snapshots / commit / "config.json"
            if commit and candidate.is_file():
                return candidate
        candidates = [p / "config.json" for p in snapshots.iterdir() if (p / "config.json").is_file()]
    except OSError:
        return None
    if not candidates:
        return None

    def mtime(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:
            return 0.0

    return max(candidates, key=mtime)


def _from_hf_cache(model: str, hf_home: str | None) -> ModelGeometry | None:
    if not _looks_like_repo_id(model):
        return None
    folder = "models--" + model.replace("/", "--")
    for hub in _hub_dirs(hf_home):
        try:
            repo_dir = hub / folder
            if not repo_dir.is_dir():
                # Repo ids are case-sensitive on the Hub, but users type them loosely.
                if not hub.is_dir():
                    continue
                repo_dir = next((p for p in hub.iterdir() if p.name.lower() == folder.lower()), None)
                if repo_dir is None:
                    continue
        except OSError:
            continue
        config = _snapshot_config(repo_dir)
        if config is None:
            continue
        geometry = _read_config(config, model)
        if geometry is not None:
            return geometry
    return None


def find_geometry(model: str, model_config: str | None = None,
                  hf_home: str | None = None) -> tuple[ModelGeometry, str] | None:
    """Find the KV geometry of `model` without downloading anything.

    Order: an explicit config.json (`model_config`: the file, or a directory holding it);
    `model` as a local directory with config.json; the local Hugging Face cache
    (<hf_home or $HF_HOME or ~/.cache/huggingface>/hub/models--ORG--NAME/snapshots/*/config.json,
    $HF_HUB_CACHE honoured when hf_home is not given); then POPULAR_MODELS by the lower-cased
    id or its last path component. Returns (geometry, where it came from) or None.
    Unreadable or malformed files are treated as not found.
    """
    model = (model or "").strip()
    name = model.rstrip("/").rsplit("/", 1)[-1] if model else ""
    if model_config:
        path = _config_file(Path(model_config).expanduser())
        if path is not None:
            geometry = _read_config(path, name)
            if geometry is not None:
                return geometry, f"config.json at {path}"
    if model:
        try:
            local = Path(model).expanduser()
            is_dir = local.is_dir()
        except (OSError, ValueError):
            is_dir = False
        if is_dir:
            path = _config_file(local)
            if path is not None:
                geometry = _read_config(path, name)
                if geometry is not None:
                    return geometry, f"config.json at {path}"
        geometry = _from_hf_cache(model.rstrip("/"), hf_home)
        if geometry is not None:
            return geometry, "HF cache"
        key = model.rstrip("/").lower()
        hit = POPULAR_MODELS.get(key) or POPULAR_MODELS.get(key.rsplit("/", 1)[-1])
        if hit is not None:
            return hit, "built-in table"
    return None


def dtype_bytes(dtype: str | None, kv_cache_dtype: str | None = None) -> int:
    """Bytes per KV element: kv_cache_dtype fp8* -> 1; else from dtype (float32 -> 4, else 2)."""
    kv = (kv_cache_dtype or "auto").strip().lower()
    if kv.startswith("fp8"):
        return 1
    if kv in ("float32", "fp32"):
        return 4
    if kv not in ("auto", ""):
        return 2   # bfloat16 / float16 KV cache
    d = (dtype or "auto").strip().lower()
    if d.startswith("torch."):
        d = d[len("torch."):]
    if d in ("float32", "fp32", "float"):
        return 4
    return 2       # bfloat16, float16, half, auto, None (vLLM's auto is bf16/fp16 for these models)


# --------------------------------------------------------------------------------------
# Estimates
# --------------------------------------------------------------------------------------

_LINK_PHRASE = {
    "nvlink": "over NVLink",
    "p2p": "over PCIe with peer-to-peer",
    "pcie-no-p2p": "over PCIe without peer-to-peer",
    "rdma": "over RDMA",
    "network": "over the network without RDMA",
    "unknown": "over an unknown link (assumed as slow as PCIe without peer-to-peer)",
}


def _fmt_bytes(n: int) -> str:
    if n >= 1e9:
        return f"{n / 1e9:,.2f} GB"
    if n >= 1e6:
        return f"{n / 1e6:,.1f} MB"
    if n >= 1e3:
        return f"{n / 1e3:,.1f} kB"
    return f"{n:,} B"


def _fmt_seconds(s: float) -> str:
    if s >= 0.1:
        return f"{s:,.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


@record(frozen=True)
class TransferEstimate:
    bytes: int
    seconds: float
    link: Link
    prompt_tokens: int = 0

    def describe(self) -> str:
        """E.g. "~469.8 MB of KV per 8,192-token prompt; ~1.30 s over PCIe without peer-to-peer (CNS)"."""
        per = f"per {self.prompt_tokens:,}-token prompt" if self.prompt_tokens else "per prompt"
        phrase = _LINK_PHRASE.get(self.link.kind, _LINK_PHRASE["unknown"])
        detail = f" ({self.link.detail})" if self.link.detail else ""
        return f"~{_fmt_bytes(self.bytes)} of KV {per}; ~{_fmt_seconds(self.seconds)} {phrase}{detail}"


def estimate(geometry: ModelGeometry, prompt_tokens: int, link: Link,
             bytes_per_element: int = 2) -> TransferEstimate:
    """Bytes of KV one prompt produces and how long moving them over `link` takes."""
    if prompt_tokens < 0:
        raise ValueError("prompt_tokens must be >= 0")
    n = geometry.kv_bytes_per_token(bytes_per_element) * prompt_tokens
    bandwidth = BANDWIDTH.get(link.kind, BANDWIDTH["unknown"])
    return TransferEstimate(n, n / bandwidth, link, prompt_tokens)


# --------------------------------------------------------------------------------------
# CUDA_VISIBLE_DEVICES
# --------------------------------------------------------------------------------------

def parse_cuda_visible_devices(value: str | None) -> list[int] | None:
    """Physical GPU indices CUDA_VISIBLE_DEVICES selects, in CUDA order; None when unknown.

    "0,1" -> [0, 1]. None, "", "all" and UUID/MIG forms ("GPU-...", "MIG-...") -> None (not
    an index list). As CUDA does, an invalid (negative) index hides it and every later entry:
    "0,2,-1,1" -> [0, 2] and "-1" -> []. Anything else unparsable -> None.
    """
    if value is None:
        return None
    text = value.strip().strip("\"'").strip()
    if not text or text.lower() == "all":
        return None
    out: list[int] = []
    for part in text.split(","):
        tok = part.strip()
        if re.fullmatch(r"[+-]?\d+", tok):
            idx = int(tok)
            if idx < 0:
                break
            out.append(idx)
        else:
            return None
    return out
