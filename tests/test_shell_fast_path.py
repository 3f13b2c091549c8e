"""The shell path's shortcuts against the readings they replaced (issue 34, item 2).

Each shortcut keeps its reference here (or behind a switch in the code) and is compared with it,
byte for byte, on fixtures/, small generated corpora, ../shared/corpus/files and ../shared/redteam.
"""
from __future__ import annotations

import random
import re

import pytest

from vllmlint.parsers.shellscan import only_statement

_OPENS_BODY_RE = re.compile(r"(?:^|[\s;&|])(?:then|else|do|\{)$")
_CLOSES_BODY_RE = re.compile(r"(?:fi|else|elif|done|\})(?:$|[\s;&|)])")


def only_statement_reference(text: str, start: int, end: int) -> bool:
    """only_statement as it read before: the whole text split into lines at every call."""
    def strip(lines):
        return [l for l in lines if l.strip() and not l.strip().startswith("#")]

    before = strip(text[:start].splitlines())
    after = strip(text[end:].splitlines())
    head = before[-1].rstrip() if before else ""
    head = head.rstrip(";").rstrip() if head.rstrip().endswith(";") and not head.rstrip().endswith(";;") else head
    if not _OPENS_BODY_RE.search(head):
        return False
    tail = text[end:].lstrip(" \t;") if text[end:].lstrip(" \t").startswith(";") else None
    nxt = (tail.splitlines()[0].strip() if tail and tail.splitlines() and tail.splitlines()[0].strip()
           else (after[0].strip() if after else ""))
    return bool(_CLOSES_BODY_RE.match(nxt))


PIECES = ["if true; then", "then", "else", "do", "{", "}", "fi", "done", "elif x; then", "  ", "\t", ";", ";;",
          "\n", "\r\n", "\r", "\x0b", "\x85", "\u2028", "# c", "#", "echo x", "export A=1", "x", "y;", " fi)",
          "case a in", "esac", "while :; do", "then # c", "z" * 700, "# " + "c" * 600, "\r\n" * 300]


@pytest.mark.parametrize("seed", range(40))
def test_only_statement_matches_reference_on_random_text(seed):
    rng = random.Random(seed)
    for _ in range(200):
        parts = [rng.choice(PIECES) for _ in range(rng.randint(0, 14))]
        pad = "x" * rng.choice([0, 0, 600, 5000])        # past the first backward window
        text = pad + "".join(parts)
        for _ in range(6):
            start = rng.randint(0, len(text))
            end = rng.randint(start, len(text))
            assert only_statement(text, start, end) == only_statement_reference(text, start, end), \
                (text, start, end)


# --- every output a user sees, with the shortcuts and with their references --------------------

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from compared_trees import ROOT, generate_corpora, trees  # noqa: E402

COMMANDS = [("check", "--format", "text", "."), ("check", "--format", "json", "."),
            ("check", "--fix", "--diff", "."), ("check", "--unsafe-fixes", "--fix", "--diff", "."),
            ("migrate", "--to", "0.30.0", "--diff", "."), ("launches", ".")]

# The reference run: only_statement as it read the whole text; release links' Repo listing its
# files anew on every call (Repo._listed caches it), a walk up to the repository root per launch
# (_root_finder: one per folder) and the config-name search on every text (_config_names).
REFERENCE = f"""
import sys
sys.path.insert(0, {str(ROOT / 'tests')!r})
import test_shell_fast_path as t
from vllmlint.parsers import shellscan
from vllmlint.lint import release_links
shellscan.only_statement = t.only_statement_reference
release_links.Repo._listed = lambda self, kind, keep: [p for p in self.files() if keep(p)]
release_links._root_finder = lambda fallback: (lambda path: release_links.repo_root(path, fallback))
release_links._config_names = release_links.CONFIG_NAME_RE().finditer
from vllmlint.cli import main
sys.argv[0] = "vllmlint"
main()
"""


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    return generate_corpora(tmp_path_factory.mktemp("corpora"), 6)


def run(cwd: Path, args: tuple[str, ...], reference: bool) -> tuple[int, bytes, bytes]:
    env = dict(os.environ, VLLMLINT_JOBS="1", NO_COLOR="1")
    head = ["-c", REFERENCE] if reference else ["-m", "vllmlint.cli"]
    proc = subprocess.run([sys.executable, *head, *args], capture_output=True, env=env, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:-1]))
def test_shortcuts_write_the_same_bytes_as_their_references(generated, args):
    written = []
    for name, tree in trees(generated):
        fast, ref = run(tree, args, False), run(tree, args, True)
        assert fast == ref, f"{name}: {' '.join(args)} differs from the reference reading"
        if fast[1].strip():
            written.append(name)
    # a fix diff is empty where no fix is pending (the generated corpora), never everywhere
    assert "fixtures" in written, f"{' '.join(args)}: nothing written on fixtures/"


def test_reference_run_really_swaps_the_readers(tmp_path):
    """Not vacuous: the reference bootstrap replaces only_statement (a script whose removal
    would need it reads the same either way, so the swap itself is what is checked)."""
    probe = REFERENCE.replace("from vllmlint.cli import main", "print(shellscan.only_statement.__name__, "
                              "release_links._config_names('no config named') is not ())\nraise SystemExit")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.split() == ["only_statement_reference", "True"], out.stderr
