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
from email.parser import HeaderParser
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "requires.json"


def from_metadata(text: str, origin: str = "") -> dict:
    """{"python", "dist", "from"} of a core-metadata file (METADATA / PKG-INFO)."""
    msg = HeaderParser().parsestr(text)
    return {"python": (msg.get("Requires-Python") or "").strip(),
            "dist": [" ".join(v.split()) for v in msg.get_all("Requires-Dist") or []],
            "from": origin}


def from_wheel(path: Path) -> dict | None:
    """The requirements in a wheel's (or an unpacked wheel's folder's) vllm-*.dist-info/METADATA;
    None when it has none (a source tree)."""
    import zipfile

    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if re.fullmatch(r"vllm[^/]*\.dist-info/METADATA", n)]
            if names:
                return from_metadata(zf.read(names[0]).decode("utf-8", "replace"), f"{path.name}:{names[0]}")
        return None
    if path.is_dir():
        for meta in sorted(path.glob("vllm*.dist-info/METADATA")):
            return from_metadata(meta.read_text(encoding="utf-8", errors="replace"), f"{meta.parent.name}/METADATA")
    return None


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
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    data[version] = requires
    path.write_text(dumps(data), encoding="utf-8")
    builtin.cache_clear()


def dumps(data: dict) -> str:
    """One release per block, one requirement per line: a new release is a readable diff."""
    from ..versions import parse_version

    def key(v: str):
        try:
            return (0, parse_version(v), v)
        except ValueError:
            return (1, (0, 0, 0), v)

    blocks = []
    for version in sorted(data, key=key):
        entry = data[version]
        dist = ",\n    ".join(json.dumps(d) for d in entry.get("dist", []))
        blocks.append(f' {json.dumps(version)}: {{"python": {json.dumps(entry.get("python", ""))}, '
                      f'"from": {json.dumps(entry.get("from", ""))},\n   "dist": [\n    {dist}]}}')
    return "{\n" + ",\n".join(blocks) + "\n}\n"


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
    from packaging.requirements import InvalidRequirement, Requirement

    env = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
           "os_name": "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython"}
    if python:
        env["python_version"] = python
        env["python_full_version"] = python + ".0"
    out: dict = {}
    for text in entry.get("dist", []):
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is not None:
            marker = str(req.marker)
            if "python_version" in marker and not python:
                pass        # kept: which interpreter runs it is not known here
            elif not any(req.marker.evaluate({**env, "extra": e}) for e in (extras or ("",))):
                continue
        out.setdefault(canonical(req.name), req)
    return out


def exact_pin(req) -> str | None:
    """The version an `==X` requirement names (no wildcard), else None."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None
