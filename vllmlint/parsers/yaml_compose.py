"""docker compose files: each service's entrypoint and command, env and GPUs.

Part of the YAML front end (yamlfile.py's `YamlParser` mixes it in).
"""
from __future__ import annotations

import yaml

from ..model.launch import Arg, ComposeOverride, Launch
from .detect import detect
from .yaml_edit import append_site
from .yaml_source import get, scalar
from .embedded import scan_shell, split_words     # shell in YAML: read through the door


# the files `docker compose` reads with no `-f` (compose.yaml first; the others for backward
# compatibility), and the override it merges into them when one lies beside them
COMPOSE_DEFAULT_NAMES = frozenset({"compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"})
COMPOSE_OVERRIDE_NAMES = frozenset({"compose.override.yaml", "compose.override.yml",
                                    "docker-compose.override.yaml", "docker-compose.override.yml"})
# the keys of a service that only says how its image is built (OPEA's docker_image_build/build.yaml:
# `build:` + `image:`, for `docker compose -f build.yaml build`): nothing in it runs the image
BUILD_ONLY_KEYS = frozenset({"build", "image", "extends", "container_name", "platform", "pull_policy",
                             "profiles", "labels"})


class ComposeServices:
    """The services of a compose file a `YamlParser` reads."""

    # -- compose ------------------------------------------------------------
    def _compose(self, doc: yaml.MappingNode, index: int) -> None:
        services = get(doc, "services")
        assert isinstance(services, yaml.MappingNode)
        file_name = self.source.path.name
        for key, service in services.value:
            if not isinstance(service, yaml.MappingNode):
                continue
            name = self.plain(key) or "?"
            first = len(self.pf.launches)
            if file_name in COMPOSE_OVERRIDE_NAMES and get(service, "command") is None \
                    and get(service, "entrypoint") is None:
                # compose never runs an override alone: a service it only adds to (env, an
                # image) starts nothing of its own; it is merged into the compose file's
                env = self.env_entries(service, f"compose service {name} environment")
            else:
                env = self._compose_service(key, service, name, index)
            if file_name in COMPOSE_DEFAULT_NAMES:
                for launch in self.pf.launches[first:]:
                    launch.compose_service = name
            elif file_name in COMPOSE_OVERRIDE_NAMES and self.plain(key):
                self.pf.compose_overrides[name] = ComposeOverride(env, self.plain(get(service, "image")),
                                                                  key.start_mark.line + 1)

    def _compose_service(self, key, service: yaml.MappingNode, name: str, index: int) -> list:
        """Read one service (its launch, if it starts one); its environment entries."""
        self._anchor = (key.start_mark.index, key.end_mark.index)
        self._where = {"hostnames": [h for h in (name, scalar(get(service, "container_name")),
                                                 scalar(get(service, "hostname"))) if h]}
        self._where.update(_compose_gpus(service))
        env = self.env_entries(service, f"compose service {name} environment")
        entrypoint, command = get(service, "entrypoint"), get(service, "command")
        image = self.plain(get(service, "image"))
        if get(service, "build") is not None and all(self.plain(k) in BUILD_ONLY_KEYS for k, _ in service.value):
            return env          # a build target: its image is built, not started with arguments here
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
        return env

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
