"""The lint pipeline: discover -> read (`sources`) -> load (`project`) -> graph -> rules (`registry`,
`vllmlint.rules`) -> fix (`engine`) -> report; plus settings, suppressions, baseline, docs, migrate.

Imports parsers, knowledge and model only; the CLI, verify and the P/D runtime import from here.
"""
