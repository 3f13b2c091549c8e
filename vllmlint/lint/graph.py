"""The deployment graph: which launches belong together and who calls whom, across files.

Nodes are launches. Edges come from
  * routers and proxies: `--prefiller-hosts/--decoder-hosts` (vLLM's reference proxies),
    `--prefill host:port`, and URLs in their arguments;
  * anything that calls a vLLM server: URLs `http://host:port/path` anywhere in the tree (args,
    env, embedded config, probes), resolved by host name (compose service, Kubernetes Service ->
    selector -> pod labels, workload name) and, for localhost, by port.
A deployment is a connected component. P/D pairs in a tree with no visible router are paired
within their folder, so the P/D consistency checks still run.
"""
from __future__ import annotations

import re
from ..model.record import field, record
from pathlib import PurePosixPath

from ..parsers.detect import REFERENCE_PROXIES, VALIDATING_ROUTERS
from ..model.kvconfig import KVConfig, kv_config
from ..model.launch import PROXY, Launch, SourceFile, Span
from .project import Project
from ..parsers.validating import unguarded, validating_reason

URL_RE = re.compile(r"https?://(?P<host>[A-Za-z0-9_.\-\[\]:]+?)(?::(?P<port>\d{1,5}))?(?P<path>/[A-Za-z0-9_./\-]*)?(?=[\s\"'`,;)}\]|]|$)")
LOCAL = {"localhost", "127.0.0.1", "0.0.0.0", "[::1]", "::1"}
SCALE_OUT_RE = re.compile(r"^/(?:v1/(?:chat/completions|completions|messages|responses)/render"
                          r"|v1/(?:chat/completions|completions)/derender|inference/v1/generate"
                          r"|v2/(?:chat/)?render|render|derender)/?$")
ROLE_PRODUCER, ROLE_CONSUMER, ROLE_BOTH = "kv_producer", "kv_consumer", "kv_both"


@record
class Call:
    """Something in the tree that calls a server: a URL written in a file."""

    file: SourceFile
    span: Span
    host: str
    port: int | None
    path: str
    targets: list[Launch] = field(default_factory=list)

    @property
    def scale_out(self) -> bool:
        return bool(SCALE_OUT_RE.match(self.path or ""))

    @property
    def where(self) -> str:
        return f"{self.file.display}:{self.file.line_col(self.span[0])[0]}"


@record
class ProxyInfo:
    launch: Launch
    flavour: str                  # reference-multiturn | reference-demo | reference-toy | other, or for a
                                  # Python proxy app read from source: custom-multiturn | custom
    prefill: list[Launch]
    decode: list[Launch]
    resolved: bool                # its hosts were all found in the tree
    validating: str = ""          # why it checks token-id continuation (validating.py); "" if not


class Graph:
    def __init__(self, project: Project):
        self.project = project
        self.launches = project.launches
        self.kv: dict[int, KVConfig | None] = {id(l): kv_config(l) for l in self.launches}
        self._names: dict[str, list[Launch]] = {}
        self._index_names()
        self.calls = self._find_calls()
        self.proxies = [self._proxy(l) for l in self.launches if l.kind == PROXY]
        self._adopt_apps()
        self._parent = {id(l): id(l) for l in self.launches}
        self._link()

    # -- names -------------------------------------------------------------------
    @staticmethod
    def _scope(source: SourceFile | None) -> str:
        """Compose service names resolve only inside their own project (one folder); Kubernetes
        names are cluster-wide."""
        return str(source.path.parent) + "|" if source is not None and source.kind == "compose" else ""

    def _index_names(self) -> None:
        self._by_file: dict[int, list[Launch]] = {}
        for launch in self.launches:
            if launch.kind != PROXY:
                self._by_file.setdefault(id(launch.file), []).append(launch)
            for name in launch.hostnames:
                self._names.setdefault(self._scope(launch.file) + name.lower(), []).append(launch)
        by_label: dict[tuple[str, str], list[Launch]] = {}
        for launch in self.launches:
            for pair in launch.labels.items():
                by_label.setdefault(pair, []).append(launch)
        for pf in self.project.files:
            for svc in pf.services:
                if not svc.selector:
                    continue
                pairs = sorted(svc.selector.items(), key=lambda kv: len(by_label.get(kv, ())))
                hits = [l for l in by_label.get(pairs[0], [])
                        if all(l.labels.get(k) == v for k, v in pairs[1:])]
                self._names.setdefault(svc.name.lower(), []).extend(hits)

    def resolve(self, host: str, port: int | None, near: SourceFile | None) -> list[Launch]:
        host = host.lower().strip("[]")
        if host in LOCAL or host == "::1":
            found = list(self._by_file.get(id(near), [])) if near is not None else []
            if port is not None:
                found = [l for l in found if l.port == port]
            return found
        name = host.split(".")[0]        # `svc.namespace.svc.cluster.local` -> `svc`
        scope = str(near.path.parent) + "|" if near is not None else ""
        found = [l for l in (self._names.get(scope + host) or self._names.get(scope + name)
                             or self._names.get(host) or self._names.get(name) or []) if l.kind != PROXY]
        if port is not None and len(found) > 1:
            same_port = [l for l in found if l.port == port]
            found = same_port or found
        return found

    # -- calls -------------------------------------------------------------------------
    def _find_calls(self) -> list[Call]:
        calls = []
        for source in self.project.sources:
            for m in URL_RE.finditer(source.text):
                host = m.group("host")
                if "$" in host or "{" in host:
                    continue
                port = int(m.group("port")) if m.group("port") else None
                call = Call(source, (m.start(), m.end()), host, port, m.group("path") or "")
                call.targets = self.resolve(host, port, source)
                calls.append(call)
        return calls

    # -- proxies -------------------------------------------------------------------------
    def _proxy(self, launch: Launch) -> ProxyInfo:
        # a proxy app read from its own source says what it does (parsers/pyproxy.py); a launch
        # of a known program is that program
        flavour = (VALIDATING_ROUTERS.get(launch.program) or launch.proxy_flavour
                   or REFERENCE_PROXIES.get(launch.program.rsplit("/", 1)[-1], "other"))
        if flavour == "validating" and unguarded(launch):
            flavour = "vllmlint-unguarded"        # `vllmlint router --policy unguarded` (replay only)
        sides: dict[str, dict[str, list[str]]] = {"prefill": {"hosts": [], "ports": []},
                                                  "decode": {"hosts": [], "ports": []}}
        opts = [a.value for a in launch.argv[launch.options_start:]]
        current: list[str] | None = None
        for value in opts:
            if value.startswith("--"):
                name, _, inline = value[2:].partition("=")
                side = "prefill" if "prefill" in name else "decode" if "decode" in name else None
                kind = "ports" if "port" in name else "hosts"
                current = sides[side][kind] if side else None
                if current is not None and inline:
                    current.extend(inline.replace(",", " ").split())
                continue
            if current is not None:
                current.extend(value.replace(",", " ").split())
        resolved = True
        targets: dict[str, list[Launch]] = {}
        for side, spec in sides.items():
            found: list[Launch] = []
            hosts, ports = spec["hosts"], spec["ports"]
            for i, host in enumerate(hosts):
                port_text = ports[i] if i < len(ports) else (ports[-1] if ports else None)
                url = re.match(r"^https?://([^/?#]+)", host)       # `--prefill http://p:8100/v1`
                if url:
                    host = url.group(1)
                if ":" in host and not host.startswith("["):
                    host, _, port_text = host.rpartition(":")
                port = int(port_text) if port_text and port_text.isdigit() else None
                hits = self.resolve(host, port, launch.file)
                resolved = resolved and bool(hits)
                found.extend(hits)
            if not hosts:
                resolved = False
            targets[side] = found
        return ProxyInfo(launch, flavour, targets["prefill"], targets["decode"], resolved, validating_reason(launch))

    def _adopt_apps(self) -> None:
        """A proxy app read from its source (parsers/pyproxy.py) started by a command in the
        tree (`python proxy/pd_proxy.py --prefill http://p:8100 ...`): the app says what the
        proxy does, the command where its servers are. The app takes the command's resolved
        servers; the command is marked as running it (`runs-app`), so the proxy is judged once."""
        apps = [p for p in self.proxies if p.launch.proxy_flavour]
        if not apps:
            return
        for info in self.proxies:
            launch = info.launch
            if launch.proxy_flavour or not launch.argv or not launch.argv[0].value.endswith(".py"):
                continue
            script = launch.argv[0].value
            here = PurePosixPath(launch.file.display.replace("\\", "/")).parent
            want = str(here / script) if not script.startswith("/") else script
            exact = [a for a in apps if _norm(a.launch.file.display) == _norm(want)]
            named = [a for a in apps if PurePosixPath(a.launch.file.display).name == PurePosixPath(script).name]
            match = exact or (named if len(named) == 1 else [])
            if len(match) != 1:
                continue
            app = match[0]
            if info.resolved or not app.resolved:
                app.prefill, app.decode, app.resolved = info.prefill, info.decode, info.resolved
            info.flavour = "runs-app"

    # -- components ------------------------------------------------------------------------
    def _find(self, x: int) -> int:
        while self._parent[x] != x:
            self._parent[x] = self._parent[self._parent[x]]
            x = self._parent[x]
        return x

    def _union(self, a: Launch, b: Launch) -> None:
        self._parent[self._find(id(a))] = self._find(id(b))

    def _link(self) -> None:
        by_group: dict[str, Launch] = {}
        for launch in self.launches:
            if launch.group in by_group:
                self._union(launch, by_group[launch.group])
            by_group.setdefault(launch.group, launch)
        for proxy in self.proxies:
            for target in proxy.prefill + proxy.decode:
                self._union(proxy.launch, target)
        router_in: dict[int, Launch] = {}
        for launch in self.launches:
            if launch.kind == PROXY:
                router_in.setdefault(id(launch.file), launch)
        for call in self.calls:
            router = router_in.get(id(call.file))
            for target in call.targets if router else ():
                self._union(router, target)

    def deployments(self) -> list[list[Launch]]:
        groups: dict[int, list[Launch]] = {}
        for launch in self.launches:
            groups.setdefault(self._find(id(launch)), []).append(launch)
        return list(groups.values())

    # -- roles ---------------------------------------------------------------------------
    def role(self, launch: Launch) -> str | None:
        cfg = self.kv.get(id(launch))
        return cfg.role if cfg else None

    def pd_pairs(self) -> list[tuple[list[Launch], list[Launch]]]:
        """Producers and consumers that serve together: per deployment; launches of a
        deployment with only one side are pooled per folder with others like them. Worked out
        once per graph (two rules ask, at every step of a migration)."""
        pairs = self.__dict__.get("_pairs")
        if pairs is None:
            pairs = self._pairs = self._pd_pairs()
        return pairs

    def _pd_pairs(self) -> list[tuple[list[Launch], list[Launch]]]:
        pairs = []
        pooled: dict[str, tuple[list[Launch], list[Launch]]] = {}
        for dep in self.deployments():
            prod = [l for l in dep if self.role(l) in (ROLE_PRODUCER, ROLE_BOTH)]
            cons = [l for l in dep if self.role(l) in (ROLE_CONSUMER, ROLE_BOTH)]
            if prod and cons and any(self.role(l) != ROLE_BOTH for l in prod + cons):
                pairs.append((prod, cons))
            elif (prod or cons) and not any(l.kind == PROXY for l in dep):
                folder = str(PurePosixPath((prod or cons)[0].file.display).parent)
                p, c = pooled.setdefault(folder, ([], []))
                p.extend(x for x in prod if self.role(x) == ROLE_PRODUCER)
                c.extend(x for x in cons if self.role(x) == ROLE_CONSUMER)
        pairs.extend((p, c) for p, c in pooled.values() if p and c)
        return pairs


def _norm(path: str) -> str:
    """`./a/../b/x.py` -> `b/x.py` (display paths, no file system)."""
    parts: list[str] = []
    for part in path.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == ".." and parts and parts[-1] != "..":
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts)


def graph_of(project: Project) -> Graph:
    """One graph per project, shared by the rules of a run (engine.run_rules drops it after
    them: project <-> graph is a cycle, and the collector is off for lint commands)."""
    cached = getattr(project, "_graph", None)
    if cached is None:
        cached = Graph(project)
        project._graph = cached
    return cached
