"""Settings: `[tool.vllmlint]` in pyproject.toml or a `.vllmlint.toml` (its own keys at the top),
found from the current folder upwards; command-line options win.

    [tool.vllmlint]
    target-version = "0.30.0"
    select = ["VL"]
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

KEYS = {"target-version", "select", "ignore", "exclude", "per-file-ignores", "severity", "topology",
        "model-config", "prompt-tokens", "fail-level", "helm-values", "catalogue-dir", "releases"}


class ConfigError(Exception):
    pass


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
        rel = _relative(path, self.root)
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
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: {err}") from None


def load_settings(start: Path, explicit: str | None = None) -> Settings:
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
    unknown = set(data) - KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(KEYS))})")
    settings.source, settings.root = str(path), path.parent.resolve()
    settings.target_version = str(data.get("target-version", settings.target_version))
    for key, attr in (("select", "select"), ("ignore", "ignore"), ("exclude", "exclude")):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: `{key}` must be a list of strings")
        setattr(settings, attr, value)
    pfi = data.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"{path}: `per-file-ignores` must be a table of glob = [codes]")
    settings.per_file_ignores = {k: list(v) for k, v in pfi.items()}
    sev = data.get("severity", {})
    bad = {k: v for k, v in sev.items() if v not in ("error", "warning", "info")}
    if bad:
        raise ConfigError(f"{path}: severity must be error, warning or info: {bad}")
    settings.severity = dict(sev)
    for key, attr in (("topology", "topology"), ("model-config", "model_config"), ("catalogue-dir", "catalogue_dir")):
        if data.get(key):
            setattr(settings, attr, str((settings.root / data[key])))
    if data.get("fail-level") is not None:
        if data["fail-level"] not in ("error", "warning", "info"):
            raise ConfigError(f"{path}: fail-level must be error, warning or info")
        settings.fail_level = data["fail-level"]
    hv = data.get("helm-values", {})
    if not isinstance(hv, dict) or not all(isinstance(v, list) and all(isinstance(x, str) for x in v)
                                           for v in hv.values()):
        raise ConfigError(f"{path}: `helm-values` must be a table of chart folder = [values files]")
    settings.helm_values = {k: list(v) for k, v in hv.items()}
    if data.get("prompt-tokens") is not None:
        settings.prompt_tokens = int(data["prompt-tokens"])
    settings.releases = _releases(path, data.get("releases", {}))
    settings.target_explicit = "target-version" in data
    return settings


def _releases(path: Path, table) -> dict[str, str]:
    """`releases = {"bench/**" = "0.22.0"}`: path globs to the release X.Y.Z launches there run."""
    from ..knowledge.versions import fmt, parse_version

    if not isinstance(table, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
        raise ConfigError(f"{path}: `releases` must be a table of path glob = \"X.Y.Z\" (the vLLM release run there)")
    out = {}
    for glob, value in table.items():
        try:
            out[glob] = fmt(parse_version(value.strip().lstrip("v")))
        except ValueError:
            raise ConfigError(f"{path}: releases: {glob!r} = {value!r} is not a release X.Y.Z") from None
    return out
