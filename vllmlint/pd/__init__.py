"""The P/D runtime: the token-id continuation `guard`, `vllmlint router`, `replay` with its
`conversations`, and the HTTP layer they use (`http11`).

May import verify, lint, knowledge and model; only the CLI imports from here.
"""
