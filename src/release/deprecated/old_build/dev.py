"""Deprecated alias of :mod:`release.sessions.dev` (its old path release.build.dev), kept for one release.

Importing it warns and gives the module at the new path; ``python -m release.build.dev`` warns and runs it.
"""

import sys

from release import _moved
from release.sessions import dev

_moved.warn_moved("release.build.dev", "release.sessions.dev")
if __name__ == "__main__":
    sys.exit(dev.main())
sys.modules[__name__] = dev  # the old name is the same module object: attributes, patches, all
