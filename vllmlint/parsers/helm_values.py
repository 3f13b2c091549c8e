"""Chart values read without their chart (issue 15 item 4): a deployment repository that keeps
only `values-prod.yaml` for vLLM's production-stack chart, or any chart whose values name a vLLM
image next to an args list.

The launch each values shape starts is read directly from the values, with the exact span of
every token written there (findings and fixes land on the values line). What the chart's
templates add on their own (`--host`, `--port`) is written as tokens without a span, exactly as
the chart renders them, so that the same values give the same findings with the chart present
(rendered by Helm, parsers/helm.py) and without it.
"""
from __future__ import annotations

import yaml

from ..model.launch import Arg, Launch
from .detect import serve_kind
from ..knowledge.images import is_vllm_image, parse_image, tag_is_vllm_release

# production-stack's deployment-vllm-multi.yaml: vllmConfig keys and the flags the chart writes
# for them (in the chart's order; `enablePrefixCaching` is always written, on or off)
STACK_VLLM_CONFIG = (
    ("maxModelLen", "--max-model-len"),
    ("dtype", "--dtype"),
    ("tensorParallelSize", "--tensor-parallel-size"),
    ("maxNumSeqs", "--max-num-seqs"),
    ("gpuMemoryUtilization", "--gpu_memory_utilization"),
    ("maxLoras", "--max_loras"),
    ("runner", "--runner"),
    ("convert", "--convert"),
)
STACK_PORT = "8000"         # the chart's container port (`chart.container-port`)


def _get(node, key):
    from .yaml_source import get
    return get(node, key)


def _scalar(node):
    return node.value if isinstance(node, yaml.ScalarNode) else None


def values_image(node) -> str | None:
    """`image: {repository, tag}`, `repository` + `tag` side by side, or `image: repo:tag`."""
    if not isinstance(node, yaml.MappingNode):
        return None
    img = _get(node, "image")
    holder = img if isinstance(img, yaml.MappingNode) else node
    repo, tag = _scalar(_get(holder, "repository")), _scalar(_get(holder, "tag"))
    if repo:
        return f"{repo}:{tag}" if tag else repo
    if isinstance(img, yaml.ScalarNode) and img.value:
        return img.value
    return None


def is_stack_values(doc) -> bool:
    spec = _get(doc, "servingEngineSpec")
    models = _get(spec, "modelSpec") if isinstance(spec, yaml.MappingNode) else None
    return isinstance(models, yaml.SequenceNode) and any(
        isinstance(m, yaml.MappingNode) and (_get(m, "modelURL") is not None or _get(m, "repository") is not None)
        for m in models.value)


def read_stack_values(parser, doc, index: int) -> None:
    """production-stack values: one `vllm serve` per `servingEngineSpec.modelSpec[]` entry,
    built as the chart's deployment-vllm-multi.yaml builds it."""
    from .yaml_edit import append_site, new_key_site

    spec = _get(doc, "servingEngineSpec")
    models = _get(spec, "modelSpec")
    engine_env = parser.env_entries(spec, "env of servingEngineSpec (production-stack values)") \
        if isinstance(_get(spec, "env"), yaml.SequenceNode) else []
    engine_off = _off(_get(spec, "enableEngine"))      # the chart starts no engine at all
    for i, model in enumerate(models.value):
        if not isinstance(model, yaml.MappingNode):
            continue
        if engine_off or _off(_get(model, "enabled")):   # `enabled: false`: the chart skips this model
            parser.consumed.update(id(n) for n in parser_nodes(model))    # its extraArgs start nothing
            continue
        name = _scalar(_get(model, "name")) or str(i)
        image = values_image(model)
        url = _get(model, "modelURL")
        if not isinstance(url, yaml.ScalarNode):
            continue
        parser.consumed.update(id(n) for n in parser_nodes(model))
        argv = [Arg("vllm"), Arg("serve"), parser.arg(url),
                Arg("--host"), Arg("0.0.0.0"), Arg("--port"), Arg(STACK_PORT)]
        if _truthy(_get(model, "enableLoRA")):
            argv.append(Arg("--enable-lora"))
        if _truthy(_get(model, "enableTool")):
            argv.append(Arg("--enable-auto-tool-choice"))
        if _truthy(_get(model, "toolCallParser")):
            argv += [Arg("--tool-call-parser"), parser.arg(_get(model, "toolCallParser"))]
        cfg = _get(model, "vllmConfig")
        site = None
        if isinstance(cfg, yaml.MappingNode):
            keys = {_scalar(k) for k, _ in cfg.value}
            if "enableChunkedPrefill" in keys:
                argv.append(Arg("--enable-chunked-prefill" if _truthy(_get(cfg, "enableChunkedPrefill"))
                                else "--no-enable-chunked-prefill"))
            argv.append(Arg("--enable-prefix-caching" if _truthy(_get(cfg, "enablePrefixCaching"))
                            else "--no-enable-prefix-caching"))
            for key, flag in STACK_VLLM_CONFIG:
                if key in keys:
                    value = _get(cfg, key)
                    argv += [Arg(flag), parser.arg(value) if isinstance(value, yaml.ScalarNode)
                             else Arg("?", dynamic=True)]
            extra = _get(cfg, "extraArgs")
            if isinstance(extra, yaml.SequenceNode):
                argv += [parser.arg(n) for n in extra.value]
                site = append_site(parser.source, parser.text, extra)
            elif extra is None:          # `vllmConfig:` without extraArgs: the list is added
                site = new_key_site(parser.source, parser.text, cfg, "extraArgs")
        if _truthy(_get(model, "modelRevision")):
            argv += [Arg("--revision"), parser.arg(_get(model, "modelRevision"))]
        if _truthy(_get(model, "chatTemplate")):
            argv += [Arg("--chat-template"), Arg("/templates/" + _get(model, "chatTemplate").value)]
        env = list(engine_env)
        if isinstance(_get(model, "env"), yaml.SequenceNode):
            env += parser.env_entries(model, f"env of modelSpec {name} (production-stack values)")
        parser._anchor = (url.start_mark.index, url.start_mark.index)
        launch = Launch(kind=serve_kind([a.value for a in argv]), file=parser.source,
                        span=(url.start_mark.index, url.start_mark.index), argv=argv, options_start=2,
                        context=f"modelSpec {name} (production-stack values)",
                        group=f"{parser.source.display}#{index}:modelSpec:{name}", env=env, image=image,
                        program="vllm serve (production-stack chart)", append_site=site,
                        not_editable=None if site else
                        "the chart builds its argv: add the flag to `vllmConfig.extraArgs` by hand")
        parser._add([launch], [])


def _off(node) -> bool:
    """Written false (`enabled: false`); absent is on, as the chart's `ne .enabled false`."""
    v = _scalar(node)
    return v is not None and v.strip().lower() in ("false", "no", "off")


def _truthy(node) -> bool:
    v = _scalar(node)
    return v is not None and v.strip().lower() not in ("", "false", "no", "off", "0", "null", "~")


def parser_nodes(node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                stack += [k, v]
        elif isinstance(n, yaml.SequenceNode):
            stack += n.value


def image_beside(parent) -> str | None:
    """A vLLM image named in the mapping that holds an args list (generic chart values)."""
    image = values_image(parent)
    ref = parse_image(image)
    return image if ref is not None and is_vllm_image(ref) else None


def _node_at(text: str, path: list[str]) -> yaml.Node | None:
    """The node at a values path (`image`, `repository`) in a values file's first document;
    None when the file does not compose or the path leads elsewhere."""
    from .yaml_source import compose_all

    try:
        docs = compose_all(text)
    except Exception:           # YamlError, or odd input the composer trips on: no answer
        return None
    node = docs[0] if docs else None
    for key in path:
        node = _get(node, key) if isinstance(node, yaml.MappingNode) else None
    return node


def values_at(text: str, path: list[str]) -> str | None:
    """The scalar at a values path (`image.repository`), or None."""
    return _scalar(_node_at(text, path))


def values_mapping_at(text: str, path: list[str]) -> dict[str, str]:
    """The scalar entries of the mapping at a values path (`modelServers.VLLM.images`)."""
    node = _node_at(text, path)
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: v.value for k, v in node.value
            if isinstance(k, yaml.ScalarNode) and isinstance(v, yaml.ScalarNode)}


def vllm_values_tags(text: str) -> list[tuple[yaml.ScalarNode, str]]:
    """`tag` scalars next to a `repository` that names a vLLM image (`image: {repository,
    tag}` or side by side, as production-stack's modelSpec): (tag node, repository). Only these
    tags of a values file say, and are bumped to, a vLLM release."""
    if "repository" not in text or "tag" not in text:
        return []
    from .yaml_source import YamlError, compose_all

    try:
        docs = compose_all(text)
    except (YamlError, Exception):
        return []
    out = []
    for doc in docs:
        for node in parser_nodes(doc) if doc is not None else ():
            if not isinstance(node, yaml.MappingNode):
                continue
            repo, tag = _get(node, "repository"), _get(node, "tag")
            if isinstance(repo, yaml.ScalarNode) and isinstance(tag, yaml.ScalarNode) and tag.value \
                    and is_vllm_image(parse_image(repo.value)) and tag_is_vllm_release(parse_image(repo.value)):
                out.append((tag, repo.value))
    return sorted(out, key=lambda p: p[0].start_mark.index)
