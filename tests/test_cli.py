"""The command-line contract other tools build on: formats, exit codes, unreadable files."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from vllmlint.cli import main

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "fixtures" / "demo"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


BAD_SCRIPT = "#!/bin/sh\nexport VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nvllm serve m --port 8000\n"


def test_json_fields_and_exit_1(tmp_path):
    write(tmp_path / "launch.sh", BAD_SCRIPT)
    result = invoke("check", "--format", "json", "--target-version", "0.30.0", str(tmp_path))
    assert result.exit_code == 1
    [finding] = json.loads(result.stdout)
    assert finding["code"] == "VL001" and finding["name"] == "scale-out-env-removed"
    assert finding["severity"] == "error" and finding["fixable"] is True
    assert finding["path"] == f"{tmp_path}/launch.sh"
    assert (finding["line"], finding["column"]) == (2, 8)


def test_text_format_and_clean_exit_0(tmp_path):
    write(tmp_path / "launch.sh", BAD_SCRIPT)
    result = invoke("check", str(tmp_path / "launch.sh"))
    assert result.exit_code == 1
    assert result.stdout.startswith(f"{tmp_path}/launch.sh:2:8: VL001 ")
    write(tmp_path / "launch.sh", "vllm serve m --enable-scale-out\n")
    assert invoke("check", str(tmp_path)).exit_code == 0


def test_unparseable_file_is_reported_untouched_and_others_checked(tmp_path):
    broken = write(tmp_path / "broken.yaml", "services:\n  vllm: [1, 2\n  b: {\n")
    before = broken.read_bytes()
    write(tmp_path / "launch.sh", BAD_SCRIPT)
    result = invoke("check", "--fix", "--target-version", "0.30.0", str(tmp_path))
    assert result.exit_code == 2
    assert f"{tmp_path}/broken.yaml:" in result.stderr
    assert broken.read_bytes() == before
    assert "--enable-scale-out" in (tmp_path / "launch.sh").read_text()


def test_missing_path_and_bad_option_exit_2(tmp_path):
    assert invoke("check", str(tmp_path / "nope")).exit_code == 2
    assert CliRunner().invoke(main, ["check", "--target-version", "banana"]).exit_code == 2


def test_select_and_ignore(tmp_path):
    write(tmp_path / "launch.sh", BAD_SCRIPT)
    assert invoke("check", "--ignore", "VL001", str(tmp_path)).exit_code == 0
    assert invoke("check", "--select", "VL0", str(tmp_path)).exit_code == 1
    assert invoke("check", "--target-version", "0.29.0", str(tmp_path)).exit_code == 0


def test_diff_writes_nothing(tmp_path):
    script = write(tmp_path / "launch.sh", BAD_SCRIPT)
    result = invoke("check", "--diff", "--target-version", "0.30.0", str(tmp_path))
    assert "+vllm serve m --port 8000 --enable-scale-out" in result.stdout
    assert script.read_text() == BAD_SCRIPT


def test_fix_keeps_file_mode(tmp_path):
    script = write(tmp_path / "launch.sh", BAD_SCRIPT)
    script.chmod(0o751)
    invoke("check", "--fix", "--target-version", "0.30.0", str(tmp_path))
    assert script.stat().st_mode & 0o777 == 0o751
    assert script.read_text() == "#!/bin/sh\nvllm serve m --port 8000 --enable-scale-out\n"


def test_launches_json_masks_secrets(tmp_path):
    write(tmp_path / "run.sh", "export HF_TOKEN=hf_secret\nexport VLLM_LOGGING_LEVEL=INFO\n"
                               "vllm serve m --api-key sk-123 --port 8000\n")
    result = invoke("launches", "--format", "json", str(tmp_path))
    [launch] = json.loads(result.stdout)
    assert launch["kind"] == "serve" and launch["line"] == 3
    assert launch["argv"] == ["vllm", "serve", "m", "--api-key", "****", "--port", "8000"]
    assert launch["env"] == {"HF_TOKEN": "****", "VLLM_LOGGING_LEVEL": "INFO"}
    assert "hf_secret" not in result.stdout and "sk-123" not in result.stdout


def test_rules_and_rule_docs():
    listing = invoke("rules").stdout
    assert "VL001" in listing
    doc = invoke("rule", "VL001").stdout
    for section in ("## What it does", "## Why", "## Example", "## Fix safety"):
        assert section in doc
    assert invoke("rule", "VL999").exit_code == 2


def test_migrate_demo(tmp_path):
    demo = tmp_path / "demo"
    shutil.copytree(DEMO, demo)
    preview = invoke("migrate", "--to", "0.30.0", "--diff", str(demo))
    assert preview.exit_code == 1, "changes pending: --diff exits 1, as `check --diff` and ruff do"
    assert "+    image: vllm/vllm-openai:v0.30.0" in preview.stdout
    assert "would fix VL001" in preview.stderr and "fixed VL001" not in preview.stderr.replace("would fix", "")
    assert "(6 launches; also at " in preview.stderr, "the six identical VL307 notes are one line"
    assert all(p.read_bytes() == (DEMO / p.relative_to(demo)).read_bytes() for p in demo.rglob("*") if p.is_file())
    result = invoke("migrate", "--to", "0.30.0", str(demo))
    assert result.exit_code == 0, result.output
    assert "changed 7 files." in result.stdout
    assert "image tag vllm/vllm-openai:v0.29.0 -> vllm/vllm-openai:v0.30.0" in result.stdout
    assert "fixed VL001" in result.stdout
    assert "vllm==0.30.0" in (demo / "requirements.txt").read_text()
    text = "\n".join(p.read_text() for p in demo.rglob("*") if p.is_file())
    assert "VLLM_ENABLE_SCALE_OUT_ENDPOINTS" not in text and "v0.29" not in text
    assert invoke("check", str(demo)).exit_code == 0
    again = invoke("migrate", "--to", "0.30.0", str(demo))
    assert "changed 0 files." in again.stdout
    clean = invoke("migrate", "--to", "0.30.0", "--diff", str(demo))
    assert clean.exit_code == 0 and clean.stdout == "", "nothing pending: --diff exits 0"


def test_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "vllmlint.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and "vllmlint" in out.stdout


def test_rule_modules_documented_and_have_fixtures():
    from vllmlint.lint.registry import DOC_SECTIONS, load_rules

    for code, cls in load_rules().items():
        sections = cls.doc_sections()
        assert all(sections.get(s) for s in DOC_SECTIONS), code
        assert cls.severity in ("error", "warning", "info")
        assert (ROOT / "fixtures" / code).is_dir(), f"{code} has no fixtures"
        assert any((ROOT / "fixtures" / code).glob("*/input")), code


def test_wheel_ships_rules_as_vllmlint_rules(tmp_path):
    """The top-level rules/ folder ships inside the wheel as vllmlint.rules, never as `rules`."""
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    [wheel] = tmp_path.glob("vllmlint-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "vllmlint/rules/vl001_scale_out_env_removed.py" in names
    assert not any(n.startswith("rules/") for n in names)


def test_migrate_markdown_report(tmp_path):
    demo = tmp_path / "demo"
    shutil.copytree(DEMO, demo)
    report = tmp_path / "migration.md"
    result = invoke("migrate", "--to", "0.30.0", "--report", str(report), str(demo))
    assert result.exit_code == 0, result.output
    text = report.read_text()
    assert text.startswith("# vLLM migration from 0.29.0 to 0.30.0")
    assert "## Changed" in text and "docs/rules/VL001.md" in text
    assert f"### `{demo}/k8s/decode.yaml`" in text and "image tag `vllm/vllm-openai:v0.29.0`" in text
