"""Kubernetes custom resources that start vLLM, and the look-alikes that do not (issue 13, item 3):
KServe ServingRuntime / InferenceService (and its Hugging Face server), LeaderWorkerSet, KubeAI
Model, KubeRay RayService.serveConfigV2. Positions and fixed bytes are fixture cases
(fixtures/VL302/{kserve,lws,kubeai,rayservice}-*, fixtures/VL303/...); here: what is a launch,
what is not, and how `vllmlint launches` says it was found."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from vllmlint.cli import main


def launches(tmp_path: Path, files: dict[str, str]) -> list[dict]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = CliRunner().invoke(main, ["launches", "--format", "json", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def check(tmp_path: Path, *args: str) -> list[dict]:
    result = CliRunner().invoke(main, ["check", "--format", "json", *args, str(tmp_path)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def fix(tmp_path: Path, name: str) -> str:
    """`check --fix` for the release the shapes are written for (they name none themselves)."""
    result = CliRunner().invoke(main, ["check", "--fix", "--target-version", "0.30.0", str(tmp_path)],
                                catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return (tmp_path / name).read_text()


def kubeai(engine: str, extra: str = "") -> str:
    return (f"apiVersion: kubeai.org/v1\nkind: Model\nmetadata:\n  name: m\nspec:\n  url: hf://org/m\n"
            f"  engine: {engine}\n{extra}")


# -- KubeAI ------------------------------------------------------------------------------------

def test_kubeai_engine_decides_not_the_flags(tmp_path):
    args = "  args:\n    - --max-model-len=8192\n    - --swap-space=4\n"
    for engine in ("OLlama", "Infinity", "FasterWhisper"):
        assert launches(tmp_path, {"m.yaml": kubeai(engine, args)}) == [], engine
    rows = launches(tmp_path, {"m.yaml": kubeai("VLLM", args)})
    assert [r["argv"] for r in rows] == [["vllm", "serve", "--max-model-len=8192", "--swap-space=4"]]
    assert rows[0]["via"] == "via KubeAI Model/m, engine: VLLM (line 7)" and rows[0]["editable"]


def test_kubeai_vllm_model_without_args_is_a_launch_its_env_checked(tmp_path):
    rows = launches(tmp_path, {"m.yaml": kubeai("VLLM", '  env:\n    VLLM_USE_V1: "1"\n')})
    assert len(rows) == 1 and rows[0]["editable"] is False and rows[0]["env"] == {"VLLM_USE_V1": "1"}
    assert [(f["code"], f["line"]) for f in check(tmp_path, "--select", "VL303")] == [("VL303", 9)]


def test_kubeai_engine_without_any_vllm_flag_is_still_vllm(tmp_path):
    rows = launches(tmp_path, {"m.yaml": kubeai("VLLM", "  args: [--trust-remote-code]\n")})
    assert [r["argv"] for r in rows] == [["vllm", "serve", "--trust-remote-code"]]


def test_kubeai_other_engine_env_is_not_reported(tmp_path):
    (tmp_path / "m.yaml").write_text(kubeai("OLlama", '  args: [--swap-space=4]\n  env:\n    VLLM_USE_V1: "1"\n'))
    assert check(tmp_path) == []


# -- KServe ------------------------------------------------------------------------------------

HF = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: s
spec:
  predictor:
    model:
      modelFormat:
        name: huggingface
      args:
        - --model_name=s
        - --model_id=org/s
{extra}"""


def test_hf_server_is_vllm_only_with_backend_vllm(tmp_path):
    assert launches(tmp_path, {"s.yaml": HF.format(extra="        - --max-model-len=4096\n")}) == []
    assert launches(tmp_path, {"s.yaml": HF.format(extra="        - --backend=huggingface\n")}) == []
    rows = launches(tmp_path, {"s.yaml": HF.format(extra="        - --backend\n        - vllm\n")})
    assert len(rows) == 1 and rows[0]["kind"] == "other" and rows[0]["line"] == 13
    assert rows[0]["via"].startswith("via KServe huggingfaceserver --backend=vllm")


def test_hf_server_flags_are_never_read_as_vllm_serve(tmp_path):
    text = HF.format(extra="        - --backend=vllm\n        - --swap-space=4\n")
    (tmp_path / "s.yaml").write_text(text)
    assert check(tmp_path) == []          # neither --model_name (KServe's) nor --swap-space (ignored)


def test_hf_server_image_and_module(tmp_path):
    container = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: c\n"
                 "      image: {image}\n      args: [{args}]\n")
    for image in ("kserve/huggingfaceserver:v0.15.2", "registry.local/kserve/huggingfaceserver-gpu@sha256:ab12"):
        assert launches(tmp_path, {"p.yaml": container.format(image=image, args="--max-model-len=8")}) == []
    text = container.format(image="python:3.11", args='"python", "-m", "huggingfaceserver", "--backend=vllm"')
    assert [r["kind"] for r in launches(tmp_path, {"p.yaml": text})] == ["other"]


def test_inference_service_of_vllm_format_is_vllm_whatever_its_flags(tmp_path):
    text = ("apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: c\nspec:\n"
            "  predictor:\n    model:\n      modelFormat:\n        name: vLLM\n      args: [--dtype=half]\n")
    rows = launches(tmp_path, {"i.yaml": text})
    assert [r["argv"] for r in rows] == [["vllm", "serve", "--dtype=half"]]
    assert rows[0]["via"].startswith("via KServe modelFormat vLLM")


# -- LeaderWorkerSet ---------------------------------------------------------------------------

def test_lws_leader_is_the_launch_the_ray_worker_is_not(tmp_path):
    fixture = Path(__file__).resolve().parent.parent / "fixtures/VL302/lws-leader-bash-c/input/lws.yaml"
    rows = launches(tmp_path, {"lws.yaml": fixture.read_text()})
    assert [(r["line"], r["context"]) for r in rows] == [(23, "container leader (LeaderWorkerSet/big-model)")]


# -- Ray Serve ---------------------------------------------------------------------------------

RAY = """\
apiVersion: ray.io/v1
kind: RayService
metadata:
  name: r
spec:
  serveConfigV2: {style}
    applications:
      - name: a
        import_path: {path}
        args:
          llm_configs:
            - model_loading_config: {{model_id: one}}
              engine_kwargs:
                swap_space: 4
            - model_loading_config: {{model_id: two}}
              engine_kwargs: {{max_model_len: 4096}}
            - configs/three.yaml
"""


def test_rayservice_each_llm_config_is_an_engine(tmp_path):
    rows = launches(tmp_path, {"r.yaml": RAY.format(style="|", path="ray.serve.llm:build_openai_app")})
    assert [(r["kind"], r["line"], r["argv"]) for r in rows] == [
        ("engine", 13, ["ray.serve.llm.LLMConfig", "--swap-space=4"]),
        ("engine", 16, ["ray.serve.llm.LLMConfig", "--max-model-len=4096"])]
    assert rows[0]["via"] == "via Ray Serve LLM application a (engine_kwargs at line 13)"
    found = check(tmp_path, "--select", "VL302")
    assert [(f["line"], f["column"], f["fixable"]) for f in found] == [(14, 17, False)]


def test_rayservice_user_application_is_not_read(tmp_path):
    assert launches(tmp_path, {"r.yaml": RAY.format(style="|", path="my_pkg.app:build")}) == []


def test_rayservice_folded_config_is_not_read_and_says_so(tmp_path):
    (tmp_path / "r.yaml").write_text(RAY.format(style=">", path="ray.serve.llm:build_openai_app"))
    result = CliRunner().invoke(main, ["launches", "--format", "json", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0 and json.loads(result.stdout) == []


def test_engine_kwarg_alone_in_its_mapping_is_not_removed(tmp_path):
    text = RAY.format(style="|", path="ray.serve.llm:build_openai_app").replace(
        "swap_space: 4", "disable_log_requests: true")
    (tmp_path / "r.yaml").write_text(text)
    found = check(tmp_path, "--select", "VL302")
    assert [(f["line"], f["fixable"]) for f in found] == [(14, False)]     # engine_kwargs would be null


# -- shell: arrays and redirects ---------------------------------------------------------------

def test_array_last_element_after_a_comment_line_leaves_the_paren(tmp_path):
    (tmp_path / "a.sh").write_text('#!/bin/bash\nA=(vllm serve m # the model\n  --disable-log-requests)\n"${A[@]}"\n')
    assert [(f["line"], f["column"]) for f in check(tmp_path, "--select", "VL302")] == [(3, 3)]
    assert fix(tmp_path, "a.sh") == '#!/bin/bash\nA=(vllm serve m # the model\n)\n"${A[@]}"\n'


def test_array_element_on_its_own_line_goes_with_its_line(tmp_path):
    (tmp_path / "a.sh").write_text('#!/bin/bash\nA=(vllm serve m\n  --disable-log-requests\n  --port 1\n)\n"${A[@]}"\n')
    assert fix(tmp_path, "a.sh") == '#!/bin/bash\nA=(vllm serve m\n  --port 1\n)\n"${A[@]}"\n'


def test_removal_before_a_redirect_keeps_one_blank(tmp_path):
    (tmp_path / "a.sh").write_text("#!/bin/bash\nvllm serve m  --disable-log-requests > log 2>&1\n"
                                   "vllm serve m --disable-log-requests   2> err\n")
    assert fix(tmp_path, "a.sh") == "#!/bin/bash\nvllm serve m > log 2>&1\nvllm serve m 2> err\n"


def test_kubeai_chart_catalogue_entries_by_engine(tmp_path):
    values = ("catalog:\n  a:\n    url: hf://org/a\n    engine: VLLM\n    env:\n      VLLM_USE_V1: \"1\"\n"
              "  b:\n    url: ollama://b\n    engine: OLlama\n  c:\n    url: hf://org/c\n    engine: VLLM\n"
              "    args: [--swap-space=4]\n")
    rows = launches(tmp_path, {"values.yaml": values})
    assert [(r["line"], r["argv"], r["env"]) for r in rows] == [
        (3, ["vllm", "serve"], {"VLLM_USE_V1": "1"}), (13, ["vllm", "serve", "--swap-space=4"], {})]


def test_inference_service_naming_a_vllm_runtime_is_vllm(tmp_path):
    text = ("apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: c\nspec:\n"
            "  predictor:\n    model:\n      modelFormat:\n        name: huggingface\n"
            "      runtime: team-vllm-runtime\n      args: [--dtype=half]\n")
    rows = launches(tmp_path, {"i.yaml": text})
    assert [r["argv"] for r in rows] == [["vllm", "serve", "--dtype=half"]]
    text = text.replace("team-vllm-runtime", "kserve-huggingfaceserver")
    assert launches(tmp_path, {"i.yaml": text}) == []


def test_hf_server_image_running_vllm_serve_itself_is_a_plain_launch(tmp_path):
    text = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: c\n"
            "      image: kserve/huggingfaceserver:v0.15.2-gpu\n"
            "      command: [vllm, serve, org/m, --swap-space, '4']\n")
    rows = launches(tmp_path, {"p.yaml": text})
    assert [(r["kind"], r["argv"]) for r in rows] == [("serve", ["vllm", "serve", "org/m", "--swap-space", "4"])]


# -- KServe: a predictor runs the ServingRuntime it names (found on robertgshaw2-neuralmagic/vllm-k8s)

def runtime(name: str, image: str, kind: str = "ServingRuntime", extra: str = "") -> str:
    return (f"apiVersion: serving.kserve.io/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n"
            f"  supportedModelFormats:\n    - name: huggingface\n      autoSelect: true\n"
            f"  containers:\n    - name: kserve-container\n      image: {image}\n{extra}")


def isvc(runtime_name: str, fmt: str = "huggingface") -> str:
    return (f"apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: chat\nspec:\n"
            f"  predictor:\n    model:\n      runtime: {runtime_name}\n      modelFormat:\n        name: {fmt}\n"
            f"      args:\n        - --model=/mnt/models\n        - --disable-log-requests\n")


def migrate_diff(tmp_path: Path, to: str = "0.30.0") -> str:
    result = CliRunner().invoke(main, ["migrate", "--to", to, "--diff", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return result.output


def test_predictor_takes_its_runtimes_image_release_and_env(tmp_path):
    env = "      env:\n        - name: VLLM_USE_V1\n          value: \"1\"\n"
    rows = launches(tmp_path, {"all.yaml": runtime("nm-llm", "vllm/vllm-openai:v0.8.5", extra=env) + "---\n"
                               + isvc("nm-llm")})
    chat = [r for r in rows if "InferenceService" in r["context"]]
    # the runtime's name says nothing of vLLM: its image in the same file does
    assert [r["argv"] for r in chat] == [["vllm", "serve", "--model=/mnt/models", "--disable-log-requests"]]
    assert chat[0]["release"] == "0.8.5" and chat[0]["env"] == {"VLLM_USE_V1": "1"}
    assert chat[0]["via"].startswith("via KServe runtime nm-llm")
    found = check(tmp_path, "--select", "VL302")
    assert [f["line"] for f in found] == [28] and "runs 0.8.5 today" in found[0]["message"]


def test_predictor_and_runtime_in_two_files_migrate_together(tmp_path):
    (tmp_path / "runtime.yaml").write_text(runtime("nm-vllm", "vllm/vllm-openai:v0.8.5", kind="ClusterServingRuntime"))
    (tmp_path / "isvc.yaml").write_text(isvc("nm-vllm"))
    rows = launches(tmp_path, {})
    assert {r["release"] for r in rows} == {"0.8.5"}
    diff = migrate_diff(tmp_path)
    # the tag is bumped because the predictor (another file) runs it, and its flag goes with it
    assert "-      image: vllm/vllm-openai:v0.8.5\n+      image: vllm/vllm-openai:v0.30.0" in diff
    assert "-        - --disable-log-requests\n" in diff


def test_predictor_of_an_ambiguous_or_absent_runtime_keeps_an_unknown_release(tmp_path):
    for folder, tag in (("a", "v0.8.5"), ("b", "v0.10.0")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "runtime.yaml").write_text(runtime("team-vllm", f"vllm/vllm-openai:{tag}"))
    (tmp_path / "isvc.yaml").write_text(isvc("team-vllm"))
    chat = [r for r in launches(tmp_path, {}) if "InferenceService" in r["context"]]
    assert len(chat) == 1 and chat[0]["release"] is None      # two runtimes of that name differ: no guess
    (tmp_path / "isvc.yaml").write_text(isvc("other-vllm"))
    chat = [r for r in launches(tmp_path, {}) if "InferenceService" in r["context"]]
    assert len(chat) == 1 and chat[0]["release"] is None


def test_predictor_of_a_runtime_that_runs_something_else_is_no_launch(tmp_path):
    # the runtime's command replaces vLLM's entrypoint (a `sleep` debug pod): its name decides nothing
    text = runtime("nm-llm", "vllm/vllm-openai:v0.8.5", extra="      command: [sleep]\n      args: [infinity]\n")
    assert launches(tmp_path, {"all.yaml": text + "---\n" + isvc("nm-llm")}) == []
    # and KServe's own Hugging Face runtime of that name stays KServe's
    text = runtime("nm-llm", "kserve/huggingfaceserver:v0.15.2")
    assert launches(tmp_path, {"all.yaml": text + "---\n" + isvc("nm-llm")}) == []
