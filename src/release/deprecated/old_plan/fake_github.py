"""Deprecated alias of :mod:`release.workflow.fake_github` (old path: release.plan.fake_github), kept for one release.

Importing it warns and gives the module at the new path; ``python -m release.plan.fake_github`` warns and runs it.
"""

import sys

from release import _moved
from release.workflow import fake_github

_moved.warn_moved("release.plan.fake_github", "release.workflow.fake_github")
if __name__ == "__main__":
    sys.exit(fake_github.main())
sys.modules[__name__] = fake_github  # the old name is the same module object: attributes, patches, all
