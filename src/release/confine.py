"""One confinement rule for every path read from an artifact (stdlib only).

A path read from an artifact (a kernels manifest's ``objects[].file``, a wheel's member names and
RECORD, a SHA256SUMS line, a report, an index input) is untrusted: joined to an output or input
folder unchecked, ``objects/../../victim.txt`` or ``/etc/hostname`` reaches a file outside it.
Every reader passes such a path through :func:`member` (the name alone) or :func:`join` (the name
joined to its folder, links checked) before it opens or writes anything.

The rule is the one tarfile's ``data`` extraction filter applies to archive members (Python 3.12,
backported to 3.11.4; PEP 706), stated for names that are not tar members: a relative path in
"/"-separated form, already normalised (no empty, ``.`` or ``..`` component), no absolute path,
no drive (``C:``) or UNC (``//server``) prefix, no backslash (a separator on Windows), no colon
(NTFS streams, drive-relative paths), no NUL or control character; and, once joined, no symlink on
the way and nothing that resolves outside the folder. A hard link is not refused: reading through
it reads a file, and the tools never write into an input (they copy into a new folder).
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from release.errors import ReleaseError


def _why(name: object) -> str | None:
    """The reason `name` breaks the rule, or None when it is a confined relative path."""
    if not isinstance(name, str):
        return f"is a JSON {type(name).__name__}, not a path"
    if not name:
        return "is empty"
    if any(ord(c) < 0x20 or c == "\x7f" for c in name):
        return "holds a control character"
    if "\\" in name:
        return "holds a backslash (a Windows separator)"
    if ":" in name:
        return "holds a colon (a drive or stream name)"
    if name.startswith("/"):
        return "is absolute"
    parts = name.split("/")
    if ".." in parts:
        return "climbs out with '..'"
    if "" in parts or "." in parts or posixpath.normpath(name) != name:
        return "is not normalised (an empty or '.' component)"
    return None


def member(name: object, artifact: object, what: str = "entry") -> str:
    """`name` when it is a confined relative path (module docstring), else ReleaseError.

    `artifact` names where it was read (a file or folder), `what` the kind of entry ("object",
    "line 3"); the message names both, and the offending entry, on one line.
    """
    why = _why(name)
    if why is not None:
        raise ReleaseError(
            f"{artifact}: {what} {name!r} {why}, so it could name a file outside its folder; the artifact is damaged "
            "or forged: copy it again from its source or build it again"
        )
    return name


def join(root: Path, name: object, artifact: object, what: str = "entry") -> Path:
    """``root / name`` after :func:`member`, with no symlink among the components below `root` and a
    resolved path inside the resolved `root`; ReleaseError naming `artifact` and the entry otherwise.

    The path need not exist (a missing file is the caller's error to report).
    """
    rel = member(name, artifact, what)
    root = Path(root)
    path = root
    for part in rel.split("/"):
        path = path / part
        if path.is_symlink():
            raise ReleaseError(
                f"{artifact}: {what} {name!r} passes through the symbolic link {path}, which could lead outside "
                f"{root}; copy the artifact again without links"
            )
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise ReleaseError(f"{artifact}: {what} {name!r} resolves to {real}, outside {real_root}")
    return path
