from vllmlint.lint.graph import graph_of
from vllmlint.lint.registry import Rule
from vllmlint.knowledge.versions import parse_version

STREAMED_PARAMS = parse_version("0.33.0")   # first release whose streamed chunks carry kv_transfer_params


class BidirectionalBehindReferenceProxy(Rule):
    """`bidirectional_kv_xfer` behind vLLM's reference multi-turn proxy gives wrong answers.

    ## What it does
    Finds prefill and decode launches whose NixlConnector `kv_connector_extra_config` sets
    `bidirectional_kv_xfer: true` and that are routed by `disagg_proxy_multiturn.py`, vLLM's
    reference multi-turn proxy - across files: the proxy, P and D may sit in three different
    manifests. The proxy's `--prefiller-hosts/--decoder-hosts` are resolved to launches in the
    tree; when they cannot be, every bidirectional P and D in the tree counts.

    ## Why
    With bidirectional transfer, decode returns `kv_transfer_params` at the end of a turn and
    prefill pulls those blocks for the next turn, computing only the new tokens. NixlConnector
    pairs blocks by position and never compares token ids. The reference proxy caches decode's
    parameters keyed on a client-supplied `conversation_id` and attaches them to the next turn
    without checking that the new prompt continues the old one. A client that edits history -
    a chat template that strips reasoning (Qwen3), an agent that rewrites tool calls, compaction -
    then gets answers computed on KV of other tokens: wrong, fast, and with no error. It spreads:
    the turns after the edit build on that KV, and once a reused block fills, P and D hash it
    under the new tokens, so their prefix caches serve it to later requests with that prefix,
    even ones that reused nothing (measured with `vllmlint replay` on vLLM 0.30.0:
    docs/replay-results.md). vLLM's docs
    say "We currently assume the router is able to detect such mismatch across turns" (#43094,
    closed as stale); the guard proposed in PR #44838 compares text, not token ids, and was never
    merged. Before 0.33.0 streamed responses carry no `kv_transfer_params`, so the proxy (which
    streams from decode) caches nothing yet; 0.33.0 adds them and the bug goes live.

    ## Example
    ```bash
    vllm serve $M --port 8100 --kv-transfer-config \\
      '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_connector_extra_config":{"bidirectional_kv_xfer":true}}'
    vllm serve $M --port 8200 --kv-transfer-config \\
      '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"bidirectional_kv_xfer":true}}'
    python disagg_proxy_multiturn.py --port 8000 --prefiller-hosts localhost --prefiller-ports 8100 \\
      --decoder-hosts localhost --decoder-ports 8200
    ```
    Turn `bidirectional_kv_xfer` off, or route through a router that attaches the parameters
    only when the new prompt's token ids start with exactly the ids decode saw and produced:
    `vllmlint router` takes the reference proxy's options and does that. VL101 does not fire for
    `vllmlint router` / `python -m vllmlint.router` (except with `--policy unguarded`, which
    reproduces the reference proxy for `vllmlint replay`), nor for a router the deployment marks
    as validating: the annotation or label `vllmlint.io/validating-router: "true"` on its
    Kubernetes workload, that compose service label, or `VLLMLINT_VALIDATING_ROUTER=1` in its
    environment.

    A P/D proxy written in Python (a FastAPI, Starlette, Quart, Flask or aiohttp app that
    forwards `kv_transfer_params` to prefill and decode) is read from its source
    (parsers/pyproxy.py): one that stores decode's `kv_transfer_params` under a client
    conversation or session id and looks at no token ids behaves like the reference proxy and
    is reported the same way, at its app (`app = FastAPI()`); one whose reuse cannot be
    classified (one-way forwarding, reuse that reads token ids, state kept elsewhere) gets at
    most an `info` note.

    ## Fix safety
    No automatic fix: turning the mode off changes latency, and replacing the router is a
    design decision.
    """

    code = "VL101"
    name = "bidirectional-behind-reference-proxy"
    severity = "error"
    fix = "none"

    def check(self, project):
        graph = graph_of(project)
        bidir = [l for l in graph.launches if (graph.kv.get(id(l)) or None) and graph.kv[id(l)].bidirectional]
        for proxy in graph.proxies:
            if proxy.flavour not in ("reference-multiturn", "vllmlint-unguarded", "custom-multiturn", "custom") \
                    or proxy.validating:
                continue
            if proxy.resolved:
                prefill = [l for l in proxy.prefill if l in bidir]
                decode = [l for l in proxy.decode if l in bidir]
            else:
                prefill = [l for l in bidir if graph.role(l) in ("kv_producer", "kv_both")]
                decode = [l for l in bidir if graph.role(l) in ("kv_consumer", "kv_both")]
            if not prefill or not decode:
                continue
            where = ", ".join(f"{l.file.display}:{l.line}" for l in prefill + decode)
            if proxy.flavour == "custom":
                # a proxy app we read but cannot classify: never more than a note
                yield self.finding(
                    proxy.launch.file, proxy.launch.span,
                    "bidirectional_kv_xfer behind a custom P/D proxy: check that it attaches decode's "
                    "kv_transfer_params only to exact token continuations",
                    severity="info",
                    detail=f"Bidirectional P and D: {where}. This proxy forwards kv_transfer_params, but how it "
                           f"reuses decode's blocks could not be told from its code ({proxy.launch.via}). "
                           f"NixlConnector pairs blocks by position: a reuse keyed by conversation id alone gives "
                           f"wrong answers when history is edited; `vllmlint router` checks token-id continuation. "
                           f"Mark a proxy that checks with VLLMLINT_VALIDATING_ROUTER=1.")
                continue
            behind = ("`vllmlint router --policy unguarded` (meant for replay)"
                      if proxy.flavour == "vllmlint-unguarded" else
                      "a proxy that reuses decode's KV by conversation id"
                      if proxy.flavour == "custom-multiturn" else "vLLM's reference multi-turn proxy")
            message = (f"bidirectional_kv_xfer behind {behind}: edited chat history gets wrong answers; "
                       f"turn it off or use `vllmlint router`")
            detail = (f"Bidirectional P and D: {where}. NixlConnector pairs blocks by position and the proxy "
                      f"reuses decode's blocks by the client's conversation_id without checking that the new prompt "
                      f"continues the old one, so edited history (stripped reasoning, rewritten tool calls, "
                      f"compaction) gets wrong answers with no error; a router that checks token-id continuation "
                      f"(`vllmlint router`) reuses only true continuations.")
            if self.target < STREAMED_PARAMS and proxy.flavour == "reference-multiturn":
                detail += (f" On vLLM {self.target_str} streamed responses carry no kv_transfer_params, so this "
                           f"proxy caches nothing yet; 0.33.0 adds them and turns this into wrong answers.")
            if proxy.flavour == "custom-multiturn":
                detail += f" The proxy app: {proxy.launch.via}."
            if not proxy.resolved:
                detail += " The proxy's hosts were not all found in the tree: every bidirectional P and D counted."
            yield self.finding(proxy.launch.file, proxy.launch.span, message, detail=detail)
