"""`python -m vllmlint.router`: the name deployments already launch; the router is `vllmlint.pd.router`."""
import sys

from .pd.router import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m vllmlint.router"))
