"""One session at a time per build folder and per output: an exclusive lock that names its holder.

:func:`hold` takes an OS file lock (``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows; the
lock ends with the process that holds it, however it ends) on the lock file the caller names,
and writes beside it ``<lock>.json`` with the holder's PID,
command line, start time and the build sessions it started (:meth:`Lock.record`, release.procs).
A second session that finds the lock taken stops with an ``error:`` line that names the holder.

A stale lock (its holder was killed, so the OS lock is free but the holder file is still there)
is taken over with a warning, and the compilers that session left running (its recorded build
sessions, found by session id on Linux) are stopped first, so they cannot write into the
folder the new build uses; :func:`reap_stale` does the same for every build folder of a build root
when any build starts there. The lock file itself stays (removing it would race with a new
holder); the holder file goes when the lock is released.

stdlib only: the gather session runs without a virtual environment (noxfile.py).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from release import procs
from release.errors import ReleaseError

LOCK_NAME = ".flash_attn-session.lock"
_HELD: dict[Path, Lock] = {}  # build folder -> the lock this process holds on it (hold_build_folder)


def _try_lock(fd: int) -> bool:
    if os.name == "nt":
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class Lock:
    """A held lock (see :func:`hold`)."""

    def __init__(self, path: Path, fd: int):
        self.path, self.fd = path, fd
        self.info_path = path.with_name(path.name + ".json")
        self.info = {
            "pid": os.getpid(),
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "since": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "builds": [],
        }

    def write(self) -> None:
        tmp = self.info_path.with_name(f"{self.info_path.name}.{os.getpid()}.partial")
        tmp.write_text(json.dumps(self.info) + "\n", encoding="utf-8")
        os.replace(tmp, self.info_path)

    def record(self, sid: int) -> None:
        """Note a build session (release.procs) started under this lock, for a later takeover."""
        self.info["builds"].append({"sid": sid, "start": procs.start_time(sid)})
        self.write()


def read_holder(info_path: Path) -> dict | None:
    """The holder record beside a lock, None when there is none or it cannot be read."""
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _take_over(lock: Lock, what: str) -> None:
    old = read_holder(lock.info_path)
    if not old:
        return
    print(
        f"warning: taking over the lock of {what} from PID {old.get('pid')} ({old.get('command')}, since "
        f"{old.get('since')}), which ended without releasing it",
        file=sys.stderr,
        flush=True,
    )
    for build in old.get("builds") or []:
        if not isinstance(build, dict) or not isinstance(build.get("sid"), int):
            continue
        stopped = procs.stop(build["sid"], since=build.get("start"))
        if stopped:
            print(
                f"warning: stopped {stopped} process(es) of its build (session {build['sid']}) still running in {what}",
                file=sys.stderr,
                flush=True,
            )


@contextlib.contextmanager
def hold(lock_path: Path, what: str, advice: str) -> Iterator[Lock]:
    """Hold the lock file `lock_path` (its folder is created) while the block runs.

    `what` names the guarded thing in messages ("build folder build/x"); `advice` says what to do
    when another session holds it. Raises ReleaseError naming the holder's PID and command. A
    folder created here for the lock is removed again when nothing else was written into it.
    """
    lock_path = Path(lock_path)
    created = not lock_path.parent.exists()
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if not _try_lock(fd):
            holder = read_holder(lock_path.with_name(lock_path.name + ".json")) or {}
            raise ReleaseError(
                f"{what} is in use by another session: PID {holder.get('pid', '?')} "
                f"({holder.get('command', 'command unknown')}, since {holder.get('since', '?')}). {advice}"
            )
        lock = Lock(lock_path, fd)
        _take_over(lock, what)
        lock.write()
        if lock_path.name == LOCK_NAME:
            _HELD[lock_path.parent.resolve()] = lock
        try:
            yield lock
        finally:
            _HELD.pop(lock_path.parent.resolve(), None)
            with contextlib.suppress(OSError):
                lock.info_path.unlink()
    finally:
        os.close(fd)  # releases the OS lock
        if created and sorted(os.listdir(lock_path.parent)) == [lock_path.name]:
            # a folder made only for the lock (the session stopped before writing into it) is not left behind
            with contextlib.suppress(OSError):
                lock_path.unlink()
                lock_path.parent.rmdir()


def reap_stale(build_root: Path) -> int:
    """Stop the compiles that killed sessions left running in any build folder of `build_root`;
    returns how many build folders had a stale lock.

    A build folder's lock whose holder file is still there but whose OS lock is free was held by a
    session that ended without releasing it (SIGKILL, a lost machine): its recorded build sessions
    are stopped (release.procs) and the holder file removed, as :func:`hold` would on taking the
    lock. Run at the start of every build session (release.compile.prepare), so that a compile
    orphaned in one build folder is stopped by the next build under the same root, whatever folder
    that build uses, not only by the next build in that folder. A lock held by a live session is
    left alone.
    """
    found = 0
    for lock_path in sorted(Path(build_root).glob(f"*/{LOCK_NAME}")):
        info_path = lock_path.with_name(lock_path.name + ".json")
        if not info_path.is_file():  # released: nothing can still run there
            continue
        try:
            fd = os.open(lock_path, os.O_RDWR)
        except OSError:
            continue
        try:
            if not _try_lock(fd):  # a live session holds it
                continue
            _take_over(Lock(lock_path, fd), f"build folder {lock_path.parent}")
            with contextlib.suppress(OSError):
                info_path.unlink()
            found += 1
        finally:
            os.close(fd)
    return found


def held(folder: Path) -> Lock | None:
    """The lock this process holds on build folder `folder` (its build commands are recorded in it), or None."""
    return _HELD.get(Path(folder).resolve())


def hold_build_folder(folder: Path) -> contextlib.AbstractContextManager[Lock]:
    """:func:`hold` for a build folder: ``<folder>/.flash_attn-session.lock``."""
    folder = Path(folder)
    return hold(
        folder / LOCK_NAME,
        f"build folder {folder}",
        "Wait for that build to end (or stop it), or pass another --build-root.",
    )


def hold_output(final: Path) -> contextlib.AbstractContextManager[Lock]:
    """:func:`hold` for an output that is written once (a release folder, an archive): the lock file
    ``.<name>.lock`` sits beside it, since the output itself does not exist yet."""
    final = Path(final)
    return hold(
        final.with_name(f".{final.name}.lock"),
        f"output {final}",
        "Wait for that session to end (or stop it), or pass another --out.",
    )
