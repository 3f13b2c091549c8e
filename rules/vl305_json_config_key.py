from vllmlint.lint.registry import Rule

KV_FLAG = "--kv-transfer-config"      # its top-level keys are VL103's


class JsonConfigKey(Rule):
    """A key the target vLLM release does not accept in a JSON config flag.

    ## What it does
    Reads the JSON value of every JSON config flag of a vLLM launch (`--compilation-config`,
    `--attention-config`, `--speculative-config`, `--kernel-config`, `--structured-outputs-config`,
    ... - every flag the target release types as a config class, in every spelling: one JSON
    token, `--flag=JSON`, dotted sub-flags such as `--compilation-config.mode 3`) and checks
    each top-level key against the fields the generated catalogue lists for that release
    (error), naming the release that removed it or the one that added it. The top-level keys of
    `--kv-transfer-config` are VL103's, which reads the same per-release field lists; the keys of
    NixlConnector's `kv_connector_extra_config` are VL104's.

    ## Why
    vLLM's config classes forbid unknown fields (pydantic `extra="forbid"`): a removed or
    misspelled key stops the server at startup with a validation error. `--attention-config`
    lost `use_fp4_indexer_cache` in 0.30.0 and `--kernel-config` lost
    `enable_bf16x3_router_gemm`.

    ## Example
    ```bash
    vllm serve $M --attention-config '{"use_fp4_indexer_cache": true}'
    ```
    On 0.30.0 `use_fp4_indexer_cache` stops the server (use `"indexer_kv_dtype": "mxfp4"`).

    ## Fix safety
    No fix: what replaces a removed key (if anything) is a decision.
    """

    code = "VL305"
    name = "json-config-key"
    severity = "error"
    min_version = "0.6.6"          # the oldest catalogued release
    per_launch = True              # argv only: runs in the parse workers (Rule.per_launch)
    fix = "none"

    def check(self, project):
        from vllmlint.knowledge.catalogue import for_target, history
        from vllmlint.knowledge.catalogue.argv import json_keys, launches_naming, options_among

        cat = for_target(self.target)
        if cat is None:
            return
        hist = history()
        t = self.target_str
        json_flags = cat.__dict__.get("_vl305_json_flags")
        if json_flags is None:
            json_flags = cat._vl305_json_flags = {f for f in cat.flags if f != KV_FLAG and cat.json_flag(f)}
        for launch in launches_naming(project, cat, json_flags):
            for opt in options_among(launch, cat, json_flags):
                m = opt.match
                spec = cat.json_flag(m.base)
                for key in json_keys(opt) or []:
                    if key.key in spec["fields"]:
                        continue
                    head = f"`{key.key}` is not a field of {spec['class']} ({m.base}) in vLLM {t}"
                    gone = hist.json_field_removed(m.base, key.key, self.target)
                    added = None if gone else self._added(hist, m.base, key.key)
                    if gone:
                        why = f": it was removed in {gone.removed_in} (last in {gone.last})"
                    elif added:
                        why = f": it is new in {added}"
                    else:
                        import difflib      # here: only for a key no release knows
                        close = difflib.get_close_matches(key.key, list(spec["fields"]), n=1, cutoff=0.75)
                        why = f" (did you mean `{close[0]}`?)" if close else ""
                    yield self.finding(*key.place(launch), head + why,
                                       detail="The server refuses to start: unknown fields are forbidden.")

    def _added(self, hist, flag, key):
        runs = hist.data["json_fields"].get(flag, {}).get(key)
        for first, _ in runs or []:
            if hist.vt(first) > tuple(self.target):
                return first
        return None
