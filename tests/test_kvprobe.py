"""`vllmlint kv-probe`'s orchestration against small stand-in servers (the real vLLM pair is
tests/test_kvprobe_vllm.py): prompts measured with /tokenize, the P/D flow, /metrics deltas, the
log file, the verdict, and reading a saved log."""
from __future__ import annotations

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vllmlint.verify import kvprobe as kp


class Engine:
    """Prefill or decode: /tokenize counts whitespace words (+1 for BOS), decode counts a transfer of
    `ms` per request with params from prefill and appends a `KV Transfer metrics` line to `log`."""

    def __init__(self, role: str, ms: float = 40.0, log=None, max_len: int = 4096):
        self.role, self.ms, self.log, self.max_len = role, ms, log, max_len
        self.n = 0
        self.bodies: list[dict] = []

    def start(self):
        eng = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, obj, ctype="application/json"):
                data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/v1/models":
                    self._send(200, {"data": [{"id": "Qwen/Qwen2.5-7B-Instruct"}]})
                elif self.path == "/metrics":
                    s = eng.n * eng.ms / 1e3
                    text = (f'vllm:nixl_xfer_time_seconds_count{{engine="0"}} {float(eng.n)}\n'
                            f'vllm:nixl_xfer_time_seconds_sum{{engine="0"}} {s}\n'
                            f'vllm:nixl_xfer_time_seconds_bucket{{engine="0",le="0.1"}} {float(eng.n)}\n'
                            f'vllm:nixl_xfer_time_seconds_bucket{{engine="0",le="+Inf"}} {float(eng.n)}\n'
                            f'vllm:nixl_bytes_transferred_sum{{engine="0"}} {eng.n * 2.0 * 2**20}\n')
                    self._send(200, text.encode(), "text/plain")
                else:
                    self._send(404, {})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                eng.bodies.append(body)
                if self.path == "/tokenize":
                    self._send(200, {"count": len(body["prompt"].split()) + 1, "max_model_len": eng.max_len})
                    return
                n = len(body["prompt"].split()) + 1
                kv = {}
                if eng.role == "prefill":
                    kv = {"do_remote_prefill": True, "remote_block_ids": [1, 2]}
                elif (body.get("kv_transfer_params") or {}).get("do_remote_prefill") or eng.role == "both":
                    eng.n += 1
                    if eng.log:
                        with open(eng.log, "a") as fh:
                            fh.write(f"(EngineCore pid=1) INFO 12-02 08:00:00 [metrics.py:1] KV Transfer metrics: "
                                     f"Num successful transfers=1, Avg xfer time (ms)={eng.ms}, P90 xfer time (ms)="
                                     f"{eng.ms}, Avg post time (ms)=0.5, P90 post time (ms)=0.5, Avg MB per transfer=2.0, "
                                     f"Throughput (MB/s)={2000 / eng.ms}, Avg number of descriptors=4.0\n")
                self._send(200, {"choices": [{"text": "x"}], "usage": {"prompt_tokens": n},
                                 "kv_transfer_params": kv or None})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        return self

    def stop(self):
        self.server.shutdown()


@pytest.fixture
def pair(tmp_path):
    log = tmp_path / "decode.log"
    log.write_text("INFO old line\n")
    p, d = Engine("prefill").start(), Engine("decode", log=log).start()
    yield p, d, log
    p.stop()
    d.stop()


def test_prompt_of_hits_the_token_count_exactly_with_unique_prefixes():
    count = lambda t: len(t.split()) + 1      # noqa: E731
    a, n = kp.prompt_of(500, count, seed=0)
    b, m = kp.prompt_of(500, count, seed=0)
    assert n == m == 500 and count(a) == 500 and a.split()[:2] != b.split()[:2]
    text, n = kp.prompt_of(8192, count, seed=3)
    assert n == 8192


def test_prefill_decode_flow_fast_transfers_pass(pair):
    p, d, log = pair
    cfg = kp.ProbeConfig(prefill=p.url, decode=d.url, prompt_tokens=1000, requests=3, decode_log=str(log),
                         log_wait=5, link="nvlink")
    res = kp.run_probe(cfg)
    assert res.errors == [] and res.prompt_tokens == [1000, 1000, 1000]
    assert res.metrics.transfers == 3 and res.metrics.avg_ms == 40.0 and res.metrics.p90_ms == 100.0
    assert res.log.transfers == 3 and res.log.avg_ms == 40.0 and res.log.p90_ms == 40.0
    assert res.mb_per_request() == 2.0 and res.exit_code == 0 and res.verdict.startswith("ok: 3 transfer(s)")
    # decode got what prefill returned; prefill was asked for max_tokens=1 and do_remote_decode
    prefill_req = [b for b in p.bodies if "max_tokens" in b][0]
    assert prefill_req["max_tokens"] == 1 and prefill_req["kv_transfer_params"]["do_remote_decode"]
    est = res.estimate
    assert est["bytes"] == 57344 * 1000 and est["link"] == "nvlink"      # Qwen2.5-7B bf16 from the built-in table
    text = kp.render_text(res)
    assert "VL201 estimate: ~57.3 MB of KV per 1,000-token prompt" in text and "verdict: ok" in text


def test_slow_transfers_through_a_router_are_exit_1(tmp_path):
    d = Engine("both", ms=350.0).start()
    try:
        res = kp.run_probe(kp.ProbeConfig(router=d.url, decode=d.url, prompt_tokens=300, requests=2, log_wait=3,
                                          link="pcie-no-p2p"))
    finally:
        d.stop()
    assert res.metrics.transfers == 2 and res.metrics.avg_ms == 350.0
    assert res.exit_code == 1 and res.verdict.startswith("SLOW: 2 transfer(s), average 350 ms")
    assert any("first thing to fix" in f for f in res.findings)


def test_prompt_clamped_to_max_model_len(tmp_path):
    d = Engine("both", max_len=512).start()
    try:
        res = kp.run_probe(kp.ProbeConfig(router=d.url, decode=d.url, prompt_tokens=8192, requests=1, log_wait=2))
    finally:
        d.stop()
    assert res.target_tokens == 507 and res.prompt_tokens == [507] and "max_model_len 512" in res.clamped


def test_unreachable_is_exit_2():
    res = kp.run_probe(kp.ProbeConfig(prefill="http://127.0.0.1:9", decode="http://127.0.0.1:9", requests=1))
    assert res.exit_code == 2 and res.verdict.startswith("could not probe")


def test_saved_log_on_stdin_with_requests_0():
    from test_kvmetrics import V030, V031
    res = kp.run_probe(kp.ProbeConfig(requests=0, decode_log="-", model="Qwen/Qwen2.5-7B-Instruct",
                                      prompt_tokens=8192, link="pcie-no-p2p"),
                       stdin=io.StringIO(V030 + "\n" + V031 + "\n"))
    assert res.log.transfers == 6 and res.exit_code == 1 and res.verdict.startswith("SLOW")
    assert res.estimate["bytes"] == 469762048


def test_cli_needs_a_route():
    from click.testing import CliRunner

    from vllmlint.cli import main
    r = CliRunner().invoke(main, ["kv-probe", "--prefill", "http://x"])
    assert r.exit_code == 2 and "--router URL" in r.output
