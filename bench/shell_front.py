#!/usr/bin/env python3
"""Our shell front end vs tree-sitter-bash, parse only, CPU per file (issue 34, item 2).

    pip install tree-sitter tree-sitter-bash      # not a dependency of vllmlint
    python bench/shell_front.py CORPUS [CORPUS ...] [--runs 3]

For the `sh/*.sh` files of each corpus (bench/gen_corpus.py's, bench/gen_corpus2.py's), each
file read and decoded once outside the timing, median over --runs of the CPU (process_time) of:

  lex          vllmlint.parsers.shell_lex.lex: our tokens with exact offsets
  commands     shell_lex.commands: tokens grouped into simple commands (heredocs, redirects)
  front end    parsers.shellscan.parse_shell: the whole front end, launches and env with spans
  ts parse     tree-sitter-bash: a full syntax tree with byte offsets
  ts + query   the tree and a query for every `command` node, with its words as Python strings
  ts + words   the tree, commands and assignments, each word's value after quote removal with its
               offsets: the least a front end on tree-sitter would do to stand in for lex + commands

Decides nothing by itself: docs/development/shell-front-end.md says what the figures decided.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vllmlint.model.launch import SourceFile  # noqa: E402
from vllmlint.parsers.shell_lex import commands, lex  # noqa: E402
from vllmlint.parsers.shellscan import parse_shell  # noqa: E402


def tree_sitter_runners():
    try:
        import tree_sitter
        import tree_sitter_bash
    except ImportError:
        return {}
    lang = tree_sitter.Language(tree_sitter_bash.language())
    parser = tree_sitter.Parser(lang)
    query = tree_sitter.Query(lang, "(command) @cmd")
    cursor_cls = getattr(tree_sitter, "QueryCursor", None)

    def ts_parse(text: str, data: bytes):
        return parser.parse(data)

    def ts_query(text: str, data: bytes):
        tree = parser.parse(data)
        if cursor_cls is not None:          # tree-sitter >= 0.25
            caps = cursor_cls(query).captures(tree.root_node)
        else:
            caps = query.captures(tree.root_node)
        out = []
        for node in caps.get("cmd", []):
            out.append([data[c.start_byte:c.end_byte].decode() for c in node.named_children])
        return out

    words_query = tree_sitter.Query(lang, "(command) @cmd (variable_assignment) @assign")
    positions = tuple(range(1 << 16))
    skipped = {"file_redirect", "herestring_redirect", "heredoc_redirect", "variable_assignment"}

    def value(node, data: bytes, vals: list, offs: list) -> None:
        # quote removal with per-character offsets (ASCII: bytes are characters)
        kind, s, e = node.type, node.start_byte, node.end_byte
        if kind == "raw_string":
            vals.append(data[s + 1:e - 1].decode()); offs.extend(positions[s + 1:e - 1])
        elif kind in ("string", "concatenation", "command_name") and node.child_count:
            for child in node.children:
                if child.type != '"':
                    value(child, data, vals, offs)
        elif b"\\" in data[s:e]:
            i = s
            while i < e:
                j = i + 1 if data[i] == 92 and i + 1 < e else i
                vals.append(chr(data[j])); offs.append(j); i = j + 1
        else:
            vals.append(data[s:e].decode()); offs.extend(positions[s:e])

    def ts_words(text: str, data: bytes):
        """The least a front end on tree-sitter does to stand in for lex + commands: each
        command's words as (value after quote removal, offsets), and the assignments. Leaves
        out what ours also gives (dynamic/splits, if/case arms, loops, heredoc bodies, a byte to
        character map for non-ASCII text), so it is a lower bound."""
        tree = parser.parse(data)
        caps = cursor_cls(words_query).captures(tree.root_node) if cursor_cls is not None \
            else words_query.captures(tree.root_node)
        out = []
        for node in caps.get("cmd", []):
            words = []
            for child in node.children:
                if child.type in skipped:
                    continue
                s, e = child.start_byte, child.end_byte
                raw = data[s:e]
                if not child.child_count or not any(q in raw for q in (b"'", b'"', b"\\")):
                    words.append((raw.decode(), positions[s:e]))
                else:
                    vals: list = []
                    offs: list = []
                    value(child, data, vals, offs)
                    words.append(("".join(vals), tuple(offs)))
            out.append(words)
        out.extend(data[n.start_byte:n.end_byte].decode() for n in caps.get("assign", []))
        return out

    return {"ts parse": ts_parse, "ts + query": ts_query, "ts + words": ts_words}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    opts = ap.parse_args(argv)
    runners = {
        "lex": lambda text, data: lex(text),
        "commands": lambda text, data: commands(text),
        "front end": lambda text, data: parse_shell(SourceFile(Path("x.sh"), "x.sh", text, "shell")),
    }
    runners.update(tree_sitter_runners())
    print("| corpus | files | median size | " + " | ".join(f"{n} ms/file" for n in runners) + " |")
    print("|---|---:|---:|" + "---:|" * len(runners))
    for corpus in opts.corpora:
        files = sorted(corpus.glob("sh/*.sh"))
        texts = [(p.read_text(), p.read_bytes()) for p in files]
        sizes = sorted(len(d) for _, d in texts)
        cells = []
        for name, run in runners.items():
            times = []
            for _ in range(opts.runs):
                start = time.process_time()
                for text, data in texts:
                    run(text, data)
                times.append(time.process_time() - start)
            cells.append(f"{1000 * statistics.median(times) / len(texts):.3f}")
        print(f"| {corpus.name} | {len(texts)} | {sizes[len(sizes) // 2]} B | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
