"""`vllmlint server`: a Language Server over stdio (pygls, lsprotocol).

Diagnostics on open, change (debounced) and save, computed over the whole workspace folder
with the open buffers in place of the files on disk, so a cross-file finding (a scale-out
consumer in one file, the launch in another) appears in the file it belongs to. Code actions:
each finding's fix (unsafe ones marked), "fix all safe" for a file (`source.fixAll.vllmlint`,
the bytes `vllmlint check --fix` writes) and "suppress with a reason". A failure in one run is
logged and never stops the server.
"""
from __future__ import annotations

import asyncio
import logging
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lsprotocol import types as T
from pygls import uris
from pygls.lsp.server import LanguageServer

from .. import __version__
from ..lint.docs import help_uri
from ..model.launch import Finding
from . import session as S

log = logging.getLogger("vllmlint.server")

DEBOUNCE_S = 0.3
FIX_ALL_KIND = "source.fixAll.vllmlint"
SEVERITY = {"error": T.DiagnosticSeverity.Error, "warning": T.DiagnosticSeverity.Warning,
            "info": T.DiagnosticSeverity.Information}


class VllmlintServer(LanguageServer):
    def __init__(self):
        super().__init__("vllmlint", __version__, text_document_sync_kind=T.TextDocumentSyncKind.Incremental)
        self.spaces: dict[Path | None, S.Workspace] = {}
        self.runs: dict[Path | None, S.Run] = {}
        self.published: dict[Path | None, set[Path]] = {}
        self.pending: dict[Path | None, asyncio.Task] = {}
        self.shown: set[str] = set()            # settings errors already shown (once each, not per keystroke)
        # one lint at a time, off the message loop: requests keep flowing while a run works
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vllmlint-lint")

    # -- where things are ----------------------------------------------------------------------
    def roots(self) -> list[Path]:
        out = []
        for folder in self.workspace.folders.values():
            path = uris.to_fs_path(folder.uri)
            if path:
                out.append(Path(path).resolve())
        if not out and self.workspace.root_path:
            out.append(Path(self.workspace.root_path).resolve())
        return out

    def root_of(self, path: Path) -> Path | None:
        inside = [r for r in self.roots() if S._inside(path, r)]
        return max(inside, key=lambda r: len(r.parts)) if inside else None

    def space(self, root: Path | None) -> S.Workspace:
        if root not in self.spaces:
            self.spaces[root] = S.Workspace(root)
        return self.spaces[root]

    def overrides(self, root: Path | None, versions: dict | None = None) -> dict[Path, str]:
        """The open buffers of a folder, by path (and, into `versions`, their versions)."""
        out = {}
        for doc in list(self.workspace.text_documents.values()):
            path = uris.to_fs_path(doc.uri)
            if path and self.root_of(Path(path).resolve()) == root:
                out[Path(path).resolve()] = doc.source
                if versions is not None:
                    versions[Path(path).resolve()] = doc.version
        return out

    def units(self):
        return S.units_of(str(self.workspace.position_encoding or "utf-16"))

    # -- runs ----------------------------------------------------------------------------------
    async def lint(self, root: Path | None) -> S.Run | None:
        versions: dict[Path, int | None] = {}
        overrides = self.overrides(root, versions)
        loop = asyncio.get_running_loop()
        try:
            run = await loop.run_in_executor(self.pool, self.space(root).check, overrides)
        except Exception as err:      # a bug on some input: say so, keep serving
            self.log_error(f"vllmlint: lint of {root or 'open files'} failed: {err!r}\n{traceback.format_exc()}")
            return None
        self.runs[root] = run
        if run.config_error and run.config_error not in self.shown:
            self.shown.add(run.config_error)
            self.window_show_message(T.ShowMessageParams(T.MessageType.Warning, f"vllmlint settings: {run.config_error}"))
        for line in run.other_problems:
            self.log_error(f"vllmlint: {line}")
        self.publish(root, run, versions)
        return run

    def schedule(self, root: Path | None, delay: float) -> None:
        task = self.pending.pop(root, None)
        if task is not None:
            task.cancel()

        async def later():
            await asyncio.sleep(delay)
            self.pending.pop(root, None)
            await self.lint(root)

        self.pending[root] = asyncio.ensure_future(later())

    async def fresh_run(self, root: Path | None) -> S.Run | None:
        """The last run, if it saw the buffers as they are now; else a new one."""
        run = self.runs.get(root)
        if run is not None and run.overrides == self.overrides(root):
            return run
        task = self.pending.pop(root, None)
        if task is not None:
            task.cancel()
        return await self.lint(root)

    def publish(self, root: Path | None, run: S.Run, versions: dict | None = None) -> None:
        """Diagnostics for every file of the folder with findings, every open buffer, and every
        file that had some last time (now cleared); an open buffer's carry the version they were
        computed on, so a client drops them once it has moved on."""
        versions = versions or {}
        units = self.units()
        open_paths = set(run.overrides)
        paths = run.paths() | open_paths | self.published.get(root, set())
        for path in sorted(paths):
            try:
                diagnostics = self.diagnostics(run, path, units)
            except Exception as err:      # one file's bad offsets never stop the others
                self.log_error(f"vllmlint: diagnostics for {path}: {err!r}")
                diagnostics = []
            self.text_document_publish_diagnostics(
                T.PublishDiagnosticsParams(uri=uris.from_fs_path(str(path)), diagnostics=diagnostics,
                                           version=versions.get(path)))
        self.published[root] = run.paths()

    def diagnostics(self, run: S.Run, path: Path, units) -> list[T.Diagnostic]:
        out = []
        for f in run.findings.get(path, []):
            out.append(self.diagnostic(f, units, run))
        text = real_text(run, path)
        starts = S.line_starts(text)
        for p in run.problems.get(path, []):
            line = max(p.line - 1, 0)
            if line >= len(starts):
                line = len(starts) - 1
            end = starts[line + 1] if line + 1 < len(starts) else len(text)
            end_pos = S.to_position(text, end, units, starts)
            out.append(T.Diagnostic(range=T.Range(T.Position(line, 0), T.Position(*end_pos)),
                                    message=f"not checked: {p.reason}", severity=T.DiagnosticSeverity.Error,
                                    source="vllmlint"))
        return out

    def diagnostic(self, f: Finding, units, run: S.Run) -> T.Diagnostic:
        message = f.message
        if f.file.text == real_text(run, f.file.path):
            where = self.range_of(f.file.text, *f.span, units=units)
        else:       # found in text the file does not hold (a Helm template's rendering): its top
            where = T.Range(T.Position(0, 0), T.Position(0, 0))
            message += f" ({f.file.display}, line {f.line_col[0]})"
        return T.Diagnostic(range=where, message=message,
                            severity=SEVERITY.get(f.severity, T.DiagnosticSeverity.Warning), code=f.code,
                            code_description=T.CodeDescription(href=help_uri(f.code)), source="vllmlint")

    @staticmethod
    def range_of(text: str, start: int, end: int, units) -> T.Range:
        starts = S.line_starts(text)
        return T.Range(T.Position(*S.to_position(text, start, units, starts)),
                       T.Position(*S.to_position(text, max(start, end), units, starts)))

    def log_error(self, message: str) -> None:
        log.error(message)
        try:
            self.window_log_message(T.LogMessageParams(T.MessageType.Error, message))
        except Exception:
            pass

    # -- code actions --------------------------------------------------------------------------
    def text_edits(self, edits_by_file, units) -> dict[str, list[T.TextEdit]]:
        changes: dict[str, list[T.TextEdit]] = {}
        for path, (source, edits) in edits_by_file.items():
            uri = uris.from_fs_path(str(path))
            changes[uri] = [T.TextEdit(self.range_of(source.text, e.start, e.end, units), e.text)
                            for e in sorted(edits, key=lambda e: (e.start, e.end))]
        return changes

    async def code_actions(self, params: T.CodeActionParams) -> list[T.CodeAction]:
        path = Path(uris.to_fs_path(params.text_document.uri) or "").resolve()
        root = self.root_of(path)
        run = await self.fresh_run(root)
        if run is None:
            return []
        units = self.units()
        only = params.context.only
        actions: list[T.CodeAction] = []
        findings = run.findings.get(path, [])
        if findings and wanted(T.CodeActionKind.QuickFix, only):
            text = real_text(run, path)
            starts = S.line_starts(text)
            # every finding on the lines of the cursor or selection, as ruff's server offers them:
            # not only with the cursor on the flagged token
            lo, hi = S.line_bounds(text, params.range.start.line, params.range.end.line, starts)
            for f in findings:
                if f.file.text != text or not (f.span[0] <= hi and lo <= max(f.span)):
                    continue
                diag = self.diagnostic(f, units, run)
                if f.fix is not None and all(e.file.text == real_text(run, e.file.path) for e in f.fix.edits):
                    unsafe = f.fix.applicability == "unsafe"
                    actions.append(T.CodeAction(
                        title=f"{f.code}: {f.fix.description}" + (" (unsafe)" if unsafe else ""),
                        kind=T.CodeActionKind.QuickFix, diagnostics=[diag], is_preferred=not unsafe,
                        edit=T.WorkspaceEdit(changes=self.text_edits(S.fix_edits(f), units))))
                placed = S.suppress_edit(f)
                if placed is not None:
                    edit, where = placed
                    actions.append(T.CodeAction(
                        title=f"{f.code}: suppress with a reason ({where})", kind=T.CodeActionKind.QuickFix,
                        diagnostics=[diag],
                        edit=T.WorkspaceEdit(changes=self.text_edits({path: (f.file, [edit])}, units))))
        if any(f.fix is not None and f.fix.applicability == "safe" for f in findings) \
                and wanted(FIX_ALL_KIND, only):
            action = T.CodeAction(title="vllmlint: fix all safe fixes in this file", kind=FIX_ALL_KIND,
                                  data={"uri": params.text_document.uri})
            resolvable = self.client_capabilities.text_document and \
                self.client_capabilities.text_document.code_action and \
                self.client_capabilities.text_document.code_action.resolve_support
            if not resolvable:
                action = await self.resolve_fix_all(action)
            actions.append(action)
        return actions

    async def resolve_fix_all(self, action: T.CodeAction) -> T.CodeAction:
        uri = (action.data or {}).get("uri")
        if not uri:
            return action
        path = Path(uris.to_fs_path(uri) or "").resolve()
        root = self.root_of(path)
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self.pool, self.space(root).fix_all, self.overrides(root), path)
        except Exception as err:
            self.log_error(f"vllmlint: fix all in {path} failed: {err!r}\n{traceback.format_exc()}")
            result = None
        if result is None:
            action.edit = T.WorkspaceEdit(changes={})
            return action
        old, new = result
        start, end, text = S.minimal_edit(old, new)
        action.edit = T.WorkspaceEdit(changes={uri: [T.TextEdit(self.range_of(old, start, end, self.units()), text)]})
        return action


def real_text(run: S.Run, path: Path) -> str:
    """The text the editor shows for `path`: its buffer, else what was read from disk."""
    if path in run.overrides:
        return run.overrides[path]
    source = run.sources.get(path)
    return source.text if source is not None else ""


def wanted(kind: str, only) -> bool:
    """LSP's kind filter: `source` asks for `source.fixAll.vllmlint`, `quickfix` for quickfix."""
    kind = str(getattr(kind, "value", kind))
    asked = [str(getattr(o, "value", o)) for o in only or ()]
    return not asked or any(kind == o or kind.startswith(o + ".") for o in asked)


def build() -> VllmlintServer:
    server = VllmlintServer()

    def root_of_uri(uri: str) -> Path | None:
        path = uris.to_fs_path(uri)
        return server.root_of(Path(path).resolve()) if path else None

    @server.feature(T.INITIALIZED)
    def initialized(ls: VllmlintServer, params: T.InitializedParams):
        """Files changed on disk (a checkout, a settings edit) re-lint the folder: ask the client
        to watch them, where it can register watchers at run time."""
        caps = ls.client_capabilities.workspace
        watched = caps.did_change_watched_files if caps else None
        if watched and watched.dynamic_registration:
            ls.client_register_capability(T.RegistrationParams(registrations=[T.Registration(
                id="vllmlint-watch", method=T.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=T.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[T.FileSystemWatcher(glob_pattern="**/*")]))]))

    @server.feature(T.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files_changed(ls: VllmlintServer, params: T.DidChangeWatchedFilesParams):
        for root in {root_of_uri(change.uri) for change in params.changes}:
            ls.schedule(root, DEBOUNCE_S)

    @server.feature(T.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: VllmlintServer, params: T.DidOpenTextDocumentParams):
        await ls.lint(root_of_uri(params.text_document.uri))

    @server.feature(T.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: VllmlintServer, params: T.DidChangeTextDocumentParams):
        ls.schedule(root_of_uri(params.text_document.uri), DEBOUNCE_S)

    @server.feature(T.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: VllmlintServer, params: T.DidSaveTextDocumentParams):
        await ls.lint(root_of_uri(params.text_document.uri))

    @server.feature(T.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: VllmlintServer, params: T.DidCloseTextDocumentParams):
        ls.schedule(root_of_uri(params.text_document.uri), 0)

    @server.feature(T.TEXT_DOCUMENT_CODE_ACTION,
                    T.CodeActionOptions(code_action_kinds=[T.CodeActionKind.QuickFix, FIX_ALL_KIND],
                                        resolve_provider=True))
    async def code_action(ls: VllmlintServer, params: T.CodeActionParams):
        try:
            return await ls.code_actions(params)
        except Exception as err:
            ls.log_error(f"vllmlint: code actions failed: {err!r}\n{traceback.format_exc()}")
            return []

    @server.feature(T.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: VllmlintServer, action: T.CodeAction):
        if action.kind == FIX_ALL_KIND:
            return await ls.resolve_fix_all(action)
        return action

    return server


def main() -> None:
    import gc

    gc.enable()        # the CLI turns the cyclic collector off; a long-lived server needs it
    logging.basicConfig(level=logging.WARNING, format="vllmlint server: %(levelname)s %(name)s: %(message)s")
    build().start_io()
