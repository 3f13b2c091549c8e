"""vllmlint: lint and migrate vLLM deployment configs.

The engine reads as the pipeline:
    discovery -> parsers (one per file kind) -> model (launches, env entries)
    -> graph (deployment links across files) -> rules (vllmlint.rules) -> fixer / report
"""

__version__ = "0.1.0"
PROJECT_URL = "https://github.com/vllmlint/vllmlint"
DOCS_URL = f"{PROJECT_URL}/blob/main/docs/rules"
