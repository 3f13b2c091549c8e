"""How launches are found in wrappers (issue 13): what is a launch, what is not, and what
`vllmlint launches` says about how each was found. Positions and fixed bytes of the same shapes
are fixture cases (fixtures/VL302/shell-*, ci-*, VL303/shell-*)."""
from __future__ import annotations

import pytest

import json
from pathlib import Path

from click.testing import CliRunner

from vllmlint.cli import main
from vllmlint.parsers.shell_lex import Redirect, commands, exclusive, lex


def launches(tmp_path: Path, files: dict[str, str]) -> list[dict]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    result = CliRunner().invoke(main, ["launches", "--format", "json", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def check(tmp_path: Path) -> list[dict]:
    result = CliRunner().invoke(main, ["check", "--format", "json", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_dockerfile_from_vllm_without_cmd_is_no_launch(tmp_path):
    assert launches(tmp_path, {"Dockerfile": "FROM vllm/vllm-openai:v0.30.0\nRUN pip install -U transformers\n"}) == []


def test_dockerfile_from_vllm_with_vllm_env_configures_the_engine(tmp_path):
    rows = launches(tmp_path, {"Dockerfile": "FROM vllm/vllm-openai:v0.30.0\nENV VLLM_USE_V1=1\n"})
    assert len(rows) == 1 and rows[0]["editable"] is False


def test_dstack_dev_environment_is_no_launch(tmp_path):
    text = "type: dev-environment\nimage: vllm/vllm-openai:latest\nenv:\n  - PYTHONPATH=/w\nide: vscode\n"
    assert launches(tmp_path, {".dstack.yml": text}) == []


def test_printed_command_is_no_launch_and_eval_of_it_is_one(tmp_path):
    script = '#!/bin/sh\nCMD="vllm serve m --port 1"\necho $CMD\nprintf "%s\\n" $CMD\n'
    assert launches(tmp_path, {"a.sh": script}) == []
    rows = launches(tmp_path, {"a.sh": script + 'eval "$CMD"\n'})
    assert [r["argv"] for r in rows] == [["vllm", "serve", "m", "--port", "1"]]
    assert rows[0]["via"] == "via eval $CMD, CMD assigned at line 2"


def test_exclusive_arms_give_one_launch_with_every_flag(tmp_path):
    script = ('#!/bin/bash\nif [ "$M" = a ]; then\n  ARGS="--model a --swap-space 4"\nelse\n'
              '  ARGS="--model b --port 9"\nfi\ndocker run --gpus all vllm/vllm-openai:v0.30.0 $ARGS\n')
    rows = launches(tmp_path, {"a.sh": script})
    assert len(rows) == 1
    assert rows[0]["argv"] == ["vllm", "serve", "--model", "a", "--swap-space", "4", "--model", "b", "--port", "9"]
    assert "$ARGS assigned at line 3, 5" in rows[0]["via"]


def test_plain_reassignment_replaces(tmp_path):
    script = '#!/bin/bash\nARGS="--swap-space 4"\nARGS="--port 9"\nvllm serve m $ARGS\n'
    rows = launches(tmp_path, {"a.sh": script})
    assert rows[0]["argv"] == ["vllm", "serve", "m", "--port", "9"]


def test_single_word_variables_stay_as_written(tmp_path):
    rows = launches(tmp_path, {"a.sh": '#!/bin/sh\nMODEL=Qwen/Qwen3-8B\nvllm serve $MODEL --port 1\n'})
    assert rows[0]["argv"] == ["vllm", "serve", "$MODEL", "--port", "1"]


def test_via_names_the_image_variable_and_its_line(tmp_path):
    script = ("#!/bin/sh\nIMAGE=vllm/vllm-openai:v0.29.0\n\ndocker run --rm -p 8000:8000 \\\n"
              '  "$IMAGE" --model m\n')
    rows = launches(tmp_path, {"a.sh": script})
    assert rows[0]["via"] == ("via docker run, image $IMAGE = vllm/vllm-openai:v0.29.0 (line 2) "
                              "(its entrypoint: vllm serve)")
    assert rows[0]["release"] == "0.29.0"


def test_entrypoint_replaces_the_image_entrypoint(tmp_path):
    script = "#!/bin/sh\ndocker run --entrypoint /bin/sleep vllm/vllm-openai:v0.30.0 infinity\n"
    assert launches(tmp_path, {"a.sh": script}) == []


def test_other_images_with_vllm_like_flags_are_not_vllm(tmp_path):
    script = ("#!/bin/sh\ndocker run lmsysorg/sglang:latest --tensor-parallel-size 2 --max-model-len 9\n"
              "podman run ghcr.io/huggingface/text-generation-inference:3 --max-model-len 9\n")
    assert launches(tmp_path, {"a.sh": script}) == []


def test_apptainer_definition_in_unquoted_heredoc(tmp_path):
    script = ("#!/bin/bash\ncat > \"$DEF\" <<EOF\nBootstrap: docker\nFrom: vllm/vllm-openai:v0.30.0\n\n"
              "%startscript\n    exec python3 -m vllm.entrypoints.openai.api_server \\\\\n"
              "      --model /m --swap-space 4\nEOF\napptainer build x.sif \"$DEF\"\n")
    rows = launches(tmp_path, {"a.sh": script})
    assert [r["argv"] for r in rows] == [["python3", "-m", "vllm.entrypoints.openai.api_server",
                                          "--model", "/m", "--swap-space", "4"]]
    assert rows[0]["via"].startswith("via heredoc at line 2")
    assert rows[0]["release"] == "0.30.0"


def test_template_action_glued_to_a_flag_is_one_runtime_token(tmp_path):
    text = ("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  template:\n"
            "    spec:\n      containers:\n        - name: {{ .Chart.Name }}\n"
            "          image: vllm/vllm-openai:v0.30.0\n          args:\n"
            "            - --max-model-len={{ .Values.maxModelLen }}\n"
            "            - --swap-space={{ .Values.swap }}\n"
            "            - --tensor-parallel-size {{ .Values.tp | default 1 }}\n"
            "          env:\n            - name: VLLM_LOGGING_LEVEL\n              value: {{ .Values.level }}\n")
    rows = launches(tmp_path, {"templates/deployment.yaml": text})
    assert len(rows) == 1
    row = rows[0]
    assert row["argv"][2:] == ["--max-model-len={{ .Values.maxModelLen }}", "--swap-space={{ .Values.swap }}",
                               "--tensor-parallel-size {{ .Values.tp | default 1 }}"]
    assert row["context"] == "container {{ .Chart.Name }} (Deployment/{{ .Release.Name }})"
    shown = json.dumps(rows) + json.dumps(check(tmp_path))
    assert "xxx" not in shown
    assert any(f["code"] == "VL302" and "--swap-space" in f["message"] for f in check(tmp_path))


def test_lexer_keeps_redirections_only_when_asked():
    src = "kubectl apply -f - <<EOF\na: 1\nEOF\ncat > x.yaml <<'E'\nb: 2\nE\n"
    assert not any(isinstance(t, Redirect) for t in lex(src))
    cmds = commands(src)
    doc = cmds[0].redirects[0].heredoc
    assert src[doc.body_start:doc.body_end] == "a: 1\n" and not doc.quoted
    assert [r.target.value for r in cmds[1].redirects if r.target] == ["x.yaml"]
    assert cmds[1].redirects[1].heredoc.quoted


def test_branches_of_if_and_case():
    cmds = commands("if a; then X=1; elif b; then X=2; else X=3; fi\ncase $m in a) Y=1 ;; b) Y=2 ;; esac\nZ=1\n")
    by = {c.assignments[0].value: c.branch for c in cmds if c.assignments}
    assert exclusive(by["X=1"], by["X=2"]) and exclusive(by["X=2"], by["X=3"])
    assert exclusive(by["Y=1"], by["Y=2"])
    assert not exclusive(by["X=1"], by["Z=1"]) and not exclusive(by["Y=1"], by["X=1"])


def test_container_options_from_arrays_and_option_variables(tmp_path):
    script = ('#!/bin/bash\nrun_opts=(--gpus all -p 8000:8000)\ndocker run "${run_opts[@]}" $GPU_FLAGS \\\n'
              '  "${EXTRA_RUN_OPTS[@]}" vllm/vllm-openai:v0.30.0 --model m --swap-space 4\n')
    rows = launches(tmp_path, {"a.sh": script})
    assert [r["argv"] for r in rows] == [["vllm", "serve", "--model", "m", "--swap-space", "4"]]


def test_kuberay_pods_run_ray_not_the_image_entrypoint(tmp_path):
    text = ("apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: r\nspec:\n  headGroupSpec:\n"
            "    template:\n      spec:\n        containers:\n        - name: head\n"
            "          image: vllm/vllm-openai:v0.30.0\n")
    assert launches(tmp_path, {"ray.yaml": text}) == []


@pytest.mark.parametrize("kind", ["RayClusterFleet", "RayClusterReplicaSet"])
def test_aibrix_ray_fleets_run_ray_in_their_workers(kind, tmp_path):
    """AIBrix's fleets hold a RayCluster template: KubeRay runs `ray start` in a worker given no
    command, never the image's `vllm serve`; the head's own command is still read."""
    text = (f"apiVersion: orchestration.aibrix.ai/v1alpha1\nkind: {kind}\nmetadata:\n  name: f\nspec:\n"
            "  template:\n    spec:\n      headGroupSpec:\n        template:\n          spec:\n            containers:\n"
            "            - name: ray-head\n              image: vllm/vllm-openai:v0.11.0\n"
            "              command: [/bin/bash, -c]\n              args: [\"ray start --head && vllm serve m --port 8000\"]\n"
            "      workerGroupSpecs:\n      - groupName: g\n        template:\n          spec:\n            containers:\n"
            "            - name: ray-worker\n              image: vllm/vllm-openai:v0.11.0\n")
    rows = launches(tmp_path, {"fleet.yaml": text})
    assert [(r["argv"], r["context"].split(" (")[0]) for r in rows] == \
        [(["vllm", "serve", "m", "--port", "8000"], "container ray-head")]


def test_dstack_commands_replace_the_entrypoint(tmp_path):
    text = ("type: service\nimage: vllm/vllm-openai:v0.30.0\nenv:\n  - MODEL=m\ncommands:\n"
            "  - vllm serve $MODEL --port 8000\nport: 8000\n")
    rows = launches(tmp_path, {"svc.dstack.yml": text})
    assert [r["argv"] for r in rows] == [["vllm", "serve", "$MODEL", "--port", "8000"]]


def test_same_engine_in_exclusive_arms_is_marked_once(tmp_path):
    script = ('#!/bin/bash\ncase "$RUNTIME" in\n  docker)\n    docker run vllm/vllm-openai:v0.30.0 --model m ;;\n'
              '  podman)\n    podman run vllm/vllm-openai:v0.30.0 --model m ;;\nesac\n'
              'if [ "$ROLE" = prefill ]; then\n  vllm serve m --port 8100\nelse\n  vllm serve m --port 8200\nfi\n')
    rows = launches(tmp_path, {"a.sh": script})
    assert [(r["line"], r["alternative_of"]) for r in rows] == [(4, None), (6, 4), (9, None), (11, None)]


def test_launches_in_for_loops_count_their_iterations(tmp_path):
    script = ('#!/bin/bash\nTOPOLOGY="${PD_TOPOLOGY:-3p1d}"\n'
              'if [[ ! "${TOPOLOGY}" =~ ^([1-9][0-9]*)p([1-9][0-9]*)d$ ]]; then exit 2; fi\n'
              'PREFILL="${BASH_REMATCH[1]}"\nGPUS=(0 1)\n'
              'for (( i=0; i<PREFILL; i++ )); do\n  vllm serve m --port 810$i &\ndone\n'
              'for g in "${GPUS[@]}"; do CUDA_VISIBLE_DEVICES=$g vllm serve m --port 820$g & done\n'
              'for p in {1..4}; do vllm serve m --port 830$p & done\n'
              'for n in $(seq 2 3); do vllm serve m --port 840$n & done\n'
              'for f in "$@"; do vllm serve "$f" & done\n'
              'while true; do vllm serve m --port 8500; sleep 5; done\n')
    rows = launches(tmp_path, {"a.sh": script})
    assert [(r["line"], r["count"]) for r in rows] == [(7, 3), (9, 2), (10, 4), (11, 2), (12, None), (13, 1)]


def test_templated_tag_of_a_vllm_image_is_still_vllm(tmp_path):
    text = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: c\n"
            "      image: vllm/vllm-openai:{{ .Values.tag }}\n      args: [\"--model={{ .Values.model }}\"]\n")
    rows = launches(tmp_path, {"templates/pod.yaml": text})
    assert [r["argv"] for r in rows] == [["vllm", "serve", "--model={{ .Values.model }}"]]
    assert rows[0]["image"] == "vllm/vllm-openai:{{ .Values.tag }}"


def test_launch_script_the_script_writes_with_a_heredoc(tmp_path):
    # found on pranavnbapat/vllm-deployment: a generator writes run_vllm.sh for supervisord;
    # the body is a script of its own, read as shell on the generator's offsets
    script = ("#!/bin/bash\nmkdir -p /opt/ops\ncat > \"/opt/ops/run_vllm.sh\" <<EOV\n#!/usr/bin/env bash\n"
              "export VLLM_USE_V1='1'\nexec '/opt/envs/vllm/bin/vllm' serve '${MODEL}' \\\n"
              "  --port '${PORT}' \\\n  --disable-log-requests\nEOV\nchmod 700 /opt/ops/run_vllm.sh\n"
              "cat > /usr/local/bin/start-engine <<'EOF'\n#!/bin/sh\nvllm serve org/m --swap-space 4\nEOF\n"
              "cat > launch.py <<'EOF'\nfrom vllm import LLM\nllm = LLM(model='m', swap_space=4)\nEOF\n")
    rows = launches(tmp_path, {"gen.sh": script})
    assert [(r["line"], r["argv"][1:3]) for r in rows] == [(6, ["serve", "${MODEL}"]), (13, ["serve", "org/m"]),
                                                          (17, ["--model=m", "--swap-space=4"])]
    assert rows[0]["via"].startswith("via heredoc at line 3 (cat > /opt/ops/run_vllm.sh), read as shell")
    assert rows[0]["env"] == {"VLLM_USE_V1": "1"}
    assert rows[2]["via"].startswith("via heredoc at line 15 (cat > launch.py), read as python")


def test_heredocs_that_write_no_script_stay_unread(tmp_path):
    script = ("#!/bin/bash\ncat > notes.txt <<EOF\nvllm serve m --swap-space 4\nEOF\n"
              "python3 - <<EOF\nprint('vllm serve m --swap-space 4')\nEOF\n"
              "cat <<EOF\nusage: vllm serve MODEL --swap-space N\nEOF\n")
    assert launches(tmp_path, {"gen.sh": script}) == []


def test_heredoc_run_now_by_a_shell_python_or_ssh(tmp_path):
    # the body is a program run at once: by a shell, by Python from stdin, or on a remote host
    script = ("#!/bin/bash\nssh -i ~/.ssh/key -p 22 ubuntu@gpu1 <<'EOF'\n"
              "docker run -d --gpus all vllm/vllm-openai:v0.10.0 --model m --disable-log-requests\nEOF\n"
              "ssh gpu2 bash -s <<EOF\nvllm serve m --swap-space 4\nEOF\n"
              "ssh gpu3 uptime <<EOF\nvllm serve m --swap-space 4\nEOF\n"
              "python3 - <<EOF\nfrom vllm import LLM\nllm = LLM(model='m', swap_space=4)\nEOF\n"
              "bash <<EOF\nvllm serve x --swap-space 2\nEOF\n")
    rows = launches(tmp_path, {"deploy.sh": script})
    assert [(r["line"], r["kind"]) for r in rows] == [(3, "serve"), (6, "serve"), (13, "engine"), (16, "serve")]
    assert rows[0]["release"] == "0.10.0"           # the image the remote host runs
    assert "(ssh gpu2 bash -s), read as shell" in rows[1]["via"]


# -- variables set in a file the script sources --------------------------------------------------

ENV_FILE = 'IMG="vllm/vllm-openai:v0.24.0"\nexport PORT=8000\nGEN=$(date)\n'
RUN = 'docker run -d --gpus all "${IMG}" --model m --port "$PORT"\n'


@pytest.mark.parametrize("script", [
    '#!/bin/bash\nsource "$(dirname "$0")/../config/serving.env"\n' + RUN,
    '#!/bin/bash\n. "${BASH_SOURCE%/*}/../config/serving.env"\n' + RUN,
    '#!/bin/bash\nHERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\nsource "$HERE/../config/serving.env"\n' + RUN,
    '#!/bin/bash\nset -a\nsource config/serving.env\nset +a\n' + RUN,          # run from the repository's root
])
def test_a_variable_set_in_a_sourced_file_is_known(tmp_path, script):
    [row] = launches(tmp_path, {"config/serving.env": ENV_FILE, "scripts/run.sh": script})
    assert row["image"] == "vllm/vllm-openai:v0.24.0" and row["release"] == "0.24.0"
    assert row["argv"][:4] == ["vllm", "serve", "--model", "m"]


@pytest.mark.parametrize("script", [
    '#!/bin/bash\nsource /etc/vllm/serving.env\n' + RUN,                  # outside the repository
    '#!/bin/bash\nsource "$CONF_DIR/serving.env"\n' + RUN,                # built from a variable we do not know
    '#!/bin/bash\nsource "$(dirname "$0")/../config/missing.env"\n' + RUN,
])
def test_a_sourced_file_that_cannot_be_found_says_nothing(tmp_path, script):
    assert launches(tmp_path, {"config/serving.env": ENV_FILE, "scripts/run.sh": script}) == []


def test_a_sourced_value_computed_at_run_time_is_not_taken(tmp_path):
    env = 'IMG=$(cat image.txt)\n'
    assert launches(tmp_path, {"config/serving.env": env,
                               "scripts/run.sh": '#!/bin/bash\nsource "$(dirname "$0")/../config/serving.env"\n' + RUN}) == []


def test_a_launch_in_a_command_substitution_is_read(tmp_path):
    script = ('#!/bin/bash\nif [ -n "$X" ]; then\n  CID=$(docker run -d --gpus all \\\n    vllm/vllm-openai:v0.24.0 '
              '--model m --swap-space 4)\nfi\necho "$CID"\n')
    [row] = launches(tmp_path, {"run.sh": script})
    assert row["argv"] == ["vllm", "serve", "--model", "m", "--swap-space", "4"] and row["release"] == "0.24.0"
    assert row["line"] == 4


@pytest.mark.parametrize("line", ['V=$(vllm --version)', 'OUT=$(echo vllm serve m)', 'N=$((1 + 2))',
                                  'IMG=$(cat vllm-image.txt)'])
def test_a_substitution_that_starts_no_server_is_no_launch(tmp_path, line):
    rows = launches(tmp_path, {"run.sh": f"#!/bin/bash\n{line}\n"})
    assert [r for r in rows if r["kind"] == "serve"] == []


def test_an_image_set_in_a_sourced_file_is_left_for_a_human(tmp_path):
    """migrate bumps no tag written in a file it does not read: the launch keeps its release,
    and the migration says so (exit 1) instead of "would change 0 files" and nothing else."""
    for name, text in {"config/serving.env": ENV_FILE,
                       "scripts/run.sh": '#!/bin/bash\nsource "$(dirname "$0")/../config/serving.env"\n' + RUN}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    result = CliRunner().invoke(main, ["migrate", "--to", "0.33.0", "--diff", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "scripts/run.sh:3: image vllm/vllm-openai:v0.24.0: it runs vllm/vllm-openai:v0.24.0, set where " \
           "`migrate` finds no tag to bump" in result.output


def test_an_array_run_in_a_command_substitution_is_read(tmp_path):
    script = ('#!/bin/bash\nIMAGE="vllm/vllm-openai:v0.24.0"\ndocker_cmd=(\n  docker run --detach --gpus all\n'
              '  --entrypoint vllm\n  "${IMAGE}"\n  serve /models/m\n  --port 8000\n)\n'
              'container_id="$("${docker_cmd[@]}" 2>"${OUT}/docker-run.stderr.log")"\n')
    [row] = launches(tmp_path, {"run.sh": script})
    assert row["argv"][:3] == ["vllm", "serve", "/models/m"] and row["release"] == "0.24.0"


@pytest.mark.parametrize("files", [
    # a container's command: the file it sources is the container's, not the repository's
    {"config/serving.env": ENV_FILE,
     "k8s.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
                 "    command: [bash, -c, 'source config/serving.env && docker run \"${IMG}\" --model m']\n"},
    # out of the tree: more than three folders up
    {"serving.env": ENV_FILE, "a/b/c/d/scripts/run.sh": '#!/bin/bash\nsource ../../../../../serving.env\n' + RUN},
])
def test_a_sourced_file_is_read_only_for_a_scripts_own_commands_in_the_tree(tmp_path, files):
    assert [r for r in launches(tmp_path, files) if r["image"] == "vllm/vllm-openai:v0.24.0"] == []
