"""`python -m vllmlint ...`: the same command as `vllmlint`."""
from .entry import main

main()
