"""Load a tree into the launch model: discover -> read -> parse -> link.

Linking is the first layer of the deployment graph: ConfigMaps reach the workloads that
`envFrom` them, and every env entry learns which launches it reaches.
"""
from __future__ import annotations

from ..model.record import field, record
from pathlib import Path

from .discovery import Candidate
from ..knowledge.launchers import may_launch
from ..parsers.templates import engine_of, read_template
from ..model.launch import EnvEntry, Launch, ParsedFile, ParseError, SourceFile
from .releases import assign_releases
from .sources import Unreadable, mentions_vllm, read_source


def parser_for(kind: str):
    # imported lazily: a pre-commit run on one YAML file must not pay for the Python front end
    if kind in ("yaml", "compose", "k8s"):
        from ..parsers.yamlfile import parse_yaml
        return parse_yaml
    if kind == "dockerfile":
        from ..parsers.dockerfile import parse_dockerfile
        return parse_dockerfile
    if kind == "shell":
        from ..parsers.shellscan import parse_shell
        return parse_shell
    if kind == "make":
        from ..parsers.recipes import parse_makefile
        return parse_makefile
    if kind == "just":
        from ..parsers.recipes import parse_justfile
        return parse_justfile
    if kind == "systemd":
        from ..parsers.systemd import parse_systemd
        return parse_systemd
    if kind == "python":
        from ..parsers.pythonfile import parse_python
        return parse_python
    if kind == "triton":
        from ..parsers.triton import parse_triton
        return parse_triton
    return None


@record
class Problem:
    """A file that could not be checked: reported as `path:line: reason`."""

    display: str
    line: int
    reason: str
    # False: the file never mentions vLLM, so it is skipped (listed with --verbose), not an error
    concerns_vllm: bool = True

    def __str__(self) -> str:
        from .report import mask_secrets

        return f"{self.display}:{self.line}: {mask_secrets(self.reason)}"


@record
class Project:
    files: list[ParsedFile] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    others: list[SourceFile] = field(default_factory=list)     # read but not parsed (requirements)
    charts: list = field(default_factory=list)     # parsers.helm.Rendering: each chart values set rendered
    # a migrate chain starts its next step from this project when the step leaves it as it is:
    # what the rules derived from it (the launch graph, the secret values) is kept for that step
    keep_derived: bool = False
    # (rule code, target) -> the findings of a per_launch rule (registry.Rule.per_launch) that
    # the parse workers ran, in file order; run_rules takes them instead of running the rule
    from_workers: dict = field(default_factory=dict)

    @property
    def launches(self) -> list[Launch]:
        """Every launch, file by file (a new list: callers may keep or change it). A file's
        launches are fixed once it is parsed: the list is built again only when files were added."""
        seen = self.__dict__.get("_launches")
        if seen is None or seen[0] != len(self.files):
            seen = self._launches = (len(self.files), [l for pf in self.files for l in pf.launches])
        return list(seen[1])

    @property
    def env(self) -> list[EnvEntry]:
        return [e for pf in self.files for e in pf.env]

    @property
    def sources(self) -> list[SourceFile]:
        return [pf.source for pf in self.files] + self.others


def gate(source: SourceFile) -> str | None:
    """Why `source` is not parsed at all (its text has no marker of a launch), else None."""
    if source.kind == "python" and not may_launch(source.text, "python"):
        return ("python: no marker of a launch in its text (knowledge/launchers.py: vLLM, Ray Serve LLM, "
                "a P/D proxy's `kv_transfer_params`)")
    return None


# read, never parsed as launches: what they say is the release of the launches they install
OTHER_KINDS = ("requirements", "pyproject")


def parse_source(source: SourceFile) -> ParsedFile | None:
    parse = parser_for(source.kind)
    if parse is None:
        return None
    if gate(source) is not None:
        return ParsedFile(source)          # no way of starting vLLM shows, nor a P/D proxy app: nothing to parse
    if source.kind in ("shell", "python") and engine_of(source.path.name):
        return read_template(source, source.kind)    # a Terraform or Jinja template of a script
    parsed = parse(source)
    if parsed is not None and parsed.launches and "--config" in source.text:
        from ..parsers.options_file import read_options_files
        read_options_files(parsed)           # `vllm serve --config FILE`: the file's options too
    return parsed


# Called once per file read (`migrate` shows progress with it on long runs); None: silent.
ON_FILE = None


class ParseCache:
    """Parsed files by path, reused while a file's text is unchanged: the passes of
    `--fix` and the steps of a `migrate` chain re-read the whole tree but re-parse only the files
    an edit changed. One entry per path (the latest text), so memory stays flat across passes.

    `link` adds to what a parser produced (ConfigMap env, entry -> launch links); the parser's own
    lists are kept aside here and put back before a reused file is linked again."""

    def __init__(self):
        # path -> (text, parsed, each launch's own env, each entry's own launches). The kind is
        # no part of the key: discovery gives a path and text one kind (a parser may refine it).
        self._by_path: dict[Path, tuple[str, ParsedFile, list, list]] = {}
        # path -> (text, its native parse check's answer) when the caller keeps them
        # (parseback.native_error's memo; a migrate chain sets it), else None
        self.native: dict | None = None

    def __len__(self) -> int:
        return len(self._by_path)

    def get(self, source: SourceFile) -> ParsedFile | None:
        hit = self._by_path.get(source.path)
        if hit is None or hit[0] != source.text or not all(_unchanged(p, t) for p, t in hit[1].read_files):
            return None
        _, parsed, envs, reaches = hit
        for launch, env in zip(parsed.launches, envs):
            launch.env = list(env)
        for entry, launches in zip(parsed.env, reaches):
            entry.launches = list(launches)
        return parsed

    def put(self, source: SourceFile, parsed: ParsedFile) -> None:
        self._by_path[source.path] = (source.text, parsed,
                                      [list(l.env) for l in parsed.launches],
                                      [list(e.launches) for e in parsed.env])


def _unchanged(path: Path, text: str) -> bool:
    """Does the run read `text` there still (an options file a parse read: an editor may change it)?"""
    from ..parsers.options_file import current_text

    return current_text(path) == text


# Trees with at least this many files to parse are parsed in worker processes (one per core,
# at most MAX_WORKERS); below it, starting workers costs more than it saves. `VLLMLINT_JOBS=1`
# forces one process (and `=N` a count). Results are merged in discovery order, so the output
# is byte-identical whatever the number of workers (tests/test_parallel.py).
PARALLEL_MIN_FILES = 400
MAX_WORKERS = 8
_CHUNK = 48


def workers_for(n_files: int) -> int:
    import os

    forced = os.environ.get("VLLMLINT_JOBS", "").strip()
    if forced.isdigit() and int(forced) >= 1:
        return min(int(forced), MAX_WORKERS)
    if n_files < PARALLEL_MIN_FILES or ON_FILE is not None:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:               # not Linux: os.cpu_count() counts cores we may not get
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


def _read(cand: Candidate, override: str | None) -> SourceFile:
    """The file's text: from disk, or `override` (a fix pass's result, an editor's unsaved
    buffer). A buffer whose file is not on disk (yet) is read from the buffer alone."""
    try:
        source = read_source(cand.path, cand.display, cand.kind)
    except Unreadable:
        if override is None or not cand.unsaved or cand.path.exists():
            raise           # a file deleted during a `--fix` run stays "cannot read"
        return SourceFile(path=cand.path, display=cand.display, text=override, kind=cand.kind)
    if override is not None:
        source.text = override
    return source


def _read_and_parse(cand: Candidate, override: str | SourceFile | None):
    """One file: ("file", ParsedFile) | ("other", SourceFile) | ("problem", Problem) | None.
    `override`: the text to use instead of the file's, or the SourceFile already read (a cache
    miss on a later pass: not read twice)."""
    if isinstance(override, SourceFile):
        source = override
    else:
        try:
            source = _read(cand, override)
        except Unreadable as err:
            return "problem", Problem(cand.display, err.line, err.reason, err.concerns_vllm)
    if cand.kind in OTHER_KINDS:
        return "other", source
    try:
        parsed = parse_source(source)
    except ParseError as err:
        return "problem", Problem(cand.display, err.line, err.reason, mentions_vllm(source.text))
    except RecursionError:
        return "problem", Problem(cand.display, 1, "nested too deeply to read", mentions_vllm(source.text))
    except Exception as err:     # a parser bug on odd input: report this file, check the others
        return "problem", Problem(cand.display, 1, f"internal error while reading it: "
                                                   f"{type(err).__name__}: {err} (please report)",
                                  mentions_vllm(source.text))
    return ("file", parsed) if parsed is not None else None


def _parse_chunk(work: list[tuple[Candidate, str | SourceFile | None]]) -> list:
    return [_read_and_parse(cand, override) for cand, override in work]


def _parse_all(work: list[tuple[Candidate, str | SourceFile | None]], rules: list = ()) -> tuple[list, dict]:
    """Each file's result, in order; in worker processes when the tree is big enough and the
    platform can fork (a forked worker inherits the imported parsers: no start-up cost).
    `rules`: per_launch rules for the workers to run on the files they parse; the second value
    is their findings, by (code, target), for each rule that ran without error in every worker
    ({} when parsed here: run_rules then runs them as it runs every rule)."""
    global _WORKER_RULES
    jobs = workers_for(len(work))
    if jobs > 1:
        import multiprocessing

        if "fork" in multiprocessing.get_all_start_methods():
            chunks = [work[i:i + _CHUNK] for i in range(0, len(work), _CHUNK)]
            for kind in {cand.kind for cand, _ in work}:
                parser_for(kind)          # import before forking, once, not in every worker
            _WORKER_RULES = list(rules)   # the workers inherit them with the fork
            try:
                with multiprocessing.get_context("fork").Pool(jobs) as pool:
                    answers = list(pool.imap(_parse_chunk_to_send, chunks))
            except (OSError, ImportError):  # no /dev/shm, no fork allowed: one process it is
                pass
            else:
                results = [r for chunk, _ in answers for r in chunk]
                for (cand, _), result in zip(work, results):
                    source = _source_of(result)
                    if source is not None:
                        source.path = cand.path
                return results, _merge_found(rules, [found for _, found in answers])
            finally:
                _WORKER_RULES = []
    return _parse_chunk(work), {}


# The per_launch rules a worker runs on each chunk it parses (set in the parent before forking).
_WORKER_RULES: list = []


def _parse_chunk_to_send(work: list[tuple[Candidate, str | SourceFile | None]]) -> tuple[list, dict]:
    """_parse_chunk in a worker process, then the per_launch rules on the chunk's files (their
    findings travel back with the files: the objects they refer to are pickled together, so they
    arrive pointing at the same launches and sources). Each file's path stays behind (the main
    process has it, in the same order; a path is the costliest object to read back)."""
    results = _parse_chunk(work)
    found = _check_chunk(results) if _WORKER_RULES else {}
    for result in results:
        source = _source_of(result)
        if source is not None:
            source.path = None
    return results, found


def _check_chunk(results: list) -> dict:
    """(code, target) -> findings of each per_launch rule on these files; None for a rule that
    crashed (the main process runs it again on the whole project and reports the crash as it
    reports any rule's)."""
    from ..knowledge.catalogue.argv import forget_options

    chunk = Project(files=[r[1] for r in results if r is not None and r[0] == "file"])
    found: dict = {}
    try:
        for rule in _WORKER_RULES:
            try:
                found[rule.code, tuple(rule.target)] = list(rule.check(chunk))
            except Exception:
                found[rule.code, tuple(rule.target)] = None
    finally:
        forget_options()       # options cached per launch: this chunk's launches leave with it
    return found


def _merge_found(rules: list, per_chunk: list[dict]) -> dict:
    """Each rule's findings over all chunks, in chunk (= file) order, as one run of the rule on
    the whole project yields them; a rule that crashed in any chunk is left out."""
    merged: dict = {}
    for rule in rules:
        key = rule.code, tuple(rule.target)
        parts = [found.get(key) for found in per_chunk]
        if all(part is not None for part in parts):
            merged[key] = [f for part in parts for f in part]
    return merged


def _source_of(result) -> SourceFile | None:
    if result is None or result[0] == "problem":
        return None
    return result[1].source if result[0] == "file" else result[1]


def load(candidates: list[Candidate], overrides: dict[Path, str] | None = None,
         cache: ParseCache | None = None, extra_images: tuple[str, ...] = (),
         helm_values: dict | None = None, rules: list = ()) -> Project:
    """`helm_values`: chart root (None: every chart) -> values files rendered on top of the
    chart's values.yaml (`--values`, setting `helm-values`). `rules`: the run's rules; when the
    tree is parsed in worker processes, the per_launch ones run there too (Project.from_workers)."""
    project = Project()
    overrides = overrides or {}
    from ..parsers.options_file import use_texts
    use_texts(overrides)              # an options file is read as this run reads it (its buffer)
    results: list = [None] * len(candidates)
    todo: list[int] = []
    already_read: dict[int, SourceFile] = {}
    for i, cand in enumerate(candidates):
        if ON_FILE is not None:
            ON_FILE(cand)
        if cache:             # an empty cache (a first pass) has nothing to reuse: skip the read
            try:
                source = _read(cand, overrides.get(cand.path))
            except Unreadable as err:
                results[i] = "problem", Problem(cand.display, err.line, err.reason, err.concerns_vllm)
                continue
            hit = cache.get(source) if cand.kind not in OTHER_KINDS else None
            if hit is not None:
                results[i] = "cached", hit
                continue
            already_read[i] = source
        todo.append(i)
    # per_launch rules run in the workers only when they parse every file: a file reused from
    # the cache (a later fix pass) is not sent to them, nor are the files a Helm chart renders
    local = [r for r in rules if getattr(r, "per_launch", False)]
    if len(todo) != len(candidates) or any(c.path.name == "Chart.yaml" for c in candidates):
        local = []
    parsed_now, project.from_workers = _parse_all(
        [(candidates[i], already_read.get(i) or overrides.get(candidates[i].path)) for i in todo], local)
    for i, result in zip(todo, parsed_now):
        results[i] = result
        if result is not None and result[0] == "file" and cache is not None:
            cache.put(result[1].source, result[1])
    for result in results:
        if result is None:
            continue
        what, value = result
        if what in ("file", "cached"):
            project.files.append(value)
        elif what == "other":
            project.others.append(value)
        else:
            project.problems.append(value)
    if any(c.path.name == "Chart.yaml" for c in candidates):      # Helm: imported only for charts
        from ..parsers.helm import expand_charts
        project.charts = expand_charts(project.files, project.problems, helm_values)
    link(project)
    assign_releases(project, extra_images)
    return project


def link(project: Project) -> None:
    configmaps: dict[str, list[EnvEntry]] = {}
    for pf in project.files:
        configmaps.update(pf.configmaps)
    launches = project.launches
    runtimes = _serving_runtimes(launches) if any(l.runtime_ref for l in launches) else {}
    overrides = {pf.source.path.parent: pf for pf in project.files if pf.compose_overrides}
    for launch in launches:
        from_maps = [e for name in launch.env_from for e in configmaps.get(name, [])]
        if launch.compose_service and overrides:
            _merge_compose_override(launch, overrides.get(launch.file.path.parent))
        if launch.runtime_ref:
            runtime = _runtime_for(launch, runtimes.get(launch.runtime_ref, []))
            # KServe merges the predictor into the runtime's container: its image runs, its env
            # comes first (set on every link: a reused parse keeps no image of its own here)
            launch.image = runtime.image if runtime is not None else None
            launch.image_source = runtime.file if runtime is not None else None
            if runtime is not None:
                named = {m.name for m in from_maps}
                from_maps = [e for e in runtime.env if e.name not in named] + from_maps
        if from_maps:
            launch.env = from_maps + launch.env     # explicit env wins: it comes later
        for entry in launch.env:
            if launch not in entry.launches:
                entry.launches.append(launch)


def _merge_compose_override(launch: Launch, override) -> None:
    """docker compose merges the override file beside a compose file into it (no `-f` given):
    the override's variables for the launch's service come after its own (they win), and its
    `image:` is the one that runs (`image_source`: the tag a migration bumps is there). A parse
    reused from the cache gets its parser's env back (ParseCache.get) and keeps the image an
    earlier link gave it (`parsed_image` keeps its own), which this link sets again."""
    service = override.compose_overrides.get(launch.compose_service) if override is not None else None
    if service is None:
        return
    launch.env = launch.env + service.env
    if service.image:
        if launch.image_source is None:
            launch.parsed_image = launch.image
        launch.image, launch.image_source = service.image, override.source


def _serving_runtimes(launches: list[Launch]) -> dict[str, list[Launch]]:
    """The launches of KServe (Cluster)ServingRuntimes that run an image, by runtime name."""
    runtimes: dict[str, list[Launch]] = {}
    for launch in launches:
        if launch.serving_runtime and launch.image:
            runtimes.setdefault(launch.serving_runtime, []).append(launch)
    return runtimes


def _runtime_for(launch: Launch, candidates: list[Launch]) -> Launch | None:
    """The runtime an InferenceService predictor runs: the one of its name in its own file, else
    in its folder, else the tree's only one. Two that differ where it looks: none (its release
    stays unknown rather than guessed)."""
    for near in (lambda r: r.file.path == launch.file.path,
                 lambda r: r.file.path.parent == launch.file.path.parent,
                 lambda r: True):
        found = [r for r in candidates if near(r)]
        if found:
            return found[0] if len({r.image for r in found}) == 1 else None
    return None
