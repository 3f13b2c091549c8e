"""How vllmlint fits the tools around it: formats, settings, suppressions, baseline, docs,
pre-commit (the real one, in a real git repo)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SCHEMA = Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json"
ONE_CASE_PER_RULE = {
    "VL001": "k8s-env-list", "VL002": "compose-router-generate", "VL101": "compose-stack",
    "VL102": "invalid-value", "VL103": "pd-mismatch", "VL201": "shell-cns", "VL900": "unused-trailing",
    "VL104": "sample-config-shell", "VL105": "k8s-pcp-args",
}


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def every_rule_tree(tmp_path, monkeypatch) -> Path:
    """One positive fixture of every rule, side by side in one tree."""
    from vllmlint.lint.registry import load_rules

    for code in load_rules():
        case = ONE_CASE_PER_RULE.get(code) or next(
            c.name for c in sorted((FIXTURES / code).iterdir()) if (c / "expected.txt").read_text().strip())
        shutil.copytree(FIXTURES / code / case / "input", tmp_path / code)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_sarif_validates_against_the_schema(every_rule_tree):
    jsonschema = pytest.importorskip("jsonschema")
    result = invoke("check", "--format", "sarif", "--topology", "VL201/topo.txt", ".")
    assert result.exit_code == 1
    log = json.loads(result.stdout)          # nothing but the log on stdout
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    run = log["runs"][0]
    codes = {r["ruleId"] for r in run["results"]}
    from vllmlint.lint.registry import load_rules
    assert codes == set(load_rules()), "a finding of every rule"
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for result_ in run["results"]:
        region = result_["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert ids[result_["ruleIndex"]] == result_["ruleId"]
    for rule in run["tool"]["driver"]["rules"]:
        assert rule["helpUri"].endswith(f"/docs/rules/{rule['id']}.md") and rule["help"]["text"]


def test_github_annotations(tmp_path):
    write(tmp_path / "run.sh", "export VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nvllm serve m\n")
    out = invoke("check", "--format", "github", str(tmp_path)).stdout.strip()
    assert out.startswith(f"::error file={tmp_path}/run.sh,line=1,col=8,title=VL001 scale-out-env-removed::")
    assert "\n" not in out


def test_text_has_no_colour_when_not_a_terminal(tmp_path):
    write(tmp_path / "run.sh", "export VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nvllm serve m\n")
    assert "\x1b[" not in invoke("check", str(tmp_path)).stdout


BAD = "export VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nvllm serve m --port 8000\n"


def test_pyproject_settings(tmp_path, monkeypatch):
    write(tmp_path / "pyproject.toml", """
[tool.vllmlint]
target-version = "0.30.0"
exclude = ["legacy/**"]
per-file-ignores = {"upstream/*.sh" = ["VL001"]}
severity = {VL001 = "warning"}
""")
    write(tmp_path / "legacy" / "old.sh", BAD)
    write(tmp_path / "upstream" / "vendor.sh", BAD)
    write(tmp_path / "mine.sh", BAD)
    monkeypatch.chdir(tmp_path)
    result = invoke("check", "--format", "json", ".")
    found = json.loads(result.stdout)
    assert [(f["path"], f["severity"]) for f in found] == [("mine.sh", "warning")]
    settings = json.loads(invoke("check", "--show-settings").stdout)
    assert settings["source"].endswith("pyproject.toml") and settings["exclude"] == ["legacy/**"]
    # explicit file names: excluded only with --force-exclude (what pre-commit passes)
    assert invoke("check", "legacy/old.sh").exit_code == 1
    assert invoke("check", "--force-exclude", "legacy/old.sh").exit_code == 0


def test_vllmlint_toml_and_bad_config(tmp_path, monkeypatch):
    write(tmp_path / ".vllmlint.toml", 'ignore = ["VL001"]\n')
    write(tmp_path / "mine.sh", BAD)
    monkeypatch.chdir(tmp_path)
    assert invoke("check", ".").exit_code == 0
    write(tmp_path / ".vllmlint.toml", 'ignroe = ["VL001"]\n')
    bad = CliRunner().invoke(main, ["check", "."])
    assert bad.exit_code == 2 and bad.output == ".vllmlint.toml:1: ignroe: unknown key; did you mean `ignore`?\n"


def test_suppressions_with_reasons_in_sarif(tmp_path, monkeypatch):
    write(tmp_path / "a.sh", "export VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1  # vllmlint: disable=VL001 -- nightly image only\n"
                             "vllm serve m\n")
    write(tmp_path / "b.sh", "# vllmlint: disable-file=VL001\nexport VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nvllm serve m\n")
    write(tmp_path / "k8s.yaml", """apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  annotations:
    vllmlint.io/ignore: "VL001"
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.30.0
          env: [{name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS, value: "1"}]
""")
    write(tmp_path / "c.sh", "# vllmlint: disable=VL001 -- wrong line\n\nexport VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nvllm serve m\n")
    monkeypatch.chdir(tmp_path)
    found = json.loads(invoke("check", "--format", "json", ".").stdout)
    assert sorted((f["path"], f["code"]) for f in found) == [("c.sh", "VL001"), ("c.sh", "VL900")]
    log = json.loads(invoke("check", "--format", "sarif", ".").stdout)
    reasons = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: r["suppressions"][0]
               for r in log["runs"][0]["results"] if "suppressions" in r}
    assert reasons["a.sh"] == {"kind": "inSource", "justification": "nightly image only"}
    assert set(reasons) == {"a.sh", "b.sh", "k8s.yaml"}


def test_baseline_only_new_findings_fail(tmp_path, monkeypatch):
    write(tmp_path / "old.sh", BAD)
    monkeypatch.chdir(tmp_path)
    assert invoke("check", "--write-baseline", "baseline.json", ".").exit_code == 0
    assert invoke("check", "--baseline", "baseline.json", ".").exit_code == 0
    # moving the line keeps it known
    write(tmp_path / "old.sh", "# moved down\n\n" + BAD)
    assert invoke("check", "--baseline", "baseline.json", ".").exit_code == 0
    # a new finding of the same code elsewhere is new
    write(tmp_path / "old.sh", "# moved down\n\n" + BAD + "export VLLM_ENABLE_SCALE_OUT_ENDPOINTS=true\n")
    result = invoke("check", "--baseline", "baseline.json", "--format", "json", ".")
    assert result.exit_code == 1
    [new] = json.loads(result.stdout)
    assert new["line"] == 5
    # the same line twice: one more copy than the baseline counted is new
    write(tmp_path / "twice.sh", BAD)
    assert invoke("check", "--baseline", "baseline.json", "twice.sh").exit_code == 1


def test_rule_docs_are_not_stale():
    from vllmlint.lint.docs import generate

    out = ROOT / "docs" / "rules"
    pages = generate(out)
    on_disk = {p.name: p.read_text() for p in out.glob("*.md")}
    assert on_disk == pages, "run `python scripts/gen_docs.py`"


def test_readme_sections():
    # the manual moved from the README to the MkDocs site under docs/ (tests/test_docs_site.py)
    readme = (ROOT / "README.md").read_text() + "".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    for needle in ("pre-commit", "GitHub Actions", "GitLab", "Exit codes", "[tool.vllmlint]", "upload-sarif",
                   "--format github", "uses: vllmlint/vllmlint@", "--format gitlab", "codequality:",
                   "vllmlint server", "vim.lsp.start", "eglot", "[language-server.vllmlint]", "glspc.server.command"):
        assert needle in readme, needle


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"})


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_real_pre_commit_hook(tmp_path):
    """A commit with a bad config is stopped; after the fix hook it goes through. The hook is
    installed by pre-commit itself from this repository at its HEAD commit."""
    pre_commit = shutil.which("pre-commit") or str(Path(sys.executable).parent / "pre-commit")
    if not Path(pre_commit).exists():
        pytest.skip("pre-commit is not installed (pip install -e '.[test]')")
    head = _git(ROOT, "rev-parse", "HEAD").stdout.strip()
    if not head:
        pytest.skip("this checkout has no commit")
    repo = tmp_path / "deploy"
    repo.mkdir()
    _git(repo, "init", "-q")
    write(repo / ".pre-commit-config.yaml", f"""repos:
  - repo: {ROOT}
    rev: {head}
    hooks:
      - id: vllmlint
      - id: vllmlint-fix
        stages: [manual]
""")
    write(repo / "k8s" / "engine.yaml", (FIXTURES / "VL001" / "k8s-env-list" / "input" / "deployment.yaml").read_text())
    write(repo / "app.dockerfile", "FROM vllm/vllm-openai:v0.30.0\nENV VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n"
                                   'CMD ["--model", "m"]\n')
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache")}
    run = lambda *a: subprocess.run([pre_commit, *a], cwd=repo, capture_output=True, text=True, env=env)
    assert run("install").returncode == 0
    _git(repo, "add", "-A")
    commit = subprocess.run(["git", "commit", "-qm", "deploy"], cwd=repo, capture_output=True, text=True,
                            env={**env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
                                 "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"})
    assert commit.returncode != 0, commit.stdout + commit.stderr
    out = commit.stdout + commit.stderr
    assert "VL001" in out and "engine.yaml" in out and "app.dockerfile" in out   # *.dockerfile is checked
    fix = run("run", "vllmlint-fix", "--hook-stage", "manual", "--all-files")
    assert fix.returncode == 1          # files were modified
    assert "--enable-scale-out" in (repo / "app.dockerfile").read_text()
    _git(repo, "add", "-A")
    again = subprocess.run(["git", "commit", "-qm", "deploy"], cwd=repo, capture_output=True, text=True,
                           env={**env, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
                                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"})
    assert again.returncode == 0, again.stdout + again.stderr
