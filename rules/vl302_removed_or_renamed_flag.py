from vllmlint.model.launch import Fix, remove_args
from vllmlint.lint.registry import Rule


# boolean flags whose removal keeps behaviour on the release that dropped them: request logging
# is off by default since `--enable-log-requests` replaced `--disable-log-requests`; the v2 block
# manager is the only one since `--use-v2-block-manager` went (it had been a no-op)
SAFE_TO_REMOVE = {"--disable-log-requests", "--use-v2-block-manager"}
# flags folded into `--speculative-config` (0.10): the JSON key each one became
SPECULATIVE = {"--speculative-model": "model", "--num-speculative-tokens": "num_speculative_tokens",
               "--speculative-draft-tensor-parallel-size": "draft_tensor_parallel_size",
               "--ngram-prompt-lookup-max": "prompt_lookup_max", "--ngram-prompt-lookup-min": "prompt_lookup_min",
               "--speculative-max-model-len": "max_model_len",
               "--speculative-disable-by-batch-size": "disable_by_batch_size",
               "--speculative-model-quantization": "quantization"}


class RemovedOrRenamedFlag(Rule):
    """A flag an earlier vLLM release had and the target release no longer accepts.

    ## What it does
    Reads the options of every vLLM launch (`vllm serve`, `--tokens-only`, `vllm launch render`,
    the api_server module) with vLLM's spelling rules and looks each name the target release
    does not accept up in the history of every catalogued release (0.6.6 onwards, generated
    from the wheels): a flag that existed before the target is reported with the release that
    removed it, the last release that had it and what that release said about it (its
    deprecation message). When the flag was renamed - removed in one release and added in the
    same release under another name with the same documentation, e.g.
    `--enable-mamba-fine-grained-prefix-cache` -> `--enable-mamba-shared-prefix-checkpoint` in
    0.31.0 - the fix writes the new name (also for the `--no-` form).

    ## Why
    A removed flag is an argparse error: the server does not start (`unrecognized arguments`).
    Upgrades across several releases at once meet flags removed long ago that configs copied
    from old guides still carry: `--disable-log-requests`, `--swap-space`,
    `--num-scheduler-steps`, `--use-v2-block-manager`. Where the old name is a prefix of a
    current flag, argparse silently expands it to that other flag instead.

    ## Example
    ```bash
    vllm serve $MODEL --enable-mamba-fine-grained-prefix-cache --disable-log-requests
    ```
    For 0.31.0 this becomes `--enable-mamba-shared-prefix-checkpoint`;
    `--disable-log-requests` (removed in 0.17.0; request logging is off by default since
    `--enable-log-requests` replaced it) is reported for a human to delete.

    ## Fix safety
    Safe when the flag was renamed: the new flag is the same field under a new name. Safe when
    removal keeps behaviour: `--disable-log-requests` (request logging is off by default since it
    went) and `--use-v2-block-manager` (a no-op before it went) are deleted, only together with an
    upgrade to a release that no longer has them. The speculative-decoding flags
    (`--speculative-model`, `--num-speculative-tokens`, ...) were folded into
    `--speculative-config` JSON: the finding names the key each became; deleting them would turn
    speculative decoding off, so they are never just removed. Any other flag
    removed without a successor has no fix: deleting it (and its value) may change what the
    deployment does, so that is left to a human.
    """

    code = "VL302"
    name = "removed-or-renamed-flag"
    severity = "error"
    min_version = "0.6.6"          # the oldest catalogued release
    fix = "sometimes"

    def check(self, project):
        from vllmlint.knowledge.catalogue import for_target, history, normalize
        from vllmlint.knowledge.catalogue.argv import catalogued_options

        cat = for_target(self.target)
        hist = history()
        for launch, opt in catalogued_options(project, self.target):
            if opt.match.kind == "exact" or not opt.name.startswith("--"):
                continue
            name = normalize(opt.name)
            gone = hist.flag_removed(name, self.target)
            if gone is None:
                continue
            where = opt.name_span() or opt.span or launch.span
            new = self._successor(hist, cat, name, gone, self.target)
            head = (f"`{opt.name}` was removed in vLLM {gone.removed_in} (last in {gone.last}"
                    f"{_deprecated(gone.info.get('dep'))}): vLLM {self.target_str} ")
            if opt.match.kind == "prefix":
                yield self.finding(launch.file, where, head +
                                   f"reads it as an abbreviation of `{opt.match.flag}`, another flag"
                                   + (f"; write `{new}`" if new else "; remove it"))
                continue
            if new:
                edit = opt.rename(new)
                yield self.finding(launch.file, where,
                                   head + f"refuses to start; it was renamed `{new}` in {self._renamed_in(hist, name)}",
                                   Fix([edit], f"rename to {new}") if edit else None,
                                   launches=[launch], min_release=self.target)
                continue
            if name in SPECULATIVE and "--speculative-config" in cat.options:
                yield self.finding(launch.file, where,
                                   f"`{opt.name}` was removed in vLLM {gone.removed_in}: set \"{SPECULATIVE[name]}\" "
                                   f"in --speculative-config instead (removing it turns speculative decoding off)")
                continue
            takes = gone.info.get("n", 1) != 0 and not opt.inline and opt.value is not None
            if name in SAFE_TO_REMOVE and not takes and not opt.inline:
                edits = remove_args([opt.arg])
                yield self.finding(launch.file, where,
                                   f"`{opt.name}` was removed in vLLM {gone.removed_in} (its behaviour is now the "
                                   f"default): vLLM {self.target_str} refuses to start; remove it",
                                   Fix(edits, f"remove {opt.name}") if edits else None,
                                   launches=[launch], min_release=self.target)
                continue
            yield self.finding(launch.file, where,
                               head + "refuses to start (unrecognized arguments); remove it"
                               + (" and its value" if takes else ""))

    @staticmethod
    def _successor(hist, cat, name, gone, target) -> str | None:
        base = gone.info.get("neg_of")
        renamed = hist.renamed_to(base or name, target)
        if not renamed:
            return None
        new = renamed[0]
        if base:
            new = "--no-" + new[2:]
        return new if new in cat.options else None

    @staticmethod
    def _renamed_in(hist, name) -> str:
        renamed = hist.data["renamed_flags"]
        base = hist.data["flags"].get(name, {}).get("neg_of", name)
        return renamed.get(base, {}).get("in", "?")


def _deprecated(text: str | None) -> str:
    if not text:
        return ""
    if text == "deprecated":
        return ", already deprecated there"
    text = text.strip()
    if len(text) > 100:
        text = text[:99].rstrip() + "…"
    return f", deprecated there: {text!r}"
