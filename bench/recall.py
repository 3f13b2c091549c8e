"""Detection recall over the shared corpus: how many of the vLLM engines a careful reader counts
(MANIFEST.tsv `launches`) does `vllmlint launches` find?

    python bench/recall.py [--corpus ../shared/corpus] [--markdown] [--misses]

Per kind (the manifest's `kind` column), over the files whose `launches` column is filled:
- file recall: files with launches > 0 where at least one launch is found / such files;
- launch recall: sum over files of min(found, counted) / sum of counted (extra launches in a file
  do not make up for a missed one elsewhere);
- over: launches found beyond the count in files that have some (one engine read twice);
- false launches: launches found in files whose count is 0.
`--misses` lists every file whose count differs, with both numbers.
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parents[1] / "shared" / "corpus"


def manifest(corpus: Path) -> dict[str, tuple[str, int]]:
    with open(corpus / "MANIFEST.tsv", newline="") as f:
        return {r["local_name"]: (r["kind"], int(r["launches"]))
                for r in csv.DictReader(f, delimiter="\t") if r["launches"].strip()}


def found_launches(files: Path) -> Counter:
    proc = subprocess.run([sys.executable, "-m", "vllmlint", "launches", "--format", "json", "."],
                          cwd=files, capture_output=True, text=True)
    if proc.returncode not in (0, 1, 2) or not proc.stdout.strip():
        sys.exit(f"vllmlint launches failed ({proc.returncode}):\n{proc.stderr}")
    # the manifest counts vLLM engines: a P/D proxy started next to them is not one, nor the same
    # argv written again in an exclusive if/case arm (`alternative_of`)
    found: Counter = Counter()
    for row in json.loads(proc.stdout):      # a launch in a `for` loop starts `count` engines
        if row["kind"] != "proxy" and not row.get("alternative_of"):
            found[row["path"]] += row.get("count") or 1
    return found


def measure(corpus: Path):
    counted = manifest(corpus)
    found = found_launches(corpus / "files")
    per = defaultdict(Counter)
    misses = []
    for name, (kind, want) in sorted(counted.items()):
        got = found.get(name, 0)
        for k in (kind, "all"):
            c = per[k]
            if want > 0:
                c["files"] += 1
                c["files_found"] += got > 0
                c["launches"] += want
                c["launches_found"] += min(got, want)
                c["over"] += max(0, got - want)
            else:
                c["zero_files"] += 1
                c["false"] += got
        if got != want:
            misses.append((name, kind, want, got))
    return per, misses


def table(per) -> str:
    lines = ["| kind | file recall | launch recall | over-counted | false launches (files with 0) |",
             "|---|---|---|---|---|"]
    for kind in sorted(per, key=lambda k: (k == "all", k)):
        c = per[kind]
        fr = f"{c['files_found']}/{c['files']} = {c['files_found'] / c['files']:.2f}" if c["files"] else "-"
        lr = f"{c['launches_found']}/{c['launches']} = {c['launches_found'] / c['launches']:.2f}" if c["launches"] else "-"
        name = f"**{kind}**" if kind == "all" else kind
        lines.append(f"| {name} | {fr} | {lr} | {c['over']} | {c['false']} in {c['zero_files']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--misses", action="store_true", help="list files whose count differs")
    args = ap.parse_args()
    per, misses = measure(args.corpus)
    print(table(per))
    if args.misses:
        print()
        for name, kind, want, got in misses:
            print(f"{kind:11} want {want} got {got}  {name}")


if __name__ == "__main__":
    main()
