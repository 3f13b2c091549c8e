#!/usr/bin/env python3
"""Generate a synthetic, realistic corpus of vLLM deployment configs for the speed benchmark.

    python bench/gen_corpus.py [DEST] [--k8s 1000] [--compose 1000] [--docker 1000]
                               [--shell 1000] [--python 500] [--seed 8]

DEST defaults to /tmp/vllmlint-bench-corpus and is emptied first. Layout:

    DEST/k8s/NNNN-<app>/<name>.yaml              Deployment + Service (+ ConfigMap, router), 3-5 KB
    DEST/compose/NNNN-<app>/docker-compose.yml   compose stacks (1-2 engines, gateway), 1-4 KB
    DEST/docker/NNNN-<app>/Dockerfile            Dockerfiles, 1-2 KB
    DEST/sh/NNNN-serve.sh                        launch scripts (single, P/D pair, docker run), 1-3 KB
    DEST/py/NNNN_launch.py                       Python launchers, 2-3 KB

One folder per stack, as in a monorepo: vllmlint pools single-sided prefill/decode launches per
folder, so a flat folder of unrelated manifests would pair engines of different stacks.

Every file launches vLLM with 10-18 flags in the forms real deployments use: k8s `sh -c` block
scalars with `\\` continuations, `command: [vllm, serve]` + args lists with the
`--kv-transfer-config` JSON as its own item, args-only (image entrypoint) and the api_server
module; compose folded `command: >` with `environment` maps or lists, anchors and `${VAR:-x}`;
Dockerfile ENV (both forms), exec and shell CMD/ENTRYPOINT; shell continuations, exports,
arrays and `docker run`; Python `subprocess` argv lists with `json.dumps(...)`.
About 8% of the files of each kind carry a finding (file 0000 of each kind always does):
`VLLM_ENABLE_SCALE_OUT_ENDPOINTS` (VL001), a scale-out URL pointing at a plain serve (VL002),
an invalid `kv_load_failure_policy` (VL102), an invalid `--kv-transfer-config` (VL103) or a
flag vLLM 0.30.0 no longer has (`--disable-log-requests`, `--swap-space`).

The output is a pure function of the seed and the counts (byte-identical across runs).
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path

DEFAULT_DEST = "/tmp/vllmlint-bench-corpus"
KINDS = ("k8s", "compose", "docker", "sh", "py")
FINDING_EVERY = 13          # file i has a finding when i % 13 == 0 (7.7%), so file 0 always does

MODELS = ["Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct",
          "meta-llama/Llama-3.3-70B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3",
          "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "google/gemma-2-9b-it", "microsoft/Phi-3.5-mini-instruct",
          "ibm-granite/granite-3.1-8b-instruct", "Qwen/Qwen2.5-Coder-32B-Instruct"]
VERSIONS = ["v0.27.1", "v0.28.0", "v0.29.0", "v0.29.1", "v0.30.0", "latest"]
PIP_VERSIONS = ["0.27.1", "0.28.0", "0.29.0", "0.29.1", "0.30.0"]
TEAMS = ["search", "assist", "ml-platform", "ranking", "copilot", "support-bot", "docs-qa", "labs"]
APP_WORDS = ["chat", "qa", "rag", "summarize", "agent", "embed", "coder", "triage", "ocr", "review"]
ENV_POOL = [("HF_HOME", "/models/hf"), ("HF_HUB_OFFLINE", "1"), ("VLLM_LOGGING_LEVEL", "INFO"),
            ("VLLM_WORKER_MULTIPROC_METHOD", "spawn"), ("NCCL_DEBUG", "WARN"), ("OMP_NUM_THREADS", "8"),
            ("TRANSFORMERS_CACHE", "/models/hf"), ("VLLM_USE_DEEP_GEMM", "0"), ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
            ("TOKENIZERS_PARALLELISM", "false"), ("PYTHONUNBUFFERED", "1"), ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1"),
            ("UCX_TLS", "cuda_ipc,cuda_copy,tcp"), ("NCCL_IB_DISABLE", "1"), ("LMCACHE_CHUNK_SIZE", "256")]


# ---------------------------------------------------------------------------- vLLM flags

def flags(rng: random.Random, n: int, kv: dict | None, secret: str = "$(VLLM_API_KEY)",
          legacy: bool = False) -> list[tuple[str, str | None]]:
    """n (flag, value-or-None) pairs, `--port` first, the kv JSON (if any) somewhere after it;
    `legacy`: one of them is a flag vLLM 0.30.0 no longer has."""
    pool = [
        ("--host", "0.0.0.0"),
        ("--tensor-parallel-size", str(rng.choice([1, 2, 4, 8]))),
        ("--max-model-len", str(rng.choice([4096, 8192, 16384, 32768, 131072]))),
        ("--gpu-memory-utilization", rng.choice(["0.85", "0.9", "0.92", "0.95"])),
        ("--max-num-seqs", str(rng.choice([64, 128, 256, 512]))),
        ("--max-num-batched-tokens", str(rng.choice([2048, 4096, 8192, 16384]))),
        ("--enable-prefix-caching", None),
        ("--enable-chunked-prefill", None),
        ("--dtype", rng.choice(["bfloat16", "auto", "float16"])),
        ("--served-model-name", rng.choice(APP_WORDS) + "-model"),
        ("--trust-remote-code", None),
        ("--download-dir", "/models"),
        ("--block-size", rng.choice(["16", "32"])),
        ("--kv-cache-dtype", rng.choice(["auto", "fp8"])),
        ("--seed", str(rng.randint(0, 9999))),
        ("--uvicorn-log-level", rng.choice(["info", "warning"])),
        ("--enable-auto-tool-choice", None),
        ("--tool-call-parser", rng.choice(["hermes", "llama3_json", "mistral"])),
        ("--pipeline-parallel-size", "1"),
        ("--distributed-executor-backend", "mp"),
        ("--max-loras", "4"),
        ("--enforce-eager", None),
        ("--generation-config", "vllm"),
        ("--limit-mm-per-prompt", '{"image": 2}'),
        ("--reasoning-parser", "deepseek_r1"),
        ("--api-key", secret),
    ]
    rng.shuffle(pool)
    if legacy:                              # removed before 0.30.0 (VL302)
        pool.insert(0, rng.choice([("--disable-log-requests", None), ("--swap-space", "4")]))
    out = [("--port", str(rng.choice([8000, 8080, 8100, 8200, 9000])))]
    out += pool[:max(0, n - 1 - (kv is not None))]
    if kv is not None:
        out.insert(rng.randint(1, len(out)), ("--kv-transfer-config", json.dumps(kv, separators=(",", ":"))))
    return out


def kv_config(rng: random.Random, role: str, bad: str | None = None, connector: str | None = None) -> dict:
    """A NixlConnector/LMCache config; `bad` makes it one vllmlint reports."""
    connector = connector or rng.choice(["NixlConnector", "NixlConnector", "NixlConnector", "LMCacheConnectorV1"])
    cfg: dict = {"kv_connector": connector, "kv_role": role}
    if connector == "NixlConnector" and rng.random() < 0.4:
        cfg["kv_connector_extra_config"] = {"backends": ["UCX"]}
    if rng.random() < 0.3:
        cfg["kv_load_failure_policy"] = rng.choice(["fail", "recompute"])
    if bad == "policy":
        cfg["kv_load_failure_policy"] = "retry"            # VL102: not a value vLLM accepts
    elif bad == "connector":
        cfg["kv_connector"] = "NixlConector"               # VL103: typo, unregistered
    elif bad == "role":
        cfg.pop("kv_role")                                 # VL103: connector without a role
    return cfg


def finding_kind(i: int, rng: random.Random, choices: list[str]) -> str | None:
    if i % FINDING_EVERY:
        return None
    return choices[(i // FINDING_EVERY) % len(choices)]


def pad_comment(rng: random.Random, prefix: str = "# ") -> list[str]:
    notes = [
        "Owned by the {t} team; page #{t}-oncall before changing the launch flags.",
        "Capacity was sized for p95 prompt lengths measured in the last load test.",
        "Keep --max-model-len in step with the router's truncation limit.",
        "Model weights come from the shared read-only PVC, pre-warmed nightly.",
        "Do not enable speculative decoding here until the eval suite passes.",
        "gpu-memory-utilization leaves room for the CUDA graphs captured at start.",
        "Rollouts go through staging first; see the runbook linked in the wiki.",
        "TODO({t}): move the flags into the shared base once the chart is upstreamed.",
    ]
    team = rng.choice(TEAMS)
    return [prefix + rng.choice(notes).format(t=team) for _ in range(rng.randint(1, 3))]


def yq(value: str) -> str:
    """A YAML double-quoted scalar."""
    return json.dumps(value)


# ---------------------------------------------------------------------------- Kubernetes

def gen_k8s(i: int, rng: random.Random) -> tuple[str, str]:
    bad = finding_kind(i, rng, ["env", "configmap", "policy", "connector", "router", "legacy"])
    name = f"{rng.choice(APP_WORDS)}-{rng.choice(TEAMS)}-{i:04d}"
    model = rng.choice(MODELS)
    version = rng.choice(VERSIONS)
    pd = rng.random() < 0.35 or bad in ("policy", "connector")
    role = rng.choice(["kv_producer", "kv_consumer"])
    kv = kv_config(rng, role, bad if bad in ("policy", "connector") else None) if pd else None
    fl = flags(rng, rng.randint(10, 18), kv, legacy=bad == "legacy")
    # the api_server module is deprecated from 0.30.0 (VL304): rare, so that it does not swamp the ~8%
    style = rng.choices(["shc", "list", "argsonly", "apiserver"], weights=[24, 20, 14, 1])[0]
    ind = " " * 10
    lines = [f"# {name}: vLLM engine for the {rng.choice(APP_WORDS)} service"] + pad_comment(rng)
    lines += ["apiVersion: apps/v1", "kind: Deployment", "metadata:", f"  name: {name}",
              f"  namespace: {rng.choice(TEAMS)}", "  labels:", f"    app: {name}",
              "    app.kubernetes.io/part-of: llm-serving", f"    team: {rng.choice(TEAMS)}",
              "  annotations:", f"    deployment.kubernetes.io/revision: \"{rng.randint(1, 40)}\"",
              "spec:", f"  replicas: {rng.randint(1, 4)}", "  strategy:", "    type: Recreate",
              "  selector:", "    matchLabels:", f"      app: {name}", "  template:", "    metadata:",
              "      labels:", f"        app: {name}",
              "    spec:", "      nodeSelector:", f"        nvidia.com/gpu.product: {rng.choice(['NVIDIA-H100-80GB-HBM3', 'NVIDIA-A100-SXM4-80GB', 'NVIDIA-L40S'])}",
              "      tolerations:", "        - key: nvidia.com/gpu", "          operator: Exists",
              "          effect: NoSchedule", "      containers:", "        - name: vllm",
              f"          image: {rng.choice(['', 'docker.io/'])}vllm/vllm-openai:{version}",
              "          imagePullPolicy: IfNotPresent"]
    if style == "shc":
        lines += [f"{ind}command: [\"/bin/sh\", \"-c\"]", f"{ind}args:", f"{ind}  - |"]
        body = ind + "    "
        lines += [f"{body}set -e", f"{body}echo \"starting {model}\"", f"{body}exec vllm serve {model} \\"]
        for j, (f, v) in enumerate(fl):
            end = "" if j == len(fl) - 1 else " \\"
            if v is None:
                lines.append(f"{body}  {f}{end}")
            elif f in ("--kv-transfer-config", "--limit-mm-per-prompt"):
                lines.append(f"{body}  {f} '{v}'{end}")
            else:
                lines.append(f"{body}  {f} {v}{end}")
    elif style in ("list", "argsonly"):
        if style == "list":
            lines.append(f"{ind}command: [\"vllm\", \"serve\"]")
        lines += [f"{ind}args:"]
        if style == "list":
            lines.append(f"{ind}  - {model}")
        else:
            lines += [f"{ind}  - --model", f"{ind}  - {model}"]
        for f, v in fl:
            lines.append(f"{ind}  - {f}")
            if v is not None:
                lines.append(f"{ind}  - '{v}'" if v.startswith("{") else f"{ind}  - {yq(v)}")
    else:
        lines += [f"{ind}command:", f"{ind}  - python3", f"{ind}  - -m", f"{ind}  - vllm.entrypoints.openai.api_server",
                  f"{ind}args:", f"{ind}  - --model={model}"]
        for f, v in fl:
            lines.append(f"{ind}  - {f}" if v is None else
                         (f"{ind}  - '{f}={v}'" if v.startswith("{") else f"{ind}  - {f}={v}"))
    env = rng.sample(ENV_POOL, rng.randint(3, 7))
    lines.append(f"{ind}env:")
    if bad == "env":
        lines += [f"{ind}  - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS", f"{ind}    value: \"1\""]
    for k, v in env:
        lines += [f"{ind}  - name: {k}", f"{ind}    value: {yq(v)}"]
    lines += [f"{ind}  - name: HF_TOKEN", f"{ind}    valueFrom:", f"{ind}      secretKeyRef:",
              f"{ind}        name: hf-token", f"{ind}        key: token"]
    if bad == "configmap":
        lines += [f"{ind}envFrom:", f"{ind}  - configMapRef:", f"{ind}      name: {name}-env"]
    gpus = rng.choice([1, 1, 2, 4, 8])
    lines += [f"{ind}ports:", f"{ind}  - containerPort: 8000", f"{ind}    name: http",
              f"{ind}resources:", f"{ind}  limits:", f"{ind}    nvidia.com/gpu: \"{gpus}\"",
              f"{ind}    memory: {rng.choice([64, 96, 128, 256])}Gi", f"{ind}  requests:",
              f"{ind}    cpu: \"{rng.choice([4, 8, 16])}\"", f"{ind}    memory: 48Gi",
              f"{ind}readinessProbe:", f"{ind}  httpGet:", f"{ind}    path: /health", f"{ind}    port: 8000",
              f"{ind}  initialDelaySeconds: {rng.choice([30, 60, 120])}", f"{ind}  periodSeconds: 10",
              f"{ind}livenessProbe:", f"{ind}  httpGet:", f"{ind}    path: /health", f"{ind}    port: 8000",
              f"{ind}  failureThreshold: 6", f"{ind}volumeMounts:", f"{ind}  - name: models",
              f"{ind}    mountPath: /models", f"{ind}    readOnly: true", f"{ind}  - name: shm",
              f"{ind}    mountPath: /dev/shm",
              "      volumes:", "        - name: models", "          persistentVolumeClaim:",
              f"            claimName: models-{rng.choice(TEAMS)}", "        - name: shm", "          emptyDir:",
              "            medium: Memory", "            sizeLimit: 16Gi"]
    lines += ["---", "apiVersion: v1", "kind: Service", "metadata:", f"  name: {name}", "spec:",
              "  selector:", f"    app: {name}", "  ports:", "    - name: http", "      port: 8000",
              "      targetPort: 8000"]
    if bad == "configmap":
        lines += ["---", "apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {name}-env", "data:",
                  "  VLLM_ENABLE_SCALE_OUT_ENDPOINTS: \"true\"", "  VLLM_LOGGING_LEVEL: INFO"]
    if bad == "router":
        lines += ["---", "apiVersion: apps/v1", "kind: Deployment", "metadata:", f"  name: {name}-router",
                  "spec:", "  template:", "    spec:", "      containers:", "        - name: router",
                  f"          image: ghcr.io/example/{rng.choice(APP_WORDS)}-router:1.{rng.randint(0, 9)}",
                  "          env:", "            - name: GENERATE_URL",
                  f"              value: http://{name}:8000/inference/v1/generate"]
    return f"k8s/{i:04d}-{name}/{rng.choice(['deployment', 'vllm', 'engine'])}.yaml", "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- compose

def gen_compose(i: int, rng: random.Random) -> tuple[str, str]:
    bad = finding_kind(i, rng, ["env", "router", "envlist", "policy", "legacy"])
    model = rng.choice(MODELS)
    lines = [f"# docker compose stack for {rng.choice(APP_WORDS)} ({rng.choice(TEAMS)})"] + pad_comment(rng)
    anchors = rng.random() < 0.4
    if anchors:
        lines += ["x-vllm-common: &vllm-common", "  restart: unless-stopped", "  ipc: host",
                  "  ulimits:", "    memlock: -1", "    stack: 67108864", ""]
    lines.append("services:")
    n_engines = 2 if rng.random() < 0.3 or bad == "policy" else 1
    engines = []
    app = f"{rng.choice(APP_WORDS)}{i}"
    connector = rng.choice(["NixlConnector", "NixlConnector", "LMCacheConnectorV1"])
    for e in range(n_engines):
        role = "kv_producer" if e == 0 else "kv_consumer"
        kv = kv_config(rng, role, "policy" if bad == "policy" and e == 1 else None, connector) \
            if n_engines == 2 else None
        fl = flags(rng, rng.randint(9, 16), kv, "${VLLM_API_KEY}", legacy=bad == "legacy" and e == 0)
        svc = f"{app}-" + ["engine", "prefill", "decode"][e + (n_engines == 2)]
        engines.append(svc)
        lines += [f"  {svc}:"]
        if anchors:
            lines.append("    <<: *vllm-common")
        lines += [f"    image: ${{VLLM_IMAGE:-vllm/vllm-openai:{rng.choice(VERSIONS)}}}",
                  f"    container_name: {svc}-{i:04d}"]
        if rng.random() < 0.7:
            lines += ["    command: >", f"      --model {model}"]
            for f, v in fl:
                if v is None:
                    lines.append(f"      {f}")
                elif v.startswith("{") or v.startswith("$("):
                    lines.append(f"      {f} '{v}'")
                else:
                    lines.append(f"      {f} {v}")
        else:
            items = ["--model", model] + [x for f, v in fl for x in ([f] if v is None else [f, v])]
            lines.append("    command: [" + ", ".join(json.dumps(x) for x in items) + "]")
        env = rng.sample(ENV_POOL, rng.randint(2, 6))
        if bad == "env" and e == 0:
            env.insert(rng.randint(0, len(env)), ("VLLM_ENABLE_SCALE_OUT_ENDPOINTS", "1"))
        if rng.random() < 0.6 and bad != "envlist":
            lines.append("    environment:")
            lines += [f"      {k}: {yq(v)}" for k, v in env]
            lines.append("      HUGGING_FACE_HUB_TOKEN: ${HF_TOKEN:?set HF_TOKEN}")
        else:
            if bad == "envlist" and e == 0:
                env.insert(0, ("VLLM_ENABLE_SCALE_OUT_ENDPOINTS", "true"))
            lines.append("    environment:")
            lines += [f"      - {k}={v}" for k, v in env]
            lines.append("      - HUGGING_FACE_HUB_TOKEN=${HF_TOKEN}")
        port = 8000 + 100 * e
        lines += ["    ports:", f"      - \"{port}:8000\"", "    volumes:", "      - ~/.cache/huggingface:/root/.cache/huggingface",
                  "      - ./models:/models:ro", "    shm_size: 16gb", "    deploy:", "      resources:",
                  "        reservations:", "          devices:", "            - driver: nvidia",
                  f"              device_ids: [\"{e}\"]", "              capabilities: [gpu]",
                  "    healthcheck:", "      test: [\"CMD\", \"curl\", \"-f\", \"http://localhost:8000/health\"]",
                  "      interval: 30s", "      timeout: 5s", "      retries: 10", "      start_period: 120s", ""]
    if bad == "router" or rng.random() < 0.2:
        target = engines[-1]
        path = "/inference/v1/generate" if bad == "router" else "/v1/chat/completions"
        lines += ["  gateway:", f"    image: ghcr.io/example/{rng.choice(APP_WORDS)}-gateway:2.{rng.randint(0, 9)}",
                  "    environment:", f"      UPSTREAM_URL: http://{target}:8000{path}",
                  "      LOG_LEVEL: info", "    ports:", "      - \"8080:8080\"", "    depends_on:",
                  f"      - {target}", ""]
    name = rng.choice(["docker-compose.yml", "compose.yaml", "docker-compose.yaml"])
    return f"compose/{i:04d}-{app}/{name}", "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------- Dockerfile

def gen_dockerfile(i: int, rng: random.Random) -> tuple[str, str]:
    bad = finding_kind(i, rng, ["env", "envlegacy", "connector", "legacy"])
    model = rng.choice(MODELS)
    base = rng.random() < 0.5
    kv = kv_config(rng, "kv_consumer", "connector" if bad == "connector" else None) \
        if rng.random() < 0.25 or bad == "connector" else None
    fl = flags(rng, rng.randint(10, 16), kv, "${VLLM_API_KEY}", legacy=bad == "legacy")
    lines = pad_comment(rng)
    lines += ["# syntax=docker/dockerfile:1.7", "ARG CUDA_VERSION=12.4.1"]
    if base:
        lines += [f"FROM vllm/vllm-openai:{rng.choice(VERSIONS)}"]
    else:
        lines += ["FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu22.04",
                  "RUN apt-get update \\", "    && apt-get install -y --no-install-recommends \\",
                  "       python3 python3-pip curl ca-certificates git \\", "    && rm -rf /var/lib/apt/lists/*",
                  f"RUN pip3 install --no-cache-dir vllm=={rng.choice(PIP_VERSIONS)} \\",
                  "    huggingface_hub[hf_transfer] prometheus-client"]
    lines += [f"LABEL org.opencontainers.image.title=\"{rng.choice(APP_WORDS)}-engine\" \\",
              f"      org.opencontainers.image.vendor=\"{rng.choice(TEAMS)}\" \\",
              f"      org.opencontainers.image.version=\"1.{rng.randint(0, 30)}.{rng.randint(0, 9)}\"",
              "WORKDIR /app", "COPY requirements-extra.txt /app/",
              "RUN pip install --no-cache-dir -r /app/requirements-extra.txt", "COPY entrypoint.d/ /app/entrypoint.d/"]
    env = rng.sample(ENV_POOL, rng.randint(3, 6))
    if bad == "env":
        env.insert(1, ("VLLM_ENABLE_SCALE_OUT_ENDPOINTS", "1"))
    if rng.random() < 0.5:
        lines.append("ENV " + " \\\n    ".join(f"{k}={v}" for k, v in env))
    else:
        lines += [f"ENV {k}={json.dumps(v) if ',' in v else v}" for k, v in env]
    if bad == "envlegacy":
        lines.append("ENV VLLM_ENABLE_SCALE_OUT_ENDPOINTS 1")
    lines += [f"ENV MODEL_ID={model}", "EXPOSE 8000",
              "HEALTHCHECK --interval=30s --timeout=5s --start-period=120s \\",
              "  CMD curl -fsS http://localhost:8000/health || exit 1", "USER 1000"]
    argv = [model] + [x for f, v in fl for x in ([f] if v is None else [f, v])]
    style = rng.choice(["exec", "exec", "shell", "bashc"] if not base else ["cmdonly", "exec", "shell"])
    if style == "cmdonly":      # the image's own ENTRYPOINT is `vllm serve`
        lines.append("CMD [" + ", ".join(json.dumps(x) for x in ["--model"] + argv) + "]")
    elif style == "exec":
        lines += ["ENTRYPOINT [\"vllm\", \"serve\"]", "CMD [" + ", ".join(json.dumps(x) for x in argv) + "]"]
    elif style == "shell":
        parts = [f"CMD vllm serve {model} \\"]
        for j, (f, v) in enumerate(fl):
            end = "" if j == len(fl) - 1 else " \\"
            val = "" if v is None else (f" '{v}'" if v.startswith("{") else f" {v}")
            parts.append(f"    {f}{val}{end}")
        if base:
            lines.append("ENTRYPOINT []")
        lines += parts
    else:
        cmd = "exec vllm serve ${MODEL_ID} " + " ".join(
            f if v is None else (f"{f} '{v}'" if v.startswith("{") else f"{f} {v}") for f, v in fl)
        lines.append("ENTRYPOINT [\"/bin/bash\", \"-c\", " + json.dumps(cmd) + "]")
    return f"docker/{i:04d}-{rng.choice(APP_WORDS)}/Dockerfile", "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- shell

def gen_shell(i: int, rng: random.Random) -> tuple[str, str]:
    bad = finding_kind(i, rng, ["export", "prefix", "policy", "connector", "legacy"])
    model = rng.choice(MODELS)
    lines = ["#!/usr/bin/env bash"] + pad_comment(rng) + ["set -euo pipefail", ""]
    lines += [f"MODEL=\"${{MODEL:-{model}}}\"", f"PORT=\"${{PORT:-{rng.choice([8000, 8100, 9000])}}}\"",
              "LOG_DIR=\"${LOG_DIR:-/var/log/vllm}\"", "mkdir -p \"$LOG_DIR\"", ""]
    for k, v in rng.sample(ENV_POOL, rng.randint(2, 5)):
        lines.append(f"export {k}=\"{v}\"" if "," in v else f"export {k}={v}")
    if bad == "export":
        lines.append("export VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1")
    lines += ["", "log() { echo \"[$(date -Is)] $*\" >&2; }", "",
              "usage() {", "  cat <<EOF", "Usage: $0 [--model NAME] [--port N] [--dry-run]",
              "Starts the vLLM engine for this host; flags mirror the Kubernetes deployment.", "EOF", "}", "",
              "DRY_RUN=0", "while [[ $# -gt 0 ]]; do", "  case \"$1\" in",
              "    --model) MODEL=\"$2\"; shift 2 ;;", "    --port) PORT=\"$2\"; shift 2 ;;",
              "    --dry-run) DRY_RUN=1; shift ;;", "    -h|--help) usage; exit 0 ;;",
              "    *) log \"unknown option: $1\"; usage; exit 2 ;;", "  esac", "done", "",
              "if [[ -d /models/hf ]]; then", "  export HF_HOME=/models/hf", "fi",
              "free_gb=$(df -BG --output=avail /tmp | tail -1 | tr -dc '0-9')",
              "if (( free_gb < 20 )); then", "  log \"warning: only ${free_gb}G free in /tmp\"", "fi",
              "(( DRY_RUN )) && log \"dry run: not starting\" && exit 0", "",
              "if ! command -v nvidia-smi >/dev/null 2>&1; then", "  log \"no GPU driver found\"", "  exit 1", "fi",
              "GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)", "log \"found ${GPUS} GPU(s)\"", ""]
    style = rng.choice(["exec", "exec", "pd", "array", "docker"]) if bad not in ("policy", "connector") else "pd"
    if bad == "legacy" and style == "pd":
        style = "exec"
    if style in ("exec", "docker"):
        fl = flags(rng, rng.randint(10, 18), None, "\"$VLLM_API_KEY\"", legacy=bad == "legacy")
        if style == "exec":
            head = "VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1 exec vllm serve \"$MODEL\" \\" if bad == "prefix" \
                else "exec vllm serve \"$MODEL\" \\"
        else:
            head = (f"exec docker run --rm --gpus all --ipc=host -p \"$PORT\":8000 \\\n"
                    f"  -v \"$HOME/.cache/huggingface:/root/.cache/huggingface\" \\\n"
                    f"  {'-e VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1 ' if bad == 'prefix' else ''}-e HF_TOKEN \\\n"
                    f"  vllm/vllm-openai:{rng.choice(VERSIONS)} \\\n  --model \"$MODEL\" \\")
        lines.append(head)
        for j, (f, v) in enumerate(fl):
            end = "" if j == len(fl) - 1 else " \\"
            if f == "--port":
                v = "8000" if style == "docker" else "\"$PORT\""
            val = "" if v is None else (f" '{v}'" if v.startswith("{") else f" {v}")
            lines.append(f"  {f}{val}{end}")
    elif style == "array":
        fl = flags(rng, rng.randint(10, 18), None, "\"$VLLM_API_KEY\"", legacy=bad == "legacy")
        lines.append("ARGS=(")
        lines.append("  --port \"$PORT\"")
        for f, v in fl[1:]:
            if rng.random() < 0.15:
                lines.append(f"  # {f} is tuned per model")
            lines.append(f"  {f}" if v is None else (f"  {f} '{v}'" if v.startswith("{") else f"  {f} {v}"))
        lines += [")", "log \"launching ${MODEL}\"",
                  ("VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1 " if bad == "prefix" else "") + "vllm serve \"$MODEL\" \"${ARGS[@]}\""]
    else:
        connector = rng.choice(["NixlConnector", "NixlConnector", "LMCacheConnectorV1"])
        for e, role in enumerate(["kv_producer", "kv_consumer"]):
            badkv = bad if (bad in ("policy", "connector") and e == 1) else None
            kv = kv_config(rng, role, badkv, connector)
            fl = flags(rng, rng.randint(8, 12), kv, "\"$VLLM_API_KEY\"")
            lines.append(f"CUDA_VISIBLE_DEVICES={e} {'VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1 ' if bad == 'prefix' else ''}"
                         f"nohup vllm serve \"$MODEL\" \\")
            for f, v in fl:
                if f == "--port":
                    v = str(8100 + 100 * e)
                val = "" if v is None else (f" '{v}'" if v.startswith("{") else f" {v}")
                lines.append(f"  {f}{val} \\")
            lines += [f"  > \"$LOG_DIR/{'prefill' if e == 0 else 'decode'}.log\" 2>&1 &",
                      "PIDS+=($!)", ""]
        lines += ["trap 'kill \"${PIDS[@]}\" 2>/dev/null || true' EXIT",
                  "for p in 8100 8200; do", "  until curl -sf \"http://localhost:${p}/health\" >/dev/null; do sleep 2; done",
                  "done", "log \"prefill and decode are up\"", "wait -n"]
    return f"sh/{i:04d}-serve.sh", "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- Python

def gen_python(i: int, rng: random.Random) -> tuple[str, str]:
    bad = finding_kind(i, rng, ["environ", "envdict", "policy", "legacy"])
    model = rng.choice(MODELS)
    kv = kv_config(rng, "kv_both", "policy" if bad == "policy" else None, "LMCacheConnectorV1") \
        if rng.random() < 0.3 or bad == "policy" else None
    fl = flags(rng, rng.randint(10, 16), None, "sk-local-dev", legacy=bad == "legacy")
    lines = [f'"""Launch the {rng.choice(APP_WORDS)} engine for the {rng.choice(TEAMS)} team.',
             "", "Run from the job scheduler; the flags mirror the Kubernetes deployment.", '"""',
             "from __future__ import annotations", "", "import argparse", "import json", "import os",
             "import signal", "import subprocess", "import sys", "import time", "",
             f"DEFAULT_MODEL = {model!r}", ""]
    if bad == "environ":
        lines += ['os.environ["VLLM_ENABLE_SCALE_OUT_ENDPOINTS"] = "1"', ""]
    lines += ["", "def wait_ready(port: int, timeout: float = 600.0) -> bool:",
              "    import urllib.request", "",
              "    deadline = time.monotonic() + timeout", "    while time.monotonic() < deadline:",
              "        try:",
              "            with urllib.request.urlopen(f\"http://127.0.0.1:{port}/health\", timeout=2) as r:",
              "                if r.status == 200:", "                    return True",
              "        except OSError:", "            pass", "        time.sleep(2)", "    return False", "", "",
              "def main() -> int:", "    parser = argparse.ArgumentParser(description=__doc__)",
              "    parser.add_argument(\"--model\", default=DEFAULT_MODEL)",
              f"    parser.add_argument(\"--port\", type=int, default={rng.choice([8000, 8100, 9000])})",
              "    parser.add_argument(\"--dry-run\", action=\"store_true\")", "    opts = parser.parse_args()", "",
              "    cmd = [", "        \"vllm\",", "        \"serve\",", "        opts.model,"]
    for f, v in fl:
        if f == "--port":
            lines.append("        \"--port\", str(opts.port),")
        elif v is None:
            lines.append(f"        {f!r},")
        else:
            lines.append(f"        {f!r}, {v!r},")
    if kv is not None:
        lines.append(f"        \"--kv-transfer-config\", json.dumps({kv!r}),")
    lines += ["    ]", "    env = os.environ.copy()"]
    env = rng.sample(ENV_POOL, rng.randint(2, 5))
    if bad == "envdict":
        env.append(("VLLM_ENABLE_SCALE_OUT_ENDPOINTS", "1"))
    lines += [f"    env[{k!r}] = {v!r}" for k, v in env]
    lines += ["    if opts.dry_run:", "        print(\" \".join(cmd))", "        return 0",
              "    proc = subprocess.Popen(cmd, env=env)",
              "    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())",
              "    if not wait_ready(opts.port):", "        proc.terminate()",
              "        print(\"engine did not become ready\", file=sys.stderr)", "        return 1",
              "    return proc.wait()", "", "", "if __name__ == \"__main__\":", "    sys.exit(main())"]
    return f"py/{i:04d}_launch.py", "\n".join(lines) + "\n"


GENERATORS = {"k8s": gen_k8s, "compose": gen_compose, "docker": gen_dockerfile, "sh": gen_shell, "py": gen_python}
DEFAULT_COUNTS = {"k8s": 1000, "compose": 1000, "docker": 1000, "sh": 1000, "py": 500}


def generate(dest: Path, counts: dict[str, int] | None = None, seed: int = 8) -> dict[str, list[Path]]:
    """Write the corpus under `dest` (emptied first); the paths written, per kind."""
    counts = {**DEFAULT_COUNTS, **(counts or {})}
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    written: dict[str, list[Path]] = {}
    for kind in KINDS:
        paths = []
        for i in range(counts[kind]):
            rng = random.Random(f"{seed}:{kind}:{i}")       # per file: adding files changes no other file
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
    for kind in KINDS:
        ap.add_argument(f"--{kind}", type=int, default=DEFAULT_COUNTS[kind], help=f"files of kind {kind}")
    ap.add_argument("--per-kind", type=int, help="the same count for every kind (quick runs)")
    ap.add_argument("--seed", type=int, default=8)
    opts = ap.parse_args(argv)
    counts = {k: (opts.per_kind if opts.per_kind is not None else getattr(opts, k)) for k in KINDS}
    written = generate(Path(opts.dest), counts, opts.seed)
    for kind, paths in written.items():
        sizes = sorted(p.stat().st_size for p in paths)
        if sizes:
            print(f"{kind:8} {len(paths):5} files  size min {sizes[0]} median {sizes[len(sizes) // 2]} "
                  f"max {sizes[-1]} bytes", file=sys.stderr)
    print(opts.dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
