"""The one exception type of the release tooling."""

from __future__ import annotations


class ReleaseError(Exception):
    """Bad input or a failed step. The message says what was wrong and what to do next.

    The ``main`` functions print it (without a traceback) and exit with status 2.
    """
