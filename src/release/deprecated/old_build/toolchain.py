"""Deprecated alias of :mod:`release.compile.toolchain` (its old path release.build.toolchain), kept for one release.

Importing it warns and gives the module at the new path; ``python -m release.build.toolchain`` warns and runs it.
"""

import sys

from release import _moved
from release.compile import toolchain

_moved.warn_moved("release.build.toolchain", "release.compile.toolchain")
if __name__ == "__main__":
    sys.exit(toolchain.main())
sys.modules[__name__] = toolchain  # the old name is the same module object: attributes, patches, all
