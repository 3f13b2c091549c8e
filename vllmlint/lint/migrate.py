"""`vllmlint migrate --to X [--from Y]`: every safe fix for the upgrade, plus image tags and pins
bumped. Across several releases the upgrade runs as a chain: from the current release (`--from`,
else the oldest `vllm/vllm-openai` tag or `vllm==` pin in the tree) through every catalogued
release up to the target, each step applying the safe fixes of that release's rules with that
release as the target, on the result of the step before."""
from __future__ import annotations

import re
from ..model.record import record

from ..model.launch import KUBEAI_VIA, Edit, Fix, Launch, Named, SourceFile
from .project import Project
from .releases import INSTALLING_KINDS
from .sources import is_test_code
from ..knowledge.images import parse_tag
from ..knowledge.versions import fmt, parse_version

from .trace import FLOATING_TAG_RE, IMAGE_TAG_RE, PIN_RE, commented, deliberate, overridden_default, trace


@record
class Bump:
    file: SourceFile
    line: int
    old: str
    new: str
    what: str              # "image tag" | "pin" | "chart appVersion"
    edit: Edit | None      # None: left for a human (digest-pinned image)
    why_not: str = ""
    named: object = None   # the trace.Named it bumps: its launches, its release, where


_SIBLING_VALUE_RE = re.compile(r"^[ \t]*(?:-[ \t]+)?[\"']?(?P<key>[\w.\-]+)[\"']?[ \t]*[:=][ \t]*[\"']?v?(?P<v>\d+\.\d+\.\d+)[\"']?[ \t]*(?:#.*)?$")


def _sibling_release(named, named_lines: set) -> str:
    """A line near `named` (8 lines either way) whose whole value is the same release and that
    is no place vllmlint bumps (`version: "0.6.3"` beside `image: vllm/vllm-openai:v0.6.3`,
    `frameworks.vllm: "0.23.0"` in a provenance block): a bump would leave the two disagreeing."""
    if named.release is None:
        return ""
    release = ".".join(str(x) for x in named.release)
    lines = named.file.text.split("\n")
    here = named.line
    for n in range(max(1, here - 8), min(len(lines), here + 8) + 1):
        if n == here or (named.file.path, n) in named_lines:
            continue
        m = _SIBLING_VALUE_RE.match(lines[n - 1])
        if m and m.group("v") == release:
            return f"line {n} names the same release (`{lines[n - 1].strip()}`)"
    return ""


def _bump(named, target: tuple[int, int, int], named_lines: set = frozenset(), held=None) -> Bump | None:
    """The bump of one place a launch runs, or None when it already names `target` or newer.
    `held`: ref_key -> the error that keeps it (held_refs); a place left for a human already
    keeps its own reason."""
    bump = _plain_bump(named, target, named_lines)
    error = held.get(ref_key(named)) if held and bump is not None and bump.edit is not None else None
    if error:
        bump.edit, bump.why_not = None, (f"kept: {error} is left for a human and breaks a launch it runs on vLLM "
                                         f"{fmt(target)}; fix that, then run `migrate` again")
    return bump


def _plain_bump(named, target: tuple[int, int, int], named_lines: set) -> Bump | None:
    source = named.file
    line = named.line
    if named.release is not None and named.release >= target:
        return None
    sibling = _sibling_release(named, named_lines) if named.how != "pin" else ""
    if sibling:
        return Bump(source, line, named.text, fmt(target), "pin" if named.how == "pin" else "image tag", None,
                    f"{sibling}: bump both by hand, together", named)
    overridden = overridden_default(named) if named.how == "image" else ""
    if overridden:
        return Bump(source, line, named.text, fmt(target), "image tag", None,
                    f"the default of an image variable, and {overridden}: bump the image there (or here) by hand",
                    named)
    config = next((c for c in map(unread_config_file, named.launches) if c), "")
    if config:
        return Bump(source, line, named.text, fmt(target), "pin" if named.how == "pin" else "image tag", None,
                    f"a launch it runs reads more options from `--config {config}`, which vllmlint does not read: "
                    f"check them against vLLM {fmt(target)}'s, then bump it by hand", named)
    why = deliberate(named)
    if why:
        return Bump(source, line, named.text, fmt(target), "pin" if named.how == "pin" else "image tag", None,
                    f"a comment says this release is chosen on purpose (`{why[:100]}`): bump it by hand if "
                    f"that no longer holds", named)
    if named.how == "image":
        m = IMAGE_TAG_RE.fullmatch(named.text)
        if m is None:        # a floating tag: names no release
            f = FLOATING_TAG_RE.match(source.text, named.span[0])
            image, tag = f.group("image"), f.group("tag") or "latest"
            return Bump(source, line, named.text, f"{image}:v{fmt(target)}", "image tag", None,
                        f"tag {tag} names no release (whatever was pulled last runs): pin v{fmt(target)} by hand", named)
        tag = m.group("tag")
        new_tag = ("v" if tag.startswith("v") else "") + fmt(target)
        new = f"{m.group('image')}:{new_tag}"
        if named.edit_span is None and m.group("digest"):
            return Bump(source, line, named.text, new, "image tag", None, "pinned by digest: pick the new digest by hand", named)
        if named.edit_span is None:
            return Bump(source, line, named.text, new + "-…", "image tag", None,
                        f"tag {tag} has a variant suffix: bump it by hand to a {fmt(target)} tag "
                        f"of the same variant that exists in the registry", named)
        if is_test_code(source):
            return Bump(source, line, named.text, new, "image tag", None,
                        "in test code: bump it by hand together with what the test expects", named)
        return Bump(source, line, named.text, new, "image tag", Edit(source, *named.edit_span, new_tag), "", named)
    if named.how == "pin":
        name = named.text.split("==", 1)[0].strip()
        return Bump(source, line, named.text, f"{name}=={fmt(target)}", "pin",
                    Edit(source, *named.edit_span, fmt(target)), "", named)
    written = source.text[named.span[0]:named.span[1]]
    parsed = parse_tag(written)
    new = parsed.bumped(target) if parsed is not None else None
    what = "chart appVersion" if named.how == "chart appVersion" else "image tag"
    if named.how == "ARG default" and new is not None and named.edit_span is None:
        return Bump(source, line, named.text, new, what, None,
                    f"{named.text.split('=')[0]} is declared again further down the Dockerfile: bump every "
                    f"declaration by hand, together", named)
    if new is None or named.edit_span is None:
        why = "a variant tag: bump it by hand" if named.how == "chart appVersion" else \
            f"tag {written} has a variant suffix: bump it by hand to a {fmt(target)} tag of the same variant " \
            f"that exists in the registry"
        return Bump(source, line, named.text, f"{fmt(target)}-…", what, None, why, named)
    return Bump(source, line, named.text, new, what, Edit(source, *named.edit_span, new), "", named)


def unread_config_file(launch) -> str:
    """The file a launch's `--config` names (vLLM reads its keys as more options), else "".
    vllmlint does not read that file: the options in it are unknown, so a bump of the launch's
    release could break it unseen (found as a user: compose files whose only flag is
    `--config /app/config.yaml`, a volume of the repository's config.yaml). A file vllmlint did
    read (parsers.options_file) is no such file: its options are the launch's own."""
    if launch.options_from:
        return ""
    words = [a.value for a in launch.argv]
    for i, word in enumerate(words):
        if word == "--config":
            return words[i + 1] if i + 1 < len(words) else "?"
        if word.startswith("--config="):
            return word.split("=", 1)[1] or "?"
    return ""


def find_bumps(project: Project, target: tuple[int, int, int], held=None) -> list[Bump]:
    """The bumps of the image references and pins the launches run (lint.trace): a tag or pin
    that no launch runs is never edited (`unread_names` lists those for a human), nor one that
    `held` holds (held_refs)."""
    reached, unread = trace(project)
    lines = {(n.file.path, n.line) for n in reached + unread}
    return [b for b in (_bump(n, target, lines, held) for n in reached) if b is not None]


# error findings about the target release, left for a human: with one, the launch it concerns
# breaks on the target (it does not start, an import fails, an endpoint it serves is gone).
# VL101/VL102 are P/D design traps true on every release: a bump changes nothing about them.
RELEASE_NEUTRAL_ERRORS = ("VL101", "VL102")


def held_refs(project: Project, findings: list, target: tuple[int, int, int]) -> dict:
    """ref_key -> the error (`file:line (CODE)`), for each tag or pin that runs a launch keeping
    an error on `target` no fix resolved: bumping it would merge a deployment that breaks, so it
    stays, and the launches it runs keep their config (stays_behind) until a human fixes it. Found by
    reading what `migrate` wrote: a tag moved past `--swap-space` in a Helm template, past a
    flag value the target refuses (VL308), while the finding said "will not start"."""
    errors = [f for f in findings if f.severity == "error" and f.code.startswith("VL")
              and f.code not in RELEASE_NEUTRAL_ERRORS]
    if not errors:
        return {}
    reached, unread = trace(project)    # each launch's image_refs and pins, in this project's texts
    lines = {(n.file.path, n.line) for n in reached + unread}
    # only a place this migration would bump is kept: a moving tag, a digest, a pin `migrate`
    # never bumps (a script's own install) keep their own reasons
    bumped = {id(n) for n in reached if (b := _plain_bump(n, target, lines)) is not None and b.edit is not None}
    spans: dict[int, list] = {}         # id(file) -> (start, end, launch) of each part of a launch
    for launch in project.launches:
        for part in (launch, *launch.argv, *launch.env):
            if part.file is not None and part.span is not None:
                spans.setdefault(id(part.file), []).append((part.span[0], part.span[1], launch))
    held: dict = {}

    def keep(launch, error: str) -> None:
        for named in (*launch.image_refs, *launch.pins):
            if id(named) in bumped:
                held.setdefault(ref_key(named), error)

    for f in errors:
        at = f.span[0]
        hit = [l for s, e, l in spans.get(id(f.file), ()) if s <= at <= e]
        if not hit and f.code == "VL306":     # an import that fails stops every launch of its file
            hit = [l for l in project.launches if l.file is f.file]
        for launch in hit:
            keep(launch, "{}:{}:{} ({})".format(f.file.display, *f.line_col, f.code))
    if held:
        # the two sides of a P/D pair move together: a prefill on the target sending its KV to a
        # decode left on the old release is a pair of releases nobody tested
        from .graph import graph_of

        for producers, consumers in graph_of(project).pd_pairs():
            pair = producers + consumers
            error = next((held[ref_key(n)] for l in pair for n in (*l.image_refs, *l.pins) if ref_key(n) in held), None)
            for launch in pair if error else ():
                keep(launch, error)
    return held


def ref_key(named) -> tuple:
    """A place a release is written, the same before and after its bump and the fixes around it
    (lint.trace names every place it finds so)."""
    return named.key


def left_behind(project: Project, target: tuple[int, int, int], bumps: list[Bump]) -> list[Bump]:
    """The launches older than `target` that no bump moves and that nothing else says stay
    behind: left for a human, each place once. Without them a migration with nothing else to
    change said nothing of the release its launches keep (found as a user: a uv project's
    `vllm==0.21.0` and its `vllm serve` script, "would change 0 files", exit 0).

    - a pin `migrate` does not bump (releases.unbumped_pin): a pyproject.toml dependency, at
      its line; a `pip install vllm==X` in the launch's own script, at that line;
    - an image whose tag is written where no bump reaches (no place `lint.trace` found: a config
      file a script sources), at the launch."""
    from .releases import pyproject_pins, script_pins, unbumped_pin

    seen = {(b.file.path, b.line) for b in bumps}
    out: list[Bump] = []

    def add(source, line: int, old: str, new: str, what: str, why: str) -> None:
        if (source.path, line) not in seen:
            seen.add((source.path, line))
            out.append(Bump(source, line, old, new, what, None, why))

    for launch in project.launches:
        if launch.release is None or launch.release >= target:
            continue
        runs = f"{launch.file.display}:{launch.line} runs it"
        if unbumped_pin(launch) and launch.release_pin == "pyproject":
            found = [p for p in project.others if p.kind == "pyproject"
                     and launch.file.path.is_relative_to(p.path.parent) and launch.release in pyproject_pins(p.text)]
            if found:
                source = max(found, key=lambda p: len(p.path.parts))          # the nearest one
                m = re.search(r"vllm\b[^\n]*?" + re.escape(fmt(launch.release)), source.text)
                add(source, source.text.count("\n", 0, m.start()) + 1 if m else 1, f"vllm=={fmt(launch.release)}",
                    f"vllm=={fmt(target)}", "pin",
                    f"a pyproject.toml dependency, which `migrate` does not bump (a lock file resolves it): bump it "
                    f"to {fmt(target)} and re-lock (`uv lock`, `poetry lock`); {runs}")
        elif unbumped_pin(launch) and launch.release_pin == "conda":
            from .releases import CONDA_FILES, CONDA_PIN_RE

            found = [p for p in project.sources if p.path.name in CONDA_FILES
                     and launch.file.path.is_relative_to(p.path.parent)]
            if found:
                source = max(found, key=lambda p: len(p.path.parts))          # the nearest one
                m = CONDA_PIN_RE().search(source.text)
                add(source, source.text.count("\n", 0, m.start("ver")) + 1 if m else 1,
                    f"vllm=={fmt(launch.release)}", f"vllm=={fmt(target)}", "pin",
                    f"a conda environment's pin, which `migrate` does not bump: bump it to {fmt(target)} with "
                    f"the packages installed beside it and rebuild the environment; {runs}")
        elif unbumped_pin(launch) and launch.release_pin == "unchecked":
            add(launch.file, launch.line, f"vllm=={fmt(launch.release)}", f"vllm=={fmt(target)}", "pin",
                f"its release is the {launch.release_from}: `migrate` bumps only the files it is given; "
                f"run it on the repository, or bump that pin to {fmt(target)} by hand")
        elif unbumped_pin(launch) and launch.release_pin == "script":
            line = script_pins(launch.file.text, python=launch.file.kind == "python").get(launch.release)
            if line:
                add(launch.file, line, f"vllm=={fmt(launch.release)}", f"vllm=={fmt(target)}", "pin",
                    f"installed by its own script, which `migrate` does not bump: bump it to {fmt(target)} with "
                    f"the packages installed beside it; {runs}")
        elif launch.image and not launch.image_refs and not launch.pins:
            why = stays_behind(launch, target, {})
            if why:
                at = launch.file.text.find(launch.image)          # where it is written, when in the launch's file
                line = launch.file.text.count("\n", 0, at) + 1 if at >= 0 else launch.line
                add(launch.file, line, launch.image, fmt(target), "image",
                    why if at >= 0 else f"{why} ({launch.file.display}:{launch.line} runs it)")
    return out


def on_disk_lines(findings: list, changed: dict) -> list:
    """`migrate --diff` writes nothing: a finding in a file the migration would change gets the
    place of the same text in the file as it is on disk, where the user looks for it (found as a
    user: "Left for a human" said line 13 of the migrated file while line 13 on disk was another
    variable). A line the migration edits maps to the line it replaces, one for one where the
    two runs of lines are the same length, else to the first of them."""
    from ..model.record import replace

    maps: dict = {}
    out = []
    for f in findings:
        hit = changed.get(f.file.path)
        if hit is None or f.file.text != hit[1]:
            out.append(f)
            continue
        orig = hit[0]
        if f.file.path not in maps:
            # lines as SourceFile.line_col counts them, and one start past the end
            maps[f.file.path] = (_line_map(orig.text.split("\n"), hit[1].split("\n")),
                                 orig.line_starts() + [len(orig.text) + 1])
        line_map, starts = maps[f.file.path]
        line, col = f.line_col
        old_line = line_map.get(line)
        if old_line is None:
            out.append(f)
            continue
        if old_line >= len(starts):
            out.append(f)
            continue
        start = starts[old_line - 1]
        end = max(start, min(starts[old_line] - 1, len(orig.text)))
        at = min(start + col - 1, end)
        out.append(replace(f, file=orig, span=(at, min(at + f.span[1] - f.span[0], end) if f.span[1] > f.span[0] else at)))
    return out


def _line_map(old: list[str], new: list[str]) -> dict[int, int]:
    """new line number -> old line number (1-based) for every line of `new`."""
    import difflib

    out: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        for k in range(j2 - j1):
            if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                out[j1 + k + 1] = i1 + k + 1
            elif i2 > i1:
                out[j1 + k + 1] = i1 + 1
            else:                   # lines the migration adds: the line before them
                out[j1 + k + 1] = max(i1, 1)
    return out


def unread_names(project: Project, target: tuple[int, int, int] | None = None) -> list:
    """The places that name a vLLM image or pin (older than `target`, or floating) that no
    launch runs: listed for a human, never bumped."""
    _, unread = trace(project)
    return [n for n in unread if target is None or n.release is None or n.release < target]


def unread_title(unread: list) -> str:
    """What the places of `unread_names` are: `vLLM images`, `vLLM pins` or both (a requirements
    pin no launch runs was counted among the images)."""
    pins = sum(1 for n in unread if n.how == "pin")
    return "vLLM pins" if pins == len(unread) else "vLLM images and pins" if pins else "vLLM images"


def stays_behind(launch, target: tuple[int, int, int], kubeai: dict, named_lines: set = frozenset(),
                 held=None) -> str:
    """Why the migration does not move `launch` to `target` (its image is not one `migrate`
    bumps: a fork or vendor build versioned by its own tags, a variant or digest left for a
    human, a tag a comment pins, an image set where no bump reaches, a tag or pin held while an
    error is left for a human: held_refs), else ""."""
    from ..knowledge.images import is_vllm_image, parse_image
    from .releases import release_from_image, unbumped_pin
    from .trace import versioned_by_vllm

    if launch.via.startswith(KUBEAI_VIA) and kubeai and id(launch) not in kubeai:
        return "KubeAI runs it with the image of a resource profile this tree does not define"
    if launch.release_linked:
        # found as a user on mateusz-kolodziejczyk/vllm-huggingface: the flags of a script a
        # Dockerfile copies were fixed for the target while that Dockerfile's FROM stayed
        return f"its release is the {launch.release_from}, which `migrate` does not bump for it"
    for named in (*launch.image_refs, *launch.pins) if held else ():
        if ref_key(named) in held:
            return f"its release stays while {held[ref_key(named)]} is left for a human"
    if unbumped_pin(launch):
        if launch.release_pin == "pyproject":
            return (f"its release is the {launch.release_from}, which `migrate` does not bump (a lock file "
                    f"resolves it): bump the pin and re-lock (`uv lock`, `poetry lock`)")
        return (f"its release is the {launch.release_from}, which `migrate` does not bump: bump it by hand "
                f"with the packages installed beside it")
    image = kubeai[id(launch)][0] if id(launch) in kubeai else launch.image
    if image and "$" not in image and "{{" not in image and parse_image(image) is None:
        return f"its image `{image}` is a placeholder: which vLLM build it runs is not known"
    for pin in launch.pins:         # `FROM python:3.12` + `pip install vllm==0.29.0`: the pin moves it
        bump = _bump(pin, target, named_lines)
        if bump is None or bump.edit is not None:
            return ""
    if image and "$" not in image and "{{" not in image and not is_vllm_image(image) and id(launch) not in kubeai:
        # `quay.io/someone/vllm-openvino:latest`, `myorg/server:1.2`: a build `migrate` neither
        # recognises nor bumps, so the launch keeps whatever vLLM it ships (found as a user: a
        # removal of VLLM_OPENVINO_DEVICE on an OpenVINO build that reads it)
        if launch.release is not None and launch.release_from:
            # a tag the repository builds (compose `build:`, `docker build -t` in a script): the
            # Dockerfile moves only with a rebuild of that tag, which is the user's to do
            return (f"it runs {image}, built here ({launch.release_from}): bump that Dockerfile and "
                    f"rebuild the image, `migrate` does neither")
        return f"it runs {image}, which `migrate` does not know as a vLLM release image and does not bump"
    refs = [n for n in launch.image_refs if n.how != "pin"]
    if image and "$" in image.rsplit("/", 1)[-1].partition(":")[2] and not refs:
        # `${REGISTRY:-opea}/vllm-rocm:${TAG:-latest}`, `vllm/vllm-openai:${VLLM_TAG}`: the tag
        # is chosen at run time and no bump reaches it (found on the OPEA compose services a
        # reading of such images added: `--disable-log-requests` was removed from them)
        return f"it runs {image}, whose tag is chosen at run time: `migrate` does not bump it"
    if not image or not (is_vllm_image(image) or id(launch) in kubeai):
        return ""
    if not versioned_by_vllm(image):
        return f"it runs {image}, whose tags are not vLLM's: `migrate` does not bump it"
    for n in refs:
        bump = _bump(n, target, named_lines)
        if bump is None or bump.edit is not None or n.release is None:
            return ""            # already there, bumped in this edit set, or a moving tag (newest)
    if refs:
        return f"its image {refs[0].text} ({refs[0].where()}) is left for a human"
    if release_from_image(image) is None:
        return ""                # a moving or unnamed tag: nothing to bump
    if image in launch.file.text and "vllm/vllm-openai" not in image:
        # a vLLM build of another name (`public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.10.1`)
        return f"it runs {image}, an image `migrate` does not bump (it bumps vllm/vllm-openai tags only)"
    return f"it runs {image}, set where `migrate` finds no tag to bump"


def hold_back(target: tuple[int, int, int], hold=None, held=None):
    """migrate's gate: a fix that needs a release (`min_release`) is held on a launch the
    migration does not move to `target` (stays_behind): it would change what that launch's
    release does today. `hold(launch) -> reason` names launches whose environment's upgrade is
    blocked (requirements.blocked_launches): their fixes wait too; `held`, the tags and pins
    kept while an error is left for a human (held_refs)."""
    def gate(project, findings) -> None:
        from .engine import hold_fixes
        from .releases import unbumped_pin
        from .trace import kubeai_images

        traced = None
        if hold is not None:
            traced = trace(project)     # each launch's pins, which `hold` reads, in this project's texts
            hold_fixes(findings, hold)

        # with places kept (held_refs) any launch may run one: a script beside a kept pin too
        waiting = [f for f in findings if f.fix is not None and f.fix.min_release is not None and
                   any(held or l.image or l.via.startswith(KUBEAI_VIA) or unbumped_pin(l) or l.release_linked
                       for l in f.fix.launches)]
        loose = [f for f in findings if f.fix is not None and f.fix.min_release is not None and
                 any(_unknown_host(l) for l in f.fix.launches)]
        if not waiting and not loose:
            return
        _hold_unseen_environment(loose)
        reached, unread = traced or trace(project)
        _hold_beside_stray_pins(loose, unread + _installed_by_other_scripts(project))
        lines = {(n.file.path, n.line) for n in reached + unread}
        kubeai = kubeai_images(project, [l for l in project.launches if l.via.startswith(KUBEAI_VIA)])
        why: dict[int, str] = {}
        for f in waiting:
            if f.fix is None:
                continue            # held already, beside a stray pin
            for launch in f.fix.launches:
                if id(launch) not in why:
                    why[id(launch)] = stays_behind(launch, target, kubeai, lines, held)
                if why[id(launch)]:
                    _withhold(f, why[id(launch)], "; upgrade it by hand, then run `vllmlint check --fix`.")
                    break
    return gate


def _withhold(finding, why: str, advice: str) -> None:
    """The fix is not written by this migration: the finding says why, its detail what to do."""
    finding.fix, finding.fixable = None, False
    finding.message += f" (not fixed by the migration: {why})"
    finding.detail = " ".join(p for p in (finding.detail, f"Not fixed by `migrate`: {why}{advice}") if p)


def _unknown_host(launch) -> bool:
    """A launch that runs the repository's Python environment and whose release nothing says
    (VL306's stand-in for a module is none: its release is its pin's)."""
    from .releases import runs_host_environment

    return isinstance(launch, Launch) and launch.release is None and not launch.release_unnamed \
        and not launch.image and runs_host_environment(launch)


def _hold_unseen_environment(findings: list) -> None:
    """A release-dependent fix on a launch of unknown release is held when its own script says
    it runs a vLLM that `migrate` cannot see (found as a user on ovg-project/kvcached): it
    installs `vllm==$VAR` with VAR known at run time only, or activates an environment whose
    name carries an older release (`source .../vllm-v0.9.2/.venv/bin/activate`)."""
    from .releases import activated_release, installs_at_run_time

    for f in findings:
        if f.fix is None:
            continue
        for launch in f.fix.launches:
            if not _unknown_host(launch):
                continue
            text = launch.file.text
            line = installs_at_run_time(text)
            if line:
                why = f"its vLLM release is not known: {launch.file.display}:{line} installs a `vllm==` set at run time"
            elif (env := activated_release(text)) is not None and env[0] < f.fix.min_release:
                why = (f"its vLLM release is not known, and its script activates {env[1]}, which names "
                       f"vLLM {fmt(env[0])}")
            else:
                continue
            _withhold(f, why, "; if it runs vLLM " + fmt(f.fix.min_release) + " or later, tell vllmlint "
                              "its release (a `vllmlint: release=` directive or the `releases` setting).")
            break


# scripts whose `pip install vllm==X` sets up an environment (not YAML's: those belong to its
# own services' commands)
PIN_SCRIPT_KINDS = INSTALLING_KINDS - {"yaml"}


def _installed_by_other_scripts(project) -> list[Named]:
    """The `pip install vllm==X` of the scripts in the tree that launch nothing themselves (a
    setup.sh beside the serve script, found as a user on wagerc97/gpt-oss-alignment): an
    environment pin as much as a requirements file's."""
    from .releases import script_pins

    launching = {pf.source.path for pf in project.files if pf.launches}
    out = []
    for source in project.sources:
        if source.kind in PIN_SCRIPT_KINDS and source.path not in launching:
            for version, line in script_pins(source.text).items():
                start = source.line_starts()[line - 1]
                out.append(Named(source, (start, start), f"vllm=={fmt(version)}", "pin", version))
    return out


def _hold_beside_stray_pins(findings: list, unread: list) -> None:
    """A release-dependent fix on a launch whose release is unknown is held when the tree pins
    an older vLLM in an environment file no launch is linked to: the launch may well run that
    pin, which `migrate` does not bump (found on UIUC-Chatbot/llm-serving: `vllm==0.4.2` in
    `ray_serving/config/requirements.txt`, launchers in `ray_serving/models/`, and `migrate
    --to 0.33.0` rewrote an import for 0.29.0 beside it). Naming a target states what runs only
    where nothing in the tree says otherwise."""
    stray = [n for n in unread if n.how == "pin" and n.release is not None
             and (n.file.kind in ("requirements", "pyproject") or n.file.kind in PIN_SCRIPT_KINDS)
             and not commented(n)]
    if not stray:
        return
    for f in findings:
        if f.fix is None:
            continue
        older = sorted((n for n in stray if n.release < f.fix.min_release), key=lambda n: n.release)
        if not older:
            continue
        n = older[0]
        why = (f"its vLLM release is not known, and the tree pins {n.text} at {n.where()}, which no launch "
               f"is linked to and `migrate` does not bump")
        _withhold(f, why, ". If this launch runs that environment, bump the pin with this change by hand; "
                          "if not, tell vllmlint its release (a `vllmlint: release=` directive or the "
                          "`releases` setting).")


# --------------------------------------------------------------------------------------------
# The current release and the chain of steps
# --------------------------------------------------------------------------------------------
@record
class Detected:
    version: tuple[int, int, int]
    where: str                  # "image tag vllm/vllm-openai:v0.27.0 (k8s/a.yaml:9)"


def detect_version(project: Project) -> Detected | None:
    """The oldest vLLM release the launches run, by the tags and pins they read (lint.trace):
    a release named in a changelog or a comment is not where the tree is."""
    found = [Detected(n.release, f"{_WHAT.get(n.how, '')}{n.text} ({n.where()})")
             for n in trace(project)[0] if n.release is not None]
    return min(found, key=lambda d: d.version) if found else None


_WHAT = {"image": "image tag ", "pin": "pin "}


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
    """The same finding at another step of a chain: its message names that step's release (and,
    VL308, the values that step's release accepts)."""
    message = re.sub(r"\d+\.\d+\.\d+", "X", finding.message)
    return finding.code, finding.file.display, re.sub(r"` accepts [^;]*;", "` accepts ...;", message)


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


def incremental() -> bool:
    """False with VLLMLINT_MIGRATE=full: every step the whole way, as before issue 34 (the
    reference tests/test_migrate_incremental.py compares the incremental chain with)."""
    import os

    return os.environ.get("VLLMLINT_MIGRATE", "").strip().lower() != "full"


def run_chain(candidates, steps: list[tuple[int, int, int]], post_edits=None, options: dict | None = None,
              helm_values: dict | None = None, cache=None, hold=None, held=None) -> Chain:
    """Apply each step's safe fixes in order; `post_edits` (the tag/pin bumps) runs in the last.
    `options`: rule options (`keep_defaults`: VL307 pins today's defaults). `hold(launch) ->
    reason`: launches whose fixes wait (requirements.blocked_launches: a blocked environment);
    `held`: the tags and pins that stay (held_refs), whose launches' fixes wait too."""
    from .project import ParseCache

    cache = cache if cache is not None else ParseCache()   # a step re-parses only what the one before changed
    # each step's release is the one checked (rules/vl308: not the release a launch runs today)
    options = {**(options or {}), "target_explicit": True}
    if incremental():
        # a step's edited texts were parsed back natively when the step wrote them: the next
        # pass or step does not check them again as its `before`
        if cache.native is None:
            cache.native = {}
        # no --unsafe-fixes here and no "hidden fixes" line: no rule need build an unsafe fix
        # (rules/vl302's NO_UNSAFE_FIXES: its speculative fold re-parses a file per launch)
        options = {**(options or {}), "no_unsafe_fixes": True}
    from contextlib import nullcontext

    from .release_links import keep_repos

    # nothing is written before the chain ends: each repository's files are read once
    import gc

    # lint commands run with the cyclic collector off; a chain collects after each step that
    # edits files (_steps). What is alive now (start-up, the tree's first parse) is frozen out
    # of those collections: they then cost about a third less.
    collecting = not gc.isenabled()
    if collecting:
        gc.freeze()
    try:
        with keep_repos() if incremental() else nullcontext():
            return _steps(candidates, steps, post_edits, options, helm_values, cache, hold, held, collecting)
    finally:
        if collecting:
            gc.unfreeze()


def migrate_chain(candidates, steps: list[tuple[int, int, int]], bumps_for, options: dict | None = None,
                  helm_values: dict | None = None, cache=None, hold=None, start: Project | None = None
                  ) -> tuple[Chain, list[Bump]]:
    """run_chain with the tag and pin bumps `bumps_for(project, held) -> [Bump]` gives in its last
    step, and the bumps it made or left. A tag or pin that runs a launch with an error no fix
    resolves stays, and that launch keeps its config (held_refs): a migration never writes a
    release its own findings say the deployment breaks on. Which errors no fix resolves is read
    first off the target's check of the tree as it is (`start`, read here when not given); a
    chain that leaves one more on a launch it bumped runs again with that one held too."""
    seen: list[Bump] = []
    held: dict = {}

    def post_edits(project) -> list[Edit]:
        bumps = bumps_for(project, held)
        seen.extend(bumps)
        return [b.edit for b in bumps if b.edit]

    if steps:
        if start is None:
            from .project import load
            start = load(candidates, cache=cache, helm_values=helm_values)
        held.update(_unfixed_on(start, steps[-1], options))
    chain = run_chain(candidates, steps, post_edits, options, helm_values, cache, hold, held or None)
    if steps and any(b.edit for b in seen):
        more = held_refs(chain.outcome.project, chain.outcome.findings, steps[-1])
        if any(b.named is not None and ref_key(b.named) in more and ref_key(b.named) not in held
               for b in seen if b.edit):
            held.update((k, v) for k, v in more.items() if k not in held)
            seen.clear()
            chain = run_chain(candidates, steps, post_edits, options, helm_values, cache, hold, held)
    return chain, seen


def _unfixed_on(project: Project, target: tuple[int, int, int], options: dict | None) -> dict:
    """held_refs of the errors the target's rules find on `project` with no fix: the fixes as
    the rules make them, no release gate (a fix left to `migrate` is one it makes)."""
    from .engine import analyse
    from .registry import selected_rules

    rules = [r for r in selected_rules(target, options={**(options or {}), "target_explicit": True,
                                                         "no_unsafe_fixes": True}) if r.code != SILENT]
    findings, _suppressed, _problems = analyse(project, rules)
    return held_refs(project, [f for f in findings if f.fix is None], target)


def _steps(candidates, steps, post_edits, options, helm_values, cache, hold, held=None,
           collecting: bool = False) -> Chain:
    from .engine import Outcome, check_and_fix
    from .registry import selected_rules

    texts: dict = {}
    originals: dict = {}
    fixed_all: list = []
    dropped: list = []
    done: list[Step] = []
    before: set = set()         # step_key of the findings the step before left
    outcome = None
    # VL307 (SILENT) runs in a step only to pin defaults (--keep-defaults): without that it has no
    # fix, and its findings are listed apart, from the tree as it is (silent_changes), never from
    # the steps. So it is not run there (6-9% of a chain's CPU), and its suppressions are not
    # judged at a step whose release does not yet change the default they are for.
    keep_silent = bool((options or {}).get("keep_defaults"))
    if keep_silent and steps:       # rules/vl307's FINAL_TARGET: a pin must start the last release too
        options = {**options, "final_target": steps[-1]}
    for i, version in enumerate(steps):
        rules = [r for r in selected_rules(version, options=options) if keep_silent or r.code != SILENT]
        last = i + 1 == len(steps)
        # each step starts from the project the step before converged on: same texts, so the
        # tree is not re-read, and the launch graph and secret values are not derived again
        with _StartFrom(texts):
            outcome = check_and_fix(candidates, rules, fix=True, post_edits=post_edits if last else None,
                                    cache=cache, gate=hold_back(steps[-1], hold, held), helm_values=helm_values,
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
        step = Step(version, list(outcome.fixed), [f for f in outcome.findings if step_key(f) not in before],
                    len(changed))
        done.append(step)
        if not last:
            for earlier in done:        # an earlier step's findings go stale when a later step edits their file
                _retire(earlier, texts)
            if changed and collecting:
                # the parses this step replaced refer to each other (a launch's env and each
                # entry's launches, an arg's parser): only the cyclic collector frees them,
                # and lint commands run without it. Without this, a 29-step chain peaked at
                # 1.45x a one-step run's memory (bench/gen_corpus2.py, 200 files); with it 1.10x,
                # for about a tenth more CPU.
                import gc
                gc.collect()
        before = keys
    total = Outcome(outcome.findings, outcome.problems, outcome.project, originals, texts, fixed_all, dropped)
    return Chain(done, total)


def _retire(step: Step, texts: dict) -> None:
    """What a finished step keeps of the texts it read. Its findings are printed at the end (a
    path, a line, a message; a fixed one also the launches it served), but each held its file's
    text as the step read it, and an edited file's old texts stayed in memory step after step:
    a 29-step chain grew to 1.45x a one-step run. A finding here keeps its file's name and line
    table, not its text; a fixed one keeps its evidence sentence, made now, when every launch it
    served belongs to a text a later step replaced (such a launch never changes again)."""
    detached: dict[int, SourceFile] = {}

    def light(source: SourceFile) -> SourceFile:
        copy = detached.get(id(source))
        if copy is None:
            source.line_col(0)          # its line table: all that line_col needs
            copy = detached[id(source)] = SourceFile(source.path, source.display, "", source.kind, source.bom,
                                                     source._line_starts)
        return copy

    for f in step.fixed:
        fix = f.fix
        if fix is not None and fix.launches and all(texts.get(l.file.path, l.file.text) != l.file.text for l in fix.launches):
            evidence = _fix_evidence(f)
            f.fix = Fix([], fix.description, fix.applicability, [], fix.min_release)
            f.evidence = evidence
        if texts.get(f.file.path, f.file.text) != f.file.text:
            f.file = light(f.file)
    for f in step.new_left:
        if texts.get(f.file.path, f.file.text) != f.file.text:
            f.file = light(f.file)


def _evidence(launch) -> str:
    """`container vllm (Deployment/x) at `k8s/a.yaml:12`, which ran 0.22.0 (image
    vllm/vllm-openai:v0.22.0 at k8s/a.yaml:9)`: the launch, its release and what says so."""
    from ..knowledge.versions import fmt

    where = f"{launch.context} at `{launch.file.display}:{launch.line}`"
    release = getattr(launch, "release", None)
    if release is None:
        return f"{where}, whose release vllmlint does not know"
    said = launch.image_refs or launch.pins
    at = f" at {said[0].where()}" if said and not launch.release_from.startswith("pin vllm==") else ""
    return f"{where}, which ran {fmt(release)} ({launch.release_from}{at})"


def _fix_evidence(finding) -> str:
    kept = getattr(finding, "evidence", None)       # made when its step ended (_retire)
    if kept is not None:
        return kept
    launches = finding.fix.launches if finding.fix is not None else []
    if not launches:
        return ""
    return "; serves " + "; ".join(_evidence(l) for l in launches[:3]) + (" …" if len(launches) > 3 else "")


def markdown_report(to_version, from_version, changed, bumps, fixed, findings, left, preview: bool,
                    silent=(), unread=()) -> str:
    """A pull-request description: per file what changed and why (per edit the launch it serves,
    the release that launch runs and the evidence for it), then what needs a human."""
    from .report import plural

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
            serves = ""
            if b.named is not None and b.named.launches:
                ls = b.named.launches
                serves = "; run by " + "; ".join(_evidence(l) for l in ls[:3]) + (f" and {len(ls) - 3} more" if len(ls) > 3 else "")
            per_file.setdefault(b.file.display, []).append(f"line {b.line}: {b.what} `{b.old}` -> `{b.new}`{serves}")
    for f in fixed:
        per_file.setdefault(f.file.display, []).append(
            f"line {f.line_col[0]}: {link(f.code)} {f.name}: {f.message}{_fix_evidence(f)}")
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
    if unread:
        files = sorted({n.file.display for n in unread})
        lines += [f"## {unread_title(unread)} named where no launch reads them ({plural(len(unread), 'place')} in {plural(len(files), 'file')})", "",
                  "Never bumped: a comment, a docstring, a changelog or prose value, a test's data, or a file "
                  "vllmlint does not read as a launch. Bump by hand what does deploy vLLM:", ""]
        lines += [f"- `{n.where()}`: `{n.text}`" for n in unread]
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
