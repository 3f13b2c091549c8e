import re

from vllmlint.model.launch import PROXY, Edit, Fix
from vllmlint.lint.registry import Rule

HANDLED_ELSEWHERE = {"VLLM_ENABLE_SCALE_OUT_ENDPOINTS"}      # VL001
VLLM_IMAGE_TEXT = re.compile(r"vllm/vllm-(?:openai|tpu|cpu|rocm)\b|\bvllm-openai:")
SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.:/+-]+$")
TRUTHY = {"1", "true", "yes", "on"}
FALSY = {"0", "false", "no", "off", ""}
# variables that launch wrappers read, not vLLM: KServe's huggingfaceserver passes
# VLLM_ADDITIONAL_ARGS as the launch's flags and VLLM_API_SERVER_COUNT as --api-server-count
WRAPPER_VARS = {"VLLM_ADDITIONAL_ARGS", "VLLM_API_SERVER_COUNT"}


# a file that builds vLLM from its source: vLLM's build (setup.py, CMake) reads VLLM_* variables
# no release reads at run time (VLLM_FA_CMAKE_GPU_ARCHES, VLLM_CPU_DISABLE_AVX512, ...), and
# which ones changes with every release's CMake files, which the catalogue does not read
BUILDS_VLLM = re.compile(r"\bsetup\.py\s+(?:bdist_wheel|develop|install|build)|--no-binary[= ]\S*vllm|"
                         r"git\s+clone\s[^\n]*vllm-project/vllm|\bVLLM_TARGET_DEVICE=|"
                         r"\bpip\s+install\s+(?:-\S+\s+)*(?:-e\s+|--editable\s+)?\.(?:\s|$|\[)|"
                         r"\bpython3?\s+-m\s+build\b")


def _set_for_a_build(entry) -> bool:
    """The setting comes before a command that builds vLLM from its source in the same file: a
    build reads only what is set before it (one set after the build is the runtime's)."""
    if entry.file.kind not in ("dockerfile", "shell") or not entry.span:
        return False
    return BUILDS_VLLM.search(entry.file.text, entry.span[1]) is not None


def _consumed(entry) -> bool:
    """The same file reads `$NAME` / `${NAME}` (a RUN, an entrypoint, an env-to-flag mapper), outside
    the setting itself (compose's `NAME=${NAME:-1}` passes the host's value on: not a reader)."""
    text, name = entry.file.text, entry.name
    if entry.span:
        text = text[:entry.span[0]] + text[entry.span[1]:]
    return re.search(r"\$[{(]?" + re.escape(name) + r"(?![A-Za-z0-9_])", text) is not None


def _vllm_named(project, hist) -> list:
    """(file, its settings named `VLLM_*` or read by some release): the ones this rule looks at,
    whatever the target. Kept on a project a migration reuses from step to step."""
    key = f"_vl303_named_{id(hist)}"
    found = project.__dict__.get(key)
    if found is None:
        found = [(pf, entries) for pf in project.files
                 if (entries := [e for e in pf.env if e.name.startswith("VLLM_") or hist.ever("env", e.name)])]
        if project.keep_derived:
            project.__dict__[key] = found
    return found


class RemovedEnvVar(Rule):
    """A `VLLM_*` environment variable the target vLLM release no longer reads.

    ## What it does
    Looks at every environment setting that reaches a vLLM launch (Dockerfile `ENV`, compose
    `environment`, Kubernetes `env` and ConfigMaps through `envFrom`, shell `export` and
    `VAR=... cmd`, Python `os.environ` / `env=`), and at the settings of containers of vLLM
    images whose command vllmlint does not recognise. Each name is looked up in the generated
    catalogue of the target release (`vllm/envs.py`'s table and the variables vLLM reads
    elsewhere) and in the history of every catalogued release (0.6.6 onwards):
    a variable an earlier release read and the target does not is reported with the release
    that removed it (warning); a `VLLM_*` name no release ever read - usually the
    application's own variable that happens to share the prefix - is reported as unknown
    (info), or a warning with "did you mean" when it is close to a real one. Variables that a
    launch wrapper reads are not reported: KServe's `VLLM_ADDITIONAL_ARGS` (the launch's flags)
    and `VLLM_API_SERVER_COUNT`, and any variable the same file reads as `$NAME` (a Dockerfile
    `RUN`, an entrypoint script, an env-to-flag mapper), nor the settings of a launch that runs
    a plugin's image (`opea/vllm-gaudi`, `vllm/vllm-omni`): a plugin reads `VLLM_*` variables of
    its own that vLLM's table does not list (Gaudi's `VLLM_SKIP_WARMUP`, found as a user on
    opea-project/GenAIComps, where "remove it" would make every start run the full warm-up;
    OpenVINO's `VLLM_OPENVINO_DEVICE`). Settings that reach no launch are reported in a file
    that names a vLLM image and starts it in a way vllmlint does not see, but not in test code
    (`tests/`, `test_*.py`): there they are data a test hands to the code it tests.
    An unknown `VLLM_*` name set before a command that builds vLLM from its source in the same
    Dockerfile or script (`setup.py bdist_wheel`, `pip install -e .`, `--no-binary vllm`) is not
    reported unless it is close to a real one: vLLM's build (setup.py, CMake) reads variables of
    its own (`VLLM_FA_CMAKE_GPU_ARCHES`, `VLLM_CPU_DISABLE_AVX512`) that no release reads at run
    time.

    ## Why
    vLLM only warns about an unknown `VLLM_*` variable (`validate_environ`; an error only with
    `--fail-on-environ-validation`), so a removed variable silently stops doing what it did:
    `VLLM_USE_V1`, `VLLM_ATTENTION_BACKEND` (now `--attention-backend`),
    `VLLM_MM_HASHER_ALGORITHM` (now `--mm-hasher-algorithm`, removed in 0.30.0),
    `VLLM_PREFIX_CACHE_RETENTION_INTERVAL` (now `--prefix-cache-retention-interval`),
    `VLLM_ENGINE_ITERATION_TIMEOUT_S` (removed in 0.32.0). From 0.34.0 some removed variables
    stop vLLM at startup instead (`removed_environment_variables`, checked by `validate_environ`
    on every start): `VLLM_MARLIN_INPUT_DTYPE` set at all, `VLLM_USE_V2_MODEL_RUNNER` set to
    anything but 1 (Model Runner V1 is gone). Those are errors, with what replaced them, from
    the catalogue's researched notes (`vllmlint/knowledge/catalogue/notes.json`, with evidence);
    `VLLM_MARLIN_INPUT_DTYPE` (now `--quantization humming` with
    `VLLM_HUMMING_INPUT_QUANT_CONFIG`) is left to a human. `VLLM_USE_V1=0` chose the V0 engine,
    gone since 0.11.0: the launch runs V1 whatever it says, and what needed V0 is for a human to
    check (no fix: removing the line would drop that signal).

    ## Example
    ```yaml
    env:
      - name: VLLM_MM_HASHER_ALGORITHM
        value: sha256
    args: ["--model", "Qwen/Qwen2.5-VL-7B-Instruct"]
    ```
    becomes, for 0.30.0,
    ```yaml
    args: ["--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--mm-hasher-algorithm=sha256"]
    ```

    ## Fix safety
    Safe, and only for settings that reach vLLM launches vllmlint can edit. When the last
    release that read the variable named a flag to use instead, the setting is removed and the
    flag is added with the same value (`--flag=value`, one argv item) to every vLLM launch it
    reaches that does not set the flag already; a boolean flag is added for a true value and
    nothing for a false one; a value the flag does not accept, or one known only at run time,
    leaves it to a human. A variable that was renamed gets its new name. A variable nothing
    replaces is removed: the target ignores it anyway. No fix when the same file also expands
    the variable itself (`$NAME`, `${NAME}`, Kubernetes' `$(NAME)`): removing the setting would
    change that expansion too. Settings that reach no launch vllmlint
    sees are only reported.
    """

    code = "VL303"
    name = "removed-env-var"
    severity = "warning"
    min_version = "0.6.6"          # the oldest catalogued release
    fix = "sometimes"

    def check(self, project):
        from vllmlint.knowledge.catalogue import for_target, history, versions
        from vllmlint.knowledge.catalogue.argv import is_vllm
        from vllmlint.knowledge.images import plugin_of
        from vllmlint.model.launch import is_test_code

        cat = for_target(self.target)
        if cat is None:
            return
        hist = history()
        for pf, entries in _vllm_named(project, hist):
            # settings that reach no launch count in a file that names a vLLM image but starts
            # vLLM in a way vllmlint does not see (a custom server); where vLLM launches are
            # seen, such settings belong to the other containers and services
            vllm_file = None            # worked out when an entry reaches no launch
            for entry in entries:
                name = entry.name
                if name in HANDLED_ELSEWHERE or cat.reads_env(name):
                    continue
                if entry.launches:
                    if all(l.kind == PROXY or plugin_of(l.image) for l in entry.launches):
                        continue        # a plugin's image reads VLLM_* variables of its own (below)
                else:
                    if vllm_file is None:       # (a test's settings are its data: Podwarden/vllm-warden)
                        vllm_file = not any(is_vllm(l) for l in pf.launches) and \
                            bool(VLLM_IMAGE_TEXT.search(pf.source.text)) and not is_test_code(pf.source)
                    if not vllm_file:
                        continue
                gone = hist.env_removed(name, self.target)
                if gone is not None:
                    finding = self._removed(cat, entry, gone)
                    if finding.fix is not None and _consumed(entry):
                        # the script expands it too (`--x="${VLLM_ATTENTION_BACKEND}"`): removing
                        # the setting would change that as well (found on nebius/nebius-ps-services)
                        finding.fix, finding.fixable = None, False
                        finding.message += f" (not fixed: {entry.file.display} also reads ${name})"
                        finding.detail = (finding.detail + f" The file expands ${name} itself, so removing the "
                                          f"setting changes that too: move it by hand.").strip()
                    yield finding
                    continue
                added = hist.env_added_after(name, self.target)
                if added:
                    yield self.finding(entry.file, entry.span,
                                       f"{name} is read only from vLLM {added} on: vLLM {self.target_str} ignores it "
                                       f"(it only warns about unknown VLLM_* variables)")
                    continue
                if not name.startswith("VLLM_") or name in WRAPPER_VARS or _consumed(entry):
                    continue
                close = cat.close_env(name)
                if not close and _set_for_a_build(entry):
                    continue            # maybe a setting of vLLM's own build: not known here
                first, last = versions()[0], versions()[-1]
                yield self.finding(entry.file, entry.span,
                                   f"{name} is not a vLLM variable (no release {first}-{last} reads it): "
                                   + (f"vLLM ignores it; did you mean {close[0]}?" if close else "keep it if your app reads it"),
                                   severity="warning" if close else "info")

    # -- a variable an earlier release read --------------------------------------------------
    def _f(self, *args, **kwargs):
        """A finding of a removed variable: the why (`self._detail`) goes to its detail."""
        return self.finding(*args, detail=self._detail, **kwargs)

    def _removed(self, cat, entry, gone):
        from vllmlint.knowledge.catalogue.argv import is_vllm

        name = entry.name
        dep = gone.info.get("dep")
        use = gone.info.get("use")
        head = f"{name} is ignored from vLLM {gone.removed_in} on"
        self._detail = (f"vLLM {self.target_str} does not read it: removed in {gone.removed_in} (last in {gone.last}"
                        + (f", deprecated there: {_trim(dep)}" if dep and not use else "")
                        + "); vLLM only warns about unknown VLLM_* variables and ignores them.")
        serves = [l for l in entry.launches if is_vllm(l)]
        from vllmlint.knowledge.catalogue.notes import env_note
        note = env_note(gone.removed_in, name)          # researched: what the release does with it set
        if note is not None:
            return self._noted(entry, gone, note, serves)
        if use and use.startswith("--") and use in cat.flags:
            return self._to_flag(cat, entry, head, use, serves)
        if use and use.startswith("--") and "." in use:
            base, _, key = use.partition(".")
            spec = cat.json_flag(base)
            if spec and key in spec["fields"]:
                return self._f(entry.file, entry.span,
                                    head + f": set `{key}` in {base} instead ({use}=VALUE)"
                                    + _nowhere(entry))
        if use and use.startswith("VLLM_") and cat.reads_env(use):
            return self._rename(entry, head, use, serves)
        if name == "VLLM_USE_V1" and (entry.value or "").strip().strip("'\"") == "0":
            # found as a user on mobiusml/aana_sdk: `os.environ["VLLM_USE_V1"] = "0"` in the branch
            # of a model that needed V0; removing it silently drops what a human must check
            self._detail += (" From 0.11.0 the engine is V1's (vllm/engine/llm_engine.py:4-6 of 0.11.0: "
                             "`LLMEngine = V1LLMEngine`); a launch that chose V0 runs V1.")
            return self._f(entry.file, entry.span, f"{name}=0 asked for the V0 engine, gone since vLLM 0.11.0: "
                           f"it runs V1 whatever this says; check that what needed V0 works, then remove it")
        if not serves:
            return self._f(entry.file, entry.span, head + ": remove it" + _nowhere(entry))
        if entry.removal is None:
            return self._f(entry.file, entry.span, head + ": remove it by hand")
        return self._f(entry.file, entry.span, head + ": nothing replaces it, remove it",
                            Fix(list(entry.removal), f"remove {name}"), launches=entry.launches,
                            min_release=self.target)

    def _noted(self, entry, gone, note, serves):
        """A variable whose removal the catalogue's notes describe (notes.json): some stop vLLM
        at startup (0.34.0: VLLM_MARLIN_INPUT_DTYPE, VLLM_USE_V2_MODEL_RUNNER other than 1),
        which is an error, not the silent no-op of other removed variables."""
        from vllmlint.knowledge.catalogue.notes import refuses

        stops = refuses(note, entry.value)
        head = f"{entry.name} was removed in vLLM {gone.removed_in}: {note['say']}"
        self._detail = (f"Removed in {gone.removed_in} (last in {gone.last}); "
                        + ("vLLM refuses to start with it set" if stops else
                           "vLLM may refuse to start with it set (its value is known at run time)" if stops is None
                           else "vLLM only warns about it")
                        + f"; replaced by: {note.get('replaced_by', 'nothing')}. Evidence: "
                        + "; ".join(note.get("evidence", [])) + ".")
        severity = "error" if stops is not False else None
        if note.get("by_hand") or not serves or entry.removal is None:
            return self._f(entry.file, entry.span, head + _nowhere(entry) if not serves else head, severity=severity)
        return self._f(entry.file, entry.span, head, Fix(list(entry.removal), f"remove {entry.name}"),
                       launches=entry.launches, min_release=self.target, severity=severity)

    def _to_flag(self, cat, entry, head, flag, serves):
        name = entry.name
        info = cat.flags[flag]
        say = head + f": use {flag} instead"
        if not serves:
            return self._f(entry.file, entry.span, say + _nowhere(entry))
        if entry.value is None:
            return self._f(entry.file, entry.span, say + " (value known at run time: move it by hand)")
        value = entry.value.strip().strip("'\"")
        if "$" in value or "{{" in value or "`" in value:
            return self._f(entry.file, entry.span, say + " (value known at run time: move it by hand)")
        if info.get("n", 1) == 0:
            if value.lower() in FALSY:
                token = None
            elif value.lower() in TRUTHY:
                token = flag
            else:
                return self._f(entry.file, entry.span, say + f" (set to {value!r}: move it by hand)")
        else:
            accepted = _accepted(info, value)
            if accepted is None:
                self._detail += f" vllmlint cannot tell that {flag} accepts {value!r}."
                return self._f(entry.file, entry.span, say + " (move its value by hand)")
            token = f"{flag}={accepted}"
        need = [l for l in serves if token and not l.has_flag(flag)]
        blocked = [l for l in need if l.append_edit(token) is None]
        if blocked:
            where = ", ".join(f"{l.file.display}:{l.line} ({l.not_editable or 'not editable'})" for l in blocked)
            self._detail += f" The launch cannot be edited here: {where}."
            return self._f(entry.file, entry.span, head + f": add {token} to the launch by hand, then remove it")
        if entry.removal is None:
            return self._f(entry.file, entry.span, head + ": remove it by hand" +
                                (f" and add {token}" if token else ""))
        edits = list(entry.removal) + [l.append_edit(token) for l in need]
        what = f"replace it with {token}" if need else (f"{flag} is already set: remove it" if token else
                                                         "its value is false: remove it")
        return self._f(entry.file, entry.span, head + f": {what}", Fix(edits, f"replace {name} with {flag}"),
                            launches=entry.launches, min_release=self.target)

    def _rename(self, entry, head, new, serves):
        say = head + f": renamed {new}"
        if not serves:
            return self._f(entry.file, entry.span, say + _nowhere(entry))
        if any(l.env_value(new) is not None or any(e.name == new for e in l.env) for l in serves):
            if entry.removal is None:
                return self._f(entry.file, entry.span, say + f" and {new} is set: remove it by hand")
            return self._f(entry.file, entry.span, say + f" and {new} is set: remove it",
                                Fix(list(entry.removal), f"remove {entry.name}"), launches=entry.launches,
                                min_release=self.target)
        text = entry.file.text[entry.span[0]:entry.span[1]]
        at = text.find(entry.name)
        if at < 0:
            return self._f(entry.file, entry.span, say)
        start = entry.span[0] + at
        return self._f(entry.file, entry.span, say + ", write it",
                            Fix([Edit(entry.file, start, start + len(entry.name), new)], f"rename to {new}"),
                            launches=entry.launches, min_release=self.target)


def _nowhere(entry) -> str:
    return "" if entry.launches else " (it reaches no vLLM launch vllmlint sees)"


def _trim(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= 100 else text[:99].rstrip() + "…")


BASIC_TYPES = {"str": str, "int": int, "float": float, "optional_type(str)": str, "optional_type(int)": int,
               "optional_type(float)": float, "nullable_str": str, "human_readable_int": int}


def _accepted(info: dict, value: str) -> str | None:
    """`value` as the flag takes it, when the catalogue can tell it is valid."""
    if not SAFE_VALUE.match(value):
        return None
    for key in ("choices", "enum"):
        options = [str(c) for c in info.get(key) or []]
        if options:
            for option in options:
                if value == option:
                    return option
            for option in options:
                if value.lower() == option.lower():
                    return option
            return None
    typ = (info.get("type") or "str").replace(" | None", "").replace("Optional[", "").rstrip("]").strip()
    kind = BASIC_TYPES.get(typ)
    if kind is None:
        return None
    try:
        kind(value)
    except ValueError:
        return None
    return value
