"""Property tests (hypothesis) for every parser and the fixer.

1. Mutated real files: every fixture input and every ../shared/corpus file, cut, duplicated,
   spliced with syntax characters (quotes, brackets, `{{ }}`, `$(`, continuations, CRLF, tabs,
   anchors, non-ASCII, a stray NUL or invalid UTF-8 byte). For each: the parser raises nothing
   but ParseError, no rule crashes, and `--fix` keeps every invariant of tests/fix_invariants.py
   (bytes outside the edits, line endings, BOM, re-parse, a second fix changes nothing).
2. Generated launches: `vllm serve` with random flags and values, written in every file kind
   with random quoting (bare, '...', "...", backslashes, $'...', JSON, YAML plain/quoted/block),
   continuations, CRLF and every env form (export, VAR=v cmd, env VAR=v, ENV, compose map/list,
   k8s env, os.environ). The argv read back must equal the argv written, and the VL001 fix
   (drop the env setting, append --enable-scale-out) must give exactly argv + [flag].

CI runs a fixed seed and a small budget; a long local run:
    VLLMLINT_FUZZ_EXAMPLES=5000 python -m pytest tests/test_fuzz.py -p no:warnings --hypothesis-show-statistics
(VLLMLINT_FUZZ_SEED=N picks another seed.)
"""
from __future__ import annotations

import json
import os
import shlex
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, seed, settings
from hypothesis import strategies as st

from fix_invariants import EditRecorder, check_fix_invariants, snapshot
from vllmlint.lint.discovery import classify, discover
from vllmlint.lint.engine import check_and_fix
from vllmlint.model.launch import ParseError, SourceFile
from vllmlint.lint.project import parse_source
from vllmlint.lint.registry import selected_rules

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "files"
EXAMPLES = int(os.environ.get("VLLMLINT_FUZZ_EXAMPLES", "0"))
SEED = int(os.environ.get("VLLMLINT_FUZZ_SEED", "20251129"))


def budget(ci_default: int):
    return settings(max_examples=EXAMPLES or ci_default, deadline=None, database=None, print_blob=True,
                    suppress_health_check=list(HealthCheck))


def _seeds(files: list[Path]) -> list[tuple[str, str]]:
    out = []
    for p in files:
        raw = p.read_bytes()
        kind = classify(p, raw[:2048])
        if kind and kind != "requirements":
            try:
                out.append((p.name, raw.decode("utf-8")))
            except UnicodeDecodeError:
                continue
    return out


FIXTURE_SEEDS = _seeds([p for p in sorted(ROOT.glob("fixtures/**/*")) if p.is_file() and "expected" not in p.name
                        and "/fixed/" not in p.as_posix()])
CORPUS_SEEDS = _seeds(sorted(p for p in CORPUS.rglob("*") if p.is_file())) if CORPUS.is_dir() else []
SEEDS = FIXTURE_SEEDS + CORPUS_SEEDS
# fixture inputs carry most fixable findings: two draws in three come from them
seed_file = st.one_of(st.sampled_from(FIXTURE_SEEDS), st.sampled_from(FIXTURE_SEEDS),
                      st.sampled_from(CORPUS_SEEDS or FIXTURE_SEEDS))
RULES = None


def rules():
    global RULES
    if RULES is None:
        RULES = list(selected_rules((0, 30, 0)))
    return RULES


SNIPPETS = ["'", '"', "\\", "\\\n", "\r\n", "\n", "\t", "{{", "}}", "{{ .Values.x }}", "{{- if .a }}", "$(", ")",
            "${X:-1}", "`", "[", "]", "{", "}", ":", ": ", "- ", "#", "&a ", "*a", "<<: *a", "---\n", "|\n", ">-\n",
            "<<EOF\n", "\nEOF\n", ";", "&&", "|", "=", "--", "--kv-transfer-config '{\"kv_connector\": \"X\"}'",
            " vllm serve m ", "VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1", "export VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n",
            "é", "日本", "\u2028", "\ufeff", "\x00", "\x85", "    ", "(", "!!python/object:os.system", "%", "@"]

mutation = st.one_of(
    st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 40)),
    st.tuples(st.just("dup"), st.floats(0, 1), st.integers(1, 80)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.sampled_from(SNIPPETS)),
    st.tuples(st.just("text"), st.floats(0, 1), st.text(min_size=1, max_size=8)),
    st.tuples(st.just("swap-lines"), st.floats(0, 1), st.floats(0, 1)),
    st.tuples(st.just("crlf"), st.floats(0, 1), st.booleans()),
)


def mutate(text: str, ops) -> str:
    for op, where, arg in ops:
        at = int(where * len(text))
        if op == "delete":
            text = text[:at] + text[at + arg:]
        elif op == "dup":
            text = text[:at + arg] + text[at:]
        elif op in ("insert", "text"):
            text = text[:at] + arg + text[at:]
        elif op == "swap-lines":
            lines = text.splitlines(keepends=True)
            if len(lines) > 1:
                i, j = int(where * (len(lines) - 1)), int(arg * (len(lines) - 1))
                lines[i], lines[j] = lines[j], lines[i]
                text = "".join(lines)
        elif op == "crlf":
            text = text.replace("\r\n", "\n").replace("\n", "\r\n") if arg else text.replace("\r\n", "\n")
    return text


def fix_and_check(tree: Path, unsafe: bool = True) -> int:
    """check --fix the tree in-process (the CLI's own write path) with every invariant checked."""
    from _pytest.monkeypatch import MonkeyPatch

    from vllmlint.cli import _write

    candidates, _ = discover([str(tree)])
    kinds = {c.path: c.kind for c in candidates if c.kind != "requirements"}
    before = snapshot(tree)
    mp = MonkeyPatch()
    try:
        recorder = EditRecorder().install(mp)
        # gate off: the generated launches name no release, and what is fuzzed is how fixes are written
        outcome = check_and_fix(candidates, rules(), fix=True, unsafe=unsafe, gate=False)
        internal = [str(p) for p in outcome.problems if "internal error" in p.reason]
        assert not internal, internal
        if outcome.dropped:          # refused because the result would not parse: reported, never written
            event("a fix was refused")
        errors = _write(outcome)
        assert not errors, errors
        changed = check_fix_invariants(before, snapshot(tree), recorder, kinds=kinds)
        event(f"fix changed {min(changed, 1)} file(s)")
        event("some file not checked (reported)" if outcome.problems else "every file checked")
        after = snapshot(tree)
        again = check_and_fix(candidates, rules(), fix=True, unsafe=unsafe)
        assert not again.changed(), f"a second --fix would change {[str(p) for p in again.changed()]}"
        assert snapshot(tree) == after
        return changed
    finally:
        mp.undo()


@seed(SEED)
@budget(300)
@given(seed_file, st.lists(mutation, min_size=1, max_size=4))
def test_mutated_files_parse_or_fail_cleanly_and_fix_safely(sample, ops):
    name, text = sample
    text = mutate(text, ops)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        kind = classify(path, path.read_bytes()[:2048])
        if kind and kind != "requirements":
            try:
                parse_source(SourceFile(path, name, text.removeprefix("\ufeff"), kind))
                event(f"{kind}: parsed")
            except ParseError as err:
                assert err.line >= 0 and err.reason and "\n" not in err.reason
                event(f"{kind}: ParseError")
        fix_and_check(Path(tmp))


def test_invalid_utf8_and_nul_mutations_are_reported(tmp_path: Path):
    """The byte-level mutations the text strategy cannot make."""
    from click.testing import CliRunner

    from vllmlint.cli import main

    for i, (name, text) in enumerate(SEEDS[:40]):
        raw = text.encode()
        bad = tmp_path / f"{i}" / name
        bad.parent.mkdir()
        cut = len(raw) // 2
        bad.write_bytes(raw[:cut] + (b"\xff\xfe" if i % 2 else b"\x00") + raw[cut:])
        result = CliRunner().invoke(main, ["check", "--fix", str(bad)], catch_exceptions=False)
        if b"vllm" in raw.lower():
            assert result.exit_code == 2 and ("not UTF-8" in result.stderr or "binary file" in result.stderr), \
                result.output
        else:                       # never mentions vLLM: skipped, not an error (issue 14.6)
            assert result.exit_code == 0 and str(bad) not in result.stderr, result.output
        assert bad.read_bytes() == raw[:cut] + (b"\xff\xfe" if i % 2 else b"\x00") + raw[cut:]


# -- generated launches ------------------------------------------------------------------------

FLAGS = ["--port", "--max-model-len", "--served-model-name", "--chat-template", "--tensor-parallel-size",
         "--gpu-memory-utilization", "--api-key", "--kv-transfer-config", "--override-generation-config",
         "--uvicorn-log-level", "--disable-log-stats", "--enforce-eager", "--trust-remote-code"]
# (flags 0.30.0 accepts: the fix under test is VL001's; `--disable-log-requests`, which VL302 now
# removes by a safe fix, has its own fixtures)
VALUE_ALPHABET = st.sampled_from(list("abcXYZ019_-./:=,@% ") + ["é", "'", '"', "\\", "$", "{", "}", "[", "]", "#",
                                                                   "*", "?", "~", "!", "&", ";", "|", "<", ">", "`"])
value = st.one_of(st.sampled_from(["8000", "0.9", "qwen", "/models/m", "{\"a\": 1}", "a b", ""]),
                  st.text(VALUE_ALPHABET, min_size=1, max_size=10))
option = st.tuples(st.sampled_from(FLAGS), st.one_of(st.none(), value), st.booleans())   # (flag, value, =form)


def argv_of(model: str, options) -> list[str]:
    out = ["vllm", "serve", model]
    for flag, val, eq in options:
        if val is None:
            out.append(flag)
        elif eq:
            out.append(f"{flag}={val}")
        else:
            out += [flag, val]
    return out


def sh_quote(token: str, how: int) -> str:
    safe = token and all(c.isalnum() or c in "-_./:=,@%+" for c in token)
    if how == 0 and safe:
        return token
    if how == 1 and "'" not in token:
        return f"'{token}'"
    if how == 2:
        return '"' + "".join("\\" + c if c in '"\\$`' else c for c in token) + '"'
    if how == 3 and token and "\n" not in token:
        return "".join("\\" + c if not (c.isalnum() or c in "-_./:=,@%+") else c for c in token)
    if how == 4:
        return "$'" + "".join("\\" + c if c in "'\\" else c for c in token) + "'"
    return shlex.quote(token)


def yaml_scalar(token: str, how: int) -> str:
    if how == 0 and token and all(c.isalnum() or c in "-_./=,@%+" for c in token) and token[0].isalnum() \
            and token.lower() not in ("yes", "no", "on", "off", "true", "false", "null", "y", "n", "~"):
        if not token.replace(".", "").replace("-", "").replace("_", "").isdigit():
            return token
    if how == 1:
        return "'" + token.replace("'", "''") + "'"
    return json.dumps(token)


ENV_NAME, FLAG = "VLLM_ENABLE_SCALE_OUT_ENDPOINTS", "--enable-scale-out"


def render(kind: str, argv: list[str], style: dict) -> tuple[str, str]:
    """A file of `kind` that launches `argv` with ENV_NAME=1 set in the env form `style['env']`."""
    q = style["quote"]
    if kind == "shell":
        words = [sh_quote(t, (q + i) % 5) for i, t in enumerate(argv)]
        sep = [" \\\n    " if (style["cont"] and i % 3 == 2) else " " for i in range(len(words))]
        cmd = words[0] + "".join(s + w for s, w in zip(sep, words[1:]))
        env = style["env"] % 3
        if env == 0:
            text = f"#!/bin/bash\nset -e\nexport {ENV_NAME}=1\n{cmd}\n"
        elif env == 1:
            text = f"#!/bin/bash\n{ENV_NAME}=1 {cmd}\n"
        else:
            text = f"#!/bin/bash\nexec env {ENV_NAME}=1 {cmd}\n"
        return "launch.sh", text
    if kind == "dockerfile":
        env = f"ENV {ENV_NAME}=1" if style["env"] % 2 else f"ENV {ENV_NAME} 1"
        items = ", ".join(json.dumps(t) for t in argv)
        return "Dockerfile", f"FROM python:3.12\n{env}\nCMD [{items}]\n"
    if kind == "compose":
        if style["env"] % 2:
            env = f"    environment:\n      {ENV_NAME}: \"1\"\n"
        else:
            env = f"    environment:\n      - {ENV_NAME}=1\n"
        if q % 2:
            cmd = "    command: [" + ", ".join(json.dumps(t) for t in argv) + "]\n"
        else:
            cmd = "    command:\n" + "".join(f"      - {yaml_scalar(t, q + i)}\n" for i, t in enumerate(argv))
        return "compose.yaml", f"services:\n  engine:\n    image: python:3.12\n{cmd}{env}"
    if kind == "k8s":
        args = "".join(f"        - {yaml_scalar(t, q + i)}\n" for i, t in enumerate(argv[2:]))
        return "deploy.yaml", (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: llm\nspec:\n  template:\n    spec:\n"
            "      containers:\n      - name: vllm\n        image: python:3.12\n        command: [\"vllm\", \"serve\"]\n"
            f"        args:\n{args}        env:\n        - name: {ENV_NAME}\n          value: \"1\"\n")
    if kind == "k8s-sh-c":          # a shell script in a YAML block scalar: offsets through `|`
        words = [sh_quote(t, (q + i) % 5) for i, t in enumerate(argv)]
        sep = [" \\\n  " if (style["cont"] and i % 3 == 2) else " " for i in range(len(words))]
        script = ("set -e\n" + (f"export {ENV_NAME}=1\n" if style["env"] % 2 else "")
                  + words[0] + "".join(s + w for s, w in zip(sep, words[1:])))
        body = "".join(f"          {line}\n" if line else "\n" for line in script.split("\n"))
        env = "" if style["env"] % 2 else f"        env:\n        - name: {ENV_NAME}\n          value: \"1\"\n"
        return "deploy.yaml", (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: llm\nspec:\n  containers:\n  - name: vllm\n"
            f"    image: python:3.12\n    command: [\"/bin/sh\", \"-c\"]\n    args:\n    - {'|' if q % 2 else '|-'}\n"
            + body.replace("\n          ", "\n      ").replace("          ", "      ", 1)
            + env.replace("        ", "    "))
    if kind == "compose-folded":    # `command: >` folded over lines, compose splits it like a shell
        words = [sh_quote(t, (q + i) % 4) for i, t in enumerate(argv)]
        lines = [" ".join(words[i:i + 3]) for i in range(0, len(words), 3)]
        cmd = "    command: >\n" + "".join(f"      {line}\n" for line in lines)
        env = f"    environment:\n      {ENV_NAME}: \"1\"\n"
        return "compose.yaml", f"services:\n  engine:\n    image: python:3.12\n{cmd}{env}"
    if kind == "python":
        items = ", ".join(repr(t) if (q + i) % 2 else json.dumps(t) for i, t in enumerate(argv))
        env = (f"os.environ[{ENV_NAME!r}] = '1'\n" if style["env"] % 2
               else f"os.environ.setdefault({ENV_NAME!r}, '1')\n")
        return "launcher.py", f"import os\nimport subprocess\n\n{env}subprocess.run([{items}], check=True)\n"
    raise AssertionError(kind)


def read_back(path: Path, name: str, text: str):
    source = SourceFile(path, name, text, classify(path, text.encode()[:2048]))
    parsed = parse_source(source)
    serve = [l for l in parsed.launches if l.kind == "serve"]
    assert len(serve) == 1, [(l.kind, [a.value for a in l.argv]) for l in parsed.launches]
    return serve[0]


@seed(SEED)
@budget(300)
@given(kind=st.sampled_from(["shell", "dockerfile", "compose", "k8s", "python", "k8s-sh-c", "compose-folded"]),
       model=st.sampled_from(["m", "Qwen/Qwen3-8B", "/models/llama"]),
       options=st.lists(option, max_size=5),
       style=st.fixed_dictionaries({"quote": st.integers(0, 4), "env": st.integers(0, 5), "cont": st.booleans(),
                                    "crlf": st.booleans()}))
def test_generated_launches_round_trip_and_fix(kind, model, options, style):
    argv = argv_of(model, options)
    if kind in ("k8s-sh-c", "compose-folded") and any("$" in t for t in argv):
        argv = [t.replace("$", "S") for t in argv]       # Kubernetes `$(VAR)` and compose `${VAR}` interpolate
    name, text = render(kind, argv, style)
    if style["crlf"] and kind != "python":
        text = text.replace("\n", "\r\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(text.encode())
        launch = read_back(path, name, text)
        assert [a.value for a in launch.argv] == argv, text
        assert launch.env_value(ENV_NAME) == "1"
        fix_and_check(Path(tmp), unsafe=False)
        fixed = path.read_bytes().decode()
        assert ENV_NAME not in fixed, fixed
        again = read_back(path, name, fixed)
        assert [a.value for a in again.argv] == argv + [FLAG], fixed
        assert ("\r\n" in fixed) == ("\r\n" in text)
