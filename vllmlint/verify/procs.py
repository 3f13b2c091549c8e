"""The processes `vllmlint verify` starts, and nothing else.

Every server runs in its own session (`start_new_session=True`), so its process group holds
vLLM's API server, engine core and workers and nothing that was there before. Stopping sends
SIGTERM to that group, waits, then SIGKILL. A group is only signalled while its session still
exists with the id we gave it (a session id is the leader's pid, and we are the parent), so no
other process is ever touched. Cleanup also runs on SIGINT/SIGTERM and at exit.
"""
from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024 if hasattr(os, "sysconf") else 4


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it if vllmlint itself dies (even by SIGKILL), so no
    server outlives the run that started it (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
    except Exception:      # pragma: no cover - not Linux: the other cleanup paths remain
        pass


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stat(pid: str) -> tuple[int, int, int] | None:
    """(pgid, session, rss_kb) of a process from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    rest = data[data.rfind(")") + 2:].split()
    # fields after the command: state ppid pgrp session ... rss is field 24 overall (index 21 here)
    try:
        return int(rest[2]), int(rest[3]), int(rest[21]) * PAGE_KB
    except (IndexError, ValueError):
        return None


def group_members(pgid: int) -> list[tuple[int, int]]:
    """(pid, rss_kb) of the live processes of session/group `pgid`."""
    found = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        st = _stat(pid)
        if st and st[0] == pgid and st[1] == pgid:
            found.append((int(pid), st[2]))
    return found


@dataclass
class Proc:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen | None = None
    started: float = 0.0
    peak_rss_kb: int = 0
    stopped: bool = False
    _sampler: threading.Thread | None = field(default=None, repr=False)

    @property
    def pgid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def group_alive(self) -> bool:
        return self.pgid is not None and bool(group_members(self.pgid))

    def rss_kb(self) -> int:
        return sum(rss for _, rss in group_members(self.pgid)) if self.pgid else 0

    def log_text(self) -> str:
        try:
            return self.log_path.read_text("utf-8", "replace")
        except OSError:
            return ""


class Supervisor:
    """Starts processes in their own groups and stops exactly those groups."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.procs: list[Proc] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._old_handlers: dict[int, object] = {}
        atexit.register(self.stop_all)

    # -- signals ---------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
            except (ValueError, OSError):
                pass

    def restore_signal_handlers(self) -> None:
        for sig, old in self._old_handlers.items():
            try:
                signal.signal(sig, old)   # type: ignore[arg-type]
            except (ValueError, OSError, TypeError):
                pass
        self._old_handlers.clear()

    def _on_signal(self, signum, frame) -> None:
        self.stop_all()
        self.restore_signal_handlers()
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    # -- processes -------------------------------------------------------------------
    def start(self, name: str, argv: list[str], env: dict[str, str], cwd: Path | None = None) -> Proc:
        log_path = self.workdir / f"{name}.log"
        n = 1
        while log_path.exists():
            n += 1
            log_path = self.workdir / f"{name}-{n}.log"
        proc = Proc(name, argv, env, log_path)
        with self._lock:
            log = open(log_path, "wb")
            try:
                proc.popen = subprocess.Popen(argv, env=env, cwd=str(cwd or self.workdir),
                                              stdin=subprocess.DEVNULL, stdout=log,
                                              stderr=subprocess.STDOUT, start_new_session=True,
                                              close_fds=True, preexec_fn=_die_with_parent)
            finally:
                log.close()
            proc.started = time.monotonic()
            self.procs.append(proc)
        proc._sampler = threading.Thread(target=self._sample, args=(proc,), daemon=True)
        proc._sampler.start()
        return proc

    def _sample(self, proc: Proc) -> None:
        while not proc.stopped and not self._done.is_set():
            rss = proc.rss_kb()
            if rss > proc.peak_rss_kb:
                proc.peak_rss_kb = rss
            if proc.popen is not None and proc.popen.poll() is not None and rss == 0:
                return
            time.sleep(0.5)

    def stop(self, proc: Proc, grace: float = 15.0) -> None:
        if proc.popen is None or proc.stopped:
            return
        pgid = proc.popen.pid
        self._signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.popen.poll()
            if not group_members(pgid):
                break
            time.sleep(0.2)
        else:
            self._signal_group(pgid, signal.SIGKILL)
            end = time.monotonic() + 10
            while group_members(pgid) and time.monotonic() < end:
                time.sleep(0.1)
        try:
            proc.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        proc.stopped = True

    @staticmethod
    def _signal_group(pgid: int, sig: int) -> None:
        # only while the group is still the session we created: its members carry our ids
        if not group_members(pgid):
            return
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop_all(self) -> None:
        with self._lock:
            procs = [p for p in self.procs if not p.stopped]
        for proc in reversed(procs):
            self.stop(proc)
        self._done.set()

    def close(self) -> None:
        self.stop_all()
        self.restore_signal_handlers()
        try:
            atexit.unregister(self.stop_all)
        except Exception:     # pragma: no cover
            pass
