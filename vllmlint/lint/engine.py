"""Run the rules over a project, and apply their fixes until nothing changes.

Fixes are span edits. Each pass applies the fixes whose edits do not overlap, re-parses every
changed file (a fix whose result does not parse is dropped and reported), and reloads; a second
run therefore has nothing left to do.
"""
from __future__ import annotations

from ..model.record import field, record
from pathlib import Path

from .discovery import Candidate
from ..model.launch import OPTIONS_FILE_KIND, Edit, Finding, ParseError, SourceFile, apply_edits
from .project import ParseCache, Problem, Project, load, parse_source
from .registry import Rule

MAX_PASSES = 8


@record
class Outcome:
    findings: list[Finding]                     # what remains
    problems: list[Problem]
    project: Project
    originals: dict[Path, SourceFile] = field(default_factory=dict)
    texts: dict[Path, str] = field(default_factory=dict)           # new text per changed file
    fixed: list[Finding] = field(default_factory=list)             # findings whose fix was applied
    dropped: list[str] = field(default_factory=list)               # fixes refused, with why
    suppressed: list = field(default_factory=list)                 # suppress.Suppressed, with reasons

    def changed(self) -> dict[Path, tuple[SourceFile, str]]:
        return {p: (self.originals[p], t) for p, t in self.texts.items()
                if p in self.originals and t != self.originals[p].text}


def gate_fixes_by_release(findings: list[Finding], assumed: tuple[int, int, int] | None = None) -> None:
    """A fix never changes what the deployed release does today. Each release-dependent fix
    states the first release on which it keeps behaviour (`fix.min_release`); it is applied only
    when every launch it changes runs a known release from there on. A launch on an older
    release leaves the fix to `migrate` (which bumps the tag or pin in the same edit set); a
    launch whose release is unknown, or a build whose tags are not vLLM's, keeps its config and
    the finding says how to tell vllmlint the release. `assumed`: the release the user named
    (`--target-version`, `target-version` in the settings) for launches whose release nothing
    in the tree says and that run no image of their own that names none."""
    from ..knowledge.versions import fmt
    from .releases import unbumped_pin

    for f in findings:
        fix = f.fix
        if fix is None or fix.min_release is None:
            continue
        older = [l for l in fix.launches if l.release is not None and l.release < fix.min_release]
        unnamed = [l for l in fix.launches if l.release is None and l.release_unnamed]
        unknown = [l for l in fix.launches if l.release is None and not l.release_unnamed]
        if unnamed and not older:
            launch = unnamed[0]
            f.fix, f.fixable = None, False
            f.message += " (not fixed: the launch's image tag names no vLLM release)"
            f.detail = _join(f.detail, f"{launch.release_unnamed[0].upper()}{launch.release_unnamed[1:]}, so "
                                       f"vllmlint cannot tell whether the fixed config works on what runs today "
                                       f"(it needs {fmt(fix.min_release)}); fix it when you move to a tagged release.")
            continue
        if older and older[0].release_linked:
            # a release linked from another file (the image of a Dockerfile that copies the
            # script): migrate holds these fixes, so the way is by hand (found as a user on
            # hommayushi3/vllm-huggingface, where this said "fix with `vllmlint migrate`")
            launch = older[0]
            f.fix, f.fixable = None, False
            f.message += f" (runs {fmt(launch.release)} today, set in a file it is linked to: upgrade that first)"
            f.detail = _join(f.detail, f"Its release is the {launch.release_from}, which `vllmlint migrate` "
                                       f"does not bump for this launch: bump it to {fmt(fix.min_release)} or "
                                       f"later by hand, then `vllmlint check --fix`.")
            continue
        if older and unbumped_pin(older[0]):
            launch = older[0]          # a pin migrate does not bump (releases.unbumped_pin)
            relock = " and re-lock" if launch.release_pin == "pyproject" else ""
            f.fix, f.fixable = None, False
            f.message += (f" (runs {fmt(launch.release)} today, the {launch.release_from}: bump it to "
                          f"{fmt(fix.min_release)} or later{relock}, then `vllmlint check --fix`)")
            continue
        if older:
            launch = older[0]
            f.fix, f.fixable, f.withheld = None, False, f"migrate {fmt(fix.min_release)}"
            f.message += f" (runs {fmt(launch.release)} today: fix with `vllmlint migrate --to {fmt(fix.min_release)}`)"
            f.detail = _join(f.detail, f"The launch runs vLLM {fmt(launch.release)} today ({launch.release_from}); "
                                       f"the fixed config needs {fmt(fix.min_release)}, so the fix belongs to the "
                                       f"upgrade, which bumps the tag or pin in the same edit set.")
            continue
        if unknown and not (assumed is not None and assumed >= fix.min_release):
            launch = unknown[0]
            f.fix, f.fixable = None, False
            f.message += " (not fixed: its vLLM release is unknown)"
            f.detail = _join(f.detail, f"Nothing in the tree says which vLLM release {launch.context} "
                                       f"({launch.file.display}:{launch.line}) runs, and the fix keeps behaviour "
                                       f"only from {fmt(fix.min_release)} on. Tell vllmlint: "
                                       f"`# vllmlint: release=X.Y.Z` in {launch.file.display}, or "
                                       f"`[tool.vllmlint.releases]` \"{launch.file.display}\" = \"X.Y.Z\" in the "
                                       f"settings, or name the release the configs run with --target-version.")


def hold_fixes(findings: list[Finding], hold) -> None:
    """Withhold each release-dependent fix that changes a launch `hold(launch)` gives a reason
    for (migrate: its vLLM pin is not bumped, so its config stays for the release it keeps)."""
    for f in findings:
        fix = f.fix
        if fix is None or fix.min_release is None:
            continue
        reasons = [r for l in fix.launches if (r := hold(l))]
        if reasons:
            f.fix, f.fixable = None, False
            f.message += " (not fixed: its vLLM pin is not bumped, see the blocker)"
            f.detail = _join(f.detail, reasons[0])


def hold_test_data(findings: list[Finding], code_rules: set = frozenset()) -> None:
    """No fix is written into Python test code (model.launch.is_test_code): a command there is
    mostly data, a fixture's string or an expected value, and editing it leaves the code that
    builds the real command as it was (found on Tandemn-Labs/tandemn-tuna: `migrate` removed a
    flag from four tests' fixtures and not from the template the provider renders). Reported,
    not fixed, except by a rule whose fixes edit code that runs (`Rule.fixes_code`: VL306's
    imports); the release gates and image bumps keep test code out too."""
    from .sources import is_test_code

    for f in findings:
        fix = f.fix
        if fix is None or f.code in code_rules or not any(is_test_code(e.file) for e in fix.edits):
            continue
        f.fix, f.fixable = None, False
        f.message += " (not fixed: Python test code)"
        f.detail = _join(f.detail, "A command in Python test code is usually data a test asserts on or passes to "
                                   "the code under test; fix the code that builds the command, and this by hand "
                                   "if the test starts vLLM itself.")


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def analyse(project: Project, rules: list[Rule], unsafe: bool = False, settings=None, gate: bool = False):
    """Findings after suppressions and severity overrides; the suppressed ones with reasons.
    `gate`: withhold fixes that need a newer release than their launch runs (check, not migrate);
    a callable `hold(launch) -> reason`: withhold the fixes of the launches it names (migrate)."""
    from . import suppress

    if settings is not None:
        from .release_links import declare

        declare(project, settings)          # [tool.vllmlint.releases]: what the user says each path runs
    findings, problems = run_rules(project, [r for r in rules if not getattr(r, "post", False)], unsafe)
    if callable(gate):          # migrate's own gate (migrate.hold_back: blocked environments, launches left behind)
        gate(project, findings)
    elif gate:
        explicit = settings is not None and getattr(settings, "target_explicit", False) and rules
        gate_fixes_by_release(findings, tuple(rules[0].target) if explicit else None)
    if gate:
        hold_test_data(findings, {r.code for r in rules if getattr(r, "fixes_code", False)})
    if project.charts:          # a fix in a chart's values must render as exactly that change
        from ..parsers.helm import verify_fixes
        verify_fixes(project.charts, findings)
    dirs = project.__dict__.get("_directives")
    if dirs is None:
        dirs = [d for source in project.sources for d in suppress.directives(source)]
        if project.keep_derived:        # the next step of a migration reads the same texts
            project._directives = dirs
    for d in dirs:
        d.used.clear()                  # which codes each one suppressed: this run's answer
    ranges = [(pf.source, *r) for pf in project.files for r in pf.ignore_ranges]
    per_file = (lambda f: settings.ignored_codes(f.file.display, f.file.path)) if settings else (lambda f: [])
    kept, suppressed = suppress.apply(findings, dirs, ranges, per_file)
    ran = {r.code for r in rules}
    for rule in rules:
        if getattr(rule, "post", False):
            kept.extend(rule.check_directives(dirs, ran))
    if settings is not None:
        for f in kept:
            f.severity = settings.severity.get(f.code, f.severity)
    return sorted(kept, key=Finding.sort_key), suppressed, problems


def run_rules(project: Project, rules: list[Rule], unsafe: bool = False) -> tuple[list[Finding], list[Problem]]:
    findings: list[Finding] = []
    problems: list[Problem] = []
    from ..knowledge.catalogue.argv import forget_options

    try:
        for rule in rules:
            done = project.from_workers.pop((rule.code, tuple(rule.target)), None)
            if done is not None:            # a per_launch rule the parse workers ran
                findings.extend(done)
                continue
            try:
                findings.extend(rule.check(project))
            except Exception as err:   # a rule bug must not hide the other rules' findings
                import traceback            # here: only a rule that crashed needs it
                where = traceback.extract_tb(err.__traceback__)[-1]
                problems.append(Problem("vllmlint", 0, f"internal error in {rule.code}: {err!r} "
                                        f"at {Path(where.filename).name}:{where.lineno}"))
    finally:
        forget_options()       # the rules share each launch's options; the next project has others
        if not project.keep_derived:
            project.__dict__.pop("_graph", None)        # graph_of's, for this run's rules
    from .report import mask_secrets, secret_values

    secrets = project.__dict__.get("_secrets")
    if secrets is None:
        secrets = secret_values(project)      # a message never shows a token, key or password
        if project.keep_derived:
            project._secrets = secrets
    masked = project.__dict__.setdefault("_masked", {}) if project.keep_derived else {}
    for f in findings:      # (the same messages come back at every step of a migration)
        for attr in ("message", "detail"):
            text = getattr(f, attr)
            safe = masked.get(text)
            if safe is None:
                safe = masked[text] = mask_secrets(text, secrets)
            setattr(f, attr, safe)
    seen, unique = set(), []
    for f in sorted(findings, key=Finding.sort_key):
        if f.fix is not None and any(e.file.kind == OPTIONS_FILE_KIND for e in f.fix.edits):
            # an option read from a launch's `--config` file (parsers.options_file): that file is
            # read for the launch, and a fix there is for a human (keys, not flags, are written)
            f.fix, f.fixable = None, False
            f.message += " (no automatic fix in a `--config` file)"
        if f.fix is not None and f.fix.applicability == "unsafe" and not unsafe:
            f.fix, f.fixable, f.withheld = None, False, "unsafe"     # not fixable unless --unsafe-fixes
        key = (f.code, f.file.display, f.span, f.message)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique, problems


def _keep_no_final_newline(text: str, edits: list[Edit]) -> list[Edit]:
    """A file without a final line break keeps none: removing its last line removes the line
    break before it too."""
    if text.endswith(("\n", "\r")):
        return edits
    out = []
    for e in edits:
        if e.end == len(text) and not e.text and e.start > 0 and text[e.start - 1] == "\n":
            start = e.start - (2 if text[e.start - 2:e.start] == "\r\n" else 1)
            if not any(o is not e and o.start < e.start and o.end > start for o in edits):
                e = Edit(e.file, start, e.end, "")
        out.append(e)
    return out


def _choose(findings: list[Finding], refused: set) -> list[Finding]:
    """Fixes of one pass: no two touch overlapping spans of a file."""
    taken: dict[Path, list[tuple[int, int, tuple]]] = {}
    chosen = []
    for finding in findings:
        fix = finding.fix
        if fix is None or _fix_key(finding) in refused:
            continue
        ok = True
        for edit in fix.edits:
            for start, end, key in taken.get(edit.file.path, []):
                if key == edit.key():
                    continue
                if start < edit.end and edit.start < end or (start == end == edit.start == edit.end):
                    ok = False
                # an insertion at the edge of a removal: `[a]` -> `[]` and `[a, b]` -> `[, b]`
                if (start == end and edit.start <= start <= edit.end and edit.start < edit.end) or \
                        (edit.start == edit.end and start <= edit.start <= end and start < end):
                    ok = False
        if ok:
            chosen.append(finding)
            for edit in fix.edits:
                taken.setdefault(edit.file.path, []).append((edit.start, edit.end, edit.key()))
    return chosen


def _fix_key(finding: Finding) -> tuple:
    return (finding.code, finding.file.display, finding.span, finding.message)


def check_and_fix(candidates: list[Candidate], rules: list[Rule], fix: bool,
                  post_edits=None, unsafe: bool = False, settings=None, cache: ParseCache | None = None,
                  gate: bool = True, extra_images: tuple[str, ...] = (),
                  buffers: dict[Path, str] | None = None, helm_values: dict | None = None,
                  start: Project | None = None, keep_derived: bool = False) -> Outcome:
    """`post_edits(project) -> list[Edit]`: extra edits applied once rules converge (migrate).
    `cache`: parsed files to reuse (a migrate chain shares one across its steps); each pass
    re-parses only the files the previous pass changed. `gate`: see gate_fixes_by_release
    (off for migrate, whose tag and pin bumps go with its fixes). `buffers`: text to read in
    place of a file's on disk (an editor's unsaved buffers, `vllmlint server`); a fix is computed
    on, and its original is, the buffer. `start`: the project as the previous step of a migrate
    chain left it (its texts are this run's, unchanged): the first pass checks it without
    re-reading the tree. `keep_derived`: keep each pass's derived data (see Project) for that."""
    cache = cache if cache is not None else ParseCache()
    buffers = dict(buffers or {})
    overrides: dict[Path, str] = dict(buffers)
    originals: dict[Path, SourceFile] = {}
    fixed: list[Finding] = []
    dropped: list[str] = []
    refused: set = set()
    refused_why: dict = {}          # _fix_key -> why its result would not parse
    post_done = post_edits is None
    project = None
    for _ in range(MAX_PASSES):
        if start is not None:
            project, start = start, None
        else:
            _drop_graph(project)
            project = load(candidates, overrides, cache, extra_images, helm_values, rules)
            project.keep_derived = keep_derived
        findings, suppressed, problems = analyse(project, rules, unsafe, settings, gate)
        if not fix:
            return Outcome(findings, project.problems + problems, project, suppressed=suppressed)
        chosen = _choose(findings, refused)
        edits: list[Edit] = [e for f in chosen for e in f.fix.edits]
        if not chosen and not post_done:
            edits = post_edits(project)
            post_done = True
        if not edits:      # converged: this pass's findings are the answer
            _say_refused(findings, refused_why)
            return Outcome(findings, project.problems + problems, project, originals, overrides, fixed, dropped,
                           suppressed)
        parsed_now = {pf.source.path: pf for pf in project.files}
        bad_files = _write_pass(edits, chosen, overrides, originals, buffers, parsed_now, cache, dropped)
        for finding in chosen:
            if any(e.file.path in bad_files for e in finding.fix.edits):
                refused.add(_fix_key(finding))
                refused_why[_fix_key(finding)] = next(bad_files[e.file.path] for e in finding.fix.edits
                                                      if e.file.path in bad_files)
            else:
                fixed.append(finding)
    _drop_graph(project)
    project = load(candidates, overrides, cache, extra_images, helm_values, rules)
    project.keep_derived = keep_derived
    findings, suppressed, problems = analyse(project, rules, unsafe, settings, gate)
    _say_refused(findings, refused_why)
    return Outcome(findings, project.problems + problems, project, originals, overrides, fixed, dropped,
                   suppressed)


def _write_pass(edits: list[Edit], chosen: list[Finding], overrides: dict, originals: dict, buffers: dict,
                parsed_now: dict, cache: ParseCache, dropped: list[str]) -> dict[Path, str]:
    """Apply one pass's edits file by file into `overrides`; the files whose result would not
    parse, with why. A fix is written whole or not at all: when one file of a fix that edits
    several (a variable removed from a compose override, its flag added to the compose file)
    would not parse, that fix's edits in the other files are withdrawn too, and those files
    are checked again without them."""
    withdrawn: set = set()
    bad_files: dict[Path, str] = {}
    checked: dict[Path, tuple[frozenset, str]] = {}         # path -> (edit keys, the text they make)
    while True:
        pass_edits = [e for f in chosen if _fix_key(f) not in withdrawn for e in f.fix.edits] if chosen else edits
        by_file: dict[Path, list[Edit]] = {}
        for edit in pass_edits:
            by_file.setdefault(edit.file.path, [])
            if edit.key() not in {e.key() for e in by_file[edit.file.path]}:
                by_file[edit.file.path].append(edit)
        for path, file_edits in by_file.items():
            keys = frozenset(e.key() for e in file_edits)
            if path in bad_files or (path in checked and checked[path][0] == keys):
                continue
            source = file_edits[0].file
            if path not in originals:      # (re-reading it now could fail: it may be gone)
                originals[path] = _pristine(source, overrides, buffers)
            new_text = apply_edits(source.text, _keep_no_final_newline(source.text, file_edits))
            reason = _reparse_error(source, new_text, parsed_now.get(path), cache)
            if reason:
                bad_files[path] = reason
                dropped.append(f"{source.display}: fix not applied, the result would not parse ({reason})")
                continue
            checked[path] = (keys, new_text)
        torn = {_fix_key(f) for f in chosen if _fix_key(f) not in withdrawn
                and any(e.file.path in bad_files for e in f.fix.edits)}
        if not torn:
            break
        withdrawn |= torn
    for path in by_file:
        if path not in bad_files:
            overrides[path] = checked[path][1]
    return bad_files


def _say_refused(findings: list[Finding], refused_why: dict) -> None:
    """A finding whose fix was not written because the result would not parse says so."""
    for f in findings:
        why = refused_why.get(_fix_key(f)) if f.fix is not None else None
        if why:
            f.fix, f.fixable = None, False
            f.message += f" (not fixed: the result would not parse: {why})"


def _drop_graph(project: Project | None) -> None:
    """A pass's project that the next pass replaces: its graph (kept for a migration's next
    step) refers back to it, a cycle the collector, off for lint commands, would never free."""
    if project is not None:
        project.__dict__.pop("_graph", None)


def _pristine(source: SourceFile, overrides: dict[Path, str], buffers: dict[Path, str]) -> SourceFile:
    if source.path not in overrides:
        return SourceFile(source.path, source.display, source.text, source.kind, source.bom)
    if source.path in buffers:
        return SourceFile(source.path, source.display, buffers[source.path], source.kind, source.bom)
    from .sources import read_source
    return read_source(source.path, source.display, source.kind)


def _reparse_error(source: SourceFile, text: str, before, cache: ParseCache) -> str | None:
    """Why the fixed text is worse than the original (`before`, as parsed this pass): it no
    longer parses, or a `--kv-transfer-config` JSON value that parsed before no longer does.
    What parses is kept in `cache`, so the next pass does not parse it again."""
    probe = SourceFile(source.path, source.display, text, source.kind, source.bom)
    try:
        after = parse_source(probe)
    except ParseError as err:
        return f"line {err.line}: {err.reason}"
    except Exception as err:     # a parser bug on the result: never write what we cannot read back
        return f"cannot be read back ({type(err).__name__})"
    if after is not None and before is not None and _bad_json(after) > _bad_json(before):
        return "a --kv-transfer-config value would no longer be valid JSON"
    from .parseback import native_error

    # its own language's parser too (cache.native: the answers a migrate chain keeps per path)
    native = native_error(source.kind, source.path, source.text, text, getattr(cache, "native", None),
                          after.scripts if after is not None else None)
    if native:
        return native
    if after is not None:
        cache.put(probe, after)
    return None


def _bad_json(parsed) -> int:
    from ..model.kvconfig import kv_config

    return sum(1 for launch in parsed.launches if (cfg := kv_config(launch)) is not None and cfg.error)
