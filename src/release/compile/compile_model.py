"""The compile model of the release plan: a runner's parallel nvcc jobs, a build's predicted wall time,
each release job's predicted minutes, and the shard count that keeps every shard job within the limit.

The numbers and their sources are ``release_plan`` in build-manifest.json; the model itself is
described in release.plan.plan's docstring, which reports it for the whole release. release.plan.matrix
asks :func:`shard_count` for its shard and gather job lists, release.compile.estimate predicts local
builds with :func:`compile_schedule`. It imports neither: both sit above it. Stdlib only.
"""

from __future__ import annotations

import heapq
import math
import os
from dataclasses import dataclass

from kernels import kernel_set as kernel_sets
from release import manifest
from release.errors import ReleaseError

_MANIFEST = manifest.load()
_PLAN = _MANIFEST["release_plan"]
NVCC_MEMORY_GIB = float(_MANIFEST["build"]["nvcc_memory_gib"])
LIMIT_MINUTES = float(_PLAN["job_limit_minutes"])
MARGIN_PERCENT = float(_PLAN["margin_percent"])  # no job predicted within this much of the limit
TARGET_MINUTES = LIMIT_MINUTES * (1 - MARGIN_PERCENT / 100)  # what every predicted job must stay under
SETUP_MINUTES = _PLAN["setup_minutes"]
# Seconds on the reference host (speed factor 1.0), like unit_costs: each binding source (the stable
# ABI compiles ops_stable.cpp in place of ops.cpp and takes its figure) and the dispatch per SASS target.
BINDING_SOURCES_SECONDS = {k: float(v) for k, v in _PLAN["binding_sources_seconds"].items()}
DISPATCH_SECONDS = float(_PLAN["dispatch_seconds"])
GATHER_OS = "ubuntu-24.04"  # setup_minutes.gather is given for Linux; other OSes take it too


class PlanError(ReleaseError, ValueError):
    """A plan that cannot meet the job limit, or a bad runner size; the message says what to change."""


@dataclass(frozen=True)
class Runner:
    """A build machine: cores, memory (GiB) and per-core compile speed relative to the reference host
    (``speed_factor`` > 1: slower; seconds on it = reference seconds x this)."""

    cores: int
    memory_gib: float
    speed_factor: float

    @property
    def jobs(self) -> int:
        """Parallel nvcc jobs: min(cores, floor(memory / build.nvcc_memory_gib)), at least 1."""
        return max(1, min(self.cores, math.floor(self.memory_gib / NVCC_MEMORY_GIB + 1e-9)))


def default_runner(cores: int | None = None, memory_gib: float | None = None) -> Runner:
    """The manifest's hosted runner (release_plan.runner), with cores / memory overridden if given.

    PlanError (exit 2) for fewer than 1 core or a memory that is not a finite number > 0 GiB
    (``nan`` and ``inf`` parse as floats but size no runner).
    """
    r = _PLAN["runner"]
    runner = Runner(
        int(r["cores"] if cores is None else cores),
        float(r["memory_gib"] if memory_gib is None else memory_gib),
        float(r["speed_factor"]),
    )
    if runner.cores < 1 or not math.isfinite(runner.memory_gib) or runner.memory_gib <= 0:
        raise PlanError(
            f"a runner needs at least 1 core and a finite memory > 0 GiB (got {runner.cores} cores, "
            f"{runner.memory_gib} GiB)"
        )
    return runner


def sass_targets(group: str) -> int:
    """SASS targets of a released arch group (legacy: sm_80, sm_89, sm_90 -> 3)."""
    return len(manifest.arch_groups(_MANIFEST)[group]["sms"])


def gencode_targets(group: str) -> int:
    """gencode targets nvcc compiles per unit: the SASS targets plus the one PTX target."""
    return sass_targets(group) + 1


def unit_cpu_seconds(unit, sass: int, runner: Runner) -> float:
    """CPU-seconds of one unit (a kernel_set.Unit) for `sass` SASS targets (+ PTX) on `runner`."""
    return unit.seconds * sass * runner.speed_factor


def finish_times(durations: list[float], slots: int) -> list[float]:
    """Finish time of each of `durations` started in order, each on the first free of `slots` (Ninja's -j)."""
    # More slots than durations finish the same; capped, so --runner-cores 2**40 needs no 2**40 slots.
    free = [0.0] * max(1, min(slots, len(durations)))
    out = []
    for d in durations:
        out.append(free[0] + d)
        heapq.heapreplace(free, out[-1])
    return out


def _list_schedule(durations: list[float], slots: int) -> float:
    """Makespan of `durations` started in order, each on the first free of `slots` (Ninja's -j)."""
    return max(finish_times(durations, slots), default=0.0)


def compile_wall_seconds(
    unit_cpu: list[float], other_cpu: list[float], runner: Runner, gencodes: int, heaviest_first: bool = True
) -> float:
    """Predicted wall seconds of one build: units (CPU-seconds) then other edges, on `runner`.

    nvcc --threads = min(gencodes, jobs // units) as CMake sets it; the result is the larger of the
    list schedule (heaviest unit first, as the build orders them; else in the order given) and
    total CPU / the cores the jobs can keep busy.
    """
    return compile_schedule(unit_cpu, other_cpu, runner, gencodes, heaviest_first)[0]


def compile_schedule(
    unit_cpu: list[float], other_cpu: list[float], runner: Runner, gencodes: int, heaviest_first: bool = True
) -> tuple[float, list[float], list[float], int]:
    """(wall seconds, finish second of each unit, of each other edge, nvcc --threads) of
    :func:`compile_wall_seconds`'s model.

    Finish times are in the order of `unit_cpu` / `other_cpu`, seconds from the build's start; when the
    core bound (total CPU / usable cores) exceeds the list schedule, they are stretched by that ratio
    so the last one ends at the predicted wall time. The live ETA (release.compile.progress) compares them
    with the times the units really finish.
    """
    jobs = runner.jobs
    threads = max(1, min(gencodes, jobs // len(unit_cpu))) if unit_cpu else 1
    order = sorted(range(len(unit_cpu)), key=lambda i: -unit_cpu[i]) if heaviest_first else range(len(unit_cpu))
    order = list(order)
    durations = [unit_cpu[i] / threads for i in order] + list(other_cpu)
    if not durations:
        return 0.0, [], [], threads
    width = min(runner.cores, jobs * threads)
    finish = finish_times(durations, jobs)
    schedule = max(finish)
    wall = max(schedule, (sum(unit_cpu) + sum(other_cpu)) / width)
    finish = [t * wall / schedule for t in finish] if schedule else finish
    units = [0.0] * len(unit_cpu)
    for k, i in enumerate(order):
        units[i] = finish[k]
    return wall, units, finish[len(order) :], threads


def units_of(kernel_set: str) -> list:
    """The units (kernel_set.Unit) of a kernel set; PlanError for an unknown one."""
    try:
        return kernel_sets.resolve(kernel_set)[1]
    except kernel_sets.KernelSetError as e:
        raise PlanError(str(e)) from None


def dispatch_cpu_seconds(sass: int, runner: Runner) -> float:
    """CPU-seconds of the dispatch source for `sass` SASS targets (+ PTX) on `runner`."""
    return DISPATCH_SECONDS * sass * runner.speed_factor


def binding_cpu_seconds(runner: Runner) -> list[float]:
    """CPU-seconds of each binding edge (its sources, then the link) on `runner`: Ninja runs them in
    parallel, so they are separate edges of the schedule, not one."""
    return [s * runner.speed_factor for s in BINDING_SOURCES_SECONDS.values()]


def shard_job_minutes(os_name: str, group: str, units, runner: Runner) -> float:
    """Predicted minutes of one shard job: setup + its units and the dispatch for the group's archs."""
    sass = sass_targets(group)
    wall = compile_wall_seconds(
        [unit_cpu_seconds(u, sass, runner) for u in units],
        [dispatch_cpu_seconds(sass, runner)],
        runner,
        gencode_targets(group),
    )
    return SETUP_MINUTES["shard"][os_name] + wall / 60


def link_job_minutes(os_name: str, runner: Runner) -> float:
    """Predicted minutes of one link-and-package job: setup (torch, smoke, auditwheel) + the binding."""
    return SETUP_MINUTES["link"][os_name] + compile_wall_seconds([], binding_cpu_seconds(runner), runner, 1) / 60


def gather_job_minutes() -> float:
    """Predicted minutes of a gather job (artifact download, the check, the upload: an estimate)."""
    return float(SETUP_MINUTES["gather"][GATHER_OS])


def full_build_job_minutes(os_name: str, group: str, units, runner: Runner) -> float:
    """The old design's job: one runner compiles every unit, the dispatch and the binding, then packages."""
    sass = sass_targets(group)
    wall = compile_wall_seconds(
        [unit_cpu_seconds(u, sass, runner) for u in units],
        [dispatch_cpu_seconds(sass, runner), *binding_cpu_seconds(runner)],
        runner,
        gencode_targets(group),
    )
    return SETUP_MINUTES["link"][os_name] + wall / 60


def shard_count(os_name: str, group: str, kernel_set: str | None = None, runner: Runner | None = None) -> int:
    """The smallest N for which every shard job (kernel_set.split_shards) is predicted <= TARGET_MINUTES
    (the job limit less ``release_plan.margin_percent``). `kernel_set` defaults to the release's
    (``release_matrix.kernel_set`` of the manifest, as in release.plan.matrix).

    Raises PlanError when even one unit per shard exceeds it (a unit alone is too slow for the runner).
    """
    runner = runner or default_runner()
    units = units_of(kernel_set or _MANIFEST["release_matrix"]["kernel_set"])
    for n in range(1, len(units) + 1):
        if (
            max(shard_job_minutes(os_name, group, s, runner) for s in kernel_sets.split_shards(units, n))
            <= TARGET_MINUTES
        ):
            return n
    worst = max(units, key=lambda u: u.seconds)
    raise PlanError(
        f"{worst.name} alone is predicted at {shard_job_minutes(os_name, group, [worst], runner):.0f} minutes on "
        f"{os_name} ({runner.cores} cores, {runner.memory_gib:g} GiB), over {TARGET_MINUTES:g} minutes (the "
        f"{LIMIT_MINUTES:g}-minute release_plan.job_limit_minutes less its {MARGIN_PERCENT:g} % margin): plan for a "
        "larger runner (--runner-cores, --runner-memory-gib)"
    )


def total_memory_bytes() -> int:
    """Physical memory of this machine in bytes (GlobalMemoryStatusEx on Windows, sysconf elsewhere)."""
    if os.name == "nt":
        import ctypes

        class _Status(ctypes.Structure):
            _fields_ = [("length", ctypes.c_ulong), ("load", ctypes.c_ulong)] + [
                (n, ctypes.c_ulonglong) for n in ("total", "avail", "tpage", "apage", "tvirt", "avirt", "ext")
            ]

        status = _Status()
        status.length = ctypes.sizeof(_Status)
        ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status))
        total = status.total
    else:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(total)
