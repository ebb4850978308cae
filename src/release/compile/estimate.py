"""What one build will cost on this machine, said before it starts, and the measured speed it records.

Every build (``nox -s wheel_*``, ``archive_*``, ``dev``) prints, before anything compiles, the
predicted wall time and peak memory of its compile steps (:func:`predict`, :func:`render`). The
model is the release plan's (``release.compile.compile_model.compile_schedule``: each unit's manifest cost
``unit_costs`` x SASS targets x speed factor, nvcc jobs and ``--threads`` as CMake sizes them, a
list schedule heaviest unit first); this module only fills in this machine: its cores, its
available memory (``/proc/meminfo`` MemAvailable, as CMake's AVAILABLE_PHYSICAL_MEMORY; elsewhere
the total), ``--jobs`` if given, and its speed factor.

The speed factor (seconds of a compile here / on the manifest's reference host) is the median of
the last measured builds of this machine that ran alone, recorded in ``<cache dir>/build_speed.json``
(:func:`record`, written after a kernels build that compiled all of its predicted units without
compile-cache hits, beside no other registered build (release.compile.machine.running) and with less
than :data:`ALONE_BUSY_CORES` cores busy with other work at its start; cache dir:
``$FLASH_ATTN_CACHE_DIR``, else the per-user cache the sdist download uses). Without a record it
comes from this machine: a two-second nvcc benchmark against the reference host (:func:`calibration`,
release.compile.machine.calibrate; without a working nvcc, the release plan's runner factor). Either
way the prediction then multiplies it by the load of the moment: with other processes keeping cores
busy, each compile gets its fair share of a core (machine.load_slowdown). Binding and dispatch
seconds of the manifest are reference-host seconds like the units' and scale with the same factor;
the binding sources are separate edges that Ninja runs in parallel.

A rebuild predicts only what it will compile (:func:`pending`: Ninja's dry run in the build folder,
when the folder was configured with the same options), so a build with nothing to do predicts 0:00.

Above :data:`LONG_SECONDS` (30 minutes) the message offers cheaper commands
(:func:`cheaper_commands`): the ``ci`` kernel set, the SMs of the GPUs here, shards.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernels import kernel_set as kernel_sets
from release import checksums, manifest
from release.compile import compile_model, machine, options, progress, toolchain
from release.errors import ReleaseError

LONG_SECONDS = 30 * 60  # the threshold: a build predicted longer than this offers cheaper commands
SPEED_FILE = "build_speed.json"
KEEP_RECORDS = 5  # the speed factor is the median of this machine's last 5 measured builds
MIN_RECORD_SECONDS = 60.0  # shorter builds are dominated by configure noise: not recorded
# A build that started while other processes kept more cores than this busy did not run alone: its
# time says how busy the machine was, not how fast it is, so it is not recorded.
ALONE_BUSY_CORES = 0.5
VISIBLE_SMS_ENV = "FLASH_ATTN_VISIBLE_SMS"  # e.g. "89" or "80,90"; "none": no GPU (tests, CI, a GPU-less host)


def cache_dir(env=None) -> Path:
    """The per-user cache folder, the one the sdist download uses (the rule is
    :func:`release.compile.options.sdist_cache_dir`'s; the build hands CMake its result)."""
    return options.sdist_cache_dir(env)


def available_memory_gib() -> float:
    """Memory available for new processes in GiB: MemAvailable on Linux, else the machine's total."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        pass
    return compile_model.total_memory_bytes() / 2**30


def visible_sms(env=None) -> list[int] | None:
    """SM numbers of the CUDA devices visible here (``torch.cuda.get_device_capability``), sorted, no
    duplicates; [] with none; None when it cannot be told (no torch). ``$FLASH_ATTN_VISIBLE_SMS``
    (``"86,90"`` or ``"none"``) replaces the probe; ReleaseError (exit 2) for a value that is neither,
    such as ``abc``."""
    env = os.environ if env is None else env
    given = env.get(VISIBLE_SMS_ENV, "").strip()
    if given:
        if given.lower() == "none":
            return []
        entries = [x.strip() for x in given.replace(";", ",").split(",") if x.strip()]
        if not entries or not all(x.isascii() and x.isdigit() for x in entries):
            raise ReleaseError(
                f"{VISIBLE_SMS_ENV}={given!r} is not a list of SM numbers; set it to e.g. 89 or 80,90, to none "
                "for no GPU, or unset it to ask torch"
            )
        return sorted({int(x) for x in entries})
    try:
        import torch
    except ImportError:
        return None
    try:
        if not torch.cuda.is_available():
            return []
        return sorted({a * 10 + b for a, b in map(torch.cuda.get_device_capability, range(torch.cuda.device_count()))})
    except Exception:  # a driver problem is "no GPU we can build for" here, not a build failure
        return []


# -- the measured speed of this machine ----------------------------------------------------------


def _records(path: Path) -> list[dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [r for r in data.get("builds", []) if isinstance(r, dict)]
    except (OSError, ValueError, AttributeError):
        return []  # no record yet, or an unreadable one: the assumption applies


def _this_host(r: dict) -> bool:
    return r.get("host") == platform.node() and r.get("cores") == (os.cpu_count() or 1)


@functools.lru_cache(maxsize=1)
def _calibrated() -> machine.Calibration:
    return machine.calibrate(toolchain.probe_nvcc()[0])


def calibration() -> machine.Calibration:
    """This machine's speed and load now (machine.calibrate with the nvcc the build uses: about two
    seconds), measured once per process."""
    return _calibrated()


def speed_factor(env=None) -> tuple[float, str]:
    """(speed factor, where it comes from) for this machine, before the load of the moment; see the
    module docstring."""
    path = cache_dir(env) / SPEED_FILE
    # entries written before builds were checked for running alone (no "ran_alone") are ignored
    mine = [
        r
        for r in _records(path)
        if _this_host(r) and r.get("ran_alone") is True and isinstance(r.get("speed_factor"), (int, float))
    ]
    if mine:
        mine = mine[-KEEP_RECORDS:]
        f = statistics.median(r["speed_factor"] for r in mine)
        return f, f"measured: median of this machine's last {len(mine)} build(s) that ran alone, {path}"
    cal = calibration()
    if cal.speed_ratio is None:
        runner = compile_model.default_runner().speed_factor
        return runner, (
            f"assumed: no nvcc ran the calibration, so the hosted runner's factor of the release plan; no build "
            f"of this machine is recorded yet ({path})"
        )
    return cal.speed_ratio, (
        f"calibrated: nvcc compiled a small benchmark in {cal.cpu_seconds:.2f} CPU-s here, "
        f"{machine.REFERENCE_CPU_SECONDS} s on the reference host (release.compile.machine); no build of this "
        f"machine is recorded yet ({path})"
    )


def record(prediction: Prediction, actual_seconds: float, summary: dict, env=None) -> Path | None:
    """Add this build's measured speed factor to the record (see the module docstring); returns the
    file, or None when the build does not measure the speed (fewer units compiled than predicted,
    compile-cache hits, too short), did not run alone (other busy cores at its start, another
    registered build during it), or the cache folder is not writable (the record is optional).
    The factor recorded is the one before the load: the build's factor / its load slowdown."""
    cache = summary.get("compile_cache") or {}
    if (
        not prediction.units
        or summary.get("units_compiled") != len(prediction.units)
        or cache.get("hits")
        or actual_seconds < MIN_RECORD_SECONDS
        or prediction.wall_seconds <= 0
        or prediction.other_busy_cores > ALONE_BUSY_CORES
    ):
        return None
    now = time.time()
    if machine.others_overlapping(cache_dir(env), now - actual_seconds, now):
        return None
    path = cache_dir(env) / SPEED_FILE
    base = prediction.speed_factor / prediction.load_slowdown
    entry = {
        "host": platform.node(),
        "cores": os.cpu_count() or 1,
        "what": prediction.what,
        "units": len(prediction.units),
        "jobs": prediction.jobs,
        "predicted_seconds": round(prediction.wall_seconds, 1),
        "actual_seconds": round(actual_seconds, 1),
        # the model is linear in the factor, so this is the factor that would have predicted it exactly
        "speed_factor": round(base * actual_seconds / prediction.wall_seconds, 3),
        "ran_alone": True,  # the only entries speed_factor reads
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        builds = (_records(path) + [entry])[-50:]
        checksums.atomic_write_text(path, json.dumps({"format": 1, "builds": builds}, indent=1) + "\n")
    except OSError:
        return None
    return path


# -- what a rebuild will compile ------------------------------------------------------------------


@dataclass(frozen=True)
class Pending:
    """What a build in an existing build folder will run: the kernel units (names) and how many other edges."""

    units: frozenset[str]
    other_edges: int


def _cache_values(build_dir: Path) -> dict[str, str]:
    values = {}
    path = Path(build_dir) / "CMakeCache.txt"
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line and not line.startswith(("#", "//")) and "=" in line and ":" in line.split("=", 1)[0]:
            key, value = line.split("=", 1)
            values[key.split(":", 1)[0]] = value
    return values


def project_options(defines: dict[str, str], *drop: str) -> dict[str, str]:
    """The project's options (``FLASH_ATTN_*``) of a build's CMake defines, less `drop`: what
    :func:`pending` compares with a build folder's cache (launchers and the like may change by the
    build's own setup, e.g. a compile cache that could not start)."""
    return {k: v for k, v in defines.items() if k.startswith("FLASH_ATTN_") and k not in drop}


DRY_RUN_MANIFEST = ".flash_attn_dry_run.ninja"  # a copy of build.ninja in the build folder, for pending()


def _manifest_inputs(build_ninja: Path) -> list[str] | None:
    """The inputs of the edge that re-runs CMake (``build build.ninja ...: RERUN_CMAKE ...``), or None."""
    text = build_ninja.read_text(encoding="utf-8", errors="replace").replace("$\n", " ")
    for line in text.splitlines():
        if line.startswith("build build.ninja") and ": RERUN_CMAKE" in line:
            rest = line.split(": RERUN_CMAKE", 1)[1].replace("$$", "\0").replace("$ ", "\1").replace("$:", ":")
            return [t.replace("\1", " ").replace("\0", "$") for t in rest.split() if t not in ("|", "||")]
    return None


def _manifest_is_current(build_dir: Path, cmake_root: str = "") -> bool:
    """True when build.ninja is newer than every input of its regeneration (CMakeLists.txt, cmake/,
    the manifest, the glob check's stamp, which Ninja touches only when a globbed folder changed):
    the build will not re-run CMake first, or only for CMake's own modules. Those (under
    `cmake_root`, the cache's CMAKE_ROOT) are skipped: the nox sessions make their environment
    anew, which reinstalls the same pinned CMake with new file times, and that changes no compile
    step. A dry run cannot tell this itself: it pretends every edge ran, the glob check included,
    and so always reports the regeneration."""
    build_ninja = build_dir / "build.ninja"
    inputs = _manifest_inputs(build_ninja)
    if inputs is None:
        return True  # no regeneration edge: nothing re-runs CMake
    newest = build_ninja.stat().st_mtime_ns
    root = cmake_root.rstrip("/\\") + "/" if cmake_root else None
    for name in inputs:
        if root and name.replace("\\", "/").startswith(root.replace("\\", "/")):
            continue
        path = Path(name) if Path(name).is_absolute() else build_dir / name
        try:
            if path.stat().st_mtime_ns > newest:
                return False
        except OSError:
            return False  # a missing input: Ninja would re-run CMake
    return True


def pending(build_dir: Path, defines: dict[str, str], ninja: str | None = None) -> Pending | None:
    """What a build in `build_dir` with the CMake options `defines` (name -> value) will compile now:
    Ninja's dry run, its unit names (progress.unit_of) and other edges.

    The dry run reads a copy of build.ninja (:data:`DRY_RUN_MANIFEST`, removed afterwards), so that
    Ninja does not first "re-run CMake" (:func:`_manifest_is_current` checks that separately).
    None (predict everything) when the answer is not known: no configured build folder, a cached
    option that differs from `defines` (the configure will change the build), a build that re-runs
    CMake first for a change of the project's own files, a dry run that fails. `ninja`: the program
    to ask, default the cache's CMAKE_MAKE_PROGRAM (the one that wrote the folder's .ninja_log). CMake's glob check
    (cmake.verify_globs, every build) is not counted.
    """
    build_dir = Path(build_dir)
    if not (build_dir / "build.ninja").is_file() or not (build_dir / "CMakeCache.txt").is_file():
        return None
    try:
        cached = _cache_values(build_dir)
        if any(cached.get(name) != value for name, value in defines.items()):
            return None
        if not _manifest_is_current(build_dir, cached.get("CMAKE_ROOT", "")):
            return None
        copy = build_dir / DRY_RUN_MANIFEST
        copy.write_bytes((build_dir / "build.ninja").read_bytes())
    except OSError:
        return None
    ninja = ninja or cached.get("CMAKE_MAKE_PROGRAM") or "ninja"
    env = {**os.environ, "NINJA_STATUS": "[%f/%t] "}
    cmd = [ninja, "-C", str(build_dir), "-f", DRY_RUN_MANIFEST, "-n"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=env, timeout=300)
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        copy.unlink(missing_ok=True)
    if proc.returncode != 0:
        return None
    units, other = set(), 0
    for line in (proc.stdout + proc.stderr).splitlines():
        m = progress.NINJA_LINE_RE.match(line.strip())
        if not m:
            continue
        step = m.group(3)
        if "Re-running CMake" in step:
            return None
        if "verify_globs" in step or "globbed directories" in step:
            continue
        unit = progress.unit_of(step)
        if unit:
            units.add(unit[: -len("_align")] if unit.endswith("_align") else unit)
        else:
            other += 1
    return Pending(frozenset(units), other)


# -- the prediction ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prediction:
    """Predicted cost of one compile step on this machine.

    wall_seconds: predicted wall time of the step; unit_finish: predicted finish second (from the
    step's start) of each kernel unit, by unit name; peak_memory_gib: the bound the job count keeps
    to (jobs x ``build.nvcc_memory_gib``, the heaviest unit's nvcc peak); speed_factor and
    speed_source: :func:`speed_factor`.
    """

    what: str
    wall_seconds: float
    jobs: int
    threads: int
    cores: int
    memory_gib: float
    sass: int
    speed_factor: float
    speed_source: str
    unit_finish: dict[str, float] = field(default_factory=dict)
    load_slowdown: float = 1.0  # speed_factor = the machine's factor x this (machine.load_slowdown)
    other_busy_cores: float = 0.0  # cores other processes kept busy when it was predicted
    up_to_date: bool = False  # Ninja's dry run found nothing to do (pending)

    @property
    def units(self) -> list[str]:
        return list(self.unit_finish)

    @property
    def peak_memory_gib(self) -> float:
        parallel = min(self.jobs, max(len(self.unit_finish), 1) * self.threads)
        return parallel * compile_model.NVCC_MEMORY_GIB

    def eta(self, elapsed: float, finished: dict[str, float]) -> float:
        """Seconds left: :meth:`expected_total` - elapsed, at least 0 (0 while running past it)."""
        return max(self.expected_total(elapsed, finished) - elapsed, 0.0)

    def expected_total(self, elapsed: float, finished: dict[str, float]) -> float:
        """Expected wall seconds of the whole step: the predicted schedule corrected by what happened so far.

        `finished`: unit name -> second it finished (from the step's start). The prediction is
        stretched by the ratio actual / predicted finish time of the finished units (cost-weighted:
        heavy units weigh more), and never less than elapsed / the predicted finish of the next
        unit (that unit has not finished yet, so the build is at least that much slower); before
        any unit finished the ratio is at least 1.
        """
        done = [u for u in finished if u in self.unit_finish]
        ratio = sum(finished[u] for u in done) / sum(self.unit_finish[u] for u in done) if done else 1.0
        pending = [t for u, t in self.unit_finish.items() if u not in finished]
        next_finish = min(pending) if pending else self.wall_seconds
        if next_finish > 0:
            ratio = max(ratio, elapsed / next_finish)
        return self.wall_seconds * ratio


def runner_here(jobs: int | None = None, env=None) -> tuple[compile_model.Runner, str, int, machine.Calibration]:
    """(this machine as a compile_model.Runner, the speed factor's source, nvcc jobs: ``--jobs`` or the
    plan's rule, the calibration). The Runner's factor is :func:`speed_factor` x the load slowdown of
    the jobs beside the cores other processes keep busy now (machine.load_slowdown)."""
    factor, source = speed_factor(env)
    cores = os.cpu_count() or 1
    memory = available_memory_gib()
    n_jobs = jobs or compile_model.Runner(cores, memory, factor).jobs
    cal = calibration()
    slowdown = machine.load_slowdown(cal.other_busy_cores, min(n_jobs, cores), cores)
    return compile_model.Runner(cores, memory, factor * slowdown), source, n_jobs, cal


def predict(
    what: str,
    units: list,
    sass: int,
    other_seconds: list[float],
    jobs: int | None = None,
    env=None,
    todo: Pending | None = None,
):
    """The :class:`Prediction` of a step compiling `units` (kernel_set.Unit) for `sass` SASS targets
    (+ one PTX) plus edges of `other_seconds` (seconds on the reference host, like the units':
    compile_model.BINDING_SOURCES_SECONDS, DISPATCH_SECONDS). `todo` (:func:`pending`) narrows it to
    what a rebuild will run: its units, and the other edges only when it has any; nothing at all
    predicts 0 seconds."""
    if todo is not None:
        units = [u for u in units if u.name in todo.units]
        other_seconds = other_seconds if todo.other_edges else []
    runner, source, n_jobs, cal = runner_here(jobs, env)
    # the same machine with the memory that gives Runner.jobs == n_jobs (--jobs above the cores: the cores)
    sized = compile_model.Runner(runner.cores, n_jobs * compile_model.NVCC_MEMORY_GIB, runner.speed_factor)
    cpu = [compile_model.unit_cpu_seconds(u, sass, runner) for u in units]
    other = [s * runner.speed_factor for s in other_seconds]
    wall, finish, _, threads = compile_model.compile_schedule(cpu, other, sized, sass + 1)
    slowdown = machine.load_slowdown(cal.other_busy_cores, min(n_jobs, runner.cores), runner.cores)
    return Prediction(
        what=what,
        wall_seconds=wall,
        jobs=sized.jobs,
        threads=threads,
        cores=runner.cores,
        memory_gib=runner.memory_gib,
        sass=sass,
        speed_factor=runner.speed_factor,
        speed_source=source,
        unit_finish={u.name: t for u, t in zip(units, finish, strict=True)},
        load_slowdown=slowdown,
        other_busy_cores=cal.other_busy_cores,
        up_to_date=todo is not None and not units and not other_seconds,
    )


def kernels_step(
    units: list, sass: int, dispatch: bool = True, jobs: int | None = None, env=None, todo: Pending | None = None
) -> Prediction:
    """The kernels build (the units, and the dispatch in a whole set or shard 1), or a shard of it;
    `todo`: :func:`predict`."""
    other = [compile_model.DISPATCH_SECONDS * sass] if dispatch else []
    if todo is not None:
        units = [u for u in units if u.name in todo.units]
    what = f"kernels ({len(units)} unit{'s' * (len(units) != 1)} x {sass} SASS target{'s' * (sass != 1)} + PTX)"
    return predict(what, units, sass, other, jobs, env, todo)


def binding_step(jobs: int | None = None, env=None, todo: Pending | None = None) -> Prediction:
    """The binding build and link against a kernels archive (no kernel unit); `todo`: :func:`predict`."""
    return predict("binding and link", [], 1, list(compile_model.BINDING_SOURCES_SECONDS.values()), jobs, env, todo)


def cheaper_commands(kind: str, group: str, kernel_set: str, units: int, here: list[int] | None) -> list[str]:
    """Commands that build less than a long build of session `kind` (wheel, kernels or dev) for `group`:
    the ``ci`` set, the SMs `here` (the GPUs of this machine, :func:`visible_sms`), shards."""
    base = "nox -s dev" if kind == "dev" else f"nox -s {kind}_{group}"
    custom = "nox -s dev -- --arch-group custom" if kind == "dev" else f"nox -s {kind}_custom --"
    sms = ",".join(map(str, here)) if here else "<SM of your GPU, e.g. 89>"
    out = []
    if kernel_set != "ci":
        out.append(f"{base} -- --kernel-set ci      (one forward unit; other calls raise an error that says so)")
    out.append(f"{custom} --cuda-archs {sms}      (only {'the GPUs here' if here else 'your GPU'}, not {group}'s SMs)")
    if units > 1 and kind != "dev":
        out.append(f"nox -s archive_{group} -- --shard K/N on N machines, then nox -s archive_gather (docs/release.md)")
    return out


def render(steps: list[Prediction], cheaper=None, stream=None) -> str:
    """Print the up-front prediction of a build's steps; above LONG_SECONDS also the commands of
    `cheaper()` (a callable: finding the GPUs here imports torch); return the text."""
    total = sum(p.wall_seconds for p in steps)
    first = steps[0]
    lines = [
        f"release: predicted cost on this machine: {progress.format_seconds(total)} wall, at most "
        f"{max(p.peak_memory_gib for p in steps):.0f} GiB memory ({first.jobs} parallel nvcc x "
        f"{compile_model.NVCC_MEMORY_GIB:g} GiB; {first.cores} cores, {first.memory_gib:.1f} GiB available)"
    ]
    lines += [
        f"release:   {p.what}: {progress.format_seconds(p.wall_seconds)}"
        + (" (up to date: Ninja's dry run finds nothing to do)" if p.up_to_date else "")
        for p in steps
    ]
    base = first.speed_factor / first.load_slowdown
    lines.append(f"release:   speed factor {base:.3g} x the reference host ({first.speed_source})")
    if first.load_slowdown > 1:
        lines.append(
            f"release:   other processes keep {first.other_busy_cores:.1f} of {first.cores} cores busy: each compile "
            f"is predicted {first.load_slowdown:.2f}x slower (speed factor {first.speed_factor:.3g})"
        )
    if total > LONG_SECONDS and cheaper is not None:
        lines.append(f"release: that is over {LONG_SECONDS // 60} minutes. Cheaper builds:")
        lines += [f"release:   {c}" for c in cheaper()]
    text = "\n".join(lines)
    print(text, file=stream or sys.stdout, flush=True)
    return text


def total(steps: list[Prediction]) -> Prediction:
    """One Prediction for steps run one after another (their wall seconds added)."""
    return Prediction(**{**steps[0].__dict__, "what": "all steps", "wall_seconds": sum(p.wall_seconds for p in steps)})


def compare(prediction: Prediction, actual_seconds: float) -> str:
    """``predicted 8:10, actual 8:41 (+6 %)``: the summary's line of one step."""
    p = prediction.wall_seconds
    pct = f" ({100 * (actual_seconds - p) / p:+.0f} %)" if p > 0 else ""
    return f"predicted {progress.format_seconds(p)}, actual {progress.format_seconds(actual_seconds)}{pct}"


def sass_count(group: str, cuda_archs: list[int]) -> int:
    """SASS targets of a build: the SMs given for ``custom``, else the group's (build-manifest.json)."""
    if cuda_archs:
        return len(cuda_archs)
    return len(manifest.arch_groups()[group]["sms"]) if group != "custom" else 1


def units_of(kernel_set: str) -> list:
    """The units of a kernel set (kernel_set.resolve), heaviest first."""
    return kernel_sets.resolve(kernel_set)[1]
