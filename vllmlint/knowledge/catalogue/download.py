"""`vllmlint catalogue add vllm==0.35.0` / `--latest`: a release's wheel from the package index.

pip does the asking and the downloading, with the user's own configuration (pip.conf,
PIP_INDEX_URL, PIP_FIND_LINKS, proxies, certificates: pip reads them itself, nothing is passed
in their place), and shows its own progress. The wheel goes to a temporary folder and is deleted
once read: what is kept (the cache) is the extracted release in the catalogue folder, about
0.3 MB instead of a 240 MB wheel; asking again for a release already added from vLLM's own wheel
downloads nothing.

Only the Python source of the wheel is read, which is the same in every platform's wheel, so
the same wheel is asked for on every machine (a Linux x86_64 CPython 3.12 one, or a pure-Python
one): a Mac or an ARM laptop gets the catalogue its Linux servers run.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

# name==X.Y.Z[...] (PEP 508 name, an exact pin): the one requirement form that names one release
REQUIREMENT_RE = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*===?\s*(?P<version>[0-9][\w.!+-]*)\s*$")
# the wheel vLLM publishes: cp38-abi3 manylinux (one glibc baseline per era) or a pure-Python one
TARGET = ("--only-binary=:all:", "--implementation", "cp", "--python-version", "3.12", "--abi", "abi3",
          *[arg for p in ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64",
                          "manylinux_2_31_x86_64", "manylinux_2_34_x86_64", "manylinux_2_35_x86_64",
                          "manylinux_2_39_x86_64", "any") for arg in ("--platform", p)])


class DownloadError(Exception):
    """pip could not get the wheel: offline, refused, no such release. One line, for the user."""


def requirement(text: str) -> tuple[str, str] | None:
    """(name, version) when `text` is an exact pin `name==X.Y.Z`, else None (a path)."""
    m = REQUIREMENT_RE.match(text)
    return (m.group("name"), m.group("version")) if m else None


def pip_command() -> list[str]:
    """pip of the Python vllmlint runs in, else the first `pip` on PATH."""
    try:
        import pip  # noqa: F401  (only whether it is there)
        return [sys.executable, "-m", "pip"]
    except ImportError:
        found = shutil.which("pip3") or shutil.which("pip")
        if not found:
            raise DownloadError("no pip to download with: install pip, or download the wheel yourself "
                                "(`pip download --no-deps vllm==X.Y.Z`) and pass its path") from None
        return [found]


def _run(args: list[str], what: str, show: bool) -> str:
    """Run pip; its progress (stdout) goes to our stderr when `show`; its stderr is kept for the
    error line. Returns pip's stdout when not shown."""
    try:
        proc = subprocess.run(pip_command() + args, stdin=subprocess.DEVNULL, text=True,
                              stdout=2 if show else subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as err:
        raise DownloadError(f"{what}: cannot run pip: {err}") from None
    if proc.returncode != 0:
        raise DownloadError(f"{what}: {_reason(proc.stderr, proc.returncode)}")
    return proc.stdout or ""


def _reason(stderr: str, rc: int) -> str:
    """pip's own reason: its last `ERROR:` line (offline: a connection error; a version the index
    does not have: 'No matching distribution found')."""
    errors = [l.strip()[len("ERROR:"):].strip() for l in stderr.splitlines() if l.strip().startswith("ERROR:")]
    if errors:
        return errors[-1]
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    return lines[-1] if lines else f"pip exited with status {rc}"


def latest(name: str = "vllm") -> str:
    """The newest release of `name` on the index pip is configured with (no pre-releases)."""
    out = _run(["index", "versions", name, *TARGET], f"cannot ask the package index for {name}'s releases", False)
    m = re.search(rf"^{re.escape(name)}\s*\(([^)]+)\)", out, re.M | re.I)
    if not m:
        raise DownloadError(f"the package index lists no release of {name}")
    return m.group(1).strip()


def download(name: str, version: str, dest: Path) -> Path:
    """`pip download --no-deps NAME==VERSION` into `dest` (progress on stderr); the wheel's path."""
    dest.mkdir(parents=True, exist_ok=True)
    _run(["download", "--no-deps", "--disable-pip-version-check", *TARGET, "-d", str(dest), f"{name}=={version}"],
         f"cannot download {name}=={version}", True)
    wheels = sorted(dest.glob("*.whl"))
    if not wheels:
        raise DownloadError(f"pip downloaded no wheel for {name}=={version} (only a source archive?)")
    return wheels[0]


__all__ = ["DownloadError", "download", "latest", "requirement"]
