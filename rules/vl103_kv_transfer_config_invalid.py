from functools import lru_cache

from vllmlint.lint.graph import graph_of
from vllmlint.knowledge.kvcatalogue import KV_FIELDS, KV_ROLES, connectors, kv_fields, removed_in
from vllmlint.model.kvconfig import NIXL
from vllmlint.lint.registry import Rule


class KvTransferConfigInvalid(Rule):
    """`--kv-transfer-config` that vLLM rejects, or a P/D pair that cannot work together.

    ## What it does
    Reads `--kv-transfer-config` in every spelling (a JSON token, `--flag=JSON`,
    `--kv_transfer_config`, the JSON as its own list item, dotted sub-flags) and reports:
    malformed JSON; top-level keys the target release does not have (`kv_rank`,
    `kv_parallel_size`, `kv_buffer_size`, `kv_ip` were removed in 0.32.0); a connector name vLLM
    does not register, without `kv_connector_module_path`; `kv_connector` without `kv_role`, or a
    role that does not exist; `kv_role: kv_both` with NixlConnector (deprecated, warning); and,
    across prefill and decode of one deployment, different connectors (an error for two
    connectors built into the target release, a warning when either is a plugin connector such
    as aibrix's `AIBrixPDReuseConnector`, whose compatibility we cannot judge) or transfer modes,
    `bidirectional_kv_xfer` on only one side (bidirectional with `NixlPushConnector` is VL105's).

    ## Why
    `KVTransferConfig` forbids unknown fields, so a removed or misspelled key stops the server at
    startup; `kv_connector` without `kv_role` raises in `__post_init__`; an unregistered name
    fails with `Unsupported connector type`. The transfer mode is part of NIXL's handshake
    compatibility hash, so P and D with different modes never talk. `bidirectional_kv_xfer`
    must be set on both sides.

    ## Example
    ```bash
    vllm serve $M --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_rank":0}'
    ```
    On 0.32.0 `kv_rank` stops the server; `kv_both` is deprecated for NixlConnector: use
    `kv_producer` on prefill and `kv_consumer` on decode.

    ## Fix safety
    No automatic fix: each of these needs a decision about the deployment.
    """

    code = "VL103"
    name = "kv-transfer-config-invalid"
    severity = "error"
    fix = "none"

    def check(self, project):
        graph = graph_of(project)
        fields, known = kv_fields(self.target), connectors(self.target)
        for launch in graph.launches:
            cfg = graph.kv.get(id(launch))
            if cfg is None or cfg.unknown:
                continue
            if cfg.error:
                yield self.finding(cfg.file, cfg.span(), f"--kv-transfer-config is not valid JSON: {cfg.error}")
                continue
            yield from self._one(cfg, cfg.data, (), fields, known)
            for i, child in enumerate(cfg.extra.get("connectors") or [] if cfg.connector == "MultiConnector" else []):
                if isinstance(child, dict):
                    yield from self._one(cfg, child, ("kv_connector_extra_config", "connectors", i), fields, known)
        for producers, consumers in graph.pd_pairs():
            yield from self._pair(graph, producers, consumers, known)

    def _one(self, cfg, data, prefix, fields, known):
        for key in data:
            if key in fields:
                continue
            gone = removed_in(KV_FIELDS, key)
            if gone:
                why = f"was removed in vLLM {gone}"
            else:
                close = _close(key, frozenset(fields), 0.6)
                why = "is not a field of KVTransferConfig" + (f" (did you mean `{close[0]}`?)" if close else "")
            yield self.finding(cfg.file, cfg.span(prefix + (key,)),
                               f"`{key}` {why}: vLLM {self.target_str} will not start",
                               detail="KVTransferConfig forbids unknown fields.")
        connector, role = data.get("kv_connector"), data.get("kv_role")
        if connector and connector not in known and not data.get("kv_connector_module_path"):
            # a vLLM plugin may register it (KVConnectorFactory.register_connector): a warning, not an error
            close = _close(str(connector), frozenset(known), 0.8)
            yield self.finding(cfg.file, cfg.span(prefix + ("kv_connector",)),
                               f"connector `{connector}` is not built into vLLM {self.target_str}"
                               + (f": did you mean `{close[0]}`?" if close else
                                  ": set kv_connector_module_path if a plugin provides it"),
                               severity="warning",
                               detail="No kv_connector_module_path is set: startup fails with `Unsupported "
                                      "connector type` unless a vLLM plugin registers the connector.")
        if connector and role is None and not prefix:
            yield self.finding(cfg.file, cfg.span(prefix + ("kv_connector",)),
                               "kv_connector is set without kv_role: vLLM refuses to start")
        if role is not None and role not in KV_ROLES:
            yield self.finding(cfg.file, cfg.span(prefix + ("kv_role",)),
                               f"kv_role `{role}` is not one of {', '.join(KV_ROLES)}")
        if role == "kv_both" and connector in NIXL:
            yield self.finding(cfg.file, cfg.span(prefix + ("kv_role",)),
                               "kv_role `kv_both` is deprecated for NixlConnector: use kv_producer on prefill "
                               "and kv_consumer on decode (vLLM #33702)", severity="warning")

    def _pair(self, graph, producers, consumers, known):
        sides = [(l, graph.kv[id(l)]) for l in producers + consumers if graph.kv.get(id(l))]
        sides = [(l, c) for l, c in sides if not c.error and not c.unknown]
        if not sides:
            return
        names = {c.connector for _, c in sides if c.connector}
        first_launch, first = sides[0]
        for launch, cfg in sides[1:]:
            both_nixl = cfg.connector in NIXL and first.connector in NIXL
            if cfg.connector != first.connector and not both_nixl:
                plugins = sorted(str(c) for c in (first.connector, cfg.connector) if c and c not in known)
                if plugins:
                    # a plugin connector (aibrix, LMCache's own, a team's) may wrap or speak to a
                    # built-in one: we cannot tell, so it is a warning to look at, not an error
                    yield self.finding(cfg.file, cfg.span(("kv_connector",)),
                                       f"prefill and decode use different connectors "
                                       f"({', '.join(sorted(map(str, names)))}): check that the plugin "
                                       f"can exchange KV with the other side",
                                       severity="warning",
                                       detail=f"The other side: {first_launch.file.display}:{first_launch.line}. "
                                              f"{', '.join(plugins)} is not built into vLLM {self.target_str} "
                                              f"(a plugin, e.g. via kv_connector_module_path); whether it "
                                              f"interoperates with the other connector is up to the plugin.")
                else:
                    yield self.finding(cfg.file, cfg.span(("kv_connector",)),
                                       f"prefill and decode use different connectors "
                                       f"({', '.join(sorted(map(str, names)))}): they cannot exchange KV",
                                       detail=f"The other side: {first_launch.file.display}:{first_launch.line}.")
            elif cfg.transfer_mode != first.transfer_mode:
                yield self.finding(cfg.file, cfg.span(("kv_connector",)),
                                   f"transfer mode {cfg.transfer_mode} differs from the other side's "
                                   f"{first.transfer_mode}: NIXL's handshake rejects the pair",
                                   detail=f"The other side: {first_launch.file.display}:{first_launch.line}.")
        bidir = [(l, c) for l, c in sides if c.bidirectional]
        if bidir and len(bidir) < len([1 for _, c in sides if c.nixl_parts()]):
            on = ", ".join(f"{l.file.display}:{l.line}" for l, _ in bidir)
            for launch, cfg in sides:
                if cfg.nixl_parts() and not cfg.bidirectional:
                    yield self.finding(cfg.file, cfg.span(("kv_connector_extra_config",)),
                                       "bidirectional_kv_xfer is on for the other side but not here: set it on both",
                                       detail=f"It is on at {on}; it must be set on both prefill and decode.")


@lru_cache(maxsize=4096)
def _close(word: str, choices: frozenset, cutoff: float) -> tuple:
    """difflib's best match (asked again for the same key at every step of a migration)."""
    import difflib      # here: a run with no KV config to question never pays its import
    return tuple(difflib.get_close_matches(word, sorted(choices), n=1, cutoff=cutoff))
