from vllmlint.lint.graph import graph_of
from vllmlint.model.launch import API_SERVER, SERVE, Fix
from vllmlint.lint.registry import Rule

FLAG = "--enable-scale-out"


class ScaleOutEndpointsNotEnabled(Rule):
    """A plain `vllm serve` whose scale-out endpoints something calls, without `--enable-scale-out`.

    ## What it does
    Finds URLs anywhere in the tree (router arguments, environment, embedded EPP or tokenizer
    configs, probes) whose path is a scale-out endpoint - `/v1/chat/completions/render`,
    `/v1/completions/render`, `/v1/messages/render`, `/v1/responses/render`, the `/derender`
    pair, `/inference/v1/generate` - resolves their host to the launches in the tree (compose
    service, Kubernetes Service -> selector -> pods, workload name, or `localhost` and the port
    in the same file), and reports each plain `vllm serve` among them that does not serve those
    endpoints.

    ## Why
    vLLM 0.29.0 registered the scale-out endpoints on every `vllm serve`. From 0.30.0 a plain
    `vllm serve` registers them only with `--enable-scale-out`; `vllm launch render` and
    `vllm serve --tokens-only` always do. After the upgrade the calls answer 404 while the pod
    stays Ready, and vLLM only logs `Scale-out endpoints are disabled. Set --enable-scale-out to
    enable them.` (llm-d #2439/#2440, speculators #1080/#1117).

    ## Example
    ```yaml
    services:
      router:
        environment:
          GENERATE_URL: http://engine:8000/inference/v1/generate
      engine:
        image: vllm/vllm-openai:v0.30.0
        command: ["--model", "Qwen/Qwen2.5-7B-Instruct"]   # needs "--enable-scale-out"
    ```

    ## Fix safety
    Safe: adds `--enable-scale-out` at the end of the launch's arguments, in the style of the
    file. The flag only registers extra routes. When the argv is built at run time the finding
    says where to add it by hand.
    """

    code = "VL002"
    name = "scale-out-endpoints-not-enabled"
    severity = "error"
    min_version = "0.30.0"
    fix = "safe"

    def check(self, project):
        graph = graph_of(project)
        callers: dict[int, list] = {}
        launches = {}
        for call in graph.calls:
            if not call.scale_out:
                continue
            for target in call.targets:
                if target.kind in (SERVE, API_SERVER) and not target.has_flag(FLAG):
                    callers.setdefault(id(target), []).append(call)
                    launches[id(target)] = target
        for key, launch in launches.items():
            calls = callers[key]
            shown = ", ".join(f"{c.path} ({c.where})" for c in calls[:3]) + (" ..." if len(calls) > 3 else "")
            message = (f"`vllm serve` ({launch.context}) serves scale-out endpoints from 0.30.0 only with {FLAG}: "
                       f"add it")
            detail = f"It is called at {shown}; without {FLAG} vLLM 0.30.0 answers 404 there."
            edit = launch.append_edit(FLAG)
            if edit is None:
                message += " by hand"
                detail += f" The launch cannot be edited here: {launch.not_editable or 'argv not editable'}."
            yield self.finding(launch.file, launch.span, message,
                               Fix([edit], f"add {FLAG}") if edit else None,
                               launches=[launch], min_release=(0, 30, 0), detail=detail)
