"""--torch-abi stable through the wheel session (build replaced by a fake), and the smoke test's torch range."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
from release_fakes import build_info, make_wheel

from release.compile import builder, options, tagging
from release.compile.toolchain import Toolchain
from release.errors import ReleaseError
from release.sessions import wheels
from release.ship import smoke

GOOD = Toolchain("/usr/bin/nvcc", "13.0.88", sys.executable, "2.14.1+cu130", "13.0", True, "gcc", "12.2.0", "c++")
OLD_TORCH = Toolchain("/usr/bin/nvcc", "13.0.88", sys.executable, "2.10.0+cu130", "13.0", True, "gcc", "12.2.0", "c++")
STABLE = {"torch_abi": "stable", "torch_min": options.TORCH_MIN}
FULL = f"2.8.3.post2+cu130torchstable{options.TORCH_MIN}.legacy.rev1.ci"


def opts(tmp_path, **passthrough):
    return options.BuildOptions(
        group="legacy",
        kernel_set="ci",
        out_dir=tmp_path / "out",
        build_root=tmp_path / "build",
        passthrough=passthrough,
    )


def _summary():
    return {"edges_run": 0, "units_compiled": 0, "unit_names": [], "wall_seconds": 1.0, "unit_cpu_seconds": 0.0,
            "slowest_units": [], "peak_rss_bytes": None, "sizes": {}}  # fmt: skip


@pytest.fixture
def fake_build(monkeypatch):
    """A build whose wheel's build info is `fields` (default: the stable ABI the session asked for)."""
    calls, fields = [], dict(STABLE)

    def run_build(build_dir, defines, outdir, python=None, verbose=False, nvcc=None, prediction=None):
        calls.append((Path(build_dir), defines))
        info = build_info("legacy", kernel_set="ci", **fields)
        wheel = make_wheel(Path(outdir), info=info, metadata_tail="Requires-Dist: torch\n")
        return builder.BuildResult(wheel=wheel, summary=_summary(), log=Path(build_dir) / "log")

    monkeypatch.setattr(builder, "run_build", run_build)
    monkeypatch.setattr(smoke, "smoke_test", lambda w, g, deps=True: None)
    return calls, fields


def test_option_reaches_cmake_and_defaults_to_exact():
    assert options.BuildOptions(group="legacy").cmake_defines()["FLASH_ATTN_TORCH_ABI"] == "exact"
    p = argparse.ArgumentParser()
    options.add_arguments(p)
    ns = p.parse_args(["--torch-abi", "stable"])
    ns.group = "legacy"
    got = options.from_namespace(ns, {})
    assert got.cmake_defines()["FLASH_ATTN_TORCH_ABI"] == "stable" and got.stable_torch_min() == options.TORCH_MIN
    ns = p.parse_args([])
    ns.group = "legacy"
    assert options.from_namespace(ns, {"FLASH_ATTN_TORCH_ABI": "stable"}).torch_abi() == "stable"  # the variable
    assert options.from_namespace(ns, {}).stable_torch_min() is None


def test_unknown_torch_abi_is_refused(tmp_path):
    with pytest.raises(ReleaseError, match="FLASH_ATTN_TORCH_ABI=.stabel. .--torch-abi. is not one of exact, stable"):
        opts(tmp_path, FLASH_ATTN_TORCH_ABI="stabel").validate()


def test_stable_session_builds_tags_and_requires_the_torch_range(tmp_path, fake_build):
    calls, _ = fake_build
    final = wheels.build_group(opts(tmp_path, FLASH_ATTN_TORCH_ABI="stable"), probe=lambda: GOOD)
    assert final.name == f"flash_attn-{FULL}-cp310-abi3-linux_x86_64.whl"
    assert tagging.metadata_torch_requirements(final) == [f"torch>={options.TORCH_MIN}"]
    ((build_dir, defines),) = calls
    assert defines["FLASH_ATTN_TORCH_ABI"] == "stable"
    assert build_dir.name == f"legacy-ci-torch2.14.1-stable{options.TORCH_MIN}-cu130-gcc12"  # not the exact one's


def test_a_build_that_ignored_the_option_is_refused(tmp_path, fake_build):
    _, fields = fake_build
    fields.clear()  # the build info has no torch_abi: an exact binding (the CMake side did not take the option)
    with pytest.raises(ReleaseError, match=r"FLASH_ATTN_TORCH_ABI \(--torch-abi\): asked 'stable', .* says 'exact'"):
        wheels.build_group(opts(tmp_path, FLASH_ATTN_TORCH_ABI="stable"), probe=lambda: GOOD)
    assert not (tmp_path / "out").exists()


def test_exact_session_accepts_an_older_build_info_without_the_fields(tmp_path, fake_build):
    _, fields = fake_build
    fields.clear()
    final = wheels.build_group(opts(tmp_path), probe=lambda: GOOD)
    assert "torchstable" not in final.name and tagging.metadata_torch_requirements(final) == ["torch==2.14.1"]


def test_stable_build_against_a_torch_below_the_minimum_is_refused(tmp_path, fake_build):
    calls, _ = fake_build
    with pytest.raises(ReleaseError, match=f"needs a torch >= {options.TORCH_MIN} to build against; found torch 2.10"):
        wheels.build_group(opts(tmp_path, FLASH_ATTN_TORCH_ABI="stable"), probe=lambda: OLD_TORCH)
    assert calls == [] and not (tmp_path / "build").exists()


@pytest.mark.parametrize(
    ("fields", "found", "ok"),
    [
        (STABLE, "2.15.0+cu130", True),  # a stable wheel keeps any torch in its range
        (STABLE, f"{options.TORCH_MIN}.0", True),
        (STABLE, "2.10.0+cu130", False),
        ({}, "2.14.1+cu130", True),  # an exact wheel wants its own torch
        ({}, "2.15.0+cu130", False),
    ],
)
def test_smoke_venv_torch_in_range(fields, found, ok):
    info = build_info(**fields)
    assert smoke.torch_fits(info, found) is ok
    assert smoke.torch_fits(info, None) is False


def test_smoke_torch_outside_the_wheel_range_is_refused(tmp_path):
    wheel = tagging.retag(make_wheel(tmp_path / "raw", info=build_info(**STABLE)), tmp_path / "out")
    with pytest.raises(ReleaseError, match=f"serves torch >= {options.TORCH_MIN}; --torch 2.10.0 is outside it"):
        smoke.smoke_test(wheel, torch="2.10.0")
