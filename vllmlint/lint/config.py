"""Settings: `[tool.vllmlint]` in pyproject.toml or a `.vllmlint.toml` (its own keys at the top),
found from the current folder upwards; command-line options win.

    [tool.vllmlint]
    target-version = "0.30.0"
    select = ["VL"]
    extend-select = ["VL9"]    # added to select (as ruff's)
    ignore = ["VL201"]
    exclude = ["charts/legacy/**"]
    per-file-ignores = {"deploy/upstream/**" = ["VL101"]}
    severity = {VL201 = "error"}
    topology = "ops/topo.txt"
    model-config = "models/qwen/config.json"
    prompt-tokens = 8192
    fail-level = "warning"     # the lowest severity that fails `check` (error | warning | info)
    helm-values = {"charts/serving" = ["values-prod.yaml"]}   # values files rendered on top of a chart's values.yaml
    catalogue-dir = "ops/vllm-catalogue"   # releases added with `vllmlint catalogue add` (committed)

    [tool.vllmlint.releases]   # the vLLM release launches run where nothing in the tree says it
    "bench/**" = "0.22.0"
"""
from __future__ import annotations

import fnmatch
import sys
from ..model.record import field, record
from pathlib import Path

KEYS = {"target-version", "select", "extend-select", "ignore", "exclude", "per-file-ignores", "severity", "topology",
        "model-config", "prompt-tokens", "fail-level", "helm-values", "catalogue-dir",
        "releases"}


class ConfigError(Exception):
    """Errors in the settings file, one a line, each `file:line: key: why` (exit 2, as a usage error)."""


@record
class Settings:
    """The run's settings: defaults, then the settings file, then the command line."""
    source: str | None = None                      # the file the settings came from
    root: Path = field(default_factory=Path.cwd)   # paths in the settings are relative to it
    target_version: str = "0.30.0"
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    severity: dict[str, str] = field(default_factory=dict)
    topology: str | None = None
    model_config: str | None = None
    prompt_tokens: int | None = None
    fail_level: str = "warning"
    catalogue_dir: str | None = None               # added releases (absolute; None: the cache folder)
    helm_values: dict[str, list[str]] = field(default_factory=dict)   # chart folder -> values files
    lines: dict[str, int] = field(default_factory=dict, compare=False)   # key -> its line in `source`

    def where(self, key: str) -> str:
        """`pyproject.toml:7`: where a key was set, for an error message."""
        return _where(_display(Path(self.source)) if self.source else "settings", self.lines.get(key, 0))
    releases: dict[str, str] = field(default_factory=dict)    # path glob -> the vLLM release launches there run
    target_explicit: bool = False       # the target was named (command line or settings), not the default

    def chart_values(self, extra: tuple[str, ...] = ()) -> dict:
        """For `load`: chart root (None: every chart) -> values files, absolute. A values file
        of the setting is relative to its chart's folder when it is there, else to the settings'
        folder; `--values` files (`extra`) are relative to the current folder."""
        out: dict = {}
        for chart, files in self.helm_values.items():
            root = (self.root / chart).absolute()
            out[root] = [(root / f if (root / f).exists() else self.root / f).absolute() for f in files]
        if extra:
            out[None] = [Path(f).absolute() for f in extra]
        return out

    def excluded(self, display: str, path: Path) -> bool:
        rel = _relative(path, self.root)
        return any(_match(rel, pat) or _match(display, pat) for pat in self.exclude)

    def ignored_codes(self, display: str, path: Path) -> list[str]:
        # asked once per finding: no patterns, no work; a path resolved once per file, not per
        # finding (two Path.resolve calls each: a tenth of a bulk run's rule time)
        if not self.per_file_ignores:
            return []
        cache = self.__dict__.setdefault("_relative", {})      # not a field: eq and repr ignore it
        key = (path, self.root)
        rel = cache.get(key)
        if rel is None:
            rel = cache[key] = _relative(path, self.root)
        codes: list[str] = []
        for pattern, values in self.per_file_ignores.items():
            if _match(rel, pattern) or _match(display, pattern):
                codes.extend(values)
        return codes

    def as_dict(self) -> dict:
        return {"source": self.source, "target-version": self.target_version, "select": self.select,
                "ignore": self.ignore, "exclude": self.exclude, "per-file-ignores": self.per_file_ignores,
                "severity": self.severity, "topology": self.topology, "model-config": self.model_config,
                "prompt-tokens": self.prompt_tokens, "fail-level": self.fail_level,
                "helm-values": self.helm_values, "catalogue-dir": self.catalogue_dir, "releases": self.releases}


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _match(path: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    return (fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, pattern + "/*")
            or fnmatch.fnmatch(path, "*/" + pattern) or path.startswith(pattern + "/"))


def find_config(start: Path) -> tuple[Path, dict] | None:
    start = start.resolve()
    for folder in [start, *start.parents]:
        own = folder / ".vllmlint.toml"
        if own.is_file():
            return own, _load(own)
        py = folder / "pyproject.toml"
        if py.is_file() and _mentions_vllmlint(py):
            data = _load(py).get("tool", {}).get("vllmlint")
            if data is not None:
                return py, data
    return None


def _mentions_vllmlint(path: Path) -> bool:
    """A pyproject.toml that never says `vllmlint` has no [tool.vllmlint]: not parsed (a TOML
    parser costs a pre-commit run more than the check of one file)."""
    try:
        return b"vllmlint" in path.read_bytes()
    except OSError:
        return True            # _load words the error


def _load(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        import re

        m = re.search(r"\(at line (\d+), column \d+\)", str(err))
        line = int(m.group(1)) if m else len(_text(path).splitlines())     # "(at end of document)"
        raise ConfigError(f"{_where(_display(path), line)}: invalid TOML: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{_display(path)}: cannot read: {err}") from None


def load_settings(start: Path, explicit: str | None = None) -> Settings:
    """The settings, checked as the command line checks its options: every error is collected,
    each worded `file:line: key: why`, and raised together as one ConfigError."""
    if explicit:
        path = Path(explicit)
        data = _load(path)
        data = data.get("tool", {}).get("vllmlint", data) if path.name == "pyproject.toml" else data
        found: tuple[Path, dict] | None = (path, data)
    else:
        found = find_config(start)
    settings = Settings()
    if found is None:
        return settings
    path, data = found
    text = _text(path)
    table = "tool.vllmlint" if path.name == "pyproject.toml" else ""
    lines = key_lines(text, table)
    settings.source, settings.root, settings.lines = str(path), path.parent.resolve(), lines
    errors: list[tuple[int, str]] = []

    def error(key: str, why: str, value: str | None = None) -> None:
        line = (value_line(text, table, key, value) if value is not None else 0) or lines.get(key, 0)
        errors.append((line, f"{_where(_display(path), line)}: {key}: {why}"))

    for key in sorted(set(data) - KEYS):
        import difflib

        close = difflib.get_close_matches(key, sorted(KEYS), n=1)
        error(key, "unknown key" + (f"; did you mean `{close[0]}`?" if close else
                                    f" (known: {', '.join(sorted(KEYS))})"))
    settings.target_version = str(data.get("target-version", settings.target_version))
    for key, attr in (("select", "select"), ("extend-select", None), ("ignore", "ignore"), ("exclude", "exclude")):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            error(key, "must be a list of strings")
            continue
        if key != "exclude":
            for code in unknown_codes(value):
                error(key, f"unknown rule code or prefix {code!r}; see `vllmlint rules`", code)
        if attr:
            setattr(settings, attr, list(value))
    if settings.select:                       # an empty select already runs every rule
        settings.select += list(data.get("extend-select", []) if isinstance(data.get("extend-select"), list) else [])
    pfi = data.get("per-file-ignores", {})
    if not isinstance(pfi, dict) or not all(isinstance(v, list) and all(isinstance(c, str) for c in v)
                                            for v in pfi.values()):
        error("per-file-ignores", "must be a table of glob = [codes]")
    else:
        for glob, codes in pfi.items():
            for code in unknown_codes(codes):
                error("per-file-ignores", f"{glob!r}: unknown rule code or prefix {code!r}; see `vllmlint rules`",
                      code)
        settings.per_file_ignores = {k: list(v) for k, v in pfi.items()}
    sev = data.get("severity", {})
    if not isinstance(sev, dict):
        error("severity", "must be a table of CODE = \"error\" | \"warning\" | \"info\"")
        sev = {}
    from .registry import load_rules

    known = load_rules()
    for code, level in sev.items():
        if code.upper() not in known:
            error("severity", f"unknown rule code {code!r} (a full code, e.g. VL201); see `vllmlint rules`", code)
        if level not in ("error", "warning", "info"):
            error("severity", f"{code}: must be error, warning or info, not {level!r}", code)
    settings.severity = {k.upper(): v for k, v in sev.items()}
    for key, attr in (("topology", "topology"), ("model-config", "model_config"), ("catalogue-dir", "catalogue_dir")):
        if data.get(key):
            if not isinstance(data[key], str):
                error(key, "must be a path (a string)")
                continue
            setattr(settings, attr, str((settings.root / data[key])))
    if data.get("fail-level") is not None:
        if data["fail-level"] not in ("error", "warning", "info"):
            error("fail-level", f"must be error, warning or info, not {data['fail-level']!r}")
        else:
            settings.fail_level = data["fail-level"]
    hv = data.get("helm-values", {})
    if not isinstance(hv, dict) or not all(isinstance(v, list) and all(isinstance(x, str) for x in v)
                                           for v in hv.values()):
        error("helm-values", "must be a table of chart folder = [values files]")
    else:
        settings.helm_values = {k: list(v) for k, v in hv.items()}
    if data.get("prompt-tokens") is not None:
        value = data["prompt-tokens"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            error("prompt-tokens", f"must be a positive whole number, not {value!r}")
        else:
            settings.prompt_tokens = value
    try:
        settings.releases = _releases(data.get("releases", {}))
    except ValueError as e:
        error("releases", str(e))
    settings.target_explicit = "target-version" in data
    if errors:
        raise ConfigError("\n".join(e for _, e in sorted(errors, key=lambda e: e[0])))
    return settings


def unknown_codes(codes) -> list[str]:
    """The codes or prefixes that name no rule (ALL names every one): as --select checks them."""
    from .registry import load_rules

    known = list(load_rules())
    return [c for c in codes if c.upper() != "ALL" and not any(k.startswith(c.upper()) for k in known)]


def _display(path: Path) -> str:
    """The settings file as messages name it: relative to the current folder when inside it."""
    import os

    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return rel if not rel.startswith("..") else str(path)


def _where(source: str, line: int) -> str:
    return f"{source}:{line}" if line else source


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _in_table(header: str, table: str) -> bool:
    """Whether a `[header]` line belongs to our settings: `[tool.vllmlint]` and its sub-tables
    (`[tool.vllmlint.severity]`) in pyproject.toml; in .vllmlint.toml, the top and every table."""
    name = header.strip().strip("[]").strip().replace('"', "").replace("'", "")
    return not table or name == table or name.startswith(table + ".")


def key_lines(text: str, table: str) -> dict[str, int]:
    """Line of each top-level key of our table (a TOML parser gives values, not positions): a
    `key = ...` line inside the table, or a `[tool.vllmlint.key]` sub-table header."""
    import re

    out: dict[str, int] = {}
    inside = not table
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            inside = _in_table(stripped, table)
            name = stripped.strip("[]").strip().replace('"', "")
            sub = name[len(table) + 1:] if table else name
            if inside and sub and "." not in sub:
                out.setdefault(sub, n)
            continue
        m = re.match(r"""\s*["']?([A-Za-z0-9_-]+)["']?\s*=""", line)
        if inside and m:
            out.setdefault(m.group(1), n)
    return out


def value_line(text: str, table: str, key: str, value: str) -> int:
    """The line of `"value"` at or after `key`'s line inside our table (0: not found)."""
    start = key_lines(text, table).get(key, 0)
    if not start:
        return 0
    for n, line in enumerate(text.splitlines()[start - 1:], start):
        if f'"{value}"' in line or f"'{value}'" in line or line.strip().startswith(f"{value} ") \
                or line.strip().startswith(f"{value}="):
            return n
    return 0


def _releases(table) -> dict[str, str]:
    """`releases = {"bench/**" = "0.22.0"}`: path globs to the release X.Y.Z launches there run."""
    from ..knowledge.versions import fmt, parse_version

    if not isinstance(table, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
        raise ValueError("must be a table of path glob = \"X.Y.Z\" (the vLLM release run there)")
    out = {}
    for glob, value in table.items():
        try:
            out[glob] = fmt(parse_version(value.strip().lstrip("v")))
        except ValueError:
            raise ValueError(f"{glob!r} = {value!r} is not a release X.Y.Z") from None
    return out
