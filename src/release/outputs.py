"""Writing outputs so that no input is ever overwritten and nothing half-written is left.

Every output is written under a new temporary name beside its target (:func:`temp_dir`,
:func:`temp_file`) and renamed into place when complete (:func:`replace_dir`, ``os.replace`` for
files). An existing path is replaced only when it is this tool's own earlier output of the same
kind (the caller's ``is_ours`` check), and the message says so; anything else there is refused.
Temporary folders and files get the permissions the user's umask gives a new file (``mkdtemp``
and ``mkstemp`` create them 0700 / 0600, which an upload step or another user could not read).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from release.errors import ReleaseError


def umask() -> int:
    """The process's umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temp_dir(parent: Path, prefix: str) -> Path:
    """A new empty folder in `parent` (created) with the umask's permissions."""
    Path(parent).mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(path, 0o777 & ~umask())
    return path


def temp_file(target: Path) -> Path:
    """A new empty file beside `target` (``.<name>.<random>.partial``) with the umask's permissions."""
    target = Path(target)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    os.close(fd)
    os.chmod(name, 0o666 & ~umask())
    return Path(name)


def inside(path: Path, folder: Path) -> bool:
    """True when `path` is `folder` or lies inside it (both resolved)."""
    path, folder = Path(path).resolve(), Path(folder).resolve()
    return path == folder or folder in path.parents


def replace_dir(tmp: Path, final: Path, kind: str, is_ours: Callable[[Path], bool]) -> bool:
    """Rename the finished folder `tmp` to `final`; returns True when an earlier output was replaced.

    An existing `final` is replaced only when ``is_ours(final)`` says it is this tool's earlier
    output of the same `kind` (moved aside first, removed after the rename). Raises ReleaseError,
    leaving `final` as it was, when it is anything else.
    """
    final = Path(final)
    if not final.exists() and not final.is_symlink():
        os.replace(tmp, final)
        return False
    if final.is_symlink() or not final.is_dir() or not is_ours(final):
        raise ReleaseError(
            f"{final} already exists and is not an earlier {kind} of this tool, so it was left as it was; move it "
            "away or pass another --out"
        )
    old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old-", dir=final.parent))
    os.replace(final, old / final.name)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return True
