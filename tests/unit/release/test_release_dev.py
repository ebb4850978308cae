"""``nox -s dev`` builds for this machine: which arch group, SMs and kernel set it chooses (release.sessions.dev)."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from release.compile import builder, estimate
from release.compile.toolchain import Toolchain
from release.sessions import dev

TC = Toolchain("/usr/bin/nvcc", "13.0.88", sys.executable, "2.14.1+cu130", "13.0", True, "gcc", "12.2.0", "c++")
NAMES = ("FLASH_ATTN_ARCH_GROUP", "FLASH_ATTN_CUDA_ARCHS", "FLASH_ATTN_KERNEL_SET", "FLASH_ATTN_JOBS")


@pytest.fixture
def built(monkeypatch, tmp_path):
    """Run dev.main without building: returns the CMake defines of the editable install it would run."""
    defines: dict[str, str] = {}

    def run_streamed(cmd, build_dir, verbose=False, **kwargs):
        prefix = "-Ccmake.define."
        defines.update(a[len(prefix) :].split("=", 1) for a in cmd if a.startswith(prefix))
        defines["build_dir"] = str(build_dir)
        defines["command"] = cmd
        # what a configure leaves: the cache naming its CMake (release.compile.editable.configured_cmake)
        (build_dir / "CMakeCache.txt").write_text(f"CMAKE_COMMAND:INTERNAL={sys.executable}\n")
        return 1.0, frozenset()

    monkeypatch.setattr(builder, "run_streamed", run_streamed)
    monkeypatch.setattr(dev, "site_packages", lambda python: tmp_path)
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FLASH_ATTN_CACHE_DIR", str(tmp_path / "cache"))  # no recorded speed
    monkeypatch.chdir(tmp_path)
    return defines


def run(built, argv, gpus):
    assert dev.main(argv + ["--build-root", "b"], probe=lambda: TC, visible=lambda: gpus) == 0
    return built["FLASH_ATTN_ARCH_GROUP"], built["FLASH_ATTN_CUDA_ARCHS"], built["FLASH_ATTN_KERNEL_SET"]


def test_without_a_gpu_it_builds_the_ci_set_for_one_sm(built, capsys):
    assert run(built, [], []) == ("custom", "80", "ci")
    out = capsys.readouterr().out
    assert "no CUDA device is visible" in out and "--kernel-set dev" in out  # how to ask for more
    assert "release: predicted cost on this machine:" in out
    assert "Cheaper" not in out  # minutes, not over 30


def test_with_gpus_it_builds_their_sms(built, capsys, monkeypatch):
    monkeypatch.setattr(dev, "dev_seconds", lambda kernel_set, sass: 600.0)  # a big machine: dev fits
    assert run(built, [], [90, 86, 90]) == ("custom", "86;90", "dev")
    assert "the GPU(s) of this machine: sm_86, sm_90" in capsys.readouterr().out


def test_with_a_gpu_on_a_small_machine_it_does_not_start_a_long_build(built, capsys):
    # 2 cores: the dev set for one SM is predicted well over 30 minutes here, so ci, and it says so
    assert dev.dev_seconds("dev", 1) > estimate.LONG_SECONDS or pytest.skip("a machine fast enough for dev")
    assert run(built, [], [89]) == ("custom", "89", "ci")
    assert "ask for it with --kernel-set dev" in capsys.readouterr().out


def test_arch_group_and_kernel_set_still_override(built):
    assert run(built, ["--arch-group", "legacy"], [89]) == ("legacy", "", "dev")
    assert run(built, ["--kernel-set", "fwd_hdim64_*"], []) == ("custom", "80", "fwd_hdim64_*")
    assert run(built, ["--kernel-set", "dev"], [89]) == ("custom", "89", "dev")
    assert run(built, ["--cuda-archs", "120"], []) == ("custom", "120", "dev")


def test_sms_below_the_minimum_are_not_built():
    assert dev.choose(None, None, None, [75]).cuda_archs == "80"  # a Turing card: as no usable GPU
    assert dev.choose(None, None, None, None).kernel_set == "ci"  # torch could not tell


def test_visible_sms_can_be_faked():
    assert estimate.visible_sms({"FLASH_ATTN_VISIBLE_SMS": "90,86"}) == [86, 90]
    assert estimate.visible_sms({"FLASH_ATTN_VISIBLE_SMS": "none"}) == []


def test_dev_prepares_as_the_wheel_sessions_do(built, capsys):
    """release.compile.prepare: a stable-ABI editable build against a torch older than the minimum it serves
    is refused before anything builds, with the wheel sessions' message."""
    old = dataclasses.replace(TC, torch_version="2.9.1+cu130")
    argv = ["--arch-group", "legacy", "--kernel-set", "ci", "--torch-abi", "stable", "--build-root", "b"]
    assert dev.main(argv, probe=lambda: old, visible=lambda: []) == 2
    assert "--torch-abi stable builds the wheel for every torch >=" in capsys.readouterr().err
    assert "build_dir" not in built


def test_one_precedence_rule_in_every_entry_point(built, monkeypatch, capsys):
    # options.pick / options.group_of, used by release.sessions.wheels (and release.archive.archives through
    # it) and dev: a flag wins over its variable; the arch group variable is the group without a flag and refused,
    # not overridden, when it disagrees with the flag.
    from release.errors import ReleaseError
    from release.sessions import wheels

    env = {"FLASH_ATTN_KERNEL_SET": "ci", "FLASH_ATTN_ARCH_GROUP": "blackwell"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert wheels.parse(["--arch-group", "blackwell", "--kernel-set", "dev"], env).kernel_set == "dev"
    assert run(built, ["--kernel-set", "dev"], [89]) == ("blackwell", "", "dev")  # the variable's group
    assert run(built, ["--arch-group", "blackwell"], [89]) == ("blackwell", "", "ci")  # the variable's set
    with pytest.raises(ReleaseError, match="ARCH_GROUP=blackwell is set, but this session builds the legacy"):
        wheels.parse(["--arch-group", "legacy"], env)
    capsys.readouterr()
    assert dev.main(["--arch-group", "legacy", "--build-root", "b"], probe=lambda: TC, visible=lambda: [89]) == 2
    err = capsys.readouterr().err
    assert "FLASH_ATTN_ARCH_GROUP=blackwell is set, but --arch-group asks for the legacy group" in err, err
    assert "pass --arch-group blackwell" in err
