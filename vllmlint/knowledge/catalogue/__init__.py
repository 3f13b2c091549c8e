"""What each vLLM release accepts: flags, environment variables, JSON config fields.

The data files next to this module are generated from the released wheels by
`vllmlint catalogue add --builtin` (or its wrapper `scripts/extract_catalogue.py`: one
`vllm-X.json` per release, plus `index.json`: the releases each name was present in, and the
flags renamed between two releases). Nothing is loaded at import time; each file is read once
per process, when a rule first asks. The module lists (a release's `modules` and `exports`, the
index's `modules` and `moved_modules`: only Python module checks read them, and they are about
40% of the bytes) live in `modules/`, same names, read on first use: a one-file check skips them.

Releases a user added (`vllmlint catalogue add`: a nightly, a fork, a plugin install) live in
a folder of their own (`added.py`); `use(cat)` makes one the target's catalogue for this
process: `for_target` returns it for its release number and `history()` counts it as one more
release, placed after the built-in ones with a release number not above its own.

    cat = for_target((0, 30, 0))      # the newest catalogued release <= 0.30.0
    cat.flag("--max_model_len")       # vLLM's spelling rules: `_` = `-`
    history().flag_removed("--swap-space", (0, 30, 0))
"""
from __future__ import annotations

import json
from ...model.record import record
from functools import lru_cache
from pathlib import Path

from ..versions import fmt, parse_version

DATA = Path(__file__).resolve().parent
MODULES_DIR = "modules"
MODULE_DATA = DATA / MODULES_DIR
RELEASE_MODULE_KEYS = ("modules", "exports")          # a release's sections kept in MODULE_DATA
INDEX_MODULE_KEYS = ("modules", "moved_modules")      # the index's
Version = tuple  # (major, minor, patch)
HELP_FLAGS = {"--help": 0, "-h": 0}     # argparse adds them to every parser


@lru_cache(maxsize=4096)
def vkey(text: str) -> tuple[int, int, int]:
    # asked for the same few release names thousands of times a run (every removal record of
    # the history, every catalogue version): parsed once each (a tuple: nothing to share wrongly)
    return parse_version(text)


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _read_modules(name: str) -> dict:
    """The module sections kept in MODULE_DATA/`name` ({} for a release that records none)."""
    path = MODULE_DATA / name
    return _read(path) if path.is_file() else {}


@lru_cache(maxsize=1)
def index() -> dict:
    """index.json and its module history: what every built-in release had."""
    return {**_index_main(), **_read_modules("index.json")}


@lru_cache(maxsize=1)
def _index_main() -> dict:
    """index.json without the module history."""
    return _read(DATA / "index.json")


def index_section(key: str) -> dict:
    """index()[key], reading the module history only when that is what is asked for."""
    return index()[key] if key in INDEX_MODULE_KEYS else _index_main()[key]


def versions() -> list[str]:
    """Catalogued releases, oldest first: the names of the per-release files (index.json lists
    the same, tests/test_catalogue.py checks; reading it costs a one-file check 5 ms)."""
    return list(_versions())


@lru_cache(maxsize=1)
def _versions() -> tuple[str, ...]:
    import os

    names = (n[len("vllm-"):-len(".json")] for n in os.listdir(DATA) if n.startswith("vllm-") and n.endswith(".json"))
    return tuple(sorted(names, key=vkey))


def release_for(target: Version) -> str | None:
    """The newest catalogued release not newer than `target` (None: older than all of them)."""
    return _release_for(tuple(target))


@lru_cache(maxsize=256)
def _release_for(target: tuple) -> str | None:
    best = None
    for v in versions():
        if vkey(v) <= target:
            best = v
    return best


_ADDED: "Catalogue | None" = None       # the added catalogue chosen as the target (use())


def use(cat: "Catalogue | None") -> None:
    """Make `cat` (an added release) the target's catalogue for this process; None: built-in only."""
    global _ADDED
    _ADDED = cat
    _merged_history.cache_clear()


def active() -> "Catalogue | None":
    return _ADDED


def for_target(target: Version) -> "Catalogue | None":
    if _ADDED is not None and tuple(target) == _ADDED.vtuple:
        return _ADDED
    v = release_for(target)
    return load(v) if v else None


def load(version: str) -> "Catalogue":
    """A built-in release's catalogue; the name of the added release in use() gives that one
    (the merged history names it among the built-in releases: VL306's `rem.last`, VL307's target)."""
    if _ADDED is not None and version == _ADDED.name:
        return _ADDED
    return _load_builtin(version)


@lru_cache(maxsize=None)
def _load_builtin(version: str) -> "Catalogue":
    return Catalogue(_read(DATA / f"vllm-{version}.json"), modules_file=f"vllm-{version}.json")


load.cache_info, load.cache_clear = _load_builtin.cache_info, _load_builtin.cache_clear   # as when load was the cache


def normalize(token: str) -> str:
    """vLLM's FlexibleArgumentParser: underscores become dashes in the name, up to the first
    dot (`--kv_transfer_config.kv_role` -> `--kv-transfer-config.kv_role`)."""
    if not token.startswith("--"):
        return token
    head, dot, rest = token[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + rest


@record(frozen=True)
class Match:
    """How a release reads one option token."""
    kind: str                 # exact | prefix | ambiguous | unknown
    flag: str | None          # the option string it resolves to (`--no-x` stays `--no-x`)
    base: str | None          # the flag entry it belongs to (`--x` for `--no-x`)
    candidates: tuple = ()    # for `ambiguous`


class Catalogue:
    def __init__(self, data: dict, modules_file: str | None = None):
        self._data = data
        self._modules_file = modules_file     # a built-in release: its module lists, in MODULE_DATA
        self.version: str = data["version"]
        self.name: str = data.get("added", {}).get("name") or self.version   # an added one's own name
        self.flags: dict = data["flags"]
        self.env: dict = data["env"]
        self.env_adhoc: dict = data.get("env_adhoc", {})
        self.json: dict = data.get("json", {})
        self._options: dict[str, str] | None = None
        self._sorted: list[str] | None = None
        self._close_env: dict[str, list[str]] = {}      # did-you-mean answers, asked per launch and step
        self._close_flags: dict[tuple, list[str]] = {}
        self._modules: set[str] | None = None
        self._matches: dict[str, Match] = {}            # match() per name: names repeat across launches
        self._readings: dict[str, tuple] = {}           # argv._signature's (match, nargs) per name
        self._signatures: dict[tuple, tuple] = {}       # and its answer per launch shape (names)

    def __repr__(self) -> str:
        return f"<Catalogue vLLM {self.version}>"

    @property
    def data(self) -> dict:
        """Everything catalogued for the release (a built-in one's module lists read on first use)."""
        if self._modules_file is not None:
            self._data.update(_read_modules(self._modules_file))
            self._modules_file = None
        return self._data

    @property
    def official(self) -> bool:
        """Built in, or added from vLLM's own release wheel (distribution `vllm`, version X.Y.Z):
        its image tag is vX.Y.Z and `vllm==X.Y.Z` installs it. A nightly, a fork or a plugin
        install is not: which image ships it is the user's to say."""
        head = self._data.get("added")
        return head is None or bool(head.get("release"))

    @property
    def kv(self) -> dict:
        """What the release's KV connectors read (`connectors`, `nixl_extra_keys`, ...)."""
        return self._data.get("kv", {})

    @property
    def vtuple(self) -> tuple[int, int, int]:
        return vkey(self.version)

    # -- flags ----------------------------------------------------------------------------
    @property
    def options(self) -> dict[str, str]:
        """Every option string the parser knows -> the flag entry it belongs to."""
        if self._options is None:
            opts: dict[str, str] = {}
            for name, e in self.flags.items():
                opts[name] = name
                for neg in e.get("neg", []):
                    opts.setdefault(neg, name)
                for alias in e.get("alias", []):
                    opts.setdefault(alias, name)
            for name in HELP_FLAGS:
                opts.setdefault(name, name)
            self._options = opts
            self._sorted = sorted(o for o in opts if o.startswith("--"))
        return self._options

    def match(self, name: str) -> Match:
        """Resolve an option name (no `=value`, no dotted part) the way argparse does:
        exact, then a unique prefix of a long option (allow_abbrev)."""
        hit = self._matches.get(name)
        if hit is None:
            hit = self._matches[name] = self._match(name)
        return hit

    def _match(self, name: str) -> Match:
        opts = self.options
        norm = normalize(name)
        if norm in opts:
            return Match("exact", norm, opts[norm])
        if not norm.startswith("--"):
            return Match("unknown", None, None)
        hits = [o for o in self._sorted if o.startswith(norm)]
        if len(hits) == 1:
            return Match("prefix", hits[0], opts[hits[0]])
        if hits:
            return Match("ambiguous", None, None, tuple(hits[:6]))
        return Match("unknown", None, None)

    def flag(self, name: str) -> dict | None:
        m = self.match(name)
        return self.flags.get(m.base) if m.kind == "exact" and m.base in self.flags else None

    def nargs(self, option: str) -> object:
        """How many values an option string takes: 0, 1, '?', '+', '*' or N."""
        base = self.options.get(option, option)
        if option in HELP_FLAGS or option.startswith("--no-") and option not in self.flags:
            return 0
        e = self.flags.get(base)
        return 1 if e is None else e.get("n", 1)

    def short_options(self) -> set[str]:
        return {o for o in self.options if not o.startswith("--")}

    def close_flags(self, name: str, n: int = 1) -> list[str]:
        key = (name, n)
        if key not in self._close_flags:
            import difflib

            self._close_flags[key] = difflib.get_close_matches(normalize(name), self._sorted_options(), n=n,
                                                               cutoff=0.75)
        return list(self._close_flags[key])

    def _sorted_options(self) -> list[str]:
        self.options
        return self._sorted or []

    # -- environment ----------------------------------------------------------------------
    def reads_env(self, name: str) -> bool:
        return name in self.env or name in self.env_adhoc

    def close_env(self, name: str) -> list[str]:
        if name not in self._close_env:
            import difflib

            self._close_env[name] = difflib.get_close_matches(name, list(self.env), n=1, cutoff=0.85)
        return self._close_env[name]

    # -- JSON config flags ----------------------------------------------------------------
    def json_flag(self, flag: str) -> dict | None:
        e = self.json.get(flag)
        return e if e and e.get("cli") else None

    @property
    def deprecated_modules(self) -> dict:
        return self._data.get("deprecated_modules", {})

    @property
    def nixl_extra_keys(self) -> dict:
        return self.kv.get("nixl_extra_keys", {})

    @property
    def nixl_extra_defaults(self) -> dict:
        """key -> the source text of the default NixlConnector passes to get_from_extra_config."""
        return self.kv.get("nixl_extra_defaults", {})

    @property
    def other_extra_keys(self) -> dict:
        """kv_connector_extra_config key -> the other registered connectors that read it."""
        return self.kv.get("other_extra_keys", {})

    @property
    def bidirectional_unsupported(self) -> list:
        """The `raise NotImplementedError` sites tied to bidirectional_kv_xfer:
        `{"at": "file:line", "when": "pcp" | "push", "test": ..., "text": ...}`."""
        return self.kv.get("bidirectional_unsupported", [])

    @property
    def has_modules(self) -> bool:
        return bool(self.data.get("modules"))

    def has_module(self, dotted: str) -> bool:
        """Whether `vllm.a.b` is a module (a file or a package) of this release."""
        if self._modules is None:
            mods = set()
            for pkg, leaves in self.data.get("modules", {}).items():
                for leaf in leaves.split():
                    mods.add(pkg if leaf == "__init__" else f"{pkg}.{leaf}")
            self._modules = mods
        return dotted in self._modules

    def exports(self, dotted: str) -> set[str] | None:
        """Top-level public names a `vllm.entrypoints` module defines (None: not recorded)."""
        names = self.data.get("exports", {}).get(dotted)
        return None if names is None else set(names.split())


# ------------------------------------------------------------------------------------------
# History across releases
# ------------------------------------------------------------------------------------------
@record(frozen=True)
class Removal:
    """A name the catalogued releases dropped: the last release that had it, the first without it."""
    name: str
    last: str                 # the last catalogued release that had it
    removed_in: str           # the first catalogued release after `last` without it
    info: dict                # what the last release said (dep, use, n, neg_of)


class History:
    def __init__(self, data: dict, vtuples: dict | None = None, modules_file: str | None = None):
        self.data = data
        self._modules_file = modules_file     # the built-in index: its module history, in MODULE_DATA
        self.versions = data["versions"]
        self._pos = {v: i for i, v in enumerate(self.versions)}
        self._vt = dict(vtuples or {})       # release name -> number, for added releases
        # (table, name, target) -> Removal: the same questions come back for every launch and,
        # in a migrate chain, every step (a frozen answer: shared safely)
        self._removals: dict = {}

    def vt(self, name: str) -> tuple[int, int, int]:
        """The release number of a release in this history (an added one: the number it has)."""
        return self._vt.get(name) or vkey(name)

    def _removal(self, table: dict, name: str, target: Version) -> Removal | None:
        rec = table.get(name)
        if rec is None:
            return None
        key = (id(table), name, tuple(target))
        if key in self._removals:
            return self._removals[key]
        found = self._removals[key] = self._find_removal(rec, name, target)
        return found

    def _find_removal(self, rec, name: str, target: Version) -> Removal | None:
        runs = rec["runs"] if isinstance(rec, dict) else rec
        last = None
        for first, end in runs:
            if self.vt(first) <= tuple(target):
                last = end
        if last is None:
            return None
        i = self._pos[last]
        if i + 1 >= len(self.versions) or self.vt(self.versions[i + 1]) > tuple(target):
            return None         # still there at the target
        info = {k: v for k, v in rec.items() if k != "runs"} if isinstance(rec, dict) else {}
        return Removal(name, last, self.versions[i + 1], info)

    def _added(self, table: dict, name: str, target: Version) -> str | None:
        """The first catalogued release after `target` that has it (for 'added in')."""
        rec = table.get(name)
        if rec is None:
            return None
        runs = rec["runs"] if isinstance(rec, dict) else rec
        for first, _ in runs:
            if self.vt(first) > tuple(target):
                return first
        return None

    def ever(self, kind: str, name: str) -> bool:
        return name in (self._module_section(kind) if kind in INDEX_MODULE_KEYS else self.data[kind])

    def flag_removed(self, flag: str, target: Version) -> Removal | None:
        return self._removal(self.data["flags"], flag, target)

    def flag_added_after(self, flag: str, target: Version) -> str | None:
        return self._added(self.data["flags"], flag, target)

    def env_removed(self, name: str, target: Version) -> Removal | None:
        return self._removal(self.data["env"], name, target)

    def env_added_after(self, name: str, target: Version) -> str | None:
        return self._added(self.data["env"], name, target)

    def json_field_removed(self, flag: str, key: str, target: Version) -> Removal | None:
        return self._removal(self.data["json_fields"].get(flag, {}), key, target)

    def nixl_key_removed(self, key: str, target: Version) -> Removal | None:
        return self._removal(self.data["nixl_extra_keys"], key, target)

    def nixl_key_added_after(self, key: str, target: Version) -> str | None:
        return self._added(self.data["nixl_extra_keys"], key, target)

    def _module_section(self, key: str) -> dict:
        """`modules` or `moved_modules`, read on first use for the built-in index."""
        if self._modules_file is not None:
            self.data = {**self.data, **_read_modules(self._modules_file)}
            self._modules_file = None
        return self.data.get(key, {})

    def module_gone(self, dotted: str, target: Version) -> Removal | None:
        """A `vllm.*` module an earlier catalogued release had and `target` does not."""
        return self._removal(self._module_section("modules"), dotted, target)

    def module_moved(self, dotted: str, target: Version) -> tuple[str, str, list] | None:
        """(new module, release of the last move, [(module, release), ...] every move) following
        moves up to `target`."""
        seen, cur, when, hops = set(), dotted, None, []
        moved = self._module_section("moved_modules")
        while cur in moved and cur not in seen and vkey(moved[cur]["in"]) <= tuple(target):
            seen.add(cur)
            when = moved[cur]["in"]
            cur = moved[cur]["to"]
            hops.append((cur, when))
        return (cur, when, hops) if cur != dotted else None

    def renamed_to(self, flag: str, target: Version) -> tuple[str, str] | None:
        """(new name, release) following renames up to `target`, if `flag` was renamed."""
        seen, cur, when = set(), flag, None
        renamed = self.data["renamed_flags"]
        while cur in renamed and cur not in seen and self.vt(renamed[cur]["in"]) <= tuple(target):
            seen.add(cur)
            when = renamed[cur]["in"]
            cur = renamed[cur]["to"]
        return (cur, when) if cur != flag else None


@lru_cache(maxsize=1)
def _builtin_history() -> History:
    return History(_index_main(), modules_file="index.json")


def history() -> History:
    """What every catalogued release had; with an added release in use(), that one too."""
    return _builtin_history() if _ADDED is None else _merged_history()


@lru_cache(maxsize=1)
def _merged_history() -> History:
    from .extract import index_of

    cats = {v: load(v).data for v in versions()}
    order = [v for v in versions() if vkey(v) <= _ADDED.vtuple] + [_ADDED.name] + \
        [v for v in versions() if vkey(v) > _ADDED.vtuple]
    cats[_ADDED.name] = _ADDED.data
    return History(index_of(cats, order), {_ADDED.name: _ADDED.vtuple})


# ------------------------------------------------------------------------------------------
# Releases named on the command line or in the settings
# ------------------------------------------------------------------------------------------
ENV = "VLLMLINT_CATALOGUE_DIR"


def default_folder() -> Path:
    import os

    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "vllmlint" / "catalogue"


def folder(configured: str | Path | None = None) -> Path:
    """The user catalogue folder (`vllmlint catalogue add`): $VLLMLINT_CATALOGUE_DIR, else
    `configured` (the settings' catalogue-dir, already made absolute), else the cache folder."""
    import os

    env = os.environ.get(ENV)
    if env:
        return Path(env)
    return Path(configured) if configured else default_folder()


def named(value: str, added_dir: Path | None = None) -> "Catalogue":
    """The catalogue a name means: an added release's name (in `added_dir`), a built-in release
    number, or `latest` (the newest built-in one). ValueError (listing them) otherwise."""
    text = value.strip()
    if added_dir is not None and added_dir.is_dir():       # most runs: no added release, no import
        from . import added

        cat = added.load_added(added_dir, text)
        if cat is not None:
            return cat
    known = versions()
    if text.lower() == "latest":
        return load(known[-1])
    try:
        version = fmt(parse_version(text))
    except ValueError:
        version = None
    if version in known:
        return load(version)
    from . import added

    extra = added.names(added_dir) if added_dir is not None else []
    if version is not None and parse_version(version) > vkey(known[-1]):
        raise ValueError(
            f"{value!r} is not a catalogued vLLM release ({known[0]}-{known[-1]} are built in); the newest "
            f"release vllmlint knows is {newest_known(added_dir)}; add it with `vllmlint catalogue add vllm=={version}` (pip downloads its wheel; "
            f"`--latest` takes the newest on the index)")
    raise ValueError(
        f"{value!r} is not a catalogued vLLM release: use one of {known[0]}-{known[-1]} "
        f"({', '.join(known[-4:])}, ...), `latest`"
        + (f", or a release added in {added_dir}: {', '.join(extra)}" if extra else "")
        + "; to add one (a wheel, a nightly, a fork, a site-packages folder), run "
        "`vllmlint catalogue add PATH --name NAME` (docs/catalogue.md)")


def newest_known(added_dir: Path | None = None) -> str:
    """The newest release vllmlint knows: the newest built-in one, or a newer vLLM release added
    from its own wheel (`vllmlint catalogue add vllm==X.Y.Z`)."""
    best = versions()[-1]
    if added_dir is not None and added_dir.is_dir():
        from . import added

        for e in added.entries(added_dir):
            if e.release and parse_version(e.version) > vkey(best):
                best = e.name if e.name == e.version else f"{e.version} (added as {e.name})"
    return best


def resolve(value: str, added_dir: Path | None = None) -> tuple[tuple[int, int, int], "Catalogue | None"]:
    """(release number, the added catalogue or None) for a --target-version/--to/--from value."""
    cat = named(value, added_dir)
    return cat.vtuple, (cat if "added" in cat._data else None)


def version_text(target: Version) -> str:
    return fmt(tuple(target))


__all__ = ["Catalogue", "History", "Match", "Removal", "active", "for_target", "history", "index", "index_section",
           "load", "named", "newest_known", "normalize", "release_for", "resolve", "use", "versions", "version_text"]
