"""The launches of one container or service: its command and args, or args lists alone.

Part of the YAML front end (yamlfile.py's `YamlParser` mixes it in): a command/args pair
(`sh -c` scripts and string commands read as shell), args alone under a vLLM image's
entrypoint (`vllm serve`), chart values' args lists (`extraArgs`), and flags passed in an
env var (`VLLM_ADDITIONAL_ARGS`).
"""
from __future__ import annotations

import yaml

from . import crds
from .detect import (SHELLS, UNKNOWN, basename, copied_server, detect, image_family, is_vllm_image,
                     repository_unknown, serve_kind)
from ..knowledge.images import is_vllm_image as is_vllm_build     # any build (rocm/vllm-dev): its release
from ..knowledge.launchers import other_engine as _engine_of
from ..model.launch import KUBEAI_VIA, AppendSite, Arg, EnvEntry, Launch, normalize_flag
from .yaml_edit import append_site
from .yaml_source import get, scalar
from .embedded import scan_shell, split_words     # shell in YAML: read through the door


class ContainerArgv:
    """Command and args of the containers and services a `YamlParser` reads."""

    def other_engine(self) -> str | None:
        """The other engine the current document's `command:` runs (worked out once per document)."""
        if self._other_engine is False:
            self._other_engine = _other_engine_command(self._engine_doc)
        return self._other_engine

    # -- argv ---------------------------------------------------------------
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
                    image is None and self.other_engine()))):
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

    def _args_list(self, key: str, seq: yaml.SequenceNode, owner: str, index: int,
                   parent: yaml.Node | None = None, above: yaml.Node | None = None) -> None:
        """Chart values and recipes keep vLLM's flags in a list (`extraArgs`, `vllm_args`,
        `server_cmd_template`) that a template later puts after `vllm serve`. Beside a vLLM
        image (`image: {repository: vllm/vllm-openai, tag: v0.29.0}`) any args list is one,
        with the image's release and the `env` list next to it. A list that reads as vLLM's
        flags one mapping further down (`{repository: vllm/vllm-openai, tag: v0.8.4, vllmConfig:
        {extraArgs: [...]}}`, production-stack's modelSpec written as a bare list) gets the
        image of `above`, the mapping over its own: its release is that image's, not unknown
        (found as a user on oginskis/agile-vllm-stack: migrate removed a flag 0.8.4 reads)."""
        from .helm_values import image_beside

        argv = [self.arg(n) for n in seq.value if isinstance(n, yaml.ScalarNode)]
        image = image_beside(parent) if parent is not None and not self.templated else None
        engine = crds.engine_field(self, parent) if key == "args" and parent is not None else None
        if engine == "other":
            return              # a KubeAI catalogue entry of another engine: never vLLM
        looks = image or engine == "vllm" or _looks_like_vllm_args([a.value for a in argv])
        if not argv or not looks:
            return
        if image is None and isinstance(above, yaml.MappingNode) and self._written_plainly(above):
            image = image_beside(above)         # only a release for a list already read as vLLM's
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

    def _written_plainly(self, mapping: yaml.MappingNode) -> bool:
        """No template action (`{{ ... }}`, masked before composing) inside the mapping's
        `image`, `repository` or `tag` values: what they read is what the file says."""
        nodes = [n for n in (get(mapping, k) for k in ("image", "repository", "tag")) if n is not None]
        return not any(s < n.end_mark.index and n.start_mark.index < e
                       for n in nodes for s, e in self.templated)

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


def _image_may_be_vllm(image: str | None) -> bool:
    """An args-only container is read by its flags only when its image may be a vLLM build: none
    given, chosen at run time (`{{ .Values.image }}`, `$IMAGE`), or one that names vLLM
    (`registry.corp/ml/vllm-custom`). A named image of something else (an inference simulator,
    SGLang, TGI) takes flags alike and is never vLLM because of them."""
    if not image:
        return True
    known = image_family(image).replace(UNKNOWN, "x")      # `${REGISTRY:-rocm}/vllm-dev:...` -> rocm/vllm-dev
    if is_vllm_build(known) and not is_vllm_image(image):
        return False        # a vLLM build whose entrypoint is a shell (`rocm/vllm-dev`): args are its command
    # chosen at run time only when its name is: a variable registry or tag leaves the name to
    # decide (`${REGISTRY:-opea}/tgi:${TAG}`, `lmsysorg/sglang:${TAG}` are never vLLM's)
    return repository_unknown(image) or "vllm" in known.lower()


def _looks_like_vllm_args(values: list[str]) -> bool:
    """Args-only containers of images that wrap vLLM (llm-d, KServe), chart `extraArgs`."""
    return any(normalize_flag(v.split("=", 1)[0]) in VLLM_MARKER_FLAGS for v in values if v.startswith("--"))


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
                    found = _engine_of(" ".join(words))
                    if found:
                        return found
                stack.append(v)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return None
