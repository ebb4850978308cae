"""What happens to a built wheel on its way out.

Its local version label and re-tag (:mod:`~release.ship.tagging`), checksums, smoke test in a
fresh venv, the manylinux gate, upstream's test suite against it, the release workflow's gates,
and the release folder with its package indexes (:mod:`~release.ship.publish`,
:mod:`~release.ship.index`).
"""
