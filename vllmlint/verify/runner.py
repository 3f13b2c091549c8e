"""`vllmlint verify`: bring the deployment up on a real vLLM and prove that it serves.

Per deployment (a connected part of the deployment graph; launches that one file calls together
count as one): start every vLLM server with its adapted argv, wait for /health, then probe what
the config implies - a real completion and chat request, the scale-out chain where something
calls it (404 where it must be off), a P/D request through the router with decode's transfer
evidence. Deployments run one after another; each one's processes are stopped before the next.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..lint.discovery import discover
from ..lint.graph import ROLE_BOTH, ROLE_CONSUMER, ROLE_PRODUCER, Graph
from ..model.launch import API_SERVER, PROXY, RENDER, SERVE, TOKENS_ONLY, Launch
from ..lint.project import load
from ..lint.report import mask_argv
from . import client as http, logs
from .adapt import ENGINE_KINDS, SERVER_KINDS, ServerPlan, UnitContext, adapt, launch_name
from .locate import NotFound, cache_root, find_vllm, python_of, tiny_model, tiny_model_ready
from .procs import Proc, Supervisor, free_port
from .router import BuiltinRouter, find_script, proxy_argv, wait_port

EXIT_OK, EXIT_PROBE, EXIT_START = 0, 1, 2
PORT_CLASH = "Address already in use"
PORT_CLASH_RESTARTS = 2   # restarts of a server that lost a race for an internal port
PD_TRIES = 3              # P/D probe attempts when NIXL's first handshake is missed
PD_PROMPT = " ".join(["the quick brown fox jumps over the lazy dog"] * 30)   # > 128 tokens (CPU block)
RENDER_PATHS = ("/render", "/derender")
GENERATE_PATH = "/inference/v1/generate"


@dataclass
class Probe:
    name: str
    ok: bool
    expect: str
    status: int | None = None
    evidence: str = ""
    seconds: float | None = None
    target: str | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "expect": self.expect, "status": self.status,
                "evidence": self.evidence, "seconds": None if self.seconds is None else round(self.seconds, 3),
                "target": self.target}


@dataclass
class ServerResult:
    plan: ServerPlan
    proc: Proc | None = None
    healthy_s: float | None = None
    peak_rss_mb: float | None = None
    error_line: str | None = None
    probes: list[Probe] = field(default_factory=list)
    model_name: str | None = None
    port_clashes: int = 0            # restarts after losing a race for an internal port

    def as_dict(self) -> dict:
        p = self.plan
        return {"name": p.name, "kind": p.kind, "path": p.launch.file.display, "line": p.launch.line,
                "context": p.launch.context, "argv": p.masked_argv(), "env": p.masked_env(),
                "adaptations": p.adaptations, "port": p.port, "original_port": p.original_port,
                "kv_role": p.kv_role, "connector": p.connector,
                "healthy_s": None if self.healthy_s is None else round(self.healthy_s, 1),
                "peak_rss_mb": self.peak_rss_mb, "error_line": self.error_line,
                "log": str(self.proc.log_path) if self.proc else None,
                "probes": [x.as_dict() for x in self.probes]}


@dataclass
class UnitResult:
    name: str
    servers: list[ServerResult] = field(default_factory=list)
    router: dict | None = None
    probes: list[Probe] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    started: bool = True
    kv_transfer: dict | None = None

    @property
    def all_probes(self) -> list[Probe]:
        return [p for s in self.servers for p in s.probes] + self.probes

    def as_dict(self) -> dict:
        return {"name": self.name, "started": self.started, "skipped": self.skipped,
                "servers": [s.as_dict() for s in self.servers], "router": self.router,
                "probes": [p.as_dict() for p in self.probes], "kv_transfer": self.kv_transfer}


@dataclass
class Outcome:
    vllm: str | None = None
    vllm_version: str | None = None
    model: str | None = None
    model_built_s: float | None = None
    units: list[UnitResult] = field(default_factory=list)
    error: str | None = None          # nothing could be verified (no vLLM, no launch, ...)
    notes: list[str] = field(default_factory=list)
    workdir: str | None = None
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        if self.error or any(not u.started for u in self.units):
            return EXIT_START
        if any(not p.ok for u in self.units for p in u.all_probes):
            return EXIT_PROBE
        return EXIT_OK

    def as_dict(self) -> dict:
        return {"vllm": self.vllm, "vllm_version": self.vllm_version, "model": self.model,
                "model_built_s": self.model_built_s, "exit_code": self.exit_code, "error": self.error,
                "notes": self.notes, "workdir": self.workdir, "seconds": round(self.seconds, 1),
                "units": [u.as_dict() for u in self.units]}


# -- planning ------------------------------------------------------------------------------
class Units:
    """Launches grouped into what has to run together."""

    def __init__(self, graph: Graph):
        self.graph = graph
        launches = graph.launches
        parent = {id(l): id(l) for l in launches}

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(a: Launch, b: Launch) -> None:
            parent[find(id(a))] = find(id(b))

        for dep in graph.deployments():
            for other in dep[1:]:
                union(dep[0], other)
        by_file: dict[int, list[Launch]] = {}
        for call in graph.calls:
            by_file.setdefault(id(call.file), []).extend(call.targets)
        for targets in by_file.values():
            for other in targets[1:]:
                union(targets[0], other)
        groups: dict[int, list[Launch]] = {}
        for l in launches:
            groups.setdefault(find(id(l)), []).append(l)
        self.groups = [g for g in groups.values()]


def scale_out_calls(graph: Graph, launch: Launch) -> list[tuple[str, str]]:
    """(path, where) of each scale-out URL in the tree that reaches `launch`."""
    return [(c.path, c.where) for c in graph.calls if c.scale_out and launch in c.targets]


def scale_out_off_status(version: str | None) -> int | None:
    """What a scale-out route answers on a server that does not serve them: None below 0.30 (every
    `vllm serve` registered them), 404 on 0.30/0.31 (not registered), 403 from 0.32."""
    parts = (version or "").split("+")[0].split(".")
    try:
        key = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        return 404
    if key < (0, 30):
        return None
    return 404 if key < (0, 32) else 403


def serves_scale_out(plan: ServerPlan) -> bool:
    if plan.kind in (RENDER, TOKENS_ONLY):
        return True
    return any(t.split("=", 1)[0].replace("_", "-") == "--enable-scale-out" for t in plan.argv)


# -- running -------------------------------------------------------------------------------
class Verifier:
    def __init__(self, paths: list[str], vllm: str | None = None, model: str | None = None,
                 timeout: float = 300.0, keep: bool = False, workdir: str | None = None,
                 connector: str | None = None, echo=None):
        self.paths = paths or ["."]
        self.vllm_arg = vllm
        self.model_arg = model
        self.timeout = timeout
        self.keep = keep
        self.workdir_arg = workdir
        self.connector = connector
        self.echo = echo or (lambda s: None)

    def run(self) -> Outcome:
        start = time.monotonic()
        out = Outcome()
        try:
            self._run(out)
        finally:
            out.seconds = time.monotonic() - start
        return out

    def _run(self, out: Outcome) -> None:
        try:
            vllm = find_vllm(self.vllm_arg)
        except NotFound as err:
            out.error = str(err)
            return
        out.vllm = str(vllm)
        out.vllm_version = vllm_version(vllm)
        candidates, missing = discover(self.paths)
        if missing:
            out.error = "; ".join(missing)
            return
        project = load(candidates)
        out.notes += [str(p) for p in project.problems]
        graph = Graph(project)
        units = Units(graph).groups
        if not any(l.kind in SERVER_KINDS for l in project.launches):
            out.error = "no vLLM server launch found in " + ", ".join(self.paths)
            return
        if self.model_arg:
            model = Path(self.model_arg).expanduser().absolute()
            if not (model / "config.json").is_file():
                out.error = f"--model {self.model_arg}: no config.json there"
                return
        else:
            t0 = time.monotonic()
            if not tiny_model_ready():
                self.echo("building the tiny model (first use; cached under "
                          f"{cache_root() / 'models'})...")
            try:
                model, built = tiny_model(vllm)
            except NotFound as err:
                out.error = str(err)
                return
            if built:
                out.model_built_s = round(time.monotonic() - t0, 1)
        out.model = str(model)
        root = Path(self.workdir_arg) if self.workdir_arg else Path(tempfile.mkdtemp(prefix="vllmlint-verify-"))
        root.mkdir(parents=True, exist_ok=True)
        out.workdir = str(root)
        sup = Supervisor(root)
        sup.install_signal_handlers()
        tree = Path(self.paths[0]).absolute()
        try:
            for n, group in enumerate(units, 1):
                if not any(l.kind in SERVER_KINDS for l in group):
                    continue
                ctx = UnitContext(workdir=root / f"unit{n}", model=model, vllm=vllm,
                                  python=python_of(vllm), cpu=is_cpu_build(out.vllm_version),
                                  connector=self.connector, vllm_version=out.vllm_version)
                ctx.workdir.mkdir(parents=True, exist_ok=True)
                unit = UnitRun(self, graph, group, ctx, sup, tree)
                out.units.append(unit.result)
                unit.run()
        finally:
            sup.close()
            if not self.keep and not self.workdir_arg:
                shutil.rmtree(root, ignore_errors=True)
                out.workdir = None


def vllm_version(vllm: Path) -> str | None:
    try:
        res = subprocess.run([python_of(vllm), "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None


def is_cpu_build(version: str | None) -> bool:
    if version and "+cpu" in version:
        return True
    return shutil.which("nvidia-smi") is None


class UnitRun:
    def __init__(self, verifier: Verifier, graph: Graph, group: list[Launch], ctx: UnitContext,
                 sup: Supervisor, tree: Path):
        self.v = verifier
        self.graph = graph
        self.group = group
        self.ctx = ctx
        self.sup = sup
        self.tree = tree
        first = group[0]
        self.result = UnitResult(name=f"{first.file.display}:{first.line} ({len(group)} launch(es))")
        self.timeout = verifier.timeout

    # -- orchestration ------------------------------------------------------------------
    def run(self) -> None:
        servers = [l for l in self.group if l.kind in SERVER_KINDS]
        proxies = [l for l in self.group if l.kind == PROXY]
        for l in self.group:
            if l.kind not in SERVER_KINDS and l.kind != PROXY:
                self.result.skipped.append(f"{launch_name(l)}: `{l.program}` is not a server")
        for l in servers:
            if self.graph.role(l) in (ROLE_CONSUMER, ROLE_BOTH):
                self.ctx.decoders.add(id(l))
        plans = []
        self.ctx.server_count = len(servers)
        for l in servers:
            port = free_port()
            self.ctx.ports[id(l)] = port
            plans.append(adapt(l, self.ctx, port))
        self.results = [ServerResult(p) for p in plans]
        self.result.servers = self.results
        try:
            if not self._start_all():
                return
            for r in self.results:
                self._server_probes(r)
            self._scale_out_probes()
            self._pd_probe(proxies)
        finally:
            for r in self.results:
                if r.proc is not None:
                    self.sup.stop(r.proc)
                    r.peak_rss_mb = round(r.proc.peak_rss_kb / 1024, 1)
            if getattr(self, "_router_proc", None) is not None:
                self.sup.stop(self._router_proc)
            if getattr(self, "_builtin", None) is not None:
                self._builtin.stop()

    def _start_all(self) -> bool:
        for r in self.results:
            self.v.echo(f"starting {r.plan.name}")
            try:
                r.proc = self.sup.start(f"{_slug(r.plan)}", r.plan.argv, r.plan.env, cwd=self.ctx.workdir)
            except OSError as err:
                r.error_line = f"could not start {r.plan.argv[0]}: {err.strerror or err}"
                self.result.started = False
        if not self.result.started:
            return False
        deadline = time.monotonic() + self.timeout
        pending = [r for r in self.results]
        while pending and time.monotonic() < deadline:
            for r in list(pending):
                assert r.proc is not None
                if r.port_clashes < PORT_CLASH_RESTARTS and PORT_CLASH in r.proc.log_text()[-20000:]:
                    # vLLM picks its internal ZMQ ports free-then-bind: two servers starting at once
                    # can pick the same one, and the loser hangs. Start it again (not a config fault).
                    r.port_clashes += 1
                    self.v.echo(f"  {r.plan.name}: a port taken by a server starting beside it; starting it again")
                    self.sup.stop(r.proc, grace=5.0)
                    r.proc = self.sup.start(f"{_slug(r.plan)}", r.plan.argv, r.plan.env, cwd=self.ctx.workdir)
                    continue
                if not r.proc.alive():
                    r.error_line = logs.error_line(r.proc.log_text()) + f" (exit {r.proc.popen.returncode})"
                    self.result.started = False
                    pending.remove(r)
                    continue
                reply = http.get(r.plan.base_url + "/health", timeout=2, headers=_auth(r.plan))
                if reply.status == 200:
                    r.healthy_s = time.monotonic() - r.proc.started
                    self.v.echo(f"  healthy in {r.healthy_s:.1f} s: {r.plan.name}")
                    r.probes.append(Probe("health", True, "GET /health -> 200", 200,
                                          f"healthy after {r.healthy_s:.1f} s", r.healthy_s, "/health"))
                    pending.remove(r)
            if not self.result.started:
                break
            time.sleep(1)
        for r in pending:
            if r.error_line is None and self.result.started:
                r.error_line = f"not healthy within {self.timeout:.0f} s; last log line: " + logs.error_line(
                    r.proc.log_text() if r.proc else "")
            elif r.error_line is None:
                r.error_line = "stopped: another server of this deployment failed to start"
        if pending:
            self.result.started = False
        return self.result.started

    # -- probes ----------------------------------------------------------------------------------
    def _model_name(self, r: ServerResult) -> str:
        if r.model_name:
            return r.model_name
        reply = http.get(r.plan.base_url + "/v1/models", timeout=10, headers=_auth(r.plan))
        data = (reply.json() or {}).get("data") if reply.status == 200 else None
        r.model_name = data[0]["id"] if data else (r.plan.served_name or str(self.ctx.model))
        return r.model_name

    def _server_probes(self, r: ServerResult) -> None:
        if r.plan.kind not in (SERVE, API_SERVER):
            if r.plan.kind == TOKENS_ONLY:
                r.probes.append(self._generate_probe(r, [1, 5, 9, 13, 17, 21], "generate (token ids)"))
            return
        name = self._model_name(r)
        t = min(self.timeout, 180)
        body = {"model": name, "prompt": "hello world", "max_tokens": 4, "temperature": 0, "ignore_eos": True}
        mark = len(r.proc.log_text()) if r.proc else 0
        reply = http.post(r.plan.base_url + "/v1/completions", body, t, _auth(r.plan))
        data = reply.json() if reply.status == 200 else None
        ok = bool(data and data.get("choices") and (data.get("usage") or {}).get("completion_tokens", 0) >= 1)
        ev = (f"{(data.get('usage') or {}).get('completion_tokens')} token(s): {data['choices'][0].get('text')!r}"
              if ok else self._failure_evidence(r, reply, mark))
        r.probes.append(Probe("completion", ok, "POST /v1/completions -> 200 with tokens", reply.status, ev,
                              reply.seconds, "/v1/completions"))
        body = {"model": name, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4,
                "temperature": 0, "ignore_eos": True}
        mark = len(r.proc.log_text()) if r.proc else 0
        reply = http.post(r.plan.base_url + "/v1/chat/completions", body, t, _auth(r.plan))
        data = reply.json() if reply.status == 200 else None
        ok = bool(data and data.get("choices") and (data.get("usage") or {}).get("completion_tokens", 0) >= 1)
        ev = (f"{(data.get('usage') or {}).get('completion_tokens')} token(s): "
              f"{data['choices'][0].get('message', {}).get('content')!r}" if ok else self._failure_evidence(r, reply, mark))
        r.probes.append(Probe("chat", ok, "POST /v1/chat/completions -> 200 with tokens", reply.status, ev,
                              reply.seconds, "/v1/chat/completions"))

    def _failure_evidence(self, r: ServerResult, reply: http.Reply, mark: int = 0) -> str:
        """The reply, and what the server's log said about it (it may have died on it)."""
        text = reply.snippet()
        if not r.proc:
            return text
        end = time.monotonic() + 3
        while r.proc.alive() and time.monotonic() < end and (reply.status == 0 or reply.status >= 500):
            time.sleep(0.2)
        log = r.proc.log_text()[mark:]
        if not r.proc.alive():
            return f"{text}; server exited: {logs.error_line(log)}"
        if logs.EXC_RE.search(log):
            return f"{text}; log: {logs.error_line(log)}"
        return text

    def _generate_probe(self, r: ServerResult, token_ids: list[int], name: str, called: str = "",
                        body: dict | None = None) -> Probe:
        model = self._model_name(r)
        body = body or {"model": model, "token_ids": token_ids,
                        "sampling_params": {"max_tokens": 4, "temperature": 0}}
        reply = http.post(r.plan.base_url + GENERATE_PATH, body, min(self.timeout, 180), _auth(r.plan))
        data = reply.json() if reply.status == 200 else None
        ok = bool(data and data.get("choices") and data["choices"][0].get("token_ids") is not None)
        ev = f"{len(data['choices'][0]['token_ids'])} token id(s)" if ok else self._off_evidence(r, reply)
        probe = Probe(name, ok, f"POST {GENERATE_PATH} -> 200", reply.status, ev + called, reply.seconds,
                      f"{r.plan.name} {GENERATE_PATH}")
        probe._data = data          # type: ignore[attr-defined]
        return probe

    def _off_evidence(self, r: ServerResult, reply: http.Reply) -> str:
        ev = reply.snippet()
        if reply.status == 404 and r.proc:
            line = logs.find_line(r.proc.log_text(), logs.SCALE_OUT_OFF)
            if line:
                ev += f"; log: {line}"
        return ev

    def _scale_out_probes(self) -> None:
        rs = self.results
        calls = {id(r): scale_out_calls(self.graph, r.plan.launch) for r in rs}
        expected = [r for r in rs if serves_scale_out(r.plan) or calls[id(r)]]
        off = scale_out_off_status(self.ctx.vllm_version)
        for r in rs:                       # must be off: a plain engine nothing calls for it
            if r in expected or r.plan.kind not in (SERVE, API_SERVER) or off is None:
                continue
            model = self._model_name(r)
            body = {"model": model, "messages": [{"role": "user", "content": "hello"}]}
            reply = http.post(r.plan.base_url + "/v1/chat/completions/render", body, 60, _auth(r.plan))
            ok = reply.status == off
            r.probes.append(Probe("scale-out off", ok, f"POST /v1/chat/completions/render -> {off} "
                                  "(no --enable-scale-out and nothing calls it)", reply.status,
                                  self._off_evidence(r, reply), reply.seconds, "/v1/chat/completions/render"))
        if not expected:
            return

        def pick(kinds, path_part) -> ServerResult | None:
            for r in expected:
                if r.plan.kind in kinds:
                    return r
            for r in expected:
                if any(path_part in p for p, _ in calls[id(r)]):
                    return r
            return None

        renderer = pick((RENDER,), "render") or pick((SERVE, API_SERVER), "render") or expected[0]
        engine = pick((TOKENS_ONLY,), "generate") or pick((SERVE, API_SERVER), "generate")
        if engine is None:
            engine = next((r for r in expected if r.plan.kind in ENGINE_KINDS), None)
        probes = self.result.probes

        def called(r: ServerResult, part: str) -> str:
            where = [w for p, w in calls[id(r)] if part in p]
            return f" (called by {', '.join(sorted(set(where)))})" if where else ""

        model = self._model_name(renderer)
        chat = {"model": model, "messages": [{"role": "user", "content": "hello world"}], "max_tokens": 4,
                "temperature": 0}
        reply = http.post(renderer.plan.base_url + "/v1/chat/completions/render", chat, 60, _auth(renderer.plan))
        gen_req = reply.json() if reply.status == 200 else None
        ok = bool(gen_req and gen_req.get("token_ids"))
        ev = (f"{len(gen_req['token_ids'])} prompt token id(s)" if ok else self._off_evidence(renderer, reply))
        probes.append(Probe("scale-out render", ok, "POST /v1/chat/completions/render -> 200 with token ids",
                            reply.status, ev + called(renderer, "/render"), reply.seconds,
                            f"{renderer.plan.name} /v1/chat/completions/render"))
        prompt_ids = (gen_req or {}).get("token_ids") or [1, 5, 9, 13]
        gen_resp = None
        if engine is not None:
            body = None
            if ok:
                body = dict(gen_req, model=self._model_name(engine))
            probe = self._generate_probe(engine, prompt_ids, "scale-out generate", called(engine, "generate"), body)
            probes.append(probe)
            gen_resp = getattr(probe, "_data", None)
        synthetic = {"request_id": "vllmlint-probe", "model": model, "created": int(time.time()),
                     "choices": [{"index": 0, "token_ids": [5, 9], "finish_reason": "length"}]}
        body = {"model": model, "generate_response": gen_resp or synthetic, "prompt_tokens": len(prompt_ids)}
        reply = http.post(renderer.plan.base_url + "/v1/chat/completions/derender", body, 60, _auth(renderer.plan))
        data = reply.json() if reply.status == 200 else None
        ok = bool(data and data.get("choices") and gen_resp is not None)
        if data and data.get("choices"):
            ev = f"message {data['choices'][0].get('message', {}).get('content')!r}"
            if gen_resp is None:
                ev += " (derendered a stand-in: generate failed)"
        else:
            ev = self._off_evidence(renderer, reply)
        probes.append(Probe("scale-out derender", ok, "POST /v1/chat/completions/derender -> 200 with a message",
                            reply.status, ev + called(renderer, "derender"), reply.seconds,
                            f"{renderer.plan.name} /v1/chat/completions/derender"))

    def _pd_probe(self, proxies: list[Launch]) -> None:
        rs = self.results
        prod = [r for r in rs if r.plan.kv_role in (ROLE_PRODUCER, ROLE_BOTH)]
        cons = [r for r in rs if r.plan.kv_role in (ROLE_CONSUMER, ROLE_BOTH)]
        if not prod or not cons or all(r.plan.kv_role == ROLE_BOTH for r in prod + cons):
            return
        prod = [r for r in prod if r.plan.kv_role == ROLE_PRODUCER] or prod
        cons = [r for r in cons if r.plan.kv_role == ROLE_CONSUMER] or cons
        url, router_info = self._router(proxies, prod, cons)
        self.result.router = router_info
        if url is None:
            self.result.probes.append(Probe("P/D request", False, "router starts", None,
                                            router_info.get("error", "router did not start")))
            return
        decode = cons[0]
        mark = len(decode.proc.log_text()) if decode.proc else 0
        stored_before = self._stored()
        prom_before = self._prometheus(decode)
        model = self._model_name(decode)
        body = {"model": model, "prompt": PD_PROMPT, "max_tokens": 8, "temperature": 0, "ignore_eos": True}
        retried = []
        for attempt in range(1, PD_TRIES + 1):
            log_mark = {r.plan.name: len(r.proc.log_text()) if r.proc else 0 for r in (prod[0], decode)}
            reply = http.post(url + "/v1/completions", body, self.timeout, _auth(decode.plan))
            if reply.status == 200 or attempt == PD_TRIES:
                break
            # NixlConnector gives the first handshake 5 s (zmq RCVTIMEO, fixed); an engine that
            # is still warming up on a busy host misses it, the request fails, and the next one
            # handshakes again. Retry only when a log says so; any other failure stands.
            missed = [line for r in (prod[0], decode) if r.proc
                      for line in [logs.handshake_failure(r.proc.log_text()[log_mark[r.plan.name]:])] if line]
            if not missed:
                break
            retried.append(f"try {attempt}: {reply.status}, {missed[0]}")
            time.sleep(2)
        data = reply.json() if reply.status == 200 else None
        ok = bool(data and data.get("choices"))
        evidence = (f"{(data.get('usage') or {}).get('prompt_tokens')} prompt tokens, "
                    f"{(data.get('usage') or {}).get('completion_tokens')} generated" if ok else reply.snippet())
        if retried:
            evidence += "; retried after a missed NIXL handshake (" + "; ".join(retried) + ")"
        kv = self._transfer_evidence(decode, mark, stored_before, prom_before)
        self.result.kv_transfer = kv
        if ok and kv.get("loaded") is False:
            ok = False
            evidence += "; decode loaded no KV from prefill"
        evidence += "; " + kv["evidence"]
        self.result.probes.append(Probe("P/D request", ok, "POST router /v1/completions -> 200, decode loads "
                                        "prefill's KV", reply.status, evidence, reply.seconds,
                                        f"router {url} -> {prod[0].plan.name} -> {decode.plan.name}"))

    def _router(self, proxies: list[Launch], prod: list[ServerResult], cons: list[ServerResult]):
        for proxy in proxies:
            script = find_script(proxy, self.tree)
            if script is None:
                continue
            port = free_port()
            url_map: dict[tuple[str, int | None], int] = {}
            for r in prod + cons:
                for host in r.plan.launch.hostnames:
                    url_map[(host.lower(), r.plan.original_port)] = r.plan.port
                    url_map.setdefault((host.lower(), None), r.plan.port)
            argv, notes = proxy_argv(proxy, script, self.ctx.python, port,
                                     [r.plan.port for r in prod], [r.plan.port for r in cons], url_map)
            from .adapt import base_env
            proc = self.sup.start("router", argv, base_env(self.ctx), cwd=script.parent)
            self._router_proc = proc
            ok = wait_port(f"http://127.0.0.1:{port}/health", time.monotonic() + min(self.timeout, 60), proc.alive)
            info = {"kind": "in-tree", "name": launch_name(proxy), "argv": mask_argv(argv), "adaptations": notes,
                    "log": str(proc.log_path)}
            if not ok:
                info["error"] = logs.error_line(proc.log_text())
                return None, info
            return f"http://127.0.0.1:{port}", info
        router = BuiltinRouter([r.plan.base_url for r in prod], [r.plan.base_url for r in cons],
                               self.timeout, _auth(cons[0].plan))
        url = router.start()
        self._builtin = router
        why = ("the config's proxy script is not in the tree" if proxies else "the config has no router")
        names = ", ".join(launch_name(p) for p in proxies)
        return url, {"kind": "built-in", "why": why + (f" ({names})" if names else ""),
                     "flow": "prefill: max_tokens=1, kv_transfer_params.do_remote_decode=true; "
                             "decode: the kv_transfer_params prefill returned",
                     "records": router.records}

    def _stored(self) -> set[Path]:
        """The request folders in ExampleConnector's shared storage folders."""
        return {f for d in self.ctx.storage.values() if d.is_dir() for f in d.iterdir() if f.is_dir()}

    def _prometheus(self, r: ServerResult) -> dict[str, float]:
        reply = http.get(r.plan.base_url + "/metrics", timeout=10, headers=_auth(r.plan))
        return logs.nixl_prometheus(reply.body.decode("utf-8", "replace")) if reply.status == 200 else {}

    def _transfer_evidence(self, decode: ServerResult, mark: int, stored_before: set[Path],
                           prom_before: dict[str, float]) -> dict:
        """Decode's `KV Transfer metrics` line (it comes with the next non-idle stats interval),
        else NixlConnector's counters on decode's /metrics, else the connector's own log lines."""
        connector = decode.plan.connector or ""
        nixl = "Nixl" in connector or connector == "MultiConnector"
        start = time.monotonic()
        deadline = start + (30 if nixl else 8)
        text = ""
        prom = None
        while time.monotonic() < deadline:
            text = decode.proc.log_text()[mark:] if decode.proc else ""
            rows = logs.kv_metrics(text)
            summary = logs.summarize_metrics(rows)
            if summary:
                summary.update(loaded=True, connector=connector,
                               evidence=f"decode log: {summary['line']}")
                return summary
            if connector == "ExampleConnector" and logs.INJECT_RE.search(text):
                break
            if nixl:
                prom = logs.nixl_delta(prom_before, self._prometheus(decode))
                if prom and time.monotonic() - start > 6:
                    break             # the counters are there; the log line may never come
            time.sleep(1)
        if prom:
            prom.update(loaded=True, connector=connector,
                        evidence=(f"decode /metrics: vllm:nixl_xfer_time_seconds +{prom['transfers']}, "
                                  f"avg {prom['avg_transfer_ms']} ms, {prom['mb_per_transfer']} MB per transfer "
                                  "(decode logged no `KV Transfer metrics` line; vLLM 0.30.0 on CPU was seen "
                                  "to put the transfer in /metrics only)"))
            return prom
        injects = [int(m.group(1)) for m in logs.INJECT_RE.finditer(text)]
        if injects:
            new = self._stored() - stored_before
            size = sum(f.stat().st_size for d in new for f in d.rglob("*") if f.is_file())
            mb = round(size / 2**20 / max(len(new), 1), 4)
            line = logs.find_line(text, "Inject KV cache of")
            return {"loaded": True, "connector": connector, "transfers": len(injects), "tokens": injects,
                    "avg_transfer_ms": None, "mb_per_transfer": mb,
                    "evidence": f"decode log: {line} (ExampleConnector logs no `KV Transfer metrics`; "
                                f"{mb} MB per transfer from its shared storage)"}
        rows = logs.kv_metrics(text)
        if rows:
            return {"loaded": False, "connector": connector, "evidence": f"decode log: {rows[-1]['line']}"}
        known = connector == "ExampleConnector" or "Nixl" in connector
        return {"loaded": False if known else None, "connector": connector,
                "evidence": "decode logged no KV transfer" + ("" if known else f" ({connector} is not read by vllmlint)")}


def _auth(plan: ServerPlan) -> dict[str, str]:
    return {"Authorization": f"Bearer {plan.api_key}"} if plan.api_key else {}


def _slug(plan: ServerPlan) -> str:
    base = Path(plan.launch.file.display).name.replace(".", "_")
    return f"{base}-{plan.launch.line}-{plan.kind}"
