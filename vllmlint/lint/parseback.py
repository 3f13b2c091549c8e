"""Every edited file parses back: the language's own parser, after ours (issue 29).

`check --fix` and `migrate` re-parse each changed file with vllmlint's front end
(engine._reparse_error); this adds the parser of the file's own language, so that an edit our
front end accepts but the real tool would not (an `if ...; then` / `fi` left with no statement
between them) is never written:

- shell: `bash -n` (it parses, it never runs) when bash is on PATH;
- YAML (compose, Kubernetes, values): PyYAML's safe loader, every document;
- JSON: `json.loads`;
- Python: `ast.parse`;
- Dockerfile: our own parser is the one used (engine._reparse_error already ran it).

A check applies only when the original text passed it: a Helm template is not YAML before the
edit either, and a script bash cannot read is not made worse by an edit (our own parser still
must read the result).
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
from pathlib import Path

# the shell files bash can read: a `#!/bin/sh` script is read by bash as well (bash -n is a
# superset check for POSIX sh); zsh/fish scripts are not shell files here
_BASH_TIMEOUT = 10


def _bash_error(text: str) -> str | None:
    bash = shutil.which("bash")
    if bash is None:
        return None
    try:
        # -n: read, never execute; no startup files and no BASH_ENV (a non-interactive bash
        # sources $BASH_ENV first), so nothing but the parser runs
        done = subprocess.run([bash, "--norc", "--noprofile", "-n"], input=text, capture_output=True, text=True,
                              timeout=_BASH_TIMEOUT, env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode == 0:
        return None
    lines = [l for l in done.stderr.strip().splitlines() if l.strip()]
    first = lines[0] if lines else "syntax error"
    for prefix in (bash + ": ", "bash: "):
        if first.startswith(prefix):
            first = first[len(prefix):]
    return "bash -n: " + first


def _shell_error(text: str, bodies: list[tuple[int, int]] | None = None) -> str | None:
    """`bash -n` on the script, then on each heredoc body vllmlint reads as a script of its own
    (`cat > run_vllm.sh <<EOF`, `bash -s <<EOF`, `ssh host <<EOF`: parsers/heredoc.body_kind):
    bash reads a body as data, so an edit inside one would otherwise rest on our reader alone.
    `bodies`: those spans as the shell front end found them reading this text
    (ParsedFile.scripts, its variables resolved); None: found here, by a lexer pass."""
    error = _bash_error(text)
    if error is not None or "<<" not in text:
        return error
    for start, end in (_script_bodies(text) if bodies is None else bodies):
        error = _bash_error(text[start:end])
        if error is not None:
            line = text.count("\n", 0, start) + 1
            return f"{error} (in the heredoc script from line {line})"
    return None


def _script_bodies(text: str) -> list[tuple[int, int]]:
    """The spans of the heredoc bodies that are shell scripts (parsers/heredoc.body_kind), where
    no parse of the text is at hand (a target named through a variable is not resolved here)."""
    from ..parsers.heredoc import body_kind, written_to
    from ..parsers.shell_lex import commands

    spans = []
    try:
        cmds = commands(text)
    except Exception:
        return spans
    for cmd in cmds:
        if not cmd.words:
            continue
        values = [w.value for w in cmd.words]
        targets = written_to(cmd)
        for redirect in cmd.redirects:
            doc = redirect.heredoc
            if doc is None or doc.body_end <= doc.body_start:
                continue
            if body_kind(values[0], values, targets, text[doc.body_start:doc.body_end]) == "shell":
                spans.append((doc.body_start, doc.body_end))
    return spans


# nesting PyYAML's pure-Python loader always reads: its composer recurses two frames a level
_PY_SAFE_DEPTH = 200


def _yaml_error(text: str) -> str | None:
    import yaml
    from ..parsers.yaml_source import c_safe_loader, check_all, nests_below

    if c_safe_loader() is not None and nests_below(text, _PY_SAFE_DEPTH):
        # libyaml first (the pure-Python loader was a third of a migrate's CPU on long manifests);
        # where it refuses, PyYAML's own loader has the last word and words the error as before.
        # (Deeper texts go to it too: its recursive composer may run out of stack where libyaml reads.)
        try:
            check_all(text)
            return None
        except Exception:
            pass
    try:
        for _ in yaml.safe_load_all(text):
            pass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        return f"YAML: {where}{getattr(err, 'problem', None) or err}"
    except Exception as err:        # a constructor error on odd input
        return f"YAML: {type(err).__name__}"
    return None


def _yaml_error_c_first(text: str) -> str | None:
    """_yaml_error's answer, with libyaml (PyYAML's C parser, the one our own front end reads
    YAML with) deciding first: ten times faster on a long multi-document file, which a migrate
    chain parses back after every pass of every step. When libyaml refuses the text, the pure
    Python loader gives the verdict and its words (as _yaml_error): the words stay the same,
    and a text only libyaml refuses is still accepted. Used where the caller keeps a memo (a
    migrate chain); VLLMLINT_MIGRATE=full is the reference without it."""
    import yaml

    safe_c = getattr(yaml, "CSafeLoader", None)
    if safe_c is None:
        return _yaml_error(text)
    reused = _construct_composed(text)
    if reused is not None:
        return None if reused else _yaml_error(text)
    loader = safe_c(text)           # what yaml.safe_load_all does, on libyaml: only a safe loader here
    try:
        while loader.check_data():
            loader.get_data()
    except Exception:
        return _yaml_error(text)
    finally:
        loader.dispose()
    return None


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix, by slices (C comparisons, log n of them)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _changed_range(before: str, after: str) -> tuple[int, int]:
    """[lo, hi): the part of `after` that is not `before`'s common prefix or common suffix."""
    lo = _common_prefix(before, after)
    room = min(len(before), len(after)) - lo
    suffix = _common_prefix(before[::-1][:room], after[::-1][:room])
    return lo, len(after) - suffix


def _yaml_error_edited(before: str, after: str) -> str | None:
    """_yaml_error_c_first's answer for `after`, an edit of `before`, whose every document
    constructed: every document of `after` is composed (the syntax is checked whole), and only
    those the edit touched are constructed. A document's construction reads its own nodes only
    (anchors and tags are per document), so one whose text is unchanged still constructs. A
    directive line in the edit (`%TAG`, which applies to the next document) asks for the whole
    check."""
    import yaml

    safe_c = getattr(yaml, "CSafeLoader", None)
    lo, hi = _changed_range(before, after)
    if safe_c is None or "%" in after[max(0, lo - 1):hi + 1]:
        return _yaml_error_c_first(after)
    reused = _construct_composed(after, lo, hi)
    if reused is not None:
        return None if reused else _yaml_error(after)
    loader = safe_c(after)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node.start_mark.index <= hi and node.end_mark.index >= lo:
                loader.construct_document(node)
    except Exception:
        return _yaml_error(after)
    finally:
        loader.dispose()
    return None


def _construct_composed(text: str, lo: int | None = None, hi: int | None = None) -> bool | None:
    """The front end composed this very text with libyaml's safe loader a moment ago (every
    document: the syntax is read whole; parsers.yaml_source.composed): construct its documents
    (those meeting [lo, hi] when given) instead of composing the text again. True: they
    construct; False: one does not (the caller asks the careful check for the words); None: no
    such composition at hand. A merge key (`<<: *base`) is left to a fresh composition: the
    constructor flattens a merged mapping in place, and these nodes are the front end's."""
    import yaml
    from ..parsers.yaml_source import composed

    docs = composed(text)
    if docs is None or "<<" in text:
        return None
    loader = yaml.CSafeLoader("")
    try:
        for node in docs:
            if lo is None or (node.start_mark.index <= hi and node.end_mark.index >= lo):
                loader.construct_document(node)
        return True
    except Exception:
        return False
    finally:
        loader.dispose()


def _compose_error(text: str) -> str | None:
    """docker compose's own rule over YAML's, for a text that reads as YAML: every service is a
    mapping. Removing a service's last setting (an override file's only variable) leaves
    `vllm:` with nothing under it, which compose refuses (`services.vllm must be a mapping`)."""
    import yaml
    from ..parsers.yaml_source import composed

    if "services" not in text:
        return None
    docs = composed(text)
    if docs is None:
        try:
            docs = list(yaml.compose_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
        except Exception:
            return None             # the YAML check words it
    for doc in docs:
        if not isinstance(doc, yaml.MappingNode):
            continue
        for key, value in doc.value:
            if key.value != "services" or not isinstance(value, yaml.MappingNode):
                continue
            for name, service in value.value:
                if isinstance(service, yaml.ScalarNode) and service.tag.endswith(":null"):
                    return f"compose: line {name.start_mark.line + 1}: service {name.value} would be empty " \
                           f"(compose needs a mapping)"
    return None


def _json_error(text: str) -> str | None:
    try:
        json.loads(text)
    except ValueError as err:
        return f"JSON: {err}"
    return None


def _python_error(text: str) -> str | None:
    try:
        ast.parse(text)
    except SyntaxError as err:
        return f"Python: line {err.lineno}: {err.msg}"
    except ValueError as err:
        return f"Python: {err}"
    return None


def checker(kind: str, path: Path):
    """The native parse check for a file of `kind` at `path`, or None."""
    if path.suffix.lower() == ".json":
        return _json_error
    if kind == "shell":
        return _shell_error
    if kind in ("yaml", "k8s", "compose"):
        return _yaml_error
    if kind == "python":
        return _python_error
    if kind == "systemd":
        from ..parsers.systemd import unit_error
        return unit_error
    return None


def native_error(kind: str, path: Path, before: str, after: str, memo: dict | None = None,
                 after_scripts: list[tuple[int, int]] | None = None) -> str | None:
    """Why `after` does not parse in its own language when `before` did, else None.
    `after_scripts`: the heredoc bodies our front end read as scripts in `after`
    (ParsedFile.scripts), so a shell file's are not looked for again.

    `memo` (path -> (text, its check's answer), the last text checked per path): a fix pass's
    result is the next pass's `before` (and a migrate step's the next step's), so its check is
    not run twice (a `bash -n` process, a YAML load of the whole file). One entry per path:
    memory stays flat however many passes and steps."""
    check = checker(kind, path)
    if check is None:
        return None
    if memo is not None and check is _yaml_error:
        check = _yaml_error_c_first
    plain = check
    if check is _shell_error and after_scripts is not None:
        check = lambda text: _shell_error(text, after_scripts if text is after else None)  # noqa: E731

    def answer(text: str) -> str | None:
        if memo is None:
            return check(text) or (_compose_error(text) if kind == "compose" else None)
        hit = memo.get(path)
        if hit is not None and hit[0] == text:
            return hit[1]
        if plain is _yaml_error_c_first and text is after and hit is not None and hit[0] == before \
                and hit[1] is None:
            result = _yaml_error_edited(before, after)      # `before` read: construct what changed
        else:
            result = check(text)
        if result is None and kind == "compose":
            result = _compose_error(text)
        memo[path] = (text, result)
        return result

    error = answer(after)
    if error is None:
        return None
    if memo is not None:            # the memo keeps the newest text a pass may start from
        memo.pop(path, None)
    if answer(before) is not None:
        return None             # it did not parse before either: our own parser is the judge
    return error
