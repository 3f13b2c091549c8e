"""YAML front end: Kubernetes manifests (any kind that holds containers, kustomize patches,
CRDs, Helm templates after masking) and docker compose files.

PyYAML composes nodes (never Python objects) whose marks are character offsets, so every argv
token and env entry keeps its exact span.
"""
from __future__ import annotations

import bisect
import re
from functools import partial

import yaml

from . import configmap_scripts, crds, templates
from .detect import SHELLS, basename, copied_server, detect, is_vllm_image, serve_kind
from ..knowledge.images import is_vllm_image as is_vllm_build     # any build (rocm/vllm-dev): its release
from ..knowledge.launchers import other_engine
from ..model.launch import (KUBEAI_VIA, AppendSite, Arg, EnvEntry, Launch, ParsedFile, ParseError, ServiceRef,
                     SourceFile, normalize_flag)
from .yaml_edit import append_site, remove_item
from .yaml_edit import content_end as yaml_edit_end
from .yaml_source import YamlError, compose_all, get, iter_nodes, mask_templates, pair, scalar, scalar_offsets
from ..model.lazyre import lazy_re
from . import embedded
from .embedded import scan_shell, split_words     # shell in YAML: read through the door


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
ARGS_KEY_RE = lazy_re(r"(?i)(?:^|_|[a-z])(?:args|cmd_template)$")
LAUNCH_HINT_RE = lazy_re(r"vllm\s+(?:serve|launch)\b|vllm\.entrypoints|disagg_proxy|toy_proxy_server")
# a loose script that may start vLLM without saying `vllm serve`: a container runner, eval
SCRIPT_HINT_RE = lazy_re(r"\b(?:docker|podman|nerdctl)\s+(?:container\s+)?run\b|\b(?:apptainer|singularity)\s+"
                         r"(?:exec|run|instance)\b|\beval\b")


JINJA_NAME_RE = lazy_re(r"\.(?:ya?ml|json)\.(?:j2|jinja2?)$", re.I)
_JINJA_STATEMENT_RE = lazy_re(r"\{%.*?%\}|\{#.*?#\}", re.S)


def _mask_jinja_statements(text: str) -> tuple[str, list[tuple[int, int]]]:
    """Jinja `{% ... %}` statements and `{# ... #}` comments become blanks (line breaks kept):
    a Jinja template of YAML or JSON then parses as the document it renders (every branch kept)."""
    spans = [(m.start(), m.end()) for m in _JINJA_STATEMENT_RE().finditer(text)]
    out = list(text)
    for a, b in spans:
        for i in range(a, b):
            if out[i] not in "\r\n":
                out[i] = " "
    return "".join(out), spans


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)

class YamlParser:
    def __init__(self, source: SourceFile):
        self.source = source
        self.text = source.text
        self.pf = ParsedFile(source)
        self.templated: list[tuple[int, int]] = []
        self._ray = False
        self._other_engine: str | None = None     # the document's command runs another engine
        self.containers: dict[int, tuple] = {}     # id(container node) -> (image, env): ConfigMap scripts

    def parse(self) -> ParsedFile:
        text = self.text
        jinja: list[tuple[int, int]] = []
        terraform = None
        if JINJA_NAME_RE().search(self.source.path.name):
            text, jinja = _mask_jinja_statements(text)
        elif templates.engine_of(self.source.path.name) == "terraform" and ("${" in text or "%{" in text):
            text, jinja = templates.mask(text, "terraform", "yaml")     # `%{ for }` blank, `${x}` a placeholder
            terraform = (text, jinja)
        masked, self.templated = mask_templates(text)
        self.templated = sorted(self.templated + jinja)
        try:
            docs = compose_all(masked)
        except YamlError as err:
            if not self.templated:
                raise ParseError(err.line, err.message) from None     # `path:line:` says the line
            try:        # plain YAML whose strings hold `{{` (a chat template, `--format '{{.ID}}'`)
                docs, masked = compose_all(self.text), self.text
                self.templated = []
            except YamlError:
                docs, masked = self._segments(masked, err)
        self.masked = masked
        self._template_starts = [ts for ts, _ in self.templated]
        self.consumed: set[int] = set()
        # spans of consumed commands whose every scalar is consumed: a hint there is no loose script
        self.consumed_spans: list[tuple[int, int]] = []
        self._where: dict = {}
        for index, doc in enumerate(docs):
            self._where = {}
            self._ignore_annotations(doc)
            if doc is None:
                continue
            if isinstance(get(doc, "services"), yaml.MappingNode):
                self.source.kind = "compose"
                self._compose(doc, index)
            else:
                self._k8s(doc, index)
        configmap_scripts.read(self, docs)         # after every pod: the one that mounts a script gives it its image
        if terraform:
            templates.restore_launches(self.pf.launches, terraform[0], self.text, terraform[1])
        if self.templated:
            self.pf.notes.append(f"{len(self.templated)} Go template action(s) read as placeholders")
        return self.pf

    def _segments(self, masked: str, first_error: YamlError):
        """A Helm template that is not YAML even with its actions masked (several `define`
        blocks, documents without `---`): read each resource on its own, blanking the rest so
        offsets stay true. Resources that still do not parse are skipped and said so."""
        starts = [m.start() for m in re.finditer(r"(?m)^(?:apiVersion|services):", masked)]
        if not starts:
            raise ParseError(first_error.line, f"Helm/Go template: {first_error.message}")
        bounds = sorted({0, *starts}) + [len(masked)]
        docs: list = []
        for lo, hi in zip(bounds, bounds[1:]):
            segment = _blank(masked[:lo]) + masked[lo:hi] + _blank(masked[hi:])
            try:
                docs.extend(compose_all(segment))
            except YamlError as err:
                self.pf.notes.append(f"line {err.line}: skipped a templated resource that is not YAML ({err})")
        return docs, masked

    def _ignore_annotations(self, doc: yaml.Node) -> None:
        """`vllmlint.io/ignore: "VL101"` as a Kubernetes annotation or label, or a compose
        service label: suppresses those codes in that resource (or service)."""
        if "vllmlint.io/ignore" not in self.text:
            return
        for node in iter_nodes(doc):
            if not isinstance(node, yaml.MappingNode):
                continue
            for k, v in node.value:
                if scalar(k) in ("annotations", "labels") and isinstance(v, yaml.MappingNode):
                    value = scalar(get(v, "vllmlint.io/ignore"))
                    if value:
                        codes = [c.strip().upper() for c in value.replace(" ", ",").split(",") if c.strip()]
                        owner = doc if get(doc, "services") is None else self._service_of(doc, node)
                        self.pf.ignore_ranges.append((owner.start_mark.index, yaml_edit_end(owner), codes,
                                                      f"{scalar(k)[:-1]} vllmlint.io/ignore"))

    @staticmethod
    def _service_of(doc: yaml.Node, node: yaml.Node) -> yaml.Node:
        for _, service in getattr(get(doc, "services"), "value", []):
            if node is service or any(node is n for n in iter_nodes(service)):
                return service
        return doc

    # -- scalars ----------------------------------------------------------
    def offsets(self, node: yaml.ScalarNode):
        return scalar_offsets(self.masked, node)

    def is_templated(self, node: yaml.Node) -> bool:
        s, e = node.start_mark.index, node.end_mark.index
        return any(ts < e and s < te for ts, te in self.templated)

    def arg(self, node: yaml.Node) -> Arg:
        span = (node.start_mark.index, node.end_mark.index)
        if not isinstance(node, yaml.ScalarNode):
            return Arg(self.text[span[0]:span[1]], self.source, span, dynamic=True)
        value = node.value
        dynamic = "$" in value
        if self.is_templated(node):
            offs = self.offsets(node)
            if offs is not None:
                value = "".join(self.text[o] for o in offs)
            dynamic = True
        # the closure holds the text and this scalar only, not the parser (its whole document)
        return Arg(value, self.source, span, dynamic=dynamic, locate=partial(scalar_offsets, self.masked, node))

    # -- env ----------------------------------------------------------------
    def env_entries(self, container: yaml.Node, origin: str) -> list[EnvEntry]:
        entries: list[EnvEntry] = []
        env_pair = pair(container, "env") or pair(container, "environment")
        if env_pair is None:
            return entries
        env = env_pair[1]
        if isinstance(env, yaml.SequenceNode):
            for i, item in enumerate(env.value):
                if isinstance(item, yaml.MappingNode):          # k8s: {name, value|valueFrom}
                    name = scalar(get(item, "name"))
                    value_node = get(item, "value")
                    value = scalar(value_node) if value_node is not None else None
                    if value_node is None and get(item, "valueFrom") is None:
                        value = ""
                elif isinstance(item, yaml.ScalarNode):          # compose list: NAME=value
                    name, eq, value = item.value.partition("=")
                    value = value if eq else None
                else:
                    continue
                if not name:
                    continue
                entries.append(EnvEntry(name, value, self.source,
                                        (item.start_mark.index, item.end_mark.index), origin,
                                        remove_item(self.source, self.text, env, i, env_pair)))
        elif isinstance(env, yaml.MappingNode):                  # compose map: NAME: value
            entries += self.map_env(env, env_pair, origin)
        self.pf.env.extend(entries)
        return entries

    def map_env(self, env: yaml.MappingNode, env_pair, origin: str) -> list[EnvEntry]:
        """`NAME: value` entries of an env map (compose, Ray's runtime_env.env_vars), each
        removable with its line."""
        out = []
        for i, (k, v) in enumerate(env.value):
            if isinstance(k, yaml.ScalarNode):
                value = scalar(v)
                out.append(EnvEntry(k.value, "" if value is None else value, self.source,
                                    (k.start_mark.index, v.end_mark.index), origin,
                                    remove_item(self.source, self.text, env, i, env_pair)))
        return out

    # -- argv ---------------------------------------------------------------
    def argv_nodes(self, node: yaml.Node | None) -> list[yaml.Node]:
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        return []

    def launch_from(self, command: yaml.Node | None, args: yaml.Node | None, image: str | None,
                    env: list[EnvEntry], context: str, group: str, env_from: list[str],
                    known_vllm: bool = False) -> None:
        """Build the launch(es) of one container or service from its command and args
        (`known_vllm`: what runs them is vLLM's `vllm serve`, whatever the image, e.g. a KubeAI
        Model of engine VLLM)."""
        for node in (command, args):
            if node is not None:
                self.consumed.add(id(node))
                if isinstance(node, yaml.SequenceNode):     # (a scalar's value is its text)
                    self.consumed.update(id(n) for n in node.value if isinstance(n, yaml.Node))
                if isinstance(node, yaml.ScalarNode) or isinstance(node, yaml.SequenceNode) and \
                        all(isinstance(n, yaml.ScalarNode) for n in node.value):
                    self.consumed_spans.append((node.start_mark.index, node.end_mark.index))
        # a single string (compose `command: vllm serve ...`, Helm values): compose splits it
        for node in (command, args):
            if isinstance(node, yaml.ScalarNode) and node.value.strip():
                offs = self.offsets(node)
                if offs is None:
                    continue
                scan = scan_shell(self.source, node.value, offs, context=context, group=group,
                                  inherited_env=env, image=image)
                self._add(scan.launches, env_from)
                self.pf.env.extend(scan.env)
                if scan.launches:
                    return
        nodes = self.argv_nodes(command) + self.argv_nodes(args)
        string_cmd = next((n for n in (command, args) if isinstance(n, yaml.ScalarNode) and n.value.strip()), None)
        if string_cmd is not None and not nodes:
            if (known_vllm or is_vllm_image(image)) and command is None and not self._ray:
                offs = self.offsets(string_cmd)
                words = split_words(self.source, string_cmd.value, offs) if offs else []
                self._implied(words, image, env, context, group, env_from, site=None, string_node=string_cmd)
            return
        if not nodes:
            if (known_vllm or is_vllm_image(image)) and command is None and args is None and not self._ray:
                self._implied([], image, env, context, group, env_from, site=None)
            return
        argv = [self.arg(n) for n in nodes]
        values = [a.value for a in argv]
        # `sh -c SCRIPT`: lex the script
        if basename(values[0]) in SHELLS:
            for i, v in enumerate(values[1:], 1):
                if v.startswith("-") and not v.startswith("--") and "c" in v[1:] and i + 1 < len(nodes):
                    script = nodes[i + 1]
                    if values[i + 1] == "--" and i + 2 < len(nodes):     # `bash -c -- SCRIPT`
                        script = nodes[i + 2]
                    offs = self.offsets(script) if isinstance(script, yaml.ScalarNode) else None
                    if offs is not None:
                        scan = scan_shell(self.source, script.value, offs, context=context, group=group,
                                          inherited_env=env, image=image)
                        self._add(scan.launches, env_from)
                        self.pf.env.extend(scan.env)
                    return
        last_seq = args if isinstance(args, yaml.SequenceNode) and args.value else command
        site = append_site(self.source, self.text, last_seq) if isinstance(last_seq, yaml.SequenceNode) else None
        det = detect(values) or copied_server(values, image)
        if det is not None:
            launch = Launch(kind=det.kind, file=self.source,
                            span=argv[det.start].span or (0, 0), argv=argv[det.start:],
                            options_start=det.options_start - det.start, context=context, group=group,
                            env=list(env), image=image, program=det.program, append_site=site)
            if site is None:
                launch.not_editable = "its argv list ends in a form vllmlint does not edit"
            self._add([launch], env_from)
        elif command is None and not self._ray and (known_vllm or is_vllm_image(image) or (
                _looks_like_vllm_args(values) and _image_may_be_vllm(image) and not (
                    image is None and self._other_engine))):
            self._implied(argv, image, env, context, group, env_from, site)

    def _implied(self, argv: list[Arg], image, env, context, group, env_from, site, string_node=None) -> None:
        """Args only: the vllm/vllm-openai image's entrypoint is `vllm serve`."""
        values = [a.value for a in argv]
        anchor = argv[0].span if argv and argv[0].span else None
        if anchor is None:
            anchor = (0, 0)
        launch = Launch(kind=serve_kind(values), file=self.source, span=anchor,
                        argv=[Arg("vllm"), Arg("serve")] + argv, options_start=2, context=context,
                        group=group, env=list(env), image=image, program="image entrypoint")
        if string_node is not None and argv and argv[-1].span:
            site = AppendSite(self.source, argv[-1].span[1], " {}")
        launch.append_site = site
        if site is None:
            launch.not_editable = "the arguments come from the image or at run time"
        self._add([launch], env_from)

    def plain(self, node: yaml.Node | None) -> str | None:
        """A scalar's value with its template actions as written (`{{ .Values.name }}`), never
        the mask that let it parse."""
        value = scalar(node)
        if value is None or not self.templated or not self.is_templated(node):
            return value
        offs = self.offsets(node)
        return self._restore(value, offs) if offs is not None else value

    def _in_template(self, offset: int) -> bool:
        i = bisect.bisect_right(self._template_starts, offset) - 1
        return i >= 0 and offset < self.templated[i][1]

    def _restore(self, value: str, offs) -> str:
        if len(offs) != len(value):
            return value
        return "".join(self.text[o] if self._in_template(o) else ch for ch, o in zip(value, offs))

    def _unmask(self, launch: Launch) -> None:
        """Args and env of a templated file read as written: an action glued to a flag
        (`--max-model-len={{ .Values.len }}`) stays one token, known only at run time."""
        for arg in launch.argv:
            if arg.file is self.source and arg.span and any(ts < arg.span[1] and arg.span[0] < te
                                                            for ts, te in self.templated):
                offs = arg.offsets
                if offs is not None:
                    arg.value = self._restore(arg.value, offs)
                arg.dynamic = True
        for entry in launch.env:
            if entry.file is self.source and entry.value is not None and \
                    any(ts < entry.span[1] and entry.span[0] < te for ts, te in self.templated):
                entry.value = None       # known at render time only

    def _add(self, launches: list[Launch], env_from: list[str]) -> None:
        for launch in launches:
            if self.templated:
                self._unmask(launch)
            launch.env_from = list(env_from)
            launch.hostnames = list(self._where.get("hostnames", []))
            launch.labels = dict(self._where.get("labels", {}))
            launch.gpus = self._where.get("gpus")
            launch.gpu_count = self._where.get("gpu_count")
            if launch.span == (0, 0):
                launch.span = self._anchor
        self.pf.launches.extend(launches)

    # -- compose ------------------------------------------------------------
    def _compose(self, doc: yaml.MappingNode, index: int) -> None:
        services = get(doc, "services")
        assert isinstance(services, yaml.MappingNode)
        for key, service in services.value:
            if not isinstance(service, yaml.MappingNode):
                continue
            name = self.plain(key) or "?"
            self._anchor = (key.start_mark.index, key.end_mark.index)
            self._where = {"hostnames": [h for h in (name, scalar(get(service, "container_name")),
                                                     scalar(get(service, "hostname"))) if h]}
            self._where.update(_compose_gpus(service))
            env = self.env_entries(service, f"compose service {name} environment")
            entrypoint, command = get(service, "entrypoint"), get(service, "command")
            image = self.plain(get(service, "image"))
            context, group = f"service {name}", f"{self.source.display}#{index}:{name}"
            if entrypoint is not None:
                if isinstance(entrypoint, yaml.ScalarNode) and isinstance(command, yaml.ScalarNode):
                    self._joined_scalars(entrypoint, command, image, env, context, group)
                elif isinstance(entrypoint, yaml.ScalarNode) and isinstance(command, yaml.SequenceNode):
                    # `entrypoint: vllm serve` + command list: argv is both
                    offs = self.offsets(entrypoint)
                    words = split_words(self.source, entrypoint.value, offs) if offs else []
                    self._entry_plus_args(words, command, image, env, context, group)
                else:
                    self.launch_from(entrypoint, command, image, env, context, group, [])
            else:
                # compose `command` replaces the image's CMD: it is the args of its entrypoint
                self.launch_from(None, command, image, env, context, group, [])

    def _joined_scalars(self, entrypoint, command, image, env, context, group) -> None:
        """`entrypoint: /bin/bash` + `command: -c "..."`: compose runs both as one argv."""
        offs_e, offs_c = self.offsets(entrypoint), self.offsets(command)
        if offs_e is None or offs_c is None or not offs_e:
            return
        self.consumed.update((id(entrypoint), id(command)))
        text = entrypoint.value + " " + command.value
        omap = list(offs_e) + [offs_e[-1]] + list(offs_c)
        scan = scan_shell(self.source, text, omap, context=context, group=group, inherited_env=env, image=image)
        self._add(scan.launches, [])
        self.pf.env.extend(scan.env)

    def _entry_plus_args(self, words: list[Arg], args: yaml.SequenceNode, image, env, context, group) -> None:
        argv = words + [self.arg(n) for n in args.value]
        det = detect([a.value for a in argv])
        if det is None:
            return
        site = append_site(self.source, self.text, args)
        launch = Launch(kind=det.kind, file=self.source, span=argv[det.start].span or self._anchor,
                        argv=argv[det.start:], options_start=det.options_start - det.start,
                        context=context, group=group, env=list(env), image=image,
                        program=det.program, append_site=site,
                        not_editable=None if site else "its argv list ends in a form vllmlint does not edit")
        self._add([launch], [])

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
        # KubeRay runs `ray start` in its pods: their image's entrypoint never runs
        self._ray = kind in ("RayCluster", "RayService", "RayJob")
        self._other_engine = _other_engine_command(doc)
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
        seen: set[int] = set()
        stack: list[tuple[yaml.Node, str | None]] = [(doc, None)]
        while stack:
            node, parent_key = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.MappingNode):
                if self._is_container(node, parent_key) or crds.kubeai_entry(self, node):
                    self._container(node, owner, index, parent_key)
                stack.extend((v, scalar(k)) for k, v in reversed(node.value) if scalar(k) not in NO_CONTAINERS_BELOW)
                for k, v in node.value:
                    if isinstance(v, yaml.SequenceNode) and ARGS_KEY_RE().search(scalar(k) or "") \
                            and id(v) not in self.consumed:
                        self._args_list(scalar(k), v, owner, index, node)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend((v, parent_key) for v in reversed(node.value))
        if kind == "RayService":
            crds.ray_pod_env(self, launch_start, env_start)
        self._loose_scripts(doc, owner)

    def _loose_scripts(self, doc: yaml.Node, owner: str) -> None:
        """Shell code outside any container (dstack `commands`, SkyPilot `run`, GitHub Actions and
        GitLab CI steps, benchmark scenarios, truss `start_command`): scan every scalar that may
        start vLLM. `env:` maps around a step (workflow, job, step) give the script its variables
        (`docker run $VLLM_IMAGE`)."""
        if not self._hint_outside_launches(doc.start_mark.index, doc.end_mark.index):
            return          # the cheap test first: most documents have no loose script
        stack: list[tuple[yaml.Node, dict[str, str], str | None]] = [(doc, {}, None)]
        seen: set[int] = set()
        while stack:
            node, variables, image = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.MappingNode):
                env = get(node, "env") or get(node, "variables")
                if isinstance(env, yaml.MappingNode):
                    variables = dict(variables)
                    variables.update({k.value: v.value for k, v in env.value
                                      if isinstance(k, yaml.ScalarNode) and isinstance(v, yaml.ScalarNode)})
                image = _task_image(node) or image
                # values of `env:`/`variables:` are data, not commands
                stack.extend((v, variables, image) for k, v in reversed(node.value)
                             if not (v is env and isinstance(env, yaml.MappingNode)))
            elif isinstance(node, yaml.SequenceNode):
                stack.extend((v, variables, image) for v in reversed(node.value))
            elif (isinstance(node, yaml.ScalarNode) and id(node) not in self.consumed
                  and (LAUNCH_HINT_RE().search(node.value) or SCRIPT_HINT_RE().search(node.value))):
                self._loose_script(node, owner, variables, image)

    def _hint_outside_launches(self, start: int, end: int) -> bool:
        """A launch or script hint in text[start:end] that is not inside a command already read
        as a launch (a manifest's own `vllm serve` would send every document down the walk)."""
        for pattern in (LAUNCH_HINT_RE(), SCRIPT_HINT_RE()):
            for m in pattern.finditer(self.masked, start, end):
                if not any(s <= m.start() and m.end() <= e for s, e in self.consumed_spans):
                    return True
        return False

    def _loose_script(self, node: yaml.ScalarNode, owner: str, variables: dict[str, str],
                      image: str | None = None) -> None:
        offs = self.offsets(node)
        if offs is None:
            return
        line = node.start_mark.line + 1
        self._anchor = (node.start_mark.index, node.start_mark.index)
        scan = scan_shell(self.source, node.value, offs, context=f"script at line {line} ({owner})",
                          group=f"{self.source.display}:{line}", variables=variables,
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
        if crds.hf_server(node, parent_key, image, values) and detect(values) is None:
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
        kserve_vllm = crds.kserve_vllm_format(node, parent_key)
        self.launch_from(get(node, "command"), get(node, "args"), image, env, context, group, env_from,
                         known_vllm=engine == "vllm" or kserve_vllm)
        for launch in self.pf.launches[before:]:
            if launch.program == "image entrypoint" and (engine == "vllm" or kserve_vllm):
                launch.via = f"{KUBEAI_VIA} engine: VLLM" if engine == "vllm" else \
                    "via KServe modelFormat vLLM (a vLLM serving runtime; the runtime's args come first)"
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

    def _args_list(self, key: str, seq: yaml.SequenceNode, owner: str, index: int,
                   parent: yaml.Node | None = None) -> None:
        """Chart values and recipes keep vLLM's flags in a list (`extraArgs`, `vllm_args`,
        `server_cmd_template`) that a template later puts after `vllm serve`. Beside a vLLM
        image (`image: {repository: vllm/vllm-openai, tag: v0.29.0}`) any args list is one,
        with the image's release and the `env` list next to it."""
        from .helm_values import image_beside

        argv = [self.arg(n) for n in seq.value if isinstance(n, yaml.ScalarNode)]
        image = image_beside(parent) if parent is not None and not self.templated else None
        engine = crds.engine_field(self, parent) if key == "args" and parent is not None else None
        if engine == "other":
            return              # a KubeAI catalogue entry of another engine: never vLLM
        if not argv or not (image or engine == "vllm" or _looks_like_vllm_args([a.value for a in argv])):
            return
        env = []
        if image and isinstance(get(parent, "env"), yaml.SequenceNode) and not self._is_container(parent):
            env = self.env_entries(parent, f"env beside `{key}` (chart values)")
        self.consumed.update(id(n) for n in [seq, *seq.value])
        line = seq.start_mark.line + 1
        self._anchor = (seq.start_mark.index, seq.start_mark.index)
        site = append_site(self.source, self.text, seq)
        launch = Launch(kind=serve_kind([a.value for a in argv]), file=self.source, span=argv[0].span or self._anchor,
                        argv=[Arg("vllm"), Arg("serve")] + argv, options_start=2,
                        context=f"`{key}` at line {line} ({owner})", group=f"{self.source.display}#{index}:{key}:{line}",
                        program=f"vllm serve (flags from `{key}`)", append_site=site, env=env, image=image,
                        not_editable=None if site else "its list ends in a form vllmlint does not edit")
        if engine == "vllm":
            launch.via = f"{KUBEAI_VIA} engine: VLLM (flags from `{key}`)"
        self._add([launch], [])

    def _args_in_env(self, container, image, env, context, group, env_from) -> None:
        """KServe and others pass vLLM's flags in an env var (`VLLM_ADDITIONAL_ARGS`) that the
        image's entrypoint splices into `vllm serve`: read it as the launch's argv."""
        env_node = get(container, "env")
        for item in self.argv_nodes(env_node):
            name, value = scalar(get(item, "name")), get(item, "value")
            if not (name and name.endswith("ARGS") and isinstance(value, yaml.ScalarNode)):
                continue
            offs = self.offsets(value)
            words = split_words(self.source, value.value, offs) if offs else []
            if not _looks_like_vllm_args([w.value for w in words]):
                continue
            self._anchor = (value.start_mark.index, value.start_mark.index)
            site = AppendSite(self.source, words[-1].span[1], " {}") if words[-1].span else None
            launch = Launch(kind=serve_kind([w.value for w in words]), file=self.source,
                            span=words[0].span or self._anchor, argv=[Arg("vllm"), Arg("serve")] + words,
                            options_start=2, context=f"{context} via {name}", group=group, env=list(env),
                            image=image, program=f"vllm serve (flags from ${name})", append_site=site)
            self._add([launch], env_from)

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


# Options only vLLM spells this way: an argv fragment holding one of them feeds `vllm serve`.
VLLM_MARKER_FLAGS = {
    "--kv-transfer-config", "--tensor-parallel-size", "--pipeline-parallel-size", "--max-model-len",
    "--gpu-memory-utilization", "--served-model-name", "--enable-prefix-caching", "--enforce-eager",
    "--max-num-seqs", "--max-num-batched-tokens", "--data-parallel-size", "--enable-scale-out",
    "--tokens-only", "--reasoning-parser", "--tool-call-parser", "--enable-auto-tool-choice",
    "--kv-cache-dtype", "--enable-expert-parallel", "--speculative-config", "--compilation-config",
    "--enable-chunked-prefill", "--disable-log-requests", "--swap-space", "--max-lora-rank",
    "--enable-lora", "--limit-mm-per-prompt", "--distributed-executor-backend", "--block-size",
    "--kv-events-config", "--ec-transfer-config", "--max-num-seq", "--disable-log-stats",
}


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


def _compose_gpus(service: yaml.Node) -> dict:
    """`deploy.resources.reservations.devices`: `device_ids` pin GPUs, `count` asks for some."""
    devices = get(get(get(get(service, "deploy"), "resources"), "reservations"), "devices")
    out: dict = {}
    for dev in getattr(devices, "value", []) if isinstance(devices, yaml.SequenceNode) else []:
        ids = get(dev, "device_ids")
        if isinstance(ids, yaml.SequenceNode):
            vals = [scalar(n) for n in ids.value]
            if all(v and v.isdigit() for v in vals):
                out["gpus"] = [int(v) for v in vals]
        count = scalar(get(dev, "count"))
        if count and count.isdigit():
            out["gpu_count"] = int(count)
    return out


def _image_may_be_vllm(image: str | None) -> bool:
    """An args-only container is read by its flags only when its image may be a vLLM build: none
    given, chosen at run time (`{{ .Values.image }}`, `$IMAGE`), or one that names vLLM
    (`registry.corp/ml/vllm-custom`). A named image of something else (an inference simulator,
    SGLang, TGI) takes flags alike and is never vLLM because of them."""
    if not image:
        return True
    text = image.strip()
    if is_vllm_build(text) and not is_vllm_image(text):
        return False        # a vLLM build whose entrypoint is a shell (`rocm/vllm-dev`): args are its command
    return "$" in text or "{{" in text or "vllm" in text.lower()


def _other_engine_command(doc: yaml.Node) -> str | None:
    """The other engine (knowledge/launchers.OTHER_ENGINE_PROGRAMS) a `command:` anywhere in the
    document runs, else None: an image-less args-only entry beside it is that program's args."""
    stack, seen = [doc], 0
    while stack and seen < 5000:
        node = stack.pop()
        seen += 1
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if scalar(k) == "command":
                    words = [n.value for n in v.value if isinstance(n, yaml.ScalarNode)] \
                        if isinstance(v, yaml.SequenceNode) else [v.value] if isinstance(v, yaml.ScalarNode) else []
                    found = other_engine(" ".join(words))
                    if found:
                        return found
                stack.append(v)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return None


def _looks_like_vllm_args(values: list[str]) -> bool:
    """Args-only containers of images that wrap vLLM (llm-d, KServe), chart `extraArgs`."""
    return any(normalize_flag(v.split("=", 1)[0]) in VLLM_MARKER_FLAGS for v in values if v.startswith("--"))


def parse_yaml(source: SourceFile) -> ParsedFile:
    return YamlParser(source).parse()


def _embedded(view: SourceFile, start: int, end: int, inherited) -> ParsedFile:
    """yaml written inside another file (a heredoc, a ConfigMap entry): read in place (parsers/embedded.py)."""
    view.kind = "k8s"
    return parse_yaml(view)


embedded.register("yaml", _embedded)
