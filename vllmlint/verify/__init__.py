"""`vllmlint verify`: run the deployment on a real vLLM and probe it (see runner.py)."""
from __future__ import annotations

from .runner import EXIT_OK, EXIT_PROBE, EXIT_START, Outcome, Verifier

__all__ = ["EXIT_OK", "EXIT_PROBE", "EXIT_START", "Outcome", "Verifier"]
