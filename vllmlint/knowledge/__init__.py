"""What vLLM releases accept: the release catalogue and its extractor (`catalogue`), KV-connector
facts (`kvcatalogue`), GPU topology and KV-size estimates (`topology`), version parsing (`versions`).

Imports only `vllmlint.model`; the parsers, the lint pipeline and everything above may import from here.
"""
