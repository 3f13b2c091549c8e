"""Write docs/rules/ from the rule catalogue. tests/test_docs.py fails when they are stale.

    python scripts/gen_docs.py
"""
from pathlib import Path

from vllmlint.lint.docs import generate

OUT = Path(__file__).resolve().parent.parent / "docs" / "rules"

if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    pages = generate(OUT)
    for stale in OUT.glob("*.md"):
        if stale.name not in pages:
            stale.unlink()
    for name, text in pages.items():
        (OUT / name).write_text(text)
    print(f"wrote {len(pages)} page(s) to {OUT}")
