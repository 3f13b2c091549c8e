#!/usr/bin/env python3
"""Which parser reads each kind: ours against the maintained alternatives, parse only, CPU per file.

    pip install rapidyaml tree-sitter tree-sitter-yaml tree-sitter-bash tree-sitter-python \
        tree-sitter-dockerfile dockerfile-parse          # none is a dependency of vllmlint
    python bench/parsers.py CORPUS [CORPUS ...] [--runs 3]

For each corpus written by bench/gen_corpus.py or bench/gen_corpus2.py, per kind folder, every
file read and decoded once outside the timing; the median over --runs of the CPU
(process_time) per file of each reader below. A reader whose package is missing is skipped.

  k8s, compose   ours: yaml_source.compose_all (libyaml's C composer, marks as offsets)
                 and parse_yaml (the whole front end); PyYAML's pure-Python composer;
                 rapidyaml parse_in_place (no Python objects); tree-sitter-yaml
  sh             ours: shell_lex.lex + commands, and parse_shell; tree-sitter-bash
  docker         ours: dockerfile.instructions, and parse_dockerfile; dockerfile-parse's
                 `structure`; tree-sitter-dockerfile
  py             ast.parse (what ours starts from), and parse_python; tree-sitter-python

"parse" columns build a tree and read nothing; "front end" columns are ours end to end
(launches, env, exact spans). docs/development/speed.md says what the figures decided.
"""
from __future__ import annotations

import argparse
import ast
import io
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from vllmlint.model.launch import SourceFile  # noqa: E402
from vllmlint.parsers.dockerfile import instructions, parse_dockerfile  # noqa: E402
from vllmlint.parsers.pythonfile import parse_python  # noqa: E402
from vllmlint.parsers.shell_lex import commands, lex  # noqa: E402
from vllmlint.parsers.shellscan import parse_shell  # noqa: E402
from vllmlint.parsers.yaml_source import compose_all  # noqa: E402
from vllmlint.parsers.yamlfile import parse_yaml  # noqa: E402

KIND_OF = {"k8s": "kubernetes", "compose": "compose", "sh": "shell", "docker": "dockerfile", "py": "python"}


def _tree_sitter(module: str):
    """A parse function of a tree-sitter grammar package, or None when it is not installed."""
    try:
        import importlib

        import tree_sitter
        grammar = importlib.import_module(module)
    except ImportError:
        return None
    parser = tree_sitter.Parser(tree_sitter.Language(grammar.language()))
    return lambda src: parser.parse(src.data)


def _rapidyaml():
    try:
        import ryml
    except ImportError:
        return None
    return lambda src: ryml.parse_in_place(bytearray(src.data))


def _dockerfile_parse():
    try:
        from dockerfile_parse import DockerfileParser
    except ImportError:
        return None

    def run(src):
        parser = DockerfileParser(fileobj=io.BytesIO(src.data), env_replace=False)
        return parser.structure
    return run


def _front_end(parse):
    def run(src):
        src.source._line_starts = None          # the per-file caches a real run starts without
        return parse(src.source)
    return run


def readers(kind: str) -> dict:
    if kind in ("k8s", "compose"):
        found = {"ours: compose_all (libyaml C)": lambda s: compose_all(s.text),
                 "PyYAML pure-Python composer": lambda s: list(yaml.compose_all(s.text, Loader=yaml.SafeLoader)),
                 "rapidyaml parse": _rapidyaml(), "tree-sitter-yaml parse": _tree_sitter("tree_sitter_yaml"),
                 "ours: whole front end": _front_end(parse_yaml)}
    elif kind == "sh":
        found = {"ours: lex + commands": lambda s: commands(s.text, lex(s.text)),
                 "tree-sitter-bash parse": _tree_sitter("tree_sitter_bash"),
                 "ours: whole front end": _front_end(parse_shell)}
    elif kind == "docker":
        found = {"ours: instructions": lambda s: instructions(s.text),
                 "dockerfile-parse structure": _dockerfile_parse(),
                 "tree-sitter-dockerfile parse": _tree_sitter("tree_sitter_dockerfile"),
                 "ours: whole front end": _front_end(parse_dockerfile)}
    else:
        found = {"ast.parse": lambda s: ast.parse(s.text),
                 "tree-sitter-python parse": _tree_sitter("tree_sitter_python"),
                 "ours: whole front end": _front_end(parse_python)}
    return {name: fn for name, fn in found.items() if fn is not None}


class Sample:
    def __init__(self, path: Path, base: Path, kind: str):
        self.text = path.read_text(encoding="utf-8", errors="replace")
        self.data = self.text.encode()
        self.source = SourceFile(path, path.relative_to(base).as_posix(), self.text, KIND_OF[kind])


def cpu_ms(fn, samples: list[Sample], runs: int) -> float:
    fn(samples[0])                              # imports, first-use compiles
    per_run = []
    for _ in range(runs):
        t0 = time.process_time()
        for s in samples:
            fn(s)
        per_run.append((time.process_time() - t0) * 1000 / len(samples))
    return statistics.median(per_run)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpora", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kinds", default="k8s,compose,sh,docker,py")
    opts = ap.parse_args()
    print("| corpus | kind | files | median KB | reader | CPU ms / file |")
    print("|---|---|---:|---:|---|---:|")
    for corpus in opts.corpora:
        for kind in opts.kinds.split(","):
            folder = corpus / kind
            if not folder.is_dir():
                continue
            samples = [Sample(p, corpus, kind) for p in sorted(folder.rglob("*")) if p.is_file()]
            if not samples:
                continue
            kb = statistics.median(len(s.data) for s in samples) / 1024
            for name, fn in readers(kind).items():
                ms = cpu_ms(fn, samples, opts.runs)
                print(f"| {corpus.name} | {kind} | {len(samples)} | {kb:.1f} | {name} | {ms:.3f} |", flush=True)


if __name__ == "__main__":
    main()
