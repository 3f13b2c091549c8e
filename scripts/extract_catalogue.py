#!/usr/bin/env python3
"""Thin wrapper: the extractor lives in the package (`vllmlint.knowledge.catalogue.extract`).

    python scripts/extract_catalogue.py WHEEL_OR_DIR [...] [-o vllmlint/knowledge/catalogue]
"""
import sys

from vllmlint.knowledge.catalogue.extract import main

if __name__ == "__main__":
    sys.exit(main())
