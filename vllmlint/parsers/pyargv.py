"""Python front end, argv lists: list/tuple literals that spell a launch and the build-up
of a named list in one scope (`cmd = [...]`, `cmd += [...]`, `cmd.extend(...)`, helpers that
return a list), and the launch each one makes.
"""
from __future__ import annotations

import ast
import re

from .detect import detect
from ..model.launch import AppendSite, Arg, Launch
from .pysource import Chain, LINE_RE, LIST_MUTATORS, Scope, Seg, _add_operands, _call_args

# the last path part of an interpreter or of vLLM's console script (`.exe`: a Windows venv's)
PROGRAM_NAME_RE = re.compile(r"^(python(?:\d+(?:\.\d+)*)?|vllm)(?:\.exe)?$")
# calls whose value is a path ending in their last string argument
PATH_JOINS = frozenset({"os.path.join", "path.join", "posixpath.join", "osp.join", "Path", "pathlib.Path",
                        "PurePath", "PurePosixPath", "PosixPath", "pathlib.PurePath", "pathlib.PurePosixPath",
                        "pathlib.PosixPath"})
# calls whose value is the path of their argument (`str(venv / "bin" / "python")`)
PATH_OF = frozenset({"str", "os.fspath", "fspath", "os.path.abspath", "os.path.realpath", "os.path.normpath",
                     "os.path.expanduser"})
PATH_METHODS = frozenset({"as_posix", "resolve", "absolute", "expanduser"})
PATH_CALLS = frozenset({n.rsplit(".", 1)[-1] for n in PATH_JOINS | PATH_OF | PATH_METHODS}
                       | {"joinpath", "which"})      # the called name's last part: the cheap test first


class ArgvLists:
    """argv lists and their build-up (mixed into pythonfile._Parser)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.programs: dict[int, str] = {}      # id(argv item) -> the program its path names

    # -- argv lists and their build-up -------------------------------------------------------
    def key_of(self, node) -> str | None:
        """`cmd`, `self.cmd`: a name a list can be built under."""
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute) and self.key_of(node.value) is not None:
            return self.key_of(node.value) + "." + node.attr
        return None

    def find_chain(self, key: str | None) -> Chain | None:
        return None if key is None else self._in_scope("chains", key)

    def _in_scope(self, table: str, key: str):
        """`key` in this scope's `table` (chains, strings), else in the module's."""
        scope: Scope | None = self.scope
        while scope is not None:
            found = getattr(scope, table)
            if key in found:
                return found[key]
            scope = None if scope is self.module_scope else self.module_scope
        return None

    def inline(self, chain: Chain, segs: list[Seg], why: list[str]) -> None:
        chain.consumed += 1
        segs.extend(chain.segs)
        if chain.unfollowable:
            why.append(chain.unfollowable)

    def segs_of(self, node, owner: str, why: list[str]) -> tuple[list[Seg], bool]:
        """The contributions of an expression; bool: did it hold a list we can read?"""
        if isinstance(node, (ast.List, ast.Tuple)):
            self.handled.add(id(node))
            segs: list[Seg] = []
            cur: list = []
            for el in node.elts:
                self.note_program(el)
                base = self.find_chain(self.key_of(el.value)) if isinstance(el, ast.Starred) else None
                if base is not None:
                    segs.append(Seg("list", node, cur, owner))
                    cur = []
                    self.inline(base, segs, why)
                else:
                    cur.append(el)
            segs.append(Seg("list", node, cur, owner))
            return [s for s in segs if s.kind != "list" or s.elems or s is segs[-1]], True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            self.handled.add(id(node))
            left, lok = self.segs_of(node.left, owner, why)
            right, rok = self.segs_of(node.right, owner, why)
            return left + right, lok or rok
        base = self.find_chain(self.copied_name(node)) or self.helper_chain(node)
        if base is not None:
            segs = []
            self.inline(base, segs, why)
            return segs, True
        return [Seg("opaque", node, owner=owner)], False

    # -- a program named by a path expression --------------------------------------------------
    def program_word(self, node, depth: int = 0) -> str | None:
        """The program a path expression names when its last part is written: a Python
        interpreter or vLLM's console script (`"python"`, `"python3.11"`, `"vllm"`), as
        `venv / "bin" / "python"`, `os.path.join(venv, "bin", "python")`, `Path(venv, "bin",
        "vllm")`, `f"{venv}/bin/python"` (or `+`, `%`, `.format` with the end written),
        `shutil.which("vllm")`, `str(...)` or `os.fspath(...)` around one, or a name bound to one
        in this scope (or the module's). None otherwise: a path whose last part is known only at
        run time names no program."""
        t = type(node)
        if depth > 8:
            return None
        if t is ast.Constant:
            return _program_of(node.value) if isinstance(node.value, str) else None
        if t is ast.JoinedStr:                              # `f"{venv}/bin/python"`: its written end
            last = node.values[-1] if node.values else None
            if type(last) is not ast.Constant or ("/" not in last.value and len(node.values) > 1):
                return None
            return _program_of(last.value)
        if t is ast.BinOp:
            op = type(node.op)
            if op is ast.Div or op is ast.Add:              # `venv / "bin" / "python"`, `venv + "/bin/vllm"`
                right = node.right
                if type(right) is not ast.Constant or not isinstance(right.value, str) or (
                        op is ast.Add and "/" not in right.value):
                    return None
                return _program_of(right.value)
            left = node.left                                # `"%s/bin/python" % venv`
            return _program_of(left.value) if op is ast.Mod and type(left) is ast.Constant \
                and isinstance(left.value, str) and "/" in left.value else None
        if t is ast.Name or t is ast.Attribute:
            key = self.key_of(node)
            return self._in_scope("programs", key) if key is not None else None
        if t is not ast.Call:
            return None
        func = node.func
        called = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else None
        if called == "format":                              # `"{}/bin/python".format(venv)`
            lit = func.value
            return _program_of(lit.value) if type(lit) is ast.Constant and isinstance(lit.value, str) \
                and "/" in lit.value else None
        if called not in PATH_CALLS:
            return None
        args = _call_args(node)
        if not args:                                        # `(venv / "bin" / "python").as_posix()`
            return self.program_word(func.value, depth + 1) if (
                isinstance(func, ast.Attribute) and func.attr in PATH_METHODS) else None
        positional = [a.value for a in args if a.keyword is None and not a.star]
        if len(positional) != len(args):
            return None
        name = self.code(func).replace(" ", "")
        if name in PATH_OF and len(positional) == 1:        # `str(...)`, `os.fspath(...)`
            return self.program_word(positional[0], depth + 1)
        if name in PATH_JOINS or (isinstance(func, ast.Attribute) and func.attr == "joinpath") \
                or (name in ("shutil.which", "which") and len(positional) == 1):
            last = positional[-1]                          # the last part: written, or a name bound to it
            if type(last) in (ast.Constant, ast.Name, ast.Attribute):
                return self.program_word(last, depth + 1)
        return None

    def note_program(self, node) -> None:
        """An argv item that is a path expression naming a program (`program_word`): recorded
        while the walk is at it, so a name means what it was bound to there."""
        t = type(node)
        if t is ast.Constant or t is ast.Starred:
            return
        word = self.program_word(node)
        if word is not None:
            self.programs[id(node)] = word

    def helper_chain(self, node) -> Chain | None:
        """`build_cmd(...)` / `self.build_cmd(...)`: the one argv list a function of this file
        returns (written above the call), or None (not a call of ours, several lists, or none)."""
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "cls")) else None
        found = self.returns.get(name or "")
        if not found or len(found) != 1 or found[0] is None:
            return None
        return found[0]

    def leave_Return(self, node) -> None:
        """A function's `return [...]` / `return cmd`: the list a call of it gives."""
        if not self.scope.name or self.scope.is_class or node.value is None:
            return
        value, chain = node.value, None
        if isinstance(value, (ast.List, ast.Tuple, ast.BinOp)):
            chain = next((c for c in reversed(self.chains) if c.anchor is value), None)
        else:
            chain = self.find_chain(self.copied_name(value))
        name = self.scope.name.rsplit(".", 1)[-1]
        known = self.returns.setdefault(name, [])
        if chain not in known:
            known.append(chain)

    def copied_name(self, node) -> str | None:
        """`cmd`, `list(cmd)`, `cmd.copy()`, `cmd[:]`: a copy of the named list."""
        if isinstance(node, ast.Call):
            args = _call_args(node)
            if isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple") and len(args) == 1:
                return self.key_of(args[0].value)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "copy" and not args:
                return self.key_of(node.func.value)
            return None
        if isinstance(node, ast.Subscript):
            sl = node.slice
            if isinstance(sl, ast.Slice) and sl.lower is None and sl.upper is None and sl.step is None:
                return self.key_of(node.value)
            return None
        return self.key_of(node)

    def start_chain(self, key: str, value, anchor) -> bool:
        why: list[str] = []
        segs, ok = self.segs_of(value, key, why)
        if not ok:
            return False
        chain = Chain(key, self.scope, anchor, segs, why[0] if why else None)
        self.scope.chains[key] = chain
        self.chains.append(chain)
        for seg in segs:
            if seg.kind == "opaque":
                chain.unfollowable = chain.unfollowable or f"`{key}` is built from {self.code(seg.node)}"
        return True

    def extend_chain(self, chain: Chain, value, how: str) -> None:
        why: list[str] = []
        segs, ok = self.segs_of(value, chain.key, why)
        if self.scope.loops:
            for seg in segs:
                seg.splits = True
        chain.segs.extend(segs)
        if why:
            chain.unfollowable = chain.unfollowable or why[0]
        if any(seg.kind == "opaque" for seg in segs):
            chain.unfollowable = chain.unfollowable or f"`{chain.key}` is extended by {how}"

    def anonymous_chain(self, node) -> None:
        """A list literal or `+` of lists used in place (`Popen(["vllm", ...] + extra)`)."""
        if isinstance(node, ast.BinOp) and not (
                isinstance(node.op, ast.Add) and any(
                    isinstance(o, (ast.List, ast.Tuple)) for o in _add_operands(node))):
            return
        if self.inside_compare:
            return
        parent = self.stack[-2] if len(self.stack) > 1 else None
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)) and parent.iter is node:
            return                                  # `for word in ["vllm", "serve"]`
        why: list[str] = []
        segs, ok = self.segs_of(node, "", why)
        if not ok:
            return
        chain = Chain("", self.scope, node, segs, why[0] if why else None)
        if any(seg.kind == "opaque" for seg in segs):
            chain.unfollowable = chain.unfollowable or f"the argv is built with {self.code(node)}"
        self.chains.append(chain)

    def visit_Assign(self, node) -> None:
        self.env_assign(node)
        if len(node.targets) != 1:
            return
        self.bind(node.targets[0], node.value, node)

    def visit_AnnAssign(self, node) -> None:
        if node.value is not None:
            self.bind(node.target, node.value, node)
            self.env_dict_binding(node.target, node.value)

    def bind(self, target, value, stmt) -> None:
        key = self.key_of(target)
        if key is None:
            if isinstance(target, ast.Subscript):
                chain = self.find_chain(self.key_of(target.value))
                if chain is not None:
                    chain.unfollowable = chain.unfollowable or f"`{chain.key}` is changed by item assignment"
            return
        self.scope.strings.pop(key, None)
        self.scope.programs.pop(key, None)
        word = self.program_word(value)
        if word is not None:
            self.scope.programs[key] = word
        if isinstance(value, (ast.Dict, ast.List)) or (isinstance(value, ast.Call) and self.code(value.func) == "dict"):
            self.dicts[key] = value
        else:
            self.dicts.pop(key, None)
        if self.is_string_expr(value):
            self.scope.chains.pop(key, None)
            self.scope.strings[key] = value
        elif not ((self.find_chain(self.copied_name(value)) is not None or self.helper_chain(value) is not None
                   or isinstance(value, (ast.List, ast.Tuple, ast.BinOp)))
                  and self.start_chain(key, value, stmt)):
            self.scope.chains.pop(key, None)      # rebound to something else: that list is done

    def visit_AugAssign(self, node) -> None:
        self.env_augassign(node)
        key = self.key_of(node.target)
        chain = self.scope.chains.get(key) if key else None
        if chain is None:
            return
        if isinstance(node.op, ast.Add):
            self.extend_chain(chain, node.value, f"+= {self.code(node.value)}")
        else:
            chain.unfollowable = chain.unfollowable or f"`{key}` is changed by {self.code(node)}"

    def visit_Delete(self, node) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0]
        if isinstance(target, ast.Subscript):
            chain = self.find_chain(self.key_of(target.value))
            if chain is not None:
                chain.unfollowable = chain.unfollowable or f"`{chain.key}` is changed by del"

    def list_method(self, node) -> None:
        func = node.func
        if not isinstance(func, ast.Attribute):
            return
        chain = self.scope.chains.get(self.key_of(func.value) or "")
        if chain is None:
            return
        method, args = func.attr, _call_args(node)
        if method == "extend" and len(args) == 1 and not args[0].keyword:
            self.extend_chain(chain, args[0].value, self.code(node))
        elif method == "append" and len(args) == 1 and not args[0].keyword:
            self.note_program(args[0].value)
            chain.segs.append(Seg("item", args[0].value, owner=chain.key, splits=self.scope.loops > 0))
        elif method == "insert" and len(args) == 2:
            self.note_program(args[1].value)
            seg = Seg("item", args[1].value, owner=chain.key, splits=self.scope.loops > 0)
            if self.code(args[0].value) == "0":
                chain.segs.insert(0, seg)
            else:
                chain.segs.append(seg)
                chain.unfollowable = chain.unfollowable or f"`{chain.key}` is changed by {self.code(node)}"
        elif method in LIST_MUTATORS:
            chain.unfollowable = chain.unfollowable or f"`{chain.key}` is changed by {self.code(node)}"

    def chain_launch(self, chain: Chain) -> Launch | None:
        argv: list[Arg] = []
        origin: list[tuple[Seg, int]] = []        # for each argv item: its seg and element index
        for seg in chain.segs:
            if seg.kind == "list":
                for i, el in enumerate(seg.elems):
                    argv.append(self.elem_arg(el))
                    origin.append((seg, i))
            elif seg.kind == "item":
                argv.append(self.elem_arg(seg.node, splits=seg.splits))
                origin.append((seg, 0))
            else:
                argv.append(Arg(self.code(seg.node), self.source, self.span(seg.node), dynamic=True, splits=True))
                origin.append((seg, 0))
        # a program known by what its path ends in (`str(venv / "bin" / "python")`): that word
        # for detection only; the item itself stays as written (argv[0] is never edited)
        programs = self.programs
        words = ["python" if a.dynamic and a.value.replace(" ", "") == "sys.executable"
                 else programs.get(id(seg.elems[i] if seg.kind == "list" else seg.node), a.value)
                 if a.dynamic else a.value
                 for a, (seg, i) in zip(argv, origin)]
        det = detect(words)
        if det is None:
            return self.docker_run_list(chain, argv, words)
        for seg in chain.segs:
            if seg.kind == "list":
                self.launch_elems.update(id(el) for el in seg.elems)
        context = self.context(chain.scope)
        launch = Launch(kind=det.kind, file=self.source, span=argv[det.start].span or self.span(chain.anchor),
                        argv=argv[det.start:], options_start=det.options_start - det.start, context=context,
                        group=f"{self.source.display}#{context}", env=list(self.env), program=det.program)
        launch.append_site, launch.not_editable = self.chain_append_site(chain, argv)
        return launch

    def chain_append_site(self, chain: Chain, argv: list[Arg]) -> tuple[AppendSite | None, str | None]:
        if chain.unfollowable:
            return None, chain.unfollowable
        segs = chain.segs
        last = segs[-1]
        if last.kind == "opaque" or last.splits:
            return None, f"its argv ends in items known only at run time ({self.code(last.node)})"
        if last.kind == "list" and last.elems and isinstance(last.elems[-1], ast.Starred):
            return None, f"its argv ends in {self.code(last.elems[-1])}"
        # the last list literal this list owns; items appended after it must not be a flag's value
        n_after = 0
        for seg in reversed(segs):
            if seg.kind == "list" and seg.elems:
                break
            if seg.kind != "list":
                n_after += 1
        else:
            return None, "no list literal to add an item to"
        if seg.owner != chain.key:
            return None, f"its argv ends with the items of `{seg.owner}`, which other launches may share"
        if seg.elems[-1] is not (seg.node.elts[-1] if seg.node.elts else None):
            return None, "its argv ends inside a list that is spliced with *"
        if n_after:
            before, after = argv[len(argv) - n_after - 1], argv[len(argv) - n_after]
            if before.value.startswith("-") and "=" not in before.value and not after.value.startswith("-"):
                return None, f"an item after the list may be the value of {before.value}"
        return self.list_site(seg.node), None

    def list_site(self, node) -> AppendSite:
        elems = node.elts
        quote = '"'
        for el in reversed(elems):
            q = self.quote_of(el)
            if q:
                quote = q
                break
        s, e = self.span(node.elts[-1])
        ls = self.line_start(s)
        indent = self.text[ls:s]
        if not indent.strip():             # one item per line: the new item gets its own
            nl_at = LINE_RE.search(self.text, e)
            nl = nl_at.group(0) if nl_at else "\n"
            rest = self.text[e:nl_at.start() if nl_at else len(self.text)]
            if nl_at and re.fullmatch(r"\s*,\s*#.*", rest):
                # `"m",  # comment`: the new item goes on the next line, the comment stays
                return AppendSite(self.source, nl_at.start(), nl + indent + quote + "{}" + quote + ",")
            return AppendSite(self.source, e, "," + nl + indent + quote + "{}" + quote)
        return AppendSite(self.source, e, ", " + quote + "{}" + quote)


def _program_of(path: str) -> str | None:
    """`/opt/venv/bin/python3` -> "python3", `bin/vllm` -> "vllm"; None for any other last part."""
    last = path.rstrip("/").rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    m = PROGRAM_NAME_RE.match(last)
    return m.group(1) if m else None
