"""What a launch's own files say about the vLLM it runs, read as a user found it (2026-12-05):
a commented pin is no one's, a pin through a variable is the variable's value, and a launch
whose script shows an environment `migrate` cannot see keeps its config (report, do not edit)."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main

SERVE = "#!/bin/bash\nvllm serve facebook/opt-125m --port 8000 \\\n    --disable-log-requests\n"


def _run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # paths reported relative to the tree, as a user runs it


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _migrated(root: Path) -> str:
    """Migrate (writing) to 0.33.0; the output."""
    return _run("migrate", "--to", "0.33.0", ".").output


def test_a_commented_pin_is_not_the_launchs_release(tmp_path):
    """agents-x-project/PyVision-RL: `# vllm==0.6.3.post1` read as the release let migrate fix a
    script whose environment pins vllm==0.8.2 elsewhere; pip skips the comment, so do we."""
    root = _tree(tmp_path, {"requirements.txt": "numpy\n# vllm==0.6.3.post1\n",
                            "env/requirements_agent.txt": "vllm==0.8.2\n", "scripts/serve.sh": SERVE})
    assert "release" not in _run("launches", ".").output
    out = _migrated(root)
    assert (root / "scripts/serve.sh").read_text() == SERVE, out
    assert "the tree pins vllm==0.8.2 at env/requirements_agent.txt:1" in out


@pytest.mark.parametrize("assign, release", [
    ('VLLM_VERSION="${VLLM_VERSION:-0.10.2}"\n', "0.10.2"),
    ("export VLLM_VERSION=0.10.2\n", "0.10.2"),
    ("", None),                                  # the default written in the reference, below
])
def test_a_pin_through_a_variable_is_the_variables_release(tmp_path, assign, release):
    """ovg-project/kvcached: `pip install "vllm==${VLLM_VERSION}"` with the version assigned above."""
    ref = "${VLLM_VERSION}" if assign else "${VLLM_VERSION:-0.10.2}"
    root = _tree(tmp_path, {"serve.sh": f'#!/bin/bash\n{assign}pip install "vllm=={ref}"\n' + SERVE.split("\n", 1)[1]})
    assert "release 0.10.2 from pin vllm==0.10.2 installed by serve.sh" in _run("launches", ".").output


@pytest.mark.parametrize("setting", ["", "VLLM_VERSION=0.9.0\nVLLM_VERSION=0.10.2\n"],
                         ids=["from outside", "two values"])
def test_a_pin_known_only_at_run_time_holds_the_fixes(tmp_path, setting):
    text = f'#!/bin/bash\n{setting}pip install "vllm==$VLLM_VERSION"\n' + SERVE.split("\n", 1)[1]
    root = _tree(tmp_path, {"serve.sh": text})
    out = _migrated(root)
    assert (root / "serve.sh").read_text() == text, out
    assert "installs a `vllm==` set at run time" in out


@pytest.mark.parametrize("activate, held", [
    ('source "$HOME/engines/vllm-v0.9.2/.venv/bin/activate"\n', True),
    ("conda activate vllm_0.8.5\n", True),
    ("source .venv/bin/activate\n", False),                  # names no release: --to says what runs
    ("source /opt/vllm-v0.33.0/bin/activate\n", False),      # as new as the fix needs
    ("# source /opt/vllm-v0.9.2/bin/activate\n", False),     # a comment activates nothing
])
def test_an_environment_named_for_an_older_release_holds_the_fixes(tmp_path, activate, held):
    text = "#!/bin/bash\n" + activate + SERVE.split("\n", 1)[1]
    root = _tree(tmp_path, {"serve.sh": text})
    out = _migrated(root)
    assert ((root / "serve.sh").read_text() == text) is held, out
    assert ("its script activates" in out) is held


def test_a_pin_installed_by_another_script_holds_the_fixes(tmp_path):
    """wagerc97/gpt-oss-alignment: setup.sh installs vllm==0.10.1; serve.sh beside it launches."""
    serve = "#!/bin/bash\nexport VLLM_USE_V1=1\nvllm serve facebook/opt-125m --port 8000\n"
    root = _tree(tmp_path, {"setup.sh": "#!/bin/bash\npip install --pre vllm==0.10.1+gptoss --no-deps\n",
                            "serve.sh": serve})
    out = _migrated(root)
    assert (root / "serve.sh").read_text() == serve, out
    assert "the tree pins vllm==0.10.1 at setup.sh:2" in out
    assert (root / "setup.sh").read_text().count("0.10.1") == 1      # never bumped


def test_a_script_that_launches_and_installs_is_its_own_launchs_pin_not_a_stray_one(tmp_path):
    """The neighbour: the installing script launches too, so its pin is its own launch's
    release (held as a pin migrate does not bump), not a stray pin for others."""
    root = _tree(tmp_path, {"serve.sh": "#!/bin/bash\npip install vllm==0.10.1\n" + SERVE.split("\n", 1)[1]})
    out = _migrated(root)
    assert "installed by its own script" in out and "which no launch is linked to" not in out


@pytest.mark.parametrize("module, launch", [
    ("vllm", True), ("vllm.entrypoints.llm", True), ("lmcache_vllm.vllm", True),
    ("verl.third_party.vllm", False), ("myproj.vllm", False), ("nanovllm", False),
])
def test_only_vllms_modules_give_vllms_engine(tmp_path, module, launch):
    """agents-x-project/PyVision-RL: verl's own `verl.third_party.vllm.LLM` (a subclass with
    arguments of its own) was read as vLLM's LLM, with a false VL301; LMCache's pre-v1 shim
    `lmcache_vllm.vllm` is vLLM, patched."""
    _tree(tmp_path, {"run.py": f"from {module} import LLM\n\nllm = LLM(model='m', model_hf_config=None)\n"})
    assert ("engine" in _run("launches", ".").output) is launch


def test_check_sends_a_linked_release_to_a_hand_bump_not_to_migrate(tmp_path):
    """hommayushi3/vllm-huggingface: check said "fix with `vllmlint migrate`", which holds fixes
    of a script whose release is the image of the Dockerfile that copies it."""
    root = _tree(tmp_path, {"Dockerfile": "FROM vllm/vllm-openai:v0.6.6.post1\nCOPY start.sh /start.sh\n"
                                          'ENTRYPOINT ["/start.sh"]\n',
                            "start.sh": "#!/bin/bash\nvllm serve m --use-v2-block-manager\n"})
    out = _run("check", ".").output
    assert "fix with `vllmlint migrate" not in out
    assert "(runs 0.6.6 today, set in a file it is linked to: upgrade that first)" in out
    detail = _run("check", "--format", "json", ".").output
    assert ("image vllm/vllm-openai:v0.6.6.post1 in Dockerfile, which copies it (Dockerfile:2), which `vllmlint "
            "migrate` does not bump for this launch: bump it to 0.30.0 or later by hand") in detail


def test_a_file_that_names_another_engine_is_skipped_when_it_does_not_parse(tmp_path):
    """zhijie-group/d2f_vllm: a Python 3.12 file naming only `dvllm` failed the run on 3.11."""
    _tree(tmp_path, {"eval_run.py": 'p = "q"\nprint(f"{p + "\\n"}")\nlog = "log/dvllm_run.json"\n'})
    assert _run("check", ".").exit_code == 0
    _tree(tmp_path, {"eval_run.py": 'p = "q"\nprint(f"{p + "\\n"}")\nlog = "log/vllm_run.json"\n'})
    out = _run("check", ".").output
    assert "E000" in out and ("run vllmlint on 3.12" in out or "E000" not in out)


def test_a_deprecation_names_the_release_that_made_it(tmp_path):
    """kubernetes-sigs/lws: one deprecation was "in vLLM 0.30.0" (check), "0.29.0" (a migrate
    step) and "0.33.0" (the summary); it is the release that deprecated it in all three."""
    _tree(tmp_path, {"serve.sh": "#!/bin/bash\npython -m vllm.entrypoints.openai.api_server --model m\n"})
    for args in (["check", "."], ["check", "--target-version", "0.33.0", "."],
                 ["migrate", "--to", "0.33.0", "--diff", "."]):
        out = _run(*args).output
        assert "is deprecated since vLLM 0.29.0" in out and "deprecated in vLLM" not in out, out


def test_an_engine_calls_defaults_are_named_as_its_keywords(tmp_path):
    """eun2ce/sagemaker-vllm-deployment: "set `--ignore-patterns=[]`" on an `LLM(...)` call."""
    _tree(tmp_path, {"requirements.txt": "vllm==0.9.2\n",
                     "run.py": "from vllm import LLM\nllm = LLM(model='m')\n",
                     "serve.py": "import subprocess\n\n\ndef start(model):\n"
                                 "    subprocess.Popen(['vllm', 'serve', model, '--port', '8001'])\n"})
    out = _run("check", "--select", "VL307", "--target-version", "0.33.0", ".").output
    assert "run.py:2:7: VL307 info: `gpu_memory_utilization` is not set" in out
    assert "set `gpu_memory_utilization=0.9` to keep it" in out
    assert "`--gpu-memory-utilization` is not set" in out           # the CLI launch keeps its flags
    assert "`--model` is not set" not in out and "`model` is not set" not in out


@pytest.mark.parametrize("image", ["${REGISTRY:-opea}/vllm-rocm:${TAG:-latest}", "vllm/vllm-openai:${VLLM_TAG}"])
def test_a_tag_chosen_at_run_time_holds_the_fixes(tmp_path, image):
    """The OPEA ROCm services a reading of variable images added (opea-project/GenAIExamples):
    their tag is chosen at run time and no bump reaches it, so their flags are not rewritten."""
    text = f'services:\n  vllm:\n    image: {image}\n    command: "--model m --disable-log-requests --port 80"\n'
    root = _tree(tmp_path, {"compose.yaml": text})
    out = _migrated(root)
    assert (root / "compose.yaml").read_text() == text, out
    assert "whose tag is chosen at run time: `migrate` does not bump it" in out
