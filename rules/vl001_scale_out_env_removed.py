from vllmlint.model.launch import API_SERVER, RENDER, SERVE, TOKENS_ONLY, Fix
from vllmlint.lint.registry import Rule

ENV_NAME = "VLLM_ENABLE_SCALE_OUT_ENDPOINTS"
FLAG = "--enable-scale-out"
TRUTHY = {"1", "true", "yes", "on"}
FALSY = {"0", "false", "no", "off", ""}
PLAIN_SERVE = (SERVE, API_SERVER)


class ScaleOutEnvRemoved(Rule):
    """`VLLM_ENABLE_SCALE_OUT_ENDPOINTS` is ignored from vLLM 0.30.0; use `--enable-scale-out`.

    ## What it does
    Finds every setting of `VLLM_ENABLE_SCALE_OUT_ENDPOINTS` - Dockerfile `ENV`, compose
    `environment`, Kubernetes `env` and ConfigMaps reached through `envFrom`, shell `export` and
    `VAR=... cmd` prefixes, Python `os.environ` and `env=` dicts.

    ## Why
    Nightly builds between vLLM PR #54579 and PR #55176 switched the scale-out endpoints
    (`/v1/*/render`, `/v1/*/derender`, `/inference/v1/generate`) on with this variable. No
    release ever read it: vLLM 0.30.0 logs `Unknown vLLM environment variable detected` and
    ignores it, and serves those endpoints only with `--enable-scale-out` (or in
    `vllm launch render` and `vllm serve --tokens-only`, which always serve them). The routes
    answer 404 while the pod stays Ready.

    ## Example
    ```yaml
    env:
      - name: VLLM_ENABLE_SCALE_OUT_ENDPOINTS
        value: "1"
    args: ["--model", "Qwen/Qwen2.5-7B-Instruct"]
    ```
    becomes
    ```yaml
    args: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--enable-scale-out"]
    ```

    ## Fix safety
    Safe. A truthy value (`1`, `true`, `yes`, `on`) is removed and `--enable-scale-out` is
    added to each plain `vllm serve` it reaches (same container, service, script or process;
    an image's `ENV` reaches its `CMD`/`ENTRYPOINT`; a ConfigMap reaches the workloads that
    `envFrom` it), never to `vllm launch render` or `--tokens-only`, never twice. A falsy value
    is removed. When a launch it reaches cannot be edited safely (argv built at run time,
    `"$@"`, `eval`) or it reaches no launch vllmlint can see, nothing is changed and the
    message says what to add by hand.
    """

    code = "VL001"
    name = "scale-out-env-removed"
    severity = "error"
    min_version = "0.30.0"
    fix = "safe"

    def check(self, project):
        for entry in project.env:
            if entry.name == ENV_NAME:
                yield self._finding(entry)

    def _finding(self, entry):
        value = (entry.value or "").strip().strip("'\"").lower() if entry.value is not None else None
        head = f"{ENV_NAME} is ignored from vLLM 0.30.0"
        if value in FALSY:
            fix = Fix(list(entry.removal), f"remove {ENV_NAME}") if entry.removal else None
            return self.finding(entry.file, entry.span,
                                f"{head}; it is set to a false value, so remove it "
                                f"(scale-out endpoints are off by default)", fix)
        if value not in TRUTHY:
            return self.finding(entry.file, entry.span,
                                f"{head}; its value is not known before run time: if it turns the "
                                f"scale-out endpoints on, add {FLAG} to `vllm serve` and remove it")
        serves = [l for l in entry.launches if l.kind in PLAIN_SERVE]
        dedicated = [l for l in entry.launches if l.kind in (RENDER, TOKENS_ONLY)]
        need = [l for l in serves if not l.has_flag(FLAG)]
        if not entry.launches:
            return self.finding(entry.file, entry.span,
                                f"{head}; add {FLAG} to the `vllm serve` that reads it, then remove it "
                                f"(it reaches no vLLM launch vllmlint can see)")
        blocked = [l for l in need if l.append_edit(FLAG) is None]
        if blocked:
            where = ", ".join(f"{l.file.display}:{l.line} ({l.not_editable or 'not editable'})" for l in blocked)
            return self.finding(entry.file, entry.span,
                                f"{head}; add {FLAG} to `vllm serve` by hand, then remove it",
                                detail=f"The launch cannot be edited here: {where}.")
        if entry.removal is None:
            return self.finding(entry.file, entry.span,
                                f"{head}; remove it by hand and add {FLAG} to `vllm serve`")
        detail = ""
        if need:
            message = f"{head}; replace it with {FLAG} on `vllm serve`"
            detail = f"The launches that read it: {', '.join(l.context for l in need)}."
        elif serves:
            message = f"{head}; {FLAG} is already set, remove it"
        else:
            kinds = " and ".join(sorted({"`vllm launch render`" if l.kind == RENDER else "`vllm serve --tokens-only`"
                                         for l in dedicated}))
            message = f"{head}; {kinds} always serve the scale-out endpoints, remove it"
        edits = list(entry.removal) + [l.append_edit(FLAG) for l in need]
        return self.finding(entry.file, entry.span, message, Fix(edits, f"replace {ENV_NAME} with {FLAG}"),
                            launches=need, min_release=(0, 30, 0), detail=detail)
