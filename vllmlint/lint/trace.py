"""Which vLLM image references and `vllm` pins the launches run: what `migrate` may bump.

`named_in` finds every place the tree names a vLLM release (an image reference, a chart-values
`tag:` beside a vLLM `repository:`, a kustomize `newTag:` of a vLLM image, a chart's
`appVersion` a vLLM image falls back to, a `vllm==X` pin in a Dockerfile or requirements file).
`trace` links each to the launches that run it and records it on them (`launch.image_refs`,
`launch.pins`); what no launch reaches is returned apart, for a human: a changelog entry, an
example in a docstring or a comment, a prose value, a file in a format vllmlint does not read
as launches. Only what a launch reaches is ever bumped (issue 29).

A place is reached by a launch when:
- an image reference is written in the launch's own file, outside comments, docstrings and
  prose values, and is the image the launch runs (`launch.image`; in a Python file, the
  `modal.Image.from_registry(...)` its functions run in), or it is one of the
  `modelServers.VLLM.images` KubeAI's operator runs a launch it starts with;
- a values `tag:` is that of the image a launch of the values file (or of a chart beside it) runs;
- a kustomize `newTag:` retags the image a launch in the kustomization's folder (or a folder
  its `resources` name) runs;
- a chart's `appVersion` is the tag a vLLM image of the chart falls back to, and the chart
  holds a launch;
- a Dockerfile `ARG X=v0.8.5` is the tag of a `FROM vllm/vllm-openai:${X}` whose stage is a
  launch;
- a Dockerfile pin is in the Dockerfile of a launch; a requirements pin is in the file a
  Dockerfile launch installs (`pip install -r` naming it), or in the nearest folder with pins
  above a script or Python launch that runs no image (the environment lint.releases reads).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from ..knowledge.images import parse_image, parse_tag
from ..knowledge.versions import parse_version
from ..model.launch import KUBEAI_VIA, Launch, Named, SourceFile
from ..model.lazyre import lazy_re
from .releases import in_comment, own_project, runs_host_environment

# `(?:(?<=:-)|...)`: also the default of `${VLLM_IMAGE:-vllm/vllm-openai:v0.26.0}` (compose, shell)
IMAGE_TAG_RE = re.compile(
    r"(?P<image>(?:(?<=:-)|(?<=docker://)|(?<![\w./-]))(?:[\w.\-]+(?::\d+)?/)?vllm/vllm-openai(?:-[a-z0-9]+)?)"
    r":(?P<tag>v?\d+\.\d+\.\d+[\w.+-]*)(?P<digest>@sha256:[0-9a-f]+)?")
# a vLLM image whose tag names no release: `latest`, `nightly[-…]`, a commit, or no tag at all
# (`image: vllm/vllm-openai`: Docker reads it as latest). Never bumped, reported for a human.
FLOATING_TAG_RE = re.compile(
    r"(?P<image>(?:(?<=:-)|(?<=docker://)|(?<![\w./-]))(?:[\w.\-]+(?::\d+)?/)?vllm/vllm-openai(?:-[a-z0-9]+)?)"
    r"(?::(?P<tag>latest|nightly[\w.\-]*|[0-9a-f]{7,40})\b|(?=[\"']?[ \t]*(?:#.*)?$))(?!@)", re.M)
# a chart's `repository:` or a kustomize `newName:`: its tag is a key of its own (`tag:`, newTag)
REPOSITORY_KEY_RE = re.compile(r"(?:[\w.-]*repo(?:sitory)?|newName)[\"']?[ \t]*:[ \t]*[\"']?$", re.I)
KUSTOMIZE_TAG_RE = re.compile(r"(?m)^(?P<lead>\s*newTag:\s*[\"']?)(?P<tag>v?\d+\.\d+\.\d+[\w.+-]*)")
ITEM_RE = re.compile(r"(?m)^[ \t]*-[ \t]")
VLLM_NAME_RE = re.compile(r"(?:name|newName):\s*[\"']?(?P<ref>(?:[\w.\-]+(?::\d+)?/)?vllm/vllm-openai[\w.\-]*)")
ENTRY_NAME_RE = re.compile(r"(?m)^[ \t]*-?[ \t]*name:\s*[\"']?(?P<ref>[^\s\"'#]+)")
PIN_RE = re.compile(r"(?<![\w./-])(?P<name>vllm(?:\[[\w,\s-]+\])?)\s*==\s*(?P<ver>\d+\.\d+\.\d+(?:\.post\d+)?)")
APP_VERSION_LINE_RE = re.compile(r"(?m)^appVersion:[ \t]*[\"']?(?P<v>[\w.\-]+)")
# a template line whose image tag falls back to the chart's appVersion
# (`$.Chart.AppVersion`: the same, from the root context inside a `range` or `with`)
APP_VERSION_RE = re.compile(r"default\s+\$?\.Chart\.AppVersion|\$?\.Chart\.AppVersion\s*(?:\||\}\})")
IMAGE_LITERAL_RE = re.compile(r"image:[ \t]*[\"']?(?P<ref>[^\s\"'{]+?):?[ \t]*\{\{")
# the values key a template reads the image's name from: `image.repository`, or `image.name`
# (`"{{ .Values.image.name }}:{{ .Values.image.tag | default $.Chart.AppVersion }}"`)
VALUES_REPOSITORY_RE = re.compile(r"\.Values\.(?P<path>[\w.]+?)\.(?P<key>repository|name)\b")
# a YAML line whose value is the image alone: `image: X`, `- X`, `default: "X"`
YAML_VALUE_LINE_RE = re.compile(r"[ \t]*(?:-[ \t]+)?(?:[\"']?[\w.\-/]+[\"']?[ \t]*:[ \t]*)?[\"']?$")
# a line that starts a container from the image in a shell command (`docker run ... IMG`)
RUNS_IMAGE_RE = re.compile(r"\b(?:docker|podman|nerdctl|kubectl|singularity|apptainer|enroot)\b|--image\b|\bFROM\b", re.I)
MODAL_IMAGE_RE = re.compile(r"\bfrom_registry\(")
PIP_REQUIREMENT_RE = re.compile(r"(?:-r|--requirement|-c|--constraint)[ \t=]+[\"']?(?P<path>[^\s\"';&|]+)")


# images whose tags are vLLM's own release tags (vLLM publishes one per release): only their tags
# are bumped. A build of vLLM by another project (`lmcache/vllm-openai:v0.3.7`, `opea/vllm`,
# `rocm/vllm`) versions its own tags: bumping one to a vLLM release names an image that does not exist.
VLLM_VERSIONED = ("vllm/vllm-openai", "vllm/vllm-openai-*", "*/vllm/vllm-openai", "*/vllm/vllm-openai-*",
                  "*vllm-cpu-release-repo")


def versioned_by_vllm(image: str | None) -> bool:
    from fnmatch import fnmatchcase

    ref = parse_image(image)
    return ref is not None and any(fnmatchcase(ref.path, p) for p in VLLM_VERSIONED)


# a comment that says the release is chosen on purpose (`# Pin to v0.8.5, the last tag that
# ships Volta kernels`, `# do not upgrade: ...`): a bump would undo a decision someone wrote down
DELIBERATE_RE = re.compile(r"\b(?:pin(?:ned|s)?\b|last (?:tag|version|release)|do ?n[o']t (?:upgrade|bump|update|change)|"
                           r"not supported|unsupported|must (?:stay|remain)|keep (?:it|this) at|(?<!openai-)(?<!openai )compatib)", re.I)


def deliberate(named: Named) -> str:
    """The comment on the line of `named` or directly above it that says its release is chosen
    on purpose, else ""."""
    text = named.file.text
    start = text.rfind("\n", 0, named.span[0]) + 1
    stop = text.find("\n", named.span[1])
    own = text[named.span[1]:len(text) if stop < 0 else stop]
    comments = [own.split("#", 1)[1]] if "#" in own else []
    lines = text[:start].split("\n")[:-1]
    own = text[start:named.span[0]]
    indent = len(own) - len(own.lstrip(" \t-"))
    for line in reversed(lines[-10:]):
        body = line.strip()
        if body.startswith("#"):
            comments.append(body.lstrip("#"))
            continue
        # a sibling key of the same mapping (`repository:` above `tag:`), or the list item that
        # opens it (`- name: qwen`): comments above those speak of this entry too
        lead = len(line) - len(line.lstrip(" \t-"))
        if body and lead == indent and re.match(r"[\w\"'.\-]+\s*:", line.lstrip(" \t-")):
            if line.lstrip(" \t").startswith("-"):
                indent = -1             # the entry starts here: only comments above it now
            continue
        break
    for comment in comments:
        if DELIBERATE_RE.search(comment):
            return comment.strip()
    return ""


def commented(named: Named) -> bool:
    """The place is inside a comment of its file (a pin there is no one's: `trace` lists it unread)."""
    return in_comment(named.file.text, named.span[0])


def _python_code_lines(source: SourceFile) -> set[int] | None:
    """Lines of string literals that are not docstrings (None: the file does not parse)."""
    try:
        tree = ast.parse(source.text)
    except (SyntaxError, ValueError):
        return None
    docs: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docs.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            span = set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
            if not span & docs:
                lines |= span
    return lines


def _in_code(source: SourceFile, at: int, end: int, cache: dict) -> bool:
    """The text at [at, end) is code, not a comment, docstring or prose value."""
    text = source.text
    if in_comment(text, at):
        return False
    if source.kind == "python":
        if source.path not in cache:
            cache[source.path] = _python_code_lines(source)
        lines = cache[source.path]
        return lines is not None and source.line_col(at)[0] in lines
    if source.kind in ("yaml", "k8s", "compose"):
        start = text.rfind("\n", 0, at) + 1
        stop = text.find("\n", end)
        rest = text[end:len(text) if stop < 0 else stop]
        lead = text[start:at]
        if lead.endswith(":-") and rest.startswith("}"):      # `image: ${VLLM_IMAGE:-vllm/vllm-openai:v0.26.0}`
            lead, rest = re.sub(r"\$\{\w+:-$", "", lead), rest[1:]
        if YAML_VALUE_LINE_RE.fullmatch(lead) and re.fullmatch(r"[\"']?[ \t]*(?:#.*)?\r?", rest):
            return True
        return bool(RUNS_IMAGE_RE.search(text[start:at]))   # a command in a script block
    return True


def _plain(tag: str) -> bool:
    return bool(re.match(r"^v?\d+\.\d+\.\d+(?:\.\d+|\.post\d+)?$", tag))


def _vllm_kustomize_entry(text: str, at: int) -> str | None:
    """The image the `images:` entry holding the newTag at `at` retags, when that entry names a
    vLLM image (`name` or `newName`); its `name` (what the workloads write)."""
    starts = [m.start() for m in ITEM_RE.finditer(text, 0, at)]
    start = starts[-1] if starts else 0
    nxt = ITEM_RE.search(text, at)
    entry = text[start:nxt.start() if nxt else len(text)]
    if not VLLM_NAME_RE.search(entry):
        return None
    name = ENTRY_NAME_RE.search(entry)
    return name.group("ref") if name else None


def values_tags(source: SourceFile) -> list[tuple[int, int, str, str]]:
    """(start, end, tag, repository) of each chart-values `tag:` beside a vLLM `repository`
    (the tag's text without its quotes)."""
    if source.kind not in ("yaml", "k8s") or "{{" in source.text:
        return []
    from ..parsers.helm_values import vllm_values_tags

    out = []
    for node, repo in vllm_values_tags(source.text):
        s, e = node.start_mark.index, node.end_mark.index
        if node.style in ("'", '"'):
            s, e = s + 1, e - 1
        if source.text[s:e] == node.value:          # written plainly: replaced whole
            out.append((s, e, node.value, repo))
    return out


def _on_lines_with(pattern: re.Pattern, text: str, needle: str):
    """`pattern.finditer(text)` for a pattern whose matches contain `needle` and never cross a
    line break: run on the lines that hold `needle` only."""
    at = text.find(needle)
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        yield from pattern.finditer(text, start, end)
        at = text.find(needle, end)


def _vllm_image_line(line: str, values: SourceFile | None) -> bool:
    """The image on this template line is vLLM's: written in the line (`vllm/vllm-openai:{{
    .Chart.AppVersion }}`) or read from a values `repository` that names a vLLM image."""
    literal = IMAGE_LITERAL_RE.search(line)
    if literal and versioned_by_vllm(literal.group("ref")):
        return True
    ref = VALUES_REPOSITORY_RE.search(line)
    if ref is None or values is None:
        return False
    from ..parsers.helm_values import values_at

    return versioned_by_vllm(values_at(values.text, ref.group("path").split(".") + [ref.group("key")]))


def _app_version(project, source: SourceFile) -> Named | None:
    """A chart's `appVersion` when it names the vLLM release the chart deploys: a template
    falls back to it for a vLLM image's tag, or the chart's values.yaml pins a vLLM
    `repository` to that same tag."""
    if source.path.name != "Chart.yaml":
        return None
    m = APP_VERSION_LINE_RE.search(source.text)
    parsed = parse_tag(m.group("v")) if m else None
    if parsed is None or parsed.version is None:
        return None
    root = source.path.parent
    values = next((o for o in project.sources if o.path == root / "values.yaml"), None)
    names = values is not None and any(t == parsed.text for _, _, t, _ in values_tags(values))
    for other in project.sources:
        if not names and other.path.is_relative_to(root / "templates") and ".Chart.AppVersion" in other.text:
            names = any(_vllm_image_line(line, values) for line in other.text.splitlines()
                        if APP_VERSION_RE.search(line))
    if not names:
        return None
    new_ok = parsed.bumped(parsed.version) is not None
    return Named(source, (m.start("v"), m.end("v")), f"appVersion {parsed.text}", "chart appVersion",
                 parsed.version, (m.start("v"), m.end("v")) if new_ok else None)


_SCANS: dict[tuple, list[tuple]] = {}     # (path, text hash) -> the file's places, as tuples


def named_in(project) -> list[Named]:
    """Every place the tree names a vLLM release or a floating vLLM image, wherever it is. The
    scan of a file is kept by its text: a migration asks again at every pass of every step."""
    out: list[Named] = []
    for source in project.sources:
        key = (source.path, source.kind, hash(source.text))
        if key not in _SCANS:
            if len(_SCANS) > 50_000:
                _SCANS.clear()
            _SCANS[key] = [(n.span, n.text, n.how, n.release, n.edit_span, n.image) for n in _scan(source)]
        out += [Named(source, *t[:5], image=t[5]) for t in _SCANS[key]]
        app = _app_version(project, source)
        if app is not None:
            out.append(app)
    return out


def _scan(source: SourceFile) -> list[Named]:
    """The places one file names a vLLM release (appVersion aside: it reads the chart)."""
    out: list[Named] = []
    text = source.text
    for m in _on_lines_with(IMAGE_TAG_RE, text, "vllm/vllm-openai"):
        tag = m.group("tag")
        editable = _plain(tag) and not m.group("digest")
        named = Named(source, (m.start(), m.end()), m.group(0), "image", parse_version(tag),
                      (m.start("tag"), m.end("tag")) if editable else None)
        out.append(named)
    for m in _on_lines_with(FLOATING_TAG_RE, text, "vllm/vllm-openai"):
        if source.kind == "requirements":
            continue
        if not m.group("tag") and REPOSITORY_KEY_RE.search(text, text.rfind("\n", 0, m.start()) + 1, m.start()):
            continue        # a chart's `repository:` value: its tag is a key of its own (`tag:`, appVersion)
        written = m.group(0) if m.group("tag") else f"{m.group('image')} (no tag: latest)"
        out.append(Named(source, (m.start(), m.end()), written, "image"))
    if source.kind in ("yaml", "k8s", "compose") and VLLM_NAME_RE.search(text) and "newTag" in text:
        for m in KUSTOMIZE_TAG_RE.finditer(text):
            name = _vllm_kustomize_entry(text, m.start("tag"))
            if name is None:
                continue
            tag = m.group("tag")
            named = Named(source, (m.start("tag"), m.end("tag")), f"newTag {tag}", "kustomize newTag",
                          parse_version(tag), (m.start("tag"), m.end("tag")) if _plain(tag) else None)
            named.image = f"{name}:{tag}"
            out.append(named)
    for at, end, tag, repo in values_tags(source):
        parsed = parse_tag(tag)
        if parsed is None or parsed.version is None or not versioned_by_vllm(repo):
            continue
        named = Named(source, (at, end), f"{repo} tag {tag}", "values tag", parsed.version,
                      (at, end) if parsed.bumped(parsed.version) is not None else None)
        named.image = f"{repo}:{tag}"
        out.append(named)
    if source.kind == "dockerfile" and "ARG" in text:
        out += _arg_defaults(source)
    if source.kind in ("dockerfile", "requirements"):
        for m in PIN_RE.finditer(text):
            out.append(Named(source, (m.start(), m.end()), m.group(0), "pin", parse_version(m.group("ver")),
                             (m.start("ver"), m.end("ver"))))
    return out


FROM_ARG_RE = re.compile(r"(?im)^[ \t]*FROM[ \t]+(?:--platform=\S+[ \t]+)?"
                         r"(?P<ref>(?:[\w.\-]+(?::\d+)?/)?vllm/vllm-openai(?:-[a-z0-9]+)?):\$\{?(?P<var>\w+)\}?")
ARG_RE = re.compile(r"(?im)^[ \t]*ARG[ \t]+(?P<var>\w+)=(?P<q>[\"']?)(?P<val>v?\d+\.\d+\.\d+[\w.+-]*)(?P=q)[ \t]*$")


def _arg_defaults(source: SourceFile) -> list[Named]:
    """`ARG VLLM_VERSION=v0.8.5` whose value a later `FROM vllm/vllm-openai:${VLLM_VERSION}`
    takes as its tag: the tag of the image that stage runs, written in the ARG."""
    out = []
    for frm in FROM_ARG_RE.finditer(source.text):
        args = [m for m in ARG_RE.finditer(source.text, 0, frm.start()) if m.group("var") == frm.group("var")]
        if not args:
            continue
        m = args[-1]
        val = m.group("val")
        # declared again in a stage (`ARG VLLM_VERSION=v0.21.0` under FROM, for its RUN lines):
        # one bump would leave the two disagreeing; a human bumps both
        again = [a for a in re.finditer(rf"(?im)^[ \t]*ARG[ \t]+{m.group('var')}=", source.text) if a.start() > m.start()]
        named = Named(source, (m.start("val"), m.end("val")), f"ARG {m.group('var')}={val}", "ARG default",
                      parse_version(val), (m.start("val"), m.end("val")) if _plain(val) and not again else None,
                      image=f"{frm.group('ref')}:{val}")
        if any(n.span == named.span for n in out):
            continue
        out.append(named)
    return out


EXPANSION_DEFAULT_RE = re.compile(r"\$\{(?P<var>\w+):-(?P<default>[^{}$]+)\}")
# `VLLM_IMAGE=...` in an env file beside the file (compose reads `.env`; scripts source them)
ENV_FILE_GLOBS = (".env", ".env.*", "*.env")


def overridden_default(named: Named) -> str:
    """For an image written as the default of `${VAR:-image}`: the env file beside its file that
    sets VAR (the launch then runs that image, not the default), else ""."""
    text = named.file.text
    if text[max(0, named.span[0] - 2):named.span[0]] != ":-":
        return ""
    m = re.search(r"\$\{(\w+):-$", text[max(0, named.span[0] - 200):named.span[0]])
    if m is None:
        return ""
    assign = re.compile(rf"(?m)^[ \t]*(?:export[ \t]+)?{re.escape(m.group(1))}[ \t]*=")
    folder = named.file.path.parent
    for pattern in ENV_FILE_GLOBS:
        for env_file in sorted(folder.glob(pattern)):
            try:
                if env_file.is_file() and assign.search(env_file.read_text(encoding="utf-8", errors="replace")):
                    return f"{m.group(1)} is set in {env_file.name}"
            except OSError:
                continue
    return ""


def _same_image(written: str, runs: str | None) -> bool:
    """The reference written in a file is the one a launch runs (`runs` may carry a digest,
    a `docker.io/` the file leaves out, or the other way round)."""
    if not runs:
        return False
    default = EXPANSION_DEFAULT_RE.fullmatch(runs.strip())
    if default:                 # `${VLLM_IMAGE:-vllm/vllm-openai:v0.26.0}`: the image it runs unless set
        runs = default.group("default")
    def norm(ref: str) -> str:
        ref = ref.split(" (no tag", 1)[0]
        # apptainer/singularity pull a registry image by URI: `docker://vllm/vllm-openai:v0.8.3`
        for prefix in ("docker://", "docker.io/", "index.docker.io/"):
            if ref.startswith(prefix):
                ref = ref[len(prefix):]
        return ref if ":" in ref.rsplit("/", 1)[-1] else ref + ":latest"
    return norm(runs) == norm(written) or norm(runs.split("@", 1)[0]) == norm(written.split("@", 1)[0])


def _under(path: Path, folder: Path) -> bool:
    try:
        return path.is_relative_to(folder)
    except ValueError:
        return False


def _kustomize_folders(source: SourceFile) -> list[Path]:
    """The kustomization's folder and the folders and files its `resources`/`bases` name."""
    root = source.path.parent
    out = [root]
    try:
        import yaml

        doc = yaml.safe_load(source.text)
    except Exception:
        return out
    if isinstance(doc, dict):
        for key in ("resources", "bases", "components"):
            for item in doc.get(key) or []:
                if isinstance(item, str) and "://" not in item:
                    out.append((root / item).resolve())
    return out


def _kubeai_images(project) -> dict[Path, set[str]]:
    from ..parsers.helm_values import values_mapping_at

    out: dict[Path, set[str]] = {}
    for source in project.sources:
        if source.kind in ("yaml", "k8s") and "modelServers" in source.text:
            images = {v for v in values_mapping_at(source.text, ["modelServers", "VLLM", "images"]).values()
                      if isinstance(v, str)}
            if images:
                out[source.path] = images
    return out


def _profiles(source: SourceFile) -> list[tuple[int, int, str]]:
    """(start, end, resourceProfile) of each mapping in a KubeAI file that names a
    `resourceProfile` (a Model's spec, a models-chart entry)."""
    if "resourceProfile" not in source.text:
        return []
    import yaml

    out = []
    try:
        docs = list(yaml.compose_all(source.text))
    except Exception:
        return []
    stack = [d for d in docs if d is not None]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == "resourceProfile" and isinstance(v, yaml.ScalarNode):
                    out.append((node.start_mark.index, node.end_mark.index, v.value.split(":", 1)[0]))
                stack.append(v)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return out


def kubeai_images(project, launches: list[Launch]) -> dict[int, tuple[str, SourceFile, str]]:
    """id(launch) -> (the image KubeAI's operator runs it with, the values file that says so,
    its key in `images`):
    its `resourceProfile`'s `imageName` in `modelServers.VLLM.images` (`default` when the
    profile names none or the image is missing), from a KubeAI chart's values in the tree."""
    from ..parsers.helm_values import values_mapping_at

    chart = next((s for s in project.sources if s.kind in ("yaml", "k8s") and "resourceProfiles" in s.text
                  and values_mapping_at(s.text, ["modelServers", "VLLM", "images"])), None)
    if chart is None:
        return {}
    images = values_mapping_at(chart.text, ["modelServers", "VLLM", "images"])
    profile_files = [chart] + [o for o in project.sources if o is not chart and o.kind in ("yaml", "k8s")
                               and "resourceProfiles" in o.text]
    profiles_cache: dict[Path, list] = {}
    image_names: dict[str, str] = {}
    out = {}
    for launch in launches:
        if launch.file.path not in profiles_cache:
            profiles_cache[launch.file.path] = _profiles(launch.file)
        profiles = profiles_cache[launch.file.path]
        at = launch.span[0]
        inside = [p for p in profiles if p[0] <= at < p[1]]
        name = min(inside, key=lambda p: p[1] - p[0])[2] if inside else ""
        if name and name not in image_names:
            # the chart's values, then any other values file of the tree (values-gke.yaml adds TPU profiles)
            image_names[name] = next((m.get("imageName", "default") for m in
                                      (values_mapping_at(o.text, ["resourceProfiles", name]) for o in profile_files)
                                      if m), "")
        image_name = image_names.get(name, "default")
        if not image_name:
            continue            # a profile the tree does not define: the image is not known here
        if image_name not in images:
            image_name = "default"
        if images.get(image_name):
            out[id(launch)] = (images[image_name], chart, image_name)
    return out


def _image_key_at(source: SourceFile, at: int) -> str:
    """The key of the `images:` entry written on the line at `at` (`nvidia-gpu: "vllm/..."`)."""
    start = source.text.rfind("\n", 0, at) + 1
    m = re.match(r"[ \t]*[\"']?([\w.\-]+)[\"']?[ \t]*:", source.text[start:at])
    return m.group(1) if m else ""


def _environment_pins(launch: Launch, requirements: dict[Path, list[SourceFile]]) -> list[SourceFile]:
    """The requirements files of the nearest folder at or above a launch's file that pins vLLM
    (the environment lint.releases reads for a script or Python launch)."""
    folder = launch.file.path.parent
    while True:
        if folder in requirements:
            return requirements[folder]
        if folder.parent == folder or not any(_under(folder.parent, p) for p in requirements) \
                or own_project(folder):        # a project of its own: as lint.releases stops
            return []
        folder = folder.parent


def _installed_by(dockerfile: SourceFile, req: SourceFile) -> bool:
    """The Dockerfile installs this requirements file (`pip install -r requirements.txt`)."""
    if not _under(req.path, dockerfile.path.parent):
        return False
    for m in PIP_REQUIREMENT_RE.finditer(dockerfile.text):
        if Path(m.group("path")).name == req.path.name:
            return True
    return False


def trace(project) -> tuple[list[Named], list[Named]]:
    """(reached, unread): the places `named_in` finds that a launch runs, recorded on the
    launches (`image_refs`, `pins`) and on the place (`launches`), and the places none does."""
    launches = project.launches
    for launch in launches:
        launch.image_refs, launch.pins = [], []
    by_file: dict[Path, list[Launch]] = {}
    borrowed: dict[Path, list[Launch]] = {}     # file -> launches of other files that run its image (KServe)
    for launch in launches:
        by_file.setdefault(launch.file.path, []).append(launch)
        if launch.image_source is not None and launch.image_source.path != launch.file.path:
            borrowed.setdefault(launch.image_source.path, []).append(launch)
    kubeai = [l for l in launches if l.via.startswith(KUBEAI_VIA)]
    operator_images = _kubeai_images(project) if kubeai else {}
    # the image each KubeAI launch runs, by its resource profile: only that entry is its own
    runs = kubeai_images(project, kubeai) if kubeai else {}
    requirements: dict[Path, list[SourceFile]] = {}
    for source in project.sources:
        if source.kind == "requirements" and PIN_RE.search(source.text):
            requirements.setdefault(source.path.parent, []).append(source)
    env_of: dict[Path, list[Launch]] = {}       # requirements file -> launches whose environment it is
    for launch in launches:
        if launch.file.kind == "dockerfile":
            for reqs in requirements.values():
                for req in reqs:
                    if _installed_by(launch.file, req):
                        env_of.setdefault(req.path, []).append(launch)
        elif not launch.image and not launch.via.startswith(KUBEAI_VIA) and runs_host_environment(launch):
            for req in _environment_pins(launch, requirements):
                env_of.setdefault(req.path, []).append(launch)
    code_cache: dict = {}
    reached: list[Named] = []
    unread: list[Named] = []
    for named in named_in(project):
        source = named.file
        users: list[Launch] = []
        if named.how == "image":
            if _in_code(source, *named.span, code_cache):
                users = [l for l in (*by_file.get(source.path, ()), *borrowed.get(source.path, ()))
                         if _same_image(named.text, l.image)]
                if source.kind == "python" and MODAL_IMAGE_RE.search(source.line_text(named.line)):
                    # Modal: `Image.from_registry(IMG)` is the image the file's functions run in
                    users += [l for l in by_file.get(source.path, ()) if not l.image]
                if source.path in operator_images and any(_same_image(named.text, i) for i in operator_images[source.path]):
                    # an operator image: the KubeAI launches whose profile runs that image name, by
                    # the chart's values (a dev config beside it names the same image names)
                    key = _image_key_at(source, named.span[0])
                    users += [l for l in kubeai if id(l) in runs and runs[id(l)][2] == key]
        elif named.how == "values tag":
            root = source.path.parent
            users = [l for l in launches if _under(l.file.path, root) and _same_image(named.image, l.image)]
        elif named.how == "kustomize newTag":
            folders = _kustomize_folders(source)
            name = named.image.rsplit(":", 1)[0]
            users = [l for l in launches if any(_under(l.file.path.resolve(), f) for f in folders)
                     and l.image and (parse_image(l.image) is not None)
                     and _same_image(name, l.image.rsplit(":", 1)[0] if ":" in l.image.rsplit("/", 1)[-1] else l.image)]
        elif named.how == "ARG default":          # the Dockerfile's stages that run the image
            users = [l for l in by_file.get(source.path, ()) if l.image and "$" in l.image
                     and l.image.split(":", 1)[0] == named.image.split(":", 1)[0]]
        elif named.how == "chart appVersion":
            users = [l for l in launches if _under(l.file.path, source.path.parent)]
        elif named.how == "pin":
            if not in_comment(source.text, named.span[0]):
                if source.kind == "dockerfile":
                    users = list(by_file.get(source.path, ()))
                else:
                    users = env_of.get(source.path, [])
        if users:
            named.launches = users
            for launch in users:
                (launch.pins if named.how == "pin" else launch.image_refs).append(named)
            reached.append(named)
        else:
            unread.append(named)
    _number_alike(reached + unread)
    return reached, unread


def _number_alike(places: list[Named]) -> None:
    """Name each place the same before and after a migration bumps it or fixes around it (they
    add or remove no place): `key`, its file, kind, text with the release left out
    (`vllm/vllm-openai:#`, `vllm==#`) and rank among the places of its file written alike (two
    services of one image, two model entries' `tag`s in one values file). lint.migrate keeps a
    place by it (held_refs)."""
    seen: dict = {}
    for named in sorted(places, key=lambda n: (str(n.file.path), n.span[0])):
        alike = (named.file.path, named.how, RELEASE_IN_TEXT().sub("#", named.text))
        rank = seen.get(alike, 0)
        seen[alike] = rank + 1
        named.key = (*alike, rank)


# a release as a place writes it (`v0.29.0`, `0.8.5.post1`), left out to compare places
RELEASE_IN_TEXT = lazy_re(r"v?\d+\.\d+(?:\.\d+)?[\w.+\-]*")
