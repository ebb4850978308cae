"""The alias of ``release.ship.checksums`` (moved to release.checksums); ``release.ship`` finds this
file through its ``__path__`` (see :mod:`release.deprecated`)."""
