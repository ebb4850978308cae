"""The rules of the speed factor and of what a rebuild predicts, on faked timings (release.compile.estimate,
release.compile.machine): the factor comes from this machine, the load of the moment slows the
prediction, only builds that ran alone are recorded, and a build with nothing to do predicts 0:00."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time

import pytest

from kernels import kernel_set as ks
from release.compile import builder, compile_model, estimate, machine

UNIT = "fwd_hdim64_fp16"
RUNNING = machine.running  # the real registry (conftest.steady_machine replaces it in every test)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASH_ATTN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(estimate.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(estimate, "available_memory_gib", lambda: 22.0)
    return tmp_path / "cache"


def machine_is(monkeypatch, ratio: float, busy: float = 0.0):
    cal = machine.Calibration(machine.REFERENCE_CPU_SECONDS * ratio, ratio, busy)
    monkeypatch.setattr(estimate, "calibration", lambda: cal)


def ci(**kw):
    return estimate.kernels_step([ks.parse_unit(UNIT)], sass=1, dispatch=False, jobs=2, **kw)


def test_without_a_record_the_factor_is_the_calibration_not_a_default(cache, monkeypatch):
    machine_is(monkeypatch, 1.0)
    reference = ci()
    machine_is(monkeypatch, 0.5)  # a machine twice as fast per core as the calibration's reference
    fast = ci()
    assert fast.speed_factor == pytest.approx(0.5)  # the benchmark ratio is the factor (reference host: 1.0)
    assert fast.wall_seconds == pytest.approx(reference.wall_seconds / 2)
    assert fast.speed_source.startswith("calibrated")


def test_other_busy_cores_slow_the_prediction_by_the_fair_share(cache, monkeypatch):
    machine_is(monkeypatch, 1.0)
    idle = ci()
    machine_is(monkeypatch, 1.0, busy=2.0)  # 2 cores, 2 kept busy, 2 jobs: each compile gets half a core
    busy = ci()
    assert (busy.load_slowdown, busy.wall_seconds) == (pytest.approx(2.0), pytest.approx(2 * idle.wall_seconds))
    text = estimate.render([busy])
    assert "keep 2.0 of 2 cores busy" in text and "2.00x slower" in text
    assert machine.load_slowdown(0.5, 1, 2) == 1.0  # a free core left: no slowdown


def test_a_recorded_build_that_ran_alone_sets_the_factor_before_the_load(cache, monkeypatch):
    machine_is(monkeypatch, 1.0)
    p = ci()
    assert estimate.record(p, p.wall_seconds * 0.8, {"units_compiled": 1}) is not None
    factor, source = estimate.speed_factor()
    assert factor == pytest.approx(0.8, rel=1e-3) and source.startswith("measured")
    machine_is(monkeypatch, 3.0)  # the record wins over the calibration
    assert ci().wall_seconds == pytest.approx(p.wall_seconds * 0.8, rel=1e-3)


def test_records_of_builds_not_known_to_have_run_alone_are_ignored(cache, monkeypatch):
    # what builds recorded before this rule: a slow factor measured beside other builds
    machine_is(monkeypatch, 1.0)
    cache.mkdir()
    old = {"host": platform.node(), "cores": 2, "speed_factor": 5.4, "units": 1}
    (cache / estimate.SPEED_FILE).write_text(json.dumps({"format": 1, "builds": [old]}))
    assert estimate.speed_factor()[1].startswith("calibrated")


def test_a_build_beside_other_work_is_not_recorded(cache, monkeypatch):
    machine_is(monkeypatch, 1.0, busy=1.0)
    p = ci()
    assert estimate.record(p, p.wall_seconds * 2, {"units_compiled": 1}) is None
    assert not (cache / estimate.SPEED_FILE).exists()


def other_build(cache, start: float, end: float | None, pid: int):
    folder = machine.registry_dir(cache)
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"host": platform.node(), "pid": pid, "what": "x", "start": start, "end": end}
    (folder / f"other-{pid}-{start}.json").write_text(json.dumps(entry))


def test_a_build_beside_another_registered_build_is_not_recorded(cache, monkeypatch):
    machine_is(monkeypatch, 1.0)
    p = ci()
    now = time.time()
    # another build that started and ended inside this one's run (a shard started beside it)
    other_build(cache, now - 300, now - 200, pid=os.getppid())
    assert estimate.record(p, 400.0, {"units_compiled": 1}) is None
    # one that ended before this build started does not count
    assert estimate.record(p, 150.0, {"units_compiled": 1}) is not None


def test_a_running_build_registers_itself_and_sees_the_others(cache):
    with RUNNING(cache, "a build"):
        (entry,) = [json.loads(p.read_text()) for p in machine.registry_dir(cache).glob("*.json")]
        assert entry["pid"] == os.getpid() and entry["end"] is None
        assert machine.others_overlapping(cache, entry["start"] - 1, time.time()) == []  # its own process
        seen = machine.others_overlapping(cache, entry["start"] - 1, time.time(), pid=-1)
        assert [e["what"] for e in seen] == ["a build"]
    (entry,) = [json.loads(p.read_text()) for p in machine.registry_dir(cache).glob("*.json")]
    assert entry["end"] >= entry["start"]


def test_a_dead_build_without_an_end_ends_at_its_file_time(cache):
    dead = subprocess_pid_that_exited()
    other_build(cache, time.time() - 1000, None, pid=dead)
    (path,) = machine.registry_dir(cache).glob("*.json")
    os.utime(path, (time.time() - 900, time.time() - 900))
    assert machine.others_overlapping(cache, time.time() - 100, time.time()) == []
    assert len(machine.others_overlapping(cache, time.time() - 950, time.time())) == 1


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/stat"), reason="needs /proc")
def test_a_reused_pid_is_not_the_registered_build(cache):
    # an entry left by a build that died, whose pid a later process (here: this test) now holds
    other_build(cache, time.time() - 1000, None, pid=os.getpid())
    (path,) = machine.registry_dir(cache).glob("*.json")
    entry = json.loads(path.read_text())
    entry["pid_start"] = machine._process_start(os.getpid()) - 1  # registered by an earlier process
    path.write_text(json.dumps(entry))
    os.utime(path, (time.time() - 900, time.time() - 900))
    assert machine.others_overlapping(cache, time.time() - 100, time.time(), pid=-1) == []
    entry["pid_start"] += 1  # the same process: it still runs
    path.write_text(json.dumps(entry))
    assert len(machine.others_overlapping(cache, time.time() - 100, time.time(), pid=-1)) == 1


def subprocess_pid_that_exited() -> int:
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_builds_register_through_the_streamed_runner(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "running", RUNNING)
    code = "import json, os, sys; print(len(os.listdir(sys.argv[1])))"
    builder.run_streamed([sys.executable, "-c", code, str(machine.registry_dir(cache))], tmp_path / "b", verbose=True)
    assert "1" in (tmp_path / "b" / builder.LOG_NAME).read_text().splitlines()[1:]


# -- what a rebuild predicts ---------------------------------------------------------------------

DEFINES = {"FLASH_ATTN_KERNEL_SET": "ci", "FLASH_ATTN_CUDA_ARCHS": "80"}


def configured(tmp_path, dry_run: str, defines=DEFINES):
    """A configured build folder whose 'ninja' prints `dry_run` for -n; returns (folder, ninja)."""
    bdir = tmp_path / "b"
    bdir.mkdir()
    project = tmp_path / "my project" / "CMakeLists.txt"  # a space: Ninja writes it as "$ "
    project.parent.mkdir()
    project.write_text("# the project\n")
    module = tmp_path / "cmake" / "Modules" / "CMakeCUDACompiler.cmake.in"  # CMake's own (CMAKE_ROOT)
    module.parent.mkdir(parents=True)
    module.write_text("# CMake's\n")
    cache = "".join(f"{k}:STRING={v}\n" for k, v in defines.items()) + f"CMAKE_ROOT:INTERNAL={tmp_path / 'cmake'}\n"
    (bdir / "CMakeCache.txt").write_text(cache)
    # as CMake writes it: the edge that re-runs CMake when an input (escaped path) is newer
    rerun = f"build build.ninja: RERUN_CMAKE | {str(project).replace(' ', '$ ')} {module}\n"
    (bdir / "build.ninja").write_text("# configured\n" + rerun)
    ninja = tmp_path / "ninja"
    # the dry run reads a copy of build.ninja (-f), never build.ninja itself, which it would regenerate
    check = "i = sys.argv.index('-f'); assert '-n' in sys.argv and sys.argv[i + 1] != 'build.ninja'"
    ninja.write_text(f"#!{sys.executable}\nimport sys\n{check}\nprint({dry_run!r}, end='')\n")
    ninja.chmod(0o755)
    return bdir, str(ninja)


posix = pytest.mark.skipif(os.name == "nt", reason="the fake ninja is a POSIX script")


@posix
def test_a_build_with_nothing_to_do_predicts_nothing(cache, monkeypatch, tmp_path):
    machine_is(monkeypatch, 1.0)
    bdir, ninja = configured(tmp_path, "ninja: no work to do.\n")
    todo = estimate.pending(bdir, DEFINES, ninja)
    assert todo == estimate.Pending(frozenset(), 0)
    steps = [ci(todo=todo), estimate.binding_step(2, todo=todo)]
    assert [s.wall_seconds for s in steps] == [0.0, 0.0] and all(s.up_to_date for s in steps)
    assert "up to date" in estimate.render(steps) and sum(s.wall_seconds for s in steps) < 60


@posix
def test_a_rebuild_predicts_only_the_units_ninja_will_run(cache, monkeypatch, tmp_path):
    machine_is(monkeypatch, 1.0)
    lines = (
        "[1/3] Re-checking globbed directories...\n"
        f"[2/3] Building CUDA object CMakeFiles/k.dir/kernels/units/{UNIT}.cu.o\n"
        "[3/3] Linking CUDA shared module _C_custom.so\n"
    )
    bdir, ninja = configured(tmp_path, lines)
    todo = estimate.pending(bdir, DEFINES, ninja)
    assert todo == estimate.Pending(frozenset({UNIT}), 1)
    units = [ks.parse_unit(UNIT), ks.parse_unit("bwd_hdim128_fp16")]
    p = estimate.kernels_step(units, 1, False, 2, todo=todo)
    assert p.units == [UNIT] and p.wall_seconds == pytest.approx(ci().wall_seconds)


@posix
def test_unknown_rebuilds_predict_everything(cache, tmp_path):
    bdir, ninja = configured(tmp_path, "[1/1] Re-running CMake...\n")
    assert estimate.pending(bdir, DEFINES, ninja) is None  # CMake runs first: anything may change
    assert estimate.pending(bdir, {**DEFINES, "FLASH_ATTN_KERNEL_SET": "dev"}, ninja) is None  # other options
    assert estimate.pending(tmp_path / "none", DEFINES, ninja) is None  # never configured
    assert estimate.pending(bdir, DEFINES, str(tmp_path / "missing-ninja")) is None
    assert sorted(p.name for p in bdir.iterdir()) == ["CMakeCache.txt", "build.ninja"]  # the dry run's copy is gone


@posix
def test_a_build_that_will_re_run_cmake_predicts_everything(cache, tmp_path):
    bdir, ninja = configured(tmp_path, "ninja: no work to do.\n")
    assert estimate.pending(bdir, DEFINES, ninja) == estimate.Pending(frozenset(), 0)
    later = (bdir / "build.ninja").stat().st_mtime + 10
    # CMake's own modules reinstalled (a nox session makes its environment anew): no compile changes
    os.utime(tmp_path / "cmake" / "Modules" / "CMakeCUDACompiler.cmake.in", (later, later))
    assert estimate.pending(bdir, DEFINES, ninja) == estimate.Pending(frozenset(), 0)
    project = tmp_path / "my project" / "CMakeLists.txt"
    os.utime(project, (later, later))  # edited after the last configure
    assert estimate.pending(bdir, DEFINES, ninja) is None
    project.unlink()  # an input gone: CMake re-runs too
    assert estimate.pending(bdir, DEFINES, ninja) is None
    assert estimate.project_options({**DEFINES, "CMAKE_CUDA_COMPILER_LAUNCHER": ""}, "FLASH_ATTN_CUDA_ARCHS") == {
        "FLASH_ATTN_KERNEL_SET": "ci"
    }


def test_the_calibration_measures_nvcc_cpu_time_against_the_reference():
    calls = []

    def fake_nvcc(cmd, **kw):  # writes nothing; the test's CPU clock says what each run cost
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, b"", b"")

    ticks = iter([0.0, 2.0, 2.0, 3.5])  # two runs of 2.0 and 1.5 CPU-seconds
    assert machine.benchmark_seconds("nvcc", run=fake_nvcc, cpu=lambda: next(ticks)) == pytest.approx(1.5)
    assert calls[0][0] == "nvcc" and "-gencode=arch=compute_80,code=sm_80" in calls[0]
    assert calls[0][-3].endswith("calibrate.cu")

    def broken(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 1, b"", b"nvcc fatal")

    assert machine.benchmark_seconds("nvcc", run=broken) is None
    cal = machine.calibrate(None)  # no nvcc: no speed, the load still sampled
    assert cal.speed_ratio is None and 0.0 <= cal.other_busy_cores <= (os.cpu_count() or 1)


def test_without_nvcc_the_factor_is_the_runners_and_says_so(cache, monkeypatch):
    monkeypatch.setattr(estimate, "calibration", lambda: machine.Calibration(None, None, 0.0))
    factor, source = estimate.speed_factor()
    assert factor == compile_model.default_runner().speed_factor and source.startswith("assumed: no nvcc")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")
def test_the_calibration_compiles_with_the_real_nvcc():
    cal = machine.calibrate(shutil.which("nvcc"))
    assert cal.cpu_seconds is not None and 0.05 < cal.cpu_seconds < 60
    assert cal.speed_ratio == pytest.approx(cal.cpu_seconds / machine.REFERENCE_CPU_SECONDS)
