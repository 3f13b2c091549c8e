"""The launch model every parser produces and every rule reads.

Offsets are character offsets into `SourceFile.text` (the decoded file without its BOM).
Edits are spans on that text, so everything outside them survives byte for byte.
"""
from __future__ import annotations

import bisect
import weakref
import re
from collections.abc import Callable, Iterator, Sequence
from .record import MISSING, field, record
from pathlib import Path

from .lazyre import lazy_re

Span = tuple[int, int]


@record(eq=False)
class SourceFile:
    """A file read for the check: its path, how it is reported, and its text."""
    path: Path            # absolute path on disk
    display: str          # the path as reported (as given on the command line, joined with the relative path)
    text: str             # decoded text, BOM removed, line endings untouched
    kind: str             # dockerfile | compose | k8s | yaml | shell | python
    bom: bool = False
    _line_starts: list[int] | None = field(default=None, repr=False)

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return line + 1, offset - self._line_starts[line] + 1

    def line_starts(self) -> list[int]:
        """The offset of each line's first character (line 1 first)."""
        self.line_col(0)
        assert self._line_starts is not None
        return self._line_starts

    def line_text(self, line: int) -> str:
        start = self.line_starts()[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:end if end >= 0 else len(self.text)].rstrip("\r")


# the kind of a file read only for a launch's options (`vllm serve --config FILE`,
# parsers.options_file): its options are reported where they are written, never edited there
OPTIONS_FILE_KIND = "vllm-options"

_TEST_PATH_RE = re.compile(r"(?:^|/)(?:tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)")


def is_test_code(source: SourceFile) -> bool:
    """Python test code: an image string or a command there is data a test asserts on or feeds
    to the code under test, not a deployment (`assert engine["image"] == "vllm/vllm-openai:v0.6.3"`,
    a fixture returning `"vllm serve M --disable-log-requests"`): editing it breaks the test or
    leaves the code that builds the real command as it was."""
    return source.kind == "python" and bool(_TEST_PATH_RE.search(source.display.replace("\\", "/")))


@record(frozen=True)
class Edit:
    """Replace text[start:end] of `file` with `text`."""

    file: SourceFile
    start: int
    end: int
    text: str

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, file, start, end, text):
        d = self.__dict__                  # frozen: its own __setattr__ refuses
        d["file"] = file
        d["start"] = start
        d["end"] = end
        d["text"] = text

    def key(self) -> tuple:
        return (str(self.file.path), self.start, self.end, self.text)

    def __reduce__(self):
        return (Edit, (self.file, self.start, self.end, self.text))     # a tuple: cheapest to pickle


@record
class Fix:
    """The edits that fix a finding, with what they do."""
    edits: list[Edit]
    description: str
    applicability: str = "safe"   # safe | unsafe
    # The launches whose behaviour the fix changes, and the first release on which the fixed
    # config is right. `check --fix` leaves a fix to `migrate` when one of them runs an older
    # release today (the upgrade bumps the tag or pin in the same edit set).
    launches: list = field(default_factory=list)
    min_release: tuple[int, int, int] | None = None


class PerLaunch:
    """Something derived from a launch, kept per Launch object: the graph and several rules ask
    for it, and every step of a migration asks again for the launches of files it left alone.
    An entry holds its launch weakly and goes when the launch does (before its id can be
    reused): a migration replaces the launches of every file it edits, and strong entries kept
    each step's old launches, with their files' texts, for the rest of the chain. Bounded."""

    BOUND = 1 << 15

    def __init__(self):
        self._memo: dict[int, tuple] = {}

    def get(self, launch: "Launch", compute: Callable[["Launch"], object]):
        hit = self._memo.get(id(launch))
        if hit is not None and hit[0]() is launch:
            return hit[1]
        value = compute(launch)
        self.put(launch, value)
        return value

    def peek(self, launch: "Launch"):
        """The value kept for `launch`, or None."""
        hit = self._memo.get(id(launch))
        return hit[1] if hit is not None and hit[0]() is launch else None

    def put(self, launch: "Launch", value) -> None:
        memo = self._memo
        if len(memo) > self.BOUND:
            memo.clear()
        key = id(launch)

        def gone(ref, memo=memo, key=key):
            hit = memo.get(key)
            if hit is not None and hit[0] is ref:
                del memo[key]

        memo[key] = (weakref.ref(launch, gone), value)


class KnownOffsets:
    """A `locate` whose answer is already known (an Arg that came from a worker process)."""

    __slots__ = ("offsets",)

    def __init__(self, offsets: Sequence[int] | None):
        self.offsets = offsets

    def __call__(self) -> Sequence[int] | None:
        return self.offsets

    def __reduce__(self):
        if self is KNOWN_ON_ARRIVAL:
            return "KNOWN_ON_ARRIVAL"       # pickled by name: one reference per Arg
        return (KnownOffsets, (self.offsets,))


# the `locate` of an Arg whose offsets are in its memo already (Arg._offsets), so this is never
# called: one read back from a worker process (they arrive with it), or a token a front end saw
# written as it reads (KNOWN_OFFSETS, the same object)
KNOWN_ON_ARRIVAL = KNOWN_OFFSETS = KnownOffsets(None)


def written_as_is(text: str, span: Span, value: str) -> range | None:
    """The file offsets of `value`, a token written at `span` of `text`, when it is written as
    it reads: bare, or between two like quotes with nothing escaped inside (every character is
    its own); else None (the front end's `locate` maps it). A front end that finds a range here
    gives the Arg its offsets at once (KNOWN_OFFSETS): it then keeps no closure over its node."""
    if not value:
        return None
    s, e = span
    raw = text[s:e]
    if raw == value:
        return range(s, e)
    if len(raw) == len(value) + 2 and raw[0] == raw[-1] and raw[0] in "'\"" and raw[1:-1] == value:
        return range(s + 1, e - 1)
    return None


@record
class Arg:
    """One argv token. `span` is the raw token in the file (quotes included) when it has one."""

    value: str
    file: SourceFile | None = None
    span: Span | None = None
    dynamic: bool = False      # holds an expansion: value not known before run time
    splits: bool = False       # may expand to several argv items ("$@", unquoted $X)
    # file offset of each character of `value`, computed on demand by the front end; lets a
    # rule edit inside a token (one key of a JSON value) without rewriting the token
    locate: Callable[[], Sequence[int] | None] | None = field(default=None, repr=False, compare=False)

    _offsets: object = field(default=None, repr=False, compare=False)     # memo of `offsets`

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, value, file=None, span=None, dynamic=False, splits=False, locate=None, _offsets=None):
        self.value = value
        self.file = file
        self.span = span
        self.dynamic = dynamic
        self.splits = splits
        self.locate = locate
        self._offsets = _offsets

    @property
    def offsets(self) -> Sequence[int] | None:
        if self.locate is None:
            return None
        if self._offsets is None:       # the file's text never changes under a parsed Arg
            offs = self.locate()
            self._offsets = (offs if offs is not None and len(offs) == len(self.value) else None,)
        return self._offsets[0]

    def __reduce__(self):
        """Pickled (a worker process sends parsed files back) as its fields in a tuple, the
        cheapest form to write and read back (the main process reads every parsed file). The
        front end's `locate` closure cannot travel: the offsets are resolved here and sent as
        data; a token that maps character for character onto the file travels as a range.
        Attributes a front end added (`keyword_style`) travel as state."""
        d = self.__dict__
        extra = {k: v for k, v in d.items() if k not in _ARG_FIELDS} if len(d) > len(_ARG_FIELDS) else None
        if self.locate is None:
            args = (self.value, self.file, self.span, self.dynamic, self.splits)
            return (Arg, args, extra) if extra else (Arg, args)
        offs = self._written_as_is() if self._offsets is None else None
        if offs is None:
            offs = self.offsets
        if offs and not isinstance(offs, range) and offs[-1] - offs[0] == len(offs) - 1 and \
                list(offs) == list(range(offs[0], offs[-1] + 1)):
            offs = range(offs[0], offs[-1] + 1)
        args = (self.value, self.file, self.span, self.dynamic, self.splits, KNOWN_ON_ARRIVAL, (offs,))
        return (Arg, args, extra) if extra else (Arg, args)

    def _written_as_is(self) -> range | None:
        """The offsets of a token written bare or in plain quotes, read off its span without the
        front end's `locate` (most tokens: pickling a parsed tree costs half as much)."""
        if self.file is None or self.span is None:
            return None
        return written_as_is(self.file.text, self.span, self.value)

    def sub_span(self, start: int, end: int) -> Span | None:
        """File span of value[start:end], when the value maps back to the file. A character
        written as an escape (`\"`) maps to its backslash, so a span ends where the next
        character starts."""
        offs = self.offsets
        if offs is None or self.file is None or not (0 <= start < end <= len(offs)):
            return None
        text = self.file.text

        def begin(i: int) -> int:     # a shell escape maps to the escaped char: include its backslash
            o = offs[i]
            return o - 1 if o > 0 and text[o - 1] == "\\" and self.value[i] in '"\\$`' else o

        if end < len(offs):
            return begin(start), begin(end)
        last = offs[end - 1]
        return begin(start), last + (2 if text[last] == "\\" else 1)

    def replace(self, text: str) -> Edit | None:
        if self.file is None or self.span is None:
            return None
        return Edit(self.file, self.span[0], self.span[1], text)


_ARG_FIELDS = ("value", "file", "span", "dynamic", "splits", "locate", "_offsets")


@record
class KeywordArg(Arg):
    """An engine argument written as a Python keyword (`swap_space=4`), a dict entry
    (`"swap_space": 4`, a JSON member) or an attribute (`args.swap_space = 4`): option names are
    spelled snake_case, without dashes."""
    keyword_style: str = "keyword"        # keyword | key | attribute


@record
class EnvEntry:
    """One environment setting, where it is written, and how to remove it."""

    name: str
    value: str | None          # None: not known statically (secretRef, valueFrom, expansion)
    file: SourceFile
    span: Span                 # the whole setting
    origin: str                # e.g. "Dockerfile ENV", "compose environment", "k8s env", "ConfigMap data"
    removal: list[Edit] | None = None   # edits that remove exactly this setting; None if unsafe
    launches: list["Launch"] = field(default_factory=list)   # the launches it reaches

    # written out: built once per token or per file (record's generic __init__ costs ~1 us more)
    def __init__(self, name, value, file, span, origin, removal=None, launches=MISSING):
        self.name = name
        self.value = value
        self.file = file
        self.span = span
        self.origin = origin
        self.removal = removal
        self.launches = [] if launches is MISSING else launches

    @property
    def line(self) -> int:
        return self.file.line_col(self.span[0])[0]

    def __reduce__(self):
        """Pickled as a tuple of fields (see Arg); the launches go as state, after the entry
        exists, since a launch refers back to its entries."""
        return (EnvEntry, (self.name, self.value, self.file, self.span, self.origin, self.removal),
                {k: v for k, v in self.__dict__.items() if k not in _ENV_ARGS})


_ENV_ARGS = ("name", "value", "file", "span", "origin", "removal")


def apply_edits(text: str, edits: list[Edit]) -> str:
    """`text` with the (non-overlapping) edits applied; the one place span edits become text."""
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        text = text[:edit.start] + edit.text + text[edit.end:]
    return text


@record(frozen=True)
class AppendSite:
    """Where and how one more argv item is written after the last one."""

    file: SourceFile
    offset: int
    template: str     # e.g. " {}" (shell), ', "{}"' (JSON/flow list), "\n      - {}" (YAML block list)

    def edit(self, token: str) -> Edit:
        return Edit(self.file, self.offset, self.offset, self.template.format(token))


@record(eq=False)
class Named:
    """A vLLM image reference or `vllm` pin written in a file: where (`span`: the whole
    reference or pin as matched), the part a bump replaces (`edit_span`, None when a human must
    pick the new value: digest, variant, floating tag), the release it implies, and how it is
    written (`image`, `values tag`, `kustomize newTag`, `chart appVersion`, `KubeAI
    modelServers`, `pin`)."""
    file: SourceFile
    span: Span
    text: str                  # as written: `vllm/vllm-openai:v0.22.0`, `vllm==0.8.5`, `tag v0.8.5`
    how: str
    release: tuple[int, int, int] | None = None
    edit_span: Span | None = None
    image: str = ""            # the image it stands for (a values tag, a newTag: `repository:tag`)
    launches: list = field(default_factory=list)   # the launches that run it (lint.trace)
    key: tuple = ()            # its name, the same before and after a migration edits (lint.trace)

    @property
    def line(self) -> int:
        return self.file.line_col(self.span[0])[0]

    def where(self) -> str:
        return f"{self.file.display}:{self.line}"


# Launch kinds
SERVE = "serve"            # plain `vllm serve` (also the vllm/vllm-openai image entrypoint)
TOKENS_ONLY = "tokens-only"
RENDER = "render"          # `vllm launch render`
API_SERVER = "api-server"  # python -m vllm.entrypoints.openai.api_server
PROXY = "proxy"            # a router / reference proxy
OTHER = "other"            # another vllm subcommand (bench, chat, ...)
ENGINE = "engine"          # the Python engine API: LLM(...), AsyncEngineArgs(...), from_engine_args
# `via` of a launch KubeAI's operator starts (a Model, a models-chart entry): its image is the
# operator's (`modelServers.VLLM.images`), never the Model's own
KUBEAI_VIA = "via KubeAI"


@record
class Launch:
    """One vLLM (or proxy) launch: its argv and environment, with where each part is written."""
    kind: str
    file: SourceFile
    span: Span                 # where the launch is written (its first token)
    argv: list[Arg]            # whole argv, program words included
    options_start: int         # index of the first vLLM option/positional after the subcommand
    context: str               # human name: "container vllm (Deployment/llm)", "service vllm", "script"
    group: str                 # deployment unit key: launches of one container/service/script share it
    env: list[EnvEntry] = field(default_factory=list)
    append_site: AppendSite | None = None
    not_editable: str | None = None    # why the argv can't be edited safely, if it can't
    image: str | None = None
    env_from: list[str] = field(default_factory=list)   # ConfigMap names (k8s envFrom)
    program: str = "vllm"
    hostnames: list[str] = field(default_factory=list)  # names it is reached by (compose service, k8s workload)
    labels: dict[str, str] = field(default_factory=dict)  # k8s pod labels, for Service selectors
    gpus: list[int] | None = None      # GPU indices it is pinned to, when the config says
    gpu_count: int | None = None       # GPUs it asks for (k8s nvidia.com/gpu, compose count)
    release: tuple[int, int, int] | None = None   # the vLLM release it runs today (lint.releases)
    release_from: str = ""                        # what says so: "image vllm/vllm-openai:v0.29.0"
    # where that release is pinned when `migrate` does not bump it (lint.releases.unbumped_pin):
    # "pyproject" (a lock file resolves it), "script" (a `pip install vllm==X` in its own file) or
    # "requirements" (VL306's stand-in for a module that starts no vLLM: no launch reaches the pin)
    release_pin: str = ""
    release_unnamed: str = ""  # a pinned image whose tag names no release (lint.releases.unnamed_release)
    # the release came through a link to another file that `migrate` does not bump for this
    # launch (lint.release_links: a Dockerfile that copies the script, a CI workflow's variable,
    # a config file's `image:`): its fixes for a new release wait for that file's upgrade
    release_linked: bool = False
    via: str = ""              # how it was recognised, when not plain (`via docker run, image $IMAGE = ...`)
    branch: tuple = ()         # shell: the if/case arms it is written in (parsers.shell_lex.exclusive)
    alternative_of: int | None = None   # line of the same engine written in an exclusive arm
    count: int | None = 1      # engines it starts: a `for` loop's iterations (None: known at run time)
    proxy_flavour: str = ""    # PROXY read from its own source (parsers.pyproxy): custom-multiturn | custom
    # where the vLLM image it runs and the `vllm` pin of its Python environment are written
    # (lint.trace): what `migrate` bumps, and only these
    image_refs: list["Named"] = field(default_factory=list)
    pins: list["Named"] = field(default_factory=list)
    # KServe: the ServingRuntime (or ClusterServingRuntime) whose container this launch is
    # (`serving_runtime`), or the one an InferenceService predictor names (`runtime_ref`):
    # lint.project.link gives the predictor the runtime's image and env when the tree holds it,
    # and `image_source` the file that writes that image (lint.trace: the tag it reaches)
    serving_runtime: str = ""
    runtime_ref: str = ""
    image_source: SourceFile | None = None
    # the image the launch's own file names, where linking gave it another (`image_source` set:
    # a compose override's, a KServe runtime's): what a per-launch rule reads, as the parse
    # workers that run it before linking see it
    parsed_image: str | None = None
    # docker compose: the service this launch is, in a compose file docker compose reads by
    # default (`docker-compose.yml`, `compose.yaml`): the override file beside it is merged into
    # it (lint.project.link); "" elsewhere
    compose_service: str = ""
    # the file vLLM reads more options from (`--config FILE`), as displayed, when its options were
    # read into argv (parsers.options_file); "" when there is none or it was not read
    options_from: str = ""

    @property
    def port(self) -> int | None:
        arg = self.flag_value("--port")
        if arg is None:
            return 8000 if self.kind in (SERVE, TOKENS_ONLY, API_SERVER, RENDER) else None
        try:
            return int(arg.value)
        except ValueError:
            return None

    @property
    def line(self) -> int:
        return self.file.line_col(self.span[0])[0]

    @property
    def options(self) -> list[Arg]:
        return self.argv[self.options_start:]

    def flag_args(self, flag: str) -> Iterator[tuple[int, Arg]]:
        """Tokens that spell `flag` (`--x-y`, `--x_y`, `--x-y=...`), vLLM's spelling rules."""
        want = normalize_flag(flag)
        for i, arg in enumerate(self.argv[self.options_start:], self.options_start):
            if arg.value.startswith("--") and normalize_flag(arg.value.split("=", 1)[0]) == want:
                yield i, arg

    def has_flag(self, flag: str) -> bool:
        return any(True for _ in self.flag_args(flag))

    def flag_value(self, flag: str) -> Arg | None:
        """The value of the last occurrence of `flag` (last wins, as in argparse)."""
        found: Arg | None = None
        for i, arg in self.flag_args(flag):
            if "=" in arg.value:
                name, _, value = arg.value.partition("=")
                found = Arg(value, arg.file, _value_span(arg, len(name) + 1), arg.dynamic, False)
            elif i + 1 < len(self.argv):
                found = self.argv[i + 1]
        return found

    def model(self) -> str | None:
        """The model it serves as written: `--model`, else the first positional (`vllm serve M`)."""
        flag = self.flag_value("--model")
        if flag is not None:
            return flag.value
        opts = self.options
        if opts and not opts[0].value.startswith("-"):
            return opts[0].value
        return None

    def env_value(self, name: str) -> str | None:
        value = None
        for entry in self.env:
            if entry.name == name:
                value = entry.value
        return value

    def append_edit(self, token: str) -> Edit | None:
        if self.not_editable or self.append_site is None:
            return None
        return self.append_site.edit(token)


def _value_span(arg: Arg, prefix_len: int) -> Span | None:
    """Span of the value part of `--flag=value` when the token is written unquoted."""
    if arg.span is None or arg.file is None:
        return None
    raw = arg.file.text[arg.span[0]:arg.span[1]]
    if raw.startswith(arg.value[:prefix_len]):
        return (arg.span[0] + prefix_len, arg.span[1])
    return None


def normalize_flag(flag: str) -> str:
    """vLLM accepts `--kv_transfer_config` for `--kv-transfer-config`."""
    return "--" + flag.lstrip("-").replace("_", "-")


@record
class ParseError(Exception):
    """A file that could not be parsed: the line, and why."""
    line: int
    reason: str

    def __str__(self) -> str:
        return self.reason


@record
class Finding:
    """One finding of a rule: where, what, and its fix if it has one."""
    code: str
    name: str
    severity: str              # error | warning | info
    file: SourceFile
    span: Span
    message: str               # one line: what, and what to do (about 120 characters)
    fix: Fix | None = None
    fixable: bool = False
    detail: str = ""           # the why and the evidence: JSON, SARIF, `--show-details`, the editor
    # a fix the rule has that this run does not offer: "unsafe" (needs --unsafe-fixes) or
    # "migrate X.Y.Z" (held back for the upgrade to X.Y.Z: gate_fixes_by_release); the summary counts them
    withheld: str = field(default="", compare=False)

    @property
    def line_col(self) -> tuple[int, int]:
        return self.file.line_col(self.span[0])

    def sort_key(self) -> tuple:
        return (self.file.display, *self.line_col, self.code)


@record
class ServiceRef:
    """A Kubernetes Service: its name reaches the pods its selector matches."""

    name: str
    selector: dict[str, str]
    ports: dict[int, int | str]      # service port -> target port


@record
class ParsedFile:
    """What a parser returns for one file."""

    source: SourceFile
    launches: list[Launch] = field(default_factory=list)
    env: list[EnvEntry] = field(default_factory=list)        # every env setting in the file
    configmaps: dict[str, list[EnvEntry]] = field(default_factory=dict)
    services: list["ServiceRef"] = field(default_factory=list)        # k8s Services
    # (start, end, codes, reason): resources annotated `vllmlint.io/ignore: "VL101,..."`
    ignore_ranges: list[tuple[int, int, list[str], str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)           # what was skipped, for the user
    # Python: the `import vllm.x` / `from vllm.x import y` statements (ast nodes) the parser's walk
    # met, in walk order; None where not read (another kind, or a file the walk did not finish).
    # VL306 reads them instead of parsing the file again.
    vllm_imports: list | None = None
    # shell: (start, end) of each heredoc body the front end read as a script of its own
    # (`cat > run.sh <<EOF`, `bash -s <<EOF`): bash reads a body as data, so the parse-back
    # (lint.parseback) runs `bash -n` on each of these too
    scripts: list[tuple[int, int]] = field(default_factory=list)
    # a compose override file (`docker-compose.override.yml`): what it sets per service, merged
    # into the service of the compose file beside it (lint.project.link)
    compose_overrides: dict[str, "ComposeOverride"] = field(default_factory=dict)
    # (path, text) of each other file a launch's options were read from (`--config FILE`,
    # parsers.options_file): a parse reused while its own text is unchanged must check these too
    read_files: list[tuple[Path, str]] = field(default_factory=list)


@record
class ComposeOverride:
    """One service of a compose override file, as docker compose merges it into the service of
    the same name in the compose file beside it: its variables win, its image replaces."""
    env: list[EnvEntry]
    image: str | None = None
    line: int = 0


ParserFn = Callable[[SourceFile], ParsedFile]


def remove_from_run(text: str, spans: list[Span], i: int) -> Span | None:
    """The span that removes item `i` of a blank-separated run of items (shell words, `ENV`
    pairs) with the blank that separates it, keeping the others and their line breaks."""
    start, end = spans[i]
    if i > 0:
        gap = text[spans[i - 1][1]:start]
        if "#" in gap:
            return None          # a comment line sits in between: leave it to a human
        return spans[i - 1][1], end
    if i + 1 < len(spans):
        nxt = spans[i + 1][0]
        if "\n" not in text[end:nxt]:
            return start, nxt
        while end < len(text) and text[end] in " \t":
            end += 1
    return start, end


# What may stand between two argv tokens removed together (a flag and its value): list
# separators, a YAML block-list dash, a shell line continuation.
_BETWEEN_RE = lazy_re(r"[ \t]*(?:,[ \t]*)?(?:\\?\r?\n[ \t]*(?:-[ \t]+)?)?")


def _remove_array_word(file: SourceFile, text: str, s: int, e: int, line_start: int, before: str) -> list[Edit] | None:
    """The last word(s) of a shell array or subshell: `CMD=(vllm serve m --flag)`, or `  --flag)`
    on a line of its own (joined to the line above when that one ends plainly)."""
    blank = re.search(r"[ \t]+$", before)
    if before.strip():
        return [Edit(file, line_start + blank.start(), e, "")] if blank else None
    if line_start == 0:
        return None
    prev_start = text.rfind("\n", 0, line_start - 1) + 1
    prev = text[prev_start:line_start - 1].rstrip("\r")
    if prev.strip() and "#" not in prev and not prev.endswith(("\\", "(")):
        return [Edit(file, prev_start + len(prev), e, "")]
    return [Edit(file, line_start, e, "")]


def _remove_mapping_entry(file: SourceFile, text: str, line_start: int, whole_lines: tuple[int, int],
                          indent: int) -> list[Edit] | None:
    """`key: value` of a YAML block mapping on lines of its own (an engine argument written as a
    key), unless it is the mapping's only entry (the mapping would become null)."""
    def indent_of(line: str) -> int | None:
        body = line.split("#", 1)[0] if line.lstrip().startswith("#") else line
        return len(line) - len(line.lstrip(" \t")) if body.strip() else None

    above = text[:line_start].splitlines()
    prev = next((indent_of(l) for l in reversed(above) if indent_of(l) is not None), None)
    below = text[whole_lines[1]:].splitlines()
    nxt = next((indent_of(l) for l in below if indent_of(l) is not None), None)
    if (prev is None or prev < indent) and (nxt is None or nxt < indent):
        return None
    return [Edit(file, *whole_lines, "")]


def _remove_json_member(file: SourceFile, text: str, key_start: int) -> list[Edit] | None:
    """The member of a top-level JSON object whose key starts at `key_start`, with one comma."""
    from .jsonpos import locate, member_removal

    try:
        loc = locate(text)
    except ValueError:
        return None
    path = next((p for p, m in loc.members.items() if len(p) == 1 and m.key_start == key_start), None)
    if path is None:
        return None
    s, e = member_removal(text, loc, path)
    return [Edit(file, s, e, "")]


def remove_args(args: list[Arg]) -> list[Edit] | None:
    """Edits that remove adjacent argv tokens (an option and its values) from the file, in the
    syntax they are written in: a YAML block-list item (its whole line), an element of a JSON,
    YAML-flow or Python list (with one comma), a shell word (with the blank before it; a line
    left holding only a continuation goes too). None when the tokens cannot be removed exactly
    (no span, written at run time, not adjacent, or a syntax not recognised)."""
    if not args or any(a.file is None or a.span is None or a.dynamic for a in args):
        return None
    file = args[0].file
    if any(a.file is not file for a in args):
        return None
    text = file.text
    if file.kind == "triton" and len(args) == 1 and getattr(args[0], "keyword_style", None) == "key":
        return _remove_json_member(file, text, args[0].span[0])     # a member of Triton's model.json
    spans = sorted(a.span for a in args)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        if not _BETWEEN_RE().fullmatch(text[end:start]):
            return None
    s, e = spans[0][0], spans[-1][1]
    line_start = text.rfind("\n", 0, s) + 1
    line_end = text.find("\n", e)
    line_end = len(text) if line_end < 0 else line_end
    before, after = text[line_start:s], text[e:line_end].rstrip("\r")
    whole_lines = (line_start, line_end + 1 if line_end < len(text) else line_end)

    # YAML block sequence: `  - --flag` (and its value item below it)
    if re.fullmatch(r"[ \t]*-[ \t]+", before) and re.fullmatch(r"[ \t]*(?:#.*)?", after):
        return [Edit(file, *whole_lines, "")]
    # an element of a bracketed list: `[a, "--flag", "4", b]`, one element a line, or the last one
    follow = re.match(r"[ \t]*,[ \t]*", text[e:])
    if follow:
        if before.strip() == "" and after.lstrip().startswith(",") and after.strip() == ",":
            return [Edit(file, *whole_lines, "")]          # `    "--flag",` on a line of its own
        return [Edit(file, s, e + follow.end(), "")]
    lead = re.search(r",[ \t]*(?:\r?\n[ \t]*)?$", text[:s])
    if lead and re.match(r"[ \t]*(?:\r?\n[ \t]*)?[\])]", text[e:]):
        return [Edit(file, lead.start(), e, "")]           # the last element: take the comma before it
    if re.search(r"[\[(][ \t]*$", before) and re.match(r"[ \t]*[\])]", after):
        return [Edit(file, s, e, "")]                      # the only element
    if file.kind not in ("python", "compose", "k8s", "yaml") and after.lstrip().startswith(")") \
            and "," not in before[-2:]:
        return _remove_array_word(file, text, s, e, line_start, before)
    if file.kind in ("compose", "k8s", "yaml") and getattr(args[0], "keyword_style", None) == "key" \
            and before.strip() == "" and re.fullmatch(r"[ \t]*(?:#.*)?", after):
        return _remove_mapping_entry(file, text, line_start, whole_lines, len(before))
    if "," in before[-2:] or after.lstrip().startswith((",", "]", ")")):
        return None
    # shell words (scripts, `sh -c` strings, compose and k8s one-string commands, folded scalars)
    if after.strip() in ("\\", "") and before.strip() == "":
        if after.strip() == "\\":
            return [Edit(file, *whole_lines, "")]          # `  --flag \` on a line of its own
        prev = re.search(r"[ \t]*\\\r?\n[ \t]*$", text[:s])
        if prev:                                            # the last word of a continued command
            return [Edit(file, prev.start(), e, "")]
        if file.kind != "python":
            # a word alone on its line with no `\` before it: an array element, a line of a
            # folded YAML scalar or of a multi-line string: the line goes
            return [Edit(file, *whole_lines, "")]
        return None
    # the blank before a word that starts its line is the line's indentation, not a separator:
    # it stays (in a YAML block scalar it is what keeps the line inside the scalar)
    blank = re.search(r"[ \t]+$", before) if before.strip() else None
    trailing = re.match(r"[ \t]+", after)
    if blank and trailing and after.strip() and len(trailing.group()) > len(blank.group()):
        return [Edit(file, s, e + trailing.end(), "")]      # `m --flag  > log`: one blank stays
    if blank:
        return [Edit(file, line_start + blank.start(), e, "")]
    if trailing and after.strip():
        return [Edit(file, s, e + trailing.end(), "")]
    return None
