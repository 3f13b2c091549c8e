"""Helm charts as Helm renders them (first step of issue 15): render a chart with the real Helm
engine and learn, for every value in the values files, where it lands in the rendered output.

Engine: the `helm-python-sdk` package (`pip install 'vllmlint[helm]'`, Helm's Go SDK as a shared
library, offline) else a `helm` binary on PATH (`helm template`), else none (callers keep
today's masked reading of templates). Imported lazily: runs without a chart never load it.

Provenance: the chart is rendered a second time with every string scalar of the values files
replaced by a unique marker (`zqx<N>zq`); a marker found in the marker rendering names the values
file, key path and exact node of what the real rendering holds at that place.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml

MARKER_RE = re.compile(r"zqx(\d+)zq")
STR_TAG = "tag:yaml.org,2002:str"


class RenderError(Exception):
    pass


def chart_root(path: Path) -> Path | None:
    """The nearest folder at or above `path` holding a Chart.yaml."""
    for parent in ([path] if path.is_dir() else []) + list(path.parents):
        if (parent / "Chart.yaml").is_file():
            return parent
    return None


def sibling_values(root: Path) -> list[Path]:
    """Values files beside the chart's values.yaml (`values-prod.yaml`, `values.global.yaml`):
    each one is a rendering of its own, on top of values.yaml (as Helm's `-f`)."""
    return sorted(p for p in root.iterdir()
                  if p.is_file() and re.fullmatch(r"values[-.].+\.ya?ml", p.name) and p.name != "values.yaml")


def engine() -> str | None:
    """Which Helm renders: "sdk", "binary" or None (masked reading stays the fallback)."""
    try:
        import helm_python  # noqa: F401
        return "sdk"
    except Exception:
        return "binary" if shutil.which("helm") else None


def render(root: Path, values: dict | None, name: str = "release", namespace: str = "default") -> dict[str, str]:
    """Template path (`<chart>/templates/x.yaml`) -> rendered manifest. Raises RenderError."""
    kind = engine()
    if kind == "sdk":
        import helm_python as helm
        try:
            chart = helm.Chart.load(str(root))
            return chart.render(values, name=name, namespace=namespace)
        except helm.HelmError as err:
            raise RenderError(str(err).strip()) from None
    if kind == "binary":
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as fh:
            yaml.safe_dump(values or {}, fh)
            fh.flush()
            out = subprocess.run(["helm", "template", name, str(root), "-n", namespace, "-f", fh.name],
                                 capture_output=True, text=True, timeout=120)
        if out.returncode:
            raise RenderError(out.stderr.strip())
        docs: dict[str, str] = {}
        for part in re.split(r"(?m)^---\s*\n(?=# Source: )", out.stdout):
            m = re.match(r"# Source: (\S+)\n", part)
            if m:
                docs[m.group(1)] = docs.get(m.group(1), "") + part[m.end():]
        return docs
    raise RenderError("no Helm engine (pip install 'vllmlint[helm]' or put `helm` on PATH)")


@dataclass
class Origin:
    """Where one string value of a values file is written."""

    file: Path
    text: str            # the values file's text (offsets refer to it)
    path: str            # key path: servingEngineSpec.modelSpec[0].env[1].value
    node: yaml.ScalarNode

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    @property
    def column(self) -> int:
        return self.node.start_mark.column + 1


@dataclass
class ValuesSet:
    """One rendering's values: the real ones, the marker ones, and what each marker stands for."""

    real: dict = field(default_factory=dict)
    marked: dict = field(default_factory=dict)
    origins: list[Origin] = field(default_factory=list)

    def origin(self, marker_id: str) -> Origin | None:
        i = int(marker_id)
        return self.origins[i] if 0 <= i < len(self.origins) else None


def _merge(base, over):
    """Helm's coalescing of values files: maps merge, everything else is replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base.get(k), v) if k in base else v
        return out
    return over


def load_values(files: list[tuple[Path, str]]) -> ValuesSet:
    """Values files in Helm's order (later wins), as (path, text)."""
    constructor = yaml.constructor.SafeConstructor()
    vs = ValuesSet()

    def build(node, path: str, file: Path, text: str):
        if isinstance(node, yaml.MappingNode):
            real, marked = {}, {}
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                real[key], marked[key] = build(v, f"{path}.{key}" if path else key, file, text)
            return real, marked
        if isinstance(node, yaml.SequenceNode):
            pairs = [build(v, f"{path}[{i}]", file, text) for i, v in enumerate(node.value)]
            return [p[0] for p in pairs], [p[1] for p in pairs]
        value = constructor.construct_object(node, deep=True)
        if node.tag == STR_TAG and isinstance(value, str):
            vs.origins.append(Origin(file, text, path, node))
            return value, f"zqx{len(vs.origins) - 1}zq"
        return value, value

    for file, text in files:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        if node is None:
            continue
        real, marked = build(node, "", file, text)
        if isinstance(real, dict):
            vs.real, vs.marked = _merge(vs.real, real), _merge(vs.marked, marked)
    return vs


def find_value(rendered_marked: str, vs: ValuesSet, needle: str) -> list[Origin]:
    """Origins of the values whose real text is `needle` and whose marker the marker rendering
    holds: where a rendered string came from."""
    return [o for i in dict.fromkeys(MARKER_RE.findall(rendered_marked))
            if (o := vs.origin(i)) is not None and o.node.value == needle]
