"""The warning of a deprecated module path: a module that moved keeps an alias at its old path.

The aliases live in :mod:`release.deprecated` (``old_build/``, ``old_plan/``, ``old_ship/``) for one
release after the move; the old packages find them through :func:`alias_folder` on their
``__path__``, so that ``python -m release.build.wheels`` and the like keep working; docs/design.md
("Layers") lists them and says when they go.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path


def warn_moved(old: str, new: str) -> None:
    """Warn that module path `old` moved to `new`: a ``DeprecationWarning`` (for test runs and
    ``-W error``) and one ``warning:`` line on stderr (for people, who never see the former).

    Both are dotted module names, e.g. ``"release.build.wheels"``, ``"release.sessions.wheels"``.
    """
    message = f"{old} moved to {new}; the old path is an alias kept for one release, use {new}"
    warnings.warn(message, DeprecationWarning, stacklevel=3)
    print(f"warning: {message}", file=sys.stderr)


def alias_folder(old_package: str) -> str:
    """The folder of the aliases of ``release.<old_package>`` ("build", "plan", "ship"), for that
    package's ``__path__``: ``release.<old_package>.<module>`` then finds the alias file
    ``release/deprecated/old_<old_package>/<module>.py``."""
    return str(Path(__file__).resolve().parent / "deprecated" / f"old_{old_package}")
