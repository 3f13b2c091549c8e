"""vLLM's runnable server modules: `python -m vllm.entrypoints.X ARGS` starts vLLM.

One row per module that vLLM ships with a `__main__` that starts it (read from vLLM's sources,
checked against the catalogue's module lists of every release by tests/test_engine_shapes.py:
a module named like a server there is either here or in NOT_SERVERS, with the reason). The kind
says how its argv is read:

  * API_SERVER: the OpenAI server's own parser (`vllm serve`'s flags, the model as `--model`);
  * RENDER: `vllm launch render`'s;
  * OTHER: vLLM's engine arguments plus options of its own (gRPC, batch files, the old demo
    server): a launch whose flags are not judged against `vllm serve`'s (precision first).

`vllm`, `vllm.entrypoints.cli.main` (`python -m vllm serve ...`) are vLLM's CLI itself and are
read by parsers/detect.py as `vllm SUBCOMMAND`.
"""
from __future__ import annotations

from ..model.launch import API_SERVER, OTHER, RENDER

SERVER_MODULES = {
    "vllm.entrypoints.openai.api_server": API_SERVER,           # deprecated for `vllm serve`
    "vllm.entrypoints.launchers.api_server": API_SERVER,        # 0.29+: where api_server moved
    "vllm.entrypoints.launchers.api_server.entry": API_SERVER,
    "vllm.entrypoints.launchers.render.entry": RENDER,          # 0.29+: `vllm launch render`
    "vllm.entrypoints.launchers.render": RENDER,
    "vllm.entrypoints.grpc_server": OTHER,                      # gRPC server (deprecated: `vllm serve --grpc`)
    "vllm.entrypoints.launchers.grpc_server": OTHER,
    "vllm.entrypoints.openai.run_batch": OTHER,                 # `vllm run-batch`
    "vllm.entrypoints.launchers.run_batch": OTHER,
    "vllm.entrypoints.api_server": OTHER,                       # the demo server of releases before 0.27
}

# Modules named like servers that `python -m` does not start vLLM with.
NOT_SERVERS = {
    "vllm.entrypoints.cli.run_batch": "the `vllm run-batch` subcommand's definition: no __main__",
    "vllm.entrypoints.cli.main": "vLLM's CLI itself: read as `vllm SUBCOMMAND`",
    "vllm.entrypoints.cli.benchmark.main": "`vllm bench`'s definition: no __main__",
    "vllm.entrypoints.mcp.tool_server": "a tool server's client classes: no __main__",
    "vllm.entrypoints.launchers.utils.server_utils": "helpers: no __main__",
    "vllm.entrypoints.serve.utils.server_utils": "helpers: no __main__",
}


def server_module(module: str) -> str | None:
    """The launch kind of `python -m MODULE`, None when MODULE is not one of vLLM's servers."""
    return SERVER_MODULES.get(module)
