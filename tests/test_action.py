"""The GitHub Action (action.yml) and the GitLab code quality report.

action.yml is checked against the shape GitHub reads for a composite action, and its run
steps are run as the runner runs them: bash, `${{ inputs.x }}` / `${{ github.action_path }}` /
`${{ steps.ID.outputs.X }}` substituted, each step's `env:`, $GITHUB_PATH and $GITHUB_OUTPUT
files carried from step to step, `if:` honoured. The one `uses:` step (upload-sarif) is not
run here; its `sarif_file` is checked to be the SARIF the run wrote.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())

# What GitHub reads from a composite action's metadata (docs: "Metadata syntax for GitHub Actions")
ACTION_SCHEMA = {
    "type": "object",
    "required": ["name", "description", "runs"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"}, "author": {"type": "string"}, "description": {"type": "string"},
        "branding": {"type": "object", "additionalProperties": False,
                     "properties": {"icon": {"type": "string"}, "color": {"enum": [
                         "white", "black", "yellow", "blue", "green", "orange", "red", "purple", "gray-dark"]}}},
        "inputs": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["description"], "additionalProperties": False,
            "properties": {"description": {"type": "string"}, "required": {"type": "boolean"},
                           "default": {"type": "string"}, "deprecationMessage": {"type": "string"}}}},
        "outputs": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["description", "value"], "additionalProperties": False,
            "properties": {"description": {"type": "string"}, "value": {"type": "string"}}}},
        "runs": {"type": "object", "required": ["using", "steps"], "additionalProperties": False, "properties": {
            "using": {"const": "composite"},
            "steps": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False,
                "oneOf": [{"required": ["run", "shell"], "not": {"required": ["uses"]}},
                          {"required": ["uses"], "not": {"required": ["run"]}}],
                "properties": {"name": {"type": "string"}, "id": {"type": "string"}, "if": {"type": "string"},
                               "run": {"type": "string"}, "shell": {"type": "string"},
                               "uses": {"type": "string", "pattern": r"^[\w.-]+/[\w./-]+@[\w.-]+$"},
                               "with": {"type": "object"}, "env": {"type": "object"},
                               "working-directory": {"type": "string"},
                               "continue-on-error": {"type": ["boolean", "string"]}}}}}},
    },
}


def test_action_yml_shape():
    jsonschema.validate(ACTION, ACTION_SCHEMA)
    inputs = ACTION["inputs"]
    assert set(inputs) == {"args", "version", "sarif-file", "baseline"}
    assert inputs["args"]["default"] == "check ."
    assert all(inputs[k]["default"] == "" for k in ("version", "sarif-file", "baseline"))
    steps = ACTION["runs"]["steps"]
    assert all(s["shell"] == "bash" for s in steps if "run" in s)
    [upload] = [s for s in steps if "uses" in s]
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert upload["with"]["sarif_file"] == "${{ inputs.sarif-file }}"
    assert "inputs.sarif-file != ''" in upload["if"] and "always()" in upload["if"]
    # every expression names an input that exists, a step id that exists, or the action's path
    ids = {s.get("id") for s in steps}
    for expr in re.findall(r"\$\{\{(.*?)\}\}", (ROOT / "action.yml").read_text()):
        for name in re.findall(r"inputs\.([\w-]+)", expr):
            assert name in inputs, expr
        for step in re.findall(r"steps\.([\w-]+)\.", expr):
            assert step in ids, expr


# -- the run steps, as a runner runs them ------------------------------------------------------
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def evaluate(expr: str, ctx: dict):
    """The few expressions action.yml uses: a context path, `x != ''`, `always()`, `&&`."""
    expr = expr.strip()
    if "&&" in expr:
        return all(evaluate(part, ctx) for part in expr.split("&&"))
    if expr == "always()":
        return True
    m = re.fullmatch(r"(.+?)\s*!=\s*''", expr)
    if m:
        return evaluate(m.group(1), ctx) != ""
    value = ctx
    for part in expr.split("."):
        value = value.get(part, "") if isinstance(value, dict) else ""
    return value


def substitute(text: str, ctx: dict) -> str:
    return EXPR.sub(lambda m: str(evaluate(m.group(1), ctx)), text)


def run_action(workdir: Path, action_path: Path, tmp: Path, runner: Path | None = None, first: int = 0,
               **inputs) -> dict:
    """Steps `first`.. of the action in `workdir`; `runner`: the folder holding RUNNER_TEMP and
    the $GITHUB_PATH file (a runner's state after the steps before `first`)."""
    defaults = {k: v.get("default", "") for k, v in ACTION["inputs"].items()}
    ctx = {"inputs": {**defaults, **inputs}, "github": {"action_path": str(action_path)}, "steps": {}}
    runner = runner or tmp
    runner_temp = runner / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    path_file = runner / "github_path"
    path_file.touch()
    outcome = {"steps": [], "skipped_uses": []}
    for step in ACTION["runs"]["steps"][first:]:
        if "if" in step and not evaluate(EXPR.sub(lambda m: m.group(1), step["if"]), ctx):
            continue
        if "uses" in step:
            outcome["skipped_uses"].append({"uses": step["uses"],
                                            "with": {k: substitute(str(v), ctx) for k, v in step.get("with", {}).items()}})
            continue
        output_file = tmp / f"github_output_{len(outcome['steps'])}"
        output_file.touch()
        extra_path = [p for p in path_file.read_text().splitlines() if p]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "VIRTUAL_ENV"))}
        env.update({"RUNNER_TEMP": str(runner_temp), "GITHUB_PATH": str(path_file), "GITHUB_OUTPUT": str(output_file),
                    "PATH": os.pathsep.join(extra_path[::-1] + [env.get("PATH", "")]), "CI": "true"})
        env.update({k: substitute(str(v), ctx) for k, v in step.get("env", {}).items()})
        script = tmp / "step.sh"
        script.write_text(substitute(step["run"], ctx))
        # `shell: bash` is run as `bash --noprofile --norc -eo pipefail {0}`
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workdir,
                              env=env, capture_output=True, text=True, timeout=600)
        outputs = dict(line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line)
        if "id" in step:
            ctx["steps"][step["id"]] = {"outputs": outputs}
        outcome["steps"].append({"name": step.get("name"), "rc": proc.returncode, "stdout": proc.stdout,
                                 "stderr": proc.stderr})
        if proc.returncode != 0:
            break
    outcome["names"] = [s["name"] for s in outcome["steps"]]
    outcome["rcs"] = [s["rc"] for s in outcome["steps"]]
    return outcome


@pytest.fixture(scope="module")
def action_path(tmp_path_factory) -> Path:
    """The action as `uses: vllmlint/vllmlint@ref` checks it out: the repository's files."""
    dest = tmp_path_factory.mktemp("action") / "vllmlint"
    dest.mkdir()
    for name in ("action.yml", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "vllmlint", dest / "vllmlint", ignore=ignore)
    shutil.copytree(ROOT / "rules", dest / "rules", ignore=ignore)
    return dest


@pytest.fixture(scope="module")
def installed(action_path, tmp_path_factory):
    """The install step once (a real venv, a real pip install of the action's checkout)."""
    tmp = tmp_path_factory.mktemp("runner")
    step = ACTION["runs"]["steps"][0]
    assert step["name"] == "Install vllmlint"
    work = tmp / "empty"
    work.mkdir()
    result = run_action(work, action_path, tmp, first=0)
    assert result["names"][0] == "Install vllmlint"
    install = result["steps"][0]
    assert install["rc"] == 0, install["stderr"][-3000:]
    return tmp


def repo(tmp_path: Path, case: str) -> Path:
    work = tmp_path / "repo"
    shutil.copytree(FIXTURES / case / "input", work)
    return work


def test_action_annotates_and_fails_on_findings(installed, action_path, tmp_path):
    work = repo(tmp_path, "VL001/compose-list")
    result = run_action(work, action_path, tmp_path, runner=installed, first=1)
    assert result["names"] == ["Run vllmlint", "Fail on findings"], result["steps"]
    check = result["steps"][0]
    assert check["rc"] == 0
    assert check["stdout"].startswith("::error file=docker-compose.yml,line=7,col=9,title=VL001 scale-out-env-removed::")
    assert result["rcs"] == [0, 1]
    assert result["skipped_uses"] == []          # no sarif-file: no upload


def test_action_sarif_and_baseline(installed, action_path, tmp_path):
    work = repo(tmp_path, "VL001/compose-list")
    venv_bin = Path(installed / "github_path").read_text().split()[0]
    subprocess.run([f"{venv_bin}/vllmlint", "check", "--write-baseline", "baseline.json", "."], cwd=work, check=True,
                   capture_output=True)
    result = run_action(work, action_path, tmp_path, runner=installed, first=1,
                        **{"sarif-file": "vllmlint.sarif", "baseline": "baseline.json"})
    assert result["rcs"] == [0, 0], result["steps"]        # the one finding is known: passes
    assert result["steps"][0]["stdout"].strip() == ""
    [upload] = result["skipped_uses"]
    assert upload["with"]["sarif_file"] == "vllmlint.sarif"
    sarif = json.loads((work / "vllmlint.sarif").read_text())
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["tool"]["driver"]["name"] == "vllmlint"
    assert sarif["runs"][0]["results"] == []                     # the baseline applies to SARIF too
    # without the baseline the finding is in the SARIF, and the run fails
    result = run_action(work, action_path, tmp_path, runner=installed, first=1,
                        **{"sarif-file": "vllmlint.sarif", "args": "check --select VL001 ."})
    assert result["rcs"] == [0, 1], result["steps"]
    sarif = json.loads((work / "vllmlint.sarif").read_text())
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["VL001"]


def test_action_version_input_pins_a_pypi_release():
    """`version` installs that release from PyPI (a leading `v` dropped); empty, the action's own
    checkout (what `@ref` names). PyPI is out of reach here: the text is what is checked."""
    step = ACTION["runs"]["steps"][0]["run"]
    assert '"vllmlint==${INPUT_VERSION#v}"' in step and '"$ACTION_PATH"' in step


# -- GitLab code quality ------------------------------------------------------------------------
# From GitLab's documentation ("Code Quality report format"): the fields GitLab reads.
CODE_CLIMATE_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["description", "check_name", "fingerprint", "severity", "location"],
        "properties": {
            "description": {"type": "string", "minLength": 1},
            "check_name": {"type": "string", "minLength": 1},
            "fingerprint": {"type": "string", "minLength": 1},
            "severity": {"enum": ["info", "minor", "major", "critical", "blocker"]},
            "location": {
                "type": "object",
                "required": ["path", "lines"],
                "properties": {
                    "path": {"type": "string", "minLength": 1, "not": {"pattern": r"^(/|\./)"}},
                    "lines": {"type": "object", "required": ["begin"],
                              "properties": {"begin": {"type": "integer", "minimum": 1},
                                             "end": {"type": "integer", "minimum": 1}}},
                },
            },
        },
    },
}


@pytest.mark.parametrize("case", ["VL001/compose-list", "VL002/k8s-three-files", "VL102/in-extra-config-unsafe-fix"])
def test_gitlab_format_is_a_code_quality_report(case, tmp_path):
    work = repo(tmp_path, case)
    out = subprocess.run([sys.executable, "-m", "vllmlint", "check", "--format", "gitlab", "--fail-level", "info", "."],
                         cwd=work, capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    jsonschema.validate(report, CODE_CLIMATE_SCHEMA)
    assert report
    assert len({r["fingerprint"] for r in report}) == len(report)       # GitLab dedups on it
    for issue in report:
        assert (work / issue["location"]["path"]).is_file()
        assert issue["check_name"].startswith("VL")


def test_gitlab_format_with_nothing_found_is_an_empty_report(tmp_path):
    work = repo(tmp_path, "VL001/already-migrated")
    out = subprocess.run([sys.executable, "-m", "vllmlint", "check", "--format", "gitlab", "."], cwd=work,
                         capture_output=True, text=True)
    assert out.returncode == 0 and json.loads(out.stdout) == []
