"""Write expected.txt and fixed/ of fixture cases from what vllmlint does now.

For a new case only: write input/, run this, then READ the result before committing - the
snapshot is the specification from then on.

    python scripts/snapshot_fixture.py fixtures/VL001/new-case [...]
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def snapshot(case: Path) -> None:
    code = case.parent.name
    extra = shlex.split((case / "args.txt").read_text()) if (case / "args.txt").exists() else []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "tree"
        shutil.copytree(case / "input", work, symlinks=True)
        vllmlint = [sys.executable, "-m", "vllmlint.cli"]
        out = subprocess.run(vllmlint + ["check", "--format", "json", "--select", code, *extra, "."],
                             cwd=work, capture_output=True, text=True)
        lines = [f"{f['path']}:{f['line']}:{f['column']}: {f['code']}" + (" fixable" if f["fixable"] else "")
                 for f in json.loads(out.stdout)]
        (case / "expected.txt").write_text("".join(l + "\n" for l in lines))
        before = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
        subprocess.run(vllmlint + ["check", "--fix", "--select", code, *extra, "."], cwd=work,
                       capture_output=True)
        shutil.rmtree(case / "fixed", ignore_errors=True)
        for path, data in before.items():
            if path.read_bytes() != data:
                dest = case / "fixed" / path.relative_to(work)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(path.read_bytes())
    print(f"{case}: {len(lines)} finding(s)", file=sys.stderr)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        snapshot(Path(arg))
    os._exit(0)
