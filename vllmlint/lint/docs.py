"""Rule documentation, rendered from the rule classes: `vllmlint rule CODE`, docs/rules/*.md
(scripts/gen_docs.py) and SARIF help all come from here."""
from __future__ import annotations

from .. import DOCS_URL


def help_uri(code: str) -> str:
    return f"{DOCS_URL}/{code}.md"


def rule_page(cls) -> str:
    sections = cls.doc_sections()
    summary = cls.doc().splitlines()[0].strip()
    lines = [f"# {cls.code} `{cls.name}`", "", summary, "",
             "| severity | fix | vLLM versions |", "|---|---|---|",
             f"| {cls.severity} | {cls.fix} | {cls.versions()} |", ""]
    for title in ("What it does", "Why", "Example", "Fix safety"):
        lines += [f"## {title}", "", sections.get(title, "").strip(), ""]
    lines += [f"Fixtures: `fixtures/{cls.code}/`. Source: `rules/{cls.__module__.rsplit('.', 1)[-1]}.py`.", ""]
    return "\n".join(lines)


def index_page(rules: dict) -> str:
    lines = ["# vllmlint rules", "", "Generated from the rule catalogue by `python scripts/gen_docs.py`; "
             "do not edit by hand.", "", "| code | name | severity | fix | vLLM | summary |",
             "|---|---|---|---|---|---|"]
    for code, cls in rules.items():
        summary = cls.doc().splitlines()[0].strip().replace("|", "\\|")
        lines.append(f"| [{code}]({code}.md) | `{cls.name}` | {cls.severity} | {cls.fix} | {cls.versions()} | {summary} |")
    return "\n".join(lines) + "\n"


def generate(out_dir) -> dict[str, str]:
    """{file name: content} for docs/rules/."""
    from .registry import load_rules

    rules = load_rules()
    pages = {f"{code}.md": rule_page(cls) for code, cls in rules.items()}
    pages["README.md"] = index_page(rules)
    return pages
