"""The exception types of the release tooling and the one ``main`` wrapper of its modules."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

EXIT_BAD_INPUT = 2  # a ReleaseError: bad input or a failed step
EXIT_CHECK_FAILED = 1  # a CheckFailed: the input was fine, a check of it failed (smoke test)
EXIT_INTERRUPTED = 130  # Ctrl-C, the shell's 128 + SIGINT


class ReleaseError(Exception):
    """Bad input or a failed step. The message says what was wrong and what to do next.

    :func:`run_main` prints it (without a traceback) and exits with status 2.
    """

    exit_code = EXIT_BAD_INPUT


class CheckFailed(ReleaseError):
    """A check of a well-formed artifact failed (e.g. the smoke test); exit status 1."""

    exit_code = EXIT_CHECK_FAILED


def run_main(body: Callable[[], int | None], prog: str = "release", annotate: bool = False) -> int:
    """Run a module's main body and map its end to an exit status.

    ReleaseError -> "error: <message>" on stderr and its exit_code (2, or 1 for CheckFailed); with
    ``annotate`` (the release gates) and in a GitHub Actions job (``GITHUB_ACTIONS=true``) also an
    ``::error title=<prog>::`` annotation with the message's first line on stdout, so the run's
    summary names the failed gate (opt-in: the tests run the other modules' error paths in CI);
    KeyboardInterrupt -> one line "<prog>: interrupted ..." and 130. The steps write their outputs
    under a temporary name and rename them when complete, so an interrupt leaves no partial
    artifact behind. Anything else is a bug and keeps its traceback.
    """
    try:
        return body() or 0
    except ReleaseError as e:
        if annotate and os.environ.get("GITHUB_ACTIONS") == "true":
            print(f"::error title={prog}::{(str(e).splitlines() or [type(e).__name__])[0]}", flush=True)
        print(f"error: {e}", file=sys.stderr, flush=True)
        return e.exit_code
    except KeyboardInterrupt:
        # Build folders keep their compiled objects (the build says so); outputs are renamed into place whole.
        print(f"{prog}: interrupted; no partial artifact was written", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
