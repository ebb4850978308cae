"""The release plan: predicted wall time of every release job, the shard counts, and the CPU-hours.

``python -m release.plan.plan [--json] [--runner-cores 4] [--runner-memory-gib 16] [--kernel-set S]``
(``nox -s release_plan``) prints, for the release matrix (src/release/plan/matrix.py) and the unit
cost model (``kernel_set.Unit.seconds``, measured on the reference host: `unit_costs.measured_source`), each job of the
release workflow with its predicted minutes on the runner: the shard jobs of every (OS, CUDA,
arch group), its gather job, and its link-and-package jobs (one per wheel of release.plan.matrix: with
the stable-ABI binding one per (OS, CUDA, group) for every torch >= ``stable_abi.torch_min``,
``--torch-abi exact`` one per torch); the number of shards N of
each (OS, CUDA, group), the smallest N for which every shard job is predicted to finish within
``release_plan.job_limit_minutes`` (90); and the kernel CPU-hours of a release, the old design
(every per-torch wheel compiles all units itself) beside the new one (each (OS, CUDA, group) once).
``--json`` prints one object (``max_job_minutes``, ``cpu_hours_before``, ``cpu_hours_after``,
``link_jobs``, ``link_jobs_per_torch``, ``shards``, ``jobs``, ``calibration`` ...). ``--jobs-here``
prints ``FLASH_ATTN_JOBS=<n>`` for the machine it runs on by the rule the plan assumes (the release
workflow's build jobs use it).

The model (numbers and their sources: ``release_plan`` in build-manifest.json; the per-job part, with
the shard count, is release.compile.compile_model, which release.plan.matrix uses too):

- one unit costs ``Unit.seconds x SASS targets x speed_factor`` CPU-seconds on a runner core
  (the group's PTX target shares its virtual arch with the newest SASS target and costs ~1 %,
  which the reference seconds already include);
- parallel nvcc jobs = min(cores, floor(memory GiB / build.nvcc_memory_gib)), the rule CMake
  applies to available memory; nvcc ``--threads`` = min(gencode targets, jobs // units), as
  ``flash_attn_compile_pool`` in cmake/FlashAttnKernelSet.cmake sets it;
- a build's compile wall time = max(the list schedule of its edges, heaviest unit first as Ninja
  starts them, on ``jobs`` slots; total CPU-seconds / the cores those slots can use);
- a job = the fixed ``setup_minutes`` of its kind and OS (estimates) + its compile wall time;
- no job may be predicted above ``TARGET_MINUTES``: the limit less ``release_plan.margin_percent``
  (10 %), since the runner's speed factor is assumed; N is chosen for that;
- the wall time of a whole release at each of ``release_plan.concurrency`` (20, 60 concurrent jobs:
  GitHub's Free and Team plans) is a list schedule of the job graph (:func:`wall_minutes`);
- the peak disk of each job is the sum of the parts of ``release_plan.disk_gib`` it holds
  (:func:`disk_gib`; each part's source, measured or estimated, is in ``disk_source``), against the
  runner's free disk after the cleanup the job does (:func:`free_after_cleanup`: ``free`` + ``cleanup``);
  jobs over it are listed (``disk_over``) and printed, and a test keeps the list empty. Each link job
  measures its free space before installing anything (``--disk-check``) and fails there with both numbers,
  so an estimate that is wrong shows in the job's first minutes, not after the build.

``calibration()`` compares the model with the builds of ``release_plan.checks`` (measured wall
times), which ``nox -s release_plan`` prints with the error. Stdlib only, like release.plan.matrix.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import shutil
import sys
from dataclasses import asdict

from kernels import kernel_set as kernel_sets
from release import manifest
from release.compile.compile_model import (
    GATHER_OS,
    LIMIT_MINUTES,
    MARGIN_PERCENT,
    SETUP_MINUTES,
    TARGET_MINUTES,
    PlanError,
    Runner,
    compile_wall_seconds,
    default_runner,
    full_build_job_minutes,
    gather_job_minutes,
    link_job_minutes,
    sass_targets,
    shard_count,
    shard_job_minutes,
    total_memory_bytes,
    unit_cpu_seconds,
    units_of,
)
from release.errors import ReleaseError, run_main
from release.plan import matrix

_MANIFEST = manifest.load()
_PLAN = _MANIFEST["release_plan"]
CONCURRENCY = tuple(int(c) for c in _PLAN["concurrency"])  # concurrent jobs of the GitHub plans the plan reports
DISK = _PLAN["disk_gib"]


def disk_gib(stage: str, os_name: str, group: str = "", units: int = 0, torches: int = 1) -> float:
    """Predicted peak disk (GiB) of one job: the parts of ``release_plan.disk_gib`` it holds at once.

    shard: image (Linux) or CUDA archives (Windows) + tools + its build folder (units x SASS targets);
    link: the same base + one torch per torch it holds at once (release.yml uninstalls the build's torch
    before a stable-ABI wheel's smoke test installs the newest, so 1) + the binding build;
    gather/assemble/publish: tools + archives.
    """
    base = DISK["image"].get(os_name, 0) + DISK["cuda_windows"].get(os_name, 0) + DISK["tools"]
    if stage == "shard":
        return base + units * sass_targets(group) * DISK["shard_build_per_unit_target"]
    if stage == "link":
        return base + torches * DISK["torch"] + DISK["link_build"]
    return DISK["tools"] + units * sass_targets(group or GROUPS_FIRST) * DISK["archive_per_unit_target"]


GROUPS_FIRST = "legacy"  # the arch group sized for jobs without one (matrix, assemble, publish)


def free_after_cleanup(os_name: str) -> float:
    """Free disk (GiB) of a hosted runner of `os_name` once a job has removed what it does not use:
    ``release_plan.disk_gib.free`` (GitHub's documented figure) + ``cleanup`` (what release.yml's link
    jobs delete; its source in ``disk_source.cleanup``)."""
    return DISK["free"].get(os_name, math.inf) + DISK["cleanup"].get(os_name, 0)


def link_disk_needed_here(name: str) -> tuple[float, float]:
    """(predicted peak GiB, GiB still to be written once the job runs) of the link job `name` of the
    release matrix: the container image (Linux) is already on disk when a step can measure.
    ReleaseError (MatrixError) for a name no link entry has."""
    entries = [e for e in matrix.build_matrix()["include"] if e["name"] == name]
    if not entries:
        raise matrix.MatrixError(f"no link job {name!r} in the release matrix (nox -s matrix -- --stage link)")
    e = entries[0]
    peak = disk_gib("link", e["os"], e["group"])
    return peak, peak - DISK["image"].get(e["os"], 0)


def check_disk(name: str, paths: list[str], usage=shutil.disk_usage) -> str:
    """Raise ReleaseError unless every folder of `paths` has the free space the link job `name` still
    needs (:func:`link_disk_needed_here`); returns the line that says so. Sizes in GiB."""
    peak, needed = link_disk_needed_here(name)
    free = {p: usage(p).free / 2**30 for p in paths}
    short = {p: f for p, f in free.items() if f < needed}
    where = ", ".join(f"{p} {f:.1f} GiB free" for p, f in free.items())
    if short:
        raise ReleaseError(
            f"link job {name} needs {needed:.1f} GiB more disk (peak {peak:.1f} GiB, release.plan.plan), but {where}: "
            "free more in the job's cleanup step, or use a larger runner (FLASH_ATTN_RUNNER_UBUNTU/_WINDOWS), "
            "and correct release_plan.disk_gib in build-manifest.json to the measured figure"
        )
    return f"disk: link job {name} needs {needed:.1f} GiB more (peak {peak:.1f}); {where}"


def wall_minutes(jobs: list[dict], slots: int) -> float:
    """Predicted wall minutes of a release run whose jobs (``name``, ``minutes``, ``needs``) share
    `slots` concurrent runners: each job starts when its needs are done and a runner is free, in the
    order the jobs became ready (GitHub queues them first come, first served; a model, not measured)."""
    order = {j["name"]: i for i, j in enumerate(jobs)}
    done: dict[str, float] = {}
    pending = list(jobs)
    running: list[tuple[float, str]] = []
    now = 0.0
    while pending or running:
        ready = [j for j in pending if all(n in done for n in j["needs"])]
        ready.sort(key=lambda j: (max((done[n] for n in j["needs"]), default=0.0), order[j["name"]]))
        for j in ready[: max(0, slots - len(running))]:
            pending.remove(j)
            heapq.heappush(running, (now + j["minutes"], j["name"]))
        if not running:
            raise PlanError(f"jobs wait on needs no job provides: {[j['name'] for j in pending]}")
        now, name = heapq.heappop(running)
        done[name] = now
    return now


def kernel_builds(entries: list[dict]) -> list[tuple[str, str, str]]:
    """The distinct (os, cuda, group) of link entries (release.plan.matrix entries), in matrix order."""
    return list(dict.fromkeys((e["os"], e["cuda"], e["group"]) for e in entries))


def plan(
    kernel_set: str | None = None,
    runner: Runner | None = None,
    entries: list[dict] | None = None,
    torch_abi: str | None = None,
) -> dict:
    """The release plan as one JSON-serialisable object (see the module docstring); PlanError when the
    limit cannot be met. `entries` are the link entries (default: the whole release matrix of `torch_abi`).
    `kernel_set` and `torch_abi` default to the release's (release_matrix.kernel_set and .torch_abi of
    the manifest: matrix.RELEASE_KERNEL_SET, matrix.RELEASE_TORCH_ABI).

    The "before" figures are the per-torch design without shared kernels: one full build per torch a
    wheel serves (an entry's ``torches``), so a stable-ABI wheel for five torches counts five.
    """
    runner = runner or default_runner()
    kernel_set = kernel_set or matrix.RELEASE_KERNEL_SET
    units = units_of(kernel_set)
    if entries is None:
        entries = matrix.build_matrix(kernel_set=kernel_set, torch_abi=torch_abi)["include"]
    per_torch = [e for e in entries for _ in e.get("torches") or [e["torch"]]]
    jobs: list[dict] = [_job("matrix", "matrix", GATHER_OS, 0, SETUP_MINUTES["matrix"][GATHER_OS], [], DISK["tools"])]
    shards: dict[str, int] = {}
    cpu_after = 0.0
    for os_name, cuda, group in kernel_builds(entries):
        bid = matrix.kernels_build(os_name, cuda, group)
        n = shard_count(os_name, group, kernel_set, runner)
        shards[bid] = n
        names = []
        for k, part in enumerate(kernel_sets.split_shards(units, n), start=1):
            names.append(f"kernels-{bid}-{k}of{n}")
            minutes = shard_job_minutes(os_name, group, part, runner)
            jobs.append(
                _job(
                    "shard",
                    names[-1],
                    os_name,
                    len(part),
                    minutes,
                    ["matrix"],
                    disk_gib("shard", os_name, group, len(part)),
                )
            )
        disk = disk_gib("gather", os_name, group, len(units))
        # gather is a file merge on Linux for every OS's archives (release.yml runs-on, matrix.gather_entries)
        jobs.append(_job("gather", f"gather-{bid}", GATHER_OS, len(units), gather_job_minutes(), names, disk))
        cpu_after += sum(unit_cpu_seconds(u, sass_targets(group), runner) for u in units)
    for e in entries:
        gather = f"gather-{matrix.kernels_build(e['os'], e['cuda'], e['group'])}"
        disk = disk_gib("link", e["os"], e["group"])  # one torch at a time (release.yml frees the build's)
        jobs.append(_job("link", e["name"], e["os"], 0, link_job_minutes(e["os"], runner), [gather], disk))
    links = [e["name"] for e in entries]
    jobs.append(_job("assemble", "assemble", GATHER_OS, 0, SETUP_MINUTES["assemble"][GATHER_OS], links, DISK["tools"]))
    jobs.append(
        _job("publish", "publish", GATHER_OS, 0, SETUP_MINUTES["publish"][GATHER_OS], ["assemble"], DISK["tools"])
    )
    over = [j for j in jobs if j["minutes"] > TARGET_MINUTES]
    if over:
        raise PlanError(
            f"{over[0]['name']} is predicted at {over[0]['minutes']:g} minutes, within {MARGIN_PERCENT:g} % of the "
            f"{LIMIT_MINUTES:g}-minute job limit (release_plan in build-manifest.json): shorten it, or plan a larger "
            "runner"
        )
    cpu_before = sum(sum(unit_cpu_seconds(u, sass_targets(e["group"]), runner) for u in units) for e in per_torch)
    before_jobs = [full_build_job_minutes(e["os"], e["group"], units, runner) for e in per_torch]
    return {
        "kernel_set": kernel_set,
        "units": len(units),
        "runner": asdict(runner) | {"nvcc_jobs": runner.jobs},
        "limit_minutes": LIMIT_MINUTES,
        "max_job_minutes": max(j["minutes"] for j in jobs),
        "cpu_hours_before": round(cpu_before / 3600, 1),
        "cpu_hours_after": round(cpu_after / 3600, 1),
        "cpu_reduction": round(cpu_before / cpu_after, 2) if cpu_after else None,
        "builds_before": len(per_torch),
        "link_jobs": len(entries),
        "link_jobs_per_torch": len(per_torch),
        "kernel_builds_after": len(shards),
        "job_minutes_before": round(max(before_jobs), 1),
        "runner_hours_before": round(sum(before_jobs) / 60, 1),
        "runner_hours_after": round(sum(j["minutes"] for j in jobs) / 60, 1),
        "margin_percent": MARGIN_PERCENT,
        "target_minutes": round(TARGET_MINUTES, 1),
        "wall_minutes": {str(c): round(wall_minutes(jobs, c), 1) for c in CONCURRENCY},
        "disk_free_gib": {os_name: free_after_cleanup(os_name) for os_name in DISK["free"]},
        "disk_over": [j["name"] for j in jobs if j["disk_gib"] > free_after_cleanup(j["os"])],
        "shards": shards,
        "jobs": jobs,
        "calibration": calibration(),
    }


def _job(stage: str, name: str, os_name: str, units: int, minutes: float, needs: list[str], disk: float) -> dict:
    return {
        "stage": stage,
        "name": name,
        "os": os_name,
        "units": units,
        "minutes": round(minutes, 1),
        "needs": needs,
        "disk_gib": round(disk, 1),
    }


def predict_check(check: dict) -> float:
    """Predicted wall seconds of one measured build of release_plan.checks (its machine, units, archs)."""
    runner = Runner(int(check["cores"]), float(check["memory_gib"]), float(check["speed_factor"]))
    units = units_of(check["kernel_set"])
    order = check.get("start_order")  # a build that started its units in another order than heaviest first
    if order:
        units = [kernel_sets.parse_unit(name) for name in order]
    sass = int(check["sass_targets"])
    cpu = [unit_cpu_seconds(u, sass, runner) for u in units]
    return compile_wall_seconds(cpu, [float(s) for s in check["other_seconds"]], runner, sass + 1, not order)


def calibration() -> list[dict]:
    """Each measured build of release_plan.checks with the model's prediction and the error (%)."""
    out = []
    for check in _PLAN["checks"]:
        predicted = predict_check(check)
        measured = float(check["measured_seconds"])
        out.append(
            {
                "build": check["name"],
                "measured_seconds": measured,
                "predicted_seconds": round(predicted, 1),
                "error_percent": round(100 * (predicted - measured) / measured, 1),
            }
        )
    return out


def jobs_here() -> int:
    """FLASH_ATTN_JOBS for this machine by the plan's rule (Runner.jobs) from its cores and total memory."""
    return Runner(os.cpu_count() or 1, total_memory_bytes() / 2**30, 1.0).jobs


def format_text(p: dict) -> str:
    """The plan as text: runner, shard counts, every job with its minutes, the CPU-hours, the checks."""
    r = p["runner"]
    lines = [
        f"release plan: kernel set {p['kernel_set']} ({p['units']} units), runner {r['cores']} cores / "
        f"{r['memory_gib']:g} GiB ({r['nvcc_jobs']} parallel nvcc, speed factor {r['speed_factor']:g} x the H200 "
        f"reference host), job limit {p['limit_minutes']:g} min",
        "",
        "shards per (group, CUDA, OS): " + ", ".join(f"{b} {n}" for b, n in p["shards"].items()),
        "",
        f"{'stage':<8} {'job':<44} {'units':>5} {'minutes':>8} {'disk GiB':>9}",
    ]
    lines += [
        f"{j['stage']:<8} {j['name']:<44} {j['units']:>5} {j['minutes']:>8.1f} {j['disk_gib']:>9.1f}" for j in p["jobs"]
    ]
    free = ", ".join(f"{os_name} {gib:g}" for os_name, gib in p["disk_free_gib"].items())
    walls = "; ".join(f"{c} concurrent jobs: {m / 60:.1f} h ({m:.0f} min)" for c, m in p["wall_minutes"].items())
    lines += [
        "",
        f"jobs: {len(p['jobs'])}; longest predicted {p['max_job_minutes']:.1f} min (limit {p['limit_minutes']:g}, "
        f"margin {p['margin_percent']:g} %: every job <= {p['target_minutes']:g} min)",
        f"wall time of a release: {walls}",
        f"disk per job (peak, GiB; free on a runner after its cleanup: {free}): "
        + (
            f"OVER on {len(p['disk_over'])} jobs: {', '.join(p['disk_over'][:4])}"
            if p["disk_over"]
            else "every job fits"
        ),
        f"link jobs: {p['link_jobs']} (one per wheel; a per-torch wheel for every torch would need "
        f"{p['link_jobs_per_torch']})",
        f"kernel CPU-hours of a release: before {p['cpu_hours_before']:.1f} ({p['builds_before']} full builds), "
        f"after {p['cpu_hours_after']:.1f} ({p['kernel_builds_after']} kernel builds): {p['cpu_reduction']}x less",
        f"runner-hours: before {p['runner_hours_before']:.1f} (each job {p['job_minutes_before']:.0f} min), "
        f"after {p['runner_hours_after']:.1f}",
        "",
        "model check against measured builds:",
    ]
    lines += [
        f"  {c['build']}: measured {c['measured_seconds']:.0f} s, predicted {c['predicted_seconds']:.0f} s "
        f"({c['error_percent']:+.1f} %)"
        for c in p["calibration"]
    ]
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m release.plan.plan", description=__doc__.split("\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--runner-cores", type=int, help=f"cores of a runner (default {_PLAN['runner']['cores']})")
    p.add_argument(
        "--runner-memory-gib", type=float, help=f"memory of a runner (default {_PLAN['runner']['memory_gib']})"
    )
    p.add_argument(
        "--kernel-set",
        default=matrix.RELEASE_KERNEL_SET,
        help=f"kernel set of every job (default {matrix.RELEASE_KERNEL_SET}: release_matrix.kernel_set)",
    )
    p.add_argument(
        "--torch-abi",
        default=matrix.RELEASE_TORCH_ABI,
        help="the wheels of release.plan.matrix: stable (one per (OS, CUDA, group)) or exact (one per torch); "
        f"default {matrix.RELEASE_TORCH_ABI} (release_matrix.torch_abi)",
    )
    p.add_argument("--jobs-here", action="store_true", help="print FLASH_ATTN_JOBS=<n> for this machine and exit")
    p.add_argument("--disk-check", metavar="LINK_JOB", help="fail unless --path has the disk this link job needs")
    p.add_argument("--path", action="append", default=[], help="with --disk-check: a folder the job writes to")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.jobs_here:
        print(f"FLASH_ATTN_JOBS={jobs_here()}")
        return 0

    def body() -> int:  # PlanError and MatrixError are ReleaseErrors: exit 2 with the message
        if args.disk_check:
            print(check_disk(args.disk_check, args.path or ["."]), flush=True)
            return 0
        runner = default_runner(args.runner_cores, args.runner_memory_gib)
        result = plan(args.kernel_set, runner, torch_abi=args.torch_abi)
        sys.stdout.write(json.dumps(result, indent=1) + "\n" if args.json else format_text(result))
        return 0

    return run_main(body, prog="release.plan.plan")


if __name__ == "__main__":
    sys.exit(main())
