from vllmlint.lint.graph import graph_of
from vllmlint.knowledge.kvcatalogue import FAILURE_POLICIES
from vllmlint.model.kvconfig import move_member_edits
from vllmlint.model.launch import Fix
from vllmlint.lint.registry import Rule

KEY = "kv_load_failure_policy"


class KvLoadFailurePolicy(Rule):
    """`kv_load_failure_policy`: a valid value, at the top level, and not mistaken for a safeguard.

    ## What it does
    Checks `kv_load_failure_policy` in every `--kv-transfer-config`:
    a value other than `fail` or `recompute` (error: vLLM does not start); the key written
    inside `kv_connector_extra_config` (warning: never read there); `recompute` on a deployment
    with `bidirectional_kv_xfer` (info: it does not guard against mismatched multi-turn reuse).

    ## Why
    `kv_load_failure_policy` is a top-level field of `KVTransferConfig`, a
    `Literal["recompute", "fail"]` defaulting to `fail` (`v0.30 vllm/config/kv_transfer.py:103`).
    Pydantic rejects other values at startup. Keys inside `kv_connector_extra_config` are a
    free-form dict nobody validates, so a policy placed there is silently ignored and the
    default `fail` applies. Both values handle a transfer that *failed*: `fail` ends the request
    with an error, `recompute` recomputes the failed blocks on decode (with latency jitter, vLLM's
    docs warn). A multi-turn transfer of blocks for other tokens (see VL101) succeeds, so neither
    value protects against it.

    ## Example
    ```json
    {"kv_connector": "NixlConnector", "kv_role": "kv_consumer",
     "kv_connector_extra_config": {"kv_load_failure_policy": "recompute"}}
    ```
    becomes
    ```json
    {"kv_connector": "NixlConnector", "kv_role": "kv_consumer",
     "kv_connector_extra_config": {}, "kv_load_failure_policy": "recompute"}
    ```

    ## Fix safety
    Unsafe (applied with `--unsafe-fixes`): moving the key to the top level makes vLLM honour a
    policy it ignored until now, which changes how failed transfers behave. A wrong value has no
    fix: which policy you want is your call.
    """

    code = "VL102"
    name = "kv-load-failure-policy"
    severity = "error"
    fix = "unsafe"

    def check(self, project):
        graph = graph_of(project)
        for launch in graph.launches:
            cfg = graph.kv.get(id(launch))
            if cfg is None or cfg.error:
                continue
            policy = cfg.data.get(KEY)
            if KEY in cfg.data and policy not in FAILURE_POLICIES:
                yield self.finding(cfg.file, cfg.span((KEY,)),
                                   f"{KEY}={policy!r} is not a value vLLM accepts (`fail` or `recompute`): "
                                   f"the server will not start")
            for path in self._misplaced(cfg):
                edits = move_member_edits(cfg, path, to_top=KEY not in cfg.data)
                where = ".".join(str(p) for p in path[:-1])
                yield self.finding(cfg.file, cfg.span(path),
                                   f"{KEY} inside {where} is never read: move it to the top level",
                                   Fix(edits, f"move {KEY} to the top level", "unsafe") if edits else None,
                                   severity="warning", launches=[launch], min_release=(0, 13, 0),
                                   detail="vLLM reads it only at the top level of --kv-transfer-config, so the "
                                          "default `fail` applies.")
            if policy == "recompute" and cfg.bidirectional:
                yield self.finding(cfg.file, cfg.span((KEY,)),
                                   f"{KEY}=recompute does not catch wrong multi-turn answers (see VL101)",
                                   severity="info",
                                   detail="It handles transfers that fail; with bidirectional_kv_xfer a transfer "
                                          "of blocks for other tokens succeeds, so it never triggers.")

    @staticmethod
    def _misplaced(cfg):
        located = cfg.located.members if cfg.located else {}
        for path in located:
            if path[-1] == KEY and len(path) > 1 and "kv_connector_extra_config" in path:
                yield path
        for path in cfg.dotted:
            if path[-1] == KEY and len(path) > 1:
                yield path
