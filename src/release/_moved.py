"""The warning of a deprecated module path: a module that moved keeps an alias at its old path.

The aliases live where the module was (``release/build/``, ``release/ship/checksums.py``,
``release/plan/rehearsal.py``, ...) for one release after the move, so that
``python -m release.build.wheels`` and the like keep working; docs/design.md ("Layers") lists them
and says when they go.
"""

from __future__ import annotations

import sys
import warnings


def warn_moved(old: str, new: str) -> None:
    """Warn that module path `old` moved to `new`: a ``DeprecationWarning`` (for test runs and
    ``-W error``) and one ``warning:`` line on stderr (for people, who never see the former).

    Both are dotted module names, e.g. ``"release.build.wheels"``, ``"release.sessions.wheels"``.
    """
    message = f"{old} moved to {new}; the old path is an alias kept for one release, use {new}"
    warnings.warn(message, DeprecationWarning, stacklevel=3)
    print(f"warning: {message}", file=sys.stderr)
