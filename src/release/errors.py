"""The exception types of the release tooling and the one ``main`` wrapper of its modules."""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable

EXIT_BAD_INPUT = 2  # a ReleaseError: bad input or a failed step
EXIT_CHECK_FAILED = 1  # a CheckFailed: the input was fine, a check of it failed (smoke test)
EXIT_INTERRUPTED = 130  # Ctrl-C, the shell's 128 + SIGINT
EXIT_TERMINATED = 143  # SIGTERM, the shell's 128 + SIGTERM
EXIT_INTERNAL = 3  # an unexpected exception: a bug of this tool (the traceback with -v)


class ReleaseError(Exception):
    """Bad input or a failed step. The message says what was wrong and what to do next.

    :func:`run_main` prints it (without a traceback) and exits with status 2.
    """

    exit_code = EXIT_BAD_INPUT


class CheckFailed(ReleaseError):
    """A check of a well-formed artifact failed (e.g. the smoke test); exit status 1."""

    exit_code = EXIT_CHECK_FAILED


class Terminated(BaseException):
    """SIGTERM arrived (a cancelled CI job, ``kill``): unwinds like Ctrl-C, so running compiles are
    stopped and temporary outputs removed by the ``finally`` blocks on the way out."""


def _raise_terminated(signum, frame):
    raise Terminated()


def wants_traceback(argv: list[str] | None) -> bool:
    """True when the command line asks for tracebacks (``-v`` / ``--verbose``)."""
    return any(a in ("-v", "--verbose") for a in (sys.argv[1:] if argv is None else argv))


def run_main(
    body: Callable[[], int | None], prog: str = "release", annotate: bool = False, argv: list[str] | None = None
) -> int:
    """Run a module's main body and map its end to an exit status; every failure ends in one
    ``error:`` line on stderr saying what to do next.

    ReleaseError -> "error: <message>" and its exit_code (2, or 1 for CheckFailed); with
    ``annotate`` (the release gates) and in a GitHub Actions job (``GITHUB_ACTIONS=true``) also an
    ``::error title=<prog>::`` annotation with the message's first line on stdout, so the run's
    summary names the failed gate (opt-in: the tests run the other modules' error paths in CI);
    OSError not turned into a ReleaseError by the step (a path that cannot be written) -> its
    reason and path, 2; KeyboardInterrupt -> one line "<prog>: interrupted ..." and 130; SIGTERM
    (handled while the body runs, in the main thread) -> "<prog>: terminated ..." and 143. The
    steps write their outputs under a temporary name and rename them when complete, and stop their
    compiles on the way out (release.procs), so an interrupt leaves no partial artifact and no
    compiler behind. Anything else is a bug: "error: internal error ..." and 3, with the traceback
    only when ``argv`` (default sys.argv) has ``-v``/``--verbose``.
    """
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main_thread else None
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
    except Terminated:
        print(f"{prog}: terminated (SIGTERM); compiles stopped, no partial output kept", file=sys.stderr, flush=True)
        return EXIT_TERMINATED
    except OSError as e:
        where = " and ".join(f"'{f}'" for f in (e.filename, e.filename2) if f is not None)
        print(
            f"error: {e.strerror or e} ({where or type(e).__name__}); check that the path exists, is a folder where "
            "one is expected and is writable, then run again",
            file=sys.stderr,
            flush=True,
        )
        if wants_traceback(argv):
            traceback.print_exc()
        return EXIT_BAD_INPUT
    except Exception as e:
        if wants_traceback(argv):
            traceback.print_exc()
        print(
            f"error: internal error in {prog}: {type(e).__name__}: {e}. This is a bug: run again with -v for the "
            "traceback and report it",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_INTERNAL
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
