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
