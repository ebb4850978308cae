"""Deprecated: the old path of release.compile and release.sessions, kept for one release.

A module, not a folder (ruff and structure tools skip folders named ``build``): its ``__path__`` is the
folder of the alias files, so ``python -m release.build.wheels`` and ``import release.build.dev`` keep
working, each with a warning naming the new path (:mod:`release.deprecated`).
"""

from __future__ import annotations

from release import _moved

__path__ = [_moved.alias_folder("build")]
