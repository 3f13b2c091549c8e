"""`vllmlint migrate --to X`: every safe fix for the upgrade, plus image tags and pins bumped."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .model import Edit, SourceFile
from .project import Project
from .versions import fmt, parse_version

IMAGE_TAG_RE = re.compile(
    r"(?P<image>(?<![\w./-])(?:[\w.\-]+(?::\d+)?/)?vllm/vllm-openai(?:-[a-z0-9]+)?)"
    r":(?P<tag>v?\d+\.\d+\.\d+(?:\.post\d+)?)(?P<digest>@sha256:[0-9a-f]+)?")
KUSTOMIZE_TAG_RE = re.compile(r"(?m)^(?P<lead>\s*newTag:\s*[\"']?)(?P<tag>v?\d+\.\d+\.\d+(?:\.post\d+)?)")
PIN_RE = re.compile(r"(?<![\w./-])(?P<name>vllm(?:\[[\w,\s-]+\])?)\s*==\s*(?P<ver>\d+\.\d+\.\d+(?:\.post\d+)?)")


@dataclass
class Bump:
    file: SourceFile
    line: int
    old: str
    new: str
    what: str              # "image tag" | "pin"
    edit: Edit | None      # None: left for a human (digest-pinned image)
    why_not: str = ""


def find_bumps(project: Project, target: tuple[int, int, int]) -> list[Bump]:
    bumps: list[Bump] = []
    for source in project.sources:
        text = source.text
        for m in IMAGE_TAG_RE.finditer(text):
            tag = m.group("tag")
            if parse_version(tag) >= target:
                continue
            new_tag = ("v" if tag.startswith("v") else "") + fmt(target)
            line = source.line_col(m.start())[0]
            old = m.group(0)
            if m.group("digest"):
                bumps.append(Bump(source, line, old, f"{m.group('image')}:{new_tag}", "image tag", None,
                                  "pinned by digest: pick the new digest by hand"))
                continue
            bumps.append(Bump(source, line, old, f"{m.group('image')}:{new_tag}", "image tag",
                              Edit(source, m.start("tag"), m.end("tag"), new_tag)))
        if source.kind in ("yaml", "k8s", "compose") and re.search(r"newName:\s*[\"']?(?:[\w.\-]+/)?vllm/vllm-openai", text):
            for m in KUSTOMIZE_TAG_RE.finditer(text):
                tag = m.group("tag")
                if parse_version(tag) < target:
                    new_tag = ("v" if tag.startswith("v") else "") + fmt(target)
                    bumps.append(Bump(source, source.line_col(m.start("tag"))[0], tag, new_tag, "image tag",
                                      Edit(source, m.start("tag"), m.end("tag"), new_tag)))
        if source.kind in ("dockerfile", "requirements"):
            for m in PIN_RE.finditer(text):
                ver = m.group("ver")
                if parse_version(ver) < target:
                    bumps.append(Bump(source, source.line_col(m.start())[0], m.group(0),
                                      f"{m.group('name')}=={fmt(target)}", "pin",
                                      Edit(source, m.start("ver"), m.end("ver"), fmt(target))))
    return bumps
