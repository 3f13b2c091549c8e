"""`python -m vllmlint ...`: the same CLI as the `vllmlint` command."""
from .cli import main

main()
