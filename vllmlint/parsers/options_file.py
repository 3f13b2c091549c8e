"""The options a launch reads from a file: `vllm serve --config FILE.yaml`.

vLLM's argument parser (FlexibleArgumentParser, vllm/utils/argparse_utils.py:462-610 in 0.30.0)
turns each `key: value` of the YAML file into `--key value` and inserts them after the subcommand
(and the positional model), before the command line's own options, so the command line wins:
a true boolean is `--key`, a list `--key item...`, a mapping `--key '<json>'`, anything else
`--key str(value)`. Found as a user on coder-cong/PesticideRecipeGen: a `--swap-space` in the
file was unseen, the same flag on the command line was an error.

Every front end meets such a file through this one door, after it parsed its own file
(`lint.project.parse_source`): the file's options become argv tokens of the launch, each with
its span in the options file, so every rule reads them as it reads the command line and reports
them where they are written. No fix edits that file (lint.engine: "no automatic fix").

Read only when it is certain which file vLLM reads: a launch that runs on the host (a shell
script, a Makefile or justfile recipe, a Python launcher; not in a container image), `--config
PATH` written literally (vLLM reads the space form only; `--config=PATH` is not expanded), a
relative `.yaml`/`.yml` path that names one existing file, from the launch's folder or from the
repository root (a script run from either). Not read: a container's path (compose, Kubernetes,
a Dockerfile, `docker run IMAGE ... --config x.yaml`: relative to the image's WORKDIR, put there
by a volume or a COPY this does not follow), an absolute path, a path with a variable, a file
that does not parse as one mapping, or one with a key twice. A `false` boolean adds nothing here (0.30.0 turns it into `--no-key` where that flag
exists; earlier releases dropped it): a missed check, never a wrong one.
"""
from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path

from ..model.launch import API_SERVER, OPTIONS_FILE_KIND, SERVE, Arg, Launch, ParsedFile, SourceFile

_MAX_SIZE = 1 << 20
# files whose launches run on the host, in the tree's folders: a container's path (compose,
# Kubernetes, a Dockerfile, `docker run IMAGE --config x.yaml`) is relative to its WORKDIR
HOST_KINDS = ("shell", "python", "make", "just")


# The texts a run reads in place of the files on disk (an editor's unsaved buffers, a fix
# pass's results: lint.project.load sets them before it parses, so forked workers have them too):
# an options file is read as the run reads it, or a suppression typed in its buffer would not
# meet the findings of its options.
_IN_USE: dict = {}
_IN_USE_RESOLVED: dict | None = None


def use_texts(texts: dict) -> None:
    global _IN_USE, _IN_USE_RESOLVED
    _IN_USE, _IN_USE_RESOLVED = texts, None


def current_text(path: Path) -> str | None:
    """The text of `path` as this run reads it: its buffer, else the file (None: unreadable or
    over the size limit)."""
    global _IN_USE_RESOLVED
    if _IN_USE:
        if _IN_USE_RESOLVED is None:            # (resolved once per run, and only when asked)
            _IN_USE_RESOLVED = {Path(p).resolve(): t for p, t in _IN_USE.items()}
        if path in _IN_USE_RESOLVED:
            return _IN_USE_RESOLVED[path]
    try:
        if path.stat().st_size > _MAX_SIZE:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        return None


def read_options_files(pf: ParsedFile) -> None:
    """Put the options of each launch's `--config` file into its argv (see the module doc);
    `pf.read_files` lists what was read, for the parse cache to check."""
    if pf.source.kind not in HOST_KINDS:
        return
    for launch in pf.launches:
        if launch.kind not in (SERVE, API_SERVER) or launch.image or launch.file is not pf.source:
            continue
        at = _config_index(launch)
        if at is None:
            continue
        found = _the_file(launch, launch.argv[at + 1].value)
        if found is None:
            continue
        path, display, text = found
        source = SourceFile(path=path, display=display, text=text, kind=OPTIONS_FILE_KIND)
        tokens = _tokens(source)
        if tokens is None:
            continue
        i = launch.options_start
        if launch.kind == SERVE and i < len(launch.argv) and not launch.argv[i].value.startswith("-"):
            i += 1                                   # after the positional model, as vLLM inserts them
        launch.argv[i:i] = tokens
        launch.options_from = display
        pf.read_files.append((path, text))


def _config_index(launch: Launch) -> int | None:
    """The index of the one `--config` token followed by a literal path, else None."""
    found = [i for i, a in enumerate(launch.argv) if i >= launch.options_start and a.value == "--config"]
    if len(found) != 1 or found[0] + 1 >= len(launch.argv):
        return None
    value = launch.argv[found[0] + 1]
    if value.dynamic or "$" in value.value or "{{" in value.value:
        return None
    return found[0]


def _the_file(launch: Launch, written: str) -> tuple[Path, str, str] | None:
    if not written.endswith((".yaml", ".yml")) or os.path.isabs(written) or written.startswith("~"):
        return None
    here = launch.file.path.parent
    places = {(here / written).resolve()}
    root = _repo_root(here)
    if root is not None:
        places.add((root / written).resolve())
    existing = [p for p in places if p.is_file()]
    if len(existing) != 1:
        return None                 # none, or two: which one runs depends on the working folder
    path = existing[0]
    text = current_text(path)
    if text is None:
        return None
    rel = os.path.relpath(path, here).replace(os.sep, "/")
    display = posixpath.normpath(posixpath.join(posixpath.dirname(launch.file.display), rel))
    return path, display, text


def _repo_root(folder: Path) -> Path | None:
    for f in (folder, *folder.parents):
        if (f / ".git").exists():
            return f
    return None


def _tokens(source: SourceFile) -> list[Arg] | None:
    """`--key value` tokens of a flat YAML mapping, each spanning what it stands for in the file."""
    import yaml

    from .yaml_source import YamlError, compose_all, load_data

    try:
        docs = compose_all(source.text)
        data = load_data(source.text)
    except (YamlError, yaml.YAMLError):
        return None
    if len(docs) != 1 or not isinstance(docs[0], yaml.MappingNode) or not isinstance(data, dict):
        return None
    pairs = docs[0].value
    if len(pairs) != len(data) or not all(isinstance(k, yaml.ScalarNode) for k, _ in pairs):
        return None                 # a key written twice, or a merge key: not what vLLM reads, exactly
    out: list[Arg] = []
    for (knode, vnode), (key, value) in zip(pairs, data.items()):
        if not isinstance(key, str) or knode.value != key:
            return None
        name = Arg("--" + key, source, (knode.start_mark.index, knode.end_mark.index))
        span = (vnode.start_mark.index, vnode.end_mark.index)
        if isinstance(value, bool):
            if value:
                out.append(name)
        elif isinstance(value, list):
            if value:
                out.append(name)
                items = vnode.value if isinstance(vnode, yaml.SequenceNode) else []
                for j, item in enumerate(value):
                    node = items[j] if j < len(items) else vnode
                    out.append(Arg(str(item), source, (node.start_mark.index, node.end_mark.index)))
        elif isinstance(value, dict):
            out += [name, Arg(json.dumps(value), source, span)]
        else:
            out += [name, Arg(str(value), source, span)]
    return out
