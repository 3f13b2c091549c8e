"""YAML front end: Kubernetes manifests (any kind that holds containers, kustomize patches,
CRDs, Helm templates after masking) and docker compose files.

PyYAML composes nodes (never Python objects) whose marks are character offsets, so every argv
token and env entry keeps its exact span.

The reader is split by what it reads: yaml_nodes (scalars, env entries, template actions),
yaml_argv (a container's command and args, args lists), yaml_compose (compose services),
yaml_k8s (Kubernetes resources, loose scripts); `YamlParser` mixes them and reads the
documents.
"""
from __future__ import annotations

import re

import yaml

from . import configmap_scripts, crds, templates
from ..model.launch import ParsedFile, ParseError, SourceFile
from .yaml_argv import ContainerArgv
from .yaml_compose import ComposeServices
from .yaml_edit import content_end as yaml_edit_end
from .yaml_k8s import KubernetesResources
from .yaml_nodes import YamlNodes
from .yaml_source import YamlError, compose_all, get, iter_nodes, mask_templates, scalar
from ..model.lazyre import lazy_re
from . import embedded


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


def statements_masked(source: SourceFile) -> tuple[str, list[tuple[int, int]], tuple | None]:
    """(text, masked spans, (text, spans) when a launch's words are restored after parsing) with
    a template's statements blanked by its engine (Jinja by the file name, Terraform, brace
    formats); Go/Helm actions are `mask_templates`'s. Offsets stay those of the source."""
    text = source.text
    if JINJA_NAME_RE().search(source.path.name):
        text, jinja = _mask_jinja_statements(text)
        return text, jinja, None
    if templates.engine_of(source.path.name) == "terraform" and ("${" in text or "%{" in text):
        text, spans = templates.mask(text, "terraform", "yaml")     # `%{ for }` blank, `${x}` a placeholder
        return text, spans, (text, spans)
    if templates.template_engine(source.path.name, text) == "format":
        text, spans = templates.mask(text, "format", "yaml")        # `{port}` a placeholder, `{{` a brace
        return text, spans, (text, spans)
    return text, [], None


def masked_yaml(source: SourceFile) -> str:
    """The text the YAML front end composes (statements blanked, actions placeholders)."""
    return mask_templates(statements_masked(source)[0])[0]


class YamlParser(KubernetesResources, ComposeServices, ContainerArgv, YamlNodes):
    def __init__(self, source: SourceFile):
        self.source = source
        self.text = source.text
        self.pf = ParsedFile(source)
        self.templated: list[tuple[int, int]] = []
        self._ray = False
        # the other engine the current document's `command:` runs (yaml_k8s sets the document and
        # False: not looked at yet; ContainerArgv.other_engine works it out once, when asked)
        self._engine_doc = None
        self._other_engine: str | None | bool = None
        self.containers: dict[int, tuple] = {}     # id(container node) -> (image, env): ConfigMap scripts

    def parse(self) -> ParsedFile:
        text, jinja, terraform = statements_masked(self.source)
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
        self.vllm_runtimes = crds.vllm_runtimes(docs, masked)
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
            # the engine the file is written for: a `.yaml.j2` is Jinja's ({% if %} arms kept
            # side by side need not be YAML), the rest Helm's or Go's
            engine = "Jinja template" if JINJA_NAME_RE().search(self.source.path.name) else "Helm/Go template"
            raise ParseError(first_error.line, f"{engine}: {first_error.message}")
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


def parse_yaml(source: SourceFile) -> ParsedFile:
    return YamlParser(source).parse()


def _embedded(view: SourceFile, start: int, end: int, inherited) -> ParsedFile:
    """yaml written inside another file (a heredoc, a ConfigMap entry): read in place (parsers/embedded.py)."""
    view.kind = "k8s"
    return parse_yaml(view)


embedded.register("yaml", _embedded)
