"""The launch model, below everything else: a vLLM launch as argv tokens and env entries with exact
source spans (`launch`), and the structured views of a launch's JSON flags (`kvconfig`, `jsonpos`).

Imports nothing from vllmlint; every other package may import from here.
"""
