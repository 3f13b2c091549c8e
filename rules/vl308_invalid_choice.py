import difflib
import re

from vllmlint.lint.registry import Rule

# A run option (Rule.options): the release to check was named (`--target-version`, the settings'
# `target-version`, `migrate --to`). Without it `check` runs at the default target, which no one
# chose: a launch's values are then checked against the release it runs today, and a launch whose
# release is unknown is left alone (a value wrongly called refused would stop no one, but would
# be a false "will not start").
TARGET_EXPLICIT = "target_explicit"
# values argparse does not compare as written: vLLM's optional_type reads "" and "None" as None
# on an optional field (0.10.2+), and which releases did so is not catalogued
UNREAD_VALUES = ("", "None")
# "use --x instead" in a value's deprecation text (`--convert mm_encoder_only`, 0.14-0.15)
_USE_INSTEAD = re.compile(r"\b[Uu]se `?(--[a-z0-9][a-z0-9-]*)")
CHOICES_SHOWN = 80          # characters of the accepted values a message lists (all in the detail)
MAX_MESSAGE = 200


class InvalidChoice(Rule):
    """A flag value the vLLM release does not accept: not one of the flag's choices.

    ## What it does
    For every option of a vLLM launch whose value is written literally (not `$ALGO`,
    `{{ .Values.algo }}`, an f-string or any value known only at run time) and whose flag has a
    fixed list of choices in the catalogue of the release checked (generated from vLLM's own
    argparse definitions: `Literal` types and `choices=`), reports a value that is not among them.
    `--flag value`, `--flag=value`, an abbreviated flag and engine-API keywords
    (`LLM(prefix_caching_hash_algo="builtin")`, Ray Serve `engine_kwargs`) are read alike.
    Values are compared as argparse does: case-sensitively, and as numbers where the choices are
    numbers (`--max-lora-rank 016` is 16). The message names the release that dropped the value
    (`builtin` from `--prefix-caching-hash-algo` in 0.10.2, `all` from `--mamba-cache-mode` in
    0.32.0, `reward` from `--convert` in 0.16.0), the release that adds it when it is newer than
    the one checked, or the closest accepted value.

    The release checked is the target when one is named (`--target-version`, `target-version` in
    the settings, each step of `vllmlint migrate`); otherwise the release the launch runs today
    (its image tag or `vllm==` pin, see `vllmlint launches`), and a launch whose release is
    unknown is not checked. A release between two catalogued ones (0.8.3) accepts what either of
    them accepts; a release newer than every catalogued one is not checked. Flags whose choices
    vLLM computes at run time (quantization methods, tool and reasoning parsers on most
    releases) have none in the catalogue and are not checked, and neither are launches on an
    image that carries a vLLM plugin (`vllm-ascend`, `vllm-omni`), which may add values.

    ## Why
    argparse refuses a value outside the choices before anything else runs: the server stops at
    startup with `argument --prefix-caching-hash-algo: invalid choice: 'builtin'`, the engine API
    with a validation error. An upgrade that only bumps the image tag turns a working deployment
    into one that does not start, and a value copied from another release's guide never starts
    at all.

    ## Example
    ```yaml
    image: vllm/vllm-openai:v0.10.0
    args: ["--model", "Qwen/Qwen3-8B", "--prefix-caching-hash-algo", "builtin"]
    ```
    Fine on 0.10.0; with `--target-version 0.33.0` (or `vllmlint migrate --to 0.33.0`): vLLM
    0.33.0 will not start: `--prefix-caching-hash-algo` accepts sha256, sha256_cbor, xxhash,
    xxhash_cbor; `builtin` was removed in vLLM 0.10.2.

    ## Fix safety
    No automatic fix: which accepted value to use is a decision (a different hash algorithm, a
    different cache mode), and vLLM documents no replacement for these values. Where a value's
    deprecation named a flag to use instead (`--convert mm_encoder_only` -> `--mm-encoder-only`),
    the message says so. `vllmlint migrate` bumps the image tag or pin as it does for any
    other finding it leaves for a human, and lists this one under "Left for a human".
    """

    code = "VL308"
    name = "invalid-choice"
    severity = "error"
    min_version = "0.6.6"          # the oldest catalogued release
    fix = "none"

    def check(self, project):
        from vllmlint.knowledge.catalogue import for_target

        if self.options.get(TARGET_EXPLICIT):
            cat = for_target(self.target)
            if cat is not None:
                yield from self._check_release(project, None, self.target_str, cat, None)
            return
        # each launch at the release it runs today (grouped: one reading per release)
        from vllmlint.knowledge.versions import fmt

        by_release: dict = {}
        for launch in project.launches:
            if launch.release is not None:
                by_release.setdefault(tuple(launch.release), []).append(launch)
        for release, launches in by_release.items():
            pair = _catalogues_of(release)
            if pair is not None:
                yield from self._check_release(project, {id(l) for l in launches}, fmt(release), *pair)

    def _check_release(self, project, only, shown: str, cat, after):
        """The findings on the launches (ids in `only`; None: every launch) read by `cat`, the
        release named `shown`; `after`: the next catalogued release, for a release between two
        (a value either accepts is accepted)."""
        from vllmlint.knowledge.catalogue.argv import flag_value, launches_naming, options_among
        from vllmlint.knowledge.images import plugin_of

        flags = _choice_flags(cat)
        if not flags:
            return
        for launch in launches_naming(project, cat, flags):
            if only is not None and id(launch) not in only:
                continue
            if plugin_of(launch.image):
                continue            # a plugin may add values of its own (vllm-ascend's quantization)
            for opt in options_among(launch, cat, flags):
                value = flag_value(opt) if opt.sub is None else None
                if value is None or value in UNREAD_VALUES:
                    continue
                choices = cat.flags[opt.match.base]["choices"]
                if _accepts(value, choices):
                    continue
                if after is not None:
                    later = after.flags.get(opt.match.base, {}).get("choices")
                    if not later or _accepts(value, later):
                        continue    # the release may be one that already accepts it
                yield self._finding(launch, opt, value, choices, shown, cat)

    def _finding(self, launch, opt, value: str, choices: list, shown: str, cat):
        from vllmlint.model.launch import ENGINE
        from vllmlint.parsers.pyengine import as_written

        keyword = bool(getattr(opt.arg, "keyword_style", None))
        name = as_written(opt.match.base, True) if keyword else opt.name
        short = value if len(value) <= 40 else value[:39] + "…"
        why, said = _why(opt.match.base, value, choices, cat)
        head, tail = f"vLLM {shown} will not start: `{name}` accepts ", f"; `{short}` {why}"
        message = head + _listed(choices, min(CHOICES_SHOWN, MAX_MESSAGE - len(head) - len(tail))) + tail
        file, span = (opt.value.file, opt.value.span) if opt.value is not None and opt.value.span \
            and opt.value.file is not None else opt.place(launch)
        how = "its engine arguments refuse it (a validation error)" if keyword or launch.kind == ENGINE else \
            f"argparse stops it at startup (`argument {opt.match.base}: invalid choice: '{short}'`)"
        runs = ""
        if launch.release is not None and launch.release_from:
            from vllmlint.knowledge.versions import fmt

            runs = f" The launch runs vLLM {fmt(launch.release)} today ({launch.release_from})."
        return self.finding(file, span, message,
                            detail=f"vLLM {shown} accepts {', '.join(map(str, choices))} for {opt.match.base} "
                                   f"({cat.flags[opt.match.base].get('at', 'its catalogue')}); {how}."
                                   + (f" {said}" if said else "") + runs)


def _catalogues_of(release: tuple):
    """(the catalogue of `release`, the next catalogued release when `release` lies between
    two, else None), or None: older than every catalogued release or newer than the newest."""
    from vllmlint.knowledge.catalogue import load, release_for, versions, vkey

    floor = release_for(release)
    if floor is None:
        return None
    if vkey(floor) == tuple(release):
        return load(floor), None
    later = [v for v in versions() if vkey(v) > tuple(release)]
    if not later:
        return None                 # newer than every catalogued release: values may have been added
    return load(floor), load(later[0])


def _choice_flags(cat) -> set:
    """The flags of `cat` with a fixed list of choices (computed once per catalogue)."""
    found = cat.__dict__.get("_vl308_choice_flags")
    if found is None:
        found = cat._vl308_choice_flags = {name for name, info in cat.flags.items() if info.get("choices")}
    return found


def _accepts(value: str, choices: list) -> bool:
    """Whether argparse takes `value` for a flag with these choices: it converts the value with
    the choices' type first (vLLM's `literal_to_kwargs`: `type(options[0])`), then compares."""
    if all(isinstance(c, int) and not isinstance(c, bool) for c in choices):
        try:
            return int(value) in choices
        except ValueError:
            return False
    if all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in choices):
        try:
            return float(value) in choices
        except ValueError:
            return False
    return value in {str(c) for c in choices}


def _listed(choices: list, room: int) -> str:
    """The accepted values for a one-line message: as many as fit `room` characters."""
    shown, size = [], 0
    for c in map(str, choices):
        if shown and size + len(c) + 2 > room - 3:
            return ", ".join(shown) + ", …"
        shown.append(c)
        size += len(c) + 2
    return ", ".join(shown)


def _why(flag: str, value: str, choices: list, cat) -> tuple[str, str]:
    """(what the message says of the value, a sentence for the detail): the release that removed
    it, the release that adds it, or the accepted value it is closest to."""
    from vllmlint.knowledge.catalogue import history, load

    hist = history()
    here = hist.vt(cat.name) if cat.name in hist.versions else cat.vtuple
    last, removed_in, added_in = None, None, None
    for v in hist.versions:
        entry = load(v).flags.get(flag) or {}
        had = entry.get("choices")
        if hist.vt(v) <= here:
            if had and _accepts(value, had):
                last, removed_in = v, None
            elif last is not None and removed_in is None and had:
                removed_in = v
        elif had and _accepts(value, had):
            added_in = v
            break
    if last is not None and removed_in is not None:
        said = (load(last).flags.get(flag) or {}).get("dep_values", {}).get(value, "")
        said = said.split(": ", 1)[1] if ": " in said and ".py:" in said.split(": ", 1)[0] else said
        detail = f"`{value}` was accepted up to vLLM {last}" + (f", deprecated there: \"{_short(said).rstrip('.')}\"." if said else ".")
        m = _USE_INSTEAD.search(said)
        if m and m.group(1) in cat.options:
            return f"was removed in vLLM {removed_in}; its deprecation said to use `{m.group(1)}`", detail
        return f"was removed in vLLM {removed_in}", detail
    if added_in is not None:
        return f"is new in vLLM {added_in}", ""
    if any(not isinstance(c, str) for c in choices):
        return "is not one of them", ""         # numbers: no spelling to be close to
    texts = [str(c) for c in choices]
    lower = {t.lower(): t for t in texts}
    close = difflib.get_close_matches(value.lower(), list(lower), n=1, cutoff=0.6)
    if close:
        return f"is not one of them; did you mean `{lower[close[0]]}`?", ""
    return "is not one of them", ""


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:159].rstrip() + "…"
