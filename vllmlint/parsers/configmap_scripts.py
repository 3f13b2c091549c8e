"""Scripts kept in a Kubernetes ConfigMap's `data:` and run by a pod that mounts it.

A Ray Serve deployment script mounted into a RayCluster's head pod, an entrypoint script mounted
at /scripts: the ConfigMap entry (`serve.py: |`, `start.sh: |`) is read as the script it is
(kind from the key's name, else its shebang, else its first lines: parsers/embedded.py), in place,
so findings and fixes land in the YAML block scalar byte for byte.

The pod that runs it gives it its image and env: a container that mounts the ConfigMap
(`volumes: [{name: V, configMap: {name: CM}}]`, `volumeMounts: [{name: V, mountPath: P}]`) in a
document of the same file that names the script's path (`P/key`, or the `items:` path it is
mounted as) anywhere (the container's command, a RayJob's `entrypoint`, a lifecycle hook).
Without such a pod the script is still read, with no image and no env.

Python in a block scalar is indented; it is read as the body of an `if 1:` written over the blank
line above it (the block's header, blanked in the view), so every offset stays the file's.
"""
from __future__ import annotations

import yaml

from . import embedded, templates
from .detect import SHELLS, basename
from .embedded import Inherited
from ..knowledge.images import is_vllm_image as is_vllm_build
from ..knowledge.launchers import may_launch
from .yaml_source import get, scalar
from ..model.launch import ParseError

SCRIPT_KINDS = ("python", "shell")


def read(parser, docs: list) -> None:
    """Every script entry of every ConfigMap in `docs`, read as its kind (parser: a YamlParser
    that has walked `docs`; its `containers` maps a container node's id to (image, env))."""
    scripts = []
    for doc in docs:
        if doc is None or scalar(get(doc, "kind")) != "ConfigMap":
            continue
        name = parser.plain(get(get(doc, "metadata"), "name")) or ""
        data = get(doc, "data")
        if not isinstance(data, yaml.MappingNode):
            continue
        for k, v in data.value:
            if not (isinstance(k, yaml.ScalarNode) and isinstance(v, yaml.ScalarNode)) or v.style not in ("|", ">"):
                continue
            kind = embedded.guess_kind(v.value, k.value)
            if kind in SCRIPT_KINDS and may_launch(v.value, kind):
                scripts.append((name, k.value, kind, v))
    if not scripts:
        return
    mounts = _mounts(parser, docs)
    for cm, key, kind, node in scripts:
        image, env, where, container, path = _runner(mounts, cm, key)
        context = f"ConfigMap {cm} key {key}" + (f" (run by {where})" if where else "")
        group = f"{parser.source.display}:ConfigMap/{cm}:{key}"
        line = node.start_mark.line + 1
        via = f"via ConfigMap {cm} key {key} at line {line}, read as {kind}"
        image = image if image and is_vllm_build(image) else None      # says its release
        if kind == "shell":
            offs = parser.offsets(node)
            if offs is None:
                continue
            scan = embedded.scan_shell(parser.source, node.value, offs, context=context, group=group,
                                       inherited_env=list(env), image=image)
            launches, found_env = scan.launches, scan.env
            for launch in launches:
                launch.via = via + (f"; {launch.via}" if launch.via else "")
                if container is not None:
                    _pass_container_args(parser, launch, container, path)
        else:
            offs = parser.offsets(node)
            if not offs or node.style != "|":
                continue                   # a folded (`>`) Python script is not the file's text
            # read from the masked text: a chart's `{{ .Values.x }}` in the script is a placeholder
            # there, given back by parser._add (yamlfile._unmask) as written and dynamic
            view = embedded.blanked(parser.masked, _line_start(parser.masked, offs[0]), offs[-1] + 1)
            try:
                parsed = embedded.read_view(parser.source, "python", view,
                                            Inherited(image=image, env=list(env), context=context, group=group,
                                                      via=via))
            except ParseError:
                parsed = None       # not Python after all: the entry stays data
            if parsed is None:
                continue
            launches, found_env = parsed.launches, parsed.env
            if parser.templated:        # a value read from a placeholder (no offsets): as written
                for launch in launches:
                    for arg in launch.argv:
                        if arg.offsets is None and arg.span and parser.masked[arg.span[0]:arg.span[1]] != \
                                parser.text[arg.span[0]:arg.span[1]]:
                            arg.value = templates.written(arg.value, arg.span, parser.masked, parser.text,
                                                          parser.templated)
        parser._anchor = (node.start_mark.index, node.start_mark.index)
        parser._add(launches, [])
        parser.pf.env.extend(found_env)


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _mounts(parser, docs: list) -> list[tuple[str, str, str, str, tuple]]:
    """(ConfigMap, items, path it is mounted at, subPath, document text, (image, env, name, node)
    of the container)
    for every container that mounts a ConfigMap volume."""
    out = []
    for doc in docs:
        if doc is None:
            continue
        text = parser.masked[doc.start_mark.index:doc.end_mark.index]
        owner = f"{scalar(get(doc, 'kind')) or 'document'}/{parser.plain(get(get(doc, 'metadata'), 'name')) or ''}"
        stack = [doc]
        while stack:
            node = stack.pop()
            if isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)
                continue
            if not isinstance(node, yaml.MappingNode):
                continue
            stack.extend(v for _, v in node.value)
            volumes = get(node, "volumes")
            if not isinstance(volumes, yaml.SequenceNode):
                continue
            by_volume: dict[str, tuple[str, dict[str, str]]] = {}
            for vol in volumes.value:
                cm = get(vol, "configMap")
                vname, cname = scalar(get(vol, "name")), scalar(get(cm, "name"))
                if vname and cname:
                    items = get(cm, "items")
                    paths = {scalar(get(i, "key")) or "": scalar(get(i, "path")) or "" for i in
                             (items.value if isinstance(items, yaml.SequenceNode) else [])}
                    by_volume[vname] = (cname, paths)
            if not by_volume:
                continue
            for part in ("containers", "initContainers"):
                seq = get(node, part)
                for container in (seq.value if isinstance(seq, yaml.SequenceNode) else []):
                    image, env = parser.containers.get(id(container), (parser.plain(get(container, "image")), []))
                    named = f"container {scalar(get(container, 'name')) or '?'} ({owner})"
                    mounts = get(container, "volumeMounts")
                    for mount in (mounts.value if isinstance(mounts, yaml.SequenceNode) else []):
                        found = by_volume.get(scalar(get(mount, "name")) or "")
                        path = scalar(get(mount, "mountPath"))
                        if found and path:
                            out.append((found[0], found[1], path, scalar(get(mount, "subPath")) or "", text,
                                        (image, env, named, container)))
    return out


def _runner(mounts, cm: str, key: str):
    """The image, env, name and node of the container that runs ConfigMap `cm`'s `key`, and the
    path the script has in it: it mounts the ConfigMap and its document names that path."""
    for name, items, path, sub, text, (image, env, named, container) in mounts:
        if name != cm:
            continue
        if sub:
            where = [path] if sub == key else []
        elif items:
            where = [f"{path.rstrip('/')}/{items[key]}"] if items.get(key) else []
        else:
            where = [f"{path.rstrip('/')}/{key}"]
        found = next((w for w in where if w in text), None)
        if found is not None:
            return image, env, named, container, found
    return None, [], "", None, ""


# the words that pass a script's arguments on one by one (shellscan.RUNTIME_ARGS less `$*`,
# which a quoted `"$*"` joins into one word)
PASSED_ON = ("$@", "${@}")


def _pass_container_args(parser, launch, container, path: str) -> None:
    """A container whose `command:` is the script (`[/scripts/start.sh]`, `[bash, /scripts/start.sh]`)
    passes it its `args:` (and the words after the script in `command:`) as `"$@"`: they take
    the place of `"$@"` in the launch, with their spans in the manifest, so the flags a chart
    gives the script are read and fixed where they are written (found as a user on
    castai/helm-charts: an image bumped past the flags its args list passed to the script).
    Anything else (a `sh -c` string, args that are not plain words, `$@` twice) is left as it
    was: a launch whose arguments arrive at run time, which is not edited."""
    at = [i for i, a in enumerate(launch.argv) if a.value in PASSED_ON and a.dynamic]
    if len(at) != 1:
        return
    command = parser.argv_nodes(get(container, "command"))
    words = [parser.plain(n) for n in command]
    if words[:1] == [path]:
        rest = command[1:]
    elif len(words) >= 2 and basename(words[0] or "") in SHELLS and words[1] == path:
        rest = command[2:]
    else:
        return
    args_node = get(container, "args")
    if args_node is not None and not isinstance(args_node, yaml.SequenceNode):
        return
    nodes = rest + parser.argv_nodes(args_node)
    if any(not isinstance(n, yaml.ScalarNode) for n in nodes):
        return
    passed = [parser.arg(n) for n in nodes]
    if any(a.dynamic for a in passed):
        return
    i = at[0]
    launch.argv[i:i + 1] = passed
    if launch.not_editable and launch.not_editable.startswith("its arguments arrive at run time"):
        launch.not_editable = None
