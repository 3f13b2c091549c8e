from vllmlint.model.launch import Fix
from vllmlint.lint.registry import Rule


# An abbreviation is rewritten to the flag it expands to only when it holds most of that flag
# (`--max-num-seq` -> `--max-num-seqs`); a stub such as `--v` or `--en` that argparse happens to
# expand to one long flag today was almost certainly meant as something else.
MEANT_SHARE = 0.6


def _meant(written: str, flag: str) -> bool:
    return len(written.lstrip("-")) >= MEANT_SHARE * len(flag.lstrip("-"))


def _compilation_shorthand(opt, cat) -> str | None:
    """`-O.cudagraph_mode` written for vLLM <= 0.11, where `-O` was `--compilation-config`'s alias:
    the long dotted spelling of the same field, when the target's `-O` is no longer that alias
    (found on nebius/nebius-ps-services: `-O.cudagraph_mode=NONE` beside a v0.11.0 image)."""
    if not opt.name.startswith("-O.") or len(opt.name) < 4 or "--compilation-config" not in cat.options:
        return None
    if cat.options.get("-O") == "--compilation-config":
        return None
    return "--compilation-config" + opt.name[2:]


class UnknownFlag(Rule):
    """A flag the target vLLM release does not accept (or accepts only as an abbreviation).

    ## What it does
    Reads the options of every `vllm serve`, `vllm serve --tokens-only`, `vllm launch render`
    and `python -m vllm.entrypoints.openai.api_server` launch the way vLLM's own parser does
    (`--max_model_len` is `--max-model-len`, `--no-` forms of boolean flags, dotted JSON
    sub-flags such as `--kv-transfer-config.kv_role`, short aliases such as `-tp`, `-O3`) and
    checks each option name against the generated catalogue of the target release
    (`vllmlint/catalogue/vllm-X.json`). It reports names no release up to the target ever had
    (with "did you mean"), names that only a newer release has, names that are ambiguous
    abbreviations, and - as a warning - unambiguous abbreviations such as `--max-num-seq`, which
    argparse expands silently. Flags removed or renamed in an earlier release are VL302's.
    On an image that carries a vLLM plugin with flags of its own (`vllm/vllm-omni`,
    `vllm-ascend`: the list is in `vllmlint/knowledge/images.py`), a name vLLM does not know may be
    the plugin's: that is `info`, never an error.

    ## Why
    vLLM parses its options with argparse: an unknown option stops the server at startup with
    `unrecognized arguments`, an ambiguous abbreviation with `ambiguous option`. An abbreviation
    that is unambiguous today is expanded to whatever flag it prefixes; when a later release adds
    a second flag with the same prefix, the same config stops starting (or starts with another
    meaning).

    ## Example
    ```yaml
    args: ["--model", "Qwen/Qwen3-8B", "--max-num-seq", "64", "--enable-chunked-prefil"]
    ```
    `--max-num-seq` is an abbreviation of `--max-num-seqs` (warning, fixed to the full name);
    `--enable-chunked-prefil` is unknown (error: did you mean `--enable-chunked-prefill`?).

    ## Fix safety
    An abbreviation that holds less than 60% of the flag it expands to (`--v=4`, read as
    `--video-pruning-rate=4`) is reported without a fix: it was almost certainly meant as
    something else.
    Safe for abbreviations: the option is rewritten to the full flag argparse already expands it
    to, so the release behaves exactly as before. Unknown and ambiguous options have no fix:
    which flag was meant is a decision. `-O.field`, written for vLLM <= 0.11 where `-O` was the
    short name of `--compilation-config` (from 0.12.0 it is `--optimization-level`), is rewritten
    to `--compilation-config.field`: safe, the same field on every release.
    """

    code = "VL301"
    name = "unknown-flag"
    severity = "error"
    min_version = "0.6.6"          # the oldest catalogued release
    fix = "sometimes"
    per_launch = True              # argv only: runs in the parse workers (Rule.per_launch)

    def check(self, project):
        from vllmlint.knowledge.catalogue import for_target, history, normalize
        from vllmlint.knowledge.catalogue.argv import inexact_options

        from vllmlint.knowledge.images import plugin_of

        cat = for_target(self.target)
        hist = history()
        for launch, opt in inexact_options(project, self.target):
            m = opt.match
            if m.kind == "exact":
                continue
            # the image its parser gave it: a KServe predictor's comes from its runtime when the
            # tree is linked, which the parse workers running this rule do not see (per_launch)
            # the image its own file names (a per-launch rule: workers run it before linking)
            plugin = plugin_of(launch.parsed_image if launch.image_source is not None else launch.image) \
                if not launch.runtime_ref else None
            if plugin and m.kind != "prefix" and hist.flag_removed(normalize(opt.name), self.target) is None:
                # the image's plugin adds flags of its own: vllmlint does not know them
                close = cat.close_flags(opt.name) if opt.name.startswith("--") else []
                yield self.finding(
                    *opt.place(launch),
                    f"`{opt.name}` is not a vLLM {self.target_str} option; it may be {plugin}'s"
                    + (f"; did you mean `{close[0]}`?" if close else ""), severity="info",
                    detail=f"Image {launch.image} carries the {plugin} plugin, which adds flags of its own; "
                           f"vllmlint does not know them.")
                continue
            name = normalize(opt.name)
            wfile, where = opt.place(launch)
            if hist.flag_removed(name, self.target) is not None:
                continue                      # VL302: removed or renamed
            if m.kind == "prefix":
                if not _meant(opt.name, m.flag):
                    # `--v=4` -> `--video-pruning-rate`: argparse would, but nobody meant that
                    yield self.finding(
                        wfile, where,
                        f"`{opt.name}` is read by vLLM {self.target_str} as `{m.flag}` (an abbreviation): "
                        f"write `{m.flag}` if that is meant, else remove it", severity="warning")
                    continue
                edit = opt.rename(m.flag)
                yield self.finding(
                    wfile, where,
                    f"`{opt.name}` abbreviates `{m.flag}`: write it out",
                    Fix([edit], f"write {m.flag}") if edit else None, severity="warning",
                    launches=[launch], min_release=self.target,
                    detail=f"vLLM {self.target_str} expands the abbreviation, but a new flag with the same "
                           f"prefix in a later release makes it ambiguous, and the server stops starting.")
                continue
            if m.kind == "ambiguous":
                yield self.finding(
                    wfile, where,
                    f"`{opt.name}` is ambiguous in vLLM {self.target_str}: the server will not start; "
                    f"write the full flag",
                    detail=f"It could be {', '.join(f'`{c}`' for c in m.candidates)} (argparse: "
                           f"`ambiguous option`).")
                continue
            moved = _compilation_shorthand(opt, cat)
            if moved:
                edit = opt.rename(moved)
                yield self.finding(
                    wfile, where,
                    f"`{opt.name}` is not a vLLM {self.target_str} option: `-O` is `--optimization-level` from "
                    f"vLLM 0.12.0 on, no longer `--compilation-config`; write `{moved}`",
                    Fix([edit], f"write {moved}") if edit else None, launches=[launch],
                    detail="Up to vLLM 0.11, `-O` was the short name of `--compilation-config`, so "
                           f"`{opt.name}` set a field of it; `{moved}` sets the same field on every release.")
                continue
            added = hist.flag_added_after(name, self.target) if name.startswith("--") else None
            if added:
                yield self.finding(
                    wfile, where,
                    f"`{opt.name}` is new in vLLM {added}: drop it or target {added} or later",
                    detail=f"vLLM {self.target_str} refuses to start with it (`unrecognized arguments`).")
                continue
            close = cat.close_flags(opt.name) if opt.name.startswith("--") else []
            hint = f"; did you mean `{close[0]}`?" if close else ""
            yield self.finding(
                wfile, where,
                f"`{opt.name}` is not a vLLM {self.target_str} option{hint}",
                detail="The server refuses to start with it (`unrecognized arguments`).")
