"""Which files are read: by the markers of knowledge/launchers.py, one table of every way vLLM
is started (a file that shows none is not parsed)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from vllmlint.knowledge.images import BUILTIN_VLLM_IMAGES
from vllmlint.knowledge.launchers import LAUNCH_MARKERS, may_launch
from vllmlint.lint.project import parse_source
from vllmlint.model.launch import SourceFile

RAY_APP = """from ray import serve
from ray.serve.llm import LLMConfig, build_openai_app

config = LLMConfig(model_loading_config=dict(model_id="q"), engine_kwargs=dict(max_model_len=8192))
serve.run(build_openai_app({"llm_configs": [config]}))
"""


def python(text: str) -> SourceFile:
    return SourceFile(Path("/x/app.py"), "app.py", text, "python")


@pytest.mark.parametrize("glob", BUILTIN_VLLM_IMAGES)
def test_every_builtin_vllm_image_is_a_marker(glob):
    image = glob.replace("*", "registry.example/x")
    for kind in ("yaml", "shell", "dockerfile", "python"):
        assert may_launch(f"image: {image}:v0.30.0", kind), (image, kind)


def test_every_marker_compiles_and_says_what_it_is():
    for m in LAUNCH_MARKERS:
        re.compile(m.pattern)
        assert m.what and m.kinds


def test_ray_serve_app_that_never_says_vllm_is_read():
    assert "vllm" not in RAY_APP.lower()
    assert may_launch(RAY_APP, "python")
    pf = parse_source(python(RAY_APP))
    assert [(l.program, l.line) for l in pf.launches] == [("ray.serve.llm.LLMConfig", 4)]
    assert [a.value for a in pf.launches[0].argv[1:]] == ["--max-model-len=8192"]


def test_ray_llm_import_path_counts_too():
    text = RAY_APP.replace("from ray.serve.llm import", "from ray.llm import")
    assert [l.program for l in parse_source(python(text)).launches] == ["ray.serve.llm.LLMConfig"]


def test_another_engines_launcher_is_not_parsed():
    text = 'import subprocess\nsubprocess.run(["python", "-m", "sglang.launch_server", "--port", "30000"])\n'
    assert not may_launch(text, "python")
    assert parse_source(python(text)).launches == []


def test_an_llmconfig_of_another_library_is_read_but_no_launch():
    text = "from mylib.serve.llm import LLMConfig\nLLMConfig(engine_kwargs=dict(max_model_len=1))\n" \
           "# build_openai_app is ours too\n"
    assert may_launch(text, "python")        # read (a marker shows) ...
    assert parse_source(python(text)).launches == []      # ... but LLMConfig is not Ray's


def test_kubeai_engine_in_capitals_is_a_yaml_marker_only():
    assert may_launch("kind: Model\nspec:\n  engine: VLLM\n", "yaml")
    assert not may_launch("engine: VLLM\n", "python")


def test_ray_model_source_is_the_model_as_in_a_rayservice():
    text = RAY_APP.replace('dict(model_id="q")', 'dict(model_id="q", model_source="org/m")')
    [launch] = parse_source(python(text)).launches
    assert [a.value for a in launch.argv[1:]] == ["--model=org/m", "--max-model-len=8192"]
