"""The wheel session flow with the build replaced by a fake one, and the streaming build runner."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest
from release_fakes import build_info, make_wheel

from release import checksums
from release.compile import builder, options, tagging
from release.compile.toolchain import Toolchain
from release.errors import ReleaseError
from release.sessions import wheels
from release.ship import smoke

GOOD = Toolchain("/usr/bin/nvcc", "13.0.88", sys.executable, "2.14.1+cu130", "13.0", True, "gcc", "12.2.0", "c++")
FULL = "2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1.ci"


def built(outdir: Path, group: str = "legacy", **kw) -> Path:
    """The wheel a build of opts() writes: its build info names the ci kernel set it was asked for."""
    return make_wheel(outdir, group=group, info=build_info(group, kernel_set="ci"), **kw)


def opts(tmp_path, **kw):
    return options.BuildOptions(
        group="legacy", kernel_set="ci", out_dir=tmp_path / "out", build_root=tmp_path / "build", **kw
    )


@pytest.fixture
def fake_build(monkeypatch):
    calls = []

    def run_build(build_dir, defines, outdir, python=None, verbose=False, nvcc=None, prediction=None):
        calls.append((Path(build_dir), defines))
        wheel = built(Path(outdir))
        return builder.BuildResult(wheel=wheel, summary=_summary(), log=Path(build_dir) / "log")

    monkeypatch.setattr(builder, "run_build", run_build)
    return calls


def _summary():
    return {"edges_run": 0, "units_compiled": 0, "unit_names": [], "wall_seconds": 1.0, "unit_cpu_seconds": 0.0,
            "slowest_units": [], "peak_rss_bytes": None, "sizes": {}}  # fmt: skip


def test_flow_tags_checksums_and_publishes(tmp_path, fake_build, monkeypatch):
    smoked = []
    monkeypatch.setattr(smoke, "smoke_test", lambda w, g, deps=True: smoked.append((Path(w).name, g)))
    final = wheels.build_group(opts(tmp_path), probe=lambda: GOOD)
    assert final == tmp_path / "out" / f"flash_attn-{FULL}-cp310-abi3-linux_x86_64.whl"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [final.name, final.name + ".sha256"]
    assert checksums.verify_sha256sums(final.with_name(final.name + ".sha256")) == [final.name]
    tagging.verify_wheel(final)
    assert smoked == [(final.name, "legacy")]  # the tagged wheel was smoke-tested before publishing
    ((build_dir, defines),) = fake_build
    assert build_dir == tmp_path / "build" / "legacy-ci-torch2.14.1-cu130-gcc12"
    assert defines["FLASH_ATTN_ARCH_GROUP"] == "legacy" and defines["FLASH_ATTN_KERNEL_SET"] == "ci"
    assert [p.name for p in (tmp_path / "build").iterdir()] == []  # staging removed


def test_failed_smoke_test_leaves_out_dir_untouched(tmp_path, fake_build, monkeypatch):
    def bad_smoke(*a, **k):
        raise ReleaseError("smoke test failed: import flash_attn")

    monkeypatch.setattr(smoke, "smoke_test", bad_smoke)
    (tmp_path / "out").mkdir()
    with pytest.raises(ReleaseError, match="smoke test failed"):
        wheels.build_group(opts(tmp_path), probe=lambda: GOOD)
    assert list((tmp_path / "out").iterdir()) == []
    assert list((tmp_path / "build").iterdir()) == []


def test_wrong_group_from_the_build_is_refused(tmp_path, monkeypatch):
    def run_build(build_dir, defines, outdir, **k):
        return builder.BuildResult(built(Path(outdir), group="blackwell"), _summary(), Path("log"))

    monkeypatch.setattr(builder, "run_build", run_build)
    with pytest.raises(
        ReleaseError, match="FLASH_ATTN_ARCH_GROUP .--arch-group.: asked .legacy., the build info says .blackwell."
    ):
        wheels.build_group(opts(tmp_path), probe=lambda: GOOD)
    assert not (tmp_path / "out").exists()


def test_no_smoke_still_checks_contents(tmp_path, monkeypatch):
    def run_build(build_dir, defines, outdir, **k):
        return builder.BuildResult(built(Path(outdir), libs=["legacy", "blackwell"]), _summary(), Path("log"))

    monkeypatch.setattr(builder, "run_build", run_build)
    with pytest.raises(ReleaseError, match="expected exactly _C_legacy"):
        wheels.build_group(opts(tmp_path, smoke=False), probe=lambda: GOOD)
    assert not (tmp_path / "out").exists()


# -- the streaming runner, with a fake `python -m build` ----------------------------------------

FAKE_BUILD = textwrap.dedent(
    """
    import os, sys, time, json
    args = sys.argv[1:]
    outdir = args[args.index("--outdir") + 1]
    build_dir = [a.split("=", 1)[1] for a in args if a.startswith("-Cbuild-dir=")][0]
    os.makedirs(os.path.join(build_dir, "kernels"), exist_ok=True)
    units = ["bwd_hdim64_fp16", "fwd_hdim64_fp16"]
    with open(os.path.join(build_dir, "kernels", "units.txt"), "w") as f:
        f.write("".join(f"{build_dir}/kernels/units/{u}.cu\\n" for u in units))
    print("-- flash_attn: 1 parallel compile jobs (set by FLASH_ATTN_JOBS)")
    print("some noise that is not shown")
    log = os.path.join(build_dir, ".ninja_log")
    new = not os.path.exists(log)
    with open(log, "a") as f:
        if new:
            f.write("# ninja log v7\\n")
        for i, u in enumerate(units if os.environ.get("FAKE_WORK", "1") == "1" else []):
            print(f"[{i + 1}/3] Building CUDA object CMakeFiles/flash_attn_native.dir/kernels/units/{u}.cu.o")
            f.write(f"0\\t{(i + 1) * 1000}\\t1\\tCMakeFiles/flash_attn_native.dir/kernels/units/{u}.cu.o\\th\\n")
    if os.environ.get("FAKE_FAIL"):
        print("FAILED: CMakeFiles/flash_attn_native.dir/src/binding/fwd.cpp.o")
        print("fwd.cpp:1: error: boom")
        sys.exit(1)
    print("[3/3] Linking CUDA shared module _C_legacy.so")
    from release_fakes import make_wheel  # tests/, on PYTHONPATH (the fake interpreter sets it)
    make_wheel(__import__("pathlib").Path(outdir))
    """
)


@pytest.fixture
def fake_python(tmp_path, monkeypatch):
    script = tmp_path / "fake_build.py"
    script.write_text(FAKE_BUILD)
    exe = tmp_path / "fakepython"
    fakes = Path(__file__).parents[2]  # tests/release_fakes.py
    exe.write_text(
        f'#!/bin/sh\nshift 2\nPYTHONPATH="{fakes}" exec "{sys.executable}" "{script}" "$@"\n'
    )  # drops "-m build"
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


@pytest.mark.skipif(os.name == "nt", reason="uses a POSIX shell script as the fake interpreter")
def test_run_build_streams_progress_and_summarises(tmp_path, fake_python, capsys):
    bdir = tmp_path / "build" / "key"
    result = builder.run_build(bdir, {"FLASH_ATTN_JOBS": "1"}, tmp_path / "raw", python=fake_python)
    out = capsys.readouterr().out
    assert "-- flash_attn: 1 parallel compile jobs" in out
    assert "some noise" not in out
    assert "[flash_attn] kernel units 1/2, edges 1/3" in out and "kernel units 2/2, edges 2/3" in out
    assert result.summary["units_compiled"] == 2
    assert result.summary["slowest_units"][0] == {"unit": "fwd_hdim64_fp16", "seconds": 2.0}
    assert json.loads((bdir / builder.SUMMARY_NAME).read_text())["units_compiled"] == 2
    assert "some noise" in (bdir / builder.LOG_NAME).read_text()  # everything goes to the log
    assert result.wheel.name.endswith(".whl")

    # a second build with nothing to do: the summary counts only this run's .ninja_log entries
    os.environ["FAKE_WORK"] = "0"
    try:
        again = builder.run_build(bdir, {}, tmp_path / "raw2", python=fake_python)
    finally:
        del os.environ["FAKE_WORK"]
    assert again.summary["units_compiled"] == 0


@pytest.mark.skipif(os.name == "nt", reason="uses a POSIX shell script as the fake interpreter")
def test_run_build_failure_shows_its_error_once_and_the_log(tmp_path, fake_python, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_FAIL", "1")
    with pytest.raises(ReleaseError) as e:
        builder.run_build(tmp_path / "b", {}, tmp_path / "raw", python=fake_python)
    shown = capsys.readouterr().out
    assert shown.count("fwd.cpp:1: error: boom") == 1  # shown as it came ...
    assert "the build failed (exit 1)" in str(e.value) and "boom" not in str(e.value)  # ... and not again
    assert str(tmp_path / "b" / builder.LOG_NAME) in str(e.value)
    assert not (tmp_path / "raw").exists() or not list((tmp_path / "raw").glob("*.whl"))


def test_build_command():
    cmd = builder.build_command("py", Path("/src"), Path("/b/k"), Path("/o"), {"FLASH_ATTN_ARCH_GROUP": "legacy"})
    assert cmd == ["py", "-m", "build", "--wheel", "--no-isolation", "--outdir", "/o", "-Cbuild-dir=/b/k",
                   "-Ccmake.define.FLASH_ATTN_ARCH_GROUP=legacy", "/src"]  # fmt: skip
    assert builder.build_env({})["NINJA_STATUS"] == "[%f/%t] "


def test_the_build_gets_the_cache_folder_the_session_resolved():
    """CMake downloads the sdist into the folder release.compile.options checked (its rule, not CMake's copy)."""
    env = {"XDG_CACHE_HOME": "/xdg"} if os.name != "nt" else {"LOCALAPPDATA": "C:/local"}
    assert builder.build_env(env)["FLASH_ATTN_CACHE_DIR"] == str(options.sdist_cache_dir(env))
    assert builder.build_env({"FLASH_ATTN_CACHE_DIR": "/mine"})["FLASH_ATTN_CACHE_DIR"] == str(Path("/mine"))


@pytest.mark.skipif(os.name == "nt", reason="uses a POSIX shell script as the fake interpreter")
def test_a_kernels_link_counts_no_kernel_units(tmp_path, fake_python, monkeypatch, capsys):
    # issue 28: a --kernels link (FLASH_ATTN_KERNELS) compiles no unit, yet its build folder lists the
    # set's units (kernels/units.txt), and the progress said "kernel units 0/1" throughout.
    monkeypatch.setenv("FAKE_WORK", "0")
    defines = {"FLASH_ATTN_KERNELS": str(tmp_path / "archive")}
    builder.run_build(tmp_path / "b", defines, tmp_path / "raw", python=fake_python)
    out = capsys.readouterr().out
    assert "[flash_attn] edges 3/3" in out
    assert "kernel units" not in out
