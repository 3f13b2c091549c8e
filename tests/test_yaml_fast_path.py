"""The YAML front end's fast path changes no byte a user sees (issue 34, item 1).

`VLLMLINT_YAML=pyyaml` composes every YAML text from libyaml's events in Python (the careful
composer that words every error and refuses deep nesting): the reference, the "before". The
default lets libyaml's C composer build the nodes of any text it accepts (any depth: libyaml
>= 0.2.6 refuses nesting past 1000 levels itself, and a composed tree deeper than ours allows
goes back to the careful composer), and the walkers read them. Every output format of `check`,
`migrate --diff` and `launches` must be byte-identical on the fixtures, both generated corpora
(bench/), the shared corpus and ../shared/redteam (skipped where ../shared is absent).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vllmlint.parsers import yaml_source as ys

from compared_trees import HELM_SCHEMA_NOTE, ROOT, SHARED, generate_corpora, trees  # noqa: E402

COMMANDS = [("check", "--format", fmt, ".") for fmt in ("text", "json")] \
    + [("migrate", "--to", "0.30.0", "--diff", "."), ("launches", ".")]


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    return generate_corpora(tmp_path_factory.mktemp("corpora"), 8)


def run(front_end: str, cwd: Path, args: tuple[str, ...]) -> tuple[int, str, str]:
    env = dict(os.environ, VLLMLINT_JOBS="1", NO_COLOR="1", VLLMLINT_YAML=front_end)
    proc = subprocess.run([sys.executable, "-m", "vllmlint.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd)
    return proc.returncode, proc.stdout, HELM_SCHEMA_NOTE.sub(r"\1", proc.stderr)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:-1]))
def test_fast_and_reference_front_ends_write_the_same_bytes(generated, args):
    for name, tree in trees(generated):
        fast, ref = run("", tree, args), run("pyyaml", tree, args)
        assert fast == ref, f"{name}: {' '.join(args)} differs between the fast and the PyYAML front end"
        assert fast[1].strip(), f"{name}: nothing written"


def _shape(node, seen=None):
    """A composed tree as plain data: kinds, tags, values, styles and every mark (alias-safe)."""
    seen = {} if seen is None else seen
    if id(node) in seen:
        return ("alias", seen[id(node)])
    seen[id(node)] = len(seen)
    marks = (node.start_mark.index, node.start_mark.line, node.start_mark.column,
             node.end_mark.index, node.end_mark.line, node.end_mark.column)
    if isinstance(node, ys.ScalarNode):
        return ("scalar", node.tag, node.value, node.style, marks)
    if isinstance(node, ys.SequenceNode):
        return ("seq", node.tag, node.flow_style, marks, [_shape(v, seen) for v in node.value])
    return ("map", node.tag, node.flow_style, marks, [(_shape(k, seen), _shape(v, seen)) for k, v in node.value])


def _compose(text: str, front_end: str, monkeypatch):
    monkeypatch.setattr(ys, "_FRONT_END", front_end)
    try:
        return [_shape(d) for d in ys.compose_all(text)]
    except ys.YamlError as err:
        return ("error", str(err))


DEEP = "\n# " + ":" * 1000     # more structure indicators than MAX_DEPTH: the depth is checked on the tree

SHAPES = {
    "anchors": "a: &x {k: [1, 2]}\nb: *x\nc: &y v\nd: [*y, *x]\n",
    "recursive alias": "&a [*a]\n",
    "block scalars": "a: |\n  one\n  two\nb: >-\n  folded\n  text\n\nc: |+\n  keep\n\n",
    "multi-document": "---\na: 1\n...\n---\n- b\n---\n",
    "flow": "{a: [1, {b: c}], 'd': \"e\\n\"}\n",
    "tags": "a: !!str 1\nb: !custom x\nc: ! y\nd: !!map {k: v}\n",
    "crlf": "a: 1\r\nb: |\r\n  x\r\n  y\r\n",
    "bom": "\ufeffa: 1\nb: [2]\n",
    "non-ascii": "name: modèle\nargs: [\"--x=é\", ünï]\n",
    "duplicate anchor": "a: &x 1\nb: &x 2\nc: *x\n",
    "undefined alias": "a: *nope\n",
    "bad indentation": "a:\n  b: 1\n c: 2\n",
    "tab": "a:\n\tb: 1\n",
    "control character": "a: \x07\n",
    "depth 999": "[" * 999 + "]" * 999 + DEEP,
    "depth 1000": "[" * 1000 + "]" * 1000 + DEEP,
    "block depth 1000": "- " * 1000 + "a" + DEEP,
    "deep alias": "x: &a\n  - [1]\ny: " + "[" * 998 + "*a" + "]" * 998 + DEEP,
    "deep anchor": "x: " + "[" * 998 + "&a [1]" + "]" * 998 + "\ny: *a" + DEEP,
    "big": "".join(f"---\nkind: Deployment\nspec:\n  containers:\n  - name: c{i}\n    args: [--port, '{i}']\n"
                   for i in range(300)),
}


@pytest.mark.parametrize("name", SHAPES)
def test_fast_and_reference_composers_give_the_same_tree(name, monkeypatch):
    text = SHAPES[name]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))       # _shape recurses once per level (and its list)
    try:
        assert _compose(text, "", monkeypatch) == _compose(text, "pyyaml", monkeypatch)
    finally:
        sys.setrecursionlimit(limit)


def test_deep_texts_are_composed_in_c_when_libyaml_limits_nesting(monkeypatch):
    if not ys._LIBYAML_NEST_LIMIT:
        pytest.skip("libyaml < 0.2.6: deep texts take the careful composer")
    calls = []
    real = ys._compose_in_c
    monkeypatch.setattr(ys, "_compose_in_c", lambda text: calls.append(text) or real(text))
    text = SHAPES["big"] + DEEP
    assert not ys._shallow(text)
    ys.compose_all(text)
    assert calls == [text]


@pytest.mark.parametrize("text, shallow", [
    ("a: 1\n" * 300, True),                          # few indicators, however long
    ("- x: " + "y" * 600 + "\n" + "a: 1\n" * 999, False),   # many indicators and a line too long
    ("- x: " + "y" * 400 + "\n" + "a: 1\n" * 999, True),    # many indicators, short lines, no flow
    ("[" * 500 + "]" * 500 + "\n" + "a: 1\n" * 999, False), # flow nesting on top
])
def test_shallow_bounds(text, shallow):
    assert ys._shallow(text) is shallow


def test_hint_words_start_every_hint():
    """`_hint_outside_launches` starts its regex scans at the first hint word: every match of the
    hint patterns must start with one of the words (on every YAML file of the fixtures and corpora)."""
    from vllmlint.parsers import yaml_k8s as k8s
    texts = ["docker  container run x; podman run; singularity exec a; apptainer instance b; eval x; "
             "vllm\tserve m; vllm.entrypoints.openai; disagg_proxy toy_proxy_server; evaluate"]
    for root in (ROOT / "fixtures", SHARED / "corpus" / "files", SHARED / "redteam"):
        if root.is_dir():
            texts += [p.read_text(errors="replace") for p in sorted(root.rglob("*.y*ml")) if p.is_file()]
    hits = 0
    hints = ((k8s.LAUNCH_HINT_RE(), k8s.LAUNCH_HINT_WORDS), (k8s.SCRIPT_HINT_RE(), k8s.SCRIPT_HINT_WORDS))
    for text in texts:
        for pattern, words in hints:
            for m in pattern.finditer(text):
                hits += 1
                assert text.startswith(words, m.start()), (pattern.pattern, m.group())
            first = k8s._first_word(text, words, 0, len(text))
            from_first = [m.span() for m in pattern.finditer(text, max(first, 0))]
            assert [m.span() for m in pattern.finditer(text)] == from_first
    assert hits > 9


@pytest.mark.parametrize("name", ["anchors", "block scalars", "flow", "tags", "crlf", "non-ascii"])
def test_load_data_is_safe_load(name, monkeypatch):
    """release_links reads a compose file's `build:` with load_data: libyaml's loader, the same
    data as PyYAML's pure-Python safe_load (the reference under VLLMLINT_YAML=pyyaml)."""
    import yaml
    text = SHAPES[name].replace("!custom ", "").replace("! y", "y")    # safe_load knows no local tags
    expected = yaml.safe_load(text)
    for front_end in ("", "pyyaml"):
        monkeypatch.setattr(ys, "_FRONT_END", front_end)
        monkeypatch.setattr(ys, "_DATA_BY_TEXT", {})
        assert ys.load_data(text) == expected
        assert ys.load_data(text) is ys.load_data(text)      # a text's data is kept


def test_load_data_raises_as_safe_load():
    import yaml
    with pytest.raises(yaml.YAMLError):
        ys.load_data("a: [1\n")


@pytest.mark.parametrize("name", SHAPES)
def test_read_back_check_gives_the_same_verdict(name, monkeypatch):
    """A fix's result is read back with its own language's parser (lint/parseback): libyaml's
    loader first, PyYAML's pure-Python loader (the reference) where it refuses."""
    from vllmlint.lint import parseback
    text = SHAPES[name]
    monkeypatch.setattr(ys, "_FRONT_END", "")
    fast = parseback._yaml_error(text)
    monkeypatch.setattr(ys, "_FRONT_END", "pyyaml")
    assert fast == parseback._yaml_error(text)


@pytest.mark.parametrize("text, depth, below", [
    ("[" * 150 + "]" * 150, 200, True),
    ("[" * 201 + "]" * 201, 200, False),
    ("- " * 201 + "a", 200, False),
    ("a: [1, 2\n", 200, True),                       # few indicators: the text bound tells, unread
    ("a: [1, 2\n" + DEEP, 200, False),               # libyaml does not read it: not vouched for
])
def test_nests_below(text, depth, below):
    assert ys.nests_below(text, depth) is below


def test_nests_below_reads_the_tree_when_the_text_does_not_tell():
    text = SHAPES["big"] + DEEP
    assert ys._depth_bound(text, 201) == 201 and ys.nests_below(text, 200)


# an edit of a text whose every document constructed: only the documents it touched are
# constructed again (lint/parseback._yaml_error_edited); the verdict is the whole check's
BEFORE_EDIT = "a: 1\n---\nkind: Pod\nargs: [--x, --y]\nenv: {A: b}\n---\nlast: [1, 2]\n"
EDITS = {
    "flag removed": BEFORE_EDIT.replace(", --y", ""),
    "nothing left": BEFORE_EDIT.replace("[--x, --y]", "[]"),
    "syntax broken": BEFORE_EDIT.replace("[--x, --y]", "[--x, --y"),
    "unhashable key": BEFORE_EDIT.replace("{A: b}", "{[A]: b}"),
    "bad tag": BEFORE_EDIT.replace("kind: Pod", "kind: !!int Pod"),
    "last document": BEFORE_EDIT.replace("[1, 2]", "{[1]: 2}"),
    "first document": BEFORE_EDIT.replace("a: 1", "a: !!float x"),
    "separator removed": BEFORE_EDIT.replace("env: {A: b}\n---\n", "env: {A: b}\n"),
    "a directive": BEFORE_EDIT.replace("---\nlast", "%TAG ! tag:x,2000:\n---\nlast"),
    "same text": BEFORE_EDIT,
}


@pytest.mark.parametrize("name", EDITS)
def test_edited_text_gets_the_whole_checks_verdict(name):
    from vllmlint.lint import parseback

    after = EDITS[name]
    assert parseback._yaml_error(BEFORE_EDIT) is None
    assert parseback._yaml_error_edited(BEFORE_EDIT, after) == parseback._yaml_error(after)


def test_native_error_constructs_only_what_an_edit_changed(monkeypatch, tmp_path):
    """With a memo whose text before read, the edited documents only are constructed."""
    import yaml

    from vllmlint.lint import parseback

    built = []
    real = yaml.CSafeLoader.construct_document
    monkeypatch.setattr(yaml.CSafeLoader, "construct_document",
                        lambda self, node: built.append(node.start_mark.line) or real(self, node))
    memo: dict = {}
    path = tmp_path / "d.yaml"
    assert parseback.native_error("k8s", path, BEFORE_EDIT, BEFORE_EDIT.replace("a: 1", "a: 2"), memo) is None
    assert built == [0, 2, 6]               # the first edit of a file: no verdict before it to lean on
    built.clear()
    then = memo[path][0]
    assert parseback.native_error("k8s", path, then, then.replace(", --y", ""), memo) is None
    assert built == [2]                     # the second: only the document it touched
