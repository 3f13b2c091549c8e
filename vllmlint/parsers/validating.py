"""Is this router launch one that checks token-id continuation before reusing decode's KV?

VL101 stays quiet for a router that validates. A router validates when it is

* `vllmlint router` / `python -m vllmlint.router` (detect.VALIDATING_ROUTERS), unless launched
  with `--policy unguarded` (the reference proxy's behaviour, kept for `vllmlint replay`);
* marked by the deployment: the annotation or label `vllmlint.io/validating-router: "true"` on
  its Kubernetes workload (or pod template), the compose service label of that name (map or
  `key=value` list form), or `VLLMLINT_VALIDATING_ROUTER=1` in the router's environment (any
  front end: shell, Dockerfile, compose, Kubernetes, Python launcher).

`validating_reason(launch)` says which, or "" when none applies.
"""
from __future__ import annotations

from .detect import VALIDATING_ROUTERS
from ..model.launch import Launch, SourceFile

MARKER = "vllmlint.io/validating-router"
ENV_MARKER = "VLLMLINT_VALIDATING_ROUTER"
TRUTHY = {"1", "true", "yes", "on"}
_YAML_KINDS = ("k8s", "compose", "yaml")


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().strip("'\"").lower() in TRUTHY


def unguarded(launch: Launch) -> bool:
    """`vllmlint router --policy unguarded`: reuses by conversation id like the reference proxy."""
    arg = launch.flag_value("--policy")
    return arg is not None and arg.value == "unguarded"


def validating_reason(launch: Launch) -> str:
    if VALIDATING_ROUTERS.get(launch.program) == "validating":
        return "" if unguarded(launch) else launch.program
    if _truthy(launch.env_value(ENV_MARKER)):
        return f"{ENV_MARKER}={launch.env_value(ENV_MARKER)}"
    if _truthy(launch.labels.get(MARKER)):
        return f"label {MARKER}"
    if launch.file.kind in _YAML_KINDS:
        for start, end, where in _marked_ranges(launch.file):
            if start <= launch.span[0] < end:
                return f"{where} {MARKER}"
    return ""


def _marked_ranges(source: SourceFile) -> list[tuple[int, int, str]]:
    """(start, end, "annotation"|"label") of every Kubernetes document and compose service
    that carries a truthy marker. Cached on the source file."""
    cached = getattr(source, "_validating_ranges", None)
    if cached is not None:
        return cached
    import yaml                  # here: a shell or Dockerfile run never loads PyYAML

    from .yaml_source import YamlError, compose_all, iter_nodes, mask_templates
    from .yaml_source import get, scalar

    out: list[tuple[int, int, str]] = []
    try:
        docs = compose_all(mask_templates(source.text)[0])
    except (YamlError, ValueError):
        docs = []
    for doc in docs:
        if doc is None:
            continue
        services = get(doc, "services")
        owners = ([(k.start_mark.index, v) for k, v in services.value] if isinstance(services, yaml.MappingNode)
                  else [(doc.start_mark.index, doc)])
        for start, owner in owners:
            for node in iter_nodes(owner):
                if not isinstance(node, yaml.MappingNode):
                    continue
                for k, v in node.value:
                    key = scalar(k)
                    if key not in ("annotations", "labels"):
                        continue
                    value = None
                    if isinstance(v, yaml.MappingNode):
                        value = scalar(get(v, MARKER))
                    elif isinstance(v, yaml.SequenceNode):     # compose: ["key=value", ...]
                        for item in v.value:
                            name, sep, val = (scalar(item) or "").partition("=")
                            if name.strip() == MARKER:
                                value = val if sep else None
                    if _truthy(value):
                        out.append((start, owner.end_mark.index, key[:-1]))
                        break
    try:
        source._validating_ranges = out
    except AttributeError:
        pass
    return out
