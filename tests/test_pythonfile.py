"""Python launcher front end: launches, env settings and the span edits they offer."""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from vllmlint.model.launch import API_SERVER, PROXY, SERVE, Edit, ParseError, SourceFile
from vllmlint.parsers.pythonfile import parse_python


def src(text: str, dedent: bool = True) -> SourceFile:
    return SourceFile(path=Path("/tmp/x.py"), display="x.py",
                      text=textwrap.dedent(text) if dedent else text, kind="python")


def apply(text: str, edits: list[Edit]) -> str:
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[:edit.start] + edit.text + text[edit.end:]
    return text


def raw(source: SourceFile, span) -> str:
    return source.text[span[0]:span[1]]


def values(launch) -> list[str]:
    return [a.value for a in launch.argv]


def only_launch(source: SourceFile):
    pf = parse_python(source)
    assert len(pf.launches) == 1, [values(l) for l in pf.launches]
    return pf.launches[0]


def env_by_name(pf):
    return {e.name: e for e in pf.env}


# -- argv lists -------------------------------------------------------------------------------

def test_list_launch_with_json_dumps_kv_config():
    s = src("""\
        import json, subprocess

        def start_prefill(model, port):
            return subprocess.Popen(["vllm", "serve", model, "--port", str(port),
                                     "--kv-transfer-config",
                                     json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})])
        """)
    launch = only_launch(s)
    assert launch.kind == SERVE and launch.program == "vllm serve"
    assert values(launch)[:2] == ["vllm", "serve"] and launch.options_start == 2
    assert launch.context == "python launcher start_prefill()"
    assert launch.group == "x.py#python launcher start_prefill()"
    assert raw(s, launch.span) == '"vllm"' and launch.line == 4
    model, port = launch.argv[2], launch.argv[4]
    assert (model.value, model.dynamic) == ("model", True)
    assert (port.value, port.dynamic, raw(s, port.span)) == ("str(port)", True, "str(port)")
    kv = launch.flag_value("--kv-transfer-config")
    assert kv is not None and not kv.dynamic
    assert json.loads(kv.value) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert kv.value == json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    assert raw(s, kv.span).startswith("json.dumps({") and raw(s, kv.span).endswith("})")
    # the literal's span is the whole literal, quotes included
    assert raw(s, launch.argv[3].span) == '"--port"'
    assert launch.not_editable is None


def test_json_dumps_of_non_literal_is_dynamic():
    s = src("""\
        subprocess.run(["vllm", "serve", "m", "--kv-transfer-config", json.dumps(cfg)])
        """)
    kv = only_launch(s).flag_value("--kv-transfer-config")
    assert kv.dynamic and kv.value == "json.dumps(cfg)"


def test_api_server_with_sys_executable():
    s = src("""\
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", m]
        subprocess.run(cmd)
        """)
    launch = only_launch(s)
    assert launch.kind == API_SERVER and launch.options_start == 3
    assert raw(s, launch.span) == "sys.executable"
    assert launch.context == "python launcher x"


def test_reference_proxy_list():
    s = src("""\
        proc = subprocess.Popen(["python", "disagg_proxy_multiturn.py", "--prefiller-hosts", "a", "b"])
        """)
    launch = only_launch(s)
    assert launch.kind == PROXY and launch.program == "disagg_proxy_multiturn.py"
    assert raw(s, launch.span) == '"disagg_proxy_multiturn.py"'
    assert values(launch)[1:] == ["--prefiller-hosts", "a", "b"]


def test_cmd_build_up_with_augassign_extend_append():
    s = src("""\
        def start_decode(model, tp):
            cmd = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
            cmd += ["--model", model]
            if tp > 1:
                cmd.extend(["--tensor-parallel-size", str(tp)])
            cmd.append("--enforce-eager")
            cmd.extend(("--max-model-len", "4096"))
            subprocess.run(cmd, check=True)
        """)
    launch = only_launch(s)
    assert launch.kind == API_SERVER
    assert values(launch) == ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "model",
                              "--tensor-parallel-size", "str(tp)", "--enforce-eager", "--max-model-len", "4096"]
    assert launch.flag_value("--max-model-len").value == "4096"
    assert launch.not_editable is None
    # the new item goes after the last literal item of the last list
    out = apply(s.text, [launch.append_edit("--port=8001")])
    assert '    cmd.extend(("--max-model-len", "4096", "--port=8001"))\n' in out
    compile(out, "x.py", "exec")


def test_build_up_copies_and_splices():
    s = src("""\
        BASE = ["vllm", "serve", "m"]
        def prefill():
            cmd = BASE + ["--port", "8100"]
            subprocess.run(cmd)
        def decode():
            subprocess.run([*BASE, "--port", "8200"])
        """)
    pf = parse_python(s)
    # BASE itself is not a launch: both launchers copy it
    assert [values(l) for l in pf.launches] == [["vllm", "serve", "m", "--port", "8100"],
                                                ["vllm", "serve", "m", "--port", "8200"]]
    prefill, decode = sorted(pf.launches, key=lambda l: l.context, reverse=True)
    assert prefill.context == "python launcher prefill()" and decode.context == "python launcher decode()"
    out = apply(s.text, [l.append_edit("--x") for l in pf.launches])
    assert 'cmd = BASE + ["--port", "8100", "--x"]' in out
    assert 'subprocess.run([*BASE, "--port", "8200", "--x"])' in out


def test_self_rebinding_build_up():
    s = src("""\
        cmd = ["vllm", "serve", "m"]
        cmd = cmd + ["--port", "1"]
        """)
    launch = only_launch(s)
    assert values(launch) == ["vllm", "serve", "m", "--port", "1"]
    assert apply(s.text, [launch.append_edit("--x")]).endswith('cmd = cmd + ["--port", "1", "--x"]\n')


def test_not_editable_forms():
    s = src("""\
        def a(rest):
            subprocess.run(["vllm", "serve", "m", *rest])
        def b(extra):
            cmd = ["vllm", "serve", "m"]
            cmd += extra
        def c():
            cmd = ["vllm", "serve", "m", "--model"]
            cmd.append(model)
        def d():
            cmd = ["vllm", "serve", "m"]
            cmd[2] = "other"
        def e(extra):
            cmd = ["vllm", "serve", "m"]
            for x in extra:
                cmd.append(x)
        """)
    pf = parse_python(s)
    by = {l.context: l for l in pf.launches}
    assert len(by) == 5
    rest = by["python launcher a()"]
    assert rest.argv[-1].splits and rest.argv[-1].dynamic and rest.not_editable
    assert rest.append_edit("--x") is None
    assert "extra" in by["python launcher b()"].not_editable
    assert "--model" in by["python launcher c()"].not_editable
    assert by["python launcher d()"].not_editable
    assert by["python launcher e()"].argv[-1].splits and by["python launcher e()"].not_editable


def test_append_site_single_line_list_keeps_quote_style():
    s = src("""\
        subprocess.Popen(['vllm', 'serve', 'facebook/opt-125m', '--port', '8000'])
        """)
    launch = only_launch(s)
    assert launch.append_site.template == ", '{}'"
    out = apply(s.text, [launch.append_edit("--enforce-eager")])
    assert out == "subprocess.Popen(['vllm', 'serve', 'facebook/opt-125m', '--port', '8000', '--enforce-eager'])\n"
    compile(out, "x.py", "exec")


@pytest.mark.parametrize("trailing", [",", ""])
def test_append_site_multi_line_list(trailing):
    s = src(f"""\
        cmd = [
            "vllm",
            "serve",
            "m",
            "--port", "8000"{trailing}
        ]
        """)
    launch = only_launch(s)
    out = apply(s.text, [launch.append_edit("--enforce-eager")])
    assert out == textwrap.dedent(f"""\
        cmd = [
            "vllm",
            "serve",
            "m",
            "--port", "8000", "--enforce-eager"{trailing}
        ]
        """)
    s = src(f"""\
        cmd = [
            "vllm",
            "serve",
            "m"{trailing}
        ]
        """)
    out = apply(s.text, [only_launch(s).append_edit("--enforce-eager")])
    assert out == textwrap.dedent(f"""\
        cmd = [
            "vllm",
            "serve",
            "m",
            "--enforce-eager"{trailing}
        ]
        """)
    compile(out, "x.py", "exec")


def test_append_site_multi_line_with_trailing_comment():
    s = src("""\
        cmd = [
            "vllm",
            "serve",
            "m",  # the model
        ]
        """)
    out = apply(s.text, [only_launch(s).append_edit("--enforce-eager")])
    assert out == textwrap.dedent("""\
        cmd = [
            "vllm",
            "serve",
            "m",  # the model
            "--enforce-eager",
        ]
        """)


def test_comparison_and_offline_use_are_not_launches():
    s = src('''\
        """Helpers around `vllm serve`: start it with vllm serve MODEL."""
        import vllm
        from vllm import LLM

        def is_vllm(words):
            if words[:2] == ["vllm", "serve"]:
                return True
            if "vllm serve" in " ".join(words):
                return True
            print("run vllm serve first")
            logger.info("python -m vllm.entrypoints.openai.api_server is deprecated")
            parser.add_argument("--cmd", help="e.g. vllm serve m")
            raise RuntimeError("vllm serve failed")

        llm = LLM(model="facebook/opt-125m")
        ''')
    pf = parse_python(s)
    # the engine API is a launch (issue 13): only LLM(...) is one, never the text about `vllm serve`
    assert [(l.kind, l.line, [a.value for a in l.argv]) for l in pf.launches] == \
        [("engine", 15, ["LLM", "--model=facebook/opt-125m"])]
    assert pf.notes and "read as text" in pf.notes[0]


# -- shell strings ------------------------------------------------------------------------------

def test_shell_true_string_launch():
    s = src("""\
        subprocess.run("VLLM_A=1 vllm serve m --port 8000 --max-model-len 4096", shell=True)
        """)
    pf = parse_python(s)
    launch = only_launch(s)
    assert values(launch) == ["vllm", "serve", "m", "--port", "8000", "--max-model-len", "4096"]
    assert raw(s, launch.span) == "vllm"
    assert raw(s, launch.flag_value("--port").span) == "8000"
    assert launch.env_value("VLLM_A") == "1"
    assert env_by_name(pf)["VLLM_A"].origin.startswith("shell")
    out = apply(s.text, [launch.append_edit("--enforce-eager")])
    assert out == 'subprocess.run("VLLM_A=1 vllm serve m --port 8000 --max-model-len 4096 --enforce-eager", shell=True)\n'
    out = apply(s.text, env_by_name(pf)["VLLM_A"].removal)
    assert out == 'subprocess.run("vllm serve m --port 8000 --max-model-len 4096", shell=True)\n'


def test_shell_string_through_a_name_and_os_system():
    s = src("""\
        def run():
            proxy = "python toy_proxy_server.py --port 9000"
            subprocess.Popen(proxy, shell=True)
            os.system("vllm serve m")
        """)
    pf = parse_python(s)
    assert sorted(l.kind for l in pf.launches) == [PROXY, SERVE]


def test_shell_string_escapes_map_to_source():
    s = src(r'''
        os.system("vllm serve \"my model\" --chat-template \"t.jinja\" --x\tb")
        ''')
    launch = only_launch(s)
    assert values(launch) == ["vllm", "serve", "my model", "--chat-template", "t.jinja", "--x", "b"]
    assert raw(s, launch.argv[2].span) == r'\"my model\"'
    assert raw(s, launch.flag_value("--chat-template").span) == r'\"t.jinja\"'
    assert raw(s, launch.argv[-1].span) == "b"
    new = apply(s.text, [launch.flag_value("--chat-template").replace("u.jinja")])
    compile(new, "x.py", "exec")


def test_fstring_shell_command():
    s = src("""\
        def launch(model, port):
            cmd = f"vllm serve {model} --port {port} --kv-transfer-config '{{\\"kv_connector\\":\\"X\\"}}'"
            return subprocess.Popen(cmd, shell=True)
        """)
    launch = only_launch(s)
    assert values(launch)[:6] == ["vllm", "serve", "{model}", "--port", "{port}", "--kv-transfer-config"]
    assert launch.argv[2].dynamic and raw(s, launch.argv[2].span) == "{model}"
    port = launch.flag_value("--port")
    assert port.dynamic and raw(s, port.span) == "{port}"
    kv = launch.flag_value("--kv-transfer-config")
    assert not kv.dynamic and json.loads(kv.value) == {"kv_connector": "X"}
    assert raw(s, kv.span) == """'{{\\"kv_connector\\":\\"X\\"}}'"""
    assert launch.context == "python launcher launch()"


def test_fstring_argv_item():
    s = src("""\
        subprocess.run(["vllm", "serve", m, f"--port={port}", "--max-model-len", f"{n}"])
        """)
    launch = only_launch(s)
    port = launch.argv[3]
    assert port.value == "--port={port}" and port.dynamic
    assert raw(s, port.span) == 'f"--port={port}"'
    assert launch.has_flag("--port")
    assert launch.flag_value("--max-model-len").value == "{n}"
    assert launch.append_site.template == ', "{}"'


def test_concatenated_shell_command_is_not_editable():
    s = src("""\
        os.system("vllm serve " + model + " --port 8000 --foo " + x)
        """)
    launch = only_launch(s)
    assert values(launch) == ["vllm", "serve", "{model}", "--port", "8000", "--foo", "{x}"]
    assert launch.argv[2].dynamic
    assert launch.argv[-1].span is None or raw(s, launch.argv[-1].span) == "x"
    assert launch.append_site is None and launch.not_editable


def test_format_and_percent_placeholders():
    s = src("""\
        os.system("vllm serve {} --port {}".format(m, p))
        os.system("vllm serve %s --port %d" % (m, p))
        """)
    pf = parse_python(s)
    assert [values(l) for l in pf.launches] == [["vllm", "serve", "{}", "--port", "{}"],
                                                ["vllm", "serve", "%s", "--port", "%d"]]
    assert all(l.flag_value("--port").dynamic for l in pf.launches)


def test_triple_quoted_script_in_bash_c():
    s = src('''\
        SCRIPT = """
        export VLLM_D=4
        exec vllm serve m \\\\
          --port 1
        """
        subprocess.run(["bash", "-c", SCRIPT])
        ''')
    pf = parse_python(s)
    launch = only_launch(s)
    assert values(launch) == ["vllm", "serve", "m", "--port", "1"]
    assert launch.env_value("VLLM_D") == "4"
    out = apply(s.text, env_by_name(pf)["VLLM_D"].removal)
    assert "VLLM_D" not in out and "exec vllm serve m" in out
    compile(out, "x.py", "exec")


# -- environment ----------------------------------------------------------------------------------

ENV_SOURCE = """\
import os, subprocess

os.environ["VLLM_USE_V1"] = "1"
os.environ.setdefault("HF_HOME", "/data/hf")  # cache
os.environ.update({"VLLM_A": "a", "VLLM_B": "b"})
os.environ.update(VLLM_C="c", VLLM_D=str(d))


def main(port):
    if port:
        os.environ["VLLM_PORT"] = str(port)
    env = {**os.environ, "VLLM_E": "e", "VLLM_F": "f"}
    env2 = {
        **os.environ,
        "VLLM_G": "g",  # why
        "VLLM_H": "h"
    }
    env["VLLM_I"] = "i"; x = 1
    subprocess.Popen(["vllm", "serve", "m"], env={"VLLM_J": "j"})
"""


@pytest.fixture
def env_pf():
    return parse_python(src(ENV_SOURCE, dedent=False))


def test_env_entries(env_pf):
    entries = env_by_name(env_pf)
    assert list(entries) == ["VLLM_USE_V1", "HF_HOME", "VLLM_A", "VLLM_B", "VLLM_C", "VLLM_D", "VLLM_PORT",
                             "VLLM_E", "VLLM_F", "VLLM_G", "VLLM_H", "VLLM_I", "VLLM_J"]
    assert entries["VLLM_USE_V1"].value == "1" and entries["VLLM_USE_V1"].origin == "python os.environ"
    assert entries["VLLM_D"].value is None and entries["VLLM_PORT"].value is None
    assert entries["VLLM_E"].origin == "python env dict"
    assert entries["VLLM_J"].origin == "python env= argument"
    assert entries["HF_HOME"].line == 4
    text = ENV_SOURCE
    assert raw(env_pf.source, entries["VLLM_USE_V1"].span) == 'os.environ["VLLM_USE_V1"] = "1"'
    assert raw(env_pf.source, entries["VLLM_E"].span) == '"VLLM_E": "e"'
    assert raw(env_pf.source, entries["VLLM_C"].span) == 'VLLM_C="c"'
    # every env setting of the file reaches the (only) launch
    launch = env_pf.launches[0]
    assert [e.name for e in launch.env] == list(entries)
    assert launch.env_value("VLLM_B") == "b"
    assert text == env_pf.source.text


REMOVED = {
    "VLLM_USE_V1": ('os.environ["VLLM_USE_V1"] = "1"\n', ""),
    "HF_HOME": ('os.environ.setdefault("HF_HOME", "/data/hf")  # cache\n', ""),
    "VLLM_A": ('update({"VLLM_A": "a", "VLLM_B": "b"})', 'update({"VLLM_B": "b"})'),
    "VLLM_B": ('update({"VLLM_A": "a", "VLLM_B": "b"})', 'update({"VLLM_A": "a"})'),
    "VLLM_C": ('update(VLLM_C="c", VLLM_D=str(d))', 'update(VLLM_D=str(d))'),
    "VLLM_D": ('update(VLLM_C="c", VLLM_D=str(d))', 'update(VLLM_C="c")'),
    "VLLM_PORT": ('os.environ["VLLM_PORT"] = str(port)', "pass"),
    "VLLM_E": ('{**os.environ, "VLLM_E": "e", "VLLM_F": "f"}', '{**os.environ, "VLLM_F": "f"}'),
    "VLLM_F": ('{**os.environ, "VLLM_E": "e", "VLLM_F": "f"}', '{**os.environ, "VLLM_E": "e"}'),
    "VLLM_G": ('        "VLLM_G": "g",  # why\n', ""),
    "VLLM_H": ('        "VLLM_H": "h"\n', ""),
    "VLLM_I": ('env["VLLM_I"] = "i"; x = 1', "x = 1"),
    "VLLM_J": ('env={"VLLM_J": "j"}', "env={}"),
}


@pytest.mark.parametrize("name", sorted(REMOVED))
def test_env_removal(env_pf, name):
    entry = env_by_name(env_pf)[name]
    assert entry.removal
    out = apply(ENV_SOURCE, entry.removal)
    before, after = REMOVED[name]
    assert ENV_SOURCE.count(before) == 1
    assert out == ENV_SOURCE.replace(before, after)
    compile(out, "x.py", "exec")


def test_env_removal_all_at_once(env_pf):
    edits = [ed for e in env_pf.env if e.name not in ("VLLM_A", "VLLM_C", "VLLM_E", "VLLM_G") for ed in e.removal]
    out = apply(ENV_SOURCE, edits)
    compile(out, "x.py", "exec")
    assert "VLLM_B" not in out and "VLLM_H" not in out and "VLLM_A" in out
    assert 'env2 = {\n        **os.environ,\n        "VLLM_G": "g",  # why\n    }\n' in out


def test_env_dict_call_and_named_env_forms():
    s = src("""\
        my_env = os.environ.copy()
        my_env["VLLM_X"] = "1"
        my_env.update({"VLLM_Y": "2"})
        child_env = dict(os.environ, VLLM_Z="3")
        os.putenv("VLLM_W", "4")
        subprocess.run(["vllm", "serve", "m"], env=my_env)
        """)
    pf = parse_python(s)
    entries = env_by_name(pf)
    assert {n: e.value for n, e in entries.items()} == {"VLLM_X": "1", "VLLM_Y": "2", "VLLM_Z": "3", "VLLM_W": "4"}
    out = apply(s.text, entries["VLLM_Z"].removal)
    assert "child_env = dict(os.environ)\n" in out
    out = apply(s.text, entries["VLLM_W"].removal)
    assert "putenv" not in out
    assert [e.name for e in pf.launches[0].env] == ["VLLM_X", "VLLM_Y", "VLLM_Z", "VLLM_W"]


def test_env_sole_statement_of_a_block_becomes_pass():
    s = src("""\
        for i in range(2):
            os.environ["VLLM_A"] = "1"
        if x: os.environ["VLLM_B"] = "2"
        """)
    pf = parse_python(s)
    out = apply(s.text, [ed for e in pf.env for ed in e.removal])
    assert out == "for i in range(2):\n    pass\nif x: pass\n"


def test_shell_env_reaches_only_its_launch_python_env_reaches_all():
    s = src("""\
        os.environ["VLLM_P"] = "1"
        subprocess.run("export VLLM_S=1; vllm serve a", shell=True)
        subprocess.run(["vllm", "serve", "b"])
        """)
    pf = parse_python(s)
    a, b = pf.launches
    assert [e.name for e in a.env] == ["VLLM_P", "VLLM_S"]
    assert [e.name for e in b.env] == ["VLLM_P"]
    assert {e.name for e in pf.env} == {"VLLM_P", "VLLM_S"}


# -- text details -----------------------------------------------------------------------------------

def test_crlf_source():
    text = ('import os\r\nos.environ["VLLM_A"] = "1"\r\n'
            'cmd = [\r\n    "vllm",\r\n    "serve",\r\n    "m",\r\n]\r\n'
            'os.system("vllm serve n --port 1")\r\n')
    s = src(text, dedent=False)
    pf = parse_python(s)
    lst, sh = pf.launches
    assert raw(s, lst.span) == '"vllm"' and lst.line == 4
    assert raw(s, lst.argv[2].span) == '"m"'
    out = apply(text, [lst.append_edit("--x")])
    assert out == text.replace('    "m",\r\n', '    "m",\r\n    "--x",\r\n')
    assert raw(s, sh.flag_value("--port").span) == "1" and sh.line == 8
    out = apply(text, pf.env[0].removal)
    assert out == text.replace('os.environ["VLLM_A"] = "1"\r\n', "")


def test_non_ascii_before_the_launch():
    s = src("""\
        GREETING = "héllo wörld 😀 – 日本語"  # ✓
        subprocess.run(["vllm", "serve", "modèle", "--served-model-name", "名前"]); os.system("vllm serve ü --port 7")
        """)
    pf = parse_python(s)
    lst, sh = pf.launches
    assert raw(s, lst.span) == '"vllm"'
    assert raw(s, lst.argv[2].span) == '"modèle"'
    assert raw(s, lst.flag_value("--served-model-name").span) == '"名前"'
    assert raw(s, sh.argv[2].span) == "ü" and raw(s, sh.flag_value("--port").span) == "7"
    assert lst.line == 2
    out = apply(s.text, [lst.append_edit("--x")])
    assert '"--served-model-name", "名前", "--x"]);' in out


@pytest.mark.parametrize("text,line", [
    ("import os\n\ndef f(:\n    pass\n", 3),
    ("x = 1\ny = (\n", 2),
    ('cmd = ["vllm", "serve"\nz = 1\n', 1),
])
def test_syntax_error(text, line):
    with pytest.raises(ParseError) as err:
        parse_python(src(text, dedent=False))
    assert err.value.line == line
    assert str(err.value).startswith("Python syntax error")


def test_mentions_vllm_but_launches_nothing():
    s = src("""\
        # vllm serve is started elsewhere
        from vllm import LLM, SamplingParams
        VLLM_URL = "http://localhost:8000/v1"
        llm = LLM(model="m", tensor_parallel_size=2)
        print(llm.generate(["hello"], SamplingParams()))
        """)
    pf = parse_python(s)
    # the comment and the URL are not launches; the engine built in-process is (issue 13)
    assert [(l.kind, l.line, [a.value for a in l.argv]) for l in pf.launches] == \
        [("engine", 4, ["LLM", "--model=m", "--tensor-parallel-size=2"])]
    assert pf.env == []


def test_form_feed_and_tab_indentation_keep_exact_spans():
    text = ('import os\n\x0c\ndef f():\n\tcmd = ["vllm",\t"serve", "m"]\n'
            '\x0c\tos.environ["VLLM_A"] = "1"\n\tsubprocess.run(cmd)\n')
    s = src(text, dedent=False)
    pf = parse_python(s)
    launch = only_launch(s)
    assert [raw(s, a.span) for a in launch.argv] == ['"vllm"', '"serve"', '"m"']
    assert raw(s, pf.env[0].span) == 'os.environ["VLLM_A"] = "1"'
    out = apply(text, pf.env[0].removal)
    assert out == text.replace('\x0c\tos.environ["VLLM_A"] = "1"\n', "")


def test_form_feed_before_spaces_in_a_block_keeps_exact_spans():
    # ast's columns are UTF-8 offsets from the line start, form feed included (libcst restarted
    # them at the form feed and this setting was lost)
    text = 'import os\r\nif x:\r\n\x0c    os.environ["Q"] = "2"\r\n    y = 1\r\n'
    s = src(text, dedent=False)
    pf = parse_python(s)
    assert [(e.name, e.value, raw(s, e.span)) for e in pf.env] == [("Q", "2", 'os.environ["Q"] = "2"')]
    assert apply(text, pf.env[0].removal) == 'import os\r\nif x:\r\n    y = 1\r\n'


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 701 f-strings")
def test_pep701_fstrings_reuse_the_quote():
    s = src('''\
        import os
        os.system(f"vllm serve {m["a"]} --x {f"{y}"} --port 8000")
        ''')
    launch = only_launch(s)
    assert [(a.value, raw(s, a.span)) for a in launch.argv] == [
        ("vllm", "vllm"), ("serve", "serve"), ('{m["a"]}', '{m["a"]}'), ("--x", "--x"),
        ('{f"{y}"}', '{f"{y}"}'), ("--port", "--port"), ("8000", "8000")]


def test_fragments_and_loops_are_not_launches():
    s = src("""\
        VLLM = "vllm serve"
        for word in ["vllm", "serve"]:
            pass
        words = [w for w in ("vllm", "serve")]
        """)
    assert parse_python(s).launches == []


EVERYTHING = '''\
import json, os, subprocess, sys

os.environ["VLLM_A"] = "1"; os.environ["VLLM_B"] = "2"
os.environ.update(
    VLLM_C="3",
    VLLM_D="4",
)
if True: os.environ.setdefault("VLLM_E", "5")


class Launcher:
    def prefill(self, model):
        env = {"VLLM_F": "6", **os.environ}
        self.cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
                    "--model", model, "--kv-transfer-config",
                    json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}),]
        self.cmd += ('--port', '8100')
        return subprocess.Popen(self.cmd, env=env)

    def decode(self, model):
        script = f"""
            export VLLM_G=7
            VLLM_H=8 exec vllm serve {model} \\\\
                --port 8200 --kv-transfer-config '{{"kv_connector":"NixlConnector"}}'
        """
        return subprocess.Popen(["bash", "-lc", script], env=dict(os.environ, VLLM_I="9"))


def proxy():
    os.system("python disagg_proxy_multiturn.py --prefiller-hosts h1 --decoder-hosts h2")
'''


def test_every_edit_keeps_python_valid():
    s = src(EVERYTHING, dedent=False)
    compile(EVERYTHING, "x.py", "exec")
    pf = parse_python(s)
    assert sorted(l.kind for l in pf.launches) == [API_SERVER, PROXY, SERVE]
    names = [e.name for e in pf.env]
    assert names[:6] == ["VLLM_A", "VLLM_B", "VLLM_C", "VLLM_D", "VLLM_E", "VLLM_F"]
    assert {"VLLM_G", "VLLM_H", "VLLM_I"} <= set(names)
    for entry in pf.env:
        assert entry.removal, entry.name
        out = apply(EVERYTHING, entry.removal)
        compile(out, "x.py", "exec")
        assert entry.name not in out
    for launch in pf.launches:
        assert launch.not_editable is None
        compile(apply(EVERYTHING, [launch.append_edit("--enable-prefix-caching")]), "x.py", "exec")
    serve = next(l for l in pf.launches if l.kind == SERVE)
    assert serve.context == "python launcher Launcher.decode()"
    assert serve.env_value("VLLM_G") == "7" and serve.env_value("VLLM_H") == "8"
    assert serve.env_value("VLLM_A") == "1"
    assert json.loads(serve.flag_value("--kv-transfer-config").value) == {"kv_connector": "NixlConnector"}
    api = next(l for l in pf.launches if l.kind == API_SERVER)
    assert api.flag_value("--port").value == "8100"
    out = apply(EVERYTHING, [api.append_edit("--x")])
    assert "self.cmd += ('--port', '8100', '--x')" in out


LAUNCHER = '''\
import os
import subprocess

os.environ["VLLM_ATTENTION_BACKEND"] = "FLASH_ATTN"
cmd = ["vllm", "serve", "meta-llama/Llama-3.1-8B", "--swap-space", "4", "--port", "8000"]
subprocess.run(cmd, env={"VLLM_USE_V1": "1"})
os.system(f"vllm serve {model} --max-model-len 4096 --disable-log-requests")
'''


@pytest.mark.parametrize("args", [["check", "--format", "json"], ["check", "--fix", "--diff"],
                                  ["launches", "--format", "json"]])
def test_python_check_does_not_import_libcst(tmp_path, args):
    """The Python front end is Python's own `ast`: checking (and fixing) a launcher never
    imports libcst (slow to import and to parse with)."""
    import subprocess
    import sys
    (tmp_path / "launch.py").write_text(LAUNCHER)
    code = textwrap.dedent(f"""
        import sys
        from vllmlint.cli import main
        try:
            main({args + [str(tmp_path)]!r}, standalone_mode=False)
        except SystemExit:
            pass
        assert "libcst" not in sys.modules, sorted(m for m in sys.modules if "libcst" in m)
        print("LAUNCHES-OK")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "LAUNCHES-OK" in proc.stdout
    if args[0] == "launches":
        assert "--swap-space" in proc.stdout and "--max-model-len" in proc.stdout


def _codes(tmp_path, text: str, *args: str) -> list[tuple[int, str, str]]:
    from click.testing import CliRunner
    from vllmlint.cli import main

    (tmp_path / "serve.py").write_text(textwrap.dedent(text))
    out = CliRunner().invoke(main, ["check", "--format", "json", *args, str(tmp_path)], catch_exceptions=False)
    return [(r["line"], r["code"], r["message"]) for r in json.loads(out.stdout)]


def test_engine_keywords_are_field_names_not_abbreviations(tmp_path):
    """Found on robbypambudi/ray-vllm-benchmark: `LLM(**{"disable_log_stats": False})` was "not a
    vLLM option" (read as `--no-disable-log-stats`, which the command line lacks), and `device=`
    was read as an abbreviation of `--device-ids`: engine arguments take field names exactly."""
    found = _codes(tmp_path, """\
        from vllm import LLM
        config = {"model": "m", "disable_log_stats": False, "enforce_eager": False, "device": "cuda",
                  "max_model": 4096}
        llm = LLM(**config)
        """, "--target-version", "0.30.0")
    assert not [f for f in found if "disable-log-stats" in f[2] or "enforce-eager" in f[2]], found
    [device] = [f for f in found if "`device`" in f[2]]          # named as written (2026-12-05)
    assert device[1] == "VL302" and "--device-ids" not in device[2] and "device_ids" not in device[2]
    [abbrev] = [f for f in found if "max-model" in f[2]]
    assert abbrev[1] == "VL301" and "abbreviation" not in abbrev[2]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 reads PEP 701 f-strings")
def test_a_pep_701_f_string_says_which_python_reads_it():
    with pytest.raises(ParseError) as err:
        parse_python(src('print(f"{", ".join(["a", "b"])}")\nimport vllm\n'))
    assert "run vllmlint on 3.12 or later" in err.value.reason


def test_a_string_under_a_descriptive_dict_key_is_text_not_a_launch():
    """Found on robbypambudi/ray-vllm-benchmark: `"deployment_equivalent": f"vllm serve ..."` in a
    status dict was a launch, and `migrate` appended a flag to it. A key with a word such as
    `equivalent`, `example`, `description` holds text about a command; `command` still runs one."""
    pf = parse_python(src('''\
        import subprocess
        def info(model):
            return {"deployment_equivalent": f"vllm serve {model} --tensor-parallel-size 2",
                    "example": "vllm serve m --swap-space 4",
                    "usage_hint": "vllm serve m --port 8000"}
        JOBS = {"command": "vllm serve m --swap-space 4"}
        def run():
            subprocess.run(JOBS["command"], shell=True)
        '''))
    assert [values(l)[:4] for l in pf.launches] == [["vllm", "serve", "m", "--swap-space"]]


def test_a_dict_under_an_assert_is_still_prose():
    pf = parse_python(src('''\
        import vllm
        def test_x(build):
            assert build() == {"command": "vllm serve m --swap-space 4"}
        '''))
    assert pf.launches == []


def test_a_modal_image_env_is_the_env_of_the_apps_launches(tmp_path):
    """Found on DeEvade/ia150x-simpilot (the shape of Modal's own vLLM example):
    `vllm_image.env({"VLLM_USE_V1": "1"})` is the environment `serve()` runs vLLM with; a removal
    leaves valid Python. Without `import modal`, an `.env(...)` call is nobody's environment."""
    from click.testing import CliRunner
    from vllmlint.cli import main

    app = textwrap.dedent('''\
        import subprocess

        import modal

        image = modal.Image.from_registry("vllm/vllm-openai:v0.30.0").env({"HF_HUB_ENABLE_HF_TRANSFER": "1"})
        image = image.env({"VLLM_USE_V1": "1"})
        app = modal.App("x")


        @app.function(image=image)
        def serve():
            subprocess.Popen(["vllm", "serve", "m", "--port", "8000"])
        ''')
    (tmp_path / "app.py").write_text(app)
    pf = parse_python(SourceFile(tmp_path / "app.py", "app.py", app, "python"))
    [launch] = pf.launches
    assert [(e.name, e.value) for e in launch.env] == [("HF_HUB_ENABLE_HF_TRANSFER", "1"), ("VLLM_USE_V1", "1")]
    CliRunner().invoke(main, ["check", "--fix", "--target-version", "0.30.0", str(tmp_path)], catch_exceptions=False)
    fixed = (tmp_path / "app.py").read_text()
    assert 'image = image.env({})' in fixed
    compile(fixed, "app.py", "exec")
    plain = app.replace("import modal\n", "import modalish as modal\n")
    assert [l.env for l in parse_python(SourceFile(tmp_path / "b.py", "b.py", plain, "python")).launches] == [[]]
