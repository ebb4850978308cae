"""Deprecated alias of :mod:`release.workflow.rehearsal` (its old path release.plan.rehearsal), kept for one release.

Importing it warns and gives the module at the new path; ``python -m release.plan.rehearsal`` warns and runs it.
"""

import sys

from release import _moved
from release.workflow import rehearsal

_moved.warn_moved("release.plan.rehearsal", "release.workflow.rehearsal")
if __name__ == "__main__":
    sys.exit(rehearsal.main())
sys.modules[__name__] = rehearsal  # the old name is the same module object: attributes, patches, all
