"""`vllmlint migrate --to X [--from Y]`: every safe fix for the upgrade, plus image tags and pins
bumped. Across several releases the upgrade runs as a chain: from the current release (`--from`,
else the oldest `vllm/vllm-openai` tag or `vllm==` pin in the tree) through every catalogued
release up to the target, each step applying the safe fixes of that release's rules with that
release as the target, on the result of the step before."""
from __future__ import annotations

import re
from ..model.record import record

from ..model.launch import Edit, SourceFile
from .project import Project
from ..knowledge.images import parse_tag
from ..knowledge.versions import fmt, parse_version

IMAGE_TAG_RE = re.compile(
    r"(?P<image>(?<![\w./-])(?:[\w.\-]+(?::\d+)?/)?vllm/vllm-openai(?:-[a-z0-9]+)?)"
    r":(?P<tag>v?\d+\.\d+\.\d+[\w.+-]*)(?P<digest>@sha256:[0-9a-f]+)?")
# a vLLM image whose tag names no release: `latest`, `nightly[-…]`, a commit, or no tag at all
# (`image: vllm/vllm-openai`: Docker reads it as latest). Never bumped, reported for a human.
FLOATING_TAG_RE = re.compile(
    r"(?P<image>(?<![\w./-])(?:[\w.\-]+(?::\d+)?/)?vllm/vllm-openai(?:-[a-z0-9]+)?)"
    r"(?::(?P<tag>latest|nightly[\w.\-]*|[0-9a-f]{7,40})\b|(?=[\"']?[ \t]*(?:#.*)?$))(?!@)", re.M)
REPOSITORY_KEY_RE = re.compile(r"[\w.-]*repo(?:sitory)?[\"']?[ \t]*:[ \t]*[\"']?$", re.I)
KUSTOMIZE_TAG_RE = re.compile(r"(?m)^(?P<lead>\s*newTag:\s*[\"']?)(?P<tag>v?\d+\.\d+\.\d+[\w.+-]*)")
# the forms a bump rewrites whole: vX.Y.Z, X.Y.Z, vX.Y.Z.N, X.Y.Z.postN
PLAIN_TAG_RE = re.compile(r"^v?\d+\.\d+\.\d+(?:\.\d+|\.post\d+)?$")
ITEM_RE = re.compile(r"(?m)^[ \t]*-[ \t]")
VLLM_NAME_RE = re.compile(r"(?:name|newName):\s*[\"']?(?:[\w.\-]+(?::\d+)?/)?vllm/vllm-openai\b")


def _vllm_kustomize_entry(text: str, at: int) -> bool:
    """The `images:` entry holding the newTag at `at` names a vLLM image (`name` or `newName`)."""
    starts = [m.start() for m in ITEM_RE.finditer(text, 0, at)]
    start = starts[-1] if starts else 0
    nxt = ITEM_RE.search(text, at)
    return bool(VLLM_NAME_RE.search(text[start:nxt.start() if nxt else len(text)]))
PIN_RE = re.compile(r"(?<![\w./-])(?P<name>vllm(?:\[[\w,\s-]+\])?)\s*==\s*(?P<ver>\d+\.\d+\.\d+(?:\.post\d+)?)")


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


# a template line whose image tag falls back to the chart's appVersion
APP_VERSION_RE = re.compile(r"default\s+\.Chart\.AppVersion|\.Chart\.AppVersion\s*(?:\||\}\})")
IMAGE_LITERAL_RE = re.compile(r"image:[ \t]*[\"']?(?P<ref>[^\s\"'{]+?):?[ \t]*\{\{")
VALUES_REPOSITORY_RE = re.compile(r"\.Values\.(?P<path>[\w.]+?)\.repository\b")


def _vllm_image_line(line: str, values: SourceFile | None) -> bool:
    """The image on this template line is vLLM's: written in the line (`vllm/vllm-openai:{{
    .Chart.AppVersion }}`) or read from a values `repository` that names a vLLM image. A
    chart that only mentions vllm elsewhere (a front end whose script says `vllm)`) is not."""
    from ..knowledge.images import is_vllm_image

    literal = IMAGE_LITERAL_RE.search(line)
    if literal and is_vllm_image(literal.group("ref")):
        return True
    ref = VALUES_REPOSITORY_RE.search(line)
    if ref is None or values is None:
        return False
    from ..parsers.helm_values import values_at

    return is_vllm_image(values_at(values.text, ref.group("path").split(".") + ["repository"]))


def _app_version_bumps(project: Project, source: SourceFile, target) -> list:
    """A chart's `appVersion` when it names the vLLM release the chart deploys: a template
    falls back to it for a vLLM image's tag (`default .Chart.AppVersion`), or the chart's
    values.yaml pins a vLLM `repository` to that same tag."""
    if source.path.name != "Chart.yaml":
        return []
    m = re.search(r"(?m)^appVersion:[ \t]*[\"']?(?P<v>[\w.\-]+)", source.text)
    parsed = parse_tag(m.group("v")) if m else None
    if parsed is None or parsed.version is None or parsed.version >= target:
        return []
    root = source.path.parent
    values = next((o for o in project.sources if o.path == root / "values.yaml"), None)
    names = values is not None and any(t == parsed.text for _, _, t, _ in values_tags(values))
    for other in project.sources:
        if not names and other.path.is_relative_to(root / "templates") and ".Chart.AppVersion" in other.text:
            names = any(_vllm_image_line(line, values) for line in other.text.splitlines()
                        if APP_VERSION_RE.search(line))
    if not names:
        return []
    line = source.line_col(m.start("v"))[0]
    new = parsed.bumped(target)
    if new is None:
        return [Bump(source, line, f"appVersion {parsed.text}", fmt(target), "chart appVersion", None,
                     "a variant tag: bump it by hand")]
    return [Bump(source, line, f"appVersion {parsed.text}", new, "chart appVersion",
                 Edit(source, m.start("v"), m.end("v"), new))]


@record
class Bump:
    file: SourceFile
    line: int
    old: str
    new: str
    what: str              # "image tag" | "pin"
    edit: Edit | None      # None: left for a human (digest-pinned image)
    why_not: str = ""


_TEST_PATH_RE = re.compile(r"(?:^|/)(?:tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)")


def is_test_code(source: SourceFile) -> bool:
    """Python test code: an image string there is data a test asserts on, not a deployment
    (`assert engine["image"] == "vllm/vllm-openai:v0.6.3"`): bumping it breaks the test."""
    return source.kind == "python" and bool(_TEST_PATH_RE.search(source.display.replace("\\", "/")))


def _on_lines_with(pattern: re.Pattern, text: str, needle: str):
    """`pattern.finditer(text)` for a pattern whose matches contain `needle` and never cross a
    line break: run on the lines that hold `needle` only (an image pattern tried at every
    offset of every file cost a 1,500-file migrate 0.4 s)."""
    at = text.find(needle)
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        yield from pattern.finditer(text, start, end)
        at = text.find(needle, end)


def find_bumps(project: Project, target: tuple[int, int, int]) -> list[Bump]:
    bumps: list[Bump] = []
    for source in project.sources:
        text = source.text
        for m in _on_lines_with(IMAGE_TAG_RE, text, "vllm/vllm-openai"):
            tag = m.group("tag")
            if parse_version(tag) >= target:
                continue
            new_tag = ("v" if tag.startswith("v") else "") + fmt(target)
            line = source.line_col(m.start())[0]
            old = m.group(0)
            if not PLAIN_TAG_RE.match(tag):
                bumps.append(Bump(source, line, old, f"{m.group('image')}:{new_tag}-…", "image tag", None,
                                  f"tag {tag} has a variant suffix: bump it by hand to a {fmt(target)} tag "
                                  f"of the same variant that exists in the registry"))
                continue
            if m.group("digest"):
                bumps.append(Bump(source, line, old, f"{m.group('image')}:{new_tag}", "image tag", None,
                                  "pinned by digest: pick the new digest by hand"))
                continue
            if is_test_code(source):
                bumps.append(Bump(source, line, old, f"{m.group('image')}:{new_tag}", "image tag", None,
                                  "in test code: bump it by hand together with what the test expects"))
                continue
            bumps.append(Bump(source, line, old, f"{m.group('image')}:{new_tag}", "image tag",
                              Edit(source, m.start("tag"), m.end("tag"), new_tag)))
        for m in _on_lines_with(FLOATING_TAG_RE, text, "vllm/vllm-openai"):
            if source.kind == "requirements":
                continue
            if not m.group("tag") and REPOSITORY_KEY_RE.search(text, text.rfind("\n", 0, m.start()) + 1, m.start()):
                continue        # a chart's `repository:` value: its tag is a key of its own (`tag:`, appVersion)
            tag = m.group("tag") or "latest"
            written = m.group(0) if m.group("tag") else f"{m.group('image')} (no tag: latest)"
            bumps.append(Bump(source, source.line_col(m.start())[0], written,
                              f"{m.group('image')}:v{fmt(target)}", "image tag", None,
                              f"tag {tag} names no release (whatever was pulled last runs): "
                              f"pin v{fmt(target)} by hand"))
        if source.kind in ("yaml", "k8s", "compose") and re.search(r"newName:\s*[\"']?(?:[\w.\-]+/)?vllm/vllm-openai", text):
            for m in KUSTOMIZE_TAG_RE.finditer(text):
                tag = m.group("tag")
                if not _vllm_kustomize_entry(text, m.start("tag")):
                    continue
                if parse_version(tag) < target and not PLAIN_TAG_RE.match(tag):
                    bumps.append(Bump(source, source.line_col(m.start("tag"))[0], tag, fmt(target) + "-…",
                                      "image tag", None, f"tag {tag} has a variant suffix: bump it by hand"))
                    continue
                if parse_version(tag) < target:
                    new_tag = ("v" if tag.startswith("v") else "") + fmt(target)
                    bumps.append(Bump(source, source.line_col(m.start("tag"))[0], tag, new_tag, "image tag",
                                      Edit(source, m.start("tag"), m.end("tag"), new_tag)))
        for at, end, tag, repo in values_tags(source):
            parsed = parse_tag(tag)
            if parsed is None or parsed.version is None or parsed.version >= target:
                continue
            line = source.line_col(at)[0]
            new_tag = parsed.bumped(target)
            if new_tag is None:
                bumps.append(Bump(source, line, f"{repo} tag {tag}", f"{fmt(target)}-…", "image tag", None,
                                  f"tag {tag} has a variant suffix: bump it by hand to a {fmt(target)} tag "
                                  f"of the same variant that exists in the registry"))
                continue
            bumps.append(Bump(source, line, f"{repo} tag {tag}", new_tag, "image tag",
                              Edit(source, at, end, new_tag)))
        bumps.extend(_app_version_bumps(project, source, target))
        if source.kind in ("dockerfile", "requirements"):
            for m in PIN_RE.finditer(text):
                ver = m.group("ver")
                if parse_version(ver) < target:
                    bumps.append(Bump(source, source.line_col(m.start())[0], m.group(0),
                                      f"{m.group('name')}=={fmt(target)}", "pin",
                                      Edit(source, m.start("ver"), m.end("ver"), fmt(target))))
    return bumps


# --------------------------------------------------------------------------------------------
# The current release and the chain of steps
# --------------------------------------------------------------------------------------------
@record
class Detected:
    version: tuple[int, int, int]
    where: str                  # "image tag vllm/vllm-openai:v0.27.0 (k8s/a.yaml:9)"


def detect_version(project: Project) -> Detected | None:
    """The oldest vLLM release the tree pins: image tags, kustomize newTag, `vllm==` pins."""
    found: list[Detected] = []
    for source in project.sources:
        text = source.text
        for m in IMAGE_TAG_RE.finditer(text):
            found.append(Detected(parse_version(m.group("tag")),
                                  f"image tag {m.group(0)} ({source.display}:{source.line_col(m.start())[0]})"))
        if source.kind in ("yaml", "k8s", "compose") and re.search(r"newName:\s*[\"']?(?:[\w.\-]+/)?vllm/vllm-openai", text):
            for m in KUSTOMIZE_TAG_RE.finditer(text):
                if not _vllm_kustomize_entry(text, m.start("tag")):
                    continue
                found.append(Detected(parse_version(m.group("tag")),
                                      f"newTag {m.group('tag')} ({source.display}:{source.line_col(m.start('tag'))[0]})"))
        for at, _, tag, repo in values_tags(source):
            parsed = parse_tag(tag)
            if parsed is not None and parsed.version is not None:
                found.append(Detected(parsed.version, f"{repo} tag {tag} ({source.display}:{source.line_col(at)[0]})"))
        if source.kind in ("dockerfile", "requirements"):
            for m in PIN_RE.finditer(text):
                found.append(Detected(parse_version(m.group("ver")),
                                      f"pin {m.group(0)} ({source.display}:{source.line_col(m.start())[0]})"))
    return min(found, key=lambda d: d.version) if found else None


def steps_between(start: tuple[int, int, int] | None, target: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """The releases a migration from `start` to `target` passes: every catalogued release after
    `start` and before `target`, then `target` itself."""
    if start is None or start >= target:
        return [target]
    from ..knowledge.catalogue import versions

    middle = sorted({parse_version(v) for v in versions() if start < parse_version(v) < target})
    return middle + [target]


@record
class Step:
    version: tuple[int, int, int]
    fixed: list                 # findings whose fix this step applied
    new_left: list              # findings that remain after this step and not after the one before
    changed: int                # files this step changed


def step_key(finding) -> tuple:
    """The same finding at another step of a chain: its message names that step's release."""
    return finding.code, finding.file.display, re.sub(r"\d+\.\d+\.\d+", "X", finding.message)


@record
class Chain:
    steps: list[Step]
    outcome: object             # engine.Outcome of the whole chain (originals -> final texts)


class _StartFrom:
    """While active, files are read as the previous step left them (in memory, never on disk)."""

    def __init__(self, texts: dict):
        self.texts = texts

    def __enter__(self):
        from . import project as project_module

        self.module = project_module
        self.real = project_module.read_source
        texts = self.texts

        def read(path, display, kind, _real=self.real):
            source = _real(path, display, kind)
            if path in texts:
                source.text = texts[path]
            return source

        project_module.read_source = read
        return self

    def __exit__(self, *exc):
        self.module.read_source = self.real
        return False


SILENT = "VL307"        # default-changed: listed apart, as "changes behaviour silently"


def silent_changes(candidates, target: tuple[int, int, int], cache=None, helm_values=None) -> list:
    """VL307's findings on the tree as it is (each launch at the release it runs today): the
    defaults the upgrade to `target` changes under launches that do not set them."""
    from .engine import run_rules
    from .project import load
    from .registry import selected_rules

    rules = list(selected_rules(target, select=[SILENT]))
    if not rules:
        return []
    findings, _ = run_rules(load(candidates, cache=cache, helm_values=helm_values), rules)
    return sorted(findings, key=lambda f: f.sort_key())


def run_chain(candidates, steps: list[tuple[int, int, int]], post_edits=None, options: dict | None = None,
              helm_values: dict | None = None, cache=None, hold=None) -> Chain:
    """Apply each step's safe fixes in order; `post_edits` (the tag/pin bumps) runs in the last.
    `options`: rule options (`keep_defaults`: VL307 pins today's defaults). `hold(launch) ->
    reason`: launches whose fixes wait (requirements.blocked_launches: a blocked environment)."""
    from .engine import Outcome, check_and_fix
    from .project import ParseCache
    from .registry import selected_rules

    cache = cache if cache is not None else ParseCache()   # a step re-parses only what the one before changed
    texts: dict = {}
    originals: dict = {}
    fixed_all: list = []
    dropped: list = []
    done: list[Step] = []
    before: set = set()         # step_key of the findings the step before left
    outcome = None
    for i, version in enumerate(steps):
        rules = list(selected_rules(version, options=options))
        last = i + 1 == len(steps)
        # each step starts from the project the step before converged on: same texts, so the
        # tree is not re-read, and the launch graph and secret values are not derived again
        with _StartFrom(texts):
            outcome = check_and_fix(candidates, rules, fix=True, post_edits=post_edits if last else None,
                                    cache=cache, gate=hold or False, helm_values=helm_values,
                                    start=outcome.project if outcome is not None else None, keep_derived=True)
        changed = outcome.changed()
        for path, (orig, new) in changed.items():
            originals.setdefault(path, orig)
            texts[path] = new
        fixed_all.extend(outcome.fixed)
        dropped.extend(d for d in outcome.dropped if d not in dropped)
        # a step keeps only what is new since the step before: most findings stay from step to
        # step, and 24 steps' worth of them was most of a long chain's memory
        keys = {step_key(f) for f in outcome.findings}
        done.append(Step(version, list(outcome.fixed), [f for f in outcome.findings if step_key(f) not in before],
                         len(changed)))
        before = keys
    total = Outcome(outcome.findings, outcome.problems, outcome.project, originals, texts, fixed_all, dropped)
    return Chain(done, total)


def markdown_report(to_version, from_version, changed, bumps, fixed, findings, left, preview: bool,
                    silent=()) -> str:
    """A pull-request description: per file what changed and why, then what needs a human."""
    from .docs import help_uri

    def link(code: str) -> str:
        return f"[{code}]({help_uri(code)})"

    start = f" from {fmt(from_version)}" if from_version else ""
    lines = [f"# vLLM migration{start} to {fmt(to_version)}", "",
             f"`vllmlint migrate --to {fmt(to_version)}` {'would change' if preview else 'changed'} "
             f"{len(changed)} file(s); {len(findings) + len(left)} item(s) need a human.", ""]
    per_file: dict[str, list[str]] = {}
    for b in bumps:
        if b.edit:
            per_file.setdefault(b.file.display, []).append(f"line {b.line}: {b.what} `{b.old}` -> `{b.new}`")
    for f in fixed:
        per_file.setdefault(f.file.display, []).append(f"line {f.line_col[0]}: {link(f.code)} {f.name}: {f.message}")
    if per_file:
        lines += ["## Changed", ""]
        for display in sorted(per_file):
            lines.append(f"### `{display}`")
            lines += [f"- {item}" for item in per_file[display]]
            lines.append("")
    if findings or left:
        lines += ["## Needs a human", ""]
        for b in left:
            lines.append(f"- `{b.file.display}:{b.line}`: {b.what} `{b.old}`: {b.why_not}")
        for f in findings:
            line, col = f.line_col
            lines.append(f"- `{f.file.display}:{line}:{col}` {link(f.code)} ({f.severity}): {f.message}")
        lines.append("")
    if silent:
        lines += ["## Changes behaviour silently", "",
                  "Flags these launches do not set whose default differs in the target "
                  "(`vllmlint migrate --keep-defaults` pins today's value):", ""]
        for f in silent:
            line, col = f.line_col
            lines.append(f"- `{f.file.display}:{line}:{col}` {link(f.code)}: {f.message}")
        lines.append("")
    return "\n".join(lines)
