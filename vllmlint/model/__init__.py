"""The launch model, below everything else: a vLLM launch as argv tokens and env entries with exact
source spans (`launch`), the structured views of a launch's JSON flags (`kvconfig`, `jsonpos`),
and regular expressions compiled on first use (`lazyre`, for every layer above).

Imports nothing from vllmlint; every other package may import from here.
"""
