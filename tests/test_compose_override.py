"""docker compose merges `docker-compose.override.yml` (or `compose.override.yaml`) into the compose
file beside it by default: a service's environment and image set there are the launch's (found
as a user on Trinq2003/vllm-docker-compose: a `VLLM_ATTENTION_BACKEND` in the override was lost
when migrate bumped the image past the release that still read it)."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from vllmlint.cli import main

BASE = "services:\n  vllm:\n    image: vllm/vllm-openai:v0.10.1\n    command: --model m --port 8000\n"
OVERRIDE_ENV = "services:\n  vllm:\n    environment:\n      VLLM_ATTENTION_BACKEND: FLASHINFER\n"


def write(tmp_path: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)


def launches(tmp_path: Path) -> list[dict]:
    result = CliRunner().invoke(main, ["launches", "--format", "json", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def check(tmp_path: Path, *args: str) -> list[tuple[str, str, int]]:
    result = CliRunner().invoke(main, ["check", "--format", "json", *args, str(tmp_path)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return [(f["code"], Path(f["path"]).name, f["line"]) for f in json.loads(result.stdout)]


def test_the_override_beside_the_compose_file_adds_its_environment(tmp_path):
    write(tmp_path, {"docker-compose.yml": BASE, "docker-compose.override.yml": OVERRIDE_ENV})
    [row] = launches(tmp_path)
    assert row["env"] == {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}
    assert ("VL303", "docker-compose.override.yml", 4) in check(tmp_path, "--target-version", "0.33.0",
                                                                 "--select", "VL303")


def test_migrate_moves_the_override_variable_to_the_flag(tmp_path):
    override = "services:\n  vllm:\n    ports: [\"8000:8000\"]\n    environment:\n      VLLM_ATTENTION_BACKEND: FLASHINFER\n"
    write(tmp_path, {"docker-compose.yml": BASE, "docker-compose.override.yml": override})
    result = CliRunner().invoke(main, ["migrate", "--to", "0.33.0", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    assert (tmp_path / "docker-compose.yml").read_text() == BASE.replace("v0.10.1", "v0.33.0").replace(
        "--port 8000", "--port 8000 --attention-backend=FLASHINFER")
    assert (tmp_path / "docker-compose.override.yml").read_text() == "services:\n  vllm:\n    ports: [\"8000:8000\"]\n"


def test_a_fix_is_written_whole_or_not_at_all(tmp_path):
    """The variable is the override's only setting: removing it would leave `vllm:` empty,
    which compose refuses; so the flag is not added to the compose file either (half a move
    would change nothing now, but a fix is one change), and the finding is left for a human."""
    write(tmp_path, {"docker-compose.yml": BASE, "docker-compose.override.yml": OVERRIDE_ENV})
    result = CliRunner().invoke(main, ["migrate", "--to", "0.33.0", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 2, result.output          # a fix not applied is an error (E001)
    assert (tmp_path / "docker-compose.yml").read_text() == BASE.replace("v0.10.1", "v0.33.0")
    assert (tmp_path / "docker-compose.override.yml").read_text() == OVERRIDE_ENV
    assert "service vllm would be empty" in result.output


def test_an_override_variable_wins_over_the_compose_files(tmp_path):
    base = BASE + "    environment:\n      VLLM_LOGGING_LEVEL: INFO\n"
    override = "services:\n  vllm:\n    environment:\n      - VLLM_LOGGING_LEVEL=DEBUG\n"
    write(tmp_path, {"compose.yaml": base, "compose.override.yaml": override})
    [row] = launches(tmp_path)
    assert row["env"] == {"VLLM_LOGGING_LEVEL": "DEBUG"}


def test_the_override_image_is_the_one_that_runs(tmp_path):
    override = "services:\n  vllm:\n    image: vllm/vllm-openai:v0.8.5\n"
    write(tmp_path, {"docker-compose.yml": BASE, "docker-compose.override.yml": override})
    [row] = launches(tmp_path)
    assert row["image"] == "vllm/vllm-openai:v0.8.5" and row["release"] == "0.8.5"
    result = CliRunner().invoke(main, ["migrate", "--to", "0.33.0", "--diff", str(tmp_path)], catch_exceptions=False)
    # the override's tag is bumped; the compose file's, which does not run, is left (listed)
    assert "+    image: vllm/vllm-openai:v0.33.0" in result.stdout
    assert [line.endswith("docker-compose.override.yml") for line in result.stdout.splitlines()
            if line.startswith("+++ ")] == [True]


def test_no_merge_across_folders_services_or_names(tmp_path):
    write(tmp_path, {"a/docker-compose.yml": BASE,
                     "b/docker-compose.override.yml": OVERRIDE_ENV,                  # another folder
                     "c/docker-compose.yml": BASE,
                     "c/docker-compose.override.yml": OVERRIDE_ENV.replace("vllm:", "worker:"),   # another service
                     "d/stack.yml": BASE,                                             # not a default name
                     "d/docker-compose.override.yml": OVERRIDE_ENV})
    rows = launches(tmp_path)
    assert len(rows) == 3 and all(row["env"] == {} for row in rows), rows
