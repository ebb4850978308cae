"""Deprecated aliases of the modules that were release.build before it became release.compile.

Kept for one release so that ``python -m release.build.<module>`` keeps working (each warns and runs
the module at its new path); docs/design.md ("Layers") says where each went. The package is named
``build`` only for the old paths: ruff's exclude is anchored to the repository root's ``./build``,
so these files are linted too.
"""
