"""`vllmlint server` as an editor sees it: a subprocess spoken to in JSON-RPC over stdio
(Content-Length framed LSP messages), no LSP library on this side."""
from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("pygls")

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
TIMEOUT = 60


class Client:
    def __init__(self, cwd: Path):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "vllmlint", "server"], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.inbox: queue.Queue = queue.Queue()
        self.next_id = 0
        self.stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self):
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                line = line.strip()
                if not line:
                    break
                name, _, value = line.decode("ascii").partition(":")
                headers[name.lower()] = value.strip()
            body = out.read(int(headers["content-length"]))
            message = json.loads(body)
            if "id" in message and "method" in message:       # a request from the server: answer it
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            self.inbox.put(message)

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: dict):
        self.next_id += 1
        rid = self.next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        message = self.wait(lambda m: m.get("id") == rid and "method" not in m)
        assert "error" not in message, message
        return message["result"]

    def wait(self, match, timeout: float = TIMEOUT) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no such message from the server; stderr:\n"
                                     + b"".join(self.stderr).decode(errors="replace")[-3000:])
            try:
                message = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            if message is None:
                raise AssertionError("server exited: " + b"".join(self.stderr).decode(errors="replace")[-3000:])
            if match(message):
                return message

    def diagnostics_for(self, uri: str, pred=lambda d: True, timeout: float = TIMEOUT) -> list[dict]:
        message = self.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                            and m["params"]["uri"] == uri and pred(m["params"]["diagnostics"]), timeout)
        return message["params"]["diagnostics"]

    def initialize(self, root: Path, resolve: bool = False, encodings: list[str] | None = None) -> dict:
        caps = {"textDocument": {"codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": [
            "quickfix", "source", "source.fixAll"]}}}}}
        if encodings:
            caps["general"] = {"positionEncodings": encodings}
        if resolve:
            caps["textDocument"]["codeAction"]["resolveSupport"] = {"properties": ["edit"]}
        result = self.request("initialize", {"processId": os.getpid(), "rootUri": uri(root), "capabilities": caps,
                                             "workspaceFolders": [{"uri": uri(root), "name": root.name}]})
        self.notify("initialized", {})
        return result

    def close(self):
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def uri(path: Path) -> str:
    return path.resolve().as_uri()


def offset_of(text: str, line: int, character: int, encoding: str = "utf-16") -> int:
    """LSP position (code units of `encoding`) -> str offset; lines split on \\r\\n, \\r, \\n."""
    import re

    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    start = starts[line]
    units = 0
    i = start
    while units < character:
        units += {"utf-16": len(text[i].encode("utf-16-le")) // 2, "utf-8": len(text[i].encode("utf-8"))}.get(encoding, 1)
        i += 1
    return i


def apply(text: str, edits: list[dict], encoding: str = "utf-16") -> str:
    spans = [(offset_of(text, **e["range"]["start"], encoding=encoding),
              offset_of(text, **e["range"]["end"], encoding=encoding), e["newText"]) for e in edits]
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def check_fix(folder: Path, tmp: Path) -> dict[str, bytes]:
    """The bytes `vllmlint check --fix` writes, on a copy of `folder`."""
    work = tmp / "cli"
    shutil.copytree(folder, work)
    subprocess.run([sys.executable, "-m", "vllmlint", "check", "--fix", "-q", "."], cwd=work, capture_output=True)
    return {p.relative_to(work).as_posix(): p.read_bytes() for p in sorted(work.rglob("*")) if p.is_file()}


@pytest.fixture
def client(tmp_path):
    clients = []

    def start(root: Path, **kw) -> Client:
        c = Client(tmp_path)
        clients.append(c)
        c.initialize(root, **kw)
        return c

    yield start
    for c in clients:
        c.close()


COMPOSE_OLD = (FIXTURES / "VL001" / "compose-list" / "input" / "docker-compose.yml").read_text()


def test_initialize_announces_code_actions(client, tmp_path):
    (tmp_path / "ws").mkdir()
    c = Client(tmp_path)
    try:
        caps = c.initialize(tmp_path / "ws")["capabilities"]
        assert caps["codeActionProvider"]["codeActionKinds"] == ["quickfix", "source.fixAll.vllmlint"]
        assert caps["textDocumentSync"]["change"] == 2          # incremental
    finally:
        c.close()


def test_vl001_as_you_type_then_quick_fix_equals_check_fix(client, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    path = ws / "docker-compose.yml"
    # on disk: a clean file; the finding comes from what is typed into the buffer
    clean = COMPOSE_OLD.replace("      - VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n", "")
    path.write_text(clean)
    c = client(ws)
    doc = uri(path)
    c.notify("textDocument/didOpen", {"textDocument": {"uri": doc, "languageId": "yaml", "version": 1, "text": clean}})
    assert c.diagnostics_for(doc) == []
    # didChange: insert the nightly-only variable (incremental change, the way editors send it)
    line = clean.splitlines().index("    environment:") + 1
    c.notify("textDocument/didChange", {"textDocument": {"uri": doc, "version": 2}, "contentChanges": [
        {"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}},
         "text": "      - VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n"}]})
    diags = c.diagnostics_for(doc, lambda d: any(x["code"] == "VL001" for x in d))
    [vl001] = [d for d in diags if d["code"] == "VL001"]
    text = COMPOSE_OLD
    assert text.splitlines()[vl001["range"]["start"]["line"]].strip() == "- VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1"
    assert vl001["range"]["start"] == {"line": line, "character": 8}      # check: docker-compose.yml:7:9
    start, end = offset_of(text, **vl001["range"]["start"]), offset_of(text, **vl001["range"]["end"])
    assert text[start:end].startswith("VLLM_ENABLE_SCALE_OUT_ENDPOINTS")
    assert vl001["severity"] == 1 and vl001["source"] == "vllmlint"
    assert vl001["codeDescription"]["href"].endswith("/docs/rules/VL001.md")

    want = check_fix(FIXTURES / "VL001" / "compose-list" / "input", tmp_path)["docker-compose.yml"]
    assert want == (FIXTURES / "VL001" / "compose-list" / "fixed" / "docker-compose.yml").read_bytes()
    actions = c.request("textDocument/codeAction", {"textDocument": {"uri": doc}, "range": vl001["range"],
                                                    "context": {"diagnostics": [vl001]}})
    [quick] = [a for a in actions if a["kind"] == "quickfix" and a["title"].startswith("VL001:")
               and "suppress" not in a["title"]]
    assert quick["isPreferred"] is True and "(unsafe)" not in quick["title"]
    assert list(quick["edit"]["changes"]) == [doc]
    assert apply(text, quick["edit"]["changes"][doc]).encode() == want

    [fix_all] = [a for a in actions if a["kind"] == "source.fixAll.vllmlint"]
    assert apply(text, fix_all["edit"]["changes"][doc]).encode() == want

    # the cursor anywhere on the finding's line (here: its first column, before the flagged token)
    # is offered the same quick fix, as ruff's server does; a line without a finding is not
    for character in (0, 2, len(text.splitlines()[line])):
        cursor = {"start": {"line": line, "character": character}, "end": {"line": line, "character": character}}
        on_line = c.request("textDocument/codeAction", {"textDocument": {"uri": doc}, "range": cursor,
                                                        "context": {"diagnostics": []}})
        assert [a["title"] for a in on_line if a["kind"] == "quickfix" and "suppress" not in a["title"]] \
            == [quick["title"]], character
    elsewhere = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
    assert not [a for a in c.request("textDocument/codeAction", {"textDocument": {"uri": doc}, "range": elsewhere,
                                                                 "context": {"diagnostics": []}})
                if a["kind"] == "quickfix"]

    [suppress] = [a for a in actions if "suppress" in a["title"]]
    suppressed = apply(text, suppress["edit"]["changes"][doc])
    assert "# vllmlint: disable=VL001 -- " in suppressed
    # the suppressed buffer: VL001 is gone, and nothing else appears (no unused-suppression VL900)
    c.notify("textDocument/didChange", {"textDocument": {"uri": doc, "version": 3},
                                        "contentChanges": [{"text": suppressed}]})
    assert c.diagnostics_for(doc, lambda d: not any(x["code"] == "VL001" for x in d)) == []
    # on save the file on disk is read for everything but the open buffer
    c.notify("textDocument/didSave", {"textDocument": {"uri": doc}})
    assert c.diagnostics_for(doc) == []


def test_fix_all_resolved_lazily(client, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(FIXTURES / "VL001" / "compose-list" / "input", ws)
    c = client(ws, resolve=True)
    doc = uri(ws / "docker-compose.yml")
    c.notify("textDocument/didOpen", {"textDocument": {"uri": doc, "languageId": "yaml", "version": 1,
                                                       "text": COMPOSE_OLD}})
    c.diagnostics_for(doc, lambda d: d != [])
    actions = c.request("textDocument/codeAction", {"textDocument": {"uri": doc}, "context": {
        "diagnostics": [], "only": ["source.fixAll"]},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}})
    [action] = actions
    assert action["kind"] == "source.fixAll.vllmlint" and "edit" not in action
    resolved = c.request("codeAction/resolve", action)
    want = (FIXTURES / "VL001" / "compose-list" / "fixed" / "docker-compose.yml").read_bytes()
    assert apply(COMPOSE_OLD, resolved["edit"]["changes"][doc]).encode() == want


def test_cross_file_finding_lands_in_the_file_it_belongs_to(client, tmp_path):
    """The router (a scale-out consumer) is typed in router.yaml; the launch it calls is in
    decode.yaml (reached through service.yaml): VL002 is published for decode.yaml."""
    case = FIXTURES / "VL002" / "k8s-three-files" / "input"
    ws = tmp_path / "ws"
    shutil.copytree(case, ws)
    router = (ws / "router.yaml").read_text()
    consumer = "            - --generate-url=http://qwen-decode.llm.svc.cluster.local:8000/inference/v1/generate\n"
    assert consumer in router
    (ws / "router.yaml").write_text(router.replace(consumer, "            - --port=9000\n"))
    c = client(ws)
    doc = uri(ws / "router.yaml")
    decode = uri(ws / "decode.yaml")
    c.notify("textDocument/didOpen", {"textDocument": {"uri": doc, "languageId": "yaml", "version": 1,
                                                       "text": (ws / "router.yaml").read_text()}})
    assert c.diagnostics_for(doc) == []
    c.notify("textDocument/didChange", {"textDocument": {"uri": doc, "version": 2},
                                        "contentChanges": [{"text": router}]})
    diags = c.diagnostics_for(decode, lambda d: d != [])
    assert [(d["code"], d["range"]["start"]) for d in diags] == [("VL002", {"line": 19, "character": 19})]
    # check on the tree says the same place: decode.yaml:20:20
    out = subprocess.run([sys.executable, "-m", "vllmlint", "check", "."], cwd=case, capture_output=True, text=True)
    assert "decode.yaml:20:20: VL002" in out.stdout
    # the router file itself has none
    assert c.diagnostics_for(doc) == []
    # the consumer deleted again: decode.yaml's diagnostics are cleared
    c.notify("textDocument/didChange", {"textDocument": {"uri": doc, "version": 3},
                                        "contentChanges": [{"text": router.replace(consumer, "")}]})
    assert c.diagnostics_for(decode) == []


def test_a_broken_file_never_stops_the_server(client, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    bad, good = ws / "bad.yaml", ws / "docker-compose.yml"
    bad.write_text("services: [\n  {unclosed\n")
    good.write_text(COMPOSE_OLD)
    c = client(ws)
    c.notify("textDocument/didOpen", {"textDocument": {"uri": uri(bad), "languageId": "yaml", "version": 1,
                                                       "text": bad.read_text()}})
    [problem] = c.diagnostics_for(uri(bad), lambda d: d != [])
    assert problem["severity"] == 1 and problem["message"].startswith("not checked:")
    # the other file is still checked in the same run
    assert [d["code"] for d in c.diagnostics_for(uri(good), lambda d: d != [])] == ["VL001"]
    # binary garbage typed into a buffer: still answering
    c.notify("textDocument/didChange", {"textDocument": {"uri": uri(bad), "version": 2},
                                        "contentChanges": [{"text": "\x00\x01 {{{{ ]]]]\n" * 50}]})
    c.diagnostics_for(uri(bad))
    assert c.request("textDocument/codeAction", {"textDocument": {"uri": uri(bad)}, "context": {"diagnostics": []},
                     "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}}) == []


def test_settings_come_from_the_workspace(client, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text('[tool.vllmlint]\nignore = ["VL001"]\n')
    (ws / "docker-compose.yml").write_text(COMPOSE_OLD)
    c = Client(tmp_path)
    try:
        c.request("initialize", {"processId": os.getpid(), "rootUri": uri(ws), "capabilities": {
            "workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}},
            "workspaceFolders": [{"uri": uri(ws), "name": "ws"}]})
        c.notify("initialized", {})
        # the server asks to be told about changed files
        register = c.wait(lambda m: m.get("method") == "client/registerCapability")
        [reg] = register["params"]["registrations"]
        assert reg["method"] == "workspace/didChangeWatchedFiles"
        doc = uri(ws / "docker-compose.yml")
        c.notify("textDocument/didOpen", {"textDocument": {"uri": doc, "languageId": "yaml", "version": 1,
                                                           "text": COMPOSE_OLD}})
        assert c.diagnostics_for(doc) == []
        # the settings change on disk: VL001 is back
        (ws / "pyproject.toml").write_text('[tool.vllmlint]\nignore = ["VL2"]\n')
        c.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": uri(ws / "pyproject.toml"), "type": 2}]})
        assert [d["code"] for d in c.diagnostics_for(doc, lambda d: d != [])] == ["VL001"]
    finally:
        c.close()


def test_unsafe_fix_is_marked_and_suppression_keeps_the_continued_command(client, tmp_path):
    """VL102's fix changes behaviour: offered, marked "(unsafe)", not preferred, no "fix all
    safe". The finding sits on a continued line of a shell command: a comment line above would
    cut the command, so the suppression goes at the end of the line."""
    case = FIXTURES / "VL102" / "in-extra-config-unsafe-fix"
    ws = tmp_path / "ws"
    shutil.copytree(case / "input", ws)
    # the fixture's own arguments name the release its launch runs (issue 29: a fix that depends
    # on the release needs it); the editor reads it from the workspace's settings
    (ws / ".vllmlint.toml").write_text('target-version = "0.30.0"\n')
    text = (ws / "decode.sh").read_text()
    c = client(ws)
    doc = uri(ws / "decode.sh")
    c.notify("textDocument/didOpen", {"textDocument": {"uri": doc, "languageId": "shellscript", "version": 1,
                                                       "text": text}})
    [diag] = [d for d in c.diagnostics_for(doc, lambda d: d != []) if d["code"] == "VL102"]
    assert diag["range"]["start"] == {"line": 2, "character": 114}   # decode.sh:3:115
    actions = c.request("textDocument/codeAction", {"textDocument": {"uri": doc}, "range": diag["range"],
                                                    "context": {"diagnostics": [diag]}})
    assert not [a for a in actions if a["kind"] == "source.fixAll.vllmlint"]
    [unsafe] = [a for a in actions if a["title"].endswith("(unsafe)")]
    assert unsafe["isPreferred"] is False
    assert apply(text, unsafe["edit"]["changes"][doc]).encode() == (case / "fixed" / "decode.sh").read_bytes()
    [suppress] = [a for a in actions if "suppress" in a["title"]]
    assert "(end of line)" in suppress["title"]
    suppressed = apply(text, suppress["edit"]["changes"][doc])
    assert suppressed.splitlines()[:2] == text.splitlines()[:2]
    (ws / "decode.sh").write_text(suppressed)
    out = subprocess.run([sys.executable, "-m", "vllmlint", "check", "--format", "json", "."], cwd=ws,
                         capture_output=True, text=True)
    assert json.loads(out.stdout) == []


EMOJI_CRLF = ('services:\r\n  engine:\r\n    image: vllm/vllm-openai:v0.30.0\r\n'
              '    command: ["vllm", "serve", "m", "--served-model-name", "\U0001F680-chat"]\r\n'
              '    environment: {EMOJI: "\U0001F680\U0001F680", VLLM_ENABLE_SCALE_OUT_ENDPOINTS: "1"}\r\n')


@pytest.mark.parametrize("encoding,column", [("utf-16", 33), ("utf-8", 37), ("utf-32", 31)])
def test_positions_in_the_negotiated_encoding_with_crlf(client, tmp_path, encoding, column):
    """check says compose.yaml:5:32 (code points); LSP counts the two rockets before it in the
    negotiated units (UTF-16 by default: 2 each; UTF-8: 4 each), and CRLF is one line break."""
    ws = tmp_path / "ws"
    ws.mkdir()
    path = ws / "compose.yaml"
    path.write_bytes(EMOJI_CRLF.encode())
    c = Client(tmp_path)
    try:
        result = c.initialize(ws, encodings=[encoding])
        assert result["capabilities"]["positionEncoding"] == encoding
        doc = uri(path)
        c.notify("textDocument/didOpen", {"textDocument": {"uri": doc, "languageId": "yaml", "version": 1,
                                                           "text": EMOJI_CRLF}})
        [diag] = c.diagnostics_for(doc, lambda d: d != [])
        assert diag["range"]["start"] == {"line": 4, "character": column}
        start = offset_of(EMOJI_CRLF, **diag["range"]["start"], encoding=encoding)
        end = offset_of(EMOJI_CRLF, **diag["range"]["end"], encoding=encoding)
        assert EMOJI_CRLF[start:end].startswith("VLLM_ENABLE_SCALE_OUT_ENDPOINTS")
        actions = c.request("textDocument/codeAction", {"textDocument": {"uri": doc}, "range": diag["range"],
                                                        "context": {"diagnostics": [diag]}})
        want = check_fix(ws, tmp_path)["compose.yaml"]
        assert b"\r\n" in want and b"--enable-scale-out" in want
        for action in actions:
            if action["kind"] == "source.fixAll.vllmlint" or action["title"].startswith("VL001: replace"):
                assert apply(EMOJI_CRLF, action["edit"]["changes"][doc], encoding).encode() == want
    finally:
        c.close()


def test_changes_are_debounced_and_files_outside_a_folder_are_checked(tmp_path):
    """No workspace folder: the open buffer alone is linted. Six edits typed in quick succession
    give one run (on the last text), not six."""
    path = tmp_path / "loose" / "docker-compose.yml"
    path.parent.mkdir()
    clean = COMPOSE_OLD.replace("      - VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n", "")
    path.write_text(clean)
    c = Client(tmp_path)
    try:
        c.request("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": {}})
        c.notify("initialized", {})
        doc = uri(path)
        c.notify("textDocument/didOpen", {"textDocument": {"uri": doc, "languageId": "yaml", "version": 1,
                                                           "text": clean}})
        assert c.diagnostics_for(doc) == []
        for version in range(2, 7):
            c.notify("textDocument/didChange", {"textDocument": {"uri": doc, "version": version},
                                                "contentChanges": [{"text": clean + f"# edit {version}\n"}]})
        c.notify("textDocument/didChange", {"textDocument": {"uri": doc, "version": 7},
                                            "contentChanges": [{"text": COMPOSE_OLD}]})
        seen = []
        c.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == doc
               and (seen.append(m) or any(d["code"] == "VL001" for d in m["params"]["diagnostics"])))
        assert len(seen) <= 2, [m["params"]["diagnostics"] for m in seen]     # 1 when nothing is slow
        assert seen[-1]["params"]["version"] == 7          # computed on the last text, and says so
        # closing it: nothing is linted for it any more, its diagnostics are cleared
        c.notify("textDocument/didClose", {"textDocument": {"uri": doc}})
        assert c.diagnostics_for(doc) == []
    finally:
        c.close()


def test_ignored_and_new_files(client, tmp_path):
    """An open buffer of a file the CLI would not read (.gitignore'd) gets no diagnostics; a new
    buffer whose file is not on disk yet is checked from the buffer."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    (ws / ".gitignore").write_text("vendor/\n")
    (ws / "vendor").mkdir()
    (ws / "vendor" / "compose.yaml").write_text(COMPOSE_OLD)
    c = client(ws)
    ignored = uri(ws / "vendor" / "compose.yaml")
    c.notify("textDocument/didOpen", {"textDocument": {"uri": ignored, "languageId": "yaml", "version": 1,
                                                       "text": COMPOSE_OLD}})
    assert c.diagnostics_for(ignored) == []
    out = subprocess.run([sys.executable, "-m", "vllmlint", "check", "--format", "json", "."], cwd=ws,
                         capture_output=True, text=True)
    assert json.loads(out.stdout or "[]") == []          # the CLI agrees
    new = uri(ws / "new-compose.yaml")
    c.notify("textDocument/didOpen", {"textDocument": {"uri": new, "languageId": "yaml", "version": 1,
                                                       "text": COMPOSE_OLD}})
    assert [d["code"] for d in c.diagnostics_for(new, lambda d: d != [])] == ["VL001"]
