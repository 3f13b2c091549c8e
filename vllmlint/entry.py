"""The `vllmlint` command. `vllmlint check [FLAGS] PATH...` with only the flags below, the call
pre-commit and editors make on every commit or save, runs the check without importing click
(about a quarter of the start-up: bench/results.md); anything else, and any usage error, goes to
the click command line (vllmlint.cli), which words it exactly as always.
"""
from __future__ import annotations

import sys

# check's flags that take no value, by the keyword run_check names them
FAST_FLAGS = {
    "--fix": "fix", "--diff": "diff", "--unsafe-fixes": "unsafe_fixes", "--force-exclude": "force_exclude",
    "--exit-zero": "exit_zero", "--exit-non-zero-on-fix": "exit_non_zero_on_fix", "--statistics": "show_statistics",
    "-q": "quiet", "--quiet": "quiet", "--show-details": "show_details", "-v": "verbose", "--verbose": "verbose",
}


def fast_check_args(argv: list[str]) -> dict | None:
    """run_check's keywords for `check FLAG... PATH...`, or None when click must read argv (an
    option with a value, `-` for stdin, `--`, help, an unknown flag)."""
    if not argv or argv[0] != "check":
        return None
    kwargs: dict = {}
    paths = []
    for arg in argv[1:]:
        if arg in FAST_FLAGS:
            kwargs[FAST_FLAGS[arg]] = True
        elif arg.startswith("-"):
            return None
        else:
            paths.append(arg)
    kwargs["paths"] = tuple(paths)
    return kwargs


def main() -> None:
    """Every command, quiet when the reader of its output goes away (`vllmlint check . | head -1`):
    on a broken pipe, stdout (and stderr, which may be the same pipe) point at devnull so that
    nothing more is written or flushed, and the exit code is 1, as click's own EPIPE handling and
    the recipe of https://docs.python.org/3/library/signal.html#note-on-sigpipe have it."""
    try:
        try:
            run()
        finally:
            sys.stdout.flush()     # what is left in the buffer breaks here, not at interpreter exit
    except BrokenPipeError:
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(devnull, stream.fileno())
            except (AttributeError, OSError, ValueError):    # replaced or closed: nothing to flush there
                pass
        sys.exit(1)


def run() -> None:
    kwargs = fast_check_args(sys.argv[1:])
    if kwargs is not None:
        import gc

        from .lint.checkrun import UsageError, run_check

        gc.disable()               # as the click group does for lint commands
        try:
            code = run_check(**kwargs)
        except UsageError:
            code = None            # click words it, with the usage line
        if code is not None:
            sys.exit(code)
    from .cli import main as click_main

    click_main()
