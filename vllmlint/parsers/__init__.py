"""The front ends: each turns one file kind into the shared launch model (Dockerfile, shell, YAML,
Python), plus launch detection (`detect`) and the routers that check token continuation (`validating`).

Imports knowledge and model only; the lint pipeline and everything above may import from here.
"""
