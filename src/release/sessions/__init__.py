"""The entry points that combine the engines into one build: the ``wheel_*`` and ``dev`` sessions.

:mod:`~release.sessions.wheels` compiles (:mod:`release.compile`), links from kernels archives
(:mod:`release.archive`), tags, checksums and smoke-tests (:mod:`release.ship`) one wheel;
:mod:`~release.sessions.dev` makes the editable install that rebuilds on import. Layer: sessions
(docs/design.md "Layers"): may import every engine package; only :mod:`release.workflow` and the
deprecated :mod:`release.build` aliases import it.
"""
