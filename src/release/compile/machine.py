"""How fast and how busy this machine is now: the predictions' view of it (release.compile.estimate).

- :func:`calibrate`: a short compile benchmark (nvcc, the build's own compiler, over a small generated
  CUDA source for sm_80: :data:`BENCHMARK_SOURCE`; about two CPU-seconds) gives this machine's
  per-core compile speed relative to the reference host of ``unit_costs`` (:data:`REFERENCE_CPU_SECONDS`),
  and, sampled over the same seconds, how many cores other processes keep busy (``/proc/stat`` on
  Linux; elsewhere the share of a core the benchmark got). CPU time of nvcc and its children, not wall
  time, measures the speed, so the figure holds on a busy machine; the busy cores are what a build
  started now shares the machine with. nvcc itself, not a generic CPU benchmark: the zlib benchmark
  used before rated the H100 reference host 1.3x slower than it compiles, so its shard builds were
  predicted 29-37 % too long, and this project's 2-core
  machine 1.56x where it compiled at 1.30x (docs/release.md, "Predicted cost", cites the evidence).
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
import resource
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from release import checksums

# CPU-seconds of :func:`benchmark_seconds` on a machine of speed factor 1.0 (the reference host of
# unit_costs). Measured on this project's 2-core build machine, idle, 2026-12-07: the benchmark took
# 1.33 s at the start of a ci wheel build whose unit (fwd_hdim64_fp16, 3 SASS targets) then compiled at
# 1.126 x the reference host's unit cost: 1.33 / 1.126 (the measurement: docs/release.md, "Predicted cost").
REFERENCE_CPU_SECONDS = 1.18
KEEP_FINISHED_SECONDS = 2 * 86400  # a finished build's registry entry is kept this long (overlap checks)
BENCHMARK_ARCH = "80"  # every supported nvcc compiles sm_80 (the oldest SM of the arch groups)
# A template kernel instantiated 12 times: nvcc's front end (cudafe++, the host compiler), cicc and
# ptxas all take part, as in a kernel unit, in about two CPU-seconds.
BENCHMARK_SOURCE = (
    "#include <cuda_fp16.h>\n"
    "template <int N, typename T> __global__ void k(T* x, const T* y, float s) {\n"
    "  float a = float(x[threadIdx.x]), b = float(y[threadIdx.x]);\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < N; ++i) { a = fmaf(a, s, b); b = fmaf(b, a, s * i); if (a > b) a -= b; }\n"
    "  x[threadIdx.x] = T(a + b);\n"
    "}\n"
    + "".join(
        f"template __global__ void k<{n}, float>(float*, const float*, float);\n"
        f"template __global__ void k<{n}, __half>(__half*, const __half*, float);\n"
        for n in range(64, 112, 8)
    )
)


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def benchmark_seconds(nvcc: str, repeats: int = 2, run=subprocess.run, cpu=_children_cpu_seconds) -> float | None:
    """CPU-seconds (user + system, nvcc and its children) of compiling :data:`BENCHMARK_SOURCE` for
    sm_80 with `nvcc`: the fastest of `repeats` runs; None when nvcc fails or does not finish in 60 s."""
    best = None
    with tempfile.TemporaryDirectory(prefix="flash_attn-calibrate-") as tmp:
        src = Path(tmp) / "calibrate.cu"
        src.write_text(BENCHMARK_SOURCE, encoding="utf-8")
        cmd = [nvcc, "-c", "-O3", f"-gencode=arch=compute_{BENCHMARK_ARCH},code=sm_{BENCHMARK_ARCH}", str(src)]
        for _ in range(repeats):
            before = cpu()
            try:
                proc = run([*cmd, "-o", str(Path(tmp) / "calibrate.o")], capture_output=True, timeout=60)
            except (OSError, subprocess.SubprocessError):
                return None
            if proc.returncode != 0:
                return None
            spent = cpu() - before
            best = spent if best is None else min(best, spent)
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
    """cpu_seconds: the benchmark here (CPU time; None without a working nvcc); speed_ratio:
    cpu_seconds / REFERENCE_CPU_SECONDS, the speed factor (> 1: slower per core than the reference
    host; None without a benchmark); other_busy_cores: cores kept busy by other processes while it
    ran (0 to the core count)."""

    cpu_seconds: float | None
    speed_ratio: float | None
    other_busy_cores: float


def calibrate(nvcc: str | None, cores: int | None = None) -> Calibration:
    """Run the benchmark with `nvcc` (None: only the load is sampled, over half a second) and sample
    the other load over it (see the module docstring); about two seconds."""
    cores = cores or os.cpu_count() or 1
    before, wall0, cpu0 = _cpu_jiffies(), time.perf_counter(), _children_cpu_seconds()
    if nvcc:
        cpu = benchmark_seconds(nvcc)
    else:
        cpu = None
        time.sleep(0.5)
    after, wall, own = _cpu_jiffies(), time.perf_counter() - wall0, _children_cpu_seconds() - cpu0
    if before and after and after[1] > before[1]:
        busy_share = (after[0] - before[0]) / (after[1] - before[1])  # of all cores, ours included
        others = busy_share * cores - own / wall
    elif cpu is not None:  # no /proc/stat: a benchmark that got less than a core shared it with that many others
        others = cores / max(own / wall, 1e-3) - 1.0 if own < 0.9 * wall else 0.0
    else:
        others = 0.0
    ratio = cpu / REFERENCE_CPU_SECONDS if cpu else None
    return Calibration(cpu, ratio, min(max(others, 0.0), float(cores)))


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
    entry = {
        "host": platform.node(),
        "pid": os.getpid(),
        "pid_start": _process_start(os.getpid()),
        "what": what,
        "start": time.time(),
        "end": None,
    }
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


def _process_start(pid: int) -> int | None:
    """The start time of process `pid` in clock ticks after boot (/proc/<pid>/stat field 22), or None
    where there is no /proc: with the pid it names one process, so a reused pid is told apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[19])  # fields after "(comm)" start at field 3
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int, pid_start: int | None = None) -> bool:
    """Whether process `pid` runs; with `pid_start` (:func:`_process_start` at registration), a process
    that started at another time is another process that reuses the pid: not alive."""
    if pid_start is not None:
        now = _process_start(pid)
        if now is not None:
            return now == pid_start
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
    if _alive(int(entry["pid"]), entry.get("pid_start")):
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
