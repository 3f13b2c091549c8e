"""Kubernetes resources and the scripts in YAML outside any container.

Part of the YAML front end (yamlfile.py's `YamlParser` mixes it in): the walk over a
resource's containers (any kind that holds them: workloads, CRDs, chart values), Services,
ConfigMaps, Tekton/Argo step scripts, and loose scripts (dstack `commands`, CI steps).
"""
from __future__ import annotations

import yaml

from . import crds
from .detect import detect
from ..knowledge.images import is_vllm_image as is_vllm_build     # any build (rocm/vllm-dev): its release
from ..model.launch import KUBEAI_VIA, EnvEntry, ServiceRef
from .yaml_edit import remove_item
from .yaml_source import get, pair, scalar
from ..model.lazyre import lazy_re
from .embedded import scan_shell     # shell in YAML: read through the door


# dstack configurations whose `commands:` run with their `env:` (dstack.ai docs: services, tasks)
DSTACK_TYPES = frozenset({"service", "task", "dev-environment"})


def _task_image(node: yaml.MappingNode) -> str | None:
    """The image a task's scripts run in: dstack and GitLab CI `image: IMG` (GitLab's
    `image: {name: IMG}`), SkyPilot `resources: {image_id: docker:IMG}`."""
    image = get(node, "image")
    if isinstance(image, yaml.MappingNode):
        image = get(image, "name")
    if isinstance(image, yaml.ScalarNode) and image.value.strip():
        return image.value.strip()
    resources = get(node, "resources")
    image_id = get(resources, "image_id") if isinstance(resources, yaml.MappingNode) else None
    if isinstance(image_id, yaml.ScalarNode) and image_id.value.startswith("docker:"):
        return image_id.value[len("docker:"):].strip() or None
    return None


# keys whose values never hold a container or a workload's labels: the walks skip them
NO_CONTAINERS_BELOW = frozenset({"env", "envFrom", "volumeMounts", "volumes", "ports", "resources", "tolerations",
                                 "affinity", "nodeSelector", "livenessProbe", "readinessProbe", "startupProbe",
                                 "securityContext", "data", "stringData", "status"})
# keys whose values are prose for people (a CRD schema's `description`, a chart's `notes`): a
# `vllm serve` quoted there documents a launch, it never runs one
PROSE_KEYS = frozenset({"description", "summary", "title", "help", "notes", "comment", "comments", "documentation"})
ARGS_KEY_RE = lazy_re(r"(?i)(?:^|_|[a-z])(?:args|cmd_template)$")
LAUNCH_HINT_RE = lazy_re(r"vllm\s+(?:serve|launch)\b|vllm\.entrypoints|disagg_proxy|toy_proxy_server")
# a loose script that may start vLLM without saying `vllm serve`: a container runner, eval
SCRIPT_HINT_RE = lazy_re(r"\b(?:docker|podman|nerdctl)\s+(?:container\s+)?run\b|\b(?:apptainer|singularity)\s+"
                         r"(?:exec|run|instance)\b|\beval\b")
# every match of LAUNCH_HINT_RE / SCRIPT_HINT_RE starts with one of these words (keep them with
# the patterns): a search can start at the first of them, and need not run where there is none
LAUNCH_HINT_WORDS = ("vllm", "disagg_proxy", "toy_proxy_server")
SCRIPT_HINT_WORDS = ("docker", "podman", "nerdctl", "apptainer", "singularity", "eval")


def _first_word(text: str, words: tuple[str, ...], start: int, end: int) -> int:
    """Offset of the first of `words` in text[start:end], -1 if none is there."""
    first = -1
    for word in words:
        i = text.find(word, start, end)
        if i >= 0 and (first < 0 or i < first):
            first = i
    return first


RAY_KINDS = frozenset({"RayCluster", "RayService", "RayJob", "RayClusterFleet", "RayClusterReplicaSet"})


class KubernetesResources:
    """The Kubernetes resources (and loose scripts) of the documents a `YamlParser` reads."""

    vllm_runtimes: frozenset[str] = frozenset()     # the file's ServingRuntimes of a vLLM image (crds)

    # -- kubernetes ---------------------------------------------------------------
    def _k8s(self, doc: yaml.Node, index: int) -> None:
        kind = scalar(get(doc, "kind")) or ""
        meta_name = self.plain(get(get(doc, "metadata") or doc, "name")) or ""
        if kind == "ConfigMap":
            self._configmap(doc, meta_name)
            return
        if kind == "Service":
            self._service(doc, meta_name)
            return
        if kind == "CustomResourceDefinition":
            return      # a schema for other resources: it runs nothing (its descriptions quote launches)
        # KubeRay runs `ray start` in its pods: their image's entrypoint never runs (AIBrix's
        # RayClusterFleet and RayClusterReplicaSet hold a RayCluster template: the same pods)
        self._ray = kind in RAY_KINDS
        self._engine_doc, self._other_engine = doc, False    # worked out only when an args-only entry asks
        dstack = not kind and scalar(get(doc, "type")) in ("task", "service", "dev-environment")
        if dstack and get(doc, "commands") is not None:
            # dstack task/service: its `commands` replace the image's entrypoint
            self._loose_scripts(doc, scalar(get(doc, "name")) or scalar(get(doc, "type")) or "")
            return
        if not kind and scalar(get(doc, "type")) == "dev-environment":
            # dstack dev-environment: the image runs an IDE, not its entrypoint; only its
            # `init:` commands can start something
            self._loose_scripts(doc, f"dev-environment {meta_name or scalar(get(doc, 'name')) or ''}".strip())
            return
        labelled = "labels" in self.masked[doc.start_mark.index:doc.end_mark.index]
        self._where = {"hostnames": [meta_name] if meta_name else [], "labels": _all_labels(doc) if labelled else {}}
        owner = f"{kind}/{meta_name}" if kind else (meta_name or f"document {index + 1}")
        if crds.is_kubeai_model(doc) and crds.engine_field(self, get(doc, "spec")) is not None:
            crds.kubeai_model(self, doc, owner, index)      # engine VLLM: vLLM; any other: not
            return
        launch_start, env_start = len(self.pf.launches), len(self.pf.env)
        if kind == "RayService":
            crds.ray_service(self, doc, owner, index)
        elif not kind and crds.is_serve_config(doc):
            crds.serve_config(self, doc, "Ray Serve config", index)
        if not kind:
            from .helm_values import is_stack_values, read_stack_values
            if is_stack_values(doc):        # production-stack chart values, read without the chart
                read_stack_values(self, doc, index)
        self._walk_containers(doc, owner, index)
        if kind in crds.SERVING_RUNTIME_KINDS:       # an InferenceService may name it (lint.project.link)
            for launch in self.pf.launches[launch_start:]:
                launch.serving_runtime = meta_name.lower()
        if kind == "RayService":
            crds.ray_pod_env(self, launch_start, env_start)
        self._loose_scripts(doc, owner)

    def _walk_containers(self, doc: yaml.Node, owner: str, index: int) -> None:
        """Every container (and args list) of a document, in document order. The hot loop of the
        front end: scalars are never pushed (they hold nothing), each mapping's keys are read
        once, and the KubeAI test runs only where a `url` (or a merge key) may give one."""
        seen: set[int] = set()
        stack: list[tuple[yaml.Node, str | None, yaml.Node | None]] = [(doc, None, None)]
        consumed = self.consumed
        while stack:
            node, parent_key, holder = stack.pop()          # holder: the mapping above this node
            if id(node) in seen:
                continue
            seen.add(id(node))
            cls = type(node)
            if cls is _MAPPING:
                items = node.value
                keys = [k.value if type(k) is _SCALAR else None for k, _ in items]
                if _is_container_keys(node, keys, parent_key) or (
                        ("url" in keys or "<<" in keys) and crds.kubeai_entry(self, node)):
                    self._container(node, owner, index, parent_key)
                for i in range(len(items) - 1, -1, -1):
                    v = items[i][1]
                    if type(v) is not _SCALAR and keys[i] not in NO_CONTAINERS_BELOW:
                        stack.append((v, keys[i], node))
                for i, (_, v) in enumerate(items):
                    if type(v) is _SEQUENCE and _args_key(keys[i]) and id(v) not in consumed:
                        self._args_list(keys[i], v, owner, index, node, holder)
            elif cls is _SEQUENCE:
                stack.extend((v, parent_key, holder) for v in reversed(node.value) if type(v) is not _SCALAR)

    def _loose_scripts(self, doc: yaml.Node, owner: str) -> None:
        """Shell code outside any container (dstack `commands`, SkyPilot `run`, GitHub Actions and
        GitLab CI steps, benchmark scenarios, truss `start_command`): scan every scalar that may
        start vLLM. `env:` maps around a step (workflow, job, step) give the script its variables
        (`docker run $VLLM_IMAGE`)."""
        if not self._hint_outside_launches(doc.start_mark.index, doc.end_mark.index):
            return          # the cheap test first: most documents have no loose script
        stack: list[tuple[yaml.Node, dict[str, str], str | None, list]] = [(doc, {}, None, [])]
        seen: set[int] = set()
        while stack:
            node, variables, image, inherited = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.MappingNode):
                data: list = []         # the values of `env:`/`variables:`/`envs:` are data, not commands
                env = get(node, "env") or get(node, "variables")
                if isinstance(env, yaml.MappingNode):
                    data.append(env)
                    variables = dict(variables)
                    variables.update({k.value: v.value for k, v in env.value
                                      if isinstance(k, yaml.ScalarNode) and isinstance(v, yaml.ScalarNode)})
                envs = self._task_envs(node, owner)
                if envs is not None:
                    task_env, entries = envs
                    if isinstance(task_env, yaml.MappingNode):
                        data.append(task_env)
                    inherited = inherited + entries
                    variables = dict(variables)
                    variables.update({e.name: e.value for e in entries if e.value is not None})
                image = _task_image(node) or image
                stack.extend((v, variables, image, inherited) for k, v in reversed(node.value)
                             if not any(v is d for d in data) and scalar(k) not in PROSE_KEYS)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend((v, variables, image, inherited) for v in reversed(node.value))
            elif (isinstance(node, yaml.ScalarNode) and id(node) not in self.consumed
                  and (LAUNCH_HINT_RE().search(node.value) or SCRIPT_HINT_RE().search(node.value))):
                self._loose_script(node, owner, variables, image, inherited)

    def _task_envs(self, node: yaml.MappingNode, owner: str):
        """A task's own environment, exported to its scripts, so the env of every launch there,
        each entry removable with its line: a SkyPilot task's `envs:` (a map beside `run:`/
        `setup:`; found on nebius/nebius-ps-services: `VLLM_ATTENTION_BACKEND`, which vLLM
        ignores from 0.15.0 on, was never checked) and a dstack run's `env:` (`- NAME=value`
        items or a map beside `commands:`, with its `type:`). (node, entries) or None."""
        at = pair(node, "envs")
        if at is not None and isinstance(at[1], yaml.MappingNode) and \
                (get(node, "run") is not None or get(node, "setup") is not None):
            entries = self.map_env(at[1], at, f"envs of SkyPilot task {owner}")
            self.pf.env.extend(entries)
            return at[1], entries
        if scalar(get(node, "type")) in DSTACK_TYPES and isinstance(get(node, "commands"), yaml.SequenceNode):
            env = get(node, "env")
            if isinstance(env, (yaml.SequenceNode, yaml.MappingNode)):
                return env, self.env_entries(node, f"env of dstack {scalar(get(node, 'type'))} {owner}")
        return None

    def _hint_outside_launches(self, start: int, end: int) -> bool:
        """A launch or script hint in text[start:end] that is not inside a command already read
        as a launch (a manifest's own `vllm serve` would send every document down the walk)."""
        spans = None
        text = self.masked
        for pattern, words in ((LAUNCH_HINT_RE(), LAUNCH_HINT_WORDS), (SCRIPT_HINT_RE(), SCRIPT_HINT_WORDS)):
            first = _first_word(text, words, start, end)
            if first < 0:
                continue        # (a regex scan of a document cost more than the whole rest of its walk)
            for m in pattern.finditer(text, first, end):
                if spans is None:       # the commands that reach into this document, once
                    spans = [(s, e) for s, e in self.consumed_spans if s < end and e > start]
                a, b = m.span()
                if not any(s <= a and b <= e for s, e in spans):
                    return True
        return False

    def _loose_script(self, node: yaml.ScalarNode, owner: str, variables: dict[str, str],
                      image: str | None = None, inherited: list | None = None) -> None:
        offs = self.offsets(node)
        if offs is None:
            return
        line = node.start_mark.line + 1
        self._anchor = (node.start_mark.index, node.start_mark.index)
        scan = scan_shell(self.source, node.value, offs, context=f"script at line {line} ({owner})",
                          group=f"{self.source.display}:{line}", variables=variables, inherited_env=inherited,
                          image=image if image and is_vllm_build(image) else None)     # says its release
        self._add(scan.launches, [])
        self.pf.env.extend(scan.env)

    @staticmethod
    def _is_container(node: yaml.MappingNode, parent_key: str | None = None) -> bool:
        if parent_key in ("containers", "initContainers"):
            return True
        keys = {k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)}
        if "command" in keys or "args" in keys:
            return True
        return "image" in keys and ("name" in keys or "env" in keys) and isinstance(get(node, "image"), yaml.ScalarNode)

    def _service(self, doc: yaml.Node, name: str) -> None:
        spec = get(doc, "spec")
        sel = get(spec, "selector")          # (a scalar or a list here is a broken Service: no selector)
        selector = {k.value: v.value for k, v in (sel.value if isinstance(sel, yaml.MappingNode) else [])
                    if isinstance(k, yaml.ScalarNode) and isinstance(v, yaml.ScalarNode)}
        ports: dict[int, int | str] = {}
        for item in self.argv_nodes(get(spec, "ports")):
            port, target = scalar(get(item, "port")), scalar(get(item, "targetPort"))
            if port and port.isdigit():
                ports[int(port)] = int(target) if target and target.isdigit() else (target or int(port))
        self.pf.services.append(ServiceRef(name, selector, ports))

    def _container(self, node: yaml.MappingNode, owner: str, index: int, parent_key: str | None = None) -> None:
        name = self.plain(get(node, "name")) or "?"
        gpu = scalar(get(get(get(node, "resources"), "limits"), "nvidia.com/gpu")) or \
            scalar(get(get(get(node, "resources"), "requests"), "nvidia.com/gpu"))
        self._where["gpu_count"] = int(gpu) if gpu and gpu.isdigit() else None
        image = self.plain(get(node, "image"))
        if image is None and isinstance(get(node, "image"), yaml.MappingNode) and not self.templated:
            from .helm_values import values_image     # chart values: `image: {repository, tag}`
            image = values_image(node)
            if name == "?" and parent_key:
                name = f"`{parent_key}` (chart values)"
        self._anchor = (node.start_mark.index, node.start_mark.index)
        context, group = f"container {name} ({owner})", f"{self.source.display}#{index}:{owner}:{name}"
        env = self.env_entries(node, f"env of container {name}")
        self.containers[id(node)] = (image, env)
        env_from = []
        for item in self.argv_nodes(get(node, "envFrom")):
            ref = scalar(get(get(item, "configMapRef") or item, "name"))
            if ref:
                env_from.append(ref)
        before = len(self.pf.launches)
        if self._step_script(node, parent_key, image, env, context, group, env_from):
            return
        engine = crds.engine_field(self, node)
        if engine == "other":
            return              # a KubeAI catalogue entry of another engine (OLlama, Infinity...)
        if engine == "vllm" and name == "?" and parent_key:
            context = f"KubeAI model `{parent_key}` ({owner})"
        values = [scalar(n) or "" for n in self.argv_nodes(get(node, "command")) + self.argv_nodes(get(node, "args"))]
        if crds.hf_server(node, parent_key, image, values, self.vllm_runtimes) and detect(values) is None:
            # KServe's Hugging Face server: vLLM only with --backend=vllm, never its flags as `vllm serve`
            for part in (get(node, "command"), get(node, "args")):
                if part is not None:
                    self.consumed.add(id(part))
                if isinstance(part, yaml.SequenceNode):
                    self.consumed.update(id(n) for n in part.value if isinstance(n, yaml.Node))
            if crds.hf_backend(values) == "vllm":
                crds.hf_server_launch(self, node, image, env, context, group, env_from)
            else:
                self._args_in_env(node, image, env, context, group, env_from)
            return
        kserve_vllm = crds.kserve_vllm_format(node, parent_key, self.vllm_runtimes)
        self.launch_from(get(node, "command"), get(node, "args"), image, env, context, group, env_from,
                         known_vllm=engine == "vllm" or kserve_vllm)
        runtime = crds.runtime_ref(node, parent_key) if kserve_vllm and not image else ""
        for launch in self.pf.launches[before:]:
            if launch.program == "image entrypoint" and (engine == "vllm" or kserve_vllm):
                launch.via = f"{KUBEAI_VIA} engine: VLLM" if engine == "vllm" else \
                    f"via KServe runtime {runtime} (a vLLM serving runtime; the runtime's args come first)" \
                    if runtime else "via KServe modelFormat vLLM (a vLLM serving runtime; the runtime's args come first)"
                launch.runtime_ref = runtime
        if len(self.pf.launches) == before:
            self._args_in_env(node, image, env, context, group, env_from)

    def _step_script(self, node: yaml.MappingNode, parent_key: str | None, image, env, context, group,
                     env_from) -> bool:
        """A Tekton step's `script:` or an Argo script template's `source:` runs in place of the
        image's entrypoint, with the container's env: read as that container's shell script."""
        script = get(node, "script")
        if not isinstance(script, yaml.ScalarNode):
            script = get(node, "source") if parent_key == "script" else None
        if not isinstance(script, yaml.ScalarNode) or not script.value.strip():
            return False
        self.consumed.add(id(script))
        offs = self.offsets(script)
        if offs is not None:
            scan = scan_shell(self.source, script.value, offs, context=context, group=group,
                              inherited_env=env, image=image)
            self._add(scan.launches, env_from)
            self.pf.env.extend(scan.env)
        return True

    def _configmap(self, doc: yaml.Node, name: str) -> None:
        data_pair = pair(doc, "data")
        if data_pair is None or not isinstance(data_pair[1], yaml.MappingNode):
            return
        data = data_pair[1]
        entries = []
        for i, (k, v) in enumerate(data.value):
            if isinstance(k, yaml.ScalarNode) and isinstance(v, yaml.ScalarNode):
                entries.append(EnvEntry(k.value, v.value, self.source, (k.start_mark.index, v.end_mark.index),
                                        f"ConfigMap {name} data",
                                        remove_item(self.source, self.text, data, i, data_pair)))
        self.pf.configmaps[name] = entries
        self.pf.env.extend(entries)


_MAPPING, _SEQUENCE, _SCALAR = yaml.MappingNode, yaml.SequenceNode, yaml.ScalarNode


def _is_container_keys(node: yaml.MappingNode, keys: list, parent_key: str | None) -> bool:
    """`KubernetesResources._is_container` on a mapping whose scalar keys are read already."""
    if parent_key in ("containers", "initContainers") or "command" in keys or "args" in keys:
        return True
    return "image" in keys and ("name" in keys or "env" in keys) and isinstance(get(node, "image"), yaml.ScalarNode)


_ARGS_KEYS: dict[str | None, bool] = {}


def _args_key(key: str | None) -> bool:
    """Does a key name an args list (ARGS_KEY_RE)? Memoised: keys repeat across manifests."""
    hit = _ARGS_KEYS.get(key)
    if hit is None:
        hit = ARGS_KEY_RE().search(key or "") is not None
        if len(_ARGS_KEYS) < 1 << 14:
            _ARGS_KEYS[key] = hit
    return hit


def _all_labels(doc: yaml.Node) -> dict[str, str]:
    """Every `labels:` map in a workload (its own and its pod template's), for selectors."""
    labels: dict[str, str] = {}
    stack, seen = [doc], set()
    while stack:               # mappings only, and never into lists of containers, env, args...
        node = stack.pop()
        if id(node) in seen or not isinstance(node, yaml.MappingNode):
            continue
        seen.add(id(node))
        for k, v in node.value:
            key = scalar(k)
            if key == "labels" and isinstance(v, yaml.MappingNode):
                labels.update({a.value: b.value for a, b in v.value
                               if isinstance(a, yaml.ScalarNode) and isinstance(b, yaml.ScalarNode)})
            elif isinstance(v, yaml.MappingNode) and key not in NO_CONTAINERS_BELOW:
                stack.append(v)
    return labels
