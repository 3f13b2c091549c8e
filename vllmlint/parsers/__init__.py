"""The front ends: each turns one file kind into the shared launch model (Dockerfile, shell, YAML,
Python), plus launch detection (`detect`) and the routers that check token continuation (`validating`).

Imports knowledge and model only; the lint pipeline and everything above may import from here.

Content of one kind inside a file of another (shell in YAML, a heredoc, a ConfigMap's script) goes
through one door, `embedded.py`: front ends import it, never each other, and register their
readers there when imported; the door imports a front end the first time its kind is asked for
(`embedded.HOMES`). Nothing is imported here: a one-file check loads only the front ends its
file needs (docs/development/startup.md).
"""
