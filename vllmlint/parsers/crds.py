"""Custom resources that start vLLM without a container command saying so, and the ones that look
alike but start something else (read by the YAML front end, yamlfile.py).

- KubeAI `Model` (`kubeai.org/v1`) and the KubeAI models chart's catalogue entries: `engine: VLLM`
  runs vLLM with `args` as its flags and `env` as its environment; `OLlama`, `FasterWhisper`,
  `Infinity` are other engines, never read as vLLM whatever their args look like.
- KServe: an `InferenceService` predictor `model` whose `modelFormat` is `vLLM` runs a vLLM
  serving runtime (its args are vLLM's flags). KServe's Hugging Face server
  (`kserve/huggingfaceserver`, `python -m huggingfaceserver`, `modelFormat: huggingface`) runs
  vLLM inside itself only with `--backend=vllm` (with `auto`, only when vLLM supports the
  model): its flags are KServe's and vLLM's parsed together with unknown ones ignored, so they are
  no `vllm serve` argv. With `--backend=vllm` it is a launch whose flags are not checked (its
  env still is); otherwise it is no launch.
- KubeRay `RayService.spec.serveConfigV2` (a Ray Serve config in a block scalar) and Ray Serve
  config files (`applications:`): Ray Serve LLM applications (`ray.serve.llm` builders) give
  each `llm_configs[]` / `llm_config` an `engine_kwargs` map (vLLM's engine arguments, read as
  flags with each key's own span) and `runtime_env.env_vars`. Applications of other import
  paths run the user's code and are not read.
"""
from __future__ import annotations

import json
import re

import yaml

from ..knowledge.images import is_vllm_image
from ..model.launch import ENGINE, KUBEAI_VIA, OTHER, Arg, EnvEntry, Launch
from .yaml_source import YamlError, compose_all
from ..model.lazyre import lazy_re

# KubeAI's engines (api/k8s/v1/model_types.go): only VLLM is vLLM
KUBEAI_ENGINES = {"vllm", "ollama", "fasterwhisper", "infinity"}
# Ray Serve LLM's builders: `ray.serve.llm:build_openai_app`, `ray.serve.llm.build_llm_deployment`,
# the internal module paths they re-export
RAY_LLM_IMPORT_RE = lazy_re(r"^ray\.(?:serve\.llm|llm\.)[\w.]*[:.]build_\w+$")


def _get(node, key):
    from .yaml_source import get
    return get(node, key)


def _scalar(node):
    return node.value if isinstance(node, yaml.ScalarNode) else None


# -- KubeAI ---------------------------------------------------------------------------------

def engine_field(parser, node: yaml.Node) -> str | None:
    """`engine:` of a KubeAI Model spec (or a models-chart catalogue entry): "vllm", "other", or
    None when there is none or it is written at render time."""
    value_node = _get(node, "engine")
    value = _scalar(value_node)
    if not value or parser.is_templated(value_node):
        return None
    return "vllm" if value.strip().lower() == "vllm" else "other"


def kubeai_entry(parser, node: yaml.MappingNode) -> bool:
    """A models-chart catalogue entry of engine VLLM without `args` (those with args are read as
    containers): KubeAI still starts vLLM for it."""
    return _get(node, "url") is not None and _get(node, "args") is None and engine_field(parser, node) == "vllm"


def is_kubeai_model(doc: yaml.Node) -> bool:
    return _scalar(_get(doc, "kind")) == "Model" and (_scalar(_get(doc, "apiVersion")) or "").startswith("kubeai.org/")


def kubeai_model(parser, doc: yaml.Node, owner: str, index: int) -> None:
    """A KubeAI Model: `engine: VLLM` starts vLLM (KubeAI writes `--model`, `--served-model-name`
    and `--port`, then `args`), any other engine starts something else."""
    spec = _get(doc, "spec")
    if not isinstance(spec, yaml.MappingNode) or engine_field(parser, spec) != "vllm":
        return
    parser._where = {"hostnames": [], "labels": {}}
    args = _get(spec, "args")
    parser._anchor = (spec.start_mark.index, spec.start_mark.index)
    context, group = f"KubeAI {owner}", f"{parser.source.display}#{index}:{owner}"
    env = parser.env_entries(spec, f"env of {owner}")
    before = len(parser.pf.launches)
    parser.launch_from(None, args if isinstance(args, yaml.SequenceNode) else None, None, env, context, group, [],
                       known_vllm=True)
    for launch in parser.pf.launches[before:]:
        launch.program = "KubeAI Model (engine: VLLM)"
        launch.via = f"{KUBEAI_VIA} {owner}, engine: VLLM (line {_get(spec, 'engine').start_mark.line + 1})"
        if not isinstance(args, yaml.SequenceNode):
            launch.not_editable = "its flags are KubeAI's own (the Model has no `args` list)"
    if isinstance(args, yaml.SequenceNode):
        parser.consumed.update(id(n) for n in [args, *args.value])


# -- KServe ---------------------------------------------------------------------------------

def _model_format(node: yaml.Node) -> str | None:
    fmt = _get(node, "modelFormat")
    return (_scalar(_get(fmt, "name")) or "").lower() or None


def _runtime(node: yaml.Node) -> str:
    return (_scalar(_get(node, "runtime")) or "").lower()


SERVING_RUNTIME_KINDS = frozenset({"ServingRuntime", "ClusterServingRuntime"})


def vllm_runtimes(docs: list, text: str) -> frozenset[str]:
    """The (Cluster)ServingRuntimes of a file whose container runs a vLLM image, by name
    (lowercase): an InferenceService of the same file that names one runs vLLM, whatever its
    `modelFormat` (KServe picks the runtime the predictor names)."""
    if "ServingRuntime" not in text:
        return frozenset()
    names = set()
    for doc in docs:
        if _scalar(_get(doc, "kind")) not in SERVING_RUNTIME_KINDS:
            continue
        name = (_scalar(_get(_get(doc, "metadata"), "name")) or "").lower()
        containers = _get(_get(doc, "spec"), "containers")
        for container in containers.value if isinstance(containers, yaml.SequenceNode) else ():
            image = _scalar(_get(container, "image")) or ""
            command = _get(container, "command")        # none: the image's entrypoint (vLLM's)
            words = [_scalar(n) or "" for n in command.value] if isinstance(command, yaml.SequenceNode) else \
                [_scalar(command) or ""]
            if name and is_vllm_image(image) and (command is None or any("vllm" in w for w in words)):
                names.add(name)
    return frozenset(names)


def runtime_ref(node: yaml.Node, parent_key: str | None) -> str:
    """The runtime an InferenceService predictor `model` names (lowercase; "" for none)."""
    if parent_key != "model" or _get(node, "modelFormat") is None:
        return ""
    return _runtime(node)


def kserve_vllm_format(node: yaml.Node, parent_key: str | None, runtimes: frozenset[str] = frozenset()) -> bool:
    """An InferenceService predictor `model` of `modelFormat: vLLM`, one that names a vLLM
    runtime (`runtime: kserve-vllmserver`), or one that names a ServingRuntime of its own file
    that runs a vLLM image (`runtimes`): a vLLM serving runtime, its args are vLLM's flags."""
    if parent_key != "model" or _get(node, "modelFormat") is None:
        return False
    runtime = _runtime(node)
    return _model_format(node) == "vllm" or runtime in runtimes or "vllm" in runtime and "huggingface" not in runtime


def hf_server(node: yaml.Node, parent_key: str | None, image: str | None, values: list[str],
              runtimes: frozenset[str] = frozenset()) -> bool:
    """KServe's Hugging Face server: its image, its module, or a predictor `model` of
    `modelFormat: huggingface` (the kserve-huggingfaceserver runtime) that names no vLLM
    runtime (by its name, or a ServingRuntime of its file that runs a vLLM image)."""
    if image:
        name = image.split("@")[0].rsplit("/", 1)[-1].split(":")[0]
        if name == "huggingfaceserver" or name.startswith("huggingfaceserver-"):
            return True
    if any(a == "-m" and b == "huggingfaceserver" for a, b in zip(values, values[1:])):
        return True
    if parent_key != "model" or _model_format(node) != "huggingface":
        return False
    runtime = _runtime(node)            # none: KServe picks its Hugging Face runtime
    if runtime in runtimes:
        return False
    return "vllm" not in runtime or "huggingface" in runtime


def hf_backend(values: list[str]) -> str | None:
    for i, v in enumerate(values):
        if v.startswith("--backend="):
            return v.split("=", 1)[1].strip().lower()
        if v == "--backend" and i + 1 < len(values):
            return values[i + 1].strip().lower()
    return None


def hf_server_launch(parser, node: yaml.Node, image, env, context, group, env_from) -> None:
    """`--backend=vllm`: vLLM runs inside KServe's server. A launch whose argv is not vLLM's
    own (kind `other`: no flag rule reads it); its env reaches vLLM."""
    argv_nodes = parser.argv_nodes(_get(node, "command")) + parser.argv_nodes(_get(node, "args"))
    argv = [parser.arg(n) for n in argv_nodes if isinstance(n, yaml.ScalarNode)]
    for key in ("command", "args"):
        seq = _get(node, key)
        if seq is not None:
            parser.consumed.update(id(n) for n in [seq, *getattr(seq, "value", [])] if isinstance(n, yaml.Node))
    backend = next((a for a in argv if a.value.startswith("--backend")), None)
    span = backend.span if backend is not None and backend.span else (node.start_mark.index, node.start_mark.index)
    launch = Launch(kind=OTHER, file=parser.source, span=span, argv=[Arg("huggingfaceserver")] + argv,
                    options_start=1, context=context, group=group, env=list(env), image=image,
                    program="kserve huggingfaceserver --backend=vllm",
                    not_editable="its flags are KServe's and vLLM's parsed together (unknown ones ignored)")
    launch.via = ("via KServe huggingfaceserver --backend=vllm: vLLM runs inside it; its flags are parsed with "
                  "KServe's and unknown ones ignored, so they are not checked")
    parser._add([launch], env_from)


# -- Ray Serve ------------------------------------------------------------------------------

def ray_service(parser, doc: yaml.Node, owner: str, index: int) -> None:
    """`spec.serveConfigV2`: a Ray Serve config written as a YAML string. A literal block scalar
    (`|`) is read in place: the file with everything else blanked is the config with its true
    offsets, so every key keeps its span and edits land in the file."""
    node = _get(_get(doc, "spec"), "serveConfigV2")
    if not isinstance(node, yaml.ScalarNode) or not node.value.strip():
        return
    parser.consumed.add(id(node))
    offs = parser.offsets(node)
    text = parser.masked
    if offs is None or node.style != "|" or any(text[o] != ch for o, ch in zip(offs, node.value)):
        parser.pf.notes.append(f"line {node.start_mark.line + 1}: serveConfigV2 is not a literal block scalar (`|`); "
                               "its Ray Serve config is not read")
        return
    inner = [ch if ch in "\r\n" else " " for ch in text]
    for o, ch in zip(offs, node.value):
        inner[o] = ch
    try:
        docs = compose_all("".join(inner))
    except YamlError as err:
        parser.pf.notes.append(f"line {err.line}: serveConfigV2 is not YAML ({err.message})")
        return
    for inner_doc in docs:
        serve_config(parser, inner_doc, f"{owner} serveConfigV2", index)


def is_serve_config(doc: yaml.Node) -> bool:
    apps = _get(doc, "applications")
    return isinstance(apps, yaml.SequenceNode) and any(_get(a, "import_path") is not None for a in apps.value)


def serve_config(parser, doc: yaml.Node, owner: str, index: int) -> None:
    apps = _get(doc, "applications")
    if not isinstance(apps, yaml.SequenceNode):
        return
    for app in apps.value:
        import_path = _scalar(_get(app, "import_path")) or ""
        if not RAY_LLM_IMPORT_RE().match(import_path.strip()):
            continue          # the user's own application: what it starts is its code's business
        args = _get(app, "args")
        configs = _get(args, "llm_configs")
        items = configs.value if isinstance(configs, yaml.SequenceNode) else []
        single = _get(args, "llm_config")
        if isinstance(single, yaml.MappingNode):
            items = [*items, single]
        app_name = _scalar(_get(app, "name")) or import_path
        for config in items:
            if isinstance(config, yaml.MappingNode):
                _llm_config(parser, config, app_name, owner, index)


def _llm_config(parser, config: yaml.MappingNode, app: str, owner: str, index: int) -> None:
    loading = _get(config, "model_loading_config")
    model_id = _scalar(_get(loading, "model_id")) or _scalar(_get(loading, "model_source")) or "?"
    line = config.start_mark.line + 1       # the group key: one per config
    context = f"Ray Serve LLM {model_id} (application {app}, {owner})"
    program = Arg("ray.serve.llm.LLMConfig", parser.source, (config.start_mark.index, config.start_mark.index))
    argv: list[Arg] = [program]
    source = _scalar(_get(loading, "model_source"))
    if source:
        argv.append(Arg("--model=" + source))
    kwargs = _get(config, "engine_kwargs")
    opaque = None
    if isinstance(kwargs, yaml.MappingNode):
        for k, v in kwargs.value:
            arg = _kwarg(parser, k, v)
            if arg is not None:
                argv.append(arg)
    elif kwargs is not None:
        opaque = "its engine_kwargs are not a YAML mapping"
    env = _env_vars(parser, config, f"runtime_env of {context}")
    from .yaml_source import pair
    at = pair(config, "engine_kwargs")
    span = (at[0] if at else config).start_mark.index
    line = parser.source.line_col(span)[0]
    launch = Launch(kind=ENGINE, file=parser.source, span=(span, span), argv=argv, options_start=1,
                    context=context, group=f"{parser.source.display}#{index}:{app}:{model_id}:{line}", env=env,
                    program="ray.serve.llm.LLMConfig",
                    not_editable=opaque or "a flag is added to engine_kwargs by hand")
    launch.via = f"via Ray Serve LLM application {app} (" + ("engine_kwargs" if at else "llm_config") + f" at line {line})"
    parser._anchor = (span, span)
    parser._add([launch], [])


def _kwarg(parser, k: yaml.Node, v: yaml.Node) -> Arg | None:
    """`swap_space: 4` -> `--swap-space=4`, the name mapped onto the key (a rename writes the
    key) and the value onto the scalar when it is written plainly."""
    from ..model.launch import KeywordArg

    name = _scalar(k)
    if not name or not re.fullmatch(r"[A-Za-z_]\w*", name) or isinstance(v, yaml.ScalarNode) and \
            v.tag == "tag:yaml.org,2002:null":
        return None
    flag = "--" + name.replace("_", "-")
    span = (k.start_mark.index, v.end_mark.index)
    ks, ke = k.start_mark.index, k.end_mark.index
    name_offs = list(range(ks, ke)) if parser.text[ks:ke] == name else None
    rest, value_offs, dynamic = "", None, False
    if isinstance(v, yaml.ScalarNode):
        value = v.value
        if v.tag == "tag:yaml.org,2002:bool":
            if value.lower() == "false":
                flag = "--no-" + name.replace("_", "-")
        else:
            rest = "=" + value
            value_offs = parser.offsets(v)
            dynamic = "$" in value or parser.is_templated(v)
    else:
        try:
            rest = "=" + json.dumps(yaml.safe_load(parser.masked[v.start_mark.index:v.end_mark.index].strip()
                                                   if v.flow_style else _node_text(parser, v)))
        except (yaml.YAMLError, TypeError, ValueError):
            rest, dynamic = "=" + parser.text[v.start_mark.index:v.end_mark.index], True
    arg = KeywordArg(flag + rest, parser.source, span, dynamic=dynamic, keyword_style="key")
    if name_offs is not None:
        offsets = [ks] * (len(flag) - len(name)) + name_offs
        if rest:
            offsets = offsets + [ke] + list(value_offs) if value_offs is not None else None
        if offsets is not None and len(offsets) == len(arg.value):
            arg.locate = lambda o=offsets: o
    return arg


def _node_text(parser, node: yaml.Node) -> str:
    """A block collection's source, dedented so it loads alone."""
    start = parser.masked.rfind("\n", 0, node.start_mark.index) + 1
    lines = parser.masked[start:node.end_mark.index].splitlines()
    indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
    return "\n".join(l[indent:] for l in lines)


def _env_vars(parser, config: yaml.MappingNode, origin: str) -> list[EnvEntry]:
    from .yaml_source import pair

    env_pair = pair(_get(config, "runtime_env"), "env_vars")
    if env_pair is None or not isinstance(env_pair[1], yaml.MappingNode):
        return []
    entries = parser.map_env(env_pair[1], env_pair, origin)
    parser.pf.env.extend(entries)
    return entries


def ray_pod_env(parser, launch_start: int, env_start: int) -> None:
    """The env of a RayService's head and worker containers reaches every Ray worker process
    there, its vLLM engines included: it comes before each engine's own `runtime_env`."""
    pod_env = [e for e in parser.pf.env[env_start:] if e.origin.startswith("env of container")]
    for launch in parser.pf.launches[launch_start:]:
        if launch.kind == ENGINE and launch.file is parser.source:
            launch.env = pod_env + launch.env
