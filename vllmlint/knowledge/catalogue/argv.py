"""A vLLM launch's options read against a release catalogue: which tokens are option names,
which are their values, and which are positionals. Shared by VL301-VL305.

Only launches whose argv is vLLM's own (`vllm serve`, `--tokens-only`, `vllm launch render`,
the api_server module) are read; tokens whose option name is built at run time (`$FLAG`,
`{{ .Values.x }}`) are skipped, and so is everything after `--`.
"""
from __future__ import annotations

import json
import re
from ...model.record import record

from ...model.launch import API_SERVER, ENGINE, RENDER, SERVE, TOKENS_ONLY, Arg, Edit, Launch, PerLaunch, Span
from . import Catalogue, Match, normalize

VLLM_KINDS = (SERVE, TOKENS_ONLY, RENDER, API_SERVER, ENGINE)
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
PLACEHOLDER = re.compile(r"[$`{}%<>*?\s\\\[\]]")


@record
class Opt:
    """One option token of a launch."""
    index: int                 # index in launch.argv
    arg: Arg
    name: str                  # the option name as written (before `=` and the first `.`)
    sub: str | None            # dotted JSON sub-key (`kv_role`, `a.b+`), if any
    inline: bool               # `--name=value`
    value: Arg | None          # the value (inline part or the next token), when it has one
    match: Match

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, index, arg, name, sub, inline, value, match):
        self.index = index
        self.arg = arg
        self.name = name
        self.sub = sub
        self.inline = inline
        self.value = value
        self.match = match

    @property
    def span(self) -> Span | None:
        return self.arg.span

    def name_span(self) -> Span | None:
        """File span of the option name alone (without `=value` / `.sub`)."""
        end = len(self.name)
        sub = self.arg.sub_span(0, end)
        if sub:
            return sub
        if self.arg.file is None or self.arg.span is None:
            return None
        start = self.arg.span[0]
        raw = self.arg.file.text[start:self.arg.span[1]]
        if raw.startswith(self.name):                       # written bare
            return start, start + end
        if raw[:1] in ("'", '"') and raw[1:].startswith(self.name) and "\\" not in raw[:end + 1]:
            return start + 1, start + 1 + end               # written quoted, the name without escapes
        return None

    def place(self, launch: Launch) -> tuple:
        """(file, span) to report this option at: its name, else its token, else the launch.
        The token's own file: a Helm chart's flag may be written in values.yaml or a template."""
        span = self.name_span() or self.span
        if span is not None and self.arg.file is not None:
            return self.arg.file, span
        return launch.file, launch.span

    def rename(self, new: str) -> Edit | None:
        """An edit that writes `new` in place of the option name, keeping `=value`/quotes."""
        span = self.name_span()
        if span is None or self.arg.file is None:
            return None
        if getattr(self.arg, "keyword_style", None):      # a Python keyword / key: snake_case
            if self.arg.value.startswith("--no-") and new.startswith("--no-"):
                new = new[5:]                              # `enforce_eager=False` keeps its value
            elif new.startswith("--no-"):
                return None
            new = new.lstrip("-").replace("-", "_")
        return Edit(self.arg.file, span[0], span[1], new)


def is_vllm(launch: Launch) -> bool:
    return launch.kind in VLLM_KINDS


def dynamic_name(name: str) -> bool:
    return bool(PLACEHOLDER.search(name)) or name in ("-", "--")


_CACHE: dict[tuple[int, int], tuple[Launch, Catalogue, list[Opt]]] = {}


def options(launch: Launch, cat: Catalogue) -> list[Opt]:
    """The option tokens of `launch`, each matched against `cat` (computed once per launch and
    catalogue: four rules read them)."""
    key = (id(launch), id(cat))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is launch and hit[1] is cat:
        return hit[2]
    if len(_CACHE) > 1 << 15:          # a bound; run_rules forgets the cache after each project
        _CACHE.clear()
    # the same launch read by another release (each step of a migration, VL307's today):
    # the tokens split the same way when every option name resolves the same
    sig = _signature(launch, cat)
    last = _LAST.peek(launch) or ()
    out = next((o for s, o in last if s == sig), None)
    if out is None:
        out = _options(launch, cat)
        # newest first; a few kept: a migration step reads each launch with the step's release
        # and (VL307) with the release it runs today, which would evict each other with one
        _LAST.put(launch, ((sig, out),) + last[:READINGS_KEPT - 1])
    _CACHE[key] = (launch, cat, out)
    return out


# per launch: the last releases' readings and what each rests on, ((signature, options), ...)
_LAST = PerLaunch()
READINGS_KEPT = 2


def _signature(launch: Launch, cat: Catalogue) -> tuple:
    """What `_options` asks `cat` about this launch's tokens: each option-looking token's match
    and how many values that option takes. Each reading is interned, so two releases' signatures
    compare by identity, item by item (every step of a migration compares one per launch)."""
    heads = _HEADS.get(launch, _option_heads)
    sig = cat._signatures.get(heads)        # launches of one shape share it
    if sig is not None:
        return sig
    if not cat._signatures:
        _SIGNED.append(cat)
    known = cat._readings
    sig = cat._signatures[heads] = tuple(known.get(head) or _reading(cat, head) for head in heads)
    return sig


def _reading(cat: Catalogue, head: str) -> tuple:
    """How `cat` reads an option name: (its match, how many values it takes); interned."""
    m = cat.match(head) if head.startswith("--") else _short(cat, head)
    reading = (m, cat.nargs(m.flag) if m.flag else None)
    reading = cat._readings[head] = _READINGS.setdefault(reading, reading)
    return reading


_READINGS: dict = {}        # (Match, nargs) -> itself: one object per distinct reading
_HEADS = PerLaunch()        # per launch: the names `_signature` asks about


def _option_heads(launch: Launch) -> tuple[str, ...]:
    out = []
    for arg in launch.argv[launch.options_start:]:
        v = arg.value
        if v == "--":
            break
        if not v.startswith("-") or v == "-":
            continue
        head = v.partition("=")[0]
        out.append(head.partition(".")[0] if v.startswith("--") else head)
    return tuple(out)


def forget_options() -> None:
    """Drop the cached options (the launches of a project that has been checked) and the
    signatures per launch shape (a migration's next step reads the launches with another
    release: its own signatures are what it compares)."""
    _CACHE.clear()
    for cat in _SIGNED:
        cat._signatures.clear()
    _SIGNED.clear()


_SIGNED: list[Catalogue] = []       # the catalogues holding signatures


def _options(launch: Launch, cat: Catalogue) -> list[Opt]:
    out: list[Opt] = []
    argv = launch.argv
    i = launch.options_start
    while i < len(argv):
        arg = argv[i]
        v = arg.value
        i += 1
        if v == "--":
            break
        if not v.startswith("-") or v == "-" or NEGATIVE_NUMBER.match(v):
            continue
        head, eq, _ = v.partition("=")
        if dynamic_name(head):
            continue
        if v.startswith("--"):
            base, dot, sub = head.partition(".")
            m = cat.match(base)
            if m.kind != "exact" and getattr(arg, "keyword_style", None):
                m = _keyword_match(cat, base, m)
            value = None
            if eq:
                value = _inline(arg, len(head) + 1)
            elif dot or _takes_value(cat, m):
                if i < len(argv) and (dot or _looks_like_value(argv[i].value)):
                    value = argv[i]
                    i += 1
                    i = _more_values(cat, m, argv, i)
            out.append(Opt(i_of(arg, argv, i), arg, base, sub if dot else None, bool(eq), value, m))
            continue
        # single dash: -tp 2, -q awq, -O3, -qawq
        m = _short(cat, head)
        value = None
        if eq:
            value = _inline(arg, len(head) + 1)
        elif m.kind == "exact" and m.flag == head and _takes_value(cat, m) and i < len(argv) \
                and _looks_like_value(argv[i].value):
            value = argv[i]
            i += 1
        out.append(Opt(i_of(arg, argv, i), arg, head, None, bool(eq), value, m))
    return out


_NO_MATCH = Match("unknown", None, None)


def _keyword_match(cat: Catalogue, base: str, m: Match) -> Match:
    """How an engine-API keyword or key (`LLM(x=...)`, Ray Serve `engine_kwargs`, Triton's
    model.json) is read: the engine arguments take field names exactly, so no argparse
    abbreviation (`device=` is not `--device-ids`), and `x=False` (read as `--no-x`) is the field
    `x` whether or not the command line has a `--no-x` (found on robbypambudi/ray-vllm-benchmark:
    `LLM(**{"disable_log_stats": False})` was "not a vLLM option")."""
    if base.startswith("--no-"):
        positive = cat.match("--" + base[5:])
        if positive.kind == "exact":
            return positive
    return _NO_MATCH if m.kind in ("prefix", "ambiguous") else m


def i_of(arg: Arg, argv: list[Arg], after: int) -> int:
    for j in range(after - 1, -1, -1):
        if argv[j] is arg:
            return j
    return after - 1


def _short(cat: Catalogue, token: str) -> Match:
    opts = cat.options
    if token in opts:
        return Match("exact", token, opts[token])
    if token.startswith("-O") and (len(token) == 2 or token[2:].lstrip("=").isalnum()):
        return Match("exact", token, "--optimization-level" if "--optimization-level" in cat.flags
                     else "--compilation-config")
    for n in (3, 2):                      # an attached value: -qawq, -tp2
        if len(token) > n and token[:n] in opts and cat.nargs(token[:n]) != 0:
            return Match("exact", token[:n], opts[token[:n]])
    return Match("unknown", None, None)


def _takes_value(cat: Catalogue, m: Match) -> bool:
    if m.kind not in ("exact", "prefix") or m.flag is None:
        return False
    return cat.nargs(m.flag) != 0


def _more_values(cat: Catalogue, m: Match, argv: list[Arg], i: int) -> int:
    if m.flag and cat.nargs(m.flag) in ("+", "*"):
        while i < len(argv) and _looks_like_value(argv[i].value) and argv[i].value != "--":
            i += 1
    return i


def _looks_like_value(text: str) -> bool:
    return not text.startswith("-") or bool(NEGATIVE_NUMBER.match(text)) or text == "-"


def _inline(arg: Arg, skip: int) -> Arg:
    def locate(a=arg, n=skip):
        offs = a.offsets
        return None if offs is None else list(offs[n:])
    span = arg.sub_span(skip, len(arg.value)) if skip < len(arg.value) else None
    return Arg(arg.value[skip:], arg.file, span or arg.span, arg.dynamic, False, locate=locate)


# ------------------------------------------------------------------------------------------
# JSON values of config flags
# ------------------------------------------------------------------------------------------
@record
class JsonKey:
    opt: Opt
    key: str
    span: Span | None
    value: object
    file: object = None        # the file `span` is in (the value's; a Helm value lives in values.yaml)

    def place(self, launch: Launch) -> tuple:
        """(file, span) to report this key at: the key, else as Opt.place."""
        if self.span is not None and self.file is not None:
            return self.file, self.span
        return self.opt.place(launch)


def json_keys(opt: Opt) -> list[JsonKey] | None:
    """Top-level keys a JSON config flag sets: from its JSON value, or the dotted sub-flag.
    None when the value is built at run time or is not a JSON object. Kept on the Opt: two rules
    ask, and a migration's steps share one Opt while the releases read the launch alike."""
    keys = opt.__dict__.get("_json_keys", _UNREAD)
    if keys is _UNREAD:
        keys = opt._json_keys = _json_keys(opt)
    return keys


_UNREAD = object()


def _json_keys(opt: Opt) -> list[JsonKey] | None:
    if opt.sub is not None:
        key = opt.sub.split(".")[0].rstrip("+")
        val = _dotted_value(opt.value.value) if opt.value is not None else None
        return [JsonKey(opt, key, opt.arg.span, val, opt.arg.file)]
    if opt.value is None or opt.value.dynamic:
        return None
    text = opt.value.value
    if "{{" in text or "$" in text:
        return None
    from ...model.jsonpos import locate
    try:
        loc = locate(text)
    except ValueError:
        return None
    if not isinstance(loc.value, dict):
        return None
    out = []
    for path, member in loc.members.items():
        if len(path) != 1:
            continue
        try:
            _, end = json.decoder.scanstring(text, member.key_start + 1)
        except (ValueError, IndexError):
            end = member.key_start + len(json.dumps(path[0]))
        span = opt.value.sub_span(member.key_start, end) or _find_raw(opt.value, path[0]) or opt.value.span
        out.append(JsonKey(opt, path[0], span, loc.value[path[0]], opt.value.file) if span else
                   JsonKey(opt, path[0], opt.arg.span, loc.value[path[0]], opt.arg.file))
    return out


def _find_raw(arg: Arg, key: str) -> Span | None:
    if arg.span is None or arg.file is None:
        return None
    text = arg.file.text[arg.span[0]:arg.span[1]]
    for needle in (json.dumps(key), json.dumps(key).replace('"', '\\"')):
        at = text.find(needle)
        if at >= 0:
            return arg.span[0] + at, arg.span[0] + at + len(needle)
    return None


def _dotted_value(text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def flag_value(opt: Opt) -> str | None:
    """The static value of an option, when it has one."""
    if opt.value is None or opt.value.dynamic:
        return None
    text = opt.value.value
    return None if dynamic_name(text.replace(" ", "")) and ("$" in text or "{{" in text) else text


__all__ = ["Opt", "JsonKey", "VLLM_KINDS", "is_vllm", "options", "json_keys", "flag_value", "normalize"]


def options_among(launch: Launch, cat: Catalogue, bases: set) -> list[Opt]:
    """The options of `launch`, read by `cat`, that name a flag entry in `bases` (exactly or by
    a prefix)."""
    return [o for o in options(launch, cat) if o.match.base in bases and o.match.kind in ("exact", "prefix")]


def launches_naming(project, cat: Catalogue, bases: set) -> list[Launch]:
    """The vLLM launches of `project` with an option name that `cat` reads as a flag entry in
    `bases`, in project order: the ones options_among can find something in. (A few more: a
    name that is really a value counts here.)"""
    return _launches_where(project, cat, lambda m: m.base in bases and m.kind in ("exact", "prefix"))


def inexact_options(project, target):
    """(launch, option) for every option of every vLLM launch that the target's catalogue does
    not know by its exact name (an abbreviation, an ambiguous or unknown name): the loop VL301
    and VL302 share. Nothing when the target is not catalogued."""
    from . import for_target

    cat = for_target(target)
    if cat is None:
        return
    for launch in _launches_where(project, cat, lambda m: m.kind != "exact"):
        for opt in options(launch, cat):
            if opt.match.kind != "exact":
                yield launch, opt


def _launches_where(project, cat: Catalogue, keep) -> list[Launch]:
    """The vLLM launches with an option name whose match in `cat` passes `keep`. Asked of the
    names, not the launches: a project has far fewer distinct option names than launches, and
    a migration asks again at every step."""
    positions = set()
    readings = cat._readings
    for head, at in _names_index(project).items():
        if keep((readings.get(head) or _reading(cat, head))[0]):
            positions.update(at)
    launches = project.launches
    return [launches[i] for i in sorted(positions)]


def _names_index(project) -> dict[str, list[int]]:
    """Option name -> positions (in project.launches) of the vLLM launches that write it."""
    found = project.__dict__.get("_option_names")
    if found is None or found[0] != len(project.files):
        index: dict[str, list[int]] = {}
        for i, launch in enumerate(project.launches):
            if is_vllm(launch):
                for head in set(_HEADS.get(launch, _option_heads)):
                    index.setdefault(head, []).append(i)
        found = project._option_names = (len(project.files), index)
    return found[1]
