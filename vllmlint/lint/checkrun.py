"""`vllmlint check` as a plain function: the command line calls it through click, and the
fast entry point (vllmlint.entry) calls it without importing click at all, for the common
`vllmlint check [--fix] FILE...` that pre-commit runs once per commit.

Usage errors raise UsageError (the callers word them); output goes through `echo`.
"""
from __future__ import annotations

import json
import sys

from .discovery import discover


class UsageError(Exception):
    """A usage error: `hint` names the option (click words it as a BadParameter)."""

    def __init__(self, message: str, hint: str | None = None, settings: bool = False):
        super().__init__(message)
        self.hint = hint
        self.settings = settings       # an error in the settings file: worded `file:line: why`, no usage line


def echo(text: str = "", err: bool = False, nl: bool = True) -> None:
    """click.echo's plain case, without importing click."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + ("\n" if nl else ""))
    stream.flush()


def run_check(paths=(), fmt="text", fix=False, diff=False, unsafe_fixes=False, select=(), ignore=(),
              target_version=None, topology=None, model_config=None, prompt_tokens=None, config_file=None,
              force_exclude=False, baseline=None, write_baseline=None, show_settings=False, exit_zero=False,
              exit_non_zero_on_fix=False, fail_level=None, show_statistics=False, quiet=False,
              stdin_filename=None, show_details=False, verbose=False, values_files=(), color="auto") -> int:
    """Check PATHS (default: the current folder; `-`: one file from stdin); the exit code.
    The defaults are the command line's (tests/test_entry.py compares them)."""
    from pathlib import Path

    from .config import ConfigError, load_settings
    from .engine import check_and_fix
    from .registry import selected_rules
    from .report import (STATISTICS_FORMATS, count_errors, failing, plural, problem_line, render,
                         render_statistics, run_error, summary, unified_diff, use_color)

    if show_statistics and fmt not in STATISTICS_FORMATS:
        raise UsageError(f"--statistics counts findings per rule as text or json, not {fmt}", hint="'--format'")
    try:
        settings = load_settings(Path.cwd(), config_file)
    except ConfigError as err:
        raise UsageError(str(err), settings=True) from None
    check_codes(split_codes(select), "--select")
    check_codes(split_codes(ignore), "--ignore")
    settings.select = split_codes(select) or settings.select
    settings.ignore = split_codes(ignore) + settings.ignore
    fail_level = fail_level or settings.fail_level
    added_dir = catalogue_folder(settings)
    added = None
    if target_version is None:
        # the settings' target is checked like --target-version: a release that is not catalogued
        # (0.99.0, 0.5.0) would otherwise turn rules off without a word
        from ..knowledge.catalogue import resolve

        try:
            target_version, added = resolve(settings.target_version.strip(), added_dir)
        except ValueError as err:
            raise UsageError(f"{settings.where('target-version')}: target-version: {err}", settings=True) from None
        if added is None:
            settings.target_version = ".".join(map(str, target_version))
    else:
        target_version, added = resolve_target(target_version, "'--target-version'", added_dir)
        settings.target_version = added.name if added is not None else ".".join(map(str, target_version))
        settings.target_explicit = True
    use_catalogue(added)
    settings.topology = topology or settings.topology
    settings.model_config = model_config or settings.model_config
    settings.prompt_tokens = prompt_tokens or settings.prompt_tokens
    if settings.topology:         # a bad topology file is a usage error, not an internal one in VL201
        from ..knowledge.topology import parse_topology
        try:
            parse_topology(Path(settings.topology).read_text())
        except (OSError, ValueError) as err:
            raise UsageError(f"--topology {settings.topology}: {err}") from None
    if show_settings:
        echo(json.dumps(settings.as_dict(), indent=2))
        return 0

    if verbose:
        show_engine_log()
    stdin = "-" in paths
    if stdin:
        if len(paths) > 1:
            raise UsageError("`-` (stdin) is checked on its own: name no other PATH with it")
        candidates, missing, tmp, raw_stdin = stdin_candidate(stdin_filename)
        helm_values = {}
    else:
        if stdin_filename:
            raise UsageError("--stdin-filename goes with `-` as PATH")
        helm_values = settings.chart_values(values_files)
        candidates, missing = discover((list(paths) or ["."]) + values_paths(helm_values, paths))
        candidates = [c for c in candidates
                      if not (settings.exclude and (force_exclude or not c.explicit)
                              and settings.excluded(c.display, c.path))]
    if not candidates and not missing:
        echo(f"warning: no vLLM config found in {' '.join(paths) or '.'}", err=True)
    options = {"topology": settings.topology, "model_config": settings.model_config,
               "prompt_tokens": settings.prompt_tokens,
               # unsafe fixes are only counted unless --unsafe-fixes (rules/vl302: its fold is
               # read back only where it is applied or shown)
               "unsafe_fixes_counted_only": not unsafe_fixes,
               # the target was named, not the default: rules/vl308 then checks values against it
               "target_explicit": settings.target_explicit}
    rules = list(selected_rules(target_version, settings.select, settings.ignore, options))
    try:
        outcome = check_and_fix(candidates, rules, fix=fix or diff, unsafe=unsafe_fixes, settings=settings,
                                helm_values=helm_values)
    finally:
        if stdin:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    problems = failing_problems(outcome.problems, verbose)
    # every error of the run, worded as a finding (`path:line:col: E000 error: ...`) in every format
    errors = [run_error(m) for m in missing] + problems + [run_error(d) for d in outcome.dropped]
    note = (lambda s: None) if quiet else (lambda s: echo(s, err=True))
    for line in file_notes(outcome.project, verbose):
        note(line)
    report_err = False             # findings go to stderr: stdout holds the fixed file (stdin --fix)
    changed = outcome.changed()
    if diff:
        for path, (orig, new) in sorted(changed.items(), key=lambda kv: kv[1][0].display):
            echo(unified_diff(orig.display, orig.text, new, orig.bom), nl=False)
        if outcome.fixed:
            note(f"Would fix {plural(len(outcome.fixed), 'finding')} in {plural(len(changed), 'file')}.")
    elif fix and stdin:
        from .sources import encode

        if candidates:
            [cand] = candidates
            orig, new = changed.get(cand.path, (None, None))
            sys.stdout.flush()
            sys.stdout.buffer.write(encode(orig, new) if orig is not None else raw_stdin)
            sys.stdout.buffer.flush()
        report_err = True
    elif fix:
        errors += [run_error(e) for e in write_fixes(outcome)]
        if outcome.fixed:
            note(f"Fixed {plural(len(outcome.fixed), 'finding')} in {plural(len(changed), 'file')}.")
    findings = outcome.findings
    if write_baseline:
        from .baseline import write

        write(Path(write_baseline), findings)
        note(f"Wrote {plural(len(findings), 'finding')} to {write_baseline}.")
        findings = []
    elif baseline:
        from .baseline import new_findings, read

        try:
            findings = new_findings(findings, read(Path(baseline)))
        except ValueError as err:
            raise UsageError(str(err)) from None
    unreadable, unwritten = count_errors(errors)
    for e in errors:               # before the summary, which counts them
        echo(problem_line(e), err=True)
    if not diff:
        out_stream = sys.stderr if report_err else sys.stdout
        if show_statistics:
            out = render_statistics(findings, fmt)
        else:
            out = render(findings, fmt, rules=rules, suppressed=outcome.suppressed,
                         color=fmt == "text" and use_color(color, out_stream), problems=errors,
                         details=show_details)
        if out or fmt in ("json", "sarif", "gitlab"):
            echo(out, err=report_err)
        if fmt == "text" and not quiet and (candidates or errors):
            echo(summary(findings, len(outcome.fixed) if fix else None, unreadable=unreadable,
                         unsafe_fixes=unsafe_fixes, unwritten=unwritten), err=report_err)
    elif unreadable:
        note(f"{plural(unreadable, 'file')} could not be read.")
    if errors:
        return 2
    if exit_zero:
        return 0
    if diff:
        return 1 if changed else 0
    if exit_non_zero_on_fix and fix and outcome.fixed:
        return 1
    return 1 if failing(findings, fail_level) else 0


def show_engine_log() -> None:
    """-v: the Helm SDK's own log lines reach stderr (held back otherwise: parsers.helm)."""
    from ..parsers import helm

    helm.SHOW_ENGINE_LOG = True


def catalogue_folder(settings=None):
    """The folder of added releases: $VLLMLINT_CATALOGUE_DIR, the settings' catalogue-dir, the cache."""
    from pathlib import Path

    from ..knowledge.catalogue import folder
    from .config import ConfigError, load_settings

    if settings is None:
        try:
            settings = load_settings(Path.cwd())
        except ConfigError:
            settings = None
    return folder(settings.catalogue_dir if settings is not None else None)


def resolve_target(value: str, param_hint: str, added_dir):
    """A catalogued release, `latest` (the newest built-in one) or the name of an added release
    -> (release number, the added catalogue or None); anything else is a usage error."""
    from ..knowledge.catalogue import resolve

    try:
        return resolve(value, added_dir)
    except ValueError as err:
        raise UsageError(str(err), hint=param_hint) from None


def use_catalogue(cat) -> None:
    """Rules read the added release `cat` as the target's catalogue (None: the built-in ones)."""
    from ..knowledge.catalogue import use

    use(cat)


def split_codes(values: tuple[str, ...]) -> list[str]:
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


def failing_problems(problems, verbose: bool) -> list:
    """The problems that fail the run: files that concern vLLM and could not be read. A file
    that never mentions vLLM (a Terraform `*.tpl`, a sample YAML full of `{{ }}`) is skipped and
    listed only with --verbose, so one stray template does not turn a clean repository's CI red."""
    if verbose:
        for p in problems:
            if not p.concerns_vllm:
                echo(f"{p} (skipped: it never mentions vLLM)", err=True)
    return [p for p in problems if p.concerns_vllm]


def check_codes(codes: list[str], option: str) -> None:
    """Every code or prefix names at least one rule (or is ALL): a typo is a usage error."""
    from .registry import load_rules

    known = list(load_rules())
    bad = [c for c in codes if c.upper() != "ALL" and not any(k.startswith(c.upper()) for k in known)]
    if bad:
        raise UsageError(f"{option}: unknown rule code or prefix {', '.join(map(repr, bad))}; "
                               f"see `vllmlint rules`")


def values_paths(helm_values: dict, paths) -> list[str]:
    """Values files to read with the run (so that fixes in them are written): `--values` files,
    and the setting's files of charts inside PATHS."""
    from pathlib import Path

    import os

    roots = [Path(p).absolute() for p in (list(paths) or ["."])]
    out = []
    for chart, files in helm_values.items():
        if chart is None or any(chart == r or chart.is_relative_to(r) for r in roots):
            out += [os.path.relpath(f) if f.is_relative_to(Path.cwd()) else str(f) for f in files if f.exists()]
    return out


def file_notes(project, verbose: bool) -> list[str]:
    """How files were read, for the user: with --verbose every note; without it, only that a
    Helm chart was not rendered (an info note: its templates were read masked)."""
    out = []
    for pf in project.files:
        for n in pf.notes:
            chart = pf.source.path.name == "Chart.yaml"
            if verbose or (chart and (n.startswith("Helm chart not rendered") or " failed:" in n)):
                out.append(f"{'info' if chart else 'note'}: {pf.source.display}: {n}")
    return out


def stdin_candidate(name: str | None):
    """The file read from stdin as a candidate: written to a private temporary folder under
    its --stdin-filename (which decides its kind), reported under that name."""
    import tempfile
    from pathlib import Path

    from .discovery import Candidate, MAX_SNIFF, classify

    raw = sys.stdin.buffer.read()
    base = Path(name).name if name else "stdin"
    kind = classify(Path(base), raw[:MAX_SNIFF])
    if kind is None:
        raise UsageError("cannot tell what kind of file stdin holds: name it with --stdin-filename "
                               "(e.g. compose.yaml, Dockerfile, launch.sh)")
    tmp = Path(tempfile.mkdtemp(prefix="vllmlint-stdin-"))
    path = tmp / base
    path.write_bytes(raw)
    return [Candidate(path, name or "-", kind, explicit=True)], [], tmp, raw


def write_fixes(outcome) -> list[str]:
    from .sources import encode, write_atomic

    errors = []
    for path, (orig, new) in outcome.changed().items():
        try:
            # expect: the bytes the fix was computed on; a file changed meanwhile is left alone
            write_atomic(path, encode(orig, new), expect=encode(orig, orig.text))
        except OSError as err:
            errors.append(f"{orig.display}:0: not written: {err.strerror or err}")
    return errors
