from vllmlint.model.launch import Fix
from vllmlint.lint.registry import Rule

LEASE_KEY = "kv_lease_duration"


# top-level KVTransferConfig fields written inside the extra config: VL102 says where they belong
REPORTED_ELSEWHERE = {"kv_load_failure_policy"}


class NixlExtraConfig(Rule):
    """A NixlConnector `kv_connector_extra_config` key the target vLLM release does not read,
    a value of the wrong type, or a KV lease shorter than a request can wait.

    ## What it does
    Reads `kv_connector_extra_config` of every NixlConnector config of a launch (`NixlConnector`,
    `NixlPullConnector`, `NixlPushConnector`, at the top level or as a MultiConnector child) and
    checks each key against the keys the target release's NixlConnector reads
    (`get_from_extra_config(key, default)` in `vllm/distributed/kv_transfer/kv_connector/v1/nixl/`,
    generated from the wheels with the defaults). It reports:

    - a key an earlier release read and the target does not (`enable_cross_layers_blocks`, read
      until 0.28.0) - warning, with a fix that removes it;
    - a key only a later release reads - warning, saying which;
    - a key another connector reads (`startup_fill`: DecodeBenchConnector,
      `bootstrap_server_address`: MooncakeConnector from 0.32.0) - warning, naming it;
    - a key no release reads but close to one that is (`bidirectional_kv_transfer` for
      `bidirectional_kv_xfer`, `remote_pull_threshold` for `kv_recompute_threshold`) - warning
      with "did you mean";
    - any other key no catalogued release of NixlConnector reads - info (a plugin may read it);
    - a value whose type differs from the default's: a string for a boolean (`"false"` is a
      non-empty string, so vLLM reads it as *on*: error), a string or boolean for a number
      (`kv_lease_duration` as a string is an error: vLLM computes `kv_lease_duration // 6`;
      other keys are cast by some readers, so a numeric string is info), a string for the
      `backends` list;
    - `kv_lease_duration` below vLLM's own default (30 s) - warning with the arithmetic.

    ## Why
    `kv_connector_extra_config` is a free-form dict that nothing validates: a key NixlConnector
    does not read is ignored without a word, so the setting the operator meant (a recompute
    threshold, bidirectional transfer) is silently not in force. Prefill keeps the KV blocks of
    a finished request for `kv_lease_duration` seconds; decode extends the lease by
    `lease * 2 // 3` s with a heartbeat every `lease // 6` s, but only once its scheduler has
    picked the request up. A request that waits longer than the lease between prefill and
    decode's scheduler (the router, decode's queue behind a full batch) finds its blocks freed:
    decode then recomputes or fails (`kv_load_failure_policy`). Below 6 s the heartbeat interval
    is 0 (a heartbeat on every decode step), below 2 s a heartbeat extends nothing.

    ## Example
    ```bash
    vllm serve $M --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer",
      "kv_connector_extra_config":{"remote_pull_threshold":128,"kv_lease_duration":5,
                                   "bidirectional_kv_xfer":"false"}}'
    ```
    `remote_pull_threshold` is read by nothing (did you mean `kv_recompute_threshold`?);
    a 5 s lease frees the blocks of a request that waits 5 s for decode; `"false"` turns
    bidirectional transfer on.

    ## Fix safety
    Safe for a key an earlier release read and the target ignores: removing it changes nothing
    on the target (gated by the release the launch runs today, which may still read it). No fix
    for the others: which key or value was meant is a decision.
    """

    code = "VL104"
    name = "nixl-extra-config"
    severity = "warning"
    min_version = "0.11.0"         # the first release that reads a NixlConnector extra-config key
    fix = "sometimes"

    def check(self, project):
        from vllmlint.knowledge.catalogue import for_target
        from vllmlint.knowledge.catalogue.argv import is_vllm
        from vllmlint.model.kvconfig import kv_config

        cat = for_target(self.target)
        if cat is None or not cat.nixl_extra_keys:
            return
        for launch in project.launches:
            if not is_vllm(launch):
                continue
            cfg = kv_config(launch)
            if cfg is None or cfg.error or cfg.unknown:
                continue
            for path, part in cfg.nixl_parts():
                extra = part.get("kv_connector_extra_config")
                if not isinstance(extra, dict):
                    continue
                for key, value in extra.items():
                    kpath = path + ("kv_connector_extra_config", key)
                    if key in REPORTED_ELSEWHERE:
                        continue
                    if key in cat.nixl_extra_keys:
                        yield from self._value(launch, cfg, kpath, key, value, cat)
                    else:
                        yield from self._unknown(launch, cfg, kpath, key, cat)

    # -- a key the target does not read --------------------------------------------------------
    def _unknown(self, launch, cfg, kpath, key, cat):
        from vllmlint.knowledge.catalogue import history
        from vllmlint.model.kvconfig import move_member_edits

        hist = history()            # read here: most configs hold no key the target does not read
        t = self.target_str
        where = cfg.span(kpath)
        head = f"`{key}` in NixlConnector's kv_connector_extra_config"
        gone = hist.nixl_key_removed(key, self.target)
        if gone:
            edits = move_member_edits(cfg, kpath, to_top=False)
            yield self.finding(cfg.file, where,
                               f"{head} is ignored from vLLM {gone.removed_in} on" + (": remove it" if edits else ""),
                               Fix(edits, f"remove {key}") if edits else None,
                               launches=[launch], min_release=self.target,
                               detail=f"Last read in {gone.last}; vLLM {t} ignores it without a word.")
            return
        readers = [c for c in cat.other_extra_keys.get(key, []) if c != "MultiConnector"]
        if readers:
            yield self.finding(cfg.file, where,
                               f"{head} is read by {' / '.join(readers)}, not by NixlConnector: ignored here",
                               detail=f"vLLM {t} ignores it without a word.")
            return
        added = hist.nixl_key_added_after(key, self.target)
        if added:
            yield self.finding(cfg.file, where, f"{head} is read from vLLM {added} on: {t} ignores it",
                               detail=f"vLLM {t} ignores it without a word.")
            return
        import difflib           # only for a misspelt key

        close = difflib.get_close_matches(key, sorted(cat.nixl_extra_keys), n=1, cutoff=0.68)
        if close:
            yield self.finding(cfg.file, where,
                               f"{head} is never read by NixlConnector: did you mean `{close[0]}`?",
                               detail=f"vLLM {t} ignores an unknown key without a word.")
            return
        if hist.ever("nixl_extra_keys", key):
            return
        yield self.finding(cfg.file, where,
                           f"{head} is read by no NixlConnector release: ignored unless a plugin reads it",
                           severity="info",
                           detail=f"Keys vLLM {t} reads: {', '.join(sorted(cat.nixl_extra_keys))}.")

    # -- a key it reads: the value -------------------------------------------------------------
    def _value(self, launch, cfg, kpath, key, value, cat):
        default = _literal(cat.nixl_extra_defaults.get(key))
        where = cfg.span(kpath)
        at = cat.nixl_extra_keys.get(key, "")
        t = self.target_str
        if isinstance(default, bool):
            if isinstance(value, str):
                reads = "on" if value else "off"
                meant_off = value.strip().lower() in ("false", "0", "no", "off", "")
                yield self.finding(cfg.file, where,
                                   f"`{key}` is the string {value!r}, which turns it {reads}: write a JSON boolean",
                                   severity="error" if meant_off and value else "info",
                                   detail=f"vLLM {t} uses the value as it is ({at}): a non-empty string is true.")
            elif not isinstance(value, bool) and value is not None:
                yield self.finding(cfg.file, where,
                                   f"`{key}` is {_kind(value)}, not a boolean (default {_show(default)}, {at})")
            return
        if isinstance(default, (int, float)):
            if key == LEASE_KEY and isinstance(value, str):
                yield self.finding(cfg.file, where,
                                   f"`{key}` is {_kind(value)}, not a number: startup fails; write a JSON number",
                                   severity="error",
                                   detail=f"vLLM {t} divides it as it is (`kv_lease_duration // 6`, read at {at}): "
                                          f"a TypeError at startup.")
                return
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                numeric = isinstance(value, str) and _literal(value.strip()) is not None and \
                    isinstance(_literal(value.strip()), (int, float))
                yield self.finding(cfg.file, where,
                                   f"`{key}` is {_kind(value)}, not a number: write a JSON number",
                                   severity="info" if numeric else None,
                                   detail=f"Default {_show(default)} ({at}). "
                                          + ("vLLM casts some keys to a number and computes with others as they are."
                                             if numeric else f"vLLM {t} computes with it and fails at startup or "
                                                             f"misreads it."))
                return
            if key == LEASE_KEY:
                yield from self._lease(cfg, where, value, default, at)
            return
        if isinstance(default, list) and not isinstance(value, list):
            yield self.finding(cfg.file, where,
                               f"`{key}` is {_kind(value)}, not a list (default {_show(default)}, {at})")

    def _lease(self, cfg, where, value, default, at):
        if value >= default:
            return
        beat, extend = int(value // 6), int(value * 2 // 3)
        detail = (f"decode's heartbeat every {beat} s (lease // 6) extends it by {extend} s (lease * 2 // 3)"
                  if beat > 0 else
                  f"the heartbeat interval is lease // 6 = 0 (one on every decode step) and each extends "
                  f"the lease by lease * 2 // 3 = {extend} s")
        yield self.finding(cfg.file, where,
                           f"`{LEASE_KEY}` {_show(value)} s is under vLLM's default {_show(default)}: a request "
                           f"waiting longer loses its KV",
                           detail=f"Default at {at}. Prefill frees a finished request's KV blocks after "
                                  f"{_show(value)} s unless decode's scheduler has picked the request up: a request "
                                  f"that waits longer in the router or in decode's queue loses its KV and decode "
                                  f"recomputes or fails (kv_load_failure_policy); {detail}")


def _literal(text):
    if text is None:
        return None
    import ast          # here: most launches carry no NIXL extra config to read
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _show(value) -> str:
    import json

    return json.dumps(value)
