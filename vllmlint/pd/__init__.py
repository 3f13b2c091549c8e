"""The P/D runtime: the token-id continuation `guard`, `vllmlint router`, `replay` with its
`conversations`, and the router's Prometheus `metrics`. HTTP is aiohttp (the `router` extra),
imported only by `router` and `replay`, never by `vllmlint check`.

May import verify, lint, knowledge and model; only the CLI imports from here.
"""
