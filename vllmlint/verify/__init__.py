"""`vllmlint verify`: start the deployment on a real vLLM and probe it (see runner.py).

May import lint, parsers, knowledge and model; the CLI and the P/D runtime (replay) import from here.
"""
from __future__ import annotations

from .runner import EXIT_OK, EXIT_PROBE, EXIT_START, Outcome, Verifier

__all__ = ["EXIT_OK", "EXIT_PROBE", "EXIT_START", "Outcome", "Verifier"]
