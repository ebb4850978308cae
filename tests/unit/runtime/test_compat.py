"""Loader decisions: which GPUs a build runs on, which torch it loads with, and what the errors say."""

from __future__ import annotations

import pytest

from flash_attn import _build_info as bi
from flash_attn import _compat

LEGACY_LABEL = "2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1"


@pytest.mark.parametrize(
    ("capability", "target", "native"),
    [
        ((8, 0), "sm_80", True),
        ((8, 6), "sm_80", False),  # RTX 30xx / A10 run the sm_80 SASS
        ((8, 7), "sm_80", False),  # Orin
        ((8, 9), "sm_89", True),
        ((9, 0), "sm_90", True),
    ],
)
def test_legacy_runs_sass_on_ampere_ada_hopper(legacy_info, capability, target, native):
    verdict = _compat.check_device(legacy_info, capability, "GPU X", device_index=0)
    assert verdict.ok and verdict.route == "sass" and verdict.target == target
    assert ("native" in verdict.message) == native


@pytest.mark.parametrize(
    ("capability", "name"),
    [
        ((10, 0), "NVIDIA B200"),
        ((10, 3), "NVIDIA B300"),
        ((12, 0), "NVIDIA GeForce RTX 5090"),
        ((12, 1), "NVIDIA GB10"),
    ],
)
def test_legacy_on_blackwell_names_the_blackwell_wheel(legacy_info, capability, name):
    verdict = _compat.check_device(legacy_info, capability, name, device_index=1, dist_version=LEGACY_LABEL)
    assert not verdict.ok and verdict.route == "none" and verdict.suggested_group == "blackwell"
    message = verdict.message
    sm = f"sm_{capability[0]}{capability[1]}"
    for expected in (name, f"{capability[0]}.{capability[1]}", sm, "GPU 1", "'legacy'", ".blackwell"):
        assert expected in message, (expected, message)
    assert "flash_attn==2.8.3.post2+cu130torch2.14.1cxx11abitrue.blackwell.rev1" in message


@pytest.mark.parametrize("capability", [(8, 0), (8, 6), (8, 9), (9, 0)])
def test_blackwell_on_older_gpus_names_the_legacy_wheel(blackwell_info, capability):
    verdict = _compat.check_device(blackwell_info, capability, "NVIDIA A100-SXM4-80GB")
    assert not verdict.ok and verdict.suggested_group == "legacy"
    assert ".legacy" in verdict.message and "'blackwell'" in verdict.message
    assert "NVIDIA A100-SXM4-80GB" in verdict.message
    # without an installed distribution the requirement is built from the build info
    assert "flash_attn==2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1" in verdict.message


@pytest.mark.parametrize(
    ("capability", "target"), [((10, 0), "sm_100"), ((10, 3), "sm_100"), ((12, 0), "sm_120"), ((12, 1), "sm_121")]
)
def test_blackwell_runs_its_sass(blackwell_info, capability, target):
    verdict = _compat.check_device(blackwell_info, capability, "gpu")
    assert verdict.ok and verdict.route == "sass" and verdict.target == target


def test_ptx_serves_gpus_newer_than_every_group(legacy_info, blackwell_info):
    future = (13, 0)
    verdict = _compat.check_device(blackwell_info, future, "future GPU")
    assert verdict.ok and verdict.route == "ptx" and verdict.target == "compute_121"
    assert "JIT" in verdict.message
    verdict = _compat.check_device(legacy_info, future, "future GPU")
    assert verdict.ok and verdict.route == "ptx" and verdict.target == "compute_90"


def test_ptx_never_runs_on_older_gpus(blackwell_info):
    # Thor (sm_110): no group has SASS for it, and compute_121 PTX cannot target an older GPU
    verdict = _compat.check_device(blackwell_info, (11, 0), "NVIDIA Thor")
    assert not verdict.ok and verdict.suggested_group is None
    assert "sm_110" in verdict.message and "no arch group" in verdict.message


def test_without_ptx_a_new_gpu_is_refused(legacy_info):
    legacy_info["ptx_arch"] = None
    verdict = _compat.check_device(legacy_info, (13, 0), "future GPU")
    assert not verdict.ok and "sm_130" in verdict.message


@pytest.mark.parametrize("capability", [(7, 5), (7, 0), (6, 1)])
def test_pre_ampere_gpus_are_refused(legacy_info, capability):
    verdict = _compat.check_device(legacy_info, capability, "Tesla T4")
    assert not verdict.ok and verdict.suggested_group is None
    assert "8.0" in verdict.message and "Ampere" in verdict.message and "Tesla T4" in verdict.message


def test_custom_group_uses_same_major_rule_and_points_to_official_wheels(legacy_info):
    custom = dict(legacy_info, group="custom", sass=["sm_86"], ptx_arch=86, archs=[86])
    assert _compat.check_device(custom, (8, 9), "RTX 4090").target == "sm_86"
    verdict = _compat.check_device(custom, (8, 0), "A100")  # sm_86 SASS cannot run on 8.0
    assert not verdict.ok and verdict.suggested_group == "legacy"
    assert "cxx11abitrue.legacy.rev1" in verdict.message


def test_sass_variants(legacy_info):
    assert _compat.sass_runs_on(bi.SassTarget(9, 0, "a"), (9, 0))
    assert not _compat.sass_runs_on(bi.SassTarget(9, 0, "a"), (9, 1))
    assert _compat.sass_runs_on(bi.SassTarget(10, 0, "f"), (10, 3))
    assert not _compat.sass_runs_on(bi.SassTarget(10, 0, ""), (12, 0))
    assert not _compat.sass_runs_on(bi.SassTarget(8, 9, ""), (8, 6))
    assert _compat.group_for_capability(legacy_info, (8, 6)) == "legacy"
    assert _compat.group_for_capability(legacy_info, (12, 1)) == "blackwell"
    assert _compat.group_for_capability(legacy_info, (11, 0)) is None
    assert _compat.group_for_capability(legacy_info, (7, 5)) is None
    assert _compat.group_for_capability({}, (8, 6)) is None  # a build info without arch_groups


def test_wheel_name_swaps_only_the_group():
    info = {
        "version": "2.8.3.post2",
        "group": "legacy",
        "torch_version": "2.13.0+cu132",
        "cuda_version": "13.2.1",
        "cxx11_abi": False,
    }
    assert (
        _compat.wheel_name(info, "blackwell") == "flash_attn==2.8.3.post2+cu132torch2.13.0cxx11abifalse.blackwell.rev1"
    )
    assert (
        _compat.wheel_name(info, "blackwell", "2.8.3.post2+cu130torch2.13.0cxx11abifalse.legacy.rev1")
        == "flash_attn==2.8.3.post2+cu130torch2.13.0cxx11abifalse.blackwell.rev1"
    )


# --- torch checks -------------------------------------------------------------------------------


def test_matching_torch_passes(legacy_info):
    assert _compat.check_torch(legacy_info, "2.14.1+cu130", "13.0", True) is None
    # another CUDA minor of the same torch release keeps the ABI
    assert _compat.check_torch(legacy_info, "2.14.1+cu132", "13.2", True) is None
    # ABI unknown: not compared
    assert _compat.check_torch(legacy_info, "2.14.1+cu130", "13.0", None) is None


def test_other_torch_release_names_both_versions(legacy_info):
    message = _compat.check_torch(legacy_info, "2.13.0+cu130", "13.0", True, dist_version=LEGACY_LABEL)
    assert message is not None
    assert "2.14.1+cu130" in message and "2.13.0+cu130" in message and LEGACY_LABEL in message
    assert "pip install torch==2.14.1 --index-url https://download.pytorch.org/whl/cu130" in message
    assert "cu130torch2.13.0" in message  # the wheel label to look for instead


def test_other_cuda_major_is_refused(legacy_info):
    message = _compat.check_torch(legacy_info, "2.14.1+cu128", "12.8", True)
    assert message is not None
    assert "CUDA 12.8" in message and "CUDA 13.0" in message and "major" in message


def test_cpu_only_torch_is_refused(legacy_info):
    message = _compat.check_torch(legacy_info, "2.14.1+cpu", None, True)
    assert message is not None and "no CUDA support" in message


def test_cxx11_abi_mismatch_is_refused(legacy_info):
    message = _compat.check_torch(legacy_info, "2.14.1+cu130", "13.0", False)
    assert message is not None and "ABI" in message


def test_nightly_is_not_the_release(legacy_info):
    assert _compat.check_torch(legacy_info, "2.14.1.dev20261101+cu130", "13.0", True) is not None


# --- stable-ABI builds: a torch range instead of one torch ----------------------------------------

STABLE_LABEL = "2.8.3.post2+cu130torchstable2.11.legacy.rev1.dev"


@pytest.fixture
def stable_info(legacy_info):
    return {**legacy_info, "torch_abi": "stable", "torch_min": "2.11"}


@pytest.mark.parametrize(
    "version", ["2.11.0+cu130", "2.14.1+cu130", "2.15.0+cu132", "2.16.0.dev20270101+cu130", "3.0.0"]
)
def test_stable_build_loads_in_every_torch_from_its_minimum(stable_info, version):
    cuda = "13.2" if "cu132" in version else "13.0"
    assert _compat.check_torch(stable_info, version, cuda, False) is None  # no C++11 ABI comparison either


def test_stable_build_refuses_an_older_torch_with_what_to_install(stable_info):
    message = _compat.check_torch(stable_info, "2.10.0+cu130", "13.0", True, dist_version=STABLE_LABEL)
    assert message is not None
    assert STABLE_LABEL in message and "stable-ABI build for torch >= 2.11" in message
    assert "torch 2.10.0 is older than 2.11" in message
    assert "pip install 'torch>=2.11' --index-url https://download.pytorch.org/whl/cu130" in message
    assert "cu130torch2.10.0" in message  # the per-torch wheel to look for instead
    assert _compat.check_torch(stable_info, "2.11.0a0+git1234", "13.0", True) is None  # a 2.11 pre-release


def test_stable_build_refuses_another_cuda_major_or_a_cpu_torch(stable_info):
    message = _compat.check_torch(stable_info, "2.14.1+cu128", "12.8", True)
    assert message is not None and "CUDA 12.8 has another major than CUDA 13.0" in message
    message = _compat.check_torch(stable_info, "2.14.1+cpu", None, True)
    assert message is not None and "no CUDA support" in message


def test_a_build_info_without_torch_abi_keeps_the_exact_check(legacy_info):
    assert "torch_abi" not in legacy_info
    assert _compat.check_torch(legacy_info, "2.15.0+cu130", "13.0", True) is not None
    assert _compat.check_torch({**legacy_info, "torch_abi": None}, "2.15.0+cu130", "13.0", True) is not None


def test_release_tuple():
    assert _compat.release_tuple("2.14.1+cu130") == (2, 14, 1)
    assert _compat.release_tuple("2.16.0.dev20270101") == (2, 16, 0)
    assert _compat.release_tuple("2.11.0a0+git") == (2, 11, 0)
    assert _compat.release_tuple("2.11") < _compat.release_tuple("2.11.0")
    assert _compat.release_tuple("2.9.1") < _compat.release_tuple("2.11")


def test_stable_wheel_name_keeps_the_stable_label(stable_info):
    assert (
        _compat.wheel_name(stable_info, "blackwell")
        == "flash_attn==2.8.3.post2+cu130torchstable2.11.blackwell.rev1.dev"
    )
