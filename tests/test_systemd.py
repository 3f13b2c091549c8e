"""systemd service units (parsers/systemd.py): `ExecStart=` is a launch with the unit's
`Environment=`; findings point into the unit and fixes edit it; a unit that does not read back
is left alone; nothing but `[Service]` commands runs."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from vllmlint.cli import main
from vllmlint.lint.discovery import classify, discover
from vllmlint.lint.project import load
from vllmlint.parsers.systemd import unit_error

UNIT = """\
[Unit]
Description=vLLM
After=network.target

[Service]
Type=simple
Environment="VLLM_USE_V1=1" "HF_HOME=/data"
Environment=CUDA_VISIBLE_DEVICES=0,1
EnvironmentFile=-/etc/vllm.env
ExecStartPre=/usr/bin/nvidia-smi
ExecStart=/opt/venv/bin/vllm serve Qwen/Qwen2.5-7B \\
    --max-model-len 8192 \\
    --port 8000
Restart=always

[Install]
WantedBy=multi-user.target
"""


def run(args, cwd: Path):
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(old)


def launches_of(tmp_path: Path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    project = load(discover([str(path)])[0])
    return project


@pytest.mark.parametrize("name, kind", [
    ("vllm.service", "systemd"), ("vllm@.service", "systemd"), ("vllm.service.example", "systemd"),
    ("vllm.service.in", "systemd"), ("vllm.service.j2", None), ("vllm.socket", None), ("service.py", "python"),
])
def test_unit_files_by_name(name, kind):
    assert classify(Path(name), b"[Unit]\n") == kind


def test_execstart_is_a_launch_with_the_units_environment(tmp_path):
    project = launches_of(tmp_path, "vllm.service", UNIT)
    assert not project.problems
    [launch] = project.launches
    text = launch.file.text
    assert [a.value for a in launch.argv] == ["/opt/venv/bin/vllm", "serve", "Qwen/Qwen2.5-7B",
                                              "--max-model-len", "8192", "--port", "8000"]
    assert launch.line == 11
    for arg in launch.argv:             # exact spans into the unit
        assert text[arg.span[0]:arg.span[1]] == arg.value
    env = {e.name: e.value for e in launch.env}
    assert env == {"VLLM_USE_V1": "1", "HF_HOME": "/data", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert launch.not_editable is None


def test_prefixes_bash_c_and_other_sections(tmp_path):
    project = launches_of(tmp_path, "a.service", """\
        [Unit]
        ExecStart=vllm serve not-a-service-key
        [Service]
        ExecStart=-/bin/bash -c "exec vllm serve m --port 8001"
        [Install]
        ExecStart=vllm serve nor-here
        """)
    assert [[a.value for a in l.argv][-3:] for l in project.launches] == [["m", "--port", "8001"]]


def test_other_engines_and_plain_units_are_not_vllm(tmp_path):
    project = launches_of(tmp_path, "b.service", """\
        [Service]
        ExecStart=/usr/bin/python -m sglang.launch_server --model-path m
        ExecStartPost=/usr/bin/curl -s http://localhost:8000/health
        Environment=VLLM_USE_V1=1
        """)
    assert project.launches == []


def test_a_comment_inside_a_continued_command_makes_it_report_only(tmp_path):
    project = launches_of(tmp_path, "c.service", """\
        [Service]
        ExecStart=vllm serve m \\
        # the port the proxy expects
            --port 8000
        """)
    [launch] = project.launches
    assert [a.value for a in launch.argv] == ["vllm", "serve", "m", "--port", "8000"]
    assert launch.not_editable


def test_unreadable_unit_is_reported_and_the_rest_still_checked(tmp_path):
    (tmp_path / "bad.service").write_text("[Service]\nExecStart=vllm serve m\nthis is not a setting\n")
    (tmp_path / "serve.sh").write_text("#!/bin/sh\nvllm serve m --swap-space 4\n")
    result = run(["check", "."], tmp_path)
    assert "bad.service:3:" in result.output
    assert "serve.sh:2:" in result.output and "--swap-space" in result.output
    assert unit_error("[Service]\nExecStart=vllm serve m\nthis is not a setting\n").startswith("systemd unit: line 3")
    assert unit_error(UNIT) is None


def test_migrate_moves_the_scale_out_variable_into_execstart(tmp_path):
    """The 0.30.0 change: VLLM_ENABLE_SCALE_OUT_ENDPOINTS is ignored; `--enable-scale-out` goes on
    the command line. The pin in requirements.txt is the unit's environment (a host launch)."""
    (tmp_path / "requirements.txt").write_text("vllm==0.29.0\n")
    unit = tmp_path / "vllm.service"
    unit.write_text("[Service]\nEnvironment=VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n"
                    "ExecStart=/opt/venv/bin/vllm serve m --port 8000\n\n[Install]\nWantedBy=multi-user.target\n")
    result = run(["migrate", "--to", "0.30.0", "."], tmp_path)
    assert result.exit_code == 0, result.output
    assert unit.read_text() == ("[Service]\nExecStart=/opt/venv/bin/vllm serve m --port 8000 --enable-scale-out\n\n"
                                "[Install]\nWantedBy=multi-user.target\n")
    assert (tmp_path / "requirements.txt").read_text() == "vllm==0.30.0\n"
    again = run(["migrate", "--to", "0.30.0", "--diff", "."], tmp_path)
    assert "would change 0 files" in again.output


@pytest.mark.parametrize("line, after", [
    ('Environment="VLLM_USE_V1=1" "HF_HOME=/data"\n', 'Environment="HF_HOME=/data"\n'),
    ('Environment=HF_HOME=/data VLLM_USE_V1=1\n', 'Environment=HF_HOME=/data\n'),
    ('Environment=VLLM_USE_V1=1\n', ''),
])
def test_a_removed_variable_leaves_the_others(tmp_path, line, after):
    (tmp_path / "requirements.txt").write_text("vllm==0.11.0\n")
    unit = tmp_path / "vllm.service"
    unit.write_text(f"[Service]\n{line}ExecStart=vllm serve m --port 8000\n")
    run(["migrate", "--to", "0.30.0", "."], tmp_path)
    assert unit.read_text() == f"[Service]\n{after}ExecStart=vllm serve m --port 8000\n"
    assert unit_error(unit.read_text()) is None


def test_a_variable_in_a_continued_environment_line_is_reported_not_removed(tmp_path):
    (tmp_path / "requirements.txt").write_text("vllm==0.11.0\n")
    unit = tmp_path / "vllm.service"
    text = "[Service]\nEnvironment=HF_HOME=/data \\\n  VLLM_USE_V1=1\nExecStart=vllm serve m --port 8000\n"
    unit.write_text(text)
    result = run(["migrate", "--to", "0.30.0", "."], tmp_path)
    assert unit.read_text() == text
    assert "VLLM_USE_V1" in result.output
