"""Helm charts as Helm renders them (issue 15): render a chart with the real Helm engine, learn
for every value in the values files where it lands in the rendered output, and check a fix in
the values by rendering again (`verify_fixes`).

Engine: a `helm` binary on PATH (`helm template`), else the `helm-python-sdk` package
(`pip install 'vllmlint[helm]'`, Helm's Go SDK as a shared library, offline), else none (callers
keep today's masked reading of templates). Imported lazily: runs without a chart never load it.

Provenance: the chart is rendered a second time with every string scalar of the values files
replaced by a unique marker (`zqx<N>zq`); a marker found in the marker rendering names the values
file, key path and exact node of what the real rendering holds at that place.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from ..model.record import field, record
from pathlib import Path

import yaml
from ..knowledge.launchers import may_launch

MARKER_RE = re.compile(r"zqx(\d+)zq")
IMAGE_LINE = re.compile(r"^([ \t]*(?:-[ \t]+)?image:[ \t]*)(.*)$", re.M)
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
    """Values files beside the chart's values.yaml (`values-prod.yaml`, `values.global.yaml`, and
    named the other way round, `gaudi-values.yaml`, `cpu.values.yaml`): each one is a rendering of
    its own, on top of values.yaml (as Helm's `-f`)."""
    return sorted(p for p in root.iterdir()
                  if p.is_file() and re.fullmatch(r"values[-.].+\.ya?ml|.+[-.]values\.ya?ml", p.name)
                  and p.name != "values.yaml")


def engine() -> str | None:
    """Which Helm renders: "binary" (`helm template`, the `helm` on PATH: the Helm the team deploys
    with, as kube-linter's and checkov's users expect), else "sdk" (helm-python-sdk: a pinned
    Helm, in process, offline), else None (masked reading stays the fallback).
    `VLLMLINT_HELM=sdk|binary|none` forces one (tests, or a team that wants the pinned engine)."""
    import os

    forced = os.environ.get("VLLMLINT_HELM", "").strip().lower()
    if forced == "none":
        return None
    if forced == "binary":
        return "binary" if shutil.which("helm") else None
    if forced == "sdk":
        return "sdk" if _has_sdk() else None
    if shutil.which("helm"):
        return "binary"
    return "sdk" if _has_sdk() else None


def _has_sdk() -> bool:
    try:
        import helm_python  # noqa: F401
        return True
    except Exception:
        return False


MODE_TEXT = {"binary": "rendered with the helm binary (`helm template`)",
             "sdk": "rendered with Helm's engine (helm-python-sdk)",
             None: "not rendered (no Helm engine: pip install 'vllmlint[helm]' or put `helm` on PATH): "
                   "templates read with their actions masked"}


# `-v`: let the Helm SDK's own log lines through. Its Go code logs to file descriptor 2
# (`2026/12/03 ... INFO found symbolic link in path ...`), past Python's sys.stderr; a normal
# run holds them back, as they say nothing about the user's configs.
SHOW_ENGINE_LOG = False


class _engine_log_held:
    """File descriptor 2 points at a temporary file while the SDK runs (unless SHOW_ENGINE_LOG)."""

    def __enter__(self):
        self.saved = None
        if SHOW_ENGINE_LOG:
            return self
        import os
        import sys
        import tempfile

        try:
            sys.stderr.flush()
            self.sink = tempfile.TemporaryFile()
            self.saved = os.dup(2)
            os.dup2(self.sink.fileno(), 2)
        except (OSError, ValueError):      # no fd 2 (an embedding host): nothing to hold back
            self.saved = None
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            import os

            os.dup2(self.saved, 2)
            os.close(self.saved)
            self.sink.close()


def local_dependencies(root: Path) -> dict[str, Path]:
    """Dependencies Chart.yaml names with a `file://` repository whose chart is in the tree and
    not vendored under charts/ (`repository: file://../common`): name -> the chart's folder.
    `helm dependency build` would copy them in; we render with them as it would (on a copy of
    the chart, never writing into the tree)."""
    try:
        meta = yaml.safe_load((root / "Chart.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return {}
    deps = meta.get("dependencies") if isinstance(meta, dict) else None
    have = {p.name for p in (root / "charts").iterdir()} if (root / "charts").is_dir() else set()
    out: dict[str, Path] = {}
    for dep in deps if isinstance(deps, list) else ():
        if not isinstance(dep, dict) or not isinstance(dep.get("name"), str):
            continue
        repo = dep.get("repository")
        if not isinstance(repo, str) or not repo.startswith("file://"):
            continue
        name = dep["name"]
        if any(h == name or h.startswith(name + "-") for h in have):
            continue            # vendored: Helm reads that copy
        folder = (root / repo[len("file://"):]).resolve()
        if (folder / "Chart.yaml").is_file():
            out[name] = folder
    return out


def _vendored_copy(root: Path, into: Path, depth: int = 0) -> Path:
    """A copy of the chart at `root` under `into` with its local dependencies (recursively)
    copied under charts/, as `helm dependency build` leaves it."""
    target = into / root.name
    shutil.copytree(root, target, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    if depth < 4:
        for name, folder in local_dependencies(root).items():
            (target / "charts").mkdir(exist_ok=True)
            sub = _vendored_copy(folder, into / f".dep{depth}-{name}", depth + 1)
            sub.rename(target / "charts" / name)
    return target


def _stable_error(text: str) -> str:
    """Helm's error with each run of `- ...` items sorted: its schema validation lists them in Go
    map order, different on every run, and our note (cut at 240 characters) must not change."""
    out: list[str] = []
    run: list[str] = []
    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("- "):
            run.append(line)
            continue
        out += sorted(run)
        run = []
        out.append(line)
    return "\n".join(out[:-1])


def render(root: Path, values: dict | None, name: str = "release", namespace: str = "default") -> dict[str, str]:
    """Template path (`<chart>/templates/x.yaml`) -> rendered manifest. Raises RenderError.
    A chart with local dependencies (`file://../common`, in the tree) is rendered from a
    temporary copy with them vendored."""
    local = local_dependencies(root)
    if local:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="vllmlint-chart-") as tmp:
            try:
                copy = _vendored_copy(root, Path(tmp))
            except OSError as err:
                raise RenderError(f"local dependencies not copied: {err}") from None
            return _render(copy, values, name, namespace)
    return _render(root, values, name, namespace)


def _render(root: Path, values: dict | None, name: str, namespace: str) -> dict[str, str]:
    kind = engine()
    if kind == "sdk":
        import helm_python as helm
        try:
            with _engine_log_held():
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


@record
class Origin:
    """Where one string value of a values file is written."""

    file: Path
    text: str            # the values file's text (offsets refer to it)
    path: str            # key path: servingEngineSpec.modelSpec[0].env[1].value
    node: yaml.ScalarNode
    parents: tuple = ()  # (collection node, key node or None) from the document down

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    @property
    def column(self) -> int:
        return self.node.start_mark.column + 1


@record
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

    def build(node, path: str, file: Path, text: str, parents=()):
        if isinstance(node, yaml.MappingNode):
            real, marked = {}, {}
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                real[key], marked[key] = build(v, f"{path}.{key}" if path else key, file, text,
                                               parents + ((node, k),))
            return real, marked
        if isinstance(node, yaml.SequenceNode):
            pairs = [build(v, f"{path}[{i}]", file, text, parents + ((node, i),)) for i, v in enumerate(node.value)]
            return [p[0] for p in pairs], [p[1] for p in pairs]
        value = constructor.construct_object(node, deep=True)
        if node.tag == STR_TAG and isinstance(value, str) and value:     # "" stays: `if` tests it
            vs.origins.append(Origin(file, text, path, node, parents))
            return value, f"zqx{len(vs.origins) - 1}zq"
        return value, value

    for file, text in files:
        from .yaml_source import compose_all     # marks are character offsets into `text`
        docs = compose_all(text)
        node = docs[0] if docs else None
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


def _nodes_with_parents(node, parents=()):
    yield node, parents
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            yield from _nodes_with_parents(v, parents + ((node, k),))
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            yield from _nodes_with_parents(v, parents + ((node, None),))


@record
class Rendering:
    """One values set of one chart as Helm rendered it: what a fix in those values is checked
    against (render again, require nothing else changed)."""

    root: Path
    paths: list[Path]                 # values files, Helm's order
    texts: dict[Path, str]            # their text as rendered
    real: dict[str, str]              # template name -> rendered manifest
    disk_values: str | None = None    # the chart's values.yaml as Helm reads it from disk
    readonly: set = field(default_factory=set)      # values files read here, not among the files checked
    # flags a template writes itself, in a launch reported in a values file: (launch file,
    # span in the template, template, flag); a finding at that span moves to the template
    literals: list = field(default_factory=list)


def _deletions(disk, mem):
    """Keys of the chart's values.yaml on disk that the text being linted no longer has: set to
    null, which makes Helm drop them (Helm reads the chart's own values.yaml from disk)."""
    if not (isinstance(disk, dict) and isinstance(mem, dict)):
        return mem
    out = dict(mem)
    for k, v in disk.items():
        if k not in mem:
            out[k] = None
        else:
            out[k] = _deletions(v, mem[k])
    return out


def render_values(root: Path, values: dict, disk_values: str | None = None) -> dict[str, str]:
    """Render `values`; when the chart's values.yaml is linted with other text than on disk
    (a fix pass), keys removed from it are deleted from Helm's defaults too."""
    if disk_values is not None:
        try:
            disk = yaml.safe_load(disk_values) or {}
        except yaml.YAMLError:
            disk = {}
        if isinstance(disk, dict):
            values = _deletions(disk, values)
    return render(root, values)


def render_marked(root: Path, vs: ValuesSet, disk_values: str | None, tries: int = 8) -> dict[str, str]:
    """The marker rendering. A template that validates a value (`{{ fail (printf "Invalid
    BACKEND: %s" .Values.backend) }}` unless it is one of a few words) refuses its marker: that
    value is rendered as itself (its provenance is lost, the rest is kept) and Helm runs again."""
    for _ in range(tries):
        try:
            return render_values(root, vs.marked, disk_values)
        except RenderError as err:
            ids = {int(i) for i in MARKER_RE.findall(str(err))} | _schema_refused(str(err), vs)
            if not ids:
                raise
            vs.marked = _unmark(vs.marked, {f"zqx{i}zq": vs.origins[i].node.value for i in ids
                                            if 0 <= i < len(vs.origins)})
    return render_values(root, vs.marked, disk_values)


# `values.schema.json` refusing a marker: Helm names the value by its JSON pointer, not its text
# (`- at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'`)
SCHEMA_AT_RE = re.compile(r"at '(/[^']*)'")


def _schema_refused(error: str, vs: "ValuesSet") -> set[int]:
    """The markers (origin indexes) of the values a chart's schema refused: an enum, pattern or
    format a marker cannot meet. A subchart's pointer is relative to its own values, so a
    values path that ends with it counts too (at worst a value loses its provenance)."""
    if "schema" not in error:
        return set()
    wanted = set()
    for pointer in SCHEMA_AT_RE.findall(error):
        path = ""
        for part in pointer.strip("/").split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            path += f"[{part}]" if part.isdigit() else (f".{part}" if path else part)
        wanted.add(path)
    return {i for i, o in enumerate(vs.origins) for w in wanted
            if w and (o.path == w or o.path.endswith("." + w))}


def _compared_as_themselves(root: Path, vs: ValuesSet, disk_values: str | None,
                            marked: dict[str, str]) -> dict[str, str]:
    """The marker rendering again, with the values a template compares and no marked output
    shows rendered as themselves: asked when a template's two renderings hold different
    launches. A value a template only compares (`{{ if eq .Values.mode "server" }}`) never
    equals its marker, so the marker rendering took another branch and its launches could not
    be paired with the real ones (found on Josca/vllm-chart: its only `vllm serve` was lost).
    Such a value shows in no output, so it has no provenance to lose; the values inside the
    branch it opens keep their markers."""
    seen = {int(i) for text in marked.values() for i in MARKER_RE.findall(text)}
    compared = _compared_actions(root)
    unseen = {f"zqx{i}zq": o.node.value for i, o in enumerate(vs.origins)
              if i not in seen and re.search(rf"\.Values\.{re.escape(o.path)}(?![\w.\[])", compared)}
    if not unseen:
        return marked
    vs.marked = _unmark(vs.marked, unseen)
    return render_marked(root, vs, disk_values)


# a template action that compares a value (`{{ if eq .Values.mode "server" }}`)
COMPARING_ACTION_RE = re.compile(r"\{\{[^}]*\b(?:eq|ne|hasPrefix|hasSuffix|contains|regexMatch|lt|le|gt|ge)\b[^}]*\}\}")


def _compared_actions(root: Path) -> str:
    """The chart's template actions that compare something, joined (the values they name are
    the ones a marker would send down another branch)."""
    found = []
    for path in sorted(root.glob("templates/**/*")) + sorted(root.glob("charts/*/templates/**/*")):
        if path.is_file():
            try:
                found += COMPARING_ACTION_RE.findall(path.read_text(encoding="utf-8", errors="replace"))
            except OSError:
                continue
    return "\n".join(found)


def _unmark(value, real: dict[str, str]):
    if isinstance(value, dict):
        return {k: _unmark(v, real) for k, v in value.items()}
    if isinstance(value, list):
        return [_unmark(v, real) for v in value]
    return real.get(value, value) if isinstance(value, str) else value


def expand_charts(files: list, problems: list, helm_values: dict | None = None) -> list[Rendering]:
    """Replace the masked reading of each chart's templates and values with the launches of its
    rendering: argv tokens and env entries that come from a values file carry that file's spans
    (findings and fixes land there); the rest points at the template. `files`: the project's
    ParsedFiles, edited in place. `helm_values`: chart root (or None: every chart) -> values
    files given with `--values` or the `helm-values` setting (one rendering on top of the chart's
    values.yaml); without them each `values-*.yaml` beside values.yaml is a rendering of its own.
    Any failure leaves the masked reading and says why (a note on Chart.yaml)."""
    from ..model.launch import Arg, EnvEntry, ParsedFile, SourceFile
    from .yaml_edit import append_site, remove_item
    from .yamlfile import YamlParser

    helm_values = helm_values or {}
    renderings: list[Rendering] = []
    by_path = {pf.source.path: i for i, pf in enumerate(files)}
    roots = sorted({pf.source.path.parent for pf in files if pf.source.path.name == "Chart.yaml"})
    roots = [r for r in roots if not any(o != r and r.is_relative_to(o / "charts") for o in roots)]
    kind = engine()
    readonly: set[Path] = set()
    for root in roots:
        from ..model.record import replace
        # a copy: the parse cache keeps the parser's own ParsedFile, notes are per run
        chart_pf = files[by_path[root / "Chart.yaml"]] = replace(files[by_path[root / "Chart.yaml"]],
                                                                 notes=list(files[by_path[root / "Chart.yaml"]].notes))
        _missing_dependencies(root, chart_pf)
        local = local_dependencies(root)
        if local:
            chart_pf.notes.append("local dependencies rendered from the tree: "
                                  + ", ".join(f"{n} ({p.name})" for n, p in local.items()))
        if kind is None:
            chart_pf.notes.append("Helm chart " + MODE_TEXT[None])
            _prefer_values_shapes(files, root)
            continue
        vpath = root / "values.yaml"
        explicit = [Path(p) for p in helm_values.get(root, []) + helm_values.get(None, [])]
        if vpath not in by_path and not explicit:
            chart_pf.notes.append("Helm chart not rendered: no values.yaml")
            continue
        for p in explicit:
            if p not in by_path:            # given on the command line but not discovered: read it
                try:
                    files.append(ParsedFile(SourceFile(p, str(p), p.read_text(encoding="utf-8"), "yaml")))
                except OSError as err:
                    problems_note = f"values file {p} not read: {err.strerror or err}"
                    chart_pf.notes.append(problems_note)
                    continue
                by_path[p] = len(files) - 1
                readonly.add(p)
        base = [vpath] if vpath in by_path else []
        explicit = [p for p in explicit if p in by_path]
        sets = [base + explicit] if explicit else [base] + [base + [p] for p in sibling_values(root) if p in by_path]
        vsrc = files[by_path[base[0] if base else explicit[0]]].source
        disk = None                   # Helm reads the chart's values.yaml from disk
        if vpath in by_path:
            try:
                disk = vpath.read_text(encoding="utf-8")
            except OSError:
                disk = None
        out_launches: dict = {}
        used: set[Path] = set()
        done: list[list[Path]] = []          # the values sets that rendered
        rendered_ok = False
        for paths in sets:
            srcs = {p: files[by_path[p]].source for p in paths}
            try:
                vs = load_values([(p, srcs[p].text) for p in paths])
                real = render_values(root, vs.real, disk)
                marked = render_marked(root, vs, disk)
            except Exception as err:
                why = " ".join(_stable_error(str(err)).split()) or type(err).__name__
                chart_pf.notes.append(f"Helm rendering with {', '.join(p.name for p in paths)} failed: "
                                      f"{why[:240]}{'…' if len(why) > 240 else ''}")
                continue
            rendered_ok = True
            done.append(paths)
            used.update(paths)
            rendering = Rendering(root, list(paths), {p: srcs[p].text for p in paths}, real, disk,
                                  readonly={p for p in paths if p in readonly})
            compared_done = False
            for name, text in real.items():
                tpl = template_path(root, name, local)
                if tpl is None or not may_launch(text, "yaml"):
                    continue
                vfile = SourceFile(tpl, f"{name} (rendered)", text, "k8s")
                mfile = SourceFile(tpl, f"{name} (rendered)", _real_images(marked.get(name, ""), vs), "k8s")
                try:
                    rp, mp = YamlParser(vfile).parse(), YamlParser(mfile).parse()
                    if len(rp.launches) != len(mp.launches) and not compared_done:
                        compared_done = True        # once per values set: Helm runs again
                        marked = _compared_as_themselves(root, vs, disk, marked)
                        mfile = SourceFile(tpl, f"{name} (rendered)", _real_images(marked.get(name, ""), vs), "k8s")
                        mp = YamlParser(mfile).parse()
                except Exception:
                    continue
                if len(rp.launches) != len(mp.launches):
                    continue
                tsrc = files[by_path[tpl]].source if tpl in by_path else None
                for launch, mlaunch in zip(rp.launches, mp.launches):
                    literals: list = []
                    _remap(launch, mlaunch, vs, srcs, vsrc, tsrc, Arg, EnvEntry, remove_item, append_site, literals)
                    rendering.literals.extend((launch.file, *lit) for lit in literals)
                    if not renderings or renderings[-1] is not rendering:
                        renderings.append(rendering)      # fixes in its values are checked against it
                    out_launches.setdefault(launch.file.path, []).append(launch)
        if not rendered_ok:
            _prefer_values_shapes(files, root)
            continue
        if not out_launches:        # e.g. a model catalogue whose entries are all disabled by default
            chart_pf.notes.append(f"Helm chart {MODE_TEXT[kind]}: the rendering starts no vLLM launch "
                                  f"(its templates' masked reading is dropped, values files are read as they are)")
            for i, pf in enumerate(files):
                if pf.source.path.is_relative_to(root / "templates") and (pf.launches or pf.env):
                    files[i] = ParsedFile(pf.source, notes=list(pf.notes))
            continue
        # the chart's own files and the values files rendered: rendered launches replace what
        # the masked (or values-shape) reading found
        for i, pf in enumerate(files):
            path = pf.source.path
            if (path.is_relative_to(root) or path in used) and pf.source.kind in ("yaml", "k8s", "compose"):
                new = ParsedFile(pf.source, notes=[n for n in pf.notes if "Go template action" not in n])
                new.launches = out_launches.get(path, [])
                new.env = [e for l in new.launches for e in l.env]
                files[i] = new
        files[by_path[root / "Chart.yaml"]].notes.append(
            f"Helm chart {MODE_TEXT[kind]} with {len(done)} values set(s): "
            + "; ".join(" + ".join(p.name for p in ps) for ps in done))
    return renderings


def template_path(root: Path, name: str, local: dict[str, Path]) -> Path | None:
    """The file in the tree a rendered manifest comes from (`mine/templates/d.yaml`); a local
    dependency's (`mine/charts/common/templates/x.yaml`) is in that dependency's own folder."""
    if "/" not in name:
        return None
    rel = name.split("/", 1)[1]
    parts = rel.split("/")
    if len(parts) > 2 and parts[0] == "charts" and parts[1] in local:
        return local[parts[1]].joinpath(*parts[2:])
    return root / rel


def _missing_dependencies(root: Path, chart_pf) -> None:
    """Dependencies Chart.yaml names that the chart does not vendor under charts/: reported,
    never fetched (Helm renders without them when their `condition` is off)."""
    try:
        meta = yaml.safe_load(chart_pf.source.text) or {}
    except yaml.YAMLError:
        return
    deps = meta.get("dependencies") if isinstance(meta, dict) else None
    if not isinstance(deps, list):
        return
    charts = root / "charts"
    have = {p.name for p in charts.iterdir()} if charts.is_dir() else set()
    local = local_dependencies(root)
    missing = [d.get("name") for d in deps if isinstance(d, dict) and d.get("name") and d.get("name") not in local
               and not any(h == d["name"] or h.startswith(d["name"] + "-") for h in have)]
    if missing:
        chart_pf.notes.append(f"dependencies not vendored under charts/ (not fetched): {', '.join(missing)}")


def _prefer_values_shapes(files: list, root: Path) -> None:
    """Without a rendering: when the chart's values are read by their shape (production-stack's
    modelSpec, a vLLM image beside an args list), those launches stand for the chart, and the
    masked templates' launches (`{{ ... }}` as the model) are dropped."""
    from ..model.launch import ParsedFile

    vals = [pf for pf in files if pf.source.path.parent == root and pf.launches
            and re.fullmatch(r"values(?:[-.].+)?\.ya?ml", pf.source.path.name)]
    if not vals:
        return
    from ..model.record import replace

    shaped = [l for pf in vals for l in pf.launches]
    for i, pf in enumerate(files):
        if pf.source.path.is_relative_to(root / "templates") and pf.launches:
            # the settings a template writes itself reach every launch of the values (reported
            # at the template line, never edited: masked, the template is not read exactly)
            env = [replace(e, removal=None, launches=[]) for l in pf.launches for e in l.env
                   if e.file is pf.source and e.value is not None and "{{" not in pf.source.text[e.span[0]:e.span[1]]]
            env = list({(e.name, e.span): e for e in env}.values())
            for launch in shaped:
                launch.env = list(launch.env) + env
            files[i] = ParsedFile(pf.source, env=env,
                                  notes=list(pf.notes) + ["launches read from the chart's values instead"])


def _args_seq(mapping) -> yaml.SequenceNode | None:
    """An `...args` list in `mapping` or in a mapping directly below it."""
    if not isinstance(mapping, yaml.MappingNode):
        return None
    for k, v in mapping.value:
        if isinstance(k, yaml.ScalarNode) and re.search(r"(?i)args$", k.value) and isinstance(v, yaml.SequenceNode):
            return v
    for _, v in mapping.value:
        if isinstance(v, yaml.MappingNode):
            for k, w in v.value:
                if isinstance(k, yaml.ScalarNode) and re.search(r"(?i)args$", k.value) \
                        and isinstance(w, yaml.SequenceNode):
                    return w
    return None


def _item_span(src, value: str):
    """Where a template writes `value` as a list item or a flow-list element (first one)."""
    m = re.search(r"(?m)(?:^[ \t]*-[ \t]+|[\[,][ \t]*)([\"']?)" + re.escape(value) + r"\1(?=[ \t]*(?:$|[,\]#]))",
                  src.text)
    return (m.start(1), m.end()) if m else None


def _literal_span(src, value: str):
    """Where a rendered literal is written in its template (first occurrence), if it is."""
    if src is None or not value:
        return None
    i = src.text.find(value)
    return (i, i + len(value)) if i >= 0 else None


def _real_images(marked: str, vs: ValuesSet) -> str:
    """The marker rendering with its `image:` values as the real rendering has them: whether a
    container is vLLM is read from its image (`image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"`
    renders `zqx0zq:zqx1zq` there), so both renderings must find the same launches to be paired."""
    def real(m: re.Match) -> str:
        origin = vs.origin(m.group(1))
        return origin.node.value if origin is not None else m.group(0)

    marked = IMAGE_LINE.sub(lambda m: m.group(1) + MARKER_RE.sub(real, m.group(2)), marked)

    # the program words of a command written in the values (`extraCmd.command: [python3,
    # /workspace/api_server.py]`): detection reads them, so they are restored too (they are
    # never edited; the flags after them keep their provenance)
    def program(m: re.Match) -> str:
        origin = vs.origin(m.group(1))
        value = origin.node.value if origin is not None else ""
        return value if PROGRAM_WORD.fullmatch(value) else m.group(0)

    return MARKER_RE.sub(program, marked)


PROGRAM_WORD = re.compile(r"(?:\S*/)?(?:python[\d.]*|vllm|uv|uvx)|serve|launch|-m|vllm(?:\.\w+)+|\S+\.py")


def _remap(launch, mlaunch, vs, srcs, default_src, tsrc, Arg, EnvEntry, remove_item, append_site,
           literals: list) -> None:
    from .yaml_edit import new_key_site

    from .yaml_source import scalar_offsets

    def origin_of(mval: str):
        m = MARKER_RE.fullmatch(mval or "")
        return vs.origin(m.group(1)) if m else None

    home = default_src
    first = None
    for a, m in zip(launch.argv, mlaunch.argv):
        o = origin_of(m.value)
        if o is not None:
            home = srcs.get(o.file, default_src)
            first = o
            break
    argv = []
    same = len(launch.argv) == len(mlaunch.argv)
    for i, a in enumerate(launch.argv):
        o = origin_of(mlaunch.argv[i].value) if same else None
        if o is not None and srcs.get(o.file) is home and o.node.value == a.value:
            node, text = o.node, home.text
            argv.append(Arg(a.value, home, (node.start_mark.index, node.end_mark.index),
                            locate=lambda node=node, text=text: scalar_offsets(text, node)))
        elif tsrc is not None and same and not a.dynamic and (a.value.startswith("-") or i < launch.options_start) \
                and not MARKER_RE.search(mlaunch.argv[i].value) and (span := _item_span(tsrc, a.value)):
            # a flag or a program word (`-m MODULE`) the template writes: reported there
            argv.append(Arg(a.value, tsrc, span))
            if a.value.startswith("-"):
                literals.append((span, tsrc, a.value))
        else:
            argv.append(Arg(a.value, None, None, dynamic=a.dynamic))
    launch.argv = argv
    if first is None and tsrc is not None:      # built by the template alone: reported there
        home = tsrc
        spans = [_literal_span(tsrc, a.value) for a in launch.argv[launch.options_start:] + launch.argv[:1]]
        span = next((sp for sp in spans if sp), (0, 0))
        launch.span = (span[0], span[0])
    else:
        launch.span = (first.node.start_mark.index, first.node.start_mark.index) if first else (0, 0)
    launch.file = home
    launch.append_site = None
    launch.not_editable = "the chart's templates build its argv: add the flag to its values by hand"
    # the chart's own extra-args list (`extraArgs`, production-stack `vllmConfig.extraArgs`):
    # a new flag goes after its last item (checked by rendering again, helm.verify_fixes)
    for a, m in zip(reversed(launch.argv), reversed(mlaunch.argv)):
        o = origin_of(m.value) if same else None
        if o is None or a.file is None or len(o.parents) < 2:
            continue
        seq, key = o.parents[-1][0], o.parents[-2][1]
        if isinstance(seq, yaml.SequenceNode) and isinstance(key, yaml.ScalarNode) \
                and re.search(r"(?i)args$", key.value):
            site = append_site(home, home.text, seq)
            if site is not None:
                launch.append_site, launch.not_editable = site, None
            break
    else:
        # no flag of the list is rendered (an empty `extraArgs: []`): the args list beside the
        # values the launch is built from (production-stack's modelSpec[i].vllmConfig.extraArgs)
        if first is not None and srcs.get(first.file) is home:
            for owner, _ in reversed(first.parents[-2:]):
                seq = _args_seq(owner)
                if seq is not None:
                    site = append_site(home, home.text, seq)
                    if site is not None:
                        launch.append_site, launch.not_editable = site, None
                    break
            else:
                # production-stack: `vllmConfig:` without `extraArgs` gets the list (checked by
                # rendering again: the chart must render the new list as argv items)
                owner = first.parents[-1][0] if first.parents else None
                cfg = next((v for k, v in getattr(owner, "value", [])
                            if isinstance(k, yaml.ScalarNode) and k.value == "vllmConfig"), None)
                site = new_key_site(home, home.text, cfg, "extraArgs") if cfg is not None else None
                if site is not None:
                    launch.append_site, launch.not_editable = site, None
    env = []
    real_env = list(launch.env)
    for me in mlaunch.env:
        o = origin_of(me.name)
        if o is None:                  # set by the template itself: reported there, never edited
            e = next((r for r in real_env if r.name == me.name), None)
            m = re.search(r"name:\s*[\"']?" + re.escape(me.name) + r"\b", tsrc.text) if tsrc and e else None
            if m:
                real_env.remove(e)
                env.append(EnvEntry(e.name, e.value, tsrc, (m.start(), m.end()), e.origin + " (template)"))
            continue
        e = next((r for r in real_env if r.name == o.node.value), None)
        if e is None:
            continue
        real_env.remove(e)
        src = srcs.get(o.file)
        if src is None:
            continue
        span, removal = (o.node.start_mark.index, o.node.end_mark.index), None
        # `env: [{name: X, value: "1"}]` in the values: the whole item is the setting
        if len(o.parents) >= 3 and isinstance(o.parents[-1][0], yaml.MappingNode) \
                and isinstance(o.parents[-2][0], yaml.SequenceNode):
            item, (seq, index), (owner, key) = o.parents[-1][0], o.parents[-2], o.parents[-3]
            span = (item.start_mark.index, item.end_mark.index)
            pair = (key, seq) if isinstance(owner, yaml.MappingNode) else None
            removal = remove_item(src, src.text, seq, index, pair)
        entry = EnvEntry(e.name, e.value, src, span, f"{e.origin} (values {o.path.rsplit('.', 1)[0]})", removal)
        env.append(entry)
    launch.env = env


# --------------------------------------------------------------------------------------------
# A fix in a chart's values is checked by rendering the chart again
# --------------------------------------------------------------------------------------------
LIST_KEYS = {"env", "args", "command", "envFrom", "extraArgs"}


def verify_fixes(renderings: list[Rendering], findings: list) -> None:
    """Keep a fix that edits a chart's values only if, rendered again with the fix, the chart's
    output changes exactly where the fix means it to: every line that goes holds a value the fix
    removes, every line that comes holds a value it adds, nothing else moves. A fix in a chart's
    templates is never made (the value is built by template logic). Otherwise the finding keeps
    no fix and says to edit by hand."""
    by_values: dict[Path, list[Rendering]] = {}
    for r in renderings:
        for p in r.paths:
            by_values.setdefault(p, []).append(r)
    roots = {r.root for r in renderings}
    moves = {(id(lf), span): (tsrc, value) for r in renderings for lf, span, tsrc, value in r.literals}
    for f in findings:
        move = moves.get((id(f.file), tuple(f.span)))
        if move and f.file.text[f.span[0]:f.span[1]].strip("\"'") != move[1]:
            f.file = move[0]          # the rule reported it on the launch's file: the template writes it
        fix = getattr(f, "fix", None)
        if fix is None:
            continue
        touched = {e.file.path for e in fix.edits}
        reason = None
        if any(p.is_relative_to(root / "templates") for p in touched for root in roots):
            reason = "the chart's templates build it: edit the template by hand"
        elif any(p in r.readonly for p in touched for r in renderings):
            reason = "its values file is not among the files checked"
        else:
            seen: list[Rendering] = []
            for p in touched:
                for r in by_values.get(p, []):
                    if r not in seen:
                        seen.append(r)
            for r in seen:
                reason = check_rendering(r, fix.edits)
                if reason:
                    break
        if reason:
            f.fix, f.fixable = None, False
            f.message += f" (no automatic fix: {reason})"


def _scalars(text: str) -> list[str] | None:
    from .yaml_source import compose_all

    try:
        docs = compose_all(text)
    except Exception:
        return None
    out = []
    for doc in docs:
        for node, _ in (_nodes_with_parents(doc) if doc is not None else ()):
            if isinstance(node, yaml.ScalarNode):
                out.append(node.value)
            elif isinstance(node, yaml.MappingNode):
                out.extend(k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode))
    return out


def check_rendering(r: Rendering, edits: list) -> str | None:
    """Why the fix `edits` is not the change it means to be in rendering `r`, or None."""
    from collections import Counter
    from difflib import SequenceMatcher

    from ..model.launch import apply_edits

    texts = dict(r.texts)
    removed: set[str] = set()
    added: set[str] = set()
    for p in r.paths:
        mine = [e for e in edits if e.file.path == p]
        if not mine:
            continue
        new = apply_edits(texts[p], mine)
        before, after = _scalars(texts[p]), _scalars(new)
        if after is None or before is None:
            return "the values file would not parse"
        removed |= set(Counter(before) - Counter(after))
        added |= set(Counter(after) - Counter(before))
        texts[p] = new
    try:
        vs = load_values([(p, texts[p]) for p in r.paths])
        out = render_values(r.root, vs.real, r.disk_values)
    except Exception as err:
        return f"the chart no longer renders with it ({str(err).splitlines()[0] if str(err) else type(err).__name__})"
    changed = False
    for name in sorted(set(r.real) | set(out)):
        a, b = r.real.get(name, "").splitlines(), out.get(name, "").splitlines()
        if a == b:
            continue
        changed = True
        launch_docs = _launch_docs(r.root, name, a)
        for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            if _doc_index(a, i1) not in launch_docs:
                return f"rendered again, it also changes {name.split('/', 1)[-1]} outside the vLLM launch"
            if not all(_line_ok(line, removed) for line in a[i1:i2]) or \
                    not all(_line_ok(line, added) for line in b[j1:j2]):
                return f"rendered again, it changes more than this in {name.split('/', 1)[-1]}"
    if not changed:
        return "rendered again, the chart's output does not change"
    return None


def _doc_index(lines: list[str], i: int) -> int:
    return sum(1 for line in lines[:i] if line.startswith("---"))


def _launch_docs(root: Path, name: str, lines: list[str]) -> set[int]:
    """Indexes of the rendered documents of template `name` that hold a vLLM launch."""
    from ..model.launch import SourceFile
    from .yamlfile import YamlParser

    docs, cur = [], []
    for line in lines:
        if line.startswith("---"):
            docs.append(cur)
            cur = []
        else:
            cur.append(line)
    docs.append(cur)
    out = set()
    for i, doc in enumerate(docs):
        text = "\n".join(doc) + "\n"
        if not may_launch(text, "yaml"):
            continue
        try:
            if YamlParser(SourceFile(root / name, name, text, "k8s")).parse().launches:
                out.add(i)
        except Exception:
            continue
    return out


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        import json
        try:
            return json.loads(text)
        except ValueError:
            return text[1:-1]
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    return text


def _line_ok(line: str, allowed: set[str]) -> bool:
    t = line.strip()
    while t.startswith("- ") or t == "-":
        t = t[2:].strip()
    if not t:
        return True
    if _unquote(t) in allowed:
        return True
    m = re.fullmatch(r"([\w.\-/]+):(?:\s+(.*))?", t)
    if m:
        key, value = m.group(1), m.group(2)
        if value is None or value.strip() in ("", "[]", "{}"):
            return key in LIST_KEYS or key in allowed
        return _unquote(value) in allowed
    return False
