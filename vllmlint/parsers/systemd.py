"""systemd service units (`vllm.service`): `ExecStart=` is a command line, `Environment=` its env.

The bare-metal shape: `ExecStart=/opt/venv/bin/vllm serve MODEL --port 8000 \\` over several
lines, `Environment="VLLM_USE_V1=1" "HF_HOME=/data"` beside it. What systemd.service(5) and
systemd.syntax(7) define, and what is read here:

- `[Service]` keys only; a line ending in `\\` carries on (a comment line inside one is skipped);
  `#` and `;` start a comment line. A key given twice is two settings (`ExecStartPre=` runs
  each; `ExecStart=` more than once only in a oneshot unit): each is read.
- `ExecStart=`, `ExecStartPre=`, `ExecStartPost=`, `ExecReload=`: the prefixes `@ - : + !`
  (`!!`) are dropped and the rest is read by the shell scanner, through the embedded-content
  door, on the unit's own offsets, so a finding points at the unit and a fix edits it. systemd
  splits words with the same quoting and expands `$VAR`/`${VAR}` from the unit's environment;
  it runs no shell, so `|`, `>` and `&&` are not operators there (rare in a unit; a unit that
  needs them runs `/bin/sh -c "..."`, which the scanner reads as a script). `%i`-style
  specifiers stay literal words.
  A command with a comment line inside its continuation is reported, never edited.
- `Environment=`: space-separated `NAME=value` words, each optionally quoted; every one reaches
  the unit's commands. A setting is removed with its line when it is the line's only one, else
  with the blank before it; one inside a continued line is reported, never removed.
- `EnvironmentFile=` is read by systemd at start: its values are not in the tree (not read).

No library: `configparser` drops duplicate keys and every offset, and no maintained Python
reader of unit files gives spans; the grammar above is a few lines.
"""
from __future__ import annotations

import re

from ..model.launch import Edit, EnvEntry, ParsedFile, ParseError, SourceFile
from .embedded import MappedText, lines_with_offsets, scan_shell

COMMAND_KEYS = ("ExecStart", "ExecStartPre", "ExecStartPost", "ExecReload")
SECTION_RE = re.compile(r"^[ \t]*\[([^\]\n]+)\][ \t]*$")
KEY_RE = re.compile(r"^[ \t]*([A-Za-z][A-Za-z0-9_-]*)[ \t]*=[ \t]*")
ENV_WORD_RE = re.compile(r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'|[^\s"'])+""")
EXEC_PREFIX = "@-:+!"
COMMENT_INSIDE = "a comment line sits inside its continued command line: an edit there could remove it too"


def _entries(text: str):
    """(section, key, key line start, value start, [(line start, body end, line end)...]) for every
    `key=value` of the unit, its continuation lines included; ParseError on a line that is
    neither a section, a setting, a comment nor blank."""
    section = ""
    current = None
    for start, line, end in lines_with_offsets(text):
        stripped = line.strip()
        if current is not None:
            if stripped.startswith(("#", ";")):
                continue                    # a comment inside a continued setting
            current[4].append((start, start + len(line), end))
            if not line.endswith("\\"):
                yield current
                current = None
            continue
        if not stripped or stripped.startswith(("#", ";")):
            continue
        m = SECTION_RE.match(line)
        if m:
            section = m.group(1).strip()
            continue
        m = KEY_RE.match(line)
        if not m:
            raise ParseError(text.count("\n", 0, start) + 1, "not a systemd unit line: expected "
                                                              "`[Section]`, `Key=value` or a comment")
        current = (section, m.group(1), start, start + m.end(), [(start + m.end(), start + len(line), end)])
        if not line.endswith("\\"):
            yield current
            current = None
    if current is not None:
        yield current                       # a last line ending in `\`: systemd takes it as it is


def unit_settings(text: str):
    """(section, key, value as written, continuations joined) of every setting: for explain."""
    for section, key, _, _, pieces in _entries(text):
        yield section, key, " ".join(text[a:b].rstrip("\\") for a, b, _ in pieces)


def unit_error(text: str) -> str | None:
    """Why `text` is not a unit file this front end reads, else None (the parse-back of a fix)."""
    try:
        for _ in _entries(text):
            pass
    except ParseError as e:
        return f"systemd unit: line {e.line}: {e.reason}"
    return None


def _env_entries(source: SourceFile, key_start: int, pieces) -> list[EnvEntry]:
    out: list[EnvEntry] = []
    text = source.text
    one_line = len(pieces) == 1
    for start, stop, line_end in pieces:
        body = text[start:stop]
        if body.endswith("\\"):
            body = body[:-1]
        words = list(ENV_WORD_RE.finditer(body))
        for m in words:
            word = m.group(0)
            plain = word[1:-1] if len(word) >= 2 and word[0] == word[-1] and word[0] in "\"'" else word
            name, eq, value = plain.partition("=")
            if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                continue
            at = start + m.start()
            removal = None
            if one_line and len(words) == 1:
                removal = [Edit(source, key_start, line_end, "")]        # the whole `Environment=` line
            elif one_line:
                before = body[:m.start()]
                cut = len(before) - len(before.rstrip(" \t"))
                after = body[m.end():]
                gap = len(after) - len(after.lstrip(" \t"))
                if cut:                     # the blank before it goes with it
                    removal = [Edit(source, at - cut, start + m.end(), "")]
                elif gap and after.strip():  # the first of several: with the blank after it
                    removal = [Edit(source, at, start + m.end() + gap, "")]
            dynamic = "$" in value or "%" in value
            out.append(EnvEntry(name, None if dynamic else value, source, (at, start + m.end()),
                                "systemd Environment", removal))
    return out


def _command(source: SourceFile, pieces) -> tuple[MappedText, bool]:
    """The command line as shell text, and whether a comment line was skipped inside it."""
    text = source.text
    b = MappedText()
    gaps = False
    first = True
    for n, (start, stop, line_end) in enumerate(pieces):
        if n and pieces[n - 1][2] != start:
            gaps = True
        i = start
        if first:
            while i < stop and text[i] in EXEC_PREFIX:
                i += 1
            first = False
        b.add(text[i:stop], i)
        b.add("\n", stop if stop < line_end else stop - 1)
    return b, gaps


def parse_systemd(source: SourceFile) -> ParsedFile:
    pf = ParsedFile(source)
    env: list[EnvEntry] = []
    commands: list[tuple[str, MappedText, bool]] = []
    for section, key, key_start, _, pieces in _entries(source.text):
        if section != "Service":
            continue
        if key == "Environment":
            env.extend(_env_entries(source, key_start, pieces))
        elif key in COMMAND_KEYS:
            commands.append((key, *_command(source, pieces)))
    pf.env.extend(env)
    for key, b, gaps in commands:
        if b.empty():
            continue
        scan = scan_shell(source, b.text, b.omap, context=f"unit {key}",
                          group=source.display, inherited_env=env)
        if gaps:
            for launch in scan.launches:        # an edit across the gap would take the comment with it
                launch.not_editable = launch.not_editable or COMMENT_INSIDE
        pf.launches.extend(scan.launches)
        pf.env.extend(scan.env)
    return pf
