"""The trees the byte-identity tests compare two readings on (test_yaml_fast_path,
test_shell_fast_path, test_migrate_incremental, test_worker_rules): fixtures/, both generated
bench corpora (small), ../shared/corpus and ../shared/redteam when they are here."""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT / "bench"))
import gen_corpus  # noqa: E402
import gen_corpus2  # noqa: E402

# Known, and not ours: Helm's schema validation lists a chart's errors in Go map order, another
# on every run (aibrix's chart in ../shared/redteam, one process too), and the note quotes the
# first ones. The note's line is compared, its quoted reason is not.
HELM_SCHEMA_NOTE = re.compile(r"(Helm rendering with values\.yaml failed: values don't meet the specifications).*")


def generate_corpora(root: Path, per_kind: int) -> dict[str, Path]:
    """Both bench generators' corpora under `root`, `per_kind` files of each kind."""
    gen_corpus.generate(root / "gen", {k: per_kind for k in gen_corpus.KINDS})
    gen_corpus2.generate(root / "gen2", {k: per_kind for k in gen_corpus2.KINDS})
    return {"gen": root / "gen", "gen2": root / "gen2"}


def trees(generated: dict[str, Path], extra: tuple[tuple[str, Path], ...] = ()) -> list[tuple[str, Path]]:
    """(name, folder) of every tree to compare on; ../shared's and `extra` only when present."""
    out = [("fixtures", ROOT / "fixtures"), *generated.items()]
    for name, path in (("corpus", SHARED / "corpus" / "files"), ("redteam", SHARED / "redteam"), *extra):
        if path.is_dir():
            out.append((name, path))
    return out
