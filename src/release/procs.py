"""The processes a build starts, kept in one group so they end with the session.

A build command (``python -m build``, ``cmake``) is started in a new session (POSIX ``setsid``:
its own process group, session id = its PID; on Windows a new process group). Ninja starts each
compile in a process group of its own (so a terminal's Ctrl-C reaches only Ninja), but every
process below the command keeps the command's session id, so on Linux ``/proc/<pid>/stat`` finds
all of them, nvcc and cicc included, even after their parent died. :func:`stop` ends them:
SIGTERM to the command's group (Ninja forwards it to its compiles) and to every process of the
session, up to ``grace`` seconds of waiting, then SIGKILL for what is left.

The session runs its build through :func:`popen_kwargs` and calls :func:`stop` on its way out
(Ctrl-C, SIGTERM, an error); the build folder's lock (release.locks) records the session id, so
after a SIGKILL of the session, which nothing can catch, the next session in that folder stops
the compilers still running there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_PROC = Path("/proc")


def popen_kwargs() -> dict:
    """subprocess.Popen arguments that start the child in a session (POSIX) or process group (Windows) of its own."""
    if os.name == "nt":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, session, ...); None if gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (/proc/<pid>/stat field 22); None when unknown."""
    fields = _stat(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def alive(pid: int) -> bool:
    """True when a process `pid` exists (a zombie counts as ended)."""
    if _PROC.is_dir():
        fields = _stat(pid)
        return fields is not None and fields[0] != "Z"
    if os.name == "nt":
        out = subprocess.run(["tasklist", "/FI", f"PID eq {pid}", "/NH"], capture_output=True, text=True).stdout
        return str(pid) in out
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def members(sid: int, since: int | None = None) -> list[int]:
    """Live processes of session `sid` (Linux; elsewhere the leader alone when it lives), leaving
    out any that started before tick `since` (a reused id then belongs to someone else)."""
    if not _PROC.is_dir():
        return [sid] if alive(sid) else []
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if not fields or len(fields) < 20 or fields[0] == "Z" or int(fields[3]) != sid:
            continue
        if since is not None and int(fields[19]) < since:
            continue
        found.append(int(entry.name))
    return found


def _signal(pids: list[int], sid: int, sig: int) -> None:
    if os.name == "nt":
        # taskkill /T ends the tree below the group's first process (Windows has no session ids here).
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(sid)], capture_output=True)
        return
    for target in (lambda: os.killpg(sid, sig), *(lambda p=p: os.kill(p, sig) for p in pids)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


def stop(sid: int, since: int | None = None, grace: float = 10.0) -> int:
    """Stop every process of the build session `sid`; returns how many were running.

    SIGTERM first (Ninja stops its compiles and exits), then SIGKILL for what is left after
    `grace` seconds. `since`: see :func:`members`. Raises nothing.
    """
    pids = members(sid, since)
    if not pids:
        return 0
    _signal(pids, sid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and members(sid, since):
        time.sleep(0.1)
    left = members(sid, since)
    if left:
        _signal(left, sid, getattr(signal, "SIGKILL", signal.SIGTERM))
    return len(pids)


def stop_child(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop a build command started with :func:`popen_kwargs` and everything it started, then reap it."""
    stop(proc.pid, grace=grace)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if sys.platform != "win32":
        stop(proc.pid, grace=grace)  # compiles that outlived their Ninja
