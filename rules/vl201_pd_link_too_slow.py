from __future__ import annotations

from pathlib import Path

from vllmlint.lint.graph import graph_of
from vllmlint.lint.registry import Rule

TYPE_CHECKING = False      # typing.TYPE_CHECKING without importing typing (a one-file run's start-up)
if TYPE_CHECKING:
    from vllmlint.knowledge.topology import Link

DEFAULT_PROMPT_TOKENS = 8192
RDMA_HINTS = ("rdma/", "roce", "infiniband", "ucx_tls", "nccl_ib", "libfabric", "efa", "mlx5",
              "k8s.v1.cni.cncf.io/networks", "sriov")
ADVICE = ("split prefill and decode only when p99 inter-token latency misses its target under load and P and D "
          "talk over NVLink, peer-to-peer or RDMA; stay collocated when TTFT is the target (vLLM's guide: two L40S "
          "without peer-to-peer, median TTFT 2.2 s split vs 0.7 s collocated)")


class PdLinkTooSlow(Rule):
    """Prefill and decode whose GPUs cannot move KV fast enough for the split to pay off.

    ## What it does
    For each prefill/decode pair of a deployment, finds where each side runs: on one host (a
    compose file, one script) with GPUs from `CUDA_VISIBLE_DEVICES`, compose `device_ids` and
    `--tensor-parallel-size`, or in separate Kubernetes pods. Warns when, per the topology file
    given with `--topology` (the text of `nvidia-smi topo -p2p r` or `nvidia-smi topo -m`), a P
    GPU and a D GPU have no peer-to-peer path (`CNS`, `GNS`, `NS`, ... or `PHB`/`NODE`/`SYS`),
    or when P and D sit in different pods with no RDMA in sight (no `rdma/` resources, RoCE or
    InfiniBand networks, `UCX_TLS`, `NCCL_IB_*`). The message estimates the KV bytes per
    request - 2 x layers x KV heads x head_dim x bytes per element x prompt tokens, with the
    geometry from `--model-config`, the local Hugging Face cache or a built-in table, and the
    prompt length from `--prompt-tokens` or `--max-model-len` - and the transfer time.

    ## Why
    Disaggregation pays one KV transfer per request. vLLM's guide measured two L40S over PCIe
    without peer-to-peer with Qwen2.5-7B-Instruct and ~8k-token prompts: ~470 MB of KV took
    ~1.3 s to reach decode, and median TTFT was 2.2 s split against 0.7 s collocated, while p99
    inter-token latency improved. Split only where the GPUs talk over NVLink, peer-to-peer or
    RDMA, and where TTFT is not the binding target.

    ## Example
    ```bash
    CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen2.5-7B-Instruct --kv-transfer-config '{..."kv_role":"kv_producer"}' &
    CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen2.5-7B-Instruct --kv-transfer-config '{..."kv_role":"kv_consumer"}' &
    ```
    with `nvidia-smi topo -p2p r` showing `CNS` between GPU0 and GPU1.

    ## Fix safety
    No fix: collocating or moving GPUs is a deployment decision. Benchmark against one
    collocated `vllm serve --data-parallel-size 2` with
    `vllm bench serve --goodput ttft:2000 tpot:30`, and read decode's `KV Transfer metrics` log
    line under real prompt lengths.
    """

    code = "VL201"
    name = "pd-link-too-slow"
    severity = "warning"
    fix = "none"

    def check(self, project):
        graph = graph_of(project)
        pairs = graph.pd_pairs()
        if not pairs:
            return
        from vllmlint.knowledge.topology import parse_topology   # here: most projects have no P/D pair

        topo_path = self.options.get("topology")
        topology = parse_topology(Path(topo_path).read_text()) if topo_path else None
        for producers, consumers in pairs:
            for d in consumers:
                for p in producers:
                    if p is d:
                        continue
                    link, where = self._link(p, d, topology)
                    if link is None or link.p2p:
                        continue
                    message, detail = self._message(p, d, link, where)
                    yield self.finding(d.file, d.span, message, detail=detail)
                    break

    # -- where P and D run ------------------------------------------------------------
    def _link(self, p, d, topology) -> tuple[Link | None, str]:
        from vllmlint.knowledge.topology import Link

        # separate Kubernetes workloads: the scheduler may put them anywhere
        kube = p.context.startswith("container ") and d.context.startswith("container ") and \
            p.file.kind not in ("compose",) and d.file.kind not in ("compose",)
        if kube and p.group != d.group:
            if self._rdma_in_sight(p) or self._rdma_in_sight(d):
                return None, ""
            return Link("network", "", False), "in separate pods with no RDMA in sight"
        if topology is None:
            return None, ""
        gp, gd = self._gpus(p), self._gpus(d)
        if not gp or not gd:
            return None, ""
        worst = None
        for a in gp:
            for b in gd:
                try:
                    link = topology.link(a, b)
                except KeyError:
                    continue
                if not link.p2p:
                    return link, f"on GPU {','.join(map(str, gp))} and GPU {','.join(map(str, gd))} of one host"
                worst = worst or link
        return worst, ""

    @staticmethod
    def _gpus(launch) -> list[int] | None:
        from vllmlint.knowledge.topology import parse_cuda_visible_devices

        gpus = parse_cuda_visible_devices(launch.env_value("CUDA_VISIBLE_DEVICES")) or launch.gpus
        if not gpus:
            return None
        tp = launch.flag_value("--tensor-parallel-size") or launch.flag_value("-tp")
        size = int(tp.value) if tp is not None and tp.value.isdigit() else 1
        return gpus[:max(size, 1)]

    @staticmethod
    def _rdma_in_sight(launch) -> bool:
        text = launch.file.text.lower()
        names = " ".join(e.name.lower() for e in launch.env)
        return any(h in text or h in names for h in RDMA_HINTS)

    # -- what it costs ---------------------------------------------------------------
    def _message(self, p, d, link: Link, where: str) -> tuple[str, str]:
        """(the one line: where P and D run and what a request's KV costs there; the detail: the
        estimate's inputs and the guide's advice)."""
        from vllmlint.knowledge.topology import dtype_bytes, estimate, find_geometry

        model = p.model() or d.model()
        tokens = self.options.get("prompt_tokens")
        source = "--prompt-tokens"
        if not tokens:
            mml = p.flag_value("--max-model-len")
            if mml is not None and mml.value.isdigit():
                tokens, source = int(mml.value), "--max-model-len"
            else:
                tokens, source = DEFAULT_PROMPT_TOKENS, "assumed"
        head = f"prefill (line {p.line}) and decode run {where}" if p.file is d.file else \
            f"prefill ({p.file.display}:{p.line}) and decode run {where}"
        found = find_geometry(model, self.options.get("model_config")) if model else None
        if found is None:
            return (f"{head}: every request's KV crosses a link without peer-to-peer: split over NVLink, P2P or RDMA",
                    f"Link: {link.detail or 'no peer-to-peer'}. The model's geometry is unknown: give "
                    f"--model-config for an estimate. {ADVICE[0].upper() + ADVICE[1:]}.")
        geometry, origin = found
        dtype = p.flag_value("--dtype")
        kv_dtype = p.flag_value("--kv-cache-dtype")
        est = estimate(geometry, tokens, link, dtype_bytes(dtype.value if dtype else None,
                                                           kv_dtype.value if kv_dtype else None))
        return (f"{head}: {est.describe()}",
                f"{geometry.name} from {origin}; prompt length {source}. {ADVICE[0].upper() + ADVICE[1:]}.")

