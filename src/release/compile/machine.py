"""How fast and how busy this machine is now: the predictions' view of it (release.compile.estimate).

- :func:`calibrate`: a short CPU benchmark (zlib level 6 over a fixed 4 MB word text, about 0.2
  CPU-seconds on the reference machine) gives this machine's per-core speed relative to the
  machine where it was measured (:data:`REFERENCE_CPU_SECONDS`), and, sampled over the same
  second, how many cores other processes keep busy (``/proc/stat`` on Linux; elsewhere the share
  of a core the benchmark got). CPU time, not wall time, measures the speed, so the figure holds
  on a busy machine; the busy cores are what a build started now shares the machine with.
- :func:`running`: the registry of builds running on this machine (``<cache dir>/running/``, one
  small JSON file per build command: host, pid, start and end times), so that
  :func:`others_overlapping` can tell whether a build ran alone; only such builds update the
  speed record (estimate.record).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from release import checksums

# CPU-seconds of :func:`benchmark_seconds` on the 2-core machine of release_plan.checks in
# build-manifest.json (the machine whose speed factor is release_plan.runner.speed_factor, 1.6),
# minimum of 7 runs, measured with 4 other helpers' builds running beside it (CPU time is the
# benchmark's own, so that load changes it little). Source: this module's benchmark, 2026-12-07.
REFERENCE_CPU_SECONDS = 0.19
KEEP_FINISHED_SECONDS = 2 * 86400  # a finished build's registry entry is kept this long (overlap checks)
_WORDS = (
    b"const auto template typename int float half kBlockM kHeadDim static_assert using namespace cute "
    b"flash Kernel_traits if else return for while struct"
).split()


def _text(words: int = 600_000) -> bytes:
    """A fixed word text (a linear congruential sequence of C++-like words): the benchmark's input."""
    x, out = 12345, []
    for _ in range(words):
        x = (1103515245 * x + 12345) & 0x7FFFFFFF
        out.append(_WORDS[(x >> 16) % len(_WORDS)])
    return b" ".join(out)


def benchmark_seconds(repeats: int = 3, clock=time.process_time) -> float:
    """CPU-seconds of one zlib level-6 compression of :func:`_text`: the fastest of `repeats` runs."""
    data = _text()
    best = float("inf")
    for _ in range(repeats):
        t = clock()
        zlib.compress(data, 6)
        best = min(best, clock() - t)
    return best


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat, or None where there is none."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        values = [int(v) for v in fields[:8]]
    except (OSError, ValueError, IndexError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values) - idle, sum(values)


@dataclass(frozen=True)
class Calibration:
    """cpu_seconds: the benchmark here (CPU time); speed_ratio: cpu_seconds / REFERENCE_CPU_SECONDS
    (> 1: slower per core than the reference machine); other_busy_cores: cores kept busy by other
    processes while it ran (0 to the core count)."""

    cpu_seconds: float
    speed_ratio: float
    other_busy_cores: float


def calibrate(cores: int | None = None) -> Calibration:
    """Run the benchmark and sample the other load over it (see the module docstring); about a second."""
    cores = cores or os.cpu_count() or 1
    before, wall0, cpu0 = _cpu_jiffies(), time.perf_counter(), time.process_time()
    cpu = benchmark_seconds()
    after, wall, own = _cpu_jiffies(), time.perf_counter() - wall0, time.process_time() - cpu0
    if before and after and after[1] > before[1]:
        busy_share = (after[0] - before[0]) / (after[1] - before[1])  # of all cores, ours included
        others = busy_share * cores - own / wall
    else:  # no /proc/stat: a benchmark that got less than a core shared it with that many others
        others = cores / max(own / wall, 1e-3) - 1.0 if own < 0.9 * wall else 0.0
    return Calibration(cpu, cpu / REFERENCE_CPU_SECONDS, min(max(others, 0.0), float(cores)))


def load_slowdown(other_busy_cores: float, jobs: int, cores: int) -> float:
    """How much slower each of `jobs` compiles runs beside `other_busy_cores` busy cores on `cores`:
    max(1, (others + jobs) / cores), the fair share of a core each runnable process gets."""
    return max(1.0, (other_busy_cores + jobs) / max(cores, 1))


# -- the builds running on this machine -----------------------------------------------------------


def registry_dir(cache: Path) -> Path:
    return Path(cache) / "running"


@contextlib.contextmanager
def running(cache: Path, what: str):
    """Register a build command in the registry of `cache` while it runs (its entry gets its end
    time afterwards and is kept KEEP_FINISHED_SECONDS). A cache folder that cannot be written
    leaves the build unregistered: the registry only decides whether speeds are recorded."""
    entry = {"host": platform.node(), "pid": os.getpid(), "what": what, "start": time.time(), "end": None}
    path = registry_dir(cache) / f"{platform.node()}-{os.getpid()}-{time.time_ns()}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        checksums.atomic_write_text(path, json.dumps(entry))
    except OSError:
        path = None
    try:
        yield
    finally:
        if path is not None:
            with contextlib.suppress(OSError):
                checksums.atomic_write_text(path, json.dumps({**entry, "end": time.time()}))
            _prune(path.parent)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists, not ours to signal (or cannot tell): count it
    return True


def _entries(cache: Path) -> list[tuple[Path, dict]]:
    out = []
    folder = registry_dir(cache)
    for path in folder.glob("*.json") if folder.is_dir() else []:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            float(entry["start"]), int(entry["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a damaged or half-written entry: not a build we can place in time
        out.append((path, entry))
    return out


def _end(path: Path, entry: dict) -> float:
    """An entry's end: recorded, else now while its process lives, else its file's time (it died)."""
    if entry.get("end") is not None:
        return float(entry["end"])
    if _alive(int(entry["pid"])):
        return time.time()
    try:
        return path.stat().st_mtime
    except OSError:
        return float(entry["start"])


def others_overlapping(cache: Path, start: float, end: float, pid: int | None = None) -> list[dict]:
    """Registered build commands of this host, of another process than `pid` (default: this one),
    that ran at some time between `start` and `end` (epoch seconds)."""
    pid = os.getpid() if pid is None else pid
    host = platform.node()
    return [
        e
        for p, e in _entries(cache)
        if e.get("host") == host and int(e["pid"]) != pid and float(e["start"]) < end and _end(p, e) > start
    ]


def _prune(folder: Path) -> None:
    """Drop entries of builds that ended more than KEEP_FINISHED_SECONDS ago."""
    cutoff = time.time() - KEEP_FINISHED_SECONDS
    for path, entry in _entries(folder.parent):
        if _end(path, entry) < cutoff:
            with contextlib.suppress(OSError):
                path.unlink()
