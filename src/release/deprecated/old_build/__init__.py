"""The aliases of ``release.build.<module>``: the modules of release.build moved to release.compile
(and the entry points to release.sessions, torch_independence to release.archive); ``release.build``
(release/build.py) finds these files through its ``__path__`` (see :mod:`release.deprecated`)."""
