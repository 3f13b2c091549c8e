"""Python launchers that start vLLM in a container with the docker SDK, and argv lists that
helper functions of the same file return (parsers/pythonfile.py)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from vllmlint.model.launch import SERVE, SourceFile, apply_edits
from vllmlint.parsers.pythonfile import parse_python


def src(text: str) -> SourceFile:
    return SourceFile(path=Path("/tmp/x.py"), display="x.py", text=textwrap.dedent(text), kind="python")


def raw(source: SourceFile, span) -> str:
    return source.text[span[0]:span[1]]


def test_command_list_and_environment_dict():
    source = src("""
        import docker
        c = docker.from_env()
        c.containers.run("vllm/vllm-openai:v0.29.0", ["--model", "m", "--swap-space", "4"],
                         environment={"VLLM_USE_V1": "1", "HF_TOKEN": "t"}, detach=True)
    """)
    [launch] = parse_python(source).launches
    assert launch.kind == SERVE and launch.image == "vllm/vllm-openai:v0.29.0" and launch.line == 4
    assert [a.value for a in launch.argv] == ["vllm", "serve", "--model", "m", "--swap-space", "4"]
    assert raw(source, launch.flag_value("--swap-space").span) == '"4"'
    assert [(e.name, e.value, e.origin) for e in launch.env] == [("VLLM_USE_V1", "1", "docker SDK environment"),
                                                                  ("HF_TOKEN", "t", "docker SDK environment")]
    assert "via docker SDK containers.run" in launch.via and "its entrypoint: vllm serve" in launch.via
    # one more flag goes into the list
    assert apply_edits(source.text, [launch.append_edit("--enable-scale-out")]).count(
        '"4", "--enable-scale-out"]') == 1


def test_command_string_is_split_like_shlex_with_exact_spans():
    source = src("""
        import docker
        docker.from_env().containers.create(image="vllm/vllm-openai:v0.29.0",
            command="m --served-model-name 'a b' --chat-template \\"x y\\" --swap-space=4",
            environment=["VLLM_USE_V1=1"])
    """)
    [launch] = parse_python(source).launches
    assert [a.value for a in launch.options] == ["m", "--served-model-name", "a b", "--chat-template", "x y",
                                                 "--swap-space=4"]
    assert raw(source, launch.flag_value("--served-model-name").span) == "'a b'"
    assert raw(source, launch.flag_value("--chat-template").span) == '\\"x y\\"'
    arg = launch.flag_value("--swap-space")
    assert raw(source, arg.span) == "4"
    [env] = launch.env
    assert (env.name, env.value, raw(source, env.span)) == ("VLLM_USE_V1", "1", '"VLLM_USE_V1=1"')
    fixed = apply_edits(source.text, [launch.append_edit("--x={\"a\": 1}")])
    assert "--swap-space=4 '--x={\\\"a\\\": 1}'\"" in fixed
    compile(fixed, "x.py", "exec")


def test_image_bound_to_a_name_and_command_from_a_helper():
    source = src("""
        import docker
        IMAGE = "vllm/vllm-openai:v0.29.0"
        def args(m):
            return ["--model", m, "--disable-log-requests"]
        def go(client):
            client.containers.run(IMAGE, command=args("x"))
    """)
    [launch] = parse_python(source).launches
    assert launch.line == 7 and raw(source, launch.span) == "IMAGE"
    assert "image IMAGE = vllm/vllm-openai:v0.29.0 (line 3)" in launch.via
    assert raw(source, launch.flag_args("--disable-log-requests").__next__()[1].span) == '"--disable-log-requests"'


@pytest.mark.parametrize("call", [
    'c.containers.run("lmsysorg/sglang:latest", "--model-path m --swap-space 4")',
    'c.containers.run("ghcr.io/huggingface/text-generation-inference:3", ["--model-id", "m"])',
    'c.containers.run(image_name, "--model m")',                    # image not known here
    'c.containers.run("vllm/vllm-openai:v0.29.0", ["python3", "job.py", "--swap-space", "4"])',
    'c.containers.run("vllm/vllm-openai:v0.29.0", entrypoint="python3", command=["x.py"])',
    'c.images.run("vllm/vllm-openai:v0.29.0", "--model m")',        # not containers.run
])
def test_not_a_vllm_container(call):
    source = src(f"""
        import docker
        c = docker.from_env()
        {call}
    """)
    assert parse_python(source).launches == []


def test_helper_lists_joined_by_the_caller():
    source = src("""
        import subprocess
        def base():
            return ["vllm", "serve"]
        def flags(m):
            cmd = [m, "--swap-space", "4"]
            return cmd
        def main():
            cmd = base()
            cmd += flags("m")
            cmd.append("--enforce-eager")
            subprocess.run(cmd)
    """)
    [launch] = parse_python(source).launches
    assert [a.value for a in launch.argv] == ["vllm", "serve", "m", "--swap-space", "4", "--enforce-eager"]
    assert launch.context == "python launcher main()"
    assert raw(source, launch.flag_value("--swap-space").span) == '"4"'


def test_helper_with_two_different_returns_is_not_guessed():
    source = src("""
        import subprocess
        def flags(fast):
            if fast:
                return ["--enforce-eager"]
            return ["--swap-space", "4"]
        def main():
            subprocess.run(["vllm", "serve", "m"] + flags(True))
    """)
    [launch] = parse_python(source).launches
    assert [a.value for a in launch.argv] == ["vllm", "serve", "m", "flags(True)"]
    assert launch.argv[-1].dynamic and launch.not_editable


def test_image_with_a_runtime_tag():
    source = src("""
        import docker
        TAG = "v0.29.0"
        docker.from_env().containers.run(f"vllm/vllm-openai:{TAG}", "--model m --swap-space 4")
        docker.from_env().containers.run(f"{REG}/sglang:{TAG}", "--model m --swap-space 4")
    """)
    [launch] = parse_python(source).launches
    assert launch.image == "vllm/vllm-openai:{TAG}" and launch.line == 4


def test_low_level_api_create_container():
    source = src("""
        import docker
        api = docker.APIClient()
        api.create_container("vllm/vllm-openai:v0.29.0", command=["--model", "m", "--swap-space", "4"],
                             environment={"VLLM_USE_V1": "1"})
    """)
    [launch] = parse_python(source).launches
    assert launch.via.startswith("via docker SDK create_container") and launch.env[0].name == "VLLM_USE_V1"
    assert raw(source, launch.flag_value("--swap-space").span) == '"4"'


def test_docker_run_argv_list():
    source = src("""
        import subprocess
        BASE = ["podman", "run", "--rm", "--device", "nvidia.com/gpu=all"]
        subprocess.run(BASE + ["-e", "VLLM_USE_V1=1", "--env=A=b", "docker.io/vllm/vllm-openai:v0.29.0",
                               "--model", "m", "--swap-space", "4"])
        subprocess.run(["docker", "run", "vllm/vllm-openai:v0.29.0", "vllm", "serve", "m", "--port", "1"])
        subprocess.run(["docker", "run", "vllm/vllm-openai:v0.29.0", "python3", "bench.py", "--swap-space", "4"])
        subprocess.run(["docker", "run", "lmsysorg/sglang:latest", "--model-path", "m", "--swap-space", "4"])
        subprocess.run(["docker", "run", "--entrypoint", "bash", "vllm/vllm-openai:v0.29.0", "-c", "x"])
    """)
    first, second = parse_python(source).launches
    assert [a.value for a in first.argv] == ["vllm", "serve", "--model", "m", "--swap-space", "4"]
    assert first.image == "docker.io/vllm/vllm-openai:v0.29.0" and first.via.startswith("via podman run argv list")
    assert [(e.name, e.value, raw(source, e.span)) for e in first.env] == [
        ("VLLM_USE_V1", "1", '"-e", "VLLM_USE_V1=1"'), ("A", "b", '"--env=A=b"')]
    assert apply_edits(source.text, first.env[0].removal).count('BASE + ["--env=A=b", ') == 1
    assert raw(source, first.flag_value("--swap-space").span) == '"4"'
    assert [a.value for a in second.argv] == ["vllm", "serve", "m", "--port", "1"] and second.options_start == 2
