"""Bad input: every class gets one clear `path:line: reason` line on stderr, exit 2 when the file
could not be checked, its bytes untouched, and the other files still checked (and fixed).

Each test puts the bad file next to `launch.sh`, a script with a fixable VL001 finding, runs
`check --fix` on the folder, and asserts the message, the exit code, the bad file's bytes and
that launch.sh was fixed anyway. Time and memory are bounded (docs/limits.md).
"""
from __future__ import annotations

import re
import time
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.lint import engine
from vllmlint.cli import main

# the directive names the release launch.sh runs: VL001's fix (a flag from 0.30.0 on) needs it
GOOD = "#!/bin/sh\n# vllmlint: release=0.30.0\nexport VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nvllm serve m --port 8000\n"
GOOD_FIXED = "#!/bin/sh\n# vllmlint: release=0.30.0\nvllm serve m --port 8000 --enable-scale-out\n"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def run_with(tmp_path: Path, name: str, data: bytes | str, *extra: str):
    """Write the bad file and launch.sh, `check --fix` the folder. Returns (result, bad path)."""
    bad = tmp_path / name
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_bytes(data.encode() if isinstance(data, str) else data)
    (tmp_path / "launch.sh").write_text(GOOD)
    result = invoke("check", "--fix", *extra, str(tmp_path))
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    assert (tmp_path / "launch.sh").read_text() == GOOD_FIXED, "the other files are still checked and fixed"
    return result, bad


# a run error is worded as a finding: `path:line:col: E000 error: reason` (E001: a fix not written)
ERROR_LINE = re.compile(r"^(?P<path>.*?):(?P<line>\d+):(?P<col>\d+): (?P<code>E00\d) error: (?P<reason>.*)$")


def error_line(path, line: int, reason: str, code: str = "E000"):
    """The regex of one run error's line (any column; line 0, a file that could not be opened, is 1)."""
    return re.compile(re.escape(f"{path}:{max(line, 1)}:") + r"\d+" + re.escape(f": {code} error: {reason}") + "$")


def has_error(stderr: str, path, line: int, reason: str, code: str = "E000") -> bool:
    return any(error_line(path, line, reason, code).match(l) for l in stderr.splitlines())


def assert_reported(result, bad: Path, line: int, reason: str, data: bytes | str):
    errors = [l for l in result.stderr.splitlines() if l.startswith(str(bad))]
    assert len(errors) == 1 and error_line(bad, line, reason).match(errors[0]), result.stderr
    assert result.exit_code == 2
    assert bad.read_bytes() == (data.encode() if isinstance(data, str) else data), "left untouched"


# -- malformed files of each kind ---------------------------------------------------------------

MALFORMED = [
    ("yaml", "deploy.yaml", "services:\n  vllm:\n    command: [\"--model\", \"m\"\n    environment:\n"
                            "      - VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n",
     4, "while parsing a flow sequence"),
    ("json", "deploy.yaml", '{"apiVersion": "apps/v1", "kind": "Deployment",\n "spec": {"template": {"spec": '
                            '{"containers": [\n  {"name": "vllm", "image": "vllm/vllm-openai:v0.30.0",, '
                            '"args": ["--model", "m"]}]}}}}\n',
     3, "while parsing a flow node: did not find expected node content (line 3, column 56)"),
    ("dockerfile", "Dockerfile", "FROM vllm/vllm-openai:v0.30.0\nRUNN pip install x\n"
                                 "ENV VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n",
     2, "Dockerfile syntax error: unknown instruction RUNN"),
    ("shell", "bad.sh", "export VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nvllm serve \"m --port 8000\n",
     2, "shell syntax error: a quote, `$(`, `${` or backtick in this word is never closed"),
    ("python", "launch.py", "import os, subprocess\nos.environ['VLLM_ENABLE_SCALE_OUT_ENDPOINTS'] = '1'\n"
                            "subprocess.run(['vllm', 'serve', 'm']\ndef f(:\n",
     4, "Python syntax error: invalid syntax"),
]


@pytest.mark.parametrize("kind,name,data,line,reason", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_file(kind, name, data, line, reason, tmp_path: Path):
    result, bad = run_with(tmp_path, name, data)
    [error] = [l for l in result.stderr.splitlines() if l.startswith(str(bad))]
    m = ERROR_LINE.match(error)
    assert m and m["path"] == str(bad) and int(m["line"]) == line and m["reason"].startswith(reason), error
    assert_reported(result, bad, line, m["reason"], data)


def test_malformed_json_in_a_flag_is_a_finding_not_a_crash(tmp_path: Path):
    data = "vllm serve m --kv-transfer-config '{\"kv_connector\": \"NixlConnector\",}'\n"
    result, bad = run_with(tmp_path, "pd.sh", data)
    assert result.exit_code == 1 and bad.read_text() == data
    assert f"{bad}:1:35: VL103 error: --kv-transfer-config is not valid JSON" in result.stdout


def test_non_utf8_file(tmp_path: Path):
    data = b"#!/bin/sh\n# caf\xe9\nvllm serve m\n"
    result, bad = run_with(tmp_path, "latin1.sh", data)
    assert_reported(result, bad, 2, "not UTF-8 text (byte 0xe9 at offset 15)", data)


def test_binary_file_named_like_a_config(tmp_path: Path):
    data = b"\x7fELF\x02\x01\x01\x00vllm" + bytes(range(256)) * 4
    result, bad = run_with(tmp_path, "values.yaml", data)
    assert_reported(result, bad, 1, "binary file", data)


# -- unreadable files that never mention vLLM: skipped, not an error (issue 14.6) ----------------

NOT_VLLM = [
    ("terraform-template", "user_data.sh.tpl", '#!/bin/bash\necho "${join(",", [for s in var.servers : s.name])}"\n'
                                               'echo "%{ if x }unclosed\n'),
    ("shell-with-placeholders", "init.sh", "#!/bin/sh\nhelm install {{ .Release }} \"chart\n"),
    ("binary", "values.yaml", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4),
    ("latin1", "notes.sh", b"#!/bin/sh\n# caf\xe9\necho hi\n"),
]


@pytest.mark.parametrize("name,data", [n[1:] for n in NOT_VLLM], ids=[n[0] for n in NOT_VLLM])
def test_unreadable_file_without_vllm_is_skipped(name, data, tmp_path: Path):
    result, bad = run_with(tmp_path, name, data)
    assert result.exit_code == 0, result.output
    assert str(bad) not in result.stderr, "listed only with --verbose"
    raw = data.encode() if isinstance(data, str) else data
    assert bad.read_bytes() == raw
    (tmp_path / "launch.sh").write_text(GOOD)
    verbose = invoke("check", "--fix", "--verbose", str(tmp_path))
    assert verbose.exit_code == 0
    [line] = [l for l in verbose.stderr.splitlines() if l.startswith(str(bad))]
    assert line.endswith("(skipped: it never mentions vLLM)"), line


BROKEN_VLLM = ("services:\n  vllm:\n    image: vllm/vllm-openai:v0.30.0\n"
               "    command: [\"--model\", \"m\"\n    environment:\n      - A=1\n")


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github", "gitlab"])
def test_error_of_a_vllm_file_is_in_every_format(fmt, tmp_path: Path):
    import json

    (tmp_path / "compose.yaml").write_text(BROKEN_VLLM)
    (tmp_path / "launch.sh").write_text(GOOD)
    result = invoke("check", "--format", fmt, str(tmp_path))
    assert result.exit_code == 2
    bad = str(tmp_path / "compose.yaml")
    # worded as a finding, with a code and PyYAML's column of that line, on stderr in every format
    assert has_error(result.stderr, bad, 5, "while parsing a flow sequence (line 4, column 14): did not find "
                                           "expected ',' or ']' (line 5, column 5)"), result.stderr
    assert f"{bad}:5:5: E000 error: " in result.stderr
    if fmt == "text":
        assert "All checks passed!" not in result.output
        assert "Found 1 finding (1 fixable); 1 file could not be read." in result.stdout.splitlines()
        alone = invoke("check", bad)
        assert alone.exit_code == 2 and alone.stdout == "Found 0 findings; 1 file could not be read.\n"
    elif fmt == "json":
        rows = json.loads(result.stdout)
        [err] = [r for r in rows if r["code"] == "E000"]
        assert err["path"] == bad and (err["line"], err["column"]) == (5, 5) and err["severity"] == "error"
        assert any(r["code"] == "VL001" for r in rows), "the findings of the other files stay"
    elif fmt == "sarif":
        [run] = json.loads(result.stdout)["runs"]
        [inv] = run["invocations"]
        assert inv["executionSuccessful"] is False
        [note] = inv["toolExecutionNotifications"]
        assert note["level"] == "error" and note["descriptor"]["id"] == "E000"
        assert note["locations"][0]["physicalLocation"]["region"]["startLine"] == 5
    elif fmt == "github":
        assert f"::error file={bad.replace(':', '%3A')},line=5,col=5,title=E000 unreadable-file::" in result.stdout
    else:
        issues = json.loads(result.stdout)
        [err] = [i for i in issues if i["check_name"] == "E000"]
        assert err["severity"] == "critical" and err["location"]["lines"]["begin"] == 5


def test_clean_sarif_run_is_successful(tmp_path: Path):
    import json

    (tmp_path / "launch.sh").write_text("vllm serve m --enable-scale-out\n")
    result = invoke("check", "--format", "sarif", str(tmp_path))
    [run] = json.loads(result.stdout)["runs"]
    assert run["invocations"] == [{"executionSuccessful": True, "toolExecutionNotifications": []}]


def test_binary_file_with_another_name_is_not_read(tmp_path: Path):
    data = b"\x00\x01vllm serve m\x00"
    result, bad = run_with(tmp_path, "model.bin", data)
    assert result.exit_code == 0 and bad.read_bytes() == data and result.stderr.count("\n") == 1   # "Fixed ..."


@pytest.mark.parametrize("name", ["empty.yaml", "empty.sh", "empty.py", "Dockerfile", "requirements.txt"])
def test_empty_file_is_checked_and_clean(name, tmp_path: Path):
    result, bad = run_with(tmp_path, name, b"")
    assert result.exit_code == 0, result.output          # nothing to report: an empty config is valid
    assert bad.read_bytes() == b"" and str(bad) not in result.output


def test_50_mb_file_is_skipped_quickly_without_reading_it(tmp_path: Path):
    big = tmp_path / "huge.yaml"
    with open(big, "wb") as fh:                   # sparse: 50 MB on paper, nothing on disk
        fh.truncate(50 * 1024 * 1024)
    (tmp_path / "launch.sh").write_text(GOOD)
    tracemalloc.start()
    started = time.monotonic()
    result = invoke("check", "--fix", str(tmp_path))
    elapsed = time.monotonic() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert_reported(result, big, 1, "skipped: 52.4 MB is over the 10 MiB limit", b"\0" * (50 * 1024 * 1024))
    assert (tmp_path / "launch.sh").read_text() == GOOD_FIXED
    assert elapsed < 10 and peak < 20 * 2**20, (elapsed, peak)


BOMB = """apiVersion: v1
kind: Pod
metadata: {name: bomb}
x:
  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
spec:
  containers:
  - name: vllm
    image: vllm/vllm-openai:v0.30.0
    command: *i
    args: *i
    env: *i
  - <<: &m {name: m, image: vllm/vllm-openai:v0.30.0, args: *i}
    <<: *m
"""


def test_yaml_alias_bomb_is_bounded(tmp_path: Path):
    tracemalloc.start()
    started = time.monotonic()
    result, bad = run_with(tmp_path, "bomb.yaml", BOMB)
    elapsed = time.monotonic() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert result.exit_code == 0 and bad.read_text() == BOMB, result.output   # checked, nothing to say
    assert elapsed < 10 and peak < 100 * 2**20, (elapsed, peak)               # 9^9 = 387M "lol"s never built
    launches = invoke("launches", "--format", "json", str(bad))
    assert launches.exit_code == 0 and len(launches.stdout) < 200_000


DEEP = [
    # each mentions vLLM: an unreadable file that never does is skipped, not reported
    ("yaml-flow", "deep.yaml", "a: " + "[" * 10_000 + "]" * 10_000 + "\n# vllm\n",
     1, "collections nested more than 999 levels deep"),
    ("yaml-block", "deep.yaml", "a:\n  " + "- " * 10_000 + "x\n# vllm\n",
     2, "collections nested more than 999 levels deep"),
    ("yaml-block-map", "deep.yaml", "".join(" " * i + "a:\n" for i in range(1_500)) + "# vllm\n",
     1000, "collections nested more than 999 levels deep"),
    ("python", "deep.py", "import subprocess\nsubprocess.run(['vllm', 'serve', " + "(" * 10_000 + "'m'"
     + ")" * 10_000 + "])\n", 2, "Python code nested too deeply (more than 100 levels)"),
    ("python-and-chain", "chain.py", "import vllm\nx = " + " and ".join(["y"] * 10_000) + "\n",
     2, "Python code nested too deeply (more than 100 levels)"),
]


@pytest.mark.parametrize("kind,name,data,line,reason", DEEP, ids=[d[0] for d in DEEP])
def test_10000_deep_nesting(kind, name, data, line, reason, tmp_path: Path):
    started = time.monotonic()
    result, bad = run_with(tmp_path, name, data)
    assert_reported(result, bad, line, reason, data)
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("data", [
    "vllm serve m " + "$(" * 10_000 + ")" * 10_000 + "\n",
    "vllm serve m " + '"$(echo ' * 5_000 + ')"' * 5_000 + "\n",
    "vllm serve m --kv-transfer-config '" + "[" * 10_000 + "]" * 10_000 + "'\n",
    "vllm serve m --kv-transfer-config '" + '{"a":' * 900 + "1" + "}" * 900 + "'\n",
], ids=["shell-subst", "shell-quoted-subst", "json-flag", "json-flag-valid-900"])
def test_10000_deep_shell_and_json_are_read_flat(data, tmp_path: Path):
    started = time.monotonic()
    result, bad = run_with(tmp_path, "deep.sh", data)
    assert result.exit_code in (0, 1) and bad.read_text() == data, result.output
    assert time.monotonic() - started < 20
    if "kv-transfer-config" in data:
        assert "VL103 error: --kv-transfer-config is not valid JSON" in result.stdout


# -- templates ---------------------------------------------------------------------------------

HELM = """# vllmlint: release=0.30.0
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "chart.fullname" . }}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: "vllm/vllm-openai:{{ .Values.image.tag }}"
        command: ["vllm", "serve", {{ .Values.model | quote }}]
        env:
        {{- range $k, $v := .Values.env }}
        - name: {{ $k }}
          value: {{ $v | quote }}
        {{- end }}
        - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS
          value: "1"
"""


def test_helm_template_is_checked_and_fixed_around_its_actions(tmp_path: Path):
    result, bad = run_with(tmp_path, "templates/deployment.yaml", HELM)
    assert result.exit_code == 0, result.output
    text = bad.read_text()
    assert "VLLM_ENABLE_SCALE_OUT_ENDPOINTS" not in text and '{{ .Values.model | quote }}, --enable-scale-out]' in text
    assert text.count("{{") == HELM.count("{{")


def test_go_template_that_is_not_yaml_even_masked(tmp_path: Path):
    data = "{{- if .Values.vllm }}\nrouter: [\n  {{ .Values.x }}\n{{- end }}\n"
    result, bad = run_with(tmp_path, "templates/router.yaml", data)
    assert_reported(result, bad, 5, "Helm/Go template: while parsing a flow node: did not find expected node "
                                    "content (line 5, column 1)", data)


def test_jinja_template_that_is_not_yaml_says_jinja(tmp_path: Path):
    """A `.json.jinja2` whose `{% if %}` arms, kept side by side, are not JSON: reported as
    Jinja's, not Helm's (found on littlemex/disaggregated-inference-with-nixl-over-aws-efa)."""
    data = ('{"tasks": [\n{% if vllm %}\n  {"run": "vllm serve m"}\n]}\n{% else %}\n'
            '  {"run": "vllm serve m --port 1"}\n]}\n{% endif %}\n')
    result, bad = run_with(tmp_path, "templates/task.json.jinja2", data)
    assert "Jinja template: " in result.output + result.stderr and "Helm/Go" not in result.output + result.stderr
    assert bad.read_text() == data


def test_go_template_that_never_mentions_vllm_is_skipped(tmp_path: Path):
    data = "{{- if .Values.router }}\nrouter: [\n  {{ .Values.x }}\n{{- end }}\n"
    result, bad = run_with(tmp_path, "templates/router.yaml", data)
    assert result.exit_code == 0 and str(bad) not in result.stderr and bad.read_text() == data


# -- files that change under our feet ------------------------------------------------------------

def test_file_deleted_between_discovery_and_read(tmp_path: Path, monkeypatch):
    gone = tmp_path / "gone.sh"
    gone.write_text(GOOD)
    from vllmlint.lint import checkrun      # where `check` discovers its files

    real = checkrun.discover

    def discover_then_delete(paths, *a, **k):
        found = real(paths, *a, **k)
        gone.unlink()
        return found

    monkeypatch.setattr(checkrun, "discover", discover_then_delete)
    (tmp_path / "launch.sh").write_text(GOOD)
    result = invoke("check", "--fix", str(tmp_path))
    assert f"{gone}:1:1: E000 error: cannot read: No such file or directory" in result.stderr.splitlines()
    assert result.exit_code == 2 and not gone.exists(), "never re-created"
    assert (tmp_path / "launch.sh").read_text() == GOOD_FIXED


def test_file_deleted_while_being_fixed_is_not_recreated(tmp_path: Path, monkeypatch):
    gone = tmp_path / "gone.sh"
    gone.write_text(GOOD)
    real, calls = engine.analyse, []

    def analyse_then_delete(*a, **k):
        out = real(*a, **k)
        if not calls:
            gone.unlink()
        calls.append(1)
        return out

    monkeypatch.setattr(engine, "analyse", analyse_then_delete)
    result = invoke("check", "--fix", str(gone))
    assert result.exit_code == 2 and not gone.exists(), result.output
    assert f"{gone}:1:1: E000 error: cannot read: No such file or directory" in result.stderr.splitlines()
    assert f"{gone}:1:1: E001 error: not written: No such file or directory" in result.stderr.splitlines()


def test_file_changed_while_being_checked_is_not_overwritten(tmp_path: Path, monkeypatch):
    """--fix never writes a fix computed on stale content: right before the rename the file must
    still hold the bytes the fix was computed on."""
    target = tmp_path / "launch.sh"
    target.write_text(GOOD)
    other = tmp_path / "other.sh"
    other.write_text(GOOD)
    edited = GOOD + "echo someone else saved this file meanwhile\n"
    real, calls = engine.analyse, []

    def analyse_then_edit(*a, **k):
        out = real(*a, **k)
        if not calls:
            target.write_text(edited)
        calls.append(1)
        return out

    monkeypatch.setattr(engine, "analyse", analyse_then_edit)
    result = invoke("check", "--fix", str(tmp_path))
    assert result.exit_code == 2
    assert (f"{target}:1:1: E001 error: not written: changed on disk while it was checked (run again)"
            in result.stderr.splitlines())
    assert target.read_text() == edited, "the newer content is kept"
    assert other.read_text() == GOOD_FIXED
    again = invoke("check", "--fix", str(tmp_path))
    assert again.exit_code == 0 and target.read_text() == edited.replace(
        "export VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n", "").replace("--port 8000", "--port 8000 --enable-scale-out")
