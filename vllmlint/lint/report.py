"""Findings to text and JSON, secrets masked."""
from __future__ import annotations

import json
import re

from ..knowledge.versions import fmt
from ..model.lazyre import lazy_re
from ..model.launch import Finding, Launch, PerLaunch

# HF_TOKEN, GITHUB_TOKEN, OPENAI_API_KEY, x-api-key, DB_PASSWORD, AUTHORIZATION - not
# VLLM_MAX_TOKENS_PER_EXPERT_FP4_MOE or ..._TOKEN_THRESHOLD (numbers, not secrets)
SECRET_NAME_RE = re.compile(r"(TOKEN$|SECRET|PASSWORD|PASSWD|API[-_]?KEY|[-_]KEY$|^KEY$|CREDENTIAL|AUTH)", re.I)
SECRET_FLAGS = {"--api-key", "--hf-token", "--ssl-keyfile-password"}
MASK = "****"


def is_secret(name: str) -> bool:
    return bool(SECRET_NAME_RE.search(name))


def mask_env(name: str, value: str | None) -> str | None:
    """The value of a secret-looking name masked whole; any other value's secrets (a URL password
    in `REDIS_URL`, a token shape) masked as in any text."""
    if not value:
        return value
    return MASK if is_secret(name) else mask_secrets(value)


def mask_argv(argv: list[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for token in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        flag, eq, _ = token.partition("=")
        if flag.replace("_", "-") in SECRET_FLAGS:
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(token)
                hide_next = True
            continue
        out.append(mask_secrets(token))
    return out


_VALUE = r"""([^\s"',;}\])`]+)"""
_SECRET_PATTERNS = [       # compiled on first use (lazy_re): most one-file runs mask nothing
    # --api-key X, --api-key=X, "--hf-token", "X" (any spelling vLLM accepts)
    lazy_re(r"""(?i)(--(?:api|hf|ssl[-_]keyfile)[-_](?:key|token|password)["']?(?:\s*=\s*|\s*,\s*|\s+)["']?)"""
            + _VALUE),
    # Authorization: Bearer X, "Authorization": "Basic X", authorization=X
    lazy_re(r"""(?i)(authorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|apikey)\s+)?)""" + _VALUE),
    # credentials in a URL: scheme://user:X@host (the user may be empty: redis://:X@host), within
    # one URL - no `"`, `,`, `{`, `}`, `/` or whitespace in between, which a URL's userinfo never
    # holds: `"tcp://host:5557","topic":"kv@pod"` (JSON) or `tcp://h:1 kv@pod` (argv) hold no password
    lazy_re(r"""(\b[a-z][a-z0-9+.-]*://[^/\s:@",{}]*:)([^/\s@",{}]+)(?=@)""", re.I),
]
# not a secret: already masked, a scheme word, a reference to a variable or template
_PLAIN = lazy_re(r"(?i)(?:\*\*\*\*|bearer|basic|token|apikey|\$|\{\{)")
_NAME_VALUE = lazy_re(r"""\b([A-Za-z_][A-Za-z0-9_.-]*)(["']?\s*[=:]\s*["']?)""" + _VALUE)
# well-known token shapes, wherever they appear
_TOKEN_SHAPES = lazy_re(r"\b(?:hf_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
                        r"|github_pat_\w{20,}|xox[abprs]-[\w-]{10,}|AKIA[0-9A-Z]{16}"
                        r"|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,})")


def mask_secrets(text: str, known=()) -> str:
    """`text` with secrets replaced by ****: values of secret flags (`--api-key`, `--hf-token`),
    Authorization headers, URL passwords, `NAME=value` / `NAME: value` for a secret-looking
    NAME (`*_TOKEN`, `*_KEY`, `*SECRET*`, `*PASSWORD*`, ...), well-known token shapes
    (`hf_...`, `sk-...`, `ghp_...`), and every string in `known` (secret values read from the
    configs). It may mask a little too much; it must never show a secret."""
    if not text:
        return text
    for value in sorted({k for k in known if k and len(k) >= 4}, key=len, reverse=True):
        text = text.replace(value, MASK)
    for pattern in _SECRET_PATTERNS:
        text = pattern().sub(lambda m: m.group(1) + MASK, text)
    def name_value(m: re.Match) -> str:
        name, flag = m.group(1), m.string[max(m.start(1) - 2, 0):m.start(1)] == "--"
        if flag and re.search(r"(?i)token$", name):
            return m.group(0)          # `--max-num-batched-token=8192`: a count (--hf-token is masked above)
        if is_secret(name) and not _PLAIN().match(m.group(3)):
            return m.group(1) + m.group(2) + MASK
        return m.group(0)

    text = _NAME_VALUE().sub(name_value, text)
    return _TOKEN_SHAPES().sub(MASK, text)


def secret_values(project) -> set[str]:
    """Secret values the configs hold: env settings with a secret-looking name, and the value
    after a secret flag in any launch's argv."""
    found = {e.value for e in project.env if e.value and is_secret(e.name)}
    for launch in project.launches:
        found |= _launch_secrets(launch)
    # a switch or a number under a secret-looking name (`WEBUI_AUTH: "true"`,
    # `SHOW_TOKENS_PER_SECOND: "true"`) is no secret: masked everywhere, it hid every `true` a
    # message shows (a default "changes from `false` to `****`"; found on an AIBrix tree)
    return {v for v in found if v and v != MASK and not NOT_A_SECRET().match(v)}


NOT_A_SECRET = lazy_re(r"(?i)^\s*(?:true|false|yes|no|on|off|none|null|enabled?|disabled?|[-+]?\d+(?:\.\d+)?)\s*$")


def _launch_secrets(launch) -> frozenset:
    return _SECRETS_OF.get(launch, _read_launch_secrets)


def _read_launch_secrets(launch) -> frozenset:
    found = {e.value for e in launch.env if e.value and is_secret(e.name)}
    values = [a.value for a in launch.argv]
    for i, token in enumerate(values):
        flag, eq, rest = token.partition("=")
        if flag.replace("_", "-") in SECRET_FLAGS:
            if eq:
                found.add(rest)
            elif i + 1 < len(values):
                found.add(values[i + 1])
    return frozenset(found)


_SECRETS_OF = PerLaunch()           # each migrate step asks again


def finding_dict(f: Finding) -> dict:
    line, col = f.line_col
    return {"code": f.code, "name": f.name, "severity": f.severity, "path": f.file.display,
            "line": line, "column": col, "message": f.message, "fixable": f.fixable, "detail": f.detail}


def text_line(f: Finding, details: bool = False) -> str:
    """`path:line:col: CODE severity: message [*]` (hadolint's order; `[*]`: has a fix); with
    `details`, the why on the next line, indented."""
    line, col = f.line_col
    out = f"{f.file.display}:{line}:{col}: {f.code} {f.severity}: {f.message}" + (" [*]" if f.fixable else "")
    return out + (f"\n    {f.detail}" if details and f.detail else "")


def grouped(findings: list[Finding], across_files: bool = False) -> list[tuple[Finding, list[Finding]]]:
    """Findings that say the same thing (code, severity, message) about many launches of one file
    (`across_files`: of any file), as (the first, the others), in the order of the first."""
    groups: dict[tuple, list[Finding]] = {}
    for f in findings:
        key = (f.code, f.severity, f.message, f.fixable) + (() if across_files else (f.file.display,))
        groups.setdefault(key, []).append(f)
    return [(fs[0], fs[1:]) for fs in groups.values()]


def also_at(first: Finding, others: list[Finding]) -> str:
    """` (6 launches; also lines 12, 20)`: where the grouped others are (a line in the same file,
    else `path:line`)."""
    if not others:
        return ""
    places = [str(o.line_col[0]) if o.file.display == first.file.display else f"{o.file.display}:{o.line_col[0]}"
              for o in others]
    same = all(o.file.display == first.file.display for o in others)
    return f" ({len(others) + 1} launches; also {'line' + ('s' if len(places) > 1 else '') + ' ' if same else 'at '}" \
           f"{', '.join(places)})"


def grouped_lines(findings: list[Finding], across_files: bool = True) -> list[str]:
    """text_line of each group: `path:line:col: VL307 info: ... (6 launches; also at a.yaml:5, ...)`."""
    return [text_line(first) + also_at(first, others) for first, others in grouped(findings, across_files)]


SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


def failing(findings: list[Finding], fail_level: str = "warning") -> list[Finding]:
    """The findings at or above `fail_level`: what makes a run exit 1."""
    floor = SEVERITY_RANK[fail_level]
    return [f for f in findings if SEVERITY_RANK.get(f.severity, 1) >= floor]


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 finding`, `2 findings`, `0 files` (never `finding(s)`)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def summary(findings: list[Finding], fixed: int | None = None, unreadable: int = 0, unsafe_fixes: bool = False,
            would: bool = False, unwritten: int = 0) -> str:
    """ruff's summary: `Found 12 findings (5 fixable).`, `All checks passed!`; after --fix
    `(3 fixed, 9 remaining)` (`would fix` on a dry run). A run in which a file could not be read
    says so (`Found 2 findings; 1 file could not be read.`) and never that all checks passed.
    Then the hints: the `[*]` ones (`check --fix`, with `--unsafe-fixes` when that is how they
    were offered), the fixes held back for the upgrade (`migrate --to X`), the hidden unsafe ones."""
    n = len(findings)
    unread = (f"; {plural(unreadable, 'file')} could not be read" if unreadable else "") \
        + (f"; {plural(unwritten, 'file')} could not be written" if unwritten else "")
    if fixed:
        verb = "would fix" if would else "fixed"
        head = f"Found {plural(n + fixed, 'finding')} ({fixed} {verb}, {n} remaining){unread}."
    elif not n and not unread:
        return "All checks passed!"
    else:
        fixable = sum(1 for f in findings if f.fixable)
        head = f"Found {plural(n, 'finding')}" + (f" ({fixable} fixable)" if fixable else "") + unread + "."
    return "\n".join([head] + fix_hints(findings, fixed is None, unsafe_fixes))


def fix_hints(findings: list[Finding], offer_fix: bool = True, unsafe_fixes: bool = False) -> list[str]:
    """The lines after the summary: how to apply what is fixable, and the fixes held back (a
    release gate: `migrate --to X`, which bumps the tag or pin with them; unsafe: hidden)."""
    out = []
    fixable = sum(1 for f in findings if f.fixable)
    if fixable and offer_fix:
        out.append(f"[*] {fixable} fixable with `vllmlint check --fix"
                   + (" --unsafe-fixes" if unsafe_fixes else "") + "`.")
    gated: dict[str, int] = {}
    for f in findings:
        if f.withheld.startswith("migrate "):
            to = f.withheld.split(" ", 1)[1]
            gated[to] = gated.get(to, 0) + 1
    for to, count in sorted(gated.items()):
        out.append(f"{count} more fixable with `vllmlint migrate --to {to}`.")
    hidden = sum(1 for f in findings if f.withheld == "unsafe")
    if hidden:
        out.append(f"{plural(hidden, 'hidden fix', 'hidden fixes')} can be enabled with `--unsafe-fixes`.")
    return out


def statistics(findings: list[Finding]) -> list[dict]:
    """One row a code, most frequent first: code, name, severity, count, fixable (how many)."""
    rows: dict[str, dict] = {}
    for f in findings:
        row = rows.setdefault(f.code, {"code": f.code, "name": f.name, "severity": f.severity,
                                       "count": 0, "fixable": 0})
        row["count"] += 1
        row["fixable"] += bool(f.fixable)
    return sorted(rows.values(), key=lambda r: (-r["count"], r["code"]))


STATISTICS_FORMATS = ("text", "json")


def render_statistics(findings: list[Finding], fmt: str) -> str:
    """ruff's `--statistics`: `count<TAB>code<TAB>[*] name (severity)`, `[ ]` when no finding of
    the row has a fix (the summary follows the table, from the caller); JSON: the rows."""
    rows = statistics(findings)
    if fmt == "json":
        return json.dumps(rows, indent=2)
    width = max((len(str(r["count"])) for r in rows), default=1)
    return "\n".join(f"{r['count']:>{width}}\t{r['code']}\t{'[*]' if r['fixable'] else '[ ]'} {r['name']}"
                     f" ({r['severity']})" for r in rows)


SEVERITY_COLOR = {"error": "red", "warning": "yellow", "info": "blue"}
COLOR_CHOICES = ("auto", "always", "never")


def use_color(choice: str, stream) -> bool:
    """--color always|never wins; auto: NO_COLOR (any value) turns colour off, else FORCE_COLOR
    (any value) turns it on, else colour only on a terminal (no-color.org, force-color.org)."""
    import os

    if choice in ("always", "never"):
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


# A file that concerns vLLM and cannot be read is an error of the run, not a finding: text
# prints it on stderr (`path:line: reason`, exit 2); the machine formats carry it too, so a
# consumer that reads only stdout sees why the run failed. JSON: an entry shaped like a
# finding with code E000 (the array stays what today's consumers read); SARIF: a
# toolExecutionNotification; GitHub: an ::error annotation; GitLab: a critical issue.
PROBLEM_CODE, PROBLEM_NAME = "E000", "unreadable-file"


# A fix that could not be written (read-only file, changed meanwhile): the file was read, the run failed.
WRITE_CODE, WRITE_NAME = "E001", "not-written"
_RUN_ERROR = lazy_re(r"^(.*?):(\d+): (.*)$", re.S)
_YAML_MARK = lazy_re(r"\(line (\d+), column (\d+)\)")


def run_error(text: str):
    """A run error worded `path:line: reason` (a path that does not exist, a fix not written) as
    a Problem, so that every format reports it as it reports a file that could not be parsed."""
    from .project import Problem

    m = _RUN_ERROR().match(text)
    if m:
        return Problem(m.group(1), int(m.group(2)), m.group(3))
    path, _, reason = text.partition(": ")
    return Problem(path, 0, reason or text)


def problem_code(p) -> tuple[str, str]:
    return (WRITE_CODE, WRITE_NAME) if p.reason.startswith(("not written", "fix not applied")) \
        else (PROBLEM_CODE, PROBLEM_NAME)


def problem_position(p) -> tuple[int, int]:
    """Line and column of a run error as of a finding: the column the parser named for that line
    (PyYAML's `(line 5, column 4)`), else 1; a file with no line (it could not be opened) is 1:1."""
    if not p.line:
        return 1, 1
    marks = [(int(a), int(b)) for a, b in _YAML_MARK().findall(p.reason)]
    return p.line, next((c for l, c in reversed(marks) if l == p.line), 1)


def count_errors(problems) -> tuple[int, int]:
    """(files that could not be read, files whose fixes could not be written), each file once."""
    unread = {p.display for p in problems if problem_code(p)[0] == PROBLEM_CODE}
    return len(unread), len({p.display for p in problems if problem_code(p)[0] == WRITE_CODE} - unread)


def problem_line(p) -> str:
    """`path:line:col: E000 error: reason`, as a finding's line (ruff's E902 for an unreadable file)."""
    line, col = problem_position(p)
    return f"{p.display}:{line}:{col}: {problem_code(p)[0]} error: {mask_secrets(p.reason)}"


def problem_dict(p) -> dict:
    line, col = problem_position(p)
    code, name = problem_code(p)
    return {"code": code, "name": name, "severity": "error", "path": p.display,
            "line": line, "column": col, "message": mask_secrets(p.reason), "fixable": False}


def render(findings: list[Finding], fmt: str, rules=(), suppressed=(), color: bool = False,
           problems=(), details: bool = False) -> str:
    if fmt == "json":
        return json.dumps([finding_dict(f) for f in findings] + [problem_dict(p) for p in problems], indent=2)
    if fmt == "sarif":
        return json.dumps(sarif(findings, rules, suppressed, problems), indent=2)
    if fmt == "github":
        return "\n".join([github_line(f) for f in findings] + [github_problem(p) for p in problems])
    if fmt == "gitlab":
        return json.dumps(gitlab(findings) + [gitlab_problem(p) for p in problems], indent=2)
    # text: the same finding on many launches of one file is one line, `(6 launches; also lines ...)`
    groups = grouped(findings)
    if color:
        import click

        return "\n".join(
            click.style(f"{f.file.display}:{f.line_col[0]}:{f.line_col[1]}:", bold=True) + " "
            + click.style(f.code, fg=SEVERITY_COLOR.get(f.severity), bold=True) + " "
            + click.style(f"{f.severity}:", fg=SEVERITY_COLOR.get(f.severity)) + " " + f.message
            + (click.style(" [*]", fg="cyan") if f.fixable else "") + also_at(f, others)
            + (click.style(f"\n    {f.detail}", dim=True) if details and f.detail else "") for f, others in groups)
    return "\n".join(text_line(f) + also_at(f, others) + (f"\n    {f.detail}" if details and f.detail else "")
                     for f, others in groups)


# -- GitHub Actions workflow commands --------------------------------------------------
GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def github_line(f: Finding) -> str:
    line, col = f.line_col
    return (f"::{GITHUB_LEVEL.get(f.severity, 'warning')} file={_gh_prop(f.file.display)},line={line},col={col},"
            f"title={_gh_prop(f'{f.code} {f.name}')}::{_gh_data(f.message)}")


def github_problem(p) -> str:
    line, col = problem_position(p)
    code, name = problem_code(p)
    where = f"file={_gh_prop(p.display)},line={line},col={col}"
    return f"::error {where},title={_gh_prop(f'{code} {name}')}::{_gh_data(mask_secrets(p.reason))}"


# -- GitLab code quality (Code Climate JSON) --------------------------------------------
GITLAB_SEVERITY = {"error": "major", "warning": "minor", "info": "info"}


def gitlab(findings: list[Finding]) -> list[dict]:
    """GitLab's code quality report: one issue a finding, paths relative to the repository
    (the job's folder), a fingerprint that stays put when lines move and is unique in the report."""
    import hashlib

    from .baseline import fingerprint

    seen: dict[str, int] = {}
    out = []
    for f in findings:
        base = fingerprint(f)
        seen[base] = seen.get(base, 0) + 1
        print_ = hashlib.sha256(f"{base}:{seen[base]}".encode()).hexdigest()[:32]
        line, _ = f.line_col
        end_line, _ = f.file.line_col(max(f.span[1], f.span[0]))
        out.append({"type": "issue", "check_name": f.code,
                    "description": f"{f.code} {f.name}: {f.message}",
                    "categories": ["Bug Risk"], "severity": GITLAB_SEVERITY.get(f.severity, "minor"),
                    "fingerprint": print_,
                    "location": {"path": diff_path(f.file.display),
                                 "lines": {"begin": max(line, 1), "end": max(end_line, line, 1)}}})
    return out


def gitlab_problem(p) -> dict:
    import hashlib

    code, name = problem_code(p)
    line, _ = problem_position(p)
    return {"type": "issue", "check_name": code,
            "description": f"{code} {name}: {mask_secrets(p.reason)}",
            "categories": ["Bug Risk"], "severity": "critical",
            "fingerprint": hashlib.sha256(f"{code}:{p.display}:{p.reason}".encode()).hexdigest()[:32],
            "location": {"path": diff_path(p.display), "lines": {"begin": line, "end": line}}}


# -- SARIF 2.1.0 --------------------------------------------------------------------------
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _uri(display: str) -> str:
    from pathlib import PurePosixPath

    path = display.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    if path.startswith("/"):
        return "file://" + path
    return str(PurePosixPath(path))


def _region(f: Finding) -> dict:
    line, col = f.line_col
    end_line, end_col = f.file.line_col(max(f.span[1], f.span[0]))
    region = {"startLine": max(line, 1), "startColumn": max(col, 1)}
    if (end_line, end_col) > (line, col):
        region.update(endLine=end_line, endColumn=end_col)
    return region


def _result(f: Finding, index: dict, suppression: dict | None = None) -> dict:
    from .baseline import fingerprint

    message = {"text": f.message + (f" {f.detail}" if f.detail else "")}
    result = {"ruleId": f.code, "level": SARIF_LEVEL.get(f.severity, "warning"), "message": message,
              "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(f.file.display)},
                                                  "region": _region(f)}}],
              "partialFingerprints": {"vllmlintFingerprint/v1": fingerprint(f)}}
    if f.code in index:
        result["ruleIndex"] = index[f.code]
    if suppression:
        result["suppressions"] = [suppression]
    return result


def sarif(findings: list[Finding], rules=(), suppressed=(), problems=()) -> dict:
    from .. import PROJECT_URL, __version__
    from .docs import help_uri, rule_page

    classes = {}
    for rule in rules:
        classes[rule.code] = type(rule)
    for f in list(findings) + [s.finding for s in suppressed]:
        if f.code not in classes:
            from .registry import load_rules

            classes.update({c: k for c, k in load_rules().items() if c == f.code})
    descriptors, index = [], {}
    for code, cls in sorted(classes.items()):
        index[code] = len(descriptors)
        descriptors.append({
            "id": code, "name": cls.name,
            "shortDescription": {"text": cls.doc().splitlines()[0].strip()},
            "fullDescription": {"text": cls.doc_sections().get("What it does", "").strip() or cls.name},
            "help": {"text": cls.doc(), "markdown": rule_page(cls)},
            "helpUri": help_uri(code),
            "defaultConfiguration": {"level": SARIF_LEVEL.get(cls.severity, "warning")},
            "properties": {"fix": cls.fix, "vllmVersions": cls.versions()},
        })
    results = [_result(f, index) for f in findings]
    for s in suppressed:
        kind = "inSource" if s.how in ("comment", "annotation") else "external"
        results.append(_result(s.finding, index, {"kind": kind, "justification": s.reason or s.how}))
    return {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "vllmlint", "version": __version__, "semanticVersion": __version__,
                                          "informationUri": PROJECT_URL, "rules": descriptors}},
                      "invocations": [_invocation(problems)],
                      "columnKind": "unicodeCodePoints", "results": results}]}


def _invocation(problems) -> dict:
    notes = []
    for p in problems:
        note = {"level": "error", "message": {"text": mask_secrets(p.reason)},
                "descriptor": {"id": problem_code(p)[0]}}
        if p.line or p.display != "vllmlint":
            location = {"artifactLocation": {"uri": _uri(p.display)}}
            line, col = problem_position(p)
            location["region"] = {"startLine": line, "startColumn": col}
            note["locations"] = [{"physicalLocation": location}]
        notes.append(note)
    return {"executionSuccessful": not problems, "toolExecutionNotifications": notes}


def launch_dict(launch: Launch) -> dict:
    env: dict[str, str | None] = {}
    for entry in launch.env:
        env[entry.name] = mask_env(entry.name, entry.value)
    return {"path": launch.file.display, "line": launch.line, "kind": launch.kind,
            "program": launch.program, "context": launch.context,
            "argv": mask_argv([a.value for a in launch.argv]), "env": env,
            "image": launch.image, "release": fmt(launch.release) if launch.release else None,
            "release_from": launch.release_from or None,
            "release_unknown": launch.release_unnamed or None,      # why a release is not read from its image
            "editable": launch.not_editable is None,
            "not_editable": launch.not_editable, "via": how_found(launch),
            "alternative_of": launch.alternative_of, "count": launch.count}


def how_found(launch: Launch) -> str:
    """What made it a vLLM launch, in words (`vllmlint launches`)."""
    if launch.via:
        return launch.via
    if launch.program == "image entrypoint":
        return f"via image {launch.image} (its entrypoint: vllm serve)" if launch.image else \
            "via an args-only container (vLLM's flags)"
    return f"via {launch.program}"


def diff_path(display: str) -> str:
    """The path a diff header names: relative to the current folder when it is inside it
    (`a/compose.yaml`, never `a//abs/path/compose.yaml`), else without its leading slash."""
    from pathlib import Path

    path = Path(display)
    if path.is_absolute():
        try:
            return path.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return path.as_posix().lstrip("/")
    text = path.as_posix()
    while text.startswith("./"):
        text = text[2:]
    return text


NO_NEWLINE = "\\ No newline at end of file\n"


def diff_lines(text: str, bom: bool = False) -> list[str]:
    """`text` cut into lines as `git diff` and `patch` cut a file: at `\\n` only (str.splitlines
    also cuts at a lone CR, a form feed, U+2028...), each line keeping its end (`\\r\\n` stays
    whole); the BOM, when the file has one, at the start of the first line, as on disk."""
    lines = text.split("\n")
    last = lines.pop()
    lines = [line + "\n" for line in lines] + ([last] if last else [])
    if bom and lines:
        lines[0] = "\ufeff" + lines[0]
    return lines


def unified_diff(display: str, old: str, new: str, bom: bool = False) -> str:
    """The patch from `old` to `new` (one file's text, `bom`: its BOM kept on disk), as `git diff`
    writes it: `git apply` and `patch -p1` take it and write `new` byte for byte. A last line without
    a newline, old or new, is followed by `\\ No newline at end of file` (difflib leaves it out,
    gluing that line to the next one)."""
    name = diff_path(display)
    import difflib               # only for --diff

    out = []
    for line in difflib.unified_diff(diff_lines(old, bom), diff_lines(new, bom),
                                     fromfile=f"a/{name}", tofile=f"b/{name}"):
        out.append(line)
        if not line.endswith("\n"):     # a content line: headers end with difflib's lineterm
            out.append("\n" + NO_NEWLINE)
    return "".join(out)
