"""What the start-up work (issue 34, docs/development/startup.md) changed in shared paths, held
to the old behaviour: the embedded door loads front ends on demand, a one-file check loads only
the front ends its file needs, per-file-ignores answers the same when cached, and VL307's
shortcut (equal default texts are not parsed) finds the same changed defaults."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"


def _modules_after_check(path: Path) -> set[str]:
    """The modules a fresh interpreter holds after `check PATH` (the pre-commit call)."""
    code = textwrap.dedent(f"""
        import io, contextlib, sys
        from vllmlint.lint.checkrun import run_check
        with contextlib.redirect_stdout(io.StringIO()):
            run_check(paths=({str(path)!r},))
        print(" ".join(sorted(sys.modules)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=path.parent, env={"VLLMLINT_JOBS": "1", "PATH": "/usr/bin:/bin"})
    return set(out.stdout.split())


def test_a_dockerfile_check_imports_no_yaml_or_python_front_end(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM vllm/vllm-openai:v0.27.1\nENV VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\n"
                          "CMD [\"vllm\", \"serve\", \"m\"]\n")
    loaded = _modules_after_check(dockerfile)
    assert "vllmlint.parsers.dockerfile" in loaded
    assert not {"yaml", "vllmlint.parsers.yamlfile", "vllmlint.parsers.pythonfile"} & loaded


def test_the_door_loads_every_kind_on_demand():
    code = ("from vllmlint.parsers import embedded\n"
            "print(sorted(embedded.kinds()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert {"yaml", "dockerfile", "python", "shell", "apptainer"} <= set(eval(out.stdout))


def test_the_door_reads_an_embedded_kind_whose_front_end_was_never_imported():
    """A shell fragment handed to the door from a fresh interpreter: the shell front end is
    imported by the door itself, and the launch is found."""
    code = textwrap.dedent("""
        import sys
        from vllmlint.model.launch import SourceFile
        from vllmlint.parsers import embedded
        assert "vllmlint.parsers.shellscan" not in sys.modules
        text = "exec vllm serve m --port 8000\\n"
        f = SourceFile("/x/run.sh", "run.sh", text, "shell")
        parsed = embedded.read(f, "shell", 0, len(text))
        print(len(parsed.launches), parsed.launches[0].argv[0].value)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "vllm"]


def test_ignored_codes_cached_answers_as_uncached(tmp_path):
    from vllmlint.lint.config import Settings, _match, _relative

    (tmp_path / "upstream").mkdir()
    files = [tmp_path / "upstream" / "a.sh", tmp_path / "b.sh", tmp_path / "upstream" / "c" / "Dockerfile"]
    settings = Settings(root=tmp_path, per_file_ignores={"upstream/*.sh": ["VL001"], "upstream": ["VL307"],
                                                         "b.sh": ["VL301", "VL302"]})
    for _ in range(3):              # the second and third calls are answered from the cache
        for f in files:
            display = f.relative_to(tmp_path).as_posix()
            rel = _relative(f, tmp_path)
            want = [c for pat, codes in settings.per_file_ignores.items()
                    if _match(rel, pat) or _match(display, pat) for c in codes]
            assert settings.ignored_codes(display, f) == want
    assert Settings(root=tmp_path).ignored_codes("b.sh", files[1]) == []
    assert settings == Settings(root=tmp_path, per_file_ignores=dict(settings.per_file_ignores))   # cache is no field


@pytest.mark.parametrize("old,new", [("0.27.0", "0.30.0"), ("0.10.0", "0.31.0"), ("0.22.0", "0.23.0")])
def test_vl307_changed_defaults_as_when_every_default_was_parsed(old, new):
    import importlib

    from vllmlint.knowledge.catalogue import load, versions, vkey

    vl307 = importlib.import_module("vllmlint.rules.vl307_default_changed")
    if old not in versions() or new not in versions():
        pytest.skip("release not catalogued")
    o, n = load(old), load(new)
    got = vl307._changed_defaults(o, n)
    # the reference: every default parsed (the loop before the shortcut)
    between = [v for v in versions() if o.vtuple < vkey(v) <= n.vtuple]
    want = []
    dv, missing = vl307.default_value, vl307._MISSING
    for flag, entry in n.flags.items():
        if entry.get("dep") or n.json_flag(flag):
            continue
        named = "--" + str(entry.get("cfg", "")).rpartition(".")[2].replace("_", "-")
        if flag != named and named in entry.get("alias", ()) and named in n.flags:
            continue
        before = o.flags.get(flag)
        if before is None or before.get("dep"):
            continue
        was, now = dv(before.get("default")), dv(entry.get("default"))
        if was is missing or now is missing or was == now or (vl307._empty(was) and vl307._empty(now)):
            continue
        changed_in = next((v for v in between if dv(load(v).flags.get(flag, {}).get("default")) != was), n.name)
        want.append((flag, entry, before, was, now, changed_in))
    assert list(got) == want


def test_repo_file_lists_are_filtered_once(tmp_path):
    from vllmlint.lint.release_links import Repo

    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    (tmp_path / "docker-compose.yaml").write_text("services: {}\n")
    (tmp_path / "run.py").write_text("print(1)\n")
    repo = Repo(tmp_path)
    assert repo.workflows() == [tmp_path / ".github" / "workflows" / "ci.yml"]
    assert repo.composes() == [tmp_path / "docker-compose.yaml"]
    assert repo.workflows() is repo.workflows()


def _closing_quote_by_loop(s: str, i: int) -> int | None:
    """The exec-form scan before the regex: the index of the closing quote, or None."""
    j = i + 1
    while j < len(s) and s[j] != '"':
        j += 2 if s[j] == "\\" else 1
    return None if j >= len(s) else j


def test_exec_form_string_scan_as_the_loop():
    import itertools
    import random

    from vllmlint.parsers.dockerfile import _JSON_STRING_RE

    rng = random.Random(34)
    alphabet = ['"', "\\", "a", "u", " ", "\n", "]", ","]
    cases = ['"' + "".join(p) for n in range(6) for p in itertools.product(alphabet, repeat=n)]
    cases += ['"' + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    for s in cases:
        m = _JSON_STRING_RE.match(s, 0)
        assert (None if m is None else m.end() - 1) == _closing_quote_by_loop(s, 0), s


def test_repo_existing_answers_as_resolve(tmp_path):
    from vllmlint.lint.release_links import Repo

    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "a.yaml").write_text("image: x\n")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "conf" / "a.yaml")
    repo = Repo(tmp_path)
    for _ in range(2):
        assert repo.existing(tmp_path, "conf/a.yaml") == (tmp_path / "conf" / "a.yaml").resolve()
        assert repo.existing(tmp_path, "link.yaml") == (tmp_path / "conf" / "a.yaml").resolve()
        assert repo.existing(tmp_path / "conf", "../link.yaml") == (tmp_path / "conf" / "a.yaml").resolve()
        assert repo.existing(tmp_path, "conf") is None          # a folder is no config file
        assert repo.existing(tmp_path, "missing.yaml") is None


def test_config_name_prefilter_is_what_the_pattern_needs():
    """_named_config returns early when the text holds none of `.yml`, `.yaml`, `.json`: every
    match of CONFIG_NAME_RE holds one of them."""
    from vllmlint.lint.release_links import CONFIG_NAME_RE

    samples = ["serve --config conf/x.yaml", "a.yml b.json", "x.YAML", "cfg.json5", "no names here",
               "path/to/deploy.yaml.j2", "x.yamlfoo", ".json", "a..yml"]
    for text in samples:
        if CONFIG_NAME_RE().search(text):
            assert any(s in text for s in (".yml", ".yaml", ".json")), text


EAGER = ("import vllmlint.parsers.dockerfile, vllmlint.parsers.heredoc, vllmlint.parsers.pythonfile, "
         "vllmlint.parsers.recipes, vllmlint.parsers.shellscan, vllmlint.parsers.yamlfile\n")


@pytest.mark.parametrize("folder", ["VL001", "VL303"])
def test_lazy_front_ends_report_as_eager_ones(folder):
    """The old path (every front end imported before the run, as parsers/__init__.py did) and the
    lazy one give the same bytes, embedded content included (ConfigMap scripts, heredocs,
    `bash -c`, Python given to a shell)."""
    run = ("import sys\nfrom vllmlint.lint.checkrun import run_check\n"
           "sys.exit(run_check(paths=('.',), fmt='json'))\n")
    outs = []
    for prelude in ("", EAGER):
        proc = subprocess.run([sys.executable, "-c", prelude + run], capture_output=True, cwd=FIXTURES / folder,
                              env={"VLLMLINT_JOBS": "1", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"})
        outs.append((proc.returncode, proc.stdout, proc.stderr))
    assert outs[0][1], outs[0]
    assert outs[0] == outs[1]
