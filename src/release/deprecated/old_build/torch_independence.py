"""Deprecated alias of :mod:`release.archive.torch_independence`, kept for one release.

Its old path was release.build.torch_independence: importing it warns and gives the module at the new
path; ``python -m release.build.torch_independence`` warns and runs it.
"""

import sys

from release import _moved
from release.archive import torch_independence

_moved.warn_moved("release.build.torch_independence", "release.archive.torch_independence")
if __name__ == "__main__":
    sys.exit(torch_independence.main())
sys.modules[__name__] = torch_independence  # the old name is the same module object: attributes, patches, all
