"""Triton's vLLM backend: a model's model.json read as vLLM's engine arguments (parsers/triton.py)."""
from __future__ import annotations

import json
from pathlib import Path

from vllmlint.lint.discovery import classify
from vllmlint.model.launch import SourceFile, apply_edits, remove_args
from vllmlint.parsers.triton import parse_triton

MODEL = '{\n  "model": "m",\n  "enforce_eager": false,\n  "disable_log_requests": true\n}\n'


def repo(tmp_path: Path, backend: str, nested: bool = True) -> Path:
    folder = tmp_path / "model_repository" / "m"
    target = folder / "1" if nested else folder
    target.mkdir(parents=True)
    (folder / "config.pbtxt").write_text(f'backend: "{backend}"\nmax_batch_size: 0\n')
    (target / "model.json").write_text(MODEL)
    return target / "model.json"


def test_model_json_beside_a_vllm_config_is_read(tmp_path):
    for nested in (True, False):
        path = repo(tmp_path / str(nested), "vllm", nested)
        assert classify(path, path.read_bytes()) == "triton"


def test_model_json_of_another_backend_or_alone_is_not(tmp_path):
    path = repo(tmp_path, "python")
    assert classify(path, path.read_bytes()) is None
    alone = tmp_path / "model.json"
    alone.write_text(MODEL)
    assert classify(alone, alone.read_bytes()) is None


def test_members_are_flags_on_their_keys(tmp_path):
    path = repo(tmp_path, "vllm")
    source = SourceFile(path, "model.json", MODEL, "triton")
    [launch] = parse_triton(source).launches
    assert [a.value for a in launch.argv[1:]] == ["--model=m", "--no-enforce-eager", "--disable-log-requests"]
    assert launch.context == "Triton vLLM backend model m"
    model = launch.argv[1]
    # `--` on the key's first character, the name on the key, `=` on its closing quote, the value
    assert "".join(MODEL[o] for o in model.offsets) == 'mmmodel"m'


def test_removing_the_last_member_keeps_json(tmp_path):
    path = repo(tmp_path, "vllm")
    source = SourceFile(path, "model.json", MODEL, "triton")
    [launch] = parse_triton(source).launches
    edits = remove_args([launch.argv[-1]])
    out = apply_edits(MODEL, edits)
    assert json.loads(out) == {"model": "m", "enforce_eager": False}
