"""What each vLLM release's wheel requires: `Requires-Python` and `Requires-Dist`.

Read from the wheel's own `*.dist-info/METADATA` (core metadata, the same bytes the package
index serves as the PEP 658 `.metadata` file). The built-in releases are in `requires.json`
next to this module, one entry per release:

    {"0.30.0": {"python": ">=3.10,<3.15", "dist": ["torch==2.13.0", ...], "from": "..."}}

written by `scripts/fetch_requires.py` (the index's metadata, no wheel download) or by the
catalogue extractor from a wheel (`extract.py`, `vllmlint catalogue add`). An added release
keeps its own under the `requires` key of its catalogue file.

`migrate` reads them to bump a vLLM pin together with the pins its new release needs, and
to refuse a bump whose environment cannot hold the new release (`lint/requirements.py`).
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "requires.json"


def from_wheel(path: Path) -> dict | None:
    """The requirements in a wheel's METADATA (extract.wheel_requires: the extractor reads them)."""
    from .extract import wheel_requires

    return wheel_requires(path)


@lru_cache(maxsize=1)
def builtin() -> dict:
    try:
        return json.loads(DATA.read_text(encoding="utf-8"))
    except OSError:
        return {}


def for_release(version: str) -> dict | None:
    """The requirements of release `version` (a built-in one, or the added catalogue in use when
    its release number is `version`), or None when vllmlint does not have them."""
    from . import active

    added = active()
    if added is not None and added.version == version and added._data.get("requires"):
        return added._data["requires"]
    return builtin().get(version)


def of_catalogue(cat) -> dict | None:
    """The requirements recorded for `cat` (an added release keeps its own; a built-in one's
    are in requires.json)."""
    if "added" in cat._data:
        return cat._data.get("requires")
    return builtin().get(cat.version)


def record_builtin(version: str, requires: dict, path: Path = DATA) -> None:
    """Write `requires` as release `version`'s entry of `path` (the built-in requires.json)."""
    from .extract import record_requires

    record_requires(path, version, requires)
    builtin.cache_clear()


# --------------------------------------------------------------------------------------------
# Reading the requirements
# --------------------------------------------------------------------------------------------
def canonical(name: str) -> str:
    """PEP 503 name: `huggingface_hub` = `huggingface-hub` = `HuggingFace.Hub`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(entry: dict, extras: tuple[str, ...] = (), python: str | None = None) -> dict:
    """{canonical name: packaging Requirement} of the entry's Requires-Dist that apply to a Linux
    x86_64 install with `extras` (markers evaluated; `python`: the interpreter's X.Y, else the
    markers that name python_version are kept)."""
    out: dict = {}
    for text in entry.get("dist", []):
        req = _applying(text, extras, python)
        if req is not None:
            out.setdefault(canonical(req.name), req)
    return out


@lru_cache(maxsize=8192)
def _applying(text: str, extras: tuple[str, ...], python: str | None):
    """One Requires-Dist line parsed, or None when it does not parse or its marker excludes the
    install `requirements` describes. Memoised: a migrate asks for the same release's ~110 lines
    once per environment and step (46 times on 200 files: 5,000 parses, 14% of its CPU). The
    Requirement is shared, so callers only read it."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(text)
    except InvalidRequirement:
        return None
    if req.marker is not None:
        marker = str(req.marker)
        if "python_version" in marker and not python:
            pass        # kept: which interpreter runs it is not known here
        else:
            env = dict(_LINUX_X86_64)
            if python:
                env["python_version"] = python
                env["python_full_version"] = python + ".0"
            if not any(req.marker.evaluate({**env, "extra": e}) for e in (extras or ("",))):
                return None
    return req


_LINUX_X86_64 = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
                 "os_name": "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def exact_pin(req) -> str | None:
    """The version an `==X` requirement names (no wildcard), else None."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None
