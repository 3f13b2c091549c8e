"""YAML front end: Kubernetes manifests (any kind that holds containers, kustomize patches,
CRDs, Helm templates after masking) and docker compose files.

PyYAML composes nodes (never Python objects) whose marks are character offsets, so every argv
token and env entry keeps its exact span.
"""
from __future__ import annotations

import yaml

from ..detect import detect, is_vllm_image, serve_kind
from ..model import Arg, EnvEntry, Launch, ParsedFile, ParseError, SourceFile
from .shellscan import SHELLS, Shift, basename, scan_shell, split_words
from .yaml_edit import append_site, remove_item
from .yaml_source import YamlError, compose_all, mask_templates, scalar_offsets

Pair = tuple[yaml.Node, yaml.Node]


def get(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


def pair(node: yaml.Node, key: str) -> Pair | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return k, v
    return None


def scalar(node: yaml.Node | None) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) else None


class YamlParser:
    def __init__(self, source: SourceFile):
        self.source = source
        self.text = source.text
        self.pf = ParsedFile(source)
        self.templated: list[tuple[int, int]] = []

    def parse(self) -> ParsedFile:
        masked, self.templated = mask_templates(self.text)
        try:
            docs = compose_all(masked)
        except YamlError as err:
            raise ParseError(err.line, f"{'Helm/Go template: ' if self.templated else ''}{err}") from None
        self.masked = masked
        for index, doc in enumerate(docs):
            if doc is None:
                continue
            if isinstance(get(doc, "services"), yaml.MappingNode):
                self.source.kind = "compose"
                self._compose(doc, index)
            else:
                self._k8s(doc, index)
        if self.templated:
            self.pf.notes.append(f"{len(self.templated)} Go template action(s) read as placeholders")
        return self.pf

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
        return Arg(value, self.source, span, dynamic=dynamic)

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
            for i, (k, v) in enumerate(env.value):
                if isinstance(k, yaml.ScalarNode):
                    value = scalar(v)
                    entries.append(EnvEntry(k.value, "" if value is None else value, self.source,
                                            (k.start_mark.index, v.end_mark.index), origin,
                                            remove_item(self.source, self.text, env, i, env_pair)))
        self.pf.env.extend(entries)
        return entries

    # -- argv ---------------------------------------------------------------
    def argv_nodes(self, node: yaml.Node | None) -> list[yaml.Node]:
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        return []

    def launch_from(self, command: yaml.Node | None, args: yaml.Node | None, image: str | None,
                    env: list[EnvEntry], context: str, group: str, env_from: list[str]) -> None:
        """Build the launch(es) of one container or service from its command and args."""
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
            if is_vllm_image(image) and command is None:
                offs = self.offsets(string_cmd)
                words = split_words(self.source, string_cmd.value, offs) if offs else []
                self._implied(words, image, env, context, group, env_from, site=None, string_node=string_cmd)
            return
        if not nodes:
            if is_vllm_image(image) and command is None and args is None:
                self._implied([], image, env, context, group, env_from, site=None)
            return
        argv = [self.arg(n) for n in nodes]
        values = [a.value for a in argv]
        # `sh -c SCRIPT`: lex the script
        if basename(values[0]) in SHELLS:
            for i, v in enumerate(values[1:], 1):
                if v.startswith("-") and not v.startswith("--") and "c" in v[1:] and i + 1 < len(nodes):
                    script = nodes[i + 1]
                    offs = self.offsets(script) if isinstance(script, yaml.ScalarNode) else None
                    if offs is not None:
                        scan = scan_shell(self.source, script.value, offs, context=context, group=group,
                                          inherited_env=env, image=image)
                        self._add(scan.launches, env_from)
                        self.pf.env.extend(scan.env)
                    return
        last_seq = args if isinstance(args, yaml.SequenceNode) and args.value else command
        site = append_site(self.source, self.text, last_seq) if isinstance(last_seq, yaml.SequenceNode) else None
        det = detect(values)
        if det is not None:
            launch = Launch(kind=det.kind, file=self.source,
                            span=argv[det.start].span or (0, 0), argv=argv[det.start:],
                            options_start=det.options_start - det.start, context=context, group=group,
                            env=list(env), image=image, program=det.program, append_site=site)
            if site is None:
                launch.not_editable = "its argv list ends in a form vllmlint does not edit"
            self._add([launch], env_from)
        elif command is None and (is_vllm_image(image) or _looks_like_vllm_args(values)):
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
            from ..model import AppendSite
            site = AppendSite(self.source, argv[-1].span[1], " {}")
        launch.append_site = site
        if site is None:
            launch.not_editable = "the arguments come from the image or at run time"
        self._add([launch], env_from)

    def _add(self, launches: list[Launch], env_from: list[str]) -> None:
        for launch in launches:
            launch.env_from = list(env_from)
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
            name = scalar(key) or "?"
            self._anchor = (key.start_mark.index, key.end_mark.index)
            env = self.env_entries(service, f"compose service {name} environment")
            entrypoint, command = get(service, "entrypoint"), get(service, "command")
            image = scalar(get(service, "image"))
            context, group = f"service {name}", f"{self.source.display}#{index}:{name}"
            if entrypoint is not None:
                if isinstance(entrypoint, yaml.ScalarNode) and isinstance(command, yaml.SequenceNode):
                    # `entrypoint: vllm serve` + command list: argv is both
                    offs = self.offsets(entrypoint)
                    words = split_words(self.source, entrypoint.value, offs) if offs else []
                    self._entry_plus_args(words, command, image, env, context, group)
                else:
                    self.launch_from(entrypoint, command, image, env, context, group, [])
            else:
                # compose `command` replaces the image's CMD: it is the args of its entrypoint
                self.launch_from(None, command, image, env, context, group, [])

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
        meta_name = scalar(get(get(doc, "metadata") or doc, "name")) or ""
        if kind == "ConfigMap":
            self._configmap(doc, meta_name)
            return
        owner = f"{kind}/{meta_name}" if kind else (meta_name or f"document {index + 1}")
        seen: set[int] = set()
        stack = [doc]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.MappingNode):
                if self._is_container(node):
                    self._container(node, owner, index)
                stack.extend(v for _, v in reversed(node.value))
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(reversed(node.value))

    @staticmethod
    def _is_container(node: yaml.MappingNode) -> bool:
        keys = {k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)}
        if "command" in keys or "args" in keys:
            return True
        return "image" in keys and ("name" in keys or "env" in keys) and isinstance(get(node, "image"), yaml.ScalarNode)

    def _container(self, node: yaml.MappingNode, owner: str, index: int) -> None:
        name = scalar(get(node, "name")) or "?"
        image = scalar(get(node, "image"))
        self._anchor = (node.start_mark.index, node.start_mark.index)
        context, group = f"container {name} ({owner})", f"{self.source.display}#{index}:{owner}:{name}"
        env = self.env_entries(node, f"env of container {name}")
        env_from = []
        for item in self.argv_nodes(get(node, "envFrom")):
            ref = scalar(get(get(item, "configMapRef") or item, "name"))
            if ref:
                env_from.append(ref)
        self.launch_from(get(node, "command"), get(node, "args"), image, env, context, group, env_from)

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


def _looks_like_vllm_args(values: list[str]) -> bool:
    """Args-only containers of images that wrap vLLM (llm-d, KServe): known vLLM options."""
    markers = {"--kv-transfer-config", "--kv_transfer_config", "--tensor-parallel-size", "--max-model-len",
               "--gpu-memory-utilization", "--served-model-name", "--enable-prefix-caching",
               "--enforce-eager", "--max-num-seqs", "--data-parallel-size", "--enable-scale-out",
               "--tokens-only"}
    return sum(v.split("=", 1)[0] in markers for v in values) >= 1


def parse_yaml(source: SourceFile) -> ParsedFile:
    return YamlParser(source).parse()
