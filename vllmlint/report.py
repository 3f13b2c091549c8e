"""Findings to text and JSON, secrets masked."""
from __future__ import annotations

import difflib
import json
import re

from .model import Finding, Launch

SECRET_NAME_RE = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|_KEY$|^KEY$|CREDENTIAL|AUTH)", re.I)
SECRET_FLAGS = {"--api-key", "--hf-token", "--ssl-keyfile-password"}
MASK = "****"


def is_secret(name: str) -> bool:
    return bool(SECRET_NAME_RE.search(name))


def mask_env(name: str, value: str | None) -> str | None:
    return MASK if value and is_secret(name) else value


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
        out.append(re.sub(r"(?i)(authorization:\s*bearer\s+)\S+", r"\1" + MASK, token))
    return out


def finding_dict(f: Finding) -> dict:
    line, col = f.line_col
    return {"code": f.code, "name": f.name, "severity": f.severity, "path": f.file.display,
            "line": line, "column": col, "message": f.message, "fixable": f.fixable}


def text_line(f: Finding) -> str:
    line, col = f.line_col
    return f"{f.file.display}:{line}:{col}: {f.code} {f.message}" + (" [*]" if f.fixable else "")


def render(findings: list[Finding], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([finding_dict(f) for f in findings], indent=2)
    return "\n".join(text_line(f) for f in findings)


def launch_dict(launch: Launch) -> dict:
    env: dict[str, str | None] = {}
    for entry in launch.env:
        env[entry.name] = mask_env(entry.name, entry.value)
    return {"path": launch.file.display, "line": launch.line, "kind": launch.kind,
            "program": launch.program, "context": launch.context,
            "argv": mask_argv([a.value for a in launch.argv]), "env": env,
            "image": launch.image, "editable": launch.not_editable is None,
            "not_editable": launch.not_editable}


def unified_diff(display: str, old: str, new: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{display}", tofile=f"b/{display}"))
