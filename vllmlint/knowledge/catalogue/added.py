"""Releases a user added with `vllmlint catalogue add`: a nightly, a fork, a plugin-extended
install, read by the same extractor as the built-in ones (`extract.py`).

The folder is, first found: $VLLMLINT_CATALOGUE_DIR, `catalogue-dir` in the settings (relative
to the settings file, so a team can commit theirs), `$XDG_CACHE_HOME/vllmlint/catalogue`
(`~/.cache/vllmlint/catalogue`). Each release is one `NAME.json` in the built-in layout plus an
`added` header (name, source); a release's name may be anything but a built-in release number
or `latest`, and its release number (`version`) places it among the built-in ones.
"""
from __future__ import annotations

import json
import re
from ...model.record import record
from pathlib import Path

from . import ENV, default_folder, folder  # noqa: F401  (here since the first release: callers import them from here)

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")


@record(frozen=True)
class Entry:
    name: str
    version: str          # the release number it carries (vllm/_version.py or --version)
    source: str           # the wheel or folder it was read from
    path: Path            # its file
    counts: str = ""      # "N flags, M env vars, K JSON config flags"
    release: bool = False  # read from vLLM's own release wheel (is_release): ships as image vX.Y.Z


def entries(where: Path) -> list[Entry]:
    """The added releases in `where`, by release number then name (unreadable files left out)."""
    from ..versions import parse_version

    out = []
    for path in sorted(where.glob("*.json")) if where.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            head = data["added"]
            out.append(Entry(head["name"], data["version"], head.get("source", ""), path,
                             f"{len(data['flags'])} flags, {len(data['env'])} env vars, "
                             f"{len(data.get('json', {}))} JSON config flags", bool(head.get("release"))))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return sorted(out, key=lambda e: (parse_version(e.version), e.name))


def names(where: Path) -> list[str]:
    return [e.name for e in entries(where)]


def path_of(where: Path, name: str) -> Path:
    return where / f"{name}.json"


def load_added(where: Path, name: str):
    """The Catalogue of the added release `name`, or None."""
    from . import Catalogue

    path = path_of(where, name)
    if not NAME_RE.match(name) or not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return Catalogue(data) if data.get("added", {}).get("name") == name else None


def check_name(name: str, builtin: list[str]) -> None:
    if not NAME_RE.match(name):
        raise ValueError(f"{name!r} is not a catalogue name: letters, digits and . _ + - (up to 64)")
    if name.lower() == "latest" or name in builtin:
        raise ValueError(f"{name!r} is a built-in release name (or `latest`): pick another with --name")


def add(source: Path, where: Path, name: str | None = None, version: str | None = None) -> tuple[Entry, dict, bool]:
    """Extract the vLLM at `source` (a wheel, an unpacked wheel, a site-packages folder) into
    `where/NAME.json`. Returns (entry, catalogue, replaced an earlier one)."""
    from . import versions
    from ..versions import parse_version
    from .extract import Tree, Extractor, dumps

    try:
        tree = Tree(source)
    except SystemExit as err:            # the extractor's own message: not a wheel, no vllm/
        raise ValueError(str(err)) from None
    version = version or tree.version()
    if not version:
        raise ValueError(f"{source}: no vllm/_version.py says which release this is: pass --version X.Y.Z")
    try:
        parse_version(version)
    except ValueError:
        raise ValueError(f"{source}: release number {version!r} is not X.Y.Z...: pass --version X.Y.Z "
                         f"(the vLLM release it is based on)") from None
    name = name or version
    check_name(name, versions())
    cat = Extractor(tree, version).extract()
    head = {"name": name, "source": _describe(source)}
    dist = distribution(source)
    if dist is not None:
        head["distribution"] = f"{dist[0]} {dist[1]}"
        if is_release(dist, version):
            head["release"] = True
    added = {"version": cat["version"], "generator": cat["generator"], "added": head}
    cat = {**added, **{k: v for k, v in cat.items() if k not in added}}
    where.mkdir(parents=True, exist_ok=True)
    dest = path_of(where, name)
    replaced = dest.exists()
    dest.write_text(dumps(cat), encoding="utf-8")
    counts = f"{len(cat['flags'])} flags, {len(cat['env'])} env vars, {len(cat['json'])} JSON config flags"
    return Entry(name, cat["version"], cat["added"]["source"], dest, counts, bool(head.get("release"))), cat, replaced


RELEASE_RE = re.compile(r"^\d+\.\d+\.\d+(?:\.post\d+)?$")


def distribution(source: Path) -> tuple[str, str] | None:
    """(Name, Version) from the `*.dist-info/METADATA` of the wheel or folder that holds vllm/
    (None: no metadata, e.g. a source checkout)."""
    import email.parser
    import zipfile

    text = None
    if source.is_file() and zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as z:
            meta = sorted(n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
            text = z.read(meta[0]).decode("utf-8", "replace") if meta else None
    elif source.is_dir():
        meta = sorted(source.glob("vllm-*.dist-info/METADATA")) or sorted(source.glob("*.dist-info/METADATA"))
        for path in meta:
            candidate = path.read_text(encoding="utf-8", errors="replace")
            if _name(candidate) == "vllm" or len(meta) == 1:
                text = candidate
                break
    if text is None:
        return None
    head = email.parser.Parser().parsestr(text, headersonly=True)
    name, ver = head.get("Name"), head.get("Version")
    return (name.strip(), ver.strip()) if name and ver else None


def _name(metadata: str) -> str:
    m = re.search(r"^Name:\s*(\S+)", metadata, re.M)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else ""


def is_release(dist: tuple[str, str], version: str) -> bool:
    """vLLM's own release: distribution `vllm` (PEP 503 normalized), a plain release number
    (X.Y.Z or X.Y.Z.postN: no .dev, rc or +local part, which nightlies, CPU and platform builds
    carry), the same number its vllm/_version.py says. Such a release has image tag vX.Y.Z and
    pin vllm==X.Y.Z, so `migrate --to` bumps them as for a built-in release."""
    name, ver = dist
    return re.sub(r"[-_.]+", "-", name).lower() == "vllm" and bool(RELEASE_RE.match(ver)) and ver == version


def _describe(source: Path) -> str:
    return f"wheel {source.name}" if source.is_file() else f"folder {source.resolve()}"


__all__ = ["ENV", "Entry", "add", "default_folder", "distribution", "entries", "folder", "is_release", "load_added",
           "names"]
