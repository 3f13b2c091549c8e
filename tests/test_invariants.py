"""Fix safety: never lose a byte.

Over every fixture case, the demo, the migrate chain and every file of ../shared/corpus (in a
writable temp copy), `check --fix --unsafe-fixes` (and `migrate`) must leave:
  * every fixed file parsing again;
  * every byte outside the spans the engine said it edits identical (tests/fix_invariants.py
    explains how that is decided from the bytes actually written);
  * CRLF, BOM, a missing trailing newline, tab indentation and the file mode as they were;
  * nothing for a second `--fix` to change;
  * no temp file behind.
Then the write path itself: atomic (temp file in the same folder, then rename), symlinks never
followed out of the tree and a link inside it fixed once (as its target), read-only files
reported and left whole.
"""
from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from fix_invariants import (EditRecorder, check_fix_invariants, kinds_of, leftover_temp_files, modes, snapshot,
                            writable_copy)
from vllmlint.lint import sources
from vllmlint.cli import main

from corpus_expect import assert_only_broken_files_fail

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CASES = sorted(p for p in FIXTURES.glob("VL*/*") if (p / "input").is_dir())
CORPUS = ROOT.parent / "shared" / "corpus" / "files"

BAD_SCRIPT = "#!/bin/sh\nexport VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\nvllm serve m --port 8000\n"
FIXED_SCRIPT = "#!/bin/sh\nvllm serve m --port 8000 --enable-scale-out\n"


def invoke(*args: str):
    """The command, and for `check`: with the target named, which is the release the shapes here
    run (they name none themselves, and these tests are about how fixes are written)."""
    if args[:1] == ("check",) and "--target-version" not in args:
        args = ("check", "--target-version", "0.30.0", *args[1:])
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def fix_twice(tree: Path, monkeypatch, args: list[str]) -> tuple[int, object]:
    """Run `args` (a fixing command) twice on `tree` with every invariant checked. Returns the
    number of files the first run changed, and the first result."""
    monkeypatch.chdir(tree)
    before, mode_before, kinds = snapshot(tree), modes(tree), kinds_of(tree)
    recorder = EditRecorder().install(monkeypatch)
    first = invoke(*args)
    assert "Traceback" not in first.output and "internal error" not in first.stderr, first.output
    assert "would not parse" not in first.stderr, first.stderr
    changed = check_fix_invariants(before, snapshot(tree), recorder, mode_before, kinds)
    assert not leftover_temp_files(tree)

    after = snapshot(tree)
    recorder.calls.clear()
    again = invoke(*args)
    assert snapshot(tree) == after, "a second run must change 0 bytes"
    assert not [c for c in recorder.calls if c.after != c.before] or "migrate" in args, "second run edited"
    assert again.exit_code == first.exit_code or first.exit_code == 1
    return changed, first


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_fixture_fix_invariants(case: Path, tmp_path: Path, monkeypatch):
    tree = writable_copy(case / "input", tmp_path / "tree")
    extra = shlex.split((case / "args.txt").read_text()) if (case / "args.txt").exists() else []
    for i, p in enumerate(sorted(q for q in tree.rglob("*") if q.is_file() and not q.is_symlink())):
        p.chmod((0o640, 0o755, 0o600)[i % 3])       # modes must survive
    _, result = fix_twice(tree, monkeypatch, ["check", "--fix", "--unsafe-fixes", *extra, "."])
    assert result.exit_code in (0, 1), result.output


@pytest.mark.parametrize("name,to", [("demo", "0.30.0"), ("migrate-chain", "0.33.0")])
def test_migrate_invariants(name: str, to: str, tmp_path: Path, monkeypatch):
    tree = writable_copy(FIXTURES / name, tmp_path / "tree")
    changed, result = fix_twice(tree, monkeypatch, ["migrate", "--to", to, "."])
    assert result.exit_code in (0, 1), result.output
    assert changed >= 3


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not here")
@pytest.mark.parametrize("command", [["check", "--fix", "--unsafe-fixes", "."],
                                     ["migrate", "--from", "0.29.0", "--to", "0.30.0", "."]],
                         ids=["check-fix", "migrate"])
def test_corpus_fix_invariants(command, tmp_path: Path, monkeypatch):
    tree = writable_copy(CORPUS, tmp_path / "corpus")
    files = [p for p in tree.rglob("*") if p.is_file()]
    assert len(files) >= 60
    changed, result = fix_twice(tree, monkeypatch, command)
    assert_only_broken_files_fail(result)
    assert changed >= 10, "the corpus has fixable findings: the invariants must see real edits"


# -- styles a fix must keep -----------------------------------------------------------------

STYLED = {
    # CRLF, no trailing newline, tab indentation
    "crlf.sh": b"#!/bin/sh\r\nif true; then\r\n\texport VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\r\n"
               b"\tvllm serve m \\\r\n\t\t--port 8000\r\nfi",
    # BOM + CRLF
    "bom.yaml": b"\xef\xbb\xbfservices:\r\n  vllm:\r\n    image: vllm/vllm-openai:v0.30.0\r\n    environment:\r\n"
                b"      - VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1\r\n    command: [\"--model\", \"m\"]\r\n",
    # no trailing newline, the setting on the last line
    "Dockerfile": b"FROM vllm/vllm-openai:v0.30.0\nCMD [\"--model\", \"m\"]\nENV VLLM_ENABLE_SCALE_OUT_ENDPOINTS=1",
    # tabs inside a Python launcher, CRLF
    "launch.py": b"import os, subprocess\r\n\r\nif True:\r\n\tos.environ[\"VLLM_ENABLE_SCALE_OUT_ENDPOINTS\"] = \"1\"\r\n"
                 b"\tsubprocess.run([\"vllm\", \"serve\", \"m\"])\r\n",
    # k8s, non-ASCII comment, no trailing newline
    "deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: llm}  # modèle\nspec:\n  template:\n"
                   "    spec:\n      containers:\n      - name: vllm\n        image: vllm/vllm-openai:v0.30.0\n"
                   "        args: [\"--model\", \"m\"]\n        env:\n        - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS\n"
                   "          value: \"1\"".encode(),
}


def test_styles_survive_a_fix(tmp_path: Path, monkeypatch):
    tree = tmp_path / "styled"
    tree.mkdir()
    for name, data in STYLED.items():
        (tree / name).write_bytes(data)
    (tree / "crlf.sh").chmod(0o750)
    changed, result = fix_twice(tree, monkeypatch, ["check", "--fix", "."])
    assert changed == len(STYLED), result.output        # every file really got a fix
    out = {name: (tree / name).read_bytes() for name in STYLED}
    assert out["crlf.sh"].endswith(b"--enable-scale-out\r\nfi") and b"\tvllm serve" in out["crlf.sh"]
    assert out["bom.yaml"].startswith(b"\xef\xbb\xbf") and b"\n" not in out["bom.yaml"].replace(b"\r\n", b"")
    assert not out["Dockerfile"].endswith(b"\n") and b"VLLM_ENABLE" not in out["Dockerfile"]
    assert b"\t" in out["launch.py"] and b"\n" not in out["launch.py"].replace(b"\r\n", b"")
    assert "modèle".encode() in out["deploy.yaml"] and not out["deploy.yaml"].endswith(b"\n")
    assert (tree / "crlf.sh").stat().st_mode & 0o777 == 0o750


# -- the write path ---------------------------------------------------------------------------

def test_write_is_atomic_temp_in_same_folder_then_rename(tmp_path: Path, monkeypatch):
    script = tmp_path / "launch.sh"
    script.write_text(BAD_SCRIPT)
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        src, dst = Path(src), Path(dst)
        # at rename time: the temp file is complete, the config still whole
        seen.append((src.parent == dst.parent, src.name.startswith(".launch.sh."), src.read_text(), dst.read_text()))
        return real_replace(src, dst)

    monkeypatch.setattr(sources.os, "replace", spy)
    result = invoke("check", "--fix", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert seen == [(True, True, FIXED_SCRIPT, BAD_SCRIPT)]
    assert script.read_text() == FIXED_SCRIPT and not leftover_temp_files(tmp_path)


def test_failed_write_leaves_file_whole_and_no_temp(tmp_path: Path, monkeypatch):
    script = tmp_path / "launch.sh"
    script.write_text(BAD_SCRIPT)
    other = tmp_path / "other.sh"
    other.write_text(BAD_SCRIPT)

    def broken(src, dst):
        if Path(dst).name == "launch.sh":
            raise OSError(28, "No space left on device")
        return os.rename(src, dst)

    monkeypatch.setattr(sources.os, "replace", broken)
    result = invoke("check", "--fix", str(tmp_path))
    assert result.exit_code == 2
    assert f"{tmp_path}/launch.sh:1:1: E001 error: not written: No space left on device" in result.stderr.splitlines()
    assert script.read_text() == BAD_SCRIPT and other.read_text() == FIXED_SCRIPT
    assert not leftover_temp_files(tmp_path)


def test_read_only_file_reported_not_written(tmp_path: Path):
    ro = tmp_path / "ro.sh"
    ro.write_text(BAD_SCRIPT)
    ro.chmod(0o444)
    rw = tmp_path / "rw.sh"
    rw.write_text(BAD_SCRIPT)
    result = invoke("check", "--fix", str(tmp_path))
    assert result.exit_code == 2
    assert f"{tmp_path}/ro.sh:1:1: E001 error: not written: the file is read-only" in result.stderr.splitlines()
    assert result.stdout.splitlines()[-1].endswith("; 1 file could not be written."), result.stdout
    assert ro.read_text() == BAD_SCRIPT and ro.stat().st_mode & 0o777 == 0o444
    assert rw.read_text() == FIXED_SCRIPT
    assert not leftover_temp_files(tmp_path)


def test_symlinks_inside_fixed_once_outside_never(tmp_path: Path, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "launch.sh").write_text(BAD_SCRIPT)
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    (tree / "scripts" / "launch.sh").write_text(BAD_SCRIPT)
    (tree / "a-link.sh").symlink_to("scripts/launch.sh")         # sorts before its target
    (tree / "escape.sh").symlink_to(outside / "launch.sh")
    (tree / "dir-escape").symlink_to(outside, target_is_directory=True)
    monkeypatch.chdir(tree)

    report = invoke("check", "-q", ".")
    assert [l.split(":")[0] for l in report.stdout.splitlines()] == ["scripts/launch.sh"], report.output

    recorder = EditRecorder().install(monkeypatch)
    result = invoke("check", "--fix", ".")
    assert result.exit_code == 0, result.output
    assert "Fixed 1 finding in 1 file." in result.stderr
    assert (tree / "scripts" / "launch.sh").read_text() == FIXED_SCRIPT
    assert (tree / "a-link.sh").is_symlink() and os.readlink(tree / "a-link.sh") == "scripts/launch.sh"
    assert (outside / "launch.sh").read_text() == BAD_SCRIPT, "a link out of the tree was followed"
    assert (tree / "escape.sh").is_symlink()
    assert {c.path.name for c in recorder.calls} == {"launch.sh"} and len(recorder.calls) == 1


def test_symlink_named_on_the_command_line_keeps_the_link(tmp_path: Path):
    (tmp_path / "real.sh").write_text(BAD_SCRIPT)
    (tmp_path / "link.sh").symlink_to("real.sh")
    result = invoke("check", "--fix", str(tmp_path / "link.sh"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "link.sh").is_symlink() and (tmp_path / "real.sh").read_text() == FIXED_SCRIPT


def test_write_atomic_refuses_links_and_stale_content(tmp_path: Path):
    target = tmp_path / "t.sh"
    target.write_text("a\n")
    link = tmp_path / "l.sh"
    link.symlink_to(target)
    with pytest.raises(OSError, match="symbolic link"):
        sources.write_atomic(link, b"b\n")
    with pytest.raises(sources.FileChanged):
        sources.write_atomic(target, b"b\n", expect=b"something else\n")
    assert target.read_text() == "a\n" and link.is_symlink() and not leftover_temp_files(tmp_path)
    sources.write_atomic(target, b"b\n", expect=b"a\n")
    assert target.read_text() == "b\n"


def test_diff_and_check_never_write(tmp_path: Path, monkeypatch):
    tree = writable_copy(FIXTURES / "demo", tmp_path / "demo")
    before, mode_before = snapshot(tree), modes(tree)
    calls = []
    monkeypatch.setattr(sources, "write_atomic", lambda *a, **k: calls.append(a))
    for args in (["check", str(tree)], ["check", "--diff", str(tree)], ["migrate", "--to", "0.30.0", "--diff", str(tree)],
                 ["launches", str(tree)]):
        invoke(*args)
    assert calls == [] and snapshot(tree) == before and modes(tree) == mode_before
    shutil.rmtree(tree)


# -- the checker itself must not be vacuous ----------------------------------------------------

def test_checker_accepts_multi_pass_edits_and_catches_stray_changes():
    from fix_invariants import Applied, check_outside_edits

    p = Path("f")
    orig = "one two three four\n"
    pass1 = Applied(p, orig, [(4, 7, "2"), (18, 18, " five")], "one 2 three four five\n")
    dropped = Applied(p, pass1.after, [(0, 3, "???")], "??? 2 three four five\n")      # refused by re-parse
    pass2 = Applied(p, pass1.after, [(0, 3, "1"), (6, 11, "")], "1 2  four five\n")
    check_outside_edits(orig, pass2.after, [pass1, dropped, pass2])
    with pytest.raises(AssertionError):         # one byte changed outside every edit
        check_outside_edits(orig, "1 2  fOur five\n", [pass1, dropped, Applied(p, pass1.after, pass2.edits,
                                                                                 "1 2  fOur five\n")])
    with pytest.raises(AssertionError):         # the file is not what the edits produce
        check_outside_edits(orig, "1 2  four five!\n", [pass1, pass2])


def test_checker_catches_a_writer_that_mangles_line_endings(tmp_path: Path, monkeypatch):
    from fix_invariants import check_fix_invariants

    (tmp_path / "launch.sh").write_bytes(BAD_SCRIPT.replace("\n", "\r\n").encode())
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    recorder = EditRecorder().install(monkeypatch)
    real = sources.write_atomic
    monkeypatch.setattr(sources, "write_atomic",
                        lambda path, data, expect=None: real(path, data.replace(b"\r\n", b"\n"), expect))
    invoke("check", "--fix", ".")
    assert (tmp_path / "launch.sh").read_bytes().count(b"\r") == 0      # the broken writer did write
    with pytest.raises(AssertionError):
        check_fix_invariants(before, snapshot(tmp_path), recorder)
