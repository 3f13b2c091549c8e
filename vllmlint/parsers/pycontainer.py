"""Python front end, container SDKs: the docker SDK's `client.containers.run|create(IMAGE,
COMMAND, ...)` and argv lists that run a vLLM image (`["docker", "run", ..., IMAGE, ARGS]`).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from .detect import container_run, detect, serve_kind
from ..model.launch import AppendSite, Arg, Edit, EnvEntry, Launch, SourceFile, remove_args
from .detect import SHELLS
from .pysource import Chain, Lit, PYTHON_WORD_RE, Scope, StringCandidate, _call_args


class ContainerCalls:
    """container SDK calls and docker argv lists (mixed into pythonfile._Parser)."""

    # -- docker SDK: client.containers.run(IMAGE, COMMAND, environment=...) -------------------
    def container_call(self, node) -> None:
        """`docker.from_env().containers.run(...)` / `.containers.create(...)` /
        `APIClient().create_container(...)`: remembered with
        what its image, command and environment are bound to here; read in finish()."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and (
                func.attr in ("run", "create") and isinstance(func.value, ast.Attribute)
                and func.value.attr == "containers" or func.attr == "create_container")):
            return                  # docker-py's high-level API, or APIClient().create_container
        args = _call_args(node)
        if any(a.star for a in args):
            return
        pos = [a.value for a in args if a.keyword is None]
        kw = {a.keyword: a.value for a in args if a.keyword is not None}
        image = kw.get("image", pos[0] if pos else None)
        command = kw.get("command", pos[1] if len(pos) > 1 else None)
        if image is None:
            return
        resolved = {"written": (image, None)}
        for what, value in (("image", image), ("command", command), ("entrypoint", kw.get("entrypoint")),
                            ("environment", kw.get("environment"))):
            chain = None
            if value is not None and not isinstance(value, (ast.List, ast.Tuple, ast.BinOp)):
                key = self.key_of(value)
                if key is not None and self.is_string_expr(self.lookup_string(key) or ast.Pass()):
                    value = self.lookup_string(key)
                elif what == "environment" and key is not None and key in self.dicts:
                    value = self.dicts[key]
                else:
                    chain = self.find_chain(self.copied_name(value)) or self.helper_chain(value)
            resolved[what] = (value, chain)
        self.containers.append((node, self.scope, resolved))

    def container_launch(self, call, scope: Scope, resolved: dict) -> Launch | None:
        """A vLLM container started with the docker SDK: the image (a literal naming a vLLM
        build, knowledge/images.py) runs its entrypoint (`vllm serve`) with the command's items
        as arguments, or the program the entrypoint / command names; its environment is the
        container's own (`environment=` dict or `K=V` list), not the Python process's."""
        from ..knowledge.images import is_vllm_image as vllm_build, serves_engine_args

        image_node, _ = resolved["image"]
        pieces = self.pieces(image_node) if image_node is not None and self.is_string_expr(image_node) else None
        if not pieces:
            return None
        # `f"vllm/vllm-openai:{TAG}"`: parts known at run time do not hide what the image is
        image = "".join("".join(c for c, _, _ in p.chars) if isinstance(p, Lit) else p.display for p in pieces)
        probe = "".join("".join(c for c, _, _ in p.chars) if isinstance(p, Lit) else "x" for p in pieces)
        if not vllm_build(probe):
            return None
        words: list[Arg] = []
        consumed: list[Chain] = []
        cmd_used: Chain | None = None
        why: list[str] = []
        for what in ("entrypoint", "command"):
            node, chain = resolved.get(what, (None, None))
            if node is None:
                continue
            got = self.container_words(node, chain, why)
            if got is None:
                return None
            items, used = got
            if used is not None:
                consumed.append(used)
            if what == "command":
                cmd_used = used
            words.extend(items)
        values = [a.value for a in words]
        det = detect(values)
        written = resolved["written"][0]
        line = self.source.line_col(self.span(image_node)[0])[0]
        shown = image if written is image_node else f"{self.code(written)} = {image} (line {line})"
        via = (f"via docker SDK {'' if call.func.attr == 'create_container' else 'containers.'}"
               f"{call.func.attr}, image {shown}")
        if values and Path(values[0]).name in SHELLS and len(values) > 2 and values[1] == "-c":
            return self.container_script(call, scope, resolved, words, image, via)
        if values and det is None and not values[0].startswith("-") and (
                PYTHON_WORD_RE.match(Path(values[0]).name) or values[0].endswith((".py", ".sh"))):
            return None         # the image's entrypoint replaced by a program we do not know
        if resolved.get("entrypoint", (None,))[0] is not None:
            if det is None or det.start != 0:
                return None
            argv, opt, kind, program = words, det.options_start, det.kind, det.program
        elif det is not None and det.start == 0:
            argv, opt, kind, program = words, det.options_start, det.kind, det.program
        elif serves_engine_args(probe):     # the same table as every runner (knowledge/images.py)
            argv = [Arg("vllm"), Arg("serve")] + words
            opt, kind, program = 2, serve_kind(values), "docker containers.run"
            via += " (its entrypoint: vllm serve)"
        else:
            return None         # a vLLM build whose entrypoint is a shell (`rocm/vllm-dev`)
        for chain in consumed:
            chain.consumed += 1
        cmd_node, cmd_chain = resolved.get("command", (None, None))
        if cmd_node is not None and cmd_chain is None:
            self.launch_elems.add(id(cmd_node))         # its string is this launch, not a shell command
            if isinstance(cmd_node, (ast.List, ast.Tuple)):
                self.launch_elems.update(id(el) for el in cmd_node.elts)
        env = self.container_env(resolved.get("environment", (None, None))[0])
        context = f"docker container {image}" + (f" in {scope.name}()" if scope.name and not scope.is_class else "")
        launch = Launch(kind=kind, file=self.source, span=self.span(written), argv=argv, options_start=opt,
                        context=context, group=f"{self.source.display}#docker@{line}", env=env, image=image,
                        program=program)
        launch.via = via
        launch.append_site, launch.not_editable = self.container_site(cmd_node, cmd_used, words, why)
        return launch

    def container_script(self, call, scope: Scope, resolved: dict, words: list[Arg], image: str, via: str):
        """`command=["bash", "-c", "vllm serve ..."]` (or the shell as entrypoint): the script
        string is read as shell, in place, with the container's image and environment."""
        node = None
        for what in ("entrypoint", "command"):
            value, chain = resolved.get(what, (None, None))
            if chain is None and isinstance(value, (ast.List, ast.Tuple)):
                for el in value.elts:
                    if self.is_string_expr(el) and self.elem_arg(el).value == words[2].value:
                        node = el
        if node is None:
            return None
        self.launch_elems.add(id(node))
        found = self.shell_launches(StringCandidate(node, scope, False, forced=True))
        if not found:
            return None
        env = self.container_env(resolved.get("environment", (None, None))[0])
        line = self.source.line_col(self.span(resolved["written"][0])[0])[0]
        process = {id(e) for e in self.env}          # the Python process's own: not the container's
        for launch in found:
            launch.image = image
            launch.context = f"docker container {image}"
            launch.env = env + [e for e in launch.env if id(e) not in process]
            launch.group = f"{self.source.display}#docker@{line}"
            launch.via = f"{via}, {words[0].value} -c" + (f"; {launch.via}" if launch.via else "")
        return found

    def container_words(self, node, chain: Chain | None, why: list[str]) -> tuple[list[Arg], Chain | None] | None:
        """The argv items of a command / entrypoint: a list (literal, named, a helper's) or a
        string the SDK splits like a shell (shlex.split) without expanding anything."""
        if chain is None and isinstance(node, (ast.List, ast.Tuple, ast.BinOp)):
            chain = next((c for c in self.chains if c.anchor is node), None)
            if chain is None:
                segs, ok = self.segs_of(node, "", why)
                if not ok:
                    return None
                chain = Chain("", self.scope, node, segs)
        if chain is not None:
            if chain.unfollowable:
                why.append(chain.unfollowable)
            return self.chain_args(chain), chain
        if self.is_string_expr(node):
            pieces = self.pieces(node)
            if pieces is None:
                return None
            return _split_command(pieces, self.source), None
        return None

    def chain_args(self, chain: Chain) -> list[Arg]:
        argv = []
        for seg in chain.segs:
            if seg.kind == "list":
                argv.extend(self.elem_arg(el) for el in seg.elems)
            elif seg.kind == "item":
                argv.append(self.elem_arg(seg.node, splits=seg.splits))
            else:
                argv.append(Arg(self.code(seg.node), self.source, self.span(seg.node), dynamic=True, splits=True))
        return argv

    def container_site(self, node, chain, words: list[Arg], why: list[str]):
        if why:
            return None, why[0]
        if node is None:
            return None, "the container is given no command to add an argument to"
        if chain is not None:
            return self.chain_append_site(chain, words)
        if any(a.dynamic for a in words):
            return None, "its command string is built from Python expressions"
        if type(node) is ast.Constant and self.str_tokens(node):
            tok = self.str_tokens(node)[-1]
            if "r" not in tok.prefix.lower():
                end = tok.end - len(tok.quote)
                return _CommandStringSite(self.source, end, tok.quote[0] + "{}"), None
        return None, "its command string cannot take another argument safely"

    def container_env(self, node) -> list[EnvEntry]:
        """`environment={"K": "v"}` / `dict(K="v")` / `["K=v", ...]`: the container's own."""
        if node is None:
            return []
        existing = {(e.span, e.name): e for e in self.env}
        out: list[EnvEntry] = []
        origin = "docker SDK environment"
        if isinstance(node, ast.Dict):
            spans = [self.dict_elem_span(k, v) for k, v in zip(node.keys, node.values)]
            for i, (k, v) in enumerate(zip(node.keys, node.values)):
                name = self.literal_key(k) if k is not None else None
                if name:
                    entry = existing.get((spans[i], name))
                    if entry is None:
                        entry = EnvEntry(name, self.env_literal(v), self.source, spans[i], origin,
                                         self.remove_element(spans, i))
                        self.pf.env.append(entry)
                    out.append(entry)
        elif isinstance(node, (ast.List, ast.Tuple)):
            spans = [self.span(el) for el in node.elts]
            for i, el in enumerate(node.elts):
                text = self.const_str(el)
                if text and "=" in text:
                    name, _, value = text.partition("=")
                    entry = EnvEntry(name, value, self.source, spans[i], origin, self.remove_element(spans, i))
                    self.pf.env.append(entry)
                    out.append(entry)
        elif isinstance(node, ast.Call) and self.code(node.func) == "dict":
            args = _call_args(node)
            spans = [self.span(a) for a in args]
            for i, arg in enumerate(args):
                if arg.keyword is not None and not arg.star:
                    entry = existing.get((spans[i], arg.keyword))
                    if entry is None:
                        entry = EnvEntry(arg.keyword, self.env_literal(arg.value), self.source, spans[i], origin,
                                         self.remove_element(spans, i))
                        self.pf.env.append(entry)
                    out.append(entry)
        return out

    def env_literal(self, node) -> str | None:
        if node is not None and self.is_string_literal(node):
            pieces = self.pieces(node)
            if pieces is not None and all(isinstance(p, Lit) for p in pieces):
                return "".join(c for p in pieces for c, _, _ in p.chars)
        return None

    def docker_run_list(self, chain: Chain, argv: list[Arg], words: list[str]) -> Launch | None:
        """`["docker", "run", OPTS..., "vllm/vllm-openai:v0.29.0", ARGS...]` (podman, nerdctl):
        the image's `vllm serve` given ARGS, or the vLLM program ARGS name; `-e K=V` settings
        are the container's environment."""
        from ..knowledge.images import is_vllm_image as vllm_build, serves_engine_args

        run = container_run(words)
        if run is None or not run.runner.endswith(" run") or run.runner.startswith("kubectl") \
                or run.entrypoint is not None or argv[run.image].dynamic:
            return None
        image = words[run.image]
        if not vllm_build(image):
            return None
        args, values = argv[run.args_start:], words[run.args_start:]
        det = detect(values)
        if det is not None and det.start == 0:
            launch_argv, opt, kind, program = args, det.options_start, det.kind, det.program
        elif values and not values[0].startswith("-") and (
                Path(values[0]).name in SHELLS or PYTHON_WORD_RE.match(Path(values[0]).name)
                or values[0].endswith((".py", ".sh"))):
            return None
        elif serves_engine_args(image):
            launch_argv, opt, kind, program = [Arg("vllm"), Arg("serve")] + args, 2, serve_kind(values), run.runner
        else:
            return None         # a vLLM build whose entrypoint is a shell (`rocm/vllm-dev`)
        for seg in chain.segs:
            if seg.kind == "list":
                self.launch_elems.update(id(el) for el in seg.elems)
        env: list[EnvEntry] = []
        for i in range(run.start + 2, run.image):
            w = words[i]
            if w in ("-e", "--env") and i + 1 < run.image and re.match(r"^[A-Za-z_]\w*=", words[i + 1]):
                pair, setting = argv[i:i + 2], words[i + 1]
            elif w.startswith("--env=") and re.match(r"^[A-Za-z_]\w*=", w[6:]):
                pair, setting = argv[i:i + 1], w[6:]
            else:
                continue
            if any(a.span is None for a in pair):
                continue
            name, _, value = setting.partition("=")
            entry = EnvEntry(name, None if pair[-1].dynamic else value, self.source,
                             (pair[0].span[0], pair[-1].span[1]), f"{run.runner} --env", remove_args(pair))
            self.pf.env.append(entry)
            env.append(entry)
        context = self.context(chain.scope)
        launch = Launch(kind=kind, file=self.source, span=argv[run.image].span or self.span(chain.anchor),
                        argv=launch_argv, options_start=opt, context=context,
                        group=f"{self.source.display}#{context}",
                        env=env, image=image, program=program)
        launch.via = f"via {run.runner} argv list, image {image}" + (
            " (its entrypoint: vllm serve)" if program == run.runner else "")
        launch.append_site, launch.not_editable = self.chain_append_site(chain, argv)
        return launch




class _CommandStringSite(AppendSite):
    """One more word at the end of a command string literal (the SDK splits it with shlex):
    quoted for shlex, then escaped for the Python literal. `template`: the literal's quote + "{}"."""

    def edit(self, token: str) -> Edit:
        import shlex

        quote = self.template[0]
        word = shlex.quote(token).replace("\\", "\\\\").replace(quote, "\\" + quote)
        return Edit(self.file, self.offset, self.offset, " " + word)


def _split_command(pieces: list, source: SourceFile) -> list[Arg]:
    """A command string split as the docker SDK splits it (shlex.split: POSIX quoting, nothing
    expanded), each word with its span and the offset of each character of its value."""
    chars: list[tuple[str | None, int, int]] = []        # None: a run-time part
    dyn: dict[int, str] = {}
    for p in pieces:
        if isinstance(p, Lit):
            chars.extend(p.chars)
        else:
            dyn[len(chars)] = p.display
            chars.append((None, p.span[0], p.span[1]))
    words: list[Arg] = []
    i, n = 0, len(chars)
    while i < n:
        while i < n and chars[i][0] is not None and chars[i][0] in " \t\r\n\f\v":
            i += 1
        if i >= n:
            break
        start, value, offs, dynamic, quote = chars[i][1], [], [], False, None
        end = start
        while i < n:
            c, s, e = chars[i]
            if c is None:
                value.append(dyn[i])
                offs.extend([s] * len(dyn[i]))
                dynamic = True
            elif quote == "'":
                if c == "'":
                    quote = None
                else:
                    value.append(c)
                    offs.append(s)
            elif quote == '"':
                if c == '"':
                    quote = None
                elif c == "\\" and i + 1 < n and chars[i + 1][0] in ('"', "\\", "$", "`"):
                    i += 1
                    value.append(chars[i][0])
                    offs.append(chars[i][1])
                else:
                    value.append(c)
                    offs.append(s)
            elif c in " \t\r\n\f\v":
                break
            elif c in "'\"":
                quote = c
            elif c == "\\" and i + 1 < n and chars[i + 1][0] is not None:
                i += 1
                value.append(chars[i][0])
                offs.append(chars[i][1])
            else:
                value.append(c)
                offs.append(s)
            end = chars[i][2]
            i += 1
        text = "".join(value)
        located = tuple(offs) if not dynamic and len(offs) == len(text) else None
        words.append(Arg(text, source, (start, end), dynamic=dynamic,
                         locate=(lambda o=located: o) if located is not None else None))
    return words


