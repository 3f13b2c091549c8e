import re

from vllmlint.model.launch import API_SERVER
from vllmlint.lint.registry import Rule


class Deprecated(Rule):
    """A flag, flag value, JSON config field, environment variable or launch module the target
    vLLM release deprecates.

    ## What it does
    Uses the deprecations the catalogue generator found in the target release's own source:
    flags whose help or argparse action says they are deprecated (`--log-config-file`,
    `--disable-cascade-attn`, `--mamba-cache-mode` in 0.33), values a config validator warns
    about (`--mamba-cache-mode all` in 0.30-0.31), JSON config fields documented as deprecated
    (`--attention-config` `use_fp4_indexer_cache` in 0.28-0.29), `VLLM_*` variables a release
    still reads but warns about, and launch modules that warn when started with `python -m`
    (`vllm.entrypoints.openai.api_server` from 0.29, `vllm.entrypoints.grpc_server` from 0.30).
    The message quotes vLLM's own deprecation text, which usually names the replacement and the
    release that will remove it.

    ## Why
    A deprecated setting still works, with a warning in the log that nobody reads; the release
    named in the message removes it, and the server then stops at startup (a flag or a JSON
    key) or silently ignores it (an environment variable). Moving now is cheaper than
    discovering it during the next upgrade.

    ## Example
    ```yaml
    command: ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B"]
    ```
    On 0.30.0: the api_server module is deprecated, use `vllm serve Qwen/Qwen3-8B`.

    ## Fix safety
    No automatic fix: the replacements change the command (`vllm serve` takes the model as a
    positional argument) or the shape of a config (`--log-config-file` becomes
    `--logging-config.pylogging_config_file`), which a human should review.
    """

    code = "VL304"
    name = "deprecated"
    severity = "warning"
    min_version = "0.6.6"          # the oldest catalogued release
    fix = "none"

    def check(self, project):
        from vllmlint.knowledge.catalogue import for_target
        from vllmlint.knowledge.catalogue.argv import flag_value, is_vllm, json_keys, launches_naming, options_among

        cat = for_target(self.target)
        if cat is None:
            return
        t = self.target_str
        flags = cat.flags
        watched = _watched(cat)
        module = "vllm.entrypoints.openai.api_server"
        module_info = cat.deprecated_modules.get(module)
        for launch in project.launches if module_info else ():
            if launch.kind == API_SERVER and module in launch.program and is_vllm(launch):
                since = _since(self.target, ("module", module), lambda c: module in c.deprecated_modules)
                yield self.finding(*_module_place(launch, module),
                                   f"`python -m {module}` is deprecated since vLLM {since}: use `vllm serve MODEL`",
                                   detail=f"It may be removed in a later release ({module_info['at']}).")
        for launch in launches_naming(project, cat, watched):
            for opt in options_among(launch, cat, watched):
                m = opt.match
                info = flags[m.base]
                if info.get("dep") and opt.sub is None:
                    since = _since(self.target, ("flag", m.base), lambda c: bool(c.flags.get(m.base, {}).get("dep")))
                    yield self.finding(*opt.place(launch),
                                       f"`{opt.name}` is deprecated since vLLM {since}" + _instead(info['dep']),
                                       detail=f"vLLM says: {_said(info['dep'])}")
                dep_values = info.get("dep_values")
                value = flag_value(opt) if dep_values and opt.sub is None else None
                if value is not None and value in dep_values:
                    vfile, vspan = (opt.value.file, opt.value.span) if opt.value is not None and opt.value.span \
                        and opt.value.file is not None else opt.place(launch)
                    yield self.finding(vfile, vspan,
                                       f"`{opt.name} {value}` is deprecated in vLLM {t}" + _instead(_text(dep_values[value])),
                                       detail=f"vLLM says: {_said(_text(dep_values[value]))}")
                spec = cat.json_flag(m.base)
                if spec is None:
                    continue
                fields = spec["fields"]
                dep_fields = _deprecated_fields(cat, m.base)
                for key in json_keys(opt) or []:
                    if key.key not in dep_fields:
                        continue
                    field = fields[key.key]
                    if field.get("dep"):
                        yield self.finding(*key.place(launch),
                                           f"`{key.key}` of {m.base} is deprecated in vLLM {t}" + _instead(field['dep']),
                                           detail=f"vLLM says: {_said(field['dep'])}")
                    fdv = field.get("dep_values") or {}
                    if isinstance(key.value, (str, int, float)) and str(key.value) in fdv:
                        yield self.finding(*key.place(launch),
                                           f"`{key.key}: {key.value}` of {m.base} is deprecated in vLLM {t}"
                                           + _instead(_text(fdv[str(key.value)])),
                                           detail=f"vLLM says: {_said(_text(fdv[str(key.value)]))}")
        for entry in project.env:
            info = cat.env.get(entry.name)
            if not info or not info.get("dep") or not any(is_vllm(l) for l in entry.launches):
                continue
            use = info.get("use")
            since = _since(self.target, ("env", entry.name), lambda c: bool(c.env.get(entry.name, {}).get("dep")))
            yield self.finding(entry.file, entry.span,
                               f"{entry.name} is deprecated since vLLM {since}" + (f": use {use} instead" if use else
                                                                          _instead(info['dep'])),
                               detail=f"vLLM says: {_said(info['dep'])}")


_SINCE: dict = {}


def _since(target, key, deprecates) -> str:
    """The first release of the run of catalogued releases up to `target` whose catalogue
    `deprecates(cat)`: the release that deprecated it, not the one checked against (a user saw
    one deprecation named for 0.30.0 by `check`, 0.29.0 by a migrate step and 0.33.0 in its
    summary, found on kubernetes-sigs/lws)."""
    from vllmlint.knowledge.catalogue import load, versions
    from vllmlint.knowledge.versions import fmt, parse_version

    memo = (tuple(target), key)
    if memo not in _SINCE:
        first = fmt(tuple(target))
        for name in reversed([v for v in versions() if parse_version(v) <= tuple(target)]):
            if not deprecates(load(name)):
                break
            first = name
        _SINCE[memo] = first
    return _SINCE[memo]


def _watched(cat) -> set:
    """The flags this rule has something to say about in `cat`: deprecated, with deprecated
    values, or JSON config flags (whose fields may be deprecated)."""
    found = cat.__dict__.get("_vl304_watched")
    if found is None:
        found = cat._vl304_watched = {name for name, info in cat.flags.items()
                                      if info.get("dep") or info.get("dep_values") or cat.json_flag(name)}
    return found


def _deprecated_fields(cat, flag: str) -> set:
    """The fields of JSON config flag `flag` that `cat` deprecates, or deprecates values of."""
    known = cat.__dict__.setdefault("_vl304_dep_fields", {})
    found = known.get(flag)
    if found is None:
        found = known[flag] = {k for k, f in cat.json_flag(flag)["fields"].items()
                               if f and (f.get("dep") or f.get("dep_values"))}
    return found


_USE_RE = re.compile(r"(?:[Uu]se|[Rr]eplaced by|in favou?r of|[Ss]et)\s+[`'\"]?(--[\w.-]+|VLLM_\w+)")


def _instead(said: str | None) -> str:
    """`: use --x instead` when vLLM's deprecation text names the replacement, else a hint."""
    m = _USE_RE.search(said or "")
    return f": use {m.group(1)} instead" if m else "; it may be removed in a later release"


def _text(located: str) -> str:
    """`file:line: message` -> message."""
    parts = located.split(": ", 1)
    return parts[1] if len(parts) == 2 and ":" in parts[0] else located


def _said(text: str) -> str:
    text = " ".join(str(text).split())
    if text == "deprecated":
        return "marked deprecated"
    return text if len(text) <= 160 else text[:159].rstrip() + "…"


def _module_place(launch, module: str) -> tuple:
    """Where to report the module: the launch, unless another file writes it (a chart's
    template, when the launch is placed in the values file its first value comes from)."""
    for arg in launch.argv[:launch.options_start]:
        if arg.value == module and arg.file is not None and arg.span and arg.file is not launch.file:
            return arg.file, arg.span
    return launch.file, launch.span
