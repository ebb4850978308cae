"""The up-front cost of a build and the live ETA come from the manifest's unit costs (release.compile.estimate)."""

from __future__ import annotations

import json

import pytest

from kernels import kernel_set as ks
from release import errors
from release.compile import builder, compile_model, estimate, progress

HEAVY, LIGHT = "bwd_hdim128_fp16", "fwd_hdim64_fp16_causal"  # 266 s and 112 s on the reference host
OBJ = "[{}/3] Building CUDA object CMakeFiles/flash_attn_kernels.dir/kernels/units/{}.cu.o"


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def no_record(tmp_path, monkeypatch):
    """An empty cache folder: no measured speed, so the calibration (fixed by conftest.steady_machine) applies."""
    monkeypatch.setenv("FLASH_ATTN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def two_units():
    return [ks.parse_unit(HEAVY), ks.parse_unit(LIGHT)]


def test_prediction_of_two_units_is_the_manifests_unit_costs(no_record):
    units = two_units()
    assert units[0].seconds > 2 * units[1].seconds  # very different costs
    p = estimate.kernels_step(units, sass=1, dispatch=False, jobs=1)
    f = 1.0  # conftest.steady_machine: a machine exactly as fast as the reference host
    assert p.speed_factor == f and p.speed_source.startswith("calibrated")
    # one job: the heavy unit first, then the light one, each unit_costs seconds x 1 SASS x f
    assert p.unit_finish[HEAVY] == pytest.approx(units[0].seconds * f)
    assert p.unit_finish[LIGHT] == pytest.approx((units[0].seconds + units[1].seconds) * f)
    assert p.wall_seconds == pytest.approx((units[0].seconds + units[1].seconds) * f)
    assert p.peak_memory_gib == compile_model.NVCC_MEMORY_GIB
    # three SASS targets cost three times as much; two jobs run the two units side by side
    assert estimate.kernels_step(units, 3, False, jobs=1).wall_seconds == pytest.approx(3 * p.wall_seconds)
    assert estimate.kernels_step(units, 1, False, jobs=2).wall_seconds == pytest.approx(units[0].seconds * f)


def test_eta_follows_the_prediction_and_corrects_as_units_finish(no_record):
    p = estimate.kernels_step(two_units(), sass=1, dispatch=False, jobs=1)
    heavy_at, total = p.unit_finish[HEAVY], p.wall_seconds
    clock = Clock()
    state = progress.BuildProgress(units=[HEAVY, LIGHT], clock=clock, prediction=p)
    assert state.eta() == pytest.approx(total)  # from the first second, before any Ninja line
    clock.t += 100
    assert state.eta() == pytest.approx(total - 100)  # it moves while nothing finishes
    # a non-unit edge finishing early must not make the ETA small (it said 0:52 for a compile of 8:41)
    state.feed("[1/3] Building CUDA object CMakeFiles/flash_attn_kernels.dir/kernels/dispatch.cu.o")
    assert state.eta() == pytest.approx(total - 100)
    # past the heavy unit's predicted finish and it has not finished: the build is slower than predicted
    clock.t = 1000 + 1.5 * heavy_at
    assert state.eta() == pytest.approx(total * 1.5 - 1.5 * heavy_at)
    # it finishes then: the ETA is the rest of the schedule at the measured pace (x 1.5), not "one unit
    # of two done in this time, so as long again", which a unit count would say
    state.feed(OBJ.format(2, HEAVY))
    eta = state.eta()
    assert eta == pytest.approx(1.5 * (total - heavy_at))
    assert eta != pytest.approx(1.5 * heavy_at)
    status = state.status()
    assert "kernel units 1/2" in status and f"(predicted {progress.format_seconds(total)} in all)" in status


def test_summary_prints_predicted_against_actual():
    s = progress.summary([], 530.0)
    s["predicted_seconds"] = 490.0
    rows = dict(progress.summary_rows(s))
    assert rows["wall time"] == "8:50" and rows["predicted before the build (wall time)"] == "8:10"
    p = estimate.Prediction("x", 490.0, 1, 1, 2, 8.0, 1, 1.6, "assumed")
    assert estimate.compare(p, 530.0) == "predicted 8:10, actual 8:50 (+8 %)"


def test_a_long_build_offers_cheaper_commands(no_record, capsys):
    units = ks.resolve("dev")[1]
    step = estimate.kernels_step(units, 3, jobs=2)
    assert step.wall_seconds > estimate.LONG_SECONDS
    text = estimate.render([step], lambda: estimate.cheaper_commands("wheel", "legacy", "dev", len(units), [89]))
    assert "over 30 minutes" in text
    assert "nox -s wheel_legacy -- --kernel-set ci" in text
    assert "nox -s wheel_custom -- --cuda-archs 89" in text
    assert "nox -s archive_legacy -- --shard K/N" in text
    short = estimate.render([estimate.kernels_step(units[:1], 1, jobs=2)], lambda: pytest.fail("not asked"))
    assert "Cheaper" not in short and "calibrated" in short


def test_measured_builds_set_the_speed_factor(no_record):
    units = two_units()
    p = estimate.kernels_step(units, 1, False, jobs=1)
    summary = {"units_compiled": 2}
    path = estimate.record(p, p.wall_seconds * 1.25, summary)
    assert path == no_record / estimate.SPEED_FILE
    factor, source = estimate.speed_factor()
    assert factor == pytest.approx(p.speed_factor * 1.25, rel=1e-3) and source.startswith("measured")
    again = estimate.kernels_step(units, 1, False, jobs=1)
    assert again.wall_seconds == pytest.approx(p.wall_seconds * 1.25, rel=1e-3)
    # builds that do not measure the speed are not recorded: incremental, cached, too short
    assert estimate.record(p, 500.0, {"units_compiled": 1}) is None
    assert estimate.record(p, 500.0, {"units_compiled": 2, "compile_cache": {"hits": 2}}) is None
    assert estimate.record(p, 10.0, summary) is None
    assert len(json.loads(path.read_text())["builds"]) == 1


def test_a_damaged_speed_record_means_the_calibration(no_record):
    no_record.mkdir()
    (no_record / estimate.SPEED_FILE).write_text("{not json")
    assert estimate.speed_factor()[1].startswith("calibrated")


def test_plain_output_prints_a_line_at_least_once_a_minute(capsys):
    clock = Clock()
    state = progress.BuildProgress(units=[HEAVY], clock=clock)
    display = builder._Display(state, verbose=False, tick_seconds=60, clock=clock)  # stdout is no terminal here
    clock.t += 59
    display.tick()
    assert capsys.readouterr().out == ""
    clock.t += 1
    display.tick()
    assert capsys.readouterr().out.startswith("[flash_attn] kernel units 0/1, edges 0/0, elapsed 1:00")
    display.line("-- flash_attn: something")
    clock.t += 30
    display.tick()
    assert capsys.readouterr().out == "-- flash_attn: something\n"
    display.close()


def test_an_interrupt_names_what_the_build_folder_kept(tmp_path, capsys, monkeypatch):
    (tmp_path / "CMakeFiles").mkdir()
    (tmp_path / "CMakeFiles" / "fwd_hdim64_fp16.cu.o").write_bytes(b"\0")

    def interrupt(self, line):
        raise KeyboardInterrupt

    monkeypatch.setattr(progress.BuildProgress, "feed", interrupt)
    cmd = [__import__("sys").executable, "-c", "print('[1/3] x')"]
    with pytest.raises(KeyboardInterrupt):
        builder.run_streamed(cmd, tmp_path, what="the kernels build")
    err = capsys.readouterr().err
    assert f"kept {tmp_path} with 1 compiled object(s)" in err
    assert errors.run_main(lambda: (_ for _ in ()).throw(KeyboardInterrupt)) == errors.EXIT_INTERRUPTED
    assert "no partial output was kept" not in capsys.readouterr().err


def test_a_last_unit_running_past_its_estimate_says_so(no_record):
    p = estimate.kernels_step([ks.parse_unit(LIGHT)], sass=1, dispatch=False, jobs=1)
    clock = Clock()
    state = progress.BuildProgress(units=[LIGHT], clock=clock, prediction=p)
    clock.t += p.wall_seconds + 13
    assert state.eta() == 0
    assert "ETA past the estimate (predicted " in state.status()


def test_a_link_step_running_past_its_estimate_says_so(no_record):
    # the ci wheel's binding step on a loaded machine printed "ETA 0:00" for a minute with 1 of 9 edges left
    p = estimate.binding_step(jobs=2)
    clock = Clock()
    state = progress.BuildProgress(units=[], clock=clock, prediction=p, compiles_units=False)
    clock.t += p.wall_seconds + 60
    state.feed("[8/9] Linking CXX shared module _C_legacy.so")
    assert "ETA past the estimate (predicted " in state.status()
    state.feed("[9/9] Installing")
    assert "ETA 0:00 (predicted" in state.status()
