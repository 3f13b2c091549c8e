import functools
import json
import re

from vllmlint.model.launch import ENGINE, Fix
from vllmlint.lint.registry import Rule
from vllmlint.model.lazyre import lazy_re

PLAIN = lazy_re(r"^[\w.:/+@%-]+$")
_MISSING = object()


class DefaultChanged(Rule):
    """A flag the launch does not set whose default differs between the vLLM release it runs
    today and the target release.

    ## What it does
    For every vLLM launch whose release today is known (its image tag or a `vllm==` pin, see
    `vllmlint launches`) and older than the target, compares the default of every flag of the
    target release with the default the same flag has in today's release, both read from the
    catalogue generated from the wheels (the config class field behind the flag). A flag the
    launch does not set whose default differs is reported (info), with the release that changed
    it: `--allowed-origins` goes from `["*"]` to `[]` in 0.32.0, `--tool-strict-level` from
    `"auto"` to `None` (decided at run time) in 0.33.0, `--gpu-memory-utilization` from `0.92`
    to `None` in 0.34.0 (1.0 with the extensible KV cache on CUDA and ROCm: leave it unset unless
    the GPU is shared; what a `None` means and what to do come from the catalogue's researched
    notes, `notes.json`, with evidence). A flag and its alias (`--device-memory-utilization`)
    are one finding. Only literal defaults are compared, and
    `None`, `""`, `[]` and `{}` count as the same "not set";
    deprecated flags, JSON config flags, server-only flags of engine-API launches, and launches
    whose options are partly built at run time (`$EXTRA_ARGS`, `--config FILE`) are left out (a
    flag's value or the served model known only then, `--port $PORT`, `vllm serve "$MODEL"`,
    leaves the other flags unset all the same: those launches are read).
    A launch older than every catalogued release (`vllm/vllm-openai:v0.5.0`) is compared from the
    oldest one, 0.6.6 (the message says so), and nothing is pinned for it: its own default may
    differ.

    `vllmlint migrate` lists these under "Changes behaviour silently"; `migrate --keep-defaults`
    pins the old value on each launch (`--allowed-origins '["*"]'`), so the upgrade changes
    nothing that was not asked for.

    ## Why
    A flag the config never sets changes behaviour on upgrade and nothing says so: with 0.32.0
    `--allowed-origins` defaults to no origin, so CORS is closed and a browser front end stops
    working, with no error on the server.

    ## Example
    ```yaml
    image: vllm/vllm-openai:v0.31.0
    command: ["--model", "Qwen/Qwen3-8B"]
    ```
    With `--target-version 0.32.0`: `--allowed-origins` is not set: its default changes from
    `["*"]` (0.31.0, today) to `[]` (0.32.0).

    ## Fix safety
    `check --fix` changes nothing (the finding is information). `migrate --keep-defaults` adds
    the flag with the old default, which is what the launch does today, so the fix never changes
    what today's release does; values that cannot be written as one plain token (or need
    shell quoting outside a shell script), defaults of `None` and engine-API launches are left
    for a human. Never pinned: an old default the target refuses, a value its choices dropped
    (`--prefix-caching-hash-algo=builtin` from 0.10.2) or a class of a module it no longer has
    (the V0 `--scheduler-cls=vllm.core.scheduler.Scheduler`): that flag would stop the target at
    startup, so the finding says nothing keeps today's behaviour there.
    """

    code = "VL307"
    name = "default-changed"
    severity = "info"
    min_version = "0.6.6"          # the oldest catalogued release
    fix = "sometimes"

    def check(self, project):
        from vllmlint.knowledge.catalogue import for_target, load, release_for
        from vllmlint.knowledge.catalogue.argv import is_vllm, options
        from vllmlint.knowledge.catalogue.notes import default_note
        from vllmlint.knowledge.versions import fmt

        new = for_target(self.target)
        if new is None:
            return
        keep = bool(self.options.get("keep_defaults"))
        # a chain's pin must also start the release the chain ends on (migrate's FINAL_TARGET):
        # pinned at step 0.12.0, `--scheduler-cls=vllm.core.scheduler.Scheduler` stopped 0.33.0
        # (found as a user on KempnerInstitute/distributed-inference-vllm)
        final = self.options.get(FINAL_TARGET)
        final_cat = for_target(final) if final and tuple(final) != tuple(self.target) else None
        t = self.target_str
        for launch in project.launches:
            if not is_vllm(launch) or launch.release is None or launch.release >= self.target:
                continue
            today = release_for(launch.release)
            # older than every catalogued release (vllm/vllm-openai:v0.5.0): the defaults compared
            # are the oldest release's, and no value is pinned (today's may differ from it)
            before_all = today is None
            if before_all:
                today = _oldest()
            if today is None or today == new.version:
                continue
            old = load(today)
            opts = options(launch, new)
            old_opts = options(launch, old)
            if _built_at_run_time(launch, opts + old_opts) or any(
                    o.match.base == "--config" for o in opts if o.match.kind in ("exact", "prefix")):
                continue                # options built at run time or read from a file: unknown
            given = {o.match.base for o in opts if o.match.kind in ("exact", "prefix")}
            given |= {o.match.base for o in old_opts if o.match.kind in ("exact", "prefix")}
            if launch.model() is not None or _model_slot(launch) is not None:
                given.add("--model")    # `vllm serve M`: the positional is the model (found as a user
                #                         on jameszhu-pixel-time/Openeval: --keep-defaults added a second)
            said = set()
            for flag, entry, before, was, now, changed_in in _changed_defaults(old, new):
                names = {flag, *entry.get("alias", ())}     # 0.34.0: --gpu- and --device-memory-utilization
                if names & given or names & said:
                    continue
                said |= names
                if launch.kind == ENGINE and str(entry.get("cfg", "")).startswith("FrontendArgs"):
                    continue
                where = f"{entry['cfg']}, {entry['at']}" if entry.get("cfg") else entry.get("at", "")
                item = None if before_all else _pin(flag, was, before)
                how = f"set `{_as_written(item, launch)}` to keep it" if item else "set it to keep today's behaviour"
                gone = _not_accepted(was, entry, new)
                if gone:
                    item, how = None, f"{gone} in vLLM {t}: nothing keeps today's behaviour there"
                # researched: what the new default means (an added release's notes are its number's)
                note = default_note(new.version if changed_in == new.name else changed_in, flag)
                if note and note.get("say"):
                    how = note["say"].replace("--device-memory-utilization", flag).replace(
                        "--gpu-memory-utilization", flag)
                fix = None
                token = _written(item, launch) if item and launch.kind != ENGINE and not launch.not_editable else None
                if keep and token and not _pin_starts(flag, was, final_cat, new):
                    token = None
                if keep and token:
                    edit = launch.append_edit(token)
                    if edit is not None:
                        fix = Fix([edit], f"pin {flag} to today's default")
                if keep and fix is None and not gone:
                    how += " (not pinned automatically: set it by hand)"
                maybe = " - vLLM then picks the value at run time, which may still be the old one" \
                    if now is None else ""
                if note:
                    maybe = (f": {note.get('means', '')}; {note.get('advice', '')}"
                             f" (evidence: {'; '.join(note.get('evidence', [])[:3])})")
                since = f" ({today}'s, the oldest release vllmlint knows)" if before_all else ""
                today_is = (f"This launch runs vLLM {fmt(launch.release)} ({launch.release_from}), older than "
                            f"every release vllmlint knows: the old default is that of {today}") if before_all \
                    else f"Today's default is that of vLLM {fmt(launch.release)}, which this launch runs ({launch.release_from})"
                yield self.finding(launch.file, launch.span,
                                   f"`{_as_written(flag, launch)}` is not set: its default changes from {_show(was)}{since} to {_show(now)} "
                                   f"in vLLM {changed_in}; {how}", fix,
                                   detail=f"{today_is}; the new one is read at {where}{maybe}"
                                          + ("" if changed_in == t else f"; the target is {t}") + ".")


FINAL_TARGET = "final_target"     # a run option: the release a migrate chain ends on


def _as_written(token: str, launch) -> str:
    """A flag or `--flag=value` as the launch writes it: an engine call's keyword
    (`LLM(gpu_memory_utilization=0.9)`, `async_scheduling=False`), else the flag. Found as a
    user on eun2ce/sagemaker-vllm-deployment: "set `--ignore-patterns=[]`" on an `LLM(...)` call."""
    from vllmlint.parsers.pyengine import as_written

    return as_written(token, launch.kind == ENGINE)


def _pin_starts(flag: str, was, final_cat, step_cat) -> bool:
    """Whether pinning today's value is known to start vLLM on the step's release and on the
    one the chain ends on: the flag is still there, the value still one of its choices, and a
    class it names still exists where that is known. A class path on a release whose modules
    the catalogue does not list (before 0.27.0) is not pinned: nothing says it is still there."""
    for cat in (step_cat, final_cat):
        if cat is None:
            continue
        entry = cat.flags.get(flag)
        if entry is None or entry.get("dep") or _not_accepted(was, entry, cat):
            return False
        if _class_path(was) and not cat.has_modules:
            return False
    return True


def _built_at_run_time(launch, opts) -> bool:
    """Some of its options are built at run time: a token known only then that is not the value
    of a flag read (`--port $PORT`, `--port={port}` set the port; `$EXTRA_ARGS` and `"$@"` may
    set any flag, so nothing can be said of the flags it leaves unset). Found as a user on
    zeuscsc/OpenReinforcedAgent: an f-string `docker run` whose `--port {port}` hid every
    default change of the launch."""
    values = set()
    for o in opts:
        if o.match.kind in ("exact", "prefix"):
            values.add(id(o.arg) if o.inline else id(o.value) if o.value is not None else None)
    model = _model_slot(launch)
    if model is not None:
        values.add(id(model))
    return any(a.dynamic and id(a) not in values for a in launch.options)


_MODEL_VAR = re.compile(r"^\$\{?\w*(?:MODEL|CKPT|CHECKPOINT|WEIGHTS)\w*", re.IGNORECASE)


def _model_slot(launch):
    """`vllm serve $MODEL_PATH ...`: the positional model, known only at run time (found as a
    user on KempnerInstitute/distributed-inference-vllm, where 8 of 11 scripts read so). A word
    there is the model when it is one word (quoted, `"$X"`) or names a model (`$MODEL_PATH`);
    an unquoted `$VLLM_ARGS` may be any flags."""
    i = launch.options_start
    if launch.kind != "serve" or i >= len(launch.argv):
        return None
    arg = launch.argv[i]
    if not arg.dynamic or arg.value.startswith("-"):
        return None
    return arg if not arg.splits or _MODEL_VAR.match(arg.value) else None


def _oldest() -> str | None:
    from vllmlint.knowledge.catalogue import versions

    found = versions()
    return found[0] if found else None


def _class_path(value) -> bool:
    """A default that names a class of vLLM's (`vllm.core.scheduler.Scheduler`)."""
    return isinstance(value, str) and value.startswith("vllm.") and "." in value[5:]


def _not_accepted(was, entry: dict, new) -> str:
    """Why today's default cannot be set on the target (a value its choices dropped, a class of a
    module it no longer has), else "": pinning it would stop vLLM at startup (found as a user:
    `--prefix-caching-hash-algo=builtin` and the V0 `--scheduler-cls` were advised for 0.33.0)."""
    choices = entry.get("choices")
    if choices and isinstance(was, (str, int)) and not isinstance(was, bool) and str(was) not in map(str, choices):
        return "that value is not one of its choices"
    if _class_path(was) and new.has_modules and not new.has_module(was.rsplit(".", 1)[0]):
        return "that class does not exist"
    return ""


@functools.lru_cache(maxsize=None)
def _changed_defaults(old, new) -> tuple:
    """Every flag of the target's catalogue `new` whose default differs from `old`'s (today's),
    with the first release in between that changed it: (flag, entry, before, was, now,
    changed_in). The same for every launch on `old`, so computed once per pair of catalogues
    (it parses every default); keyed on the objects, so an added release (`vllmlint catalogue
    add`, not a file of the package) is compared like a built-in one."""
    from vllmlint.knowledge.catalogue import load, versions, vkey

    between = [v for v in versions() if old.vtuple < vkey(v) <= new.vtuple]
    out = []
    for flag, entry in new.flags.items():
        if entry.get("dep") or new.json_flag(flag):
            continue
        named = "--" + str(entry.get("cfg", "")).rpartition(".")[2].replace("_", "-")
        if flag != named and named in entry.get("alias", ()) and named in new.flags:
            continue            # one setting, two names: reported under its field's (--gpu-memory-utilization)
        before = old.flags.get(flag)
        if before is None or before.get("dep"):
            continue
        if before.get("default") == entry.get("default"):
            continue            # the same text reads as the same value: nothing to parse (most flags)
        was, now = default_value(before.get("default")), default_value(entry.get("default"))
        if was is _MISSING or now is _MISSING or was == now or (_empty(was) and _empty(now)):
            continue
        changed_in = next((v for v in between
                           if default_value(load(v).flags.get(flag, {}).get("default")) != was), new.name)
        out.append((flag, entry, before, was, now, changed_in))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def default_value(text):
    """The literal a default's source text stands for: `Field(default=1, ge=1)` -> 1,
    `field(default_factory=list)` -> [], `field(default_factory=lambda: ["*"])` -> ["*"];
    _MISSING when it is computed (a function, an env var, a constant)."""
    if text is None or "…" in text:
        return _MISSING
    import ast          # here: a run whose launches meet no changed default never parses one
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _MISSING
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("Field", "field"):
        for kw in node.keywords:
            if kw.arg == "default":
                node = kw.value
                break
            if kw.arg == "default_factory":
                f = kw.value
                if isinstance(f, ast.Name) and f.id in ("list", "dict"):
                    return [] if f.id == "list" else {}
                if isinstance(f, ast.Lambda):
                    node = f.body
                    break
                return _MISSING
        else:
            return _MISSING
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _MISSING


def _empty(value) -> bool:
    """None, "", [] and {}: "not set" however a release spells it."""
    return value is None or (not isinstance(value, bool) and value in ("", [], {}))


def _show(value) -> str:
    if value is None:
        return "`None`"
    try:
        return f"`{json.dumps(value)}`"
    except (TypeError, ValueError):
        return f"`{value!r}`"


def _pin(flag, value, entry):
    """The argv item that sets `flag` to `value` for today's release (unquoted), or None."""
    if value is None:
        return None
    if isinstance(value, bool):
        if entry.get("n") == 0 or entry.get("neg"):
            if value:
                return flag
            negs = entry.get("neg") or []
            return negs[0] if negs else None
        return f"{flag}={'true' if value else 'false'}"
    return f"{flag}={value if isinstance(value, str) else json.dumps(value)}"


def _written(item: str, launch) -> str | None:
    """`item` as it must be written at the launch's append site, or None when that is not
    certain (the site's quoting is known only for these shapes)."""
    site = launch.append_site
    if site is None:
        return None
    if PLAIN().match(item):
        return item
    template = site.template
    if '"{}"' in template:                      # JSON, YAML flow/double-quoted, Python "..."
        return json.dumps(item)[1:-1]
    if "'{}'" in template:                      # YAML or Python single-quoted
        return item if "'" not in item and "\\" not in item else None
    if template == " {}" and launch.file.kind == "shell":
        import shlex                            # here: most runs never quote a pinned default

        return shlex.quote(item)
    if template.rstrip().endswith("- {}") and not re.search(r": | #|^[\[\]{}&*!|>'\"%@`#,?:]|^- ", item):
        return item                             # a YAML block list item, plain
    return None
