from vllmlint.lint.registry import Rule

PCP_FLAG = "--prefill-context-parallel-size"
PUSH = "NixlPushConnector"


class BidirectionalUnsupported(Rule):
    """`bidirectional_kv_xfer` with a combination the target vLLM release refuses at startup.

    ## What it does
    For every NixlConnector config of a launch with `bidirectional_kv_xfer` on (at the top level
    or as a MultiConnector child) it checks the combinations the target release rejects with
    `raise NotImplementedError`, as the catalogue generator found them in the release's
    NixlConnector source (`kv.bidirectional_unsupported`, each with its `file:line`):

    - `pcp`: prefill context parallel size > 1 (`--prefill-context-parallel-size` / `-pcp`,
      `prefill_context_parallel_size=` in the engine API), from the release that has the check
      (0.30.0: `connector.py:126`);
    - `push`: the push connector (`NixlPushConnector`), `push_scheduler.py`.

    The message quotes vLLM's own error text and where it is raised.

    ## Why
    The server starts loading the model and then stops with NotImplementedError when the KV
    connector is built; in a P/D deployment the other side waits for a peer that never comes.
    Bidirectional transfer tracks send and receive completions per request, which the PCP
    producer path and the push scheduler do not do yet.

    ## Example
    ```bash
    vllm serve $M -pcp 2 --kv-transfer-config \\
      '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_connector_extra_config":{"bidirectional_kv_xfer":true}}'
    ```
    On 0.30.0: "NixlConnector PCP producers do not support bidirectional KV transfer."
    (vllm/distributed/kv_transfer/kv_connector/v1/nixl/connector.py:126).

    ## Fix safety
    No fix: dropping bidirectional transfer, the context parallelism or the push connector
    changes how the deployment runs; that is a decision.
    """

    code = "VL105"
    name = "bidirectional-unsupported"
    severity = "error"
    min_version = "0.21.0"         # the first release that reads bidirectional_kv_xfer
    fix = "none"

    def check(self, project):
        from vllmlint.knowledge.catalogue import for_target
        from vllmlint.knowledge.catalogue.argv import flag_value, is_vllm, options
        from vllmlint.model.kvconfig import kv_config, truthy

        cat = for_target(self.target)
        if cat is None or not cat.bidirectional_unsupported:
            return
        t = self.target_str
        for launch in project.launches:
            if not is_vllm(launch):
                continue
            cfg = kv_config(launch)
            if cfg is None or cfg.error or cfg.unknown:
                continue
            pcp = None
            for opt in options(launch, cat):
                if opt.match.kind in ("exact", "prefix") and opt.match.base == PCP_FLAG and opt.sub is None:
                    pcp = opt                   # the last one wins, as in argparse
            pcp_size = _int(flag_value(pcp)) if pcp is not None else None
            for path, part in cfg.nixl_parts():
                extra = part.get("kv_connector_extra_config")
                if not isinstance(extra, dict) or not truthy(extra.get("bidirectional_kv_xfer")):
                    continue
                where = cfg.span(path + ("kv_connector_extra_config", "bidirectional_kv_xfer"))
                for rec in cat.bidirectional_unsupported:
                    said = f"\"{rec['text']}\" ({rec['at']})" if rec.get("text") else rec["at"]
                    if rec["when"] == "push" and part.get("kv_connector") == PUSH:
                        yield self.finding(cfg.file, where,
                                           f"bidirectional_kv_xfer with {PUSH}: vLLM {t} will not start",
                                           detail=f"It raises NotImplementedError at startup: {said}")
                    elif rec["when"] == "pcp" and pcp_size is not None and pcp_size > 1:
                        pspan = pcp.name_span() or pcp.span or launch.span
                        line = launch.file.line_col(pspan[0])[0]
                        yield self.finding(cfg.file, where,
                                           f"bidirectional_kv_xfer with prefill context parallel size {pcp_size}: "
                                           f"vLLM {t} will not start",
                                           detail=f"{pcp.name} at line {line}. It raises NotImplementedError at "
                                                  f"startup: {said}")


def _int(text):
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None
