"""The vllmlint rule catalogue (installed as `vllmlint.rules`).

One module per rule: its class holds the code, name, severity, vLLM versions, documentation
(the docstring), check and fix. The registry imports every module here; add a file, add
fixtures under fixtures/<CODE>/, and the rule is listed, documented and tested.
Part of the lint layer: rules import lint (registry, graph), parsers, knowledge and model.
"""
