"""A stand-in for the `vllm` CLI that behaves like vLLM 0.30.0 where verify looks: argv, /health,
completions, the scale-out gate, ExampleConnector's log lines, a child process in its group.

For fast tests of `vllmlint verify`'s orchestration; the real server is tested in
test_verify_vllm.py. Knobs (environment): FAKE_VLLM_CRASH=1 exits with a vLLM-style error,
FAKE_VLLM_CRASH_ON_REQUEST=1 dies at the first completion (after /health passed),
FAKE_VLLM_NEVER_HEALTHY=1 never answers 200 on /health, FAKE_VLLM_PIDFILE=PATH records the pids,
FAKE_VLLM_PORT_CLASH_ONCE=PATH (PATH absent: creates it) logs vLLM's ZMQ port clash and hangs, as
vLLM does when a server starting beside it took the port it picked.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCALE_OUT = ("/v1/chat/completions/render", "/v1/completions/render", "/v1/chat/completions/derender",
             "/v1/completions/derender", "/inference/v1/generate")


def log(msg: str) -> None:
    print(f"(APIServer pid={os.getpid()}) INFO 01-01 00:00:00 [fake.py:1] {msg}", flush=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--version"]:
        print("0.30.0")
        return 0
    if argv[:1] == ["serve"]:
        mode, opts = "serve", argv[1:]
    elif argv[:2] == ["launch", "render"]:
        mode, opts = "render", argv[2:]
    else:
        print("usage: vllm {serve,launch render} ...", file=sys.stderr)
        return 2
    port, host, kv, flags = 8000, "0.0.0.0", None, set()
    i = 0
    while i < len(opts):
        o = opts[i]
        if o == "--port":
            port = int(opts[i + 1]); i += 1
        elif o == "--host":
            host = opts[i + 1]; i += 1
        elif o == "--kv-transfer-config":
            kv = json.loads(opts[i + 1]); i += 1
        elif o.startswith("--"):
            flags.add(o)
        i += 1
    if "--not-a-vllm-flag" in flags:
        print("vllm serve: error: unrecognized arguments: --not-a-vllm-flag", file=sys.stderr, flush=True)
        return 2
    if os.environ.get("FAKE_VLLM_CRASH"):
        print("Traceback (most recent call last):", flush=True)
        print("ValueError: fake engine failed to start", flush=True)
        return 1
    clash = os.environ.get("FAKE_VLLM_PORT_CLASH_ONCE")
    if clash and not os.path.exists(clash):
        open(clash, "w").close()
        print("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:53427')", flush=True)
        time.sleep(600)
    tokens_only = "--tokens-only" in flags
    scale_out = mode == "render" or tokens_only or "--enable-scale-out" in flags
    if not scale_out:
        log("Scale-out endpoints are disabled. Set --enable-scale-out to enable them.")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])   # like EngineCore
    if os.environ.get("FAKE_VLLM_PIDFILE"):
        with open(os.environ["FAKE_VLLM_PIDFILE"], "a") as fh:
            fh.write(f"{os.getpid()} {child.pid}\n")
    def on_term(signum, frame):                # like vLLM: the API server takes its engine down
        child.kill()
        os._exit(0)
    signal.signal(signal.SIGTERM, on_term)
    storage = (kv or {}).get("kv_connector_extra_config", {}).get("shared_storage_path")
    role = (kv or {}).get("kv_role")

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def send(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/health":
                self.send(503 if os.environ.get("FAKE_VLLM_NEVER_HEALTHY") else 200, {})
            elif self.path == "/v1/models":
                self.send(200, {"data": [{"id": "fake-model"}]})
            else:
                self.send(404, {"detail": "Not Found"})

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n) or b"{}")
            p = self.path
            if p in SCALE_OUT and not scale_out:
                return self.send(404, {"detail": "Not Found"})
            if p in ("/v1/completions", "/v1/chat/completions"):
                if mode == "render":
                    return self.send(404, {"detail": "Not Found"})
                if os.environ.get("FAKE_VLLM_CRASH_ON_REQUEST"):
                    print("RuntimeError: fake kernel rejected head_dim", flush=True)
                    os._exit(1)
                kvp = body.get("kv_transfer_params")
                folder = os.path.join(storage or "", hashlib.md5(json.dumps(body.get("prompt") or body.get(
                    "messages")).encode()).hexdigest()[:8])
                if role == "kv_producer" and storage:
                    os.makedirs(folder, exist_ok=True)
                    with open(os.path.join(folder, "layer0.safetensors"), "wb") as fh:
                        fh.write(b"\0" * 4096)
                if role == "kv_consumer" and storage and os.path.isdir(folder):
                    log("External Cache Hit!")
                    log("Inject KV cache of 256 tokens to the paged memory")
                n_out = int(body.get("max_tokens") or 4)
                choice = {"index": 0, "text": " fox" * n_out} if p == "/v1/completions" else \
                    {"index": 0, "message": {"role": "assistant", "content": " fox" * n_out}}
                return self.send(200, {"choices": [choice], "usage": {"prompt_tokens": 270, "completion_tokens": n_out},
                                       "kv_transfer_params": None if kvp is None else {"remote": "x"} if role == "kv_producer" else None})
            if p.endswith("/render"):
                return self.send(200, {"request_id": "r1", "token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 4},
                                       "model": "fake-model"})
            if p == "/inference/v1/generate":
                return self.send(200, {"request_id": "g1", "model": "fake-model",
                                       "choices": [{"index": 0, "token_ids": [5, 6, 7, 8], "finish_reason": "length"}]})
            if p.endswith("/derender"):
                return self.send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]})
            self.send(404, {"detail": "Not Found"})

    server = ThreadingHTTPServer((host, port), H)
    log(f"Starting vLLM API server on http://{host}:{port}")
    if os.environ.get("FAKE_VLLM_SLOW_START"):
        time.sleep(float(os.environ["FAKE_VLLM_SLOW_START"]))
    try:
        server.serve_forever()
    finally:
        child.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
