"""Python P/D proxy apps (parsers/pyproxy.py): which files are proxies, what they do with
decode's kv_transfer_params, and where their prefill and decode servers are."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from vllmlint.model.launch import PROXY, SourceFile
from vllmlint.parsers.pythonfile import parse_python


def proxies(text: str) -> list:
    source = SourceFile(path=Path("/tmp/router.py"), display="router.py", text=textwrap.dedent(text), kind="python")
    return [l for l in parse_python(source).launches if l.kind == PROXY]


FASTAPI_SESSION = """
    import httpx
    from fastapi import FastAPI, Request

    app = FastAPI()
    http = httpx.AsyncClient()
    SAVED = {}
    PREFILL = "http://prefill-svc:8000"
    DECODE_URL = "http://decode-svc:8000/v1"

    @app.post("/v1/completions")
    async def completions(req: Request):
        body = await req.json()
        sid = req.headers.get("x-session-id")
        first = dict(body, max_tokens=1, kv_transfer_params={"do_remote_decode": True})
        if sid in SAVED:
            first["kv_transfer_params"] = SAVED[sid]
        p = (await http.post(PREFILL + "/v1/completions", json=first)).json()
        body["kv_transfer_params"] = p["kv_transfer_params"]
        d = (await http.post(DECODE_URL + "/completions", json=body)).json()
        SAVED[sid] = d["kv_transfer_params"]
        return d
"""


def test_fastapi_proxy_that_reuses_by_session_id_is_multiturn():
    [proxy] = proxies(FASTAPI_SESSION)
    assert proxy.proxy_flavour == "custom-multiturn"
    assert proxy.line == 5 and proxy.program == "router.py"
    assert [a.value for a in proxy.argv] == ["router.py", "--prefill-hosts", "prefill-svc:8000",
                                              "--decode-hosts", "decode-svc:8000"]
    assert "sid" in proxy.via and "line 21" in proxy.via


def test_reading_token_ids_makes_it_unclassified():
    text = FASTAPI_SESSION.replace("sid = req.headers", "ids = body['prompt_token_ids']\n        sid = req.headers")
    [proxy] = proxies(text)
    assert proxy.proxy_flavour == "custom"


def test_store_keyed_by_request_id_is_not_session_reuse():
    text = FASTAPI_SESSION.replace('req.headers.get("x-session-id")', 'body["request_id"]').replace("sid", "rid")
    [proxy] = proxies(text)
    assert proxy.proxy_flavour == "custom"


def test_http_client_session_is_no_conversation_id():
    [proxy] = proxies("""
        import aiohttp
        from aiohttp import web
        PENDING = {}

        async def handle(request):
            body = await request.json()
            async with aiohttp.ClientSession() as session:
                async with session.post("http://prefill:8100/v1/completions", json=body) as r:
                    data = await r.json()
                PENDING[data["id"]] = data["kv_transfer_params"]
                body["kv_transfer_params"] = data["kv_transfer_params"]
                async with session.post("http://decode:8200/v1/completions", json=body) as r:
                    return web.json_response(await r.json())

        app = web.Application()
        app.router.add_post("/v1/completions", handle)
    """)
    assert proxy.proxy_flavour == "custom"


def test_flask_and_quart_apps():
    for imp, make in (("from flask import Flask", "Flask(__name__)"), ("from quart import Quart", "Quart(__name__)")):
        [proxy] = proxies(f"""
            import requests
            {imp}
            app = {make}
            PREFILL_URL = "http://10.0.0.1:8100"
            DECODE_URL = "http://10.0.0.2:8200"

            @app.post("/v1/completions")
            def completions():
                r = requests.post(PREFILL_URL, json={{"kv_transfer_params": {{"do_remote_decode": True}}}}).json()
                return requests.post(DECODE_URL, json={{"kv_transfer_params": r["kv_transfer_params"]}}).json()
        """)
        assert proxy.proxy_flavour == "custom"
        assert [a.value for a in proxy.argv][1:] == ["--prefill-hosts", "10.0.0.1:8100", "--decode-hosts", "10.0.0.2:8200"]


@pytest.mark.parametrize("text", [
    # a web app with no kv_transfer_params: an ordinary API in front of a server
    """
    import httpx
    from fastapi import FastAPI
    app = FastAPI()
    @app.post("/ask")
    async def ask(q: dict):
        r = await httpx.AsyncClient().post("http://localhost:8000/v1/completions", json=q)
        return {"prefill": False, "decode": r.json()}
    """,
    # a client script (no app) that sends kv_transfer_params to prefill and decode
    """
    import requests
    p = requests.post("http://prefill:8100/v1/completions", json={"kv_transfer_params": {"do_remote_decode": True}})
    requests.post("http://decode:8200/v1/completions", json={"kv_transfer_params": p.json()["kv_transfer_params"]})
    """,
    # a vLLM-side server app that receives kv_transfer_params but calls nobody
    """
    from fastapi import FastAPI
    app = FastAPI()
    @app.post("/v1/completions")
    async def completions(body: dict):
        return {"kv_transfer_params": body.get("kv_transfer_params"), "prefill": 1, "decode": 2}
    """,
    # kv_transfer_params only in a docstring and a log line
    '''
    """Forwards kv_transfer_params from prefill to decode (see docs)."""
    import logging, httpx
    from fastapi import FastAPI
    app = FastAPI()
    @app.post("/x")
    async def x(body: dict):
        logging.info("kv_transfer_params prefill decode")
        return (await httpx.AsyncClient().post("http://a:1/b", json=body)).json()
    ''',
    # an `Application` that is not aiohttp's
    """
    import httpx
    from myframework import Application
    app = Application()
    def go(body):
        p = httpx.post("http://prefill:1/v1", json={"kv_transfer_params": {}})
        return httpx.post("http://decode:2/v1", json=p.json())
    """,
])
def test_not_a_proxy(text):
    assert proxies(text) == []


def test_argparse_hosts_and_ports_like_the_reference_proxies():
    [proxy] = proxies("""
        import argparse
        import httpx
        from fastapi import FastAPI, Request

        app = FastAPI()

        def parse_args():
            p = argparse.ArgumentParser()
            p.add_argument("--prefiller-hosts", nargs="+", default=["localhost"])
            p.add_argument("--prefiller-ports", type=int, nargs="+", default=[8100])
            p.add_argument("--decoder-host", default="http://decode-0:8200/v1")
            return p.parse_args()

        @app.post("/v1/completions")
        async def completions(request: Request):
            req = await request.json()
            req["kv_transfer_params"] = {"do_remote_decode": True}
            r = await app.state.prefill.post("/completions", json=req)
            req["kv_transfer_params"] = r.json().get("kv_transfer_params", {})
            return await app.state.decode.post("/completions", json=req)
    """)
    assert [a.value for a in proxy.argv][1:] == ["--prefill-hosts", "localhost", "--prefill-ports", "8100",
                                                 "--decode-hosts", "decode-0:8200"]
    assert proxy.proxy_flavour == "custom"


def test_a_script_given_prefill_and_decode_addresses_is_a_router():
    from vllmlint.parsers.detect import detect

    assert detect(["python3", "router.py", "--prefill", "http://p:8100", "--decode", "http://d:8200"]).kind == PROXY
    assert detect(["python", "r.py", "--prefiller-hosts", "a", "--decoder-ports=2"]).kind == PROXY
    assert detect(["python", "bench.py", "--prefill-only"]) is None
    assert detect(["python", "train.py", "--decode-steps", "4", "--prefill-chunk", "2"]) is None


def test_the_command_that_starts_an_app_gives_it_its_servers(tmp_path, monkeypatch):
    """b/'s router fronts a pair without bidirectional transfer: once the command that starts it
    is known, a/'s bidirectional pair elsewhere in the tree is not counted against it."""
    import shutil

    from vllmlint.lint.discovery import discover
    from vllmlint.lint.graph import graph_of
    from vllmlint.lint.project import load

    case = Path(__file__).resolve().parent.parent / "fixtures/VL101/python-proxy-launched-by-script/input"
    shutil.copytree(case, tmp_path / "t")
    monkeypatch.chdir(tmp_path / "t")
    graph = graph_of(load(discover(["."])[0]))
    by = {(p.launch.file.display, p.flavour): p for p in graph.proxies}
    assert set(by) == {("a/router.py", "custom-multiturn"), ("a/start.sh", "runs-app"),
                       ("b/router.py", "custom-multiturn"), ("b/start.sh", "runs-app")}
    b = by[("b/router.py", "custom-multiturn")]
    assert b.resolved and [l.port for l in b.prefill] == [9100] and [l.port for l in b.decode] == [9200]
