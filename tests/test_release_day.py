"""Release day: a vLLM release added from vLLM's own wheel is used like a built-in one (every rule,
`migrate` bumping tags and pins), `catalogue add vllm==X` / `--latest` from a local package index
(a folder of wheels built here; never the network), `scripts/new_release.sh` on such a wheel,
`--version` and `catalogue list` naming the newest release known, and the built-in 0.34.0 with
its researched notes.

The wheels are the synthetic vLLM of test_catalogue.py (vLLM's layout: vllm/envs.py,
vllm/engine/arg_utils.py, ...) plus the `*.dist-info` a real wheel carries."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main
from vllmlint.knowledge import catalogue
from vllmlint.knowledge.catalogue import DATA, versions
from vllmlint.knowledge.versions import parse_version

from test_catalogue import WHEEL, write_wheel

ROOT = Path(__file__).resolve().parent.parent
NEWEST = versions()[-1]
_major, _minor, _ = parse_version(NEWEST)
NEXT = f"{_major}.{_minor + 1}.0"            # a release after every built-in one
AFTER_NEXT = f"{_major}.{_minor + 2}.0"


@pytest.fixture(autouse=True)
def added_dir(tmp_path, monkeypatch):
    """Own catalogue folder; pip sees no configuration of this machine (no index, no find-links)."""
    where = tmp_path / "added"
    monkeypatch.setenv("VLLMLINT_CATALOGUE_DIR", str(where))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)
    yield where
    catalogue.use(None)


def release_wheel(folder: Path, version: str = NEXT, dist: str = "vllm", edit=None) -> Path:
    """A wheel with vLLM's layout and the metadata of `dist` `version` (pure Python: any platform)."""
    files = dict(WHEEL)
    files["vllm/_version.py"] = f"__version__ = version = '{version}'\n"
    if edit:
        files = edit(files)
    stem = f"{re.sub(r'[-.]+', '_', dist)}-{version.replace('+', '_')}"
    info = f"{re.sub(r'[-.]+', '_', dist)}-{version}.dist-info"
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\nRequires-Python: >=3.10\n"
    files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{info}/RECORD"] = ""
    tree = write_wheel(folder / f"unpacked-{stem}", files)
    folder.mkdir(parents=True, exist_ok=True)
    whl = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for rel in files:
            z.write(tree / rel, rel)
    shutil.rmtree(tree)
    return whl


def cli(*args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, **kw)


def add(whl: Path, *extra) -> dict:
    res = cli("catalogue", "add", whl, *extra)
    assert res.exit_code == 0, res.output
    name = extra[extra.index("--name") + 1] if "--name" in extra else None
    return json.loads((Path(os.environ["VLLMLINT_CATALOGUE_DIR"]) / f"{name or NEXT}.json").read_text())


def _serves_the_demo(files: dict) -> dict:
    """The test wheel's parser with the flags fixtures/demo's launches pass: without them the
    added release refuses the demo (VL302), and migrate keeps its tags for a human (2026-12-05)."""
    out = dict(files)
    out["vllm/engine/arg_utils.py"] = files["vllm/engine/arg_utils.py"].replace(
        '                parser.add_argument("--disable-log-stats", action="store_true")\n',
        '                parser.add_argument("--disable-log-stats", action="store_true")\n'
        '                parser.add_argument("--model", type=str)\n'
        '                parser.add_argument("--max-model-len", type=int)\n'
        '                parser.add_argument("--enable-scale-out", action="store_true")\n', 1)
    assert out["vllm/engine/arg_utils.py"] != files["vllm/engine/arg_utils.py"]
    return out


def test_every_rule_and_migrate_on_an_added_release(tmp_path):
    data = add(release_wheel(tmp_path / "wheels", edit=_serves_the_demo))
    assert data["added"]["release"] is True and data["added"]["distribution"] == f"vllm {NEXT}"

    # every rule applies to it, and runs over every fixture without an internal error
    from vllmlint.lint.registry import load_rules
    rules = load_rules()
    assert all(cls.applies_to(parse_version(NEXT)) for cls in rules.values())
    res = CliRunner().invoke(main, ["check", "--target-version", NEXT, "--format", "json", str(ROOT / "fixtures")])
    assert res.exit_code == 1 and "internal error" not in res.output, res.output[-2000:]
    found = {f["code"] for f in json.loads(res.stdout)}
    assert {"VL001", "VL302", "VL303", "VL307"} <= found, found

    # migrate: tags and pins bumped to it, as for a built-in release; VL307 reports changed defaults
    tree = tmp_path / "demo"
    shutil.copytree(ROOT / "fixtures" / "demo", tree)
    res = CliRunner().invoke(main, ["migrate", "--to", NEXT, "--diff", str(tree)])
    out = res.output
    assert "internal error" not in out and "by hand" not in out.split("Left for a human")[0], out[-3000:]
    assert f"vllm/vllm-openai:v0.29.0 -> vllm/vllm-openai:v{NEXT}" in out
    assert f"pin vllm==0.29.0 -> vllm=={NEXT}" in out
    assert f"+FROM vllm/vllm-openai:v{NEXT}" in out or f"vllm=={NEXT}" in out
    assert f"Migration to vLLM {NEXT}: would change" in out
    assert "set the image or pin that ships it by hand" not in out
    assert re.search(r"VL307 info: `--[\w-]+` is not set: its default changes", out), out[-3000:]
    # written, then nothing left to bump
    res = CliRunner().invoke(main, ["migrate", "--to", NEXT, str(tree)])
    assert "internal error" not in res.output
    assert f"image: vllm/vllm-openai:v{NEXT}" in (tree / "docker" / "compose.yaml").read_text()
    assert (tree / "requirements.txt").read_text().startswith(f"vllm=={NEXT}")


@pytest.mark.parametrize("version, dist", [
    (f"{NEXT}.dev3+gabc1234", "vllm"),       # a nightly
    (f"{NEXT}+cpu", "vllm"),                  # a platform build
    (NEXT, "vllm-fork"),                      # a fork under its own name
])
def test_a_nightly_or_a_fork_stays_by_hand(tmp_path, version, dist):
    data = add(release_wheel(tmp_path / "wheels", version, dist), "--name", "mine", "--version", NEXT)
    assert "release" not in data["added"] and data["added"]["distribution"] == f"{dist} {version}"
    tree = tmp_path / "demo"
    shutil.copytree(ROOT / "fixtures" / "demo", tree)
    res = CliRunner().invoke(main, ["migrate", "--to", "mine", "--diff", str(tree)])
    assert "the target is the added release mine: set the image or pin that ships it by hand" in res.output
    assert "internal error" not in res.output


def local_index(monkeypatch, folder: Path) -> None:
    """pip's configuration for a folder of wheels (what a user's PIP_FIND_LINKS would say)."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))


def test_add_a_release_from_a_local_index(tmp_path, monkeypatch, added_dir):
    index = tmp_path / "index"
    release_wheel(index, NEXT)
    local_index(monkeypatch, index)
    res = cli("catalogue", "add", f"vllm=={NEXT}")
    assert res.exit_code == 0, res.output
    assert f"Added {NEXT} (vLLM {NEXT}, 15 flags" in res.stdout
    assert f"Downloaded vllm-{NEXT}-py3-none-any.whl" in res.stderr
    data = json.loads((added_dir / f"{NEXT}.json").read_text())
    assert data["added"]["release"] is True and data["added"]["source"] == f"wheel vllm-{NEXT}-py3-none-any.whl"
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("vllmlint-wheel-*/*.whl"))  # the wheel is not kept
    # the extracted release is the cache: asked again, nothing is downloaded
    res = cli("catalogue", "add", f"vllm=={NEXT}")
    assert res.exit_code == 0 and "added already" in res.output and "nothing downloaded" in res.output
    # a release built in needs nothing
    res = cli("catalogue", "add", f"vllm=={NEWEST}")
    assert res.exit_code == 0 and f"vLLM {NEWEST} is built in: nothing to add" in res.output

    # --latest: the newest on the index
    release_wheel(index, AFTER_NEXT)
    res = cli("catalogue", "add", "--latest")
    assert res.exit_code == 0 and f"Added {AFTER_NEXT} (vLLM {AFTER_NEXT}," in res.output, res.output
    res = cli("catalogue", "list")
    assert f"newest release known: {AFTER_NEXT}" in res.stderr
    res = cli("--version")
    assert f"newest known: {AFTER_NEXT}" in res.output and f"0.6.6-{NEWEST} built in" in res.output


def test_refused_or_offline_is_one_line(tmp_path, monkeypatch):
    local_index(monkeypatch, tmp_path / "empty")
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(main, ["catalogue", "add", "vllm==9.9.9"])
    assert res.exit_code == 2
    assert res.output.strip().splitlines()[-1] == \
        "Error: cannot download vllm==9.9.9: No matching distribution found for vllm==9.9.9", res.output
    res = CliRunner().invoke(main, ["catalogue", "add", "--latest"])
    assert res.exit_code == 2 and res.output == \
        "Error: cannot ask the package index for vllm's releases: No matching distribution found for vllm\n", res.output
    # an index nobody answers on (a closed local port): pip's own reason, one line, exit 2
    monkeypatch.delenv("PIP_NO_INDEX")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    res = CliRunner().invoke(main, ["catalogue", "add", "vllm==9.9.9"])
    assert res.exit_code == 2 and res.output.startswith("Error: cannot download vllm==9.9.9: "), res.output
    assert len(res.output.strip().splitlines()) == 1, res.output


def test_a_target_newer_than_known_says_how_to_add_it(tmp_path):
    (tmp_path / "serve.sh").write_text("vllm serve m\n")
    for args in (["check", "--target-version", NEXT], ["migrate", "--to", NEXT]):
        res = CliRunner().invoke(main, args + [str(tmp_path)])
        assert res.exit_code == 2
        assert f"the newest release vllmlint knows is {NEWEST}; add it with `vllmlint catalogue add vllm=={NEXT}`" \
            in res.output, res.output
    res = cli("--version")
    assert res.output.splitlines()[1] == f"vLLM releases: 0.6.6-{NEWEST} built in ({len(versions())}); newest known: {NEWEST}"


def test_new_release_script_on_a_local_wheel(tmp_path):
    """scripts/new_release.sh, as the scheduled workflow runs it, on a copy of the catalogue and a
    folder of wheels as the index (tests: none, this is one of them)."""
    out = tmp_path / "catalogue"
    shutil.copytree(DATA, out, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    index = tmp_path / "index"
    release_wheel(index, NEXT)
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index),
           "CATALOGUE_OUT": str(out), "NEW_RELEASE_TESTS": "none", "PYTHON": sys.executable}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "new_release.sh")], env=env, capture_output=True,
                         text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == f"new-release: {NEXT}"
    written = json.loads((out / f"vllm-{NEXT}.json").read_text())
    assert written["version"] == NEXT and "added" not in written and "--cache-mode" in written["flags"]
    assert json.loads((out / "index.json").read_text())["versions"][-2:] == [NEWEST, NEXT]
    assert (out / "modules" / f"vllm-{NEXT}.json").is_file()
    # the next day: nothing newer on the index
    run = subprocess.run(["bash", str(ROOT / "scripts" / "new_release.sh")], env=env, capture_output=True,
                         text=True, cwd=tmp_path)
    assert run.returncode == 0 and run.stdout.splitlines()[-1] == "new-release: none", run.stdout + run.stderr
    # the index unreadable: exit 2
    env["PIP_FIND_LINKS"] = str(tmp_path / "nowhere")
    run = subprocess.run(["bash", str(ROOT / "scripts" / "new_release.sh"), AFTER_NEXT], env=env,
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr


def test_the_workflow_runs_the_script(tmp_path):
    import yaml

    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "new-release.yml").read_text())
    assert flow[True]["schedule"][0]["cron"].split()[2:] == ["*", "*", "*"]       # daily (`on:` reads as True)
    steps = flow["jobs"]["new-release"]["steps"]
    assert any("scripts/new_release.sh" in s.get("run", "") for s in steps)
    assert any(s.get("uses", "").startswith("peter-evans/create-pull-request") for s in steps)
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / "new_release.sh")]).returncode == 0


# ------------------------------------------------------------------------------------------
# The built-in 0.34.0
# ------------------------------------------------------------------------------------------
def test_0340_is_built_in_with_its_notes():
    assert "0.34.0" in versions()
    d = json.loads(cli("catalogue", "diff", "0.33.0", "0.34.0", "--format", "json").output)
    assert d["flags"]["default_changed"]["--gpu-memory-utilization"][1] == "Field(default=None, gt=0, le=1)"
    assert {"VLLM_USE_V2_MODEL_RUNNER", "VLLM_MARLIN_INPUT_DTYPE"} <= set(d["env"]["removed"])
    assert d["nixl_extra_keys"]["added"] == ["ucx_backend_params"]
    notes = d["notes"]["0.34.0"]
    assert notes["vl101"]["holds"] is True
    # every piece of evidence names a file:line of the wheel (or the catalogue diff)
    ev = [e for c in notes["changes"] for e in c["evidence"]] + notes["vl101"]["evidence"]
    ev += [e for n in list(notes["defaults"].values()) + list(notes["env"].values()) for e in n["evidence"]]
    assert all(re.search(r"vllm/\S*\.py", e) or "catalogue diff" in e for e in ev), ev
    text = cli("catalogue", "diff", "0.33.0", "0.34.0").output
    assert "What vLLM 0.34.0 changed that a deployment must know" in text and "[VL101] premise holds" in text


def test_migrate_the_demo_to_0340(tmp_path):
    res = CliRunner().invoke(main, ["migrate", "--to", "0.34.0", "--diff", str(ROOT / "fixtures" / "demo")])
    out = res.output
    assert "internal error" not in out and "by hand" not in out, out[-3000:]
    assert "image tag vllm/vllm-openai:v0.29.0 -> vllm/vllm-openai:v0.34.0" in out
    assert "image tag docker.io/vllm/vllm-openai:v0.29.1 -> docker.io/vllm/vllm-openai:v0.34.0" in out
    # migrate groups one note on many launches into one line (first place, then "also at ...")
    [line] = [ln for ln in out.splitlines() if "VL307 info: `--gpu-memory-utilization`" in ln]
    assert "VL307 info: `--gpu-memory-utilization` is not set: its default " \
           "changes from `0.92` to `None` in vLLM 0.34.0; unset now means 1.0 on CUDA and ROCm (0.92 elsewhere): " \
           "leave it unset, or set `--gpu-memory-utilization=0.92` if the GPU is shared" in line
    assert "(6 launches;" in line and "fixtures/demo/docker/compose.yaml:5" in line


def test_removed_variables_that_stop_0340(tmp_path):
    (tmp_path / "Dockerfile").write_text(
        "FROM vllm/vllm-openai:v0.33.0\nENV VLLM_USE_V2_MODEL_RUNNER=0\nENV VLLM_MARLIN_INPUT_DTYPE=int8\n"
        'CMD ["vllm", "serve", "m", "--gpu-memory-utilization", "0.9", "--device-memory-utilization", "0.9"]\n')
    (tmp_path / "serve.sh").write_text("export VLLM_USE_V2_MODEL_RUNNER=1\nvllm serve m --gpu-memory-utilization 0.9\n")
    res = cli("check", "--target-version", "0.34.0", "--format", "json", tmp_path)
    got = {(f["path"].split("/")[-1], f["code"], f["severity"], f["message"].split(" ")[0]) for f in json.loads(res.output)}
    assert ("Dockerfile", "VL303", "error", "VLLM_USE_V2_MODEL_RUNNER") in got
    assert ("Dockerfile", "VL303", "error", "VLLM_MARLIN_INPUT_DTYPE") in got
    assert ("serve.sh", "VL303", "warning", "VLLM_USE_V2_MODEL_RUNNER") in got     # =1: only redundant
    marlin = next(f for f in json.loads(res.output) if f["message"].startswith("VLLM_MARLIN"))
    assert "--quantization humming" in marlin["message"] and not marlin["fixable"]
    assert "vllm/envs.py:651-660" in marlin["detail"]
    # --gpu-memory-utilization set: neither it nor its alias --device-memory-utilization is reported
    assert not [f for f in json.loads(res.output) if "memory-utilization" in f["message"]]


def test_the_real_wheel_added_is_a_release(tmp_path, added_dir):
    """The real vLLM wheel when one is at hand ($VLLMLINT_VLLM_WHEEL, e.g. `pip download --no-deps
    vllm==0.34.0`): added under another name, it is the release its metadata says, image tags
    and all; a skip without it (240 MB is not fetched by the tests)."""
    wheel = os.environ.get("VLLMLINT_VLLM_WHEEL")
    if not wheel or not Path(wheel).is_file():
        pytest.skip("no real vLLM wheel ($VLLMLINT_VLLM_WHEEL)")
    data = add(Path(wheel), "--name", "pypi")
    version = data["version"]
    assert data["added"]["release"] is True and data["added"]["distribution"] == f"vllm {version}"
    res = CliRunner().invoke(main, ["check", "--target-version", "pypi", "--format", "json", str(ROOT / "fixtures")])
    assert res.exit_code == 1 and "internal error" not in res.output
    res = CliRunner().invoke(main, ["migrate", "--to", "pypi", "--diff", str(ROOT / "fixtures" / "demo")])
    assert "internal error" not in res.output and "set the image or pin" not in res.output
    assert f"image tag vllm/vllm-openai:v0.29.0 -> vllm/vllm-openai:v{version}" in res.output
    if version == "0.34.0":
        assert "`--gpu-memory-utilization` is not set: its default changes from `0.92` to `None` in vLLM 0.34.0; " \
               "unset now means 1.0 on CUDA and ROCm" in res.output
