"""Find vLLM launches and environment settings in shell code, with file spans.

Used for shell scripts and for every place shell code hides in other kinds: `sh -c` scripts in
Kubernetes and compose, Dockerfile shell-form CMD/ENTRYPOINT, Python `shell=True` strings.
The caller says how the lexed text maps back to the file (`omap[i]` = file offset of text[i]).

The reader is split by what it reads: shellspans (where words lie, removal edits, env settings),
shellvars (variables, arrays, loop counts); `_Scanner` mixes them and walks the commands.
"""
from __future__ import annotations

import itertools
import re
from ..model.record import field, record

from .detect import (SHELLS, ContainerRun, basename, container_run, copied_server, detect, is_vllm_image,
                     serve_kind, strip_transport)
from ..model.launch import AppendSite, Arg, Edit, EnvEntry, Launch, SourceFile
from . import embedded
from .embedded import Shift
from .shell_lex import SimpleCommand, Word, commands, exclusive
from .shellspans import ASSIGN_RE, Compose, ShellSpans, _mapped
from .shellvars import ARRAY_REF_RE, ShellVariables, VarValue, var_ref

RUNTIME_ARGS = {"$@", "$*", "${@}", "${*}"}


def _ends_continued(launch, continued: bool) -> None:
    """A command whose text ends in a lone `\\` goes on in text this scan does not see: one line
    of a script kept as a list of strings (`["vllm serve {model} \\", "    --port 8000 \\", ...]`,
    found as a user on VectorInstitute/vector-inference). What follows is unknown here: the
    word stands for it (known at run time, so no rule says a flag is unset), and the launch is
    not edited."""
    last = launch.argv[-1] if launch.argv else None
    if continued and last is not None and last.value == "\\" and not last.dynamic:
        last.dynamic = last.splits = True
        launch.not_editable = launch.not_editable or "the command goes on past this text (it ends in `\\`)"


# what opens a compound body (`then`, `else`, `do`, `{`) and what closes one (`fi`, `else`,
# `elif`, `done`, `}`): a body with nothing between them is a syntax error in sh and bash
_OPENS_BODY_RE = re.compile(r"(?:^|[\s;&|])(?:then|else|do|\{)$")
_CLOSES_BODY_RE = re.compile(r"(?:fi|else|elif|done|\})(?:$|[\s;&|)])")


# what str.splitlines() splits at (\r\n first: one break)
_LINE_BREAK_RE = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def _statement_line(line: str) -> bool:
    return bool(line.strip()) and not line.strip().startswith("#")


def _line_before(text: str, start: int) -> str:
    """The last line of text[:start].splitlines() that is neither blank nor a comment, or "".
    Read backwards through a growing window: splitting the whole prefix at every removal made
    only_statement O(file) per command (a script of many exports: quadratic). Lines after the
    window's first break are the prefix's own lines (a window starting inside `\r\n` only
    adds an empty first line), so the first, maybe partial, one is dropped unless it starts the
    text."""
    width = 512
    while True:
        lo = max(0, start - width)
        lines = text[lo:start].splitlines()
        for line in reversed(lines if lo == 0 else lines[1:]):
            if _statement_line(line):
                return line
        if lo == 0:
            return ""
        width *= 8


def _lines_after(text: str, pos: int):
    """The lines of text[pos:].splitlines(), one at a time (most callers read one or two)."""
    n = len(text)
    search = _LINE_BREAK_RE.search
    while pos < n:
        m = search(text, pos)
        if m is None:
            yield text[pos:]
            return
        yield text[pos:m.start()]
        pos = m.end()


def only_statement(text: str, start: int, end: int) -> bool:
    """The command at text[start:end] is the only statement of a compound body: what comes
    before it (comments and blanks aside) opens the body, what follows closes it. Removing it
    would leave `then` / `fi` with nothing between them (a syntax error), so a removal writes
    `:` in its place (decided in issue 29: the construct and its condition stay as written).
    Reads only the lines next to the command (tests/test_shell_fast_path.py holds the whole-text
    reading it replaced and compares the two)."""
    head = _line_before(text, start).rstrip()
    head = head.rstrip(";").rstrip() if head.rstrip().endswith(";") and not head.rstrip().endswith(";;") else head
    if not _OPENS_BODY_RE.search(head):
        return False
    rest = end
    while rest < len(text) and text[rest] in " \t":
        rest += 1
    nxt = ""
    if text.startswith(";", rest):
        while rest < len(text) and text[rest] in " \t;":
            rest += 1
        first = next(_lines_after(text, rest), "").strip()
        if first:
            nxt = first
    if not nxt:
        nxt = next((line for line in _lines_after(text, end) if _statement_line(line)), "").strip()
    return bool(_CLOSES_BODY_RE.match(nxt))


@record
class ShellScan:
    """What a shell script holds: its launches and its environment settings."""
    launches: list[Launch] = field(default_factory=list)
    env: list[EnvEntry] = field(default_factory=list)
    # (start, end) in the file of each heredoc body read as a script of its own (ParsedFile.scripts)
    scripts: list[tuple[int, int]] = field(default_factory=list)


_SCANNERS = itertools.count()
# commands that print or log their arguments: `echo $CMD` starts nothing
PRINTERS = {"echo", "printf", "log", "info", "warn", "debug", "error", "logger", "cat", "print", "tee"}
CONTAINER_HEADS = {"docker", "podman", "nerdctl", "apptainer", "singularity", "kubectl", "oc"}
# programs that hand a string argument to a shell (here or on another host)
STRING_RUNNERS = {"ssh", "tmux", "screen", "su", "runuser", "pdsh", "clush", "parallel-ssh", "pssh"}


class _Scanner(ShellVariables, ShellSpans):
    def __init__(self, file: SourceFile, text: str, omap, context: str, group: str,
                 inherited_env: list[EnvEntry], image: str | None, in_eval: bool, depth: int,
                 variables: dict[str, list[VarValue]] | None = None, via: str = ""):
        self.file, self.text, self.omap = file, text, omap
        self.context, self.group, self.image = context, group, image
        self.inherited = list(inherited_env)
        self.in_eval, self.depth = in_eval, depth
        self.exported: list[EnvEntry] = []
        self.assigned: dict[str, tuple[Word, SimpleCommand]] = {}
        self.arrays: dict[str, list[Word]] = {}
        self.vars: dict[str, list[VarValue]] = {k: list(v) for k, v in (variables or {}).items()}
        self.via = via
        self.uid = next(_SCANNERS)          # keeps the if/case ids of nested scripts apart
        self.rematch: list[str] = []        # BASH_REMATCH after the last `[[ s =~ re ]]`
        for entry in inherited_env:     # env a wrapper gives the script (GitHub Actions `env:`)
            if entry.value is not None and entry.name not in self.vars:
                self.vars[entry.name] = [VarValue(entry.value, [], (), file.line_col(entry.span[0])[0])]
        self.out = ShellScan()

    # -- removal edits ------------------------------------------------------
    def remove_command(self, cmd_words: list[Word]) -> list[Edit]:
        """Remove a whole command, with its own line when it stands alone on one."""
        text = self.file.text
        fs, fe = self.fstart(cmd_words[0]), self.fend(cmd_words[-1])
        line_start = text.rfind("\n", 0, fs) + 1
        end = fe
        while end < len(text) and text[end] in " \t":
            end += 1
        if text.startswith("&&", end):
            end += 2
        elif end < len(text) and text[end] == ";" and not text.startswith(";;", end):
            end += 1
        while end < len(text) and text[end] in " \t":
            end += 1
        alone = only_statement(text, fs, end)
        if not text[line_start:fs].strip() and (end >= len(text) or text[end] in "\r\n"):
            if alone:      # the body keeps a statement: `:` (a no-op) where the command was
                return [Edit(self.file, fs, fe, ":")] if text[fe:end].strip() in ("", ";") else \
                    [Edit(self.file, fs, end, ":")]
            if text.startswith("\r\n", end):
                end += 2
            elif end < len(text):
                end += 1
            return [Edit(self.file, line_start, end, "")]
        if alone:
            return [Edit(self.file, fs, fe, ":")]
        return [Edit(self.file, fs, end, "")]
    # -- the walk -----------------------------------------------------------
    def run(self) -> ShellScan:
        for cmd in commands(self.text, getattr(self, "tokens", None)):
            for array in cmd.arrays:
                self._record_array(array)
            if not cmd.words:
                for word in cmd.assignments:
                    name = word.value.split("=", 1)[0].rstrip("+")
                    self.assigned[name] = (word, cmd)
                    self._assign(word, cmd.branch)
                    self._substituted(word, cmd)
                continue
            before = len(self.out.launches)
            self._command(cmd)
            if len(self.out.launches) == before:
                continue
            # arms of this script, then those of a script nested in the command (ids kept apart)
            arms = tuple(((self.uid, i), arm) for i, arm in cmd.branch)
            count = self._loops_count(cmd.loops) if cmd.loops else 1
            for launch in self.out.launches[before:]:
                launch.branch = arms + launch.branch
                launch.count = None if count is None or launch.count is None else count * launch.count
        if self.depth == 0:
            _mark_alternatives(self.out.launches)
        return self.out
    def _command(self, cmd: SimpleCommand) -> None:
        words = cmd.words
        head = words[0].value
        if cmd.redirects:
            self._heredocs(cmd)
        if head == "local":
            for w in words[1:]:
                self._assign(w, cmd.branch)
            return
        if head in ("source", ".") and len(words) > 1:
            self._sourced(words[1], cmd.branch)
            return
        if head in ("export", "declare", "typeset", "readonly"):
            for w in words[1:]:
                self._assign(w, cmd.branch)
            self._export(cmd)
            return
        prefix = [self.entry(w, "shell VAR=value prefix", self.remove_word(cmd.assignments + words, i))
                  for i, w in enumerate(cmd.assignments) if ASSIGN_RE().match(w.value)]
        self.out.env.extend(prefix)
        env_now = self.inherited + self.exported + prefix
        if head == "eval" and self.depth < 4:
            script_words = words[1:]
            if len(script_words) == 1:
                ref = var_ref(script_words[0].value)
                if ref and self._values(ref[0]):
                    self._eval_var(ref[0], script_words[0], env_now)
                else:
                    self._nested(script_words[0], env_now, in_eval=True)
            return
        if head == "[[":
            self._regex_test(words)
            return
        rhead = basename(self.resolve(head))
        if rhead in SHELLS or (head in ("exec", "nohup") and len(words) > 1
                               and basename(words[1].value) in SHELLS):
            script = _shell_c_script(words)
            if script is not None and self.depth < 4:
                self._nested(script, env_now, in_eval=self.in_eval)
                return
        if self.depth < 4 and rhead not in PRINTERS and rhead not in CONTAINER_HEADS:
            # `timeout 900 bash -c "..."`, `screen -dmS x bash -lc '...'`, `srun bash -c ...`
            for k in range(1, len(words) - 1):
                value = words[k].value
                if basename(self.resolve(value) if "$" in value else value) in SHELLS:
                    script = _shell_c_script(words[k:])
                    if script is not None:
                        self._nested(script, env_now, in_eval=self.in_eval)
                        return
                    break
        if rhead in STRING_RUNNERS and self.depth < 4:
            # `ssh host "vllm serve ..."`, `tmux send-keys -t s "vllm serve ..." Enter`,
            # `tmux new-session -d "vllm serve ..."`, `su - u -c "..."`: a string run by a shell
            found = False
            for w in words[1:]:
                if " " in w.value.strip() and len(w.offsets) == len(w.value):
                    n = len(self.out.launches)
                    self._nested(w, env_now, in_eval=self.in_eval, via=f"via {rhead}")
                    found = found or len(self.out.launches) > n
            if found:
                return
        if rhead in PRINTERS:
            return      # `printf '%q ' "${CMD[@]}"`, `echo vllm serve ...`: printing an argv runs nothing
        expanded = self._expand_arrays(words)
        expanded, notes = self._expand_vars(expanded)
        values = [w.value for w in expanded]
        rvalues = [self.resolve(v) if "$" in v else v for v in values]
        run = container_run(rvalues)
        if run is not None:
            self._container_run(words, expanded, rvalues, run, prefix, env_now, notes)
            return
        det = detect(rvalues)
        if det is None:
            return
        # `env A=1 vllm ...`: assignments between `env` and the program are env too
        start = det.start
        for i in range(start):
            if values[i] == "env":
                for j in range(i + 1, start):
                    if ASSIGN_RE().match(values[j]) and expanded[j] in words:
                        k = words.index(expanded[j])
                        entry = self.entry(expanded[j], "shell env VAR=value", self.remove_word(words, k))
                        prefix.append(entry)
                        self.out.env.append(entry)
        opt = det.options_start
        argv = [self.arg(w) for w in expanded[det.start:]]
        head_word = expanded[det.start]
        via = self.via
        ref = var_ref(head_word.value)
        if ref and rvalues[det.start] != values[det.start]:
            alts = self._values(ref[0])
            line = f" (line {alts[0].line})" if alts else ""
            via = f"via {det.program}, program {head_word.value} = {rvalues[det.start]}{line}"
        if notes:
            via = (via or f"via {det.program}") + "; " + "; ".join(notes)
        # a program that came out of a variable (`$CMD --port 1`) is launched where it is run
        at = next((w for w in words if w.splits and var_ref(w.value)), head_word) if head_word.start < 0 else head_word
        launch = Launch(kind=det.kind, file=self.file, span=(self.fstart(at), self.fend(at)),
                        argv=argv, options_start=opt - det.start, context=self.context, group=self.group,
                        env=self.inherited + self.exported + prefix, image=self.image, program=det.program)
        launch.via = via
        launch.append_site = AppendSite(self.file, self.fend(words[-1]), " {}")
        launch.not_editable = self._why_not_editable(expanded[opt:])
        _ends_continued(launch, self._continued())
        self.out.launches.append(launch)

    def _container_run(self, words: list[Word], expanded: list[Word], rvalues: list[str], run: ContainerRun,
                       prefix: list[EnvEntry], env_now: list[EnvEntry], notes: list[str]) -> None:
        """`docker|podman run [--entrypoint E] IMAGE ARGS`, `apptainer exec|run IMAGE ARGS`: the
        program is E + ARGS, or ARGS when they name one, else the image's own entrypoint (a vLLM
        image's is `vllm serve`) given ARGS."""
        image_word = expanded[run.image]
        raw_image = image_word.value if run.image_text is None else image_word.value.split("=", 1)[-1]
        image = strip_transport(run.image_text if run.image_text is not None else rvalues[run.image])
        ref = var_ref(raw_image)
        image_line = ""
        if ref and self._values(ref[0]):
            line = self._values(ref[0])[0].line
            image_line = f" (line {line})" if line else " (env)"
        # `"${REG}/vllm-openai:${TAG}"`: unknown parts do not hide what the image is
        placeholder = re.sub(r"\$(?:\{[^{}]*\}|[A-Za-z_]\w*)", "x", image)
        vllm_image = is_vllm_image(placeholder) or bool(
            ref and "$" in image and re.search(r"vllm", ref[0], re.I) and re.search(r"image|img", ref[0], re.I))
        shown = raw_image if raw_image == image else f"{raw_image} = {image}{image_line}"
        if "$" in image and vllm_image:
            shown = f"{raw_image} (set outside this file; its name says vLLM)" if ref and not is_vllm_image(placeholder) \
                else f"{raw_image} (a vLLM image whatever its variables hold)"
        via = f"via {run.runner}, image {shown}"
        args = expanded[run.args_start:]
        rargs = rvalues[run.args_start:]
        env = self.inherited + self.exported + prefix
        if not run.runner.startswith(("apptainer", "singularity", "kubectl")):
            env = env + self._docker_env(expanded[:run.image])
        image_value = image if "$" not in image else raw_image
        if run.entrypoint is not None:
            ep_word = expanded[run.entrypoint]
            ep_value = rvalues[run.entrypoint]
            if ep_word.value.startswith("--entrypoint="):
                ep_value = ep_value.split("=", 1)[1]
            prog_words, prog_values = [ep_word] + args, [ep_value] + rargs
            via += f", --entrypoint {ep_value}"
        else:
            prog_words, prog_values = args, rargs
        if notes:
            via += "; " + "; ".join(notes)
        if prog_values and basename(prog_values[0]) in SHELLS and self.depth < 4:
            script = _shell_c_script(prog_words)
            if script is not None:
                self._nested(script, env, in_eval=self.in_eval, image=image_value, via=via)
                return
        det = detect(prog_values) or copied_server(prog_values, image)
        if det is not None and (det.start == 0 or run.entrypoint is None):
            start = det.start
            argv = [self.arg(w) for w in prog_words[start:]]
            if run.entrypoint is not None and expanded[run.entrypoint].value.startswith("--entrypoint="):
                argv[0] = Arg(prog_values[0])
            opt = det.options_start
            launch = Launch(kind=det.kind, file=self.file,
                            span=(self.fstart(prog_words[start]), self.fend(prog_words[start])),
                            argv=argv, options_start=opt - start, context=self.context, group=self.group,
                            env=env, image=image_value, program=det.program)
            option_words = prog_words[opt:]
        elif run.entrypoint is None and not run.runs_command and vllm_image:
            argv = [Arg("vllm"), Arg("serve")] + [self.arg(w) for w in args]
            launch = Launch(kind=serve_kind(rargs), file=self.file,
                            span=(self.fstart(image_word), self.fend(image_word)), argv=argv, options_start=2,
                            context=self.context, group=self.group, env=env, image=image_value,
                            program=run.runner)
            via += " (its entrypoint: vllm serve)"
            option_words = args
        else:
            return
        launch.via = via
        launch.append_site = AppendSite(self.file, self.fend(words[-1]), " {}")
        launch.not_editable = self._why_not_editable(option_words)
        _ends_continued(launch, self._continued())
        self.out.launches.append(launch)

    def _heredocs(self, cmd: SimpleCommand) -> None:
        """A here-document that writes YAML, a Dockerfile or an Apptainer definition: read it
        as that kind, in place (see parsers/heredoc.py)."""
        from .heredoc import body_kind, read_body, written_to     # the heredoc's kind; read through the door

        targets = written_to(cmd)
        values = [self.resolve(w.value) for w in cmd.words]
        for redirect in cmd.redirects:
            doc = redirect.heredoc
            if doc is None or doc.body_end <= doc.body_start:
                continue
            fs, fe = self.omap[doc.body_start], self.omap[doc.body_end - 1] + 1
            if fe - fs != doc.body_end - doc.body_start:
                continue            # the body does not lie contiguous in the file
            kind = body_kind(values[0], values, targets, self.file.text[fs:fe])
            if kind is None:
                continue
            if kind == "shell":
                self.out.scripts.append((fs, fe))
            parsed = read_body(self.file, kind, fs, fe, expands=not doc.quoted)
            if parsed is None:
                continue
            line = self.file.line_col(self.fstart(cmd.words[0]))[0]
            what = " ".join(values[:4]) + (f" > {targets[0]}" if targets else "")
            for launch in parsed.launches:
                launch.branch = ()      # the body's own arms are another script's
                launch.via = f"via heredoc at line {line} ({what}), read as {kind}" + \
                    (f"; {launch.via}" if launch.via else "")
                launch.context = f"{launch.context} in heredoc at line {line}"
            self.out.launches.extend(parsed.launches)
            self.out.env.extend(parsed.env)

    def _eval_var(self, name: str, word: Word, env_now: list[EnvEntry]) -> None:
        """`eval "$CMD"` where CMD was assembled earlier (`CMD="vllm serve $M"`, `CMD+=" --x"`
        in ifs): one launch with every flag of every value CMD may hold; literal tokens keep
        their place in the file, so they can be edited; one more flag goes after `eval "$CMD"`."""
        found: list[Launch] = []
        for alt in self._values(name):
            if not alt.value or not alt.offsets:
                continue
            inner = _Scanner(self.file, alt.value, alt.offsets, self.context, self.group, env_now, self.image,
                             False, self.depth + 1, self.vars,
                             via=f"via eval ${name}, {name} assigned at line {alt.line}")
            result = inner.run()
            found.extend(result.launches)
            self.out.env.extend(result.env)
        if not found:
            return
        first = found[0]
        for other in found[1:]:      # exclusive arms: one engine, every flag any arm gives it
            first.argv.extend(other.argv[other.options_start:])
            first.via += f" (+ line {other.line})"
        first.append_site = AppendSite(self.file, self.fend(word), " {}")
        first.span = (self.fstart(word), self.fend(word))        # launched where it is eval'd
        self.out.launches.append(first)
    def _continued(self) -> bool:
        """The text scanned is a piece of a file (a string, not the script itself) that ends in a
        line continuation: what it continues is in the next piece. A script file that ends in
        `\\` (found as a user on BjornWest/instance_scripts) ends there."""
        return self.text is not self.file.text and self.text.rstrip(" \t").endswith("\\")

    def _why_not_editable(self, option_words: list[Word]) -> str | None:
        if self.in_eval:
            return "the command is built as a string and run with eval"
        for w in option_words:
            if (w.value in RUNTIME_ARGS and w.dynamic) or (w.splits and ARRAY_REF_RE().match(w.value)):   # not '$@'
                return f"its arguments arrive at run time ({w.value})"
        return None
    def _substituted(self, word: Word, cmd: SimpleCommand) -> None:
        """`CID=$(docker run -d ... IMAGE ...)`, `id="$("${docker_cmd[@]}" 2>err.log)"`: the
        commands a substitution runs are commands of the script (capturing a detached
        container's id is the usual reason; found as a user on yangyuxin-hub/H100-llm-deploy and
        Tennsoku/k8s-llm-serving-public). They are read by this scanner, their words placed in
        this script's text, so its variables and arrays are theirs; their launches are in this
        assignment's if/case arms and loops (arms inside the substitution are not told apart)."""
        value = word.value
        k = value.find("=") + 1
        inner = value[k:]
        if not inner.startswith("$(") or inner.startswith("$((") or not inner.endswith(")") \
                or len(word.offsets) != len(value) or len(inner) < 4:
            return
        base = word.offsets[k + 2:len(value) - 1]           # each inner character's place in this text
        try:
            subs = commands(inner[2:-1])
        except Exception:           # not a command line we can read: nothing from it
            return

        def moved(w: Word) -> Word:
            return Word(w.value, base[w.start], base[max(w.start, w.end - 1)] + 1, tuple(base[o] for o in w.offsets),
                        w.dynamic, w.splits)

        arms = tuple(((self.uid, i), arm) for i, arm in cmd.branch)
        count = self._loops_count(cmd.loops) if cmd.loops else 1
        for sub in subs:
            if not sub.words:
                continue            # an assignment in a substitution is its subshell's
            here = SimpleCommand([moved(w) for w in sub.assignments], [], [moved(w) for w in sub.words],
                                 base[sub.start], base[max(sub.start, sub.end - 1)] + 1, cmd.branch, [], cmd.loops)
            before = len(self.out.launches)
            self._command(here)
            for launch in self.out.launches[before:]:
                launch.branch = arms + launch.branch
                launch.count = None if count is None or launch.count is None else count * launch.count

    def _nested(self, script: Word, env_now: list[EnvEntry], in_eval: bool, image: str | None = None,
                via: str = "") -> None:
        if len(script.offsets) != len(script.value):
            return
        omap = list(script.offsets) if script.start < 0 else Compose(script.offsets, self.omap)
        inner = _Scanner(self.file, script.value, omap, self.context,
                         self.group, env_now, image or self.image, in_eval, self.depth + 1, self.vars,
                         via=via or self.via)
        result = inner.run()
        self.out.launches.extend(result.launches)
        self.out.env.extend(result.env)


def _mark_alternatives(launches: list[Launch]) -> None:
    """The same argv written in exclusive arms (`case $ENGINE in apptainer) ...;; docker) ...`)
    starts one engine whichever arm runs: the later copies say which launch they repeat."""
    for j, later in enumerate(launches):
        for first in launches[:j]:
            if first.alternative_of is None and exclusive(first.branch, later.branch) \
                    and first.kind == later.kind and [a.value for a in first.argv] == [a.value for a in later.argv]:
                later.alternative_of = first.line
                break


def _shell_c_script(words: list[Word]) -> Word | None:
    """The script word of `sh -c SCRIPT` / `bash -lc SCRIPT` / `exec bash -c SCRIPT`."""
    for i, w in enumerate(words[1:], 1):
        v = w.value
        if v.startswith("-") and not v.startswith("--") and "c" in v[1:]:
            if i + 1 < len(words) and words[i + 1].value == "--":     # `bash -c -- SCRIPT`
                i += 1
            return words[i + 1] if i + 1 < len(words) else None
        if not v.startswith("-") and basename(v) not in SHELLS and v not in ("exec", "nohup"):
            return None
    return None


def scan_shell(file: SourceFile, text: str, omap=None, *, context: str = "script", group: str = "",
               inherited_env: list[EnvEntry] | None = None, image: str | None = None,
               in_eval: bool = False, variables: dict[str, str] | None = None,
               tokens: list | None = None) -> ShellScan:
    """`variables`: values the script's environment gives it (a CI step's `env:`), read only to
    recognise a program or an image held in a variable. `tokens`: `text` already lexed."""
    known = {name: [VarValue(value, [], (), 0)] for name, value in (variables or {}).items()}
    scanner = _Scanner(file, text, omap if omap is not None else Shift(0), context,
                       group or file.display, inherited_env or [], image, in_eval, 0, known)
    scanner.tokens = tokens
    return scanner.run()


def split_words(file: SourceFile, text: str, omap) -> list[Arg]:
    """The words of a one-line command string (compose splits `command:` strings like this)."""
    out: list[Arg] = []
    for cmd in commands(text):
        for w in cmd.assignments + cmd.words:
            out.append(Arg(w.value, file, (omap[w.start], omap[w.end - 1] + 1), w.dynamic, w.splits,
                           locate=lambda w=w: _mapped(omap, w.offsets)))
    return out


def parse_shell(source: SourceFile):
    from ..model.launch import ParsedFile, ParseError
    from .shell_lex import lex_checked

    bad, tokens = lex_checked(source.text)        # one pass: the check and, mostly, the tokens
    if bad is not None:
        raise ParseError(source.line_col(bad)[0], "shell syntax error: a quote, `$(`, `${` or backtick "
                                                  "in this word is never closed")
    scan = scan_shell(source, source.text, Shift(0), context="script", group=source.display, tokens=tokens)
    return ParsedFile(source, launches=scan.launches, env=scan.env, scripts=scan.scripts)


def _embedded_shell(view: SourceFile, start: int, end: int, inherited):
    """A shell script embedded in another file (a ConfigMap entry, a template): read in place."""
    from ..model.launch import ParsedFile, ParseError
    from .shell_lex import lex_checked

    if start == 0 and end == len(view.text):         # a whole file (a template): its syntax checked as a script's
        bad, _ = lex_checked(view.text)
        if bad is not None:
            raise ParseError(view.line_col(bad)[0], "shell syntax error: a quote, `$(`, `${` or backtick "
                                                    "in this word is never closed")
    group = inherited.group or (view.display if start == 0 else f"{view.display}:{view.line_col(start)[0]}")
    scan = scan_shell(view, view.text[start:end], Shift(start), context=inherited.context or "script", group=group,
                      inherited_env=list(inherited.env), image=inherited.image)
    return ParsedFile(view, launches=scan.launches, env=scan.env, scripts=scan.scripts)


embedded.register_shell(scan_shell, split_words)
embedded.register("shell", _embedded_shell)
