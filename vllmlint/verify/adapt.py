"""From a launch in the config to the argv and environment that run here.

The config's own argv and environment, plus only the adaptations needed to run on this host,
each one recorded for the report:
  * the model -> the tiny model (or `--model DIR`), model-specific flags dropped;
  * ports -> free ports on 127.0.0.1, `--host` -> 127.0.0.1;
  * on a CPU host: GPU-only settings (parallel sizes, `--gpu-memory-utilization`, quantization,
    CUDA KV buffers -> `kv_buffer_device: cpu`, GPU pinning in the environment) and an explicit
    small KV cache, float32, eager mode and `--max-model-len 512`;
  * paths that only exist on the cluster (ExampleConnector's `shared_storage_path`, HF caches)
    -> temporary folders, keeping which launches share one;
  * tokens whose value is only known at run time: resolved from the launch's static environment
    or their `${VAR:-default}`, else left out.
Nothing is run through a shell: the result is an argv list.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..model.kvconfig import NIXL, kv_config
from ..model.launch import API_SERVER, RENDER, SERVE, TOKENS_ONLY, Launch, normalize_flag
from ..lint.report import is_secret, mask_argv, mask_env

CPU_KV_BYTES = "64M"
MAX_MODEL_LEN = 512
ENGINE_KINDS = (SERVE, TOKENS_ONLY, API_SERVER)
SERVER_KINDS = ENGINE_KINDS + (RENDER,)

# flag -> (arity, why). arity: 0 boolean, 1 one value, "+" every value up to the next flag
GPU_ONLY: dict[str, tuple[object, str]] = {
    "--tensor-parallel-size": (1, "one CPU worker"), "-tp": (1, "one CPU worker"),
    "--pipeline-parallel-size": (1, "one CPU worker"), "-pp": (1, "one CPU worker"),
    "--data-parallel-size": (1, "one CPU engine"), "-dp": (1, "one CPU engine"),
    "--data-parallel-size-local": (1, "one CPU engine"), "-dpl": (1, "one CPU engine"),
    "--data-parallel-address": (1, "one CPU engine"), "-dpa": (1, "one CPU engine"),
    "--data-parallel-rpc-port": (1, "one CPU engine"), "-dpp": (1, "one CPU engine"),
    "--data-parallel-start-rank": (1, "one CPU engine"), "-dpr": (1, "one CPU engine"),
    "--data-parallel-backend": (1, "one CPU engine"), "-dpb": (1, "one CPU engine"),
    "--data-parallel-hybrid-lb": (0, "one CPU engine"), "--data-parallel-external-lb": (0, "one CPU engine"),
    "--enable-expert-parallel": (0, "one CPU worker"), "-ep": (0, "one CPU worker"),
    "--decode-context-parallel-size": (1, "one CPU worker"), "-dcp": (1, "one CPU worker"),
    "--gpu-memory-utilization": (1, "no GPU memory; the KV cache size is explicit"),
    "--distributed-executor-backend": (1, "one CPU worker"),
    "--device": (1, "the CPU build picks its device"),
    "--cpu-offload-gb": (1, "nothing to offload from"), "--swap-space": (1, "no GPU to swap from"),
    "--kv-cache-dtype": (1, "the CPU backend keeps the model dtype"),
    "--quantization": (1, "the tiny model is not quantized"), "-q": (1, "the tiny model is not quantized"),
    "--compilation-config": (1, "eager mode"), "-O": (1, "eager mode"),
    "--block-size": (1, "the CPU backend's block size (128)"),
    "--cuda-graph-sizes": (1, "eager mode"), "--max-seq-len-to-capture": (1, "eager mode"),
    "--numa-bind": (0, "one CPU node"),
}
MODEL_SPECIFIC: dict[str, tuple[object, str]] = {
    "--tokenizer": (1, "the tiny model's tokenizer"), "--revision": (1, "local model"),
    "--tokenizer-revision": (1, "local model"), "--code-revision": (1, "local model"),
    "--download-dir": (1, "nothing is downloaded"), "--load-format": (1, "safetensors of the tiny model"),
    "--trust-remote-code": (0, "the tiny model has no remote code"),
    "--hf-overrides": (1, "for the real model"), "--rope-scaling": (1, "for the real model"),
    "--rope-theta": (1, "for the real model"), "--speculative-config": (1, "no draft model"),
    "--num-speculative-tokens": (1, "no draft model"), "--speculative-model": (1, "no draft model"),
    "--enable-lora": (0, "no adapters"), "--lora-modules": ("+", "no adapters"),
    "--max-lora-rank": (1, "no adapters"), "--max-loras": (1, "no adapters"),
    "--chat-template": (1, "the tiny model's chat template"), "--generation-config": (1, "the tiny model's"),
    "--limit-mm-per-prompt": (1, "text-only model"), "--mm-processor-kwargs": (1, "text-only model"),
    "--tokenizer-mode": (1, "the tiny model's tokenizer"), "--config-format": (1, "the tiny model's"),
    "--hf-config-path": (1, "the tiny model's"), "--max-num-batched-tokens": (1, "sized for --max-model-len 512"),
    "--ssl-keyfile": (1, "probes speak plain HTTP on 127.0.0.1"), "--ssl-certfile": (1, "probes speak plain HTTP on 127.0.0.1"),
    "--ssl-ca-certs": (1, "probes speak plain HTTP on 127.0.0.1"), "--uds": (1, "TCP on 127.0.0.1"),
    "--headless": (0, "the API server is what is verified"),
}
ENV_GPU = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES"}
ENV_PATHS = {"HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "VLLM_CACHE_ROOT",
             "XDG_CACHE_HOME", "VLLM_CONFIG_ROOT", "VLLM_ASSETS_CACHE"}
BASE_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ", "USER", "LOGNAME")
VAR_RE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}|\$(\w+)|\$\((\w+)\)")


@dataclass
class UnitContext:
    """What the launches of one deployment share when adapted together."""

    workdir: Path
    model: Path
    vllm: Path
    python: str
    cpu: bool = True
    ports: dict[int, int] = field(default_factory=dict)          # id(launch) -> port here
    storage: dict[str, Path] = field(default_factory=dict)       # original path -> temp path
    decoders: set[int] = field(default_factory=set)              # id(launch) of P/D consumers
    connector: str | None = None       # run P/D pairs over this connector instead: example | nixl
    server_count: int = 0              # servers in the unit (0: unknown)
    cores_given: int = 0               # CPU hosts: servers given their cores so far
    vllm_version: str | None = None    # the release that runs (`importlib.metadata.version("vllm")`)

    def storage_for(self, original: str) -> Path:
        if original not in self.storage:
            path = self.workdir / f"kv-store-{len(self.storage) + 1}"
            path.mkdir(parents=True, exist_ok=True)
            self.storage[original] = path
        return self.storage[original]


@dataclass
class ServerPlan:
    launch: Launch
    name: str
    kind: str
    argv: list[str]
    env: dict[str, str]                 # the whole environment it runs with
    config_env: dict[str, str]          # the part that comes from the config (after adaptation)
    adaptations: list[str]
    port: int
    original_port: int | None
    served_name: str | None
    api_key: str | None
    kv: dict | None                     # adapted kv-transfer-config
    kv_role: str | None
    connector: str | None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def masked_argv(self) -> list[str]:
        return mask_argv(self.argv)

    def masked_env(self) -> dict[str, str]:
        return {k: mask_env(k, v) or "" for k, v in self.config_env.items()}


def resolve(value: str, env: dict[str, str | None]) -> str | None:
    """A token's value with `$VAR`, `${VAR}`, `${VAR:-default}` and `$(VAR)` filled in from the
    launch's static environment; None when a variable is not known (or the token is `$@`)."""
    if value in ("$@", "$*") or "{{" in value or "`" in value:
        return None
    missing = False

    def sub(m: re.Match) -> str:
        nonlocal missing
        name = m.group(1) or m.group(3) or m.group(4)
        known = env.get(name)
        if known is not None and "$" not in known:
            return known
        if m.group(1) and m.group(2) is not None:
            return m.group(2)
        missing = True
        return ""

    out = VAR_RE.sub(sub, value)
    if missing or "$" in out:
        return None
    return out


def launch_name(launch: Launch) -> str:
    return f"{launch.file.display}:{launch.line} {launch.context}"


def _env_of(launch: Launch) -> tuple[dict[str, str | None], list[str]]:
    env: dict[str, str | None] = {}
    for entry in launch.env:
        env[entry.name] = entry.value
    return env, []


def adapt(launch: Launch, ctx: UnitContext, port: int) -> ServerPlan:
    notes: list[str] = []
    config_env_raw, _ = _env_of(launch)
    kind = launch.kind
    engine = kind in ENGINE_KINDS

    # -- program words -------------------------------------------------------------
    if kind in (SERVE, TOKENS_ONLY):
        prefix = [str(ctx.vllm), "serve"]
    elif kind == RENDER:
        prefix = [str(ctx.vllm), "launch", "render"]
    elif kind == API_SERVER:
        prefix = [ctx.python, "-m", "vllm.entrypoints.openai.api_server"]
    else:                                   # pragma: no cover - the caller filters kinds
        raise ValueError(kind)
    program = " ".join(a.value for a in launch.argv[:launch.options_start]) or launch.program
    if launch.image and not program:
        notes.append(f"program: the entrypoint of image {launch.image} -> {' '.join(prefix)}")
    elif launch.image:
        notes.append(f"program: `{program}` in image {launch.image} -> {' '.join(prefix)}")
    elif program:
        notes.append(f"program: `{program}` -> {' '.join(prefix)}")

    # -- option tokens, dynamic ones resolved -----------------------------------------
    tokens: list[str] = []
    for arg in launch.options:
        if arg.dynamic or "$" in arg.value:
            value = resolve(arg.value, config_env_raw)
            if value is None:
                notes.append(f"left out `{arg.value}`: its value is only known at run time")
                if tokens and tokens[-1].startswith("--") and "=" not in tokens[-1]:
                    flag = tokens.pop()
                    notes[-1] = f"left out `{flag} {arg.value}`: its value is only known at run time"
                continue
            if value != arg.value:
                notes.append(f"`{arg.value}` -> `{value}` (static value)")
            if arg.splits and not arg.value.startswith('"'):
                tokens.extend(value.split())
            else:
                tokens.append(value)
        else:
            tokens.append(arg.value)

    # -- flags ------------------------------------------------------------------------
    out: list[str] = []
    seen: set[str] = set()
    served_name = api_key = None
    kv_tokens_at: int | None = None
    i = 0
    first = True
    while i < len(tokens):
        tok = tokens[i]
        if first and not tok.startswith("-"):
            if kind in (SERVE, TOKENS_ONLY, RENDER):
                notes.append(f"model `{tok}` -> {ctx.model}")
                out.append(str(ctx.model))
                seen.add("--model")
                i += 1
                first = False
                continue
        first = False
        if not tok.startswith("-"):
            out.append(tok)
            i += 1
            continue
        name, eq, inline = tok.partition("=")
        norm = normalize_flag(name) if name.startswith("--") else name
        has_next = i + 1 < len(tokens) and not tokens[i + 1].startswith("--")

        def value_and_skip() -> tuple[str | None, int]:
            if eq:
                return inline, 1
            if has_next:
                return tokens[i + 1], 2
            return None, 1

        table = None
        if norm in MODEL_SPECIFIC:
            table = MODEL_SPECIFIC[norm]
        elif ctx.cpu and norm in GPU_ONLY and engine:
            table = GPU_ONLY[norm]
        if table is not None:
            arity, why = table
            if arity == 0 or eq:
                step = 1
                shown = tok
            elif arity == "+":
                step = 1
                while i + step < len(tokens) and not tokens[i + step].startswith("-"):
                    step += 1
                shown = " ".join(tokens[i:i + step])
            else:
                _, step = value_and_skip()
                shown = " ".join(tokens[i:i + step])
            notes.append(f"dropped `{shown}`: {why}")
            i += step
            continue
        if norm == "--model":
            value, step = value_and_skip()
            notes.append(f"model `{value}` -> {ctx.model}")
            out += ["--model", str(ctx.model)]
            seen.add("--model")
            i += step
            continue
        if norm == "--host":
            value, step = value_and_skip()
            if value != "127.0.0.1":
                notes.append(f"--host {value} -> 127.0.0.1")
            out += ["--host", "127.0.0.1"]
            seen.add("--host")
            i += step
            continue
        if norm == "--port":
            value, step = value_and_skip()
            notes.append(f"port {value} -> {port}")
            out += ["--port", str(port)]
            seen.add("--port")
            i += step
            continue
        if norm == "--max-model-len" and engine or norm == "--max-model-len" and kind == RENDER:
            value, step = value_and_skip()
            try:
                number = int(value or "")
            except ValueError:
                number = None
            keep = number is not None and 0 < number <= MAX_MODEL_LEN
            if not keep:
                notes.append(f"--max-model-len {value} -> {MAX_MODEL_LEN} (the tiny model's size)")
            out += ["--max-model-len", str(number if keep else MAX_MODEL_LEN)]
            seen.add("--max-model-len")
            i += step
            continue
        if norm == "--dtype" and engine:
            value, step = value_and_skip()
            if value != "float32" and ctx.cpu:
                notes.append(f"--dtype {value} -> float32 (CPU)")
                value = "float32"
            out += ["--dtype", value or "float32"]
            seen.add("--dtype")
            i += step
            continue
        if norm == "--kv-cache-memory-bytes" and engine and ctx.cpu:
            value, step = value_and_skip()
            if value != CPU_KV_BYTES:
                notes.append(f"--kv-cache-memory-bytes {value} -> {CPU_KV_BYTES}")
            out += ["--kv-cache-memory-bytes", CPU_KV_BYTES]
            seen.add("--kv-cache-memory-bytes")
            i += step
            continue
        if norm == "--disable-log-stats" and id(launch) in ctx.decoders:
            notes.append("dropped `--disable-log-stats`: decode's `KV Transfer metrics` line is read")
            i += 1
            continue
        if norm == "--served-model-name":
            value, step = value_and_skip()
            served_name = value
        if norm == "--api-key":
            value, step = value_and_skip()
            api_key = value
        if norm.startswith("--kv-transfer-config"):
            if kv_tokens_at is None:
                kv_tokens_at = len(out)
        if norm == "--enforce-eager":
            seen.add(norm)
        out.append(tok)
        i += 1

    # -- kv-transfer-config -----------------------------------------------------------------
    cfg = kv_config(launch)
    kv = None
    if cfg is not None and cfg.data and not cfg.error and not cfg.unknown:
        kv = json.loads(json.dumps(cfg.data))
        changed = _adapt_kv(kv, ctx, notes)
        if changed:
            out = _replace_kv_tokens(out, kv, kv_tokens_at)

    # -- additions ------------------------------------------------------------------------
    if "--model" not in seen and kind in ENGINE_KINDS + (RENDER,):
        notes.append(f"model -> {ctx.model} (`--model` added)")
        out += ["--model", str(ctx.model)]
    if "--host" not in seen:
        notes.append("--host 127.0.0.1 added (vLLM binds 0.0.0.0 by default)")
        out += ["--host", "127.0.0.1"]
    if "--port" not in seen:
        notes.append(f"port {launch.port or 8000} (default) -> {port}")
        out += ["--port", str(port)]
    if "--max-model-len" not in seen:
        out += ["--max-model-len", str(MAX_MODEL_LEN)]
        notes.append(f"--max-model-len {MAX_MODEL_LEN} added (the tiny model's size)")
    if engine and ctx.cpu:
        if "--dtype" not in seen:
            out += ["--dtype", "float32"]
            notes.append("--dtype float32 added (CPU)")
        if "--enforce-eager" not in seen:
            out += ["--enforce-eager"]
            notes.append("--enforce-eager added (no compile step on CPU)")
        if "--kv-cache-memory-bytes" not in seen:
            out += ["--kv-cache-memory-bytes", CPU_KV_BYTES]
            notes.append(f"--kv-cache-memory-bytes {CPU_KV_BYTES} added (else the CPU worker takes a share of all RAM)")
    if ctx.cpu and launch.gpu_count:
        notes.append(f"device reservation of {launch.gpu_count} GPU(s) not applied (CPU host)")
    if ctx.cpu and launch.gpus:
        notes.append(f"GPU pinning {launch.gpus} not applied (CPU host)")

    # -- environment ---------------------------------------------------------------------------
    config_env: dict[str, str] = {}
    for name, value in config_env_raw.items():
        if value is None:
            notes.append(f"env {name} left out: its value is not known statically")
            continue
        if "$" in value:
            resolved = resolve(value, config_env_raw)
            if resolved is None:
                notes.append(f"env {name} left out: its value is only known at run time")
                continue
            value = resolved
        if ctx.cpu and name in ENV_GPU:
            notes.append(f"env {name}={value} left out (CPU host)")
            continue
        if name in ENV_PATHS:
            notes.append(f"env {name}={value} -> a temporary folder")
            value = str(ctx.workdir / "cache" / name.lower())
        if name == "VLLM_HOST_IP" and value != "127.0.0.1":
            notes.append(f"env VLLM_HOST_IP={value} -> 127.0.0.1")
            value = "127.0.0.1"
        if name == "VLLM_API_KEY" and api_key is None:
            api_key = value
        config_env[name] = value
    if any(part.get("kv_connector") in NIXL for part in _kv_parts(kv or {})):
        side = ctx.ports.setdefault(-id(launch), _port())
        for name, value in (("VLLM_NIXL_SIDE_CHANNEL_HOST", "127.0.0.1"), ("VLLM_NIXL_SIDE_CHANNEL_PORT", str(side))):
            if config_env.get(name) != value:
                notes.append(f"env {name}={config_env.get(name, '(default)')} -> {value}")
            config_env[name] = value
    if ctx.cpu and "VLLM_CPU_OMP_THREADS_BIND" not in config_env:
        # vLLM's "auto" binding gives every server the same cores with spinning OpenMP threads;
        # two engines on one small host then starve each other (and NIXL's progress threads):
        # measured on 2 cores, 16-token turns took 10-200 s, and 0.3-3 s once split.
        cores = _next_cores(ctx)
        if cores is not None:
            config_env["VLLM_CPU_OMP_THREADS_BIND"] = cores
            notes.append(f"env VLLM_CPU_OMP_THREADS_BIND={cores} added (the host's cores split between the servers)")
    if id(launch) in ctx.decoders and "VLLM_LOG_STATS_INTERVAL" not in config_env:
        config_env["VLLM_LOG_STATS_INTERVAL"] = "2"
        notes.append("env VLLM_LOG_STATS_INTERVAL=2 added (the `KV Transfer metrics` line comes sooner)")
    env = base_env(ctx)
    env.update(config_env)
    cfg_role = (kv or {}).get("kv_role")
    return ServerPlan(launch, launch_name(launch), kind, prefix + out, env, config_env, notes, port,
                      launch.port, served_name, api_key, kv, cfg_role, (kv or {}).get("kv_connector"))


def _next_cores(ctx: UnitContext) -> str | None:
    """This server's share of the host's cores ("3" or "4,5,6"): an equal slice each, one core
    each (in turn) when there are more servers than cores."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if not cores:
        return None
    share = max(1, len(cores) // max(1, ctx.server_count))
    i = ctx.cores_given
    ctx.cores_given += 1
    mine = cores[i * share:(i + 1) * share]
    return ",".join(str(c) for c in mine) if mine else str(cores[i % len(cores)])


def _port() -> int:
    from .procs import free_port
    return free_port()


def base_env(ctx: UnitContext) -> dict[str, str]:
    """The minimal environment every process starts from (no proxy, no GPU, no network)."""
    env = {k: os.environ[k] for k in BASE_ENV_KEEP if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    env.update(HOME=str(ctx.workdir / "home"), TMPDIR=str(ctx.workdir / "tmp"),
               HF_HOME=str(ctx.workdir / "cache" / "hf_home"), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
               VLLM_HOST_IP="127.0.0.1", TOKENIZERS_PARALLELISM="false")
    for key in ("HOME", "TMPDIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return env


def _kv_parts(kv: dict) -> list[dict]:
    parts = [kv] if kv else []
    extra = kv.get("kv_connector_extra_config") if kv else None
    if isinstance(extra, dict):
        for child in extra.get("connectors") or []:
            if isinstance(child, dict):
                parts.append(child)
    return parts


def _swap_connector(kv: dict, ctx: UnitContext, notes: list[str]) -> bool:
    """`--connector example|nixl`: the P/D pair runs over that connector, roles kept."""
    if ctx.connector is None or kv.get("kv_role") not in ("kv_producer", "kv_consumer", "kv_both"):
        return False
    want = {"example": "ExampleConnector", "nixl": "NixlConnector"}[ctx.connector]
    if kv.get("kv_connector") == want:
        return False
    notes.append(f"kv_connector {kv.get('kv_connector')} -> {want} (--connector {ctx.connector})")
    role = kv["kv_role"]
    kv.clear()
    kv.update(kv_connector=want, kv_role=role)
    if want == "ExampleConnector":
        kv["kv_connector_extra_config"] = {"shared_storage_path": "(--connector example)"}
    return True


def _adapt_kv(kv: dict, ctx: UnitContext, notes: list[str]) -> bool:
    changed = _swap_connector(kv, ctx, notes)
    for part in _kv_parts(kv):
        connector = part.get("kv_connector")
        extra = part.get("kv_connector_extra_config")
        if isinstance(extra, dict) and "shared_storage_path" in extra:
            original = str(extra["shared_storage_path"])
            here = str(ctx.storage_for(original))
            notes.append(f"kv shared_storage_path {original} -> {here}")
            extra["shared_storage_path"] = here
            changed = True
        elif connector == "ExampleConnector":
            extra = part.setdefault("kv_connector_extra_config", {}) if not isinstance(extra, dict) else extra
            here = str(ctx.storage_for("(default)"))
            notes.append(f"kv shared_storage_path (default) -> {here}")
            extra["shared_storage_path"] = here
            changed = True
        if ctx.cpu and connector in NIXL:
            if part.get("kv_buffer_device", "cuda") != "cpu":
                notes.append(f"kv_buffer_device {part.get('kv_buffer_device', 'cuda (default)')} -> cpu (CPU host)")
                part["kv_buffer_device"] = "cpu"
                changed = True
            extra = part.setdefault("kv_connector_extra_config", {})
            if isinstance(extra, dict) and "kv_lease_duration" not in extra:
                extra["kv_lease_duration"] = 300
                notes.append("kv kv_lease_duration 300 added (CPU transfers take minutes)")
                changed = True
        for key in ("kv_ip",):
            if key in part and part[key] not in ("127.0.0.1", "localhost"):
                notes.append(f"kv {key} {part[key]} -> 127.0.0.1")
                part[key] = "127.0.0.1"
                changed = True
        if "kv_port" in part:
            new = _port()
            notes.append(f"kv kv_port {part['kv_port']} -> {new}")
            part["kv_port"] = new
            changed = True
    return changed


def _replace_kv_tokens(out: list[str], kv: dict, at: int | None) -> list[str]:
    """Drop every `--kv-transfer-config*` token (with its value) and put one JSON value back."""
    result: list[str] = []
    i = 0
    insert_at = None
    while i < len(out):
        tok = out[i]
        name = tok.split("=", 1)[0]
        if name.startswith("--") and normalize_flag(name).startswith("--kv-transfer-config"):
            if insert_at is None:
                insert_at = len(result)
            if "=" in tok:
                i += 1
            else:
                i += 2
            continue
        result.append(tok)
        i += 1
    pos = insert_at if insert_at is not None else len(result)
    return result[:pos] + ["--kv-transfer-config", json.dumps(kv, separators=(",", ":"))] + result[pos:]


def is_secret_name(name: str) -> bool:
    return is_secret(name)
