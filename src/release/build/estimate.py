"""What one build will cost on this machine, said before it starts, and the measured speed it records.

Every build (``nox -s wheel_*``, ``archive_*``, ``dev``) prints, before anything compiles, the
predicted wall time and peak memory of its compile steps (:func:`predict`, :func:`render`). The
model is the release plan's (``release.plan.compile_model.compile_schedule``: each unit's manifest cost
``unit_costs`` x SASS targets x speed factor, nvcc jobs and ``--threads`` as CMake sizes them, a
list schedule heaviest unit first); this module only fills in this machine: its cores, its
available memory (``/proc/meminfo`` MemAvailable, as CMake's AVAILABLE_PHYSICAL_MEMORY; elsewhere
the total), ``--jobs`` if given, and its speed factor.

The speed factor (seconds of a compile here / on the manifest's reference host) is the median of
the last measured builds of this machine, recorded in ``<cache dir>/build_speed.json``
(:func:`record`, written after every kernels build that compiled all of its predicted units
without compile-cache hits; cache dir: ``$FLASH_ATTN_CACHE_DIR``, else the per-user cache the
sdist download uses). Without a record the factor is the manifest's ``release_plan.runner``
figure, and the message says it is an assumption. Binding and dispatch seconds of the manifest
are on a runner core (speed factor ``release_plan.runner.speed_factor``) and scale with the ratio.

Above :data:`LONG_SECONDS` (30 minutes) the message offers cheaper commands
(:func:`cheaper_commands`): the ``ci`` kernel set, the SMs of the GPUs here, shards.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernels import kernel_set as kernel_sets
from release import manifest
from release.build import progress
from release.errors import ReleaseError
from release.plan import compile_model
from release.ship import checksums

LONG_SECONDS = 30 * 60  # the threshold: a build predicted longer than this offers cheaper commands
SPEED_FILE = "build_speed.json"
KEEP_RECORDS = 5  # the speed factor is the median of this machine's last 5 measured builds
MIN_RECORD_SECONDS = 60.0  # shorter builds are dominated by configure noise: not recorded
RUNNER_SPEED = float(compile_model._PLAN["runner"]["speed_factor"])  # the speed of BINDING_SECONDS, DISPATCH_SECONDS
VISIBLE_SMS_ENV = "FLASH_ATTN_VISIBLE_SMS"  # e.g. "89" or "80,90"; "none": no GPU (tests, CI, a GPU-less host)


def cache_dir(env=None) -> Path:
    """The per-user cache folder of cmake/FlashAttnUpstream.cmake (flash_attn_default_cache_dir)."""
    env = os.environ if env is None else env
    if env.get("FLASH_ATTN_CACHE_DIR"):
        return Path(env["FLASH_ATTN_CACHE_DIR"])
    if os.name == "nt" and env.get("LOCALAPPDATA"):
        return Path(env["LOCALAPPDATA"]) / "flash_attn_wheels"
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flash_attn_wheels"


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


def speed_factor(env=None) -> tuple[float, str]:
    """(speed factor, where it comes from) for this machine; see the module docstring."""
    path = cache_dir(env) / SPEED_FILE
    mine = [r for r in _records(path) if _this_host(r) and isinstance(r.get("speed_factor"), (int, float))]
    if mine:
        mine = mine[-KEEP_RECORDS:]
        f = statistics.median(r["speed_factor"] for r in mine)
        return f, f"measured: median of this machine's last {len(mine)} build(s), {path}"
    return RUNNER_SPEED, (
        f"assumed: no build of this machine is recorded yet ({path}); release_plan.runner.speed_factor of "
        "build-manifest.json, a 2-core Zen 3 machine"
    )


def record(prediction: Prediction, actual_seconds: float, summary: dict, env=None) -> Path | None:
    """Add this build's measured speed factor to the record (see the module docstring); returns the
    file, or None when the build does not measure the speed (fewer units compiled than predicted,
    compile-cache hits, too short) or the cache folder is not writable (the record is optional)."""
    cache = summary.get("compile_cache") or {}
    if (
        not prediction.units
        or summary.get("units_compiled") != len(prediction.units)
        or cache.get("hits")
        or actual_seconds < MIN_RECORD_SECONDS
        or prediction.wall_seconds <= 0
    ):
        return None
    path = cache_dir(env) / SPEED_FILE
    entry = {
        "host": platform.node(),
        "cores": os.cpu_count() or 1,
        "what": prediction.what,
        "units": len(prediction.units),
        "jobs": prediction.jobs,
        "predicted_seconds": round(prediction.wall_seconds, 1),
        "actual_seconds": round(actual_seconds, 1),
        # the model is linear in the factor, so this is the factor that would have predicted it exactly
        "speed_factor": round(prediction.speed_factor * actual_seconds / prediction.wall_seconds, 3),
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        builds = (_records(path) + [entry])[-50:]
        checksums.atomic_write_text(path, json.dumps({"format": 1, "builds": builds}, indent=1) + "\n")
    except OSError:
        return None
    return path


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


def runner_here(jobs: int | None = None, env=None) -> tuple[compile_model.Runner, str, int]:
    """(this machine as a compile_model.Runner, the speed factor's source, nvcc jobs: ``--jobs`` or the plan's rule)."""
    factor, source = speed_factor(env)
    runner = compile_model.Runner(os.cpu_count() or 1, available_memory_gib(), factor)
    return runner, source, jobs or runner.jobs


def predict(what: str, units: list, sass: int, other_seconds: list[float], jobs: int | None = None, env=None):
    """The :class:`Prediction` of a step compiling `units` (kernel_set.Unit) for `sass` SASS targets
    (+ one PTX) plus edges of `other_seconds` (runner-core seconds: compile_model.BINDING_SECONDS, DISPATCH_SECONDS)."""
    runner, source, n_jobs = runner_here(jobs, env)
    # the same machine with the memory that gives Runner.jobs == n_jobs (--jobs above the cores: the cores)
    sized = compile_model.Runner(runner.cores, n_jobs * compile_model.NVCC_MEMORY_GIB, runner.speed_factor)
    cpu = [compile_model.unit_cpu_seconds(u, sass, runner) for u in units]
    other = [s * runner.speed_factor / RUNNER_SPEED for s in other_seconds]
    wall, finish, _, threads = compile_model.compile_schedule(cpu, other, sized, sass + 1)
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
    )


def kernels_step(units: list, sass: int, dispatch: bool = True, jobs: int | None = None, env=None) -> Prediction:
    """The kernels build (the units, and the dispatch in a whole set or shard 1), or a shard of it."""
    other = [compile_model.DISPATCH_SECONDS * sass] if dispatch else []
    what = f"kernels ({len(units)} unit{'s' * (len(units) != 1)} x {sass} SASS target{'s' * (sass != 1)} + PTX)"
    return predict(what, units, sass, other, jobs, env)


def binding_step(jobs: int | None = None, env=None) -> Prediction:
    """The binding build and link against a kernels archive (no kernel unit)."""
    return predict("binding and link", [], 1, [compile_model.BINDING_SECONDS], jobs, env)


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
    lines += [f"release:   {p.what}: {progress.format_seconds(p.wall_seconds)}" for p in steps]
    lines.append(f"release:   speed factor {first.speed_factor:g} x the reference host ({first.speed_source})")
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
