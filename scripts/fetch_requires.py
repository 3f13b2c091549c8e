#!/usr/bin/env python3
"""Record each catalogued release's `Requires-Python` and `Requires-Dist` in
vllmlint/knowledge/catalogue/requires.json, from the package index's metadata of the wheel
(PEP 658: pip reads the `.metadata` file the index serves beside the wheel, so nothing of the
~400 MB wheel is downloaded when the index has it), with the user's own pip configuration.

    python scripts/fetch_requires.py [X.Y.Z ...]      # default: every built-in release missing

`vllmlint catalogue add` and scripts/extract_catalogue.py read the same fields from a wheel's
own METADATA (requires.from_wheel).
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from vllmlint.knowledge.catalogue import versions
from vllmlint.knowledge.catalogue.requires import DATA, builtin, record_builtin


def from_index(version: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
                        "--quiet", "--only-binary", ":all:", "--python-version", "3.12",
                        "--platform", "manylinux_2_28_x86_64", "--target", str(Path(tmp) / "t"),
                        "--report", str(report), f"vllm=={version}"], check=True)
        item = json.loads(report.read_text())["install"][0]
    meta = item["metadata"]
    url = item["download_info"]["url"]
    return {"python": meta.get("requires_python", ""), "dist": meta.get("requires_dist", []),
            "from": f"{url.rsplit('/', 1)[-1]} METADATA (package index)"}


def main(argv: list[str]) -> int:
    wanted = argv or [v for v in versions() if v not in builtin()]
    for version in wanted:
        try:
            entry = from_index(version)
        except (subprocess.CalledProcessError, KeyError, IndexError) as err:
            print(f"vllm=={version}: {err}", file=sys.stderr)
            continue
        record_builtin(version, entry, DATA)
        print(f"vllm=={version}: Requires-Python {entry['python']}, {len(entry['dist'])} Requires-Dist",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
