#!/usr/bin/env python3
"""A second synthetic corpus for the speed benchmark, with other shapes than gen_corpus.py.

    python bench/gen_corpus2.py [DEST] [--per-kind 300] [--seed 34]

gen_corpus.py writes recent images (0.27-0.30), one short launch per file, 1-5 KB. Tuning the
front ends to that corpus alone would hide what older and bigger trees cost (issue 34), so this
one writes, in the same layout (bench/run.py's globs read both):

    DEST/k8s/NNNN-<app>/<name>.yaml              long multi-document files: 4-9 Deployments,
                                                 Services, ConfigMaps, a Job, 8-25 KB
    DEST/compose/NNNN-<app>/docker-compose.yml   3-6 services (several engines, gateway, redis,
                                                 prometheus), x- anchors and merge keys
    DEST/docker/NNNN-<app>/Dockerfile            multi-stage builds (builder, runtime), ARG tags,
                                                 heredoc RUN, ENV blocks, CMD or ENTRYPOINT
    DEST/sh/NNNN-serve.sh                        large scripts (200-500 lines): functions, arrays,
                                                 case, heredocs, getopts, loops, a docker run
    DEST/py/NNNN_launch.py                       Python launchers: argparse, subprocess argv lists
                                                 built in loops, `LLM(...)` engines

Images are old (vLLM v0.4-v0.10) and launches carry many legacy flags of that era
(`--use-v2-block-manager`, `--swap-space`, `--disable-log-requests`, `--worker-use-ray`,
`--speculative-model`, `--num-lookahead-slots`, ...), the module entry point
`python -m vllm.entrypoints.openai.api_server` on the oldest ones, `vllm serve` after 0.5.
Every file therefore has findings against 0.30.0: this corpus measures the cost of files that
are mostly findings, where gen_corpus.py's are mostly clean.

The output is a pure function of the seed and the counts (byte-identical across runs; one
random.Random per file, so adding files changes no other file).
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

DEFAULT_DEST = "/tmp/vllmlint-bench-corpus2"
KINDS = ("k8s", "compose", "docker", "sh", "py")
DEFAULT_COUNTS = {k: 300 for k in KINDS}

OLD_TAGS = ["v0.4.2", "v0.4.3", "v0.5.3", "v0.5.4", "v0.6.1", "v0.6.3", "v0.6.4", "v0.6.6", "v0.7.2",
            "v0.7.3", "v0.8.2", "v0.8.5", "v0.9.1", "v0.9.2", "v0.10.0", "v0.10.1"]
MODELS = ["meta-llama/Llama-2-7b-chat-hf", "meta-llama/Meta-Llama-3-8B-Instruct", "mistralai/Mistral-7B-Instruct-v0.2",
          "Qwen/Qwen1.5-14B-Chat", "Qwen/Qwen2-7B-Instruct", "TheBloke/Llama-2-13B-chat-AWQ",
          "microsoft/Phi-3-mini-4k-instruct", "google/gemma-2-9b-it", "mistralai/Mixtral-8x7B-Instruct-v0.1"]
APPS = ["chat", "search", "rag", "summary", "support", "coder", "eval", "batch", "agents", "triage"]
# (flag, value or None): flags of the v0.4-v0.10 era, many gone or renamed by 0.30.0
LEGACY = [("--use-v2-block-manager", None), ("--swap-space", "4"), ("--disable-log-requests", None),
          ("--worker-use-ray", None), ("--engine-use-ray", None), ("--num-lookahead-slots", "4"),
          ("--speculative-model", "[ngram]"), ("--num-speculative-tokens", "5"),
          ("--ngram-prompt-lookup-max", "4"), ("--tokenizer-pool-size", "2"), ("--max-log-len", "100"),
          ("--guided-decoding-backend", "outlines"), ("--preemption-mode", "swap"),
          ("--disable-async-output-proc", None), ("--max-cpu-loras", "4"), ("--scheduler-delay-factor", "0.1"),
          ("--multi-step-stream-outputs", None), ("--num-scheduler-steps", "8"), ("--disable-log-stats", None),
          ("--enable-chunked-prefill", None), ("--ray-workers-use-nsight", None), ("--model-loader-extra-config", "{}"),
          ("--rope-scaling", '{"type":"dynamic","factor":2.0}'), ("--device", "cuda"),
          ("--tokenizer-mode", "auto"), ("--max-seq-len-to-capture", "8192")]
CURRENT = [("--tensor-parallel-size", "2"), ("--max-model-len", "8192"), ("--gpu-memory-utilization", "0.9"),
           ("--dtype", "half"), ("--max-num-seqs", "128"), ("--trust-remote-code", None),
           ("--enable-prefix-caching", None), ("--block-size", "16"), ("--kv-cache-dtype", "fp8"),
           ("--served-model-name", "model"), ("--port", "8000"), ("--host", "0.0.0.0"),
           ("--enforce-eager", None), ("--max-num-batched-tokens", "8192"), ("--seed", "0"),
           ("--quantization", "awq"), ("--load-format", "auto"), ("--download-dir", "/models")]
ENV = [("HF_HOME", "/models/hf"), ("VLLM_WORKER_MULTIPROC_METHOD", "spawn"), ("VLLM_ATTENTION_BACKEND", "FLASHINFER"),
       ("VLLM_USE_V1", "0"), ("NCCL_DEBUG", "WARN"), ("VLLM_LOGGING_LEVEL", "INFO"), ("CUDA_VISIBLE_DEVICES", "0,1"),
       ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1"), ("TOKENIZERS_PARALLELISM", "false"), ("VLLM_CPU_KVCACHE_SPACE", "8")]


def pick_flags(rng: random.Random, legacy: int, current: int) -> list[tuple[str, str | None]]:
    chosen = rng.sample(LEGACY, legacy) + rng.sample(CURRENT, current)
    rng.shuffle(chosen)
    return chosen


def argv_of(rng: random.Random, tag: str, model: str, legacy: int | None = None) -> list[str]:
    """A launch of that release: the module entry point before 0.5, else `vllm serve`."""
    old = tag < "v0.5"
    head = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", model] if old \
        else ["vllm", "serve", model]
    out = list(head)
    for flag, value in pick_flags(rng, legacy if legacy is not None else rng.randint(4, 9), rng.randint(5, 10)):
        out.append(flag)
        if value is not None:
            out.append(value)
    return out


def yq(value: str) -> str:
    """A YAML flow scalar for `value` (quoted when plain would not read back the same)."""
    if value == "" or value[0] in "[]{}!&*#|>'\"%@`-?:," or ": " in value or " #" in value \
            or value.lower() in ("true", "false", "yes", "no", "on", "off", "null", "~") \
            or value.replace(".", "", 1).isdigit():
        return json.dumps(value)
    return value


def gen_k8s(i: int, rng: random.Random) -> tuple[str, str]:
    app = f"{rng.choice(APPS)}-{i}"
    docs = [f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {app}-env\ndata:\n"
            + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in rng.sample(ENV, 4))]
    for d in range(rng.randint(4, 9)):
        tag, model = rng.choice(OLD_TAGS), rng.choice(MODELS)
        name = f"{app}-{d}"
        argv = argv_of(rng, tag, model)
        style = rng.randrange(3)
        if style == 0:      # command + args lists
            cmd = "".join(f"            - {yq(a)}\n" for a in argv[:2 if argv[0] == "vllm" else 3])
            args = "".join(f"            - {yq(a)}\n" for a in argv[2 if argv[0] == "vllm" else 3:])
            launch = f"          command:\n{cmd}          args:\n{args}"
        elif style == 1:    # sh -c block scalar with continuations
            body = " \\\n              ".join(argv)
            launch = f"          command: [\"/bin/sh\", \"-c\"]\n          args:\n            - |\n" \
                     f"              set -e\n              {body}\n"
        else:               # args only: the image's entry point
            launch = "          args:\n" + "".join(f"            - {yq(a)}\n" for a in argv[2:] if a != "--model")
        env = "".join(f"            - name: {k}\n              value: {json.dumps(v)}\n" for k, v in rng.sample(ENV, 3))
        docs.append(f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels:
    app.kubernetes.io/name: {name}
    app.kubernetes.io/part-of: {app}
spec:
  replicas: {rng.randint(1, 4)}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: "8000"
    spec:
      nodeSelector:
        nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
      containers:
        - name: vllm
          image: vllm/vllm-openai:{tag}
{launch}          envFrom:
            - configMapRef:
                name: {app}-env
          env:
{env}          ports:
            - containerPort: 8000
              name: http
          resources:
            limits:
              nvidia.com/gpu: {rng.choice([1, 2, 4])}
              memory: {rng.choice([32, 64, 128])}Gi
          readinessProbe:
            httpGet:
              path: /health
              port: 8000
            initialDelaySeconds: {rng.randint(30, 240)}
            periodSeconds: 10
          volumeMounts:
            - name: models
              mountPath: /models
            - name: shm
              mountPath: /dev/shm
      volumes:
        - name: models
          persistentVolumeClaim:
            claimName: {app}-models
        - name: shm
          emptyDir:
            medium: Memory
            sizeLimit: 16Gi
""")
        docs.append(f"apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  selector:\n"
                    f"    app: {name}\n  ports:\n    - port: 80\n      targetPort: 8000\n")
    docs.append(f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {app}-warmup
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: curl
          image: curlimages/curl:8.7.1
          command: ["sh", "-c", "curl -sf http://{app}-0/v1/models"]
""")
    return f"k8s/{i:04d}-{app}/{app}.yaml", "---\n".join(docs)


def gen_compose(i: int, rng: random.Random) -> tuple[str, str]:
    app = f"{rng.choice(APPS)}-{i}"
    tag = rng.choice(OLD_TAGS)
    out = ["x-vllm: &vllm", f"  image: vllm/vllm-openai:{tag}", "  ipc: host", "  restart: unless-stopped",
           "  volumes:", "    - ~/.cache/huggingface:/root/.cache/huggingface", "  deploy:", "    resources:",
           "      reservations:", "        devices:", "          - driver: nvidia", "            count: all",
           "            capabilities: [gpu]", "", "services:"]
    for s in range(rng.randint(2, 4)):
        model = rng.choice(MODELS)
        argv = argv_of(rng, tag, model)[2 if tag >= "v0.5" else 3:]
        if tag < "v0.5":
            argv = [a for a in argv]
        out += [f"  engine-{s}:", "    <<: *vllm", f"    container_name: {app}-engine-{s}"]
        style = rng.randrange(3)
        if style == 0:
            out += ["    command: >"] + [f"      {a}" if " " not in a and "{" not in a else f"      '{a}'" for a in argv]
        elif style == 1:
            out += ["    command:"] + [f"      - {yq(a)}" for a in argv]
        else:
            out += ["    command: [" + ", ".join(json.dumps(a) for a in argv) + "]"]
        env = rng.sample(ENV, 3)
        if rng.random() < 0.5:
            out += ["    environment:"] + [f"      {k}: {json.dumps(v)}" for k, v in env]
        else:
            out += ["    environment:"] + [f"      - {k}={v}" for k, v in env]
        out += ["    ports:", f"      - \"{8000 + s}:8000\"", "    healthcheck:",
                "      test: [\"CMD\", \"curl\", \"-f\", \"http://localhost:8000/health\"]", "      interval: 30s"]
    out += ["  gateway:", "    image: nginx:1.25-alpine", "    depends_on:"]
    out += [f"      - engine-{s}" for s in range(2)]
    out += ["    ports:", "      - \"80:80\"", "  redis:", "    image: redis:7-alpine",
            "  prometheus:", "    image: prom/prometheus:v2.51.0", "    volumes:",
            "      - ./prometheus.yml:/etc/prometheus/prometheus.yml:ro", ""]
    return f"compose/{i:04d}-{app}/docker-compose.yml", "\n".join(out)


def gen_dockerfile(i: int, rng: random.Random) -> tuple[str, str]:
    app = f"{rng.choice(APPS)}-{i}"
    tag = rng.choice(OLD_TAGS)
    model = rng.choice(MODELS)
    argv = argv_of(rng, tag, model)
    env = rng.sample(ENV, 4)
    lines = [f"ARG VLLM_TAG={tag}", "", "FROM python:3.10-slim AS builder", "WORKDIR /build",
             "RUN --mount=type=cache,target=/root/.cache/pip \\", "    pip wheel --wheel-dir /wheels \\",
             "        sentencepiece protobuf==4.25.3 \\", "        outlines==0.0.46", "",
             "COPY <<EOF /build/warmup.py", "import requests", "print(requests.get('http://localhost:8000/health'))",
             "EOF", "", "FROM vllm/vllm-openai:${VLLM_TAG} AS runtime",
             "LABEL org.opencontainers.image.source=\"https://example.invalid/" + app + "\"",
             "COPY --from=builder /wheels /wheels", "RUN pip install --no-index --find-links=/wheels /wheels/*.whl \\",
             "    && rm -rf /wheels", "COPY --from=builder /build/warmup.py /opt/warmup.py", ""]
    if rng.random() < 0.5:
        lines.append("ENV " + " \\\n    ".join(f"{k}={json.dumps(v)}" for k, v in env))
    else:
        lines += [f"ENV {k} {v}" for k, v in env]
    lines += ["", "EXPOSE 8000", "HEALTHCHECK CMD curl -f http://localhost:8000/health || exit 1", ""]
    style = rng.randrange(3)
    if style == 0:
        lines.append("ENTRYPOINT " + json.dumps(argv))
    elif style == 1:
        head = 3 if argv[0] == "python3" else 2
        lines += ["ENTRYPOINT " + json.dumps(argv[:head]), "CMD " + json.dumps(argv[head:])]
    else:
        lines.append("CMD " + " \\\n    ".join(a if " " not in a and "{" not in a else f"'{a}'" for a in argv))
    return f"docker/{i:04d}-{app}/Dockerfile", "\n".join(lines) + "\n"


def _sh_word(a: str) -> str:
    return a if all(c.isalnum() or c in "-_./:=,@[]" for c in a) else f"'{a}'"


def gen_shell(i: int, rng: random.Random) -> tuple[str, str]:
    tag = rng.choice(OLD_TAGS)
    model = rng.choice(MODELS)
    argv = argv_of(rng, tag, model)
    head = 3 if argv[0] == "python3" else 2
    opts = argv[head:]
    out = ["#!/usr/bin/env bash", f"# serve {model} on vLLM {tag}: generated by bench/gen_corpus2.py",
           "set -euo pipefail", "", f'MODEL="${{MODEL:-{model}}}"', 'PORT="${PORT:-8000}"',
           'LOG_DIR="${LOG_DIR:-/var/log/vllm}"', "VERBOSE=0", ""]
    out += ["usage() {", "  cat <<'USAGE'", "Usage: serve.sh [-m model] [-p port] [-v] [-h]",
            "  -m  model to serve", "  -p  port", "  -v  verbose", "USAGE", "}", ""]
    out += ["while getopts 'm:p:vh' opt; do", "  case \"$opt\" in", "    m) MODEL=\"$OPTARG\" ;;",
            "    p) PORT=\"$OPTARG\" ;;", "    v) VERBOSE=1 ;;", "    h) usage; exit 0 ;;",
            "    *) usage; exit 2 ;;", "  esac", "done", ""]
    out += ["log() {", "  local level=$1; shift", "  printf '%s [%s] %s\\n' \"$(date -Is)\" \"$level\" \"$*\" >&2", "}", ""]
    for k, v in rng.sample(ENV, 5):
        out.append(f"export {k}={_sh_word(v)}")
    out.append("")
    # helpers that do not launch vLLM: the bulk of a real ops script
    for f in range(rng.randint(8, 20)):
        name = f"step_{f}"
        out += [f"{name}() {{", f"  log INFO \"{name} on $HOSTNAME\"", "  local tries=0",
                "  until [ \"$tries\" -ge 5 ]; do", f"    if [ -d \"$LOG_DIR/{name}\" ]; then break; fi",
                f"    mkdir -p \"$LOG_DIR/{name}\" || true", "    tries=$((tries + 1))", "    sleep 1", "  done",
                "  for gpu in $(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null || echo 0); do",
                "    log DEBUG \"gpu $gpu ready\"", "  done", "}", ""]
    out += ["cleanup() {", "  log INFO 'stopping'", "  kill \"${SERVER_PID:-0}\" 2>/dev/null || true", "}",
            "trap cleanup EXIT INT TERM", ""]
    style = rng.randrange(3)
    if style == 0:          # an array of args
        out += ["ARGS=("] + [f"  {_sh_word(a)}" for a in opts] + [")", ""]
        if rng.random() < 0.5:
            out += ["if [ \"$VERBOSE\" = 1 ]; then", "  ARGS+=(--uvicorn-log-level debug)", "fi", ""]
        out += ["start_server() {", "  " + " ".join(argv[:head]) + ' "${ARGS[@]}" --port "$PORT" &',
                "  SERVER_PID=$!", "}"]
    elif style == 1:        # continuations
        out += ["start_server() {", "  " + " \\\n    ".join([*argv[:head], *map(_sh_word, opts)])
                + " \\\n    --port \"$PORT\" &", "  SERVER_PID=$!", "}"]
    else:                   # docker run
        out += ["start_server() {", "  docker run -d --gpus all --ipc=host \\", "    -p \"$PORT:8000\" \\",
                "    -v \"$HOME/.cache/huggingface:/root/.cache/huggingface\" \\",
                f"    vllm/vllm-openai:{tag} \\",
                "    " + " \\\n    ".join(map(_sh_word, opts if argv[0] == "vllm" else argv[3:])), "}"]
    out += ["", "main() {"] + [f"  step_{f}" for f in range(3)] + ["  start_server",
            "  for i in $(seq 1 60); do", "    curl -sf \"http://localhost:$PORT/health\" && break", "    sleep 5",
            "  done", "  wait", "}", "", 'main "$@"', ""]
    return f"sh/{i:04d}-serve.sh", "\n".join(out)


def gen_python(i: int, rng: random.Random) -> tuple[str, str]:
    tag = rng.choice(OLD_TAGS)
    model = rng.choice(MODELS)
    argv = argv_of(rng, tag, model)
    head = 3 if argv[0] == "python3" else 2
    style = rng.randrange(2)
    out = ['"""Launch vLLM for the ' + rng.choice(APPS) + f' service (pinned to vllm=={tag[1:]})."""',
           "import argparse", "import os", "import subprocess", "import sys", "", ""]
    if style == 0:
        items = ",\n".join(f"        {json.dumps(a)}" for a in argv[head:])
        out += ["def build_argv(port: int) -> list[str]:",
                "    argv = [sys.executable, \"-m\", "
                + json.dumps("vllm.entrypoints.openai.api_server" if head == 3 else "vllm.entrypoints.cli.main")
                + ("" if head == 3 else ", \"serve\"") + "]",
                "    argv += [", items, "    ]",
                "    argv += [\"--port\", str(port)]", "    return argv", "", "",
                "def main() -> int:", "    ap = argparse.ArgumentParser()",
                "    ap.add_argument(\"--port\", type=int, default=8000)", "    opts = ap.parse_args()",
                "    env = dict(os.environ, " + ", ".join(f"{k}={json.dumps(v)}" for k, v in rng.sample(ENV, 3)) + ")",
                "    return subprocess.call(build_argv(opts.port), env=env)", "", "",
                "if __name__ == \"__main__\":", "    sys.exit(main())", ""]
    else:
        kwargs = [("tensor_parallel_size", str(rng.choice([1, 2, 4]))), ("max_model_len", "8192"),
                  ("gpu_memory_utilization", "0.9"), ("swap_space", "4"), ("use_v2_block_manager", "True"),
                  ("enforce_eager", "True"), ("trust_remote_code", "True")]
        out += ["from vllm import LLM, SamplingParams", "", "",
                "def make_engine() -> LLM:", "    return LLM(", f"        model={json.dumps(model)},"]
        out += [f"        {k}={v}," for k, v in rng.sample(kwargs, rng.randint(3, len(kwargs)))]
        out += ["    )", "", "", "if __name__ == \"__main__\":", "    llm = make_engine()",
                "    params = SamplingParams(temperature=0.0, max_tokens=64)",
                "    for out in llm.generate([\"Hello\"], params):", "        print(out.outputs[0].text)", ""]
    return f"py/{i:04d}_launch.py", "\n".join(out)


GENERATORS = {"k8s": gen_k8s, "compose": gen_compose, "docker": gen_dockerfile, "sh": gen_shell, "py": gen_python}


def generate(dest: Path, counts: dict[str, int] | None = None, seed: int = 34) -> dict[str, list[Path]]:
    """Write the corpus under `dest` (emptied first); the paths written, per kind."""
    counts = {**DEFAULT_COUNTS, **(counts or {})}
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    written: dict[str, list[Path]] = {}
    for kind in KINDS:
        paths = []
        for i in range(counts[kind]):
            rng = random.Random(f"{seed}:{kind}:{i}")
            rel, text = GENERATORS[kind](i, rng)
            path = dest / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            paths.append(path)
        written[kind] = paths
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dest", nargs="?", default=DEFAULT_DEST)
    ap.add_argument("--per-kind", type=int, default=None, help="files of each kind (default 300)")
    for kind in KINDS:
        ap.add_argument(f"--{kind}", type=int, default=None)
    ap.add_argument("--seed", type=int, default=34)
    opts = ap.parse_args(argv)
    counts = {k: opts.per_kind for k in KINDS} if opts.per_kind is not None else {}
    counts.update({k: getattr(opts, k) for k in KINDS if getattr(opts, k) is not None})
    written = generate(Path(opts.dest), counts, opts.seed)
    print(opts.dest)
    for kind, paths in written.items():
        sizes = sorted(p.stat().st_size for p in paths) or [0]
        print(f"{kind:9} {len(paths):4} files  size min {sizes[0]} median {sizes[len(sizes) // 2]} "
              f"max {sizes[-1]} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
