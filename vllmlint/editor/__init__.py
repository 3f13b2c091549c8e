"""The editor room: `vllmlint server`, a Language Server over stdio (pygls + lsprotocol).

`session` runs the lint pipeline (lint.discovery -> lint.project -> lint.engine) over a
workspace folder with the editor's unsaved buffers in place of the files on disk, and turns
findings and fixes into positions and edits; `server` speaks LSP. No rule logic lives here.

May import lint, parsers, knowledge and model (and pd/verify, which it does not need); only the
CLI imports from here.
"""
