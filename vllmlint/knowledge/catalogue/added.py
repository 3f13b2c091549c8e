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
                             f"{len(data.get('json', {}))} JSON config flags"))
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
    added = {"version": cat["version"], "generator": cat["generator"],
             "added": {"name": name, "source": _describe(source)}}
    cat = {**added, **{k: v for k, v in cat.items() if k not in added}}
    where.mkdir(parents=True, exist_ok=True)
    dest = path_of(where, name)
    replaced = dest.exists()
    dest.write_text(dumps(cat), encoding="utf-8")
    counts = f"{len(cat['flags'])} flags, {len(cat['env'])} env vars, {len(cat['json'])} JSON config flags"
    return Entry(name, cat["version"], cat["added"]["source"], dest, counts), cat, replaced


def _describe(source: Path) -> str:
    return f"wheel {source.name}" if source.is_file() else f"folder {source.resolve()}"


__all__ = ["ENV", "Entry", "add", "default_folder", "entries", "folder", "load_added", "names"]
