from vllmlint.model.launch import Fix
from vllmlint.lint.registry import Rule

KV_FLAG = "--kv-transfer-config"      # its top-level keys are VL103's


class JsonConfigKey(Rule):
    """A key the target vLLM release does not accept in a JSON config flag, or a NixlConnector
    extra-config key it no longer reads.

    ## What it does
    Reads the JSON value of every JSON config flag of a vLLM launch (`--compilation-config`,
    `--attention-config`, `--speculative-config`, `--kernel-config`, `--structured-outputs-config`,
    ... - every flag the target release types as a config class, in every spelling: one JSON
    token, `--flag=JSON`, dotted sub-flags such as `--compilation-config.mode 3`) and checks
    each top-level key against the fields the generated catalogue lists for that release
    (error), naming the release that removed it or the one that added it. The top-level keys of
    `--kv-transfer-config` are VL103's, which reads the same per-release field lists. Inside
    NixlConnector's `kv_connector_extra_config` (also nested in a MultiConnector) it reports
    keys an earlier release read and the target no longer does, such as
    `enable_cross_layers_blocks` (read until 0.28.0), and keys that are never read but close to
    one that is (warnings).

    ## Why
    vLLM's config classes forbid unknown fields (pydantic `extra="forbid"`): a removed or
    misspelled key stops the server at startup with a validation error. `--attention-config`
    lost `use_fp4_indexer_cache` in 0.30.0 and `--kernel-config` lost
    `enable_bf16x3_router_gemm`. `kv_connector_extra_config` is a free-form dict nobody
    validates, so a key NixlConnector stopped reading is silently ignored.

    ## Example
    ```bash
    vllm serve $M --attention-config '{"use_fp4_indexer_cache": true}' \\
      --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer",
                             "kv_connector_extra_config":{"enable_cross_layers_blocks":true}}'
    ```
    On 0.30.0 `use_fp4_indexer_cache` stops the server (use `"indexer_kv_dtype": "mxfp4"`);
    `enable_cross_layers_blocks` is ignored and is removed by the fix.

    ## Fix safety
    Safe for a dead NixlConnector extra-config key: the target ignores it, so removing the
    member changes nothing but the noise. No fix for a top-level key: what replaces it (if
    anything) is a decision.
    """

    code = "VL305"
    name = "json-config-key"
    severity = "error"
    min_version = "0.6.6"          # the oldest catalogued release
    fix = "sometimes"

    def check(self, project):
        import difflib

        from vllmlint.knowledge.catalogue import for_target, history
        from vllmlint.knowledge.catalogue.argv import is_vllm, json_keys, options

        cat = for_target(self.target)
        if cat is None:
            return
        hist = history()
        t = self.target_str
        for launch in project.launches:
            if not is_vllm(launch):
                continue
            for opt in options(launch, cat):
                m = opt.match
                if m.kind not in ("exact", "prefix") or m.base == KV_FLAG:
                    continue
                spec = cat.json_flag(m.base)
                if spec is None:
                    continue
                for key in json_keys(opt) or []:
                    if key.key in spec["fields"]:
                        continue
                    where = key.span or opt.span or launch.span
                    head = f"`{key.key}` is not a field of {spec['class']} ({m.base}) in vLLM {t}"
                    gone = hist.json_field_removed(m.base, key.key, self.target)
                    added = None if gone else self._added(hist, m.base, key.key)
                    if gone:
                        why = f": it was removed in {gone.removed_in} (last in {gone.last})"
                    elif added:
                        why = f": it is new in {added}"
                    else:
                        close = difflib.get_close_matches(key.key, list(spec["fields"]), n=1, cutoff=0.75)
                        why = f" (did you mean `{close[0]}`?)" if close else ""
                    yield self.finding(launch.file, where,
                                       head + why + "; the server refuses to start (unknown fields are forbidden)")
            yield from self._nixl(launch, cat, hist)

    def _added(self, hist, flag, key):
        runs = hist.data["json_fields"].get(flag, {}).get(key)
        for first, _ in runs or []:
            if hist.vt(first) > tuple(self.target):
                return first
        return None

    def _nixl(self, launch, cat, hist):
        import difflib

        from vllmlint.model.kvconfig import kv_config, move_member_edits

        cfg = kv_config(launch)
        if cfg is None or cfg.error or cfg.unknown:
            return
        known = set(cat.nixl_extra_keys)
        if not known:
            return
        for path, part in cfg.nixl_parts():
            extra = part.get("kv_connector_extra_config")
            if not isinstance(extra, dict):
                continue
            for key in extra:
                if key in known:
                    continue
                kpath = path + ("kv_connector_extra_config", key)
                gone = hist.nixl_key_removed(key, self.target)
                if gone:
                    edits = move_member_edits(cfg, kpath, to_top=False)
                    yield self.finding(cfg.file, cfg.span(kpath),
                                       f"`{key}` in kv_connector_extra_config is no longer read by NixlConnector "
                                       f"(last read in {gone.last}, ignored from {gone.removed_in}): vLLM "
                                       f"{self.target_str} silently ignores it" + ("; remove it" if edits else ""),
                                       Fix(edits, f"remove {key}") if edits else None, severity="warning",
                                       launches=[launch], min_release=self.target)
                    continue
                close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
                if close:
                    yield self.finding(cfg.file, cfg.span(kpath),
                                       f"`{key}` in kv_connector_extra_config is never read by NixlConnector in vLLM "
                                       f"{self.target_str} (did you mean `{close[0]}`?): it is silently ignored",
                                       severity="warning")
