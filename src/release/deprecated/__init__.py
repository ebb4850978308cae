"""Deprecated aliases at the old paths of moved modules, kept for one release (docs/design.md "Layers").

Each alias warns (release._moved) and gives, or with ``python -m`` runs, the module at its new path.
They live here, in one room above every layer, rather than in the packages they name: an alias
imports the module it stands for, so inside ``release.plan`` an alias of a ``release.workflow``
module would be an import pointing up, and a folder named ``build`` is one that ruff and the
structure tools skip. The old paths still resolve: ``release.build`` is a module whose ``__path__`` is
:mod:`old_build`'s folder, and ``release.plan`` and ``release.ship`` add :mod:`old_plan`'s and
:mod:`old_ship`'s folders to theirs (``release._moved.alias_folder``). Delete this package, release/build.py
and those two lines when the release that announced the moves is out.
"""
