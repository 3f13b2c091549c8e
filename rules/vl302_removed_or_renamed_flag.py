import functools
import json
import re

from vllmlint.model.launch import Edit, Fix, apply_edits, remove_args
from vllmlint.lint.registry import Rule


# boolean flags whose removal keeps behaviour on the release that dropped them: request logging
# is off by default since `--enable-log-requests` replaced `--disable-log-requests`; the v2 block
# manager is the only one since `--use-v2-block-manager` went (it had been a no-op)
SAFE_TO_REMOVE = {"--disable-log-requests", "--use-v2-block-manager"}
# flags folded into `--speculative-config` (0.10): the JSON key each one became (numbers: int)
SPECULATIVE = {"--speculative-model": "model", "--num-speculative-tokens": "num_speculative_tokens",
               "--speculative-draft-tensor-parallel-size": "draft_tensor_parallel_size",
               "--ngram-prompt-lookup-max": "prompt_lookup_max", "--ngram-prompt-lookup-min": "prompt_lookup_min",
               "--speculative-max-model-len": "max_model_len",
               "--speculative-disable-by-batch-size": "disable_by_batch_size",
               "--speculative-model-quantization": "quantization"}


SPECULATIVE_INTS = {"num_speculative_tokens", "draft_tensor_parallel_size", "prompt_lookup_max",
                    "prompt_lookup_min", "max_model_len", "disable_by_batch_size"}
SHELL_KINDS = {"shell", "dockerfile", "makefile", "justfile"}


# flags vLLM folded into another flag's JSON: vLLM's own deprecation warning (ModelConfig, until
# 0.11) said `--rope-scaling X` is `--hf-overrides '{"rope_scaling": X}'`; removed in 0.12.0
# (vllm-project/vllm#28006). No fix: whether the key still means the same on the target (newer
# transformers read `rope_parameters`) is the user's to check, and deleting the flag alone
# would silently drop the context extension it sets.
# `--guided-decoding-backend X` (removed in 0.12.0, its deprecation named nothing) is
# `--structured-outputs-config '{"backend": X}'` (vllm-project/vllm#22772: "use
# `--structured-outputs-config '{...}'` or `--structured-outputs-config.backend outlines`";
# found as a user on mateusz-kolodziejczyk/vllm-huggingface, where "remove it" dropped the
# backend the deployment chose). No fix: 0.8-0.9 values carried options (`xgrammar:no-fallback`).
MOVED_INTO_JSON = {"--rope-scaling": ("--hf-overrides", "rope_scaling"),
                   "--rope-theta": ("--hf-overrides", "rope_theta"),
                   "--guided-decoding-backend": ("--structured-outputs-config", "backend")}
# `--task` (removed in 0.13.0) chose the model runner and, for a pooling task on a generative
# model, the conversion; what replaces it depends on its value and on the model. vLLM 0.11.0
# vllm/config/model.py:74-78 (_RUNNER_TASKS) and 455-519 (the deprecation's hints): a generative
# task is the default ("Please remove this option"); a pooling task is `--convert X` on a model
# that only generates (`_task_to_convert`: embedding/embed -> embed, classify, reward; score ->
# classify for a classifier, else embed) and `--runner pooling` on one that also pools; `draft`
# is `--runner draft`. "Remove it" alone would serve an embedding deployment as a chat model
# (found as a user on tomasruizt/llm_app). value -> what to write instead (None: remove it).
TASK_SUCCESSORS = {"auto": None, "generate": None, "transcription": None,
                   "embed": "--convert embed", "embedding": "--convert embed",
                   "classify": "--convert classify", "reward": "--convert reward",
                   "score": "--convert classify", "draft": "--runner draft"}
# "use --X instead" / "Please use --X" in a removed flag's deprecation text: the flag it names
_USE_INSTEAD = re.compile(r"\b[Uu]se `?(--[a-z0-9][a-z0-9-]*(?:=[\w.-]*\w)?)")

FOLD = "fold the speculative flags into --speculative-config"
# A run option (Rule.options): the run neither applies an unsafe fix nor says that one exists
# (migrate: no --unsafe-fixes, no "hidden fixes" line), so the fold need not be built.
NO_UNSAFE_FIXES = "no_unsafe_fixes"
# A run option: the run applies no unsafe fix and shows none, it only counts them ("N hidden
# fixes can be enabled with `--unsafe-fixes`": `check` without that flag). The fold is planned
# and counted without its read-back (one more parse of the file: a fifth of a `check` of files
# that carry these flags); `--unsafe-fixes`, the editor and every run that writes or shows the
# fold read it back first and drop a fold that does not read back.
UNSAFE_FIXES_COUNTED_ONLY = "unsafe_fixes_counted_only"


def speculative_fix(launch, target) -> Fix | None:
    """The speculative flags of one launch folded into one `--speculative-config` JSON token, or
    None when that cannot be written exactly (see Fix safety)."""
    plan = _speculative_plan(launch, target)
    return None if plan is None else _verified(launch, *plan)


def speculative_plans(launches, target) -> dict[int, Fix | None]:
    """The fold of each launch (by id) as planned, not read back: for a run that only counts it
    (UNSAFE_FIXES_COUNTED_ONLY)."""
    out: dict[int, Fix | None] = {}
    for launch in launches:
        if id(launch) not in out:
            plan = _speculative_plan(launch, target)
            out[id(launch)] = None if plan is None else Fix(plan[0][0], FOLD, "unsafe")
    return out


def speculative_fixes(launches, target) -> dict[int, Fix | None]:
    """speculative_fix of each launch (by id), with one re-parse per file for all of its
    launches' folds instead of one per launch (a long multi-document file re-parsed once per
    launch cost O(launches x size): 92% of VL302 on bench/gen_corpus2.py's k8s files). A launch
    whose fold does not read back in the shared re-parse (or whose edits touch another launch's,
    as launches sharing a YAML anchor do) is checked alone, as speculative_fix does."""
    out: dict[int, Fix | None] = {}
    by_file: dict[int, list] = {}
    for launch in launches:
        if id(launch) in out:
            continue
        plan = _speculative_plan(launch, target)
        out[id(launch)] = None
        if plan is not None:
            by_file.setdefault(id(launch.file), []).append((launch, plan))
    for group in by_file.values():
        together = _read_back_together(group) if len(group) > 1 else set()
        for launch, plan in group:
            edit_sets, value = plan
            out[id(launch)] = Fix(edit_sets[0], FOLD, "unsafe") if id(launch) in together \
                else _verified(launch, edit_sets, value)
    return out


def _verified(launch, edit_sets, value) -> Fix | None:
    for edits in edit_sets:
        if _parses_back(launch, edits, value):
            return Fix(edits, FOLD, "unsafe")
    return None


def _read_back_together(group) -> set[int]:
    """The launches (ids) of one file whose first-choice fold reads back when every launch's
    fold is applied at once; none when two launches' edits touch."""
    edits = [(e, id(launch)) for launch, (edit_sets, _) in group for e in edit_sets[0]]
    for i, (a, la) in enumerate(edits):
        if any(la != lb and a.start <= b.end and b.start <= a.end for b, lb in edits[i + 1:]):
            return set()
    file = group[0][0].file
    plain = [e for e, _ in edits]
    ok = _folds_read_back(group, edits, _reparse_documents(file, plain, [l.span[0] for l, _ in group]))
    if len(ok) == len(group):
        return ok
    return _folds_read_back(group, edits, _reparse(file, apply_edits(file.text, plain)))


def _folds_read_back(group, edits, parsed) -> set[int]:
    if parsed is None:
        return set()
    by_start: dict = {}
    for other in parsed.launches:
        by_start.setdefault(other.span[0], other)       # the first at that place, as _parses_back
    ok = set()
    plain = [e for e, _ in edits]
    for launch, (_, value) in group:
        start = _moved_start(launch.span[0], plain)
        other = by_start.get(start) if start is not None else None
        if other is not None and _folded(other, value):
            ok.add(id(launch))
    return ok


def _moved_start(at: int, edits) -> int | None:
    """Where a launch that started at `at` starts once the edits are applied: the edits before
    it shift it (a fold of an array or variable written above its command edits text before
    the launch); None when an edit spans its start."""
    if any(e.start < at < e.end for e in edits):
        return None
    return at + sum(len(e.text) - (e.end - e.start) for e in edits if e.end <= at)


# A line `---` at column 0 always starts a YAML document (even inside a block scalar, YAML 1.2 6.5)
_DOCUMENT_START = re.compile(r"(?m)^---(?=[ \t\r\n]|$)")


def _reparse_documents(file, edits, starts: list[int]):
    """The file re-parsed with the edits applied and every YAML document that holds no edit and
    no launch start blanked out (spaces; line breaks and offsets kept), or None where that does
    not apply. Re-parsing a 20-document file to read back one document's fold cost a whole parse
    per file: the figure of VL302 on bench/gen_corpus2.py's k8s files. Only a fold that reads
    back here is taken from it; one that does not is read back from the whole file as before, so
    a document the fold needs from elsewhere (none is known) can only cost time, never a fold."""
    if file.kind not in ("yaml", "compose", "k8s"):
        return None
    text = file.text
    bounds = [m.start() for m in _DOCUMENT_START.finditer(text)]
    if len(bounds) < 2:
        return None
    cuts = ([0] if bounds[0] > 0 else []) + bounds + [len(text)]
    wanted = [e.start for e in edits] + [e.end for e in edits] + starts
    pieces, blanked = [], 0
    for a, b in zip(cuts, cuts[1:]):
        piece = text[a:b]
        if not any(a <= w < b or w == b == len(text) for w in wanted):
            head = 3 if piece.startswith("---") else 0     # its marker stays: still a document
            piece = piece[:head] + re.sub(r"[^\r\n]", " ", piece[head:])
            blanked += 1
        pieces.append(piece)
    if not blanked:
        return None
    return _reparse(file, apply_edits("".join(pieces), edits))


def _speculative_plan(launch, target):
    """(the edit sets to try, first that reads back wins; the JSON value), or None."""
    from vllmlint.knowledge.catalogue import for_target, normalize
    from vllmlint.knowledge.catalogue.argv import options

    every = options(launch, for_target(target))
    opts = [o for o in every if normalize(o.name) in SPECULATIVE]
    if not opts or launch.not_editable or any(normalize(o.name) == "--speculative-config" for o in every):
        return None
    config: dict = {}
    values = []
    for o in opts:
        # the target does not know these flags, so the option reader took no value: each takes one
        value = o.value if o.value is not None else (
            launch.argv[o.index + 1] if o.index + 1 < len(launch.argv) else None)
        if o.inline or value is None or value.dynamic or value.value.startswith("-") or o.sub \
                or getattr(o.arg, "keyword_style", None):
            return None
        values.append(value)
        key = SPECULATIVE[normalize(o.name)]
        raw = value.value
        if key == "model" and raw == "[ngram]":          # the old spelling of n-gram speculation
            config["method"] = "ngram"
            continue
        if key in SPECULATIVE_INTS:
            if not raw.isdigit():
                return None
            config[key] = int(raw)
        else:
            config[key] = raw
    value = json.dumps(config)
    first, first_value = opts[0], values[0]
    name_edit = first.rename("--speculative-config")
    if name_edit is None or first_value.span is None or first_value.file is None:
        return None
    # the other flags go with their values; neighbours in one removal (their edits must not overlap)
    runs: list[list] = []
    last = None
    for o, v in zip(opts[1:], values[1:]):
        if last is not None and o.index == last + 2:
            runs[-1] += [o.arg, v]
        else:
            runs.append([o.arg, v])
        last = o.index
    removals = []
    for run in runs:
        removal = remove_args(run)
        if removal is None:
            return None
        removals += removal
    # JSON reads best single-quoted (shell, YAML, Python); JSON syntax (a Dockerfile's exec form)
    # needs it double-quoted: the first way that parses back to exactly this argv is written
    text = first_value.file.text
    before = text[:first_value.span[0]].rstrip()
    # a JSON or YAML flow list: stay in its style (a Python list reads best single-quoted)
    in_list = before.endswith(("[", ",")) and first_value.file.kind != "python"
    tokens = (json.dumps(value), f"'{value}'") if in_list else (f"'{value}'", json.dumps(value))
    return [[name_edit, Edit(first_value.file, first_value.span[0], first_value.span[1], token)] + removals
            for token in tokens], value


def _parses_back(launch, edits, value: str) -> bool:
    """Apply the edits to a copy of the file and parse it: the launch at the same place must now
    carry `--speculative-config VALUE` and no speculative flag."""
    return _folded_at(_reparse_documents(launch.file, edits, [launch.span[0]]), launch, edits, value) \
        or _folded_at(_reparse(launch.file, apply_edits(launch.file.text, edits)), launch, edits, value)


def _folded_at(parsed, launch, edits, value: str) -> bool:
    start = _moved_start(launch.span[0], edits)
    if parsed is None or start is None:
        return False
    for other in parsed.launches:
        if other.span[0] != start:
            continue
        return _folded(other, value)
    return False


def _reparse(file, text: str):
    from vllmlint.lint.project import parse_source
    from vllmlint.model.launch import ParseError, SourceFile

    try:
        return parse_source(SourceFile(file.path, file.display, text, file.kind, file.bom))
    except (ParseError, RecursionError):
        return None


def _folded(other, value: str) -> bool:
    """`other` (a launch as re-parsed) carries `--speculative-config VALUE` and no speculative flag."""
    from vllmlint.knowledge.catalogue import normalize

    words = [a.value for a in other.argv]
    names = [normalize(w.split("=", 1)[0]) for w in words if w.startswith("--")]
    if any(n in SPECULATIVE for n in names):
        return False
    return any(w == "--speculative-config" and words[i + 1:i + 2] == [value] for i, w in enumerate(words))


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
    speculative decoding off, so they are never just removed. Their fix (unsafe: review the
    JSON, the draft model's defaults moved with it) writes one `--speculative-config` in place of
    the first of them, with every value they held (`--speculative-model M
    --num-speculative-tokens 5` -> `--speculative-config '{"model": "M",
    "num_speculative_tokens": 5}'`), quoted the way the file quotes that token, and removes the
    others; it is offered only when the launch has no `--speculative-config` yet, every value is
    written literally, and the edited file parses back to exactly that argv (where the fold is
    applied or shown: a `check` without `--unsafe-fixes` counts it as planned).
    `--rope-scaling` and `--rope-theta` went into `--hf-overrides` JSON (`"rope_scaling"`,
    `"rope_theta"`), as vLLM's own deprecation warning said: the finding names the key, with no
    fix (whether the key means the same on the target's transformers is for a human to check).
    `--guided-decoding-backend` went into `--structured-outputs-config` (`"backend"`), as the
    change that removed it said; no fix either (older values carried options after a colon).
    A removed flag whose deprecation text named another flag (`--cuda-graph-sizes` ->
    `--cudagraph-capture-sizes`, `--worker-use-ray` -> `--distributed-executor-backend=ray`)
    gets that flag in its message, or "remove it" when the launch already sets it. `--task`
    gets what its value became, as vLLM's deprecation said (`--task embed` on a model that only
    generates is `--convert embed`; a generative task is the default: remove it). Any other flag
    removed without a successor has no fix: deleting it (and its value) may change what the
    deployment does, so that is left to a human.
    """

    code = "VL302"
    name = "removed-or-renamed-flag"
    severity = "error"
    min_version = "0.6.6"          # the oldest catalogued release
    fix = "sometimes"
    per_launch = True              # argv only: runs in the parse workers (Rule.per_launch)

    def check(self, project):
        from vllmlint.knowledge.catalogue import for_target, history, normalize
        from vllmlint.knowledge.catalogue.argv import inexact_options
        from vllmlint.parsers.pyengine import as_written

        cat = for_target(self.target)
        hist = history()
        speculative_done: set[int] = set()
        pairs = list(inexact_options(project, self.target))
        folds = None        # the fold of every launch that may need one, made on first use
        fold = speculative_plans if self.options.get(UNSAFE_FIXES_COUNTED_ONLY) else speculative_fixes
        for launch, opt in pairs:
            if opt.match.kind == "exact" or not opt.name.startswith("--"):
                continue
            name = normalize(opt.name)
            gone = hist.flag_removed(name, self.target)
            if gone is None:
                continue
            wfile, where = opt.place(launch)
            new = self._successor(hist, cat, name, gone, self.target)
            # an engine call's keyword (`LLM(swap_space=4)`) is named as written, and what refuses
            # it is the engine arguments' constructor, not argparse (found as a user on
            # infinityreader/RARE)
            keyword = bool(getattr(opt.arg, "keyword_style", None))
            spell = functools.partial(as_written, keyword=keyword)
            head = f"`{spell(opt.name)}` was removed in vLLM {gone.removed_in}"
            why = (f"Last in {gone.last}{_deprecated(gone.info.get('dep'))}; vLLM {self.target_str} " + (
                f"refuses it (TypeError: unexpected keyword argument '{spell(name)}')." if keyword else
                "refuses to start with it (`unrecognized arguments`)."))
            if opt.match.kind == "prefix":
                yield self.finding(wfile, where, head +
                                   f": vLLM {self.target_str} reads it as `{opt.match.flag}`, another flag"
                                   + (f"; write `{new}`" if new else "; remove it"),
                                   detail=f"Last in {gone.last}{_deprecated(gone.info.get('dep'))}; argparse "
                                          f"expands the old name as an abbreviation of `{opt.match.flag}`.")
                continue
            if new:
                edit = opt.rename(new)
                yield self.finding(wfile, where,
                                   head + f": renamed `{spell(new)}` in {self._renamed_in(hist, name)}, write that",
                                   Fix([edit], f"rename to {new}") if edit else None,
                                   launches=[launch], min_release=self.target, detail=why)
                continue
            if name in SPECULATIVE and "--speculative-config" in cat.options:
                fix = None
                # migrate applies no unsafe fix and counts none (NO_UNSAFE_FIXES): the fold, a
                # re-parse of the file per launch, would be built and dropped at every step
                if id(launch) not in speculative_done and not self.options.get(NO_UNSAFE_FIXES):
                    speculative_done.add(id(launch))
                    if folds is None:
                        folds = fold(
                            [la for la, o in pairs if o.match.kind != "prefix" and normalize(o.name) in SPECULATIVE
                             and hist.flag_removed(normalize(o.name), self.target) is not None], self.target)
                    fix = folds.get(id(launch)) if id(launch) in folds else fold([launch], self.target).get(id(launch))
                yield self.finding(wfile, where,
                                   head + f": set \"{SPECULATIVE[name]}\" in {spell('--speculative-config')} instead",
                                   fix, launches=[launch], min_release=self.target,
                                   detail=why + " Removing it alone would turn speculative decoding off.")
                continue
            moved = MOVED_INTO_JSON.get(name)
            if moved and moved[0] in cat.options:
                flag, key = moved
                said = "vLLM's deprecation said" if name.startswith("--rope-") else "vLLM's change (#22772) said"
                yield self.finding(wfile, where, head + f": set \"{key}\" in {spell(flag)} instead",
                                   detail=why + f" {said} `{opt.name} X` is "
                                                f"`{flag} '{{\"{key}\": X}}'`; removing it alone would drop that setting.")
                continue
            takes = gone.info.get("n", 1) != 0 and not opt.inline and opt.value is not None
            if name == "--task" and "--convert" in cat.options:
                yield self.finding(wfile, where, head + f": vLLM {self.target_str} will not start; "
                                   + _task_advice(_removed_value(launch, opt), keyword), detail=why)
                continue
            instead = _named_instead(gone.info.get("dep"), cat)
            if instead and name not in SAFE_TO_REMOVE:
                already = launch.has_flag(instead.split("=", 1)[0])
                yield self.finding(wfile, where,
                                   head + f": vLLM {self.target_str} will not start; " + (
                                       f"remove it (`{spell(instead.split('=', 1)[0])}`, which its deprecation "
                                       f"named instead, is set)" if already else
                                       f"its deprecation said to use `{spell(instead)}` instead"), detail=why)
                continue
            if name in SAFE_TO_REMOVE and not takes and not opt.inline:
                edits = remove_args([opt.arg])
                yield self.finding(wfile, where,
                                   head + ": remove it (its behaviour is the default now)",
                                   Fix(edits, f"remove {opt.name}") if edits else None,
                                   launches=[launch], min_release=self.target, detail=why)
                continue
            yield self.finding(wfile, where,
                               head + f": vLLM {self.target_str} will not start; remove it"
                               + (" and its value" if takes else ""), detail=why)

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


def _removed_value(launch, opt) -> str | None:
    """The literal value of a removed flag that takes one (`--task=embed`, `--task embed`): the
    target does not know the flag, so its reading took no value."""
    from vllmlint.knowledge.catalogue.argv import flag_value

    if opt.inline:
        return flag_value(opt)
    nxt = launch.argv[opt.index + 1] if opt.index + 1 < len(launch.argv) else None
    return None if nxt is None or nxt.dynamic or nxt.value.startswith("-") else nxt.value


def _task_advice(value: str | None, keyword: bool) -> str:
    """What replaces `--task VALUE` (TASK_SUCCESSORS), as vLLM's deprecation advised, written as
    the launch writes options (`--convert embed`, or an engine call's `convert='embed'`)."""
    from vllmlint.parsers.pyengine import as_written

    def opt(flag: str, choice: str) -> str:
        return as_written(f"{flag}={choice}", True) if keyword else f"{flag} {choice}"

    pooling = opt("--runner", "pooling")
    if value not in TASK_SUCCESSORS:
        return (f"for pooling: `{opt('--convert', 'embed')}` (or classify, reward) on a generative model, "
                f"`{pooling}` on a pooling one; else remove it")
    instead = TASK_SUCCESSORS[value]
    if instead is None:
        return "remove it (a generative task is the default)"
    flag, _, choice = instead.partition(" ")
    if flag == "--convert":
        other = " (`embed` if it is no classifier)" if value == "score" else ""
        return f"use `{opt(flag, choice)}`{other} on a generative model, `{pooling}` on a pooling one"
    return f"use `{opt(flag, choice)}`"


def _named_instead(text: str | None, cat) -> str | None:
    """The flag a removed flag's deprecation text says to use instead, when the target has it."""
    m = _USE_INSTEAD.search(text or "")
    if m is None:
        return None
    return m.group(1) if m.group(1).split("=", 1)[0] in cat.options else None


def _deprecated(text: str | None) -> str:
    if not text:
        return ""
    if text == "deprecated":
        return ", already deprecated there"
    text = text.strip()
    if len(text) > 100:
        text = text[:99].rstrip() + "…"
    return f", deprecated there: {text!r}"
