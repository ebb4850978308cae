"""Deprecated alias of :mod:`release.checksums` (its old path release.ship.checksums), kept for one release.

Importing it warns and gives the module at the new path; ``python -m release.ship.checksums`` warns and runs it.
"""

import sys

from release import _moved, checksums

_moved.warn_moved("release.ship.checksums", "release.checksums")
if __name__ == "__main__":
    sys.exit(checksums.main())
sys.modules[__name__] = checksums  # the old name is the same module object: attributes, patches, all
