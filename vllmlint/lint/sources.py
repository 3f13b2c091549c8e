"""Read files as text we can edit byte-exactly, and write them back the same way."""
from __future__ import annotations

import codecs
import errno
import os
import re
from pathlib import Path

from ..knowledge.launchers import may_launch
from ..model.launch import SourceFile, is_test_code  # noqa: F401 (is_test_code: lint's callers import it here)


MAX_BYTES = 10 * 1024 * 1024    # a deployment config is never this big; bounded time and memory


class Unreadable(Exception):
    """`concerns_vllm`: False when the bytes were read and never mention vLLM (a binary or
    non-UTF-8 file that is no deployment config of ours: skipped, not an error)."""

    def __init__(self, line: int, reason: str, concerns_vllm: bool = True):
        super().__init__(reason)
        self.line, self.reason, self.concerns_vllm = line, reason, concerns_vllm


def decode(raw: bytes) -> tuple[str, bool]:
    bom = raw.startswith(codecs.BOM_UTF8)
    body = raw[len(codecs.BOM_UTF8):] if bom else raw
    try:
        return body.decode("utf-8"), bom
    except UnicodeDecodeError as err:
        line = body[:err.start].count(b"\n") + 1
        raise Unreadable(line, f"not UTF-8 text (byte 0x{body[err.start]:02x} at offset {err.start})") from None


def mentions_vllm(data: bytes | str) -> bool:
    """Whether a file that cannot be parsed concerns vLLM at all (any way of starting it shows,
    knowledge/launchers.py): one that shows none (a Terraform template, a sample with `{{ }}`
    placeholders) is skipped rather than failing the run."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    lowered = data.lower()
    # `vllm` as a name of its own: `dvllm_run.json`, `nanovllm` are other engines' (found as a
    # user on zhijie-group/d2f_vllm, whose Python 3.12 files failed the run on 3.11)
    return may_launch(lowered) and re.search(r"(?<![a-z0-9])vllm", lowered) is not None


def read_source(path: Path, display: str, kind: str) -> SourceFile:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise Unreadable(1, f"skipped: {size / 1e6:.1f} MB is over the {MAX_BYTES // 2**20} MiB limit")
        raw = path.read_bytes()
    except OSError as err:
        raise Unreadable(0, f"cannot read: {err.strerror or err}") from None
    if b"\0" in raw[:8192]:
        raise Unreadable(1, "binary file", mentions_vllm(raw))
    try:
        text, bom = decode(raw)
    except Unreadable as err:
        err.concerns_vllm = mentions_vllm(raw)
        raise
    return SourceFile(path=path, display=display, text=text, kind=kind, bom=bom)


def encode(source: SourceFile, text: str) -> bytes:
    return (codecs.BOM_UTF8 if source.bom else b"") + text.encode("utf-8")


class FileChanged(OSError):
    """The file on disk is no longer the one the fix was computed on."""


def write_atomic(path: Path, data: bytes, expect: bytes | None = None) -> None:
    """Temp file in the same folder, same mode, then rename: never a half-written config.

    A symbolic link is never replaced (discovery hands over link targets), a file without write
    permission bits is refused (even for root), and with `expect` the file must still hold exactly
    those bytes right before the rename: a fix computed on stale content is never written."""
    if path.is_symlink():
        raise OSError(errno.ELOOP, "is a symbolic link (not replaced)")
    st = path.stat()
    if not os.access(path, os.W_OK) or not st.st_mode & 0o222:
        raise PermissionError(errno.EACCES, "the file is read-only")
    mode = st.st_mode & 0o7777
    import tempfile              # only when a fix is written

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".vllmlint", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        if hasattr(os, "chown") and os.stat(tmp).st_uid != st.st_uid:
            try:
                os.chown(tmp, st.st_uid, st.st_gid)     # root fixing someone else's file
            except OSError:
                pass
        if expect is not None and path.read_bytes() != expect:
            raise FileChanged(errno.EAGAIN, "changed on disk while it was checked (run again)")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
