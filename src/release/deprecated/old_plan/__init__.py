"""The aliases of ``release.plan.rehearsal`` and ``release.plan.fake_github`` (moved to
release.workflow); ``release.plan`` finds these files through its ``__path__`` (see :mod:`release.deprecated`)."""
