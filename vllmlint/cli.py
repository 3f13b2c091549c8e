"""Command line: check | launches | migrate | rules | rule CODE.

Exit codes: 0 no finding remains, 1 findings remain, 2 usage error or a file that could not be
read or parsed (reported as `path:line: reason`; the other files are still checked).
"""
from __future__ import annotations

import json
import sys

import click

from . import __version__
from .discovery import discover
from .versions import parse_version

DEFAULT_TARGET = "0.30.0"


def _target(ctx, param, value):
    try:
        return parse_version(value)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


def _codes(values: tuple[str, ...]) -> list[str]:
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="vllmlint")
def main() -> None:
    """Lint and migrate vLLM deployment configs (Dockerfile, compose, Kubernetes, shell, Python)."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--fix", is_flag=True, help="Apply safe fixes in place.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes that change behaviour.")
@click.option("--select", multiple=True, help="Only these codes (or prefixes), comma-separated.")
@click.option("--ignore", multiple=True, help="Skip these codes (or prefixes), comma-separated.")
@click.option("--target-version", default=DEFAULT_TARGET, show_default=True, callback=_target,
              help="The vLLM release the configs must work with.")
@click.option("--topology", type=click.Path(exists=True, dir_okay=False),
              help="Output of `nvidia-smi topo -p2p r` or `nvidia-smi topo -m` for the GPU host (VL201).")
@click.option("--model-config", type=click.Path(exists=True),
              help="The model's config.json (or its folder), for KV size estimates (VL201).")
@click.option("--prompt-tokens", type=click.IntRange(min=1),
              help="Typical prompt length for KV size estimates (default: --max-model-len).")
def check(paths, fmt, fix, diff, unsafe_fixes, select, ignore, target_version, topology, model_config,
          prompt_tokens):
    """Check PATHS (default: the current folder)."""
    from .engine import check_and_fix
    from .registry import selected_rules
    from .report import render, unified_diff
    from .sources import encode, write_atomic

    candidates, missing = discover(list(paths) or ["."])
    options = {"topology": topology, "model_config": model_config, "prompt_tokens": prompt_tokens}
    rules = list(selected_rules(target_version, _codes(select), _codes(ignore), options))
    outcome = check_and_fix(candidates, rules, fix=fix or diff, unsafe=unsafe_fixes)
    errors = list(missing) + [str(p) for p in outcome.problems] + outcome.dropped
    if diff:
        for path, (orig, new) in sorted(outcome.changed().items(), key=lambda kv: kv[1][0].display):
            click.echo(unified_diff(orig.display, orig.text, new), nl=False)
    elif fix:
        errors += _write(outcome)
        if outcome.fixed:
            click.echo(f"Fixed {len(outcome.fixed)} finding(s) in {len(outcome.changed())} file(s).", err=True)
    findings = outcome.findings
    if not diff:
        out = render(findings, fmt)
        if out or fmt == "json":
            click.echo(out)
    for line in errors:
        click.echo(line, err=True)
    sys.exit(2 if errors else (1 if findings and not diff else 0))


def _write(outcome) -> list[str]:
    from .sources import encode, write_atomic

    errors = []
    for path, (orig, new) in outcome.changed().items():
        try:
            write_atomic(path, encode(orig, new))
        except OSError as err:
            errors.append(f"{orig.display}:0: not written: {err.strerror or err}")
    return errors


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def launches(paths, fmt):
    """List every vLLM launch found, with its argv and environment."""
    from .project import load
    from .report import launch_dict

    candidates, missing = discover(list(paths) or ["."])
    project = load(candidates)
    rows = [launch_dict(l) for l in project.launches]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
    else:
        for row in rows:
            env = " ".join(f"{k}={'?' if v is None else v}" for k, v in row["env"].items())
            click.echo(f"{row['path']}:{row['line']}: {row['kind']} ({row['context']}): "
                       f"{' '.join(row['argv'])}" + (f"  [env: {env}]" if env else ""))
    for line in list(missing) + [str(p) for p in project.problems]:
        click.echo(line, err=True)
    sys.exit(2 if missing or project.problems else 0)


@main.command("rules")
def list_rules():
    """List the rules."""
    from .registry import load_rules

    for code, cls in load_rules().items():
        click.echo(f"{code}  {cls.name:<40} {cls.severity:<8} fix:{cls.fix:<9} vLLM {cls.versions()}")


@main.command("rule")
@click.argument("code")
def show_rule(code):
    """Print the documentation of one rule."""
    from .registry import load_rules

    rules = load_rules()
    cls = rules.get(code.upper()) or next((c for c in rules.values() if c.name == code), None)
    if cls is None:
        raise click.UsageError(f"no rule {code!r}; see `vllmlint rules`")
    click.echo(f"# {cls.code} {cls.name}\n\nSeverity: {cls.severity}. Fix: {cls.fix}. "
               f"vLLM versions: {cls.versions()}.\n")
    click.echo(cls.doc())


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--to", "to_version", required=True, callback=_target, help="Target vLLM release, e.g. 0.30.0.")
@click.option("--diff", is_flag=True, help="Preview as a unified diff; write nothing.")
def migrate(paths, to_version, diff):
    """One-shot repo migration: every safe fix for the upgrade, image tags and pins bumped."""
    from .engine import check_and_fix
    from .migrate import find_bumps
    from .registry import selected_rules
    from .report import text_line, unified_diff
    from .versions import fmt

    candidates, missing = discover(list(paths) or ["."])
    rules = list(selected_rules(to_version))
    bumps_seen = []

    def post_edits(project):
        bumps = find_bumps(project, to_version)
        bumps_seen.extend(bumps)
        return [b.edit for b in bumps if b.edit]

    outcome = check_and_fix(candidates, rules, fix=True, post_edits=post_edits)
    errors = list(missing) + [str(p) for p in outcome.problems] + outcome.dropped
    changed = outcome.changed()
    if diff:
        for path, (orig, new) in sorted(changed.items(), key=lambda kv: kv[1][0].display):
            click.echo(unified_diff(orig.display, orig.text, new), nl=False)
    else:
        errors += _write(outcome)
    verb = "would change" if diff else "changed"
    click.echo(f"\nMigration to vLLM {fmt(to_version)}: {verb} {len(changed)} file(s).", err=diff)
    say = (lambda s: click.echo(s, err=True)) if diff else click.echo
    for b in bumps_seen:
        if b.edit:
            say(f"  {b.file.display}:{b.line}: {b.what} {b.old} -> {b.new}")
    for f in outcome.fixed:
        line, _ = f.line_col
        say(f"  {f.file.display}:{line}: fixed {f.code} {f.name}")
    left = [b for b in bumps_seen if not b.edit]
    if outcome.findings or left:
        say(f"Left for a human ({len(outcome.findings) + len(left)}):")
        for b in left:
            say(f"  {b.file.display}:{b.line}: {b.what} {b.old}: {b.why_not}")
        for f in outcome.findings:
            say("  " + text_line(f))
    for line in errors:
        click.echo(line, err=True)
    sys.exit(2 if errors else (1 if outcome.findings or left else 0))


if __name__ == "__main__":   # pragma: no cover
    main()
