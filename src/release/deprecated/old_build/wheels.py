"""Deprecated alias of :mod:`release.sessions.wheels` (its old path release.build.wheels), kept for one release.

Importing it warns and gives the module at the new path; ``python -m release.build.wheels`` warns and runs it.
"""

import sys

from release import _moved
from release.sessions import wheels

_moved.warn_moved("release.build.wheels", "release.sessions.wheels")
if __name__ == "__main__":
    sys.exit(wheels.main())
sys.modules[__name__] = wheels  # the old name is the same module object: attributes, patches, all
