"""Fixtures of the runtime package tests (flash_attn/): build info dicts, and an emulated library
(CPU mock operators) for the API tests."""

from __future__ import annotations

import copy

import mock_ops  # beside this file (pytest puts a conftest's folder on sys.path)
import pytest
import torch

# the package under test is this checkout's flash_attn/ (the root is on pytest's pythonpath)
from flash_attn import _build_info, _checks, _compat, _loader, _ops

# head dim 256 is left out on purpose: the tests check the "not built" error with it
DEV_HEAD_DIMS = (32, 64, 96, 128, 192)

LEGACY_INFO = {
    "version": "2.8.3.post2",
    "group": "legacy",
    "archs": [80, 89, 90],
    "sass": ["sm_80", "sm_89", "sm_90"],
    "ptx_arch": 90,
    "cuda_version": "13.0.88",
    "torch_version": "2.14.1+cu130",
    "torch_cuda_version": "13.0",
    "cxx11_abi": True,
    "kernel_set": "dev",
    "kernels": [
        {"kind": kind, "dtype": dtype, "head_dim": hd, "causal": causal}
        for kind in ("fwd", "fwd_split", "bwd")
        for dtype in ("fp16", "bf16")
        for hd in DEV_HEAD_DIMS
        for causal in (False, True)
    ],
    "deltas": {"applied": True, "rescale_threshold": 8.0, "packed_fma": True},
    "upstream": {"version": "2.8.3.post2", "sha256": "d0f9f0b0", "source": "sdist"},
    "compilers": {"cxx": "GNU 12.2.0", "cuda": "NVIDIA 13.0.88"},
    "fatbin_compression": "size",
    "head_dims": [32, 64, 96, 128, 192, 256],
    "arch_groups": {"blackwell": ["sm_100f", "sm_120f", "sm_121"], "legacy": ["sm_80", "sm_89", "sm_90"]},
    "min_arch": 80,
}

BLACKWELL_INFO = {
    **copy.deepcopy(LEGACY_INFO),
    "group": "blackwell",
    "archs": [100, 120, 121],
    "sass": ["sm_100", "sm_120", "sm_121"],
    "ptx_arch": 121,
}


def make_info(base: dict = LEGACY_INFO, **overrides) -> dict:
    info = copy.deepcopy(base)
    info.update(overrides)
    return info


@pytest.fixture
def legacy_info() -> dict:
    return make_info()


@pytest.fixture
def blackwell_info() -> dict:
    return make_info(BLACKWELL_INFO)


@pytest.fixture
def emulated(monkeypatch):
    """The public API running on CPU: mock operators with docs/operators.md schemas, fakes registered.

    The loader state says "ready" with LEGACY_INFO (head dims 32..192), the CPU is the kernels'
    device type for ``_checks.require_device`` and device -1 (CPU tensors) has a positive
    capability verdict, so the once-per-device admission runs as it does on a GPU.
    """
    namespace = mock_ops.define()
    info = _build_info.parse(make_info())
    binding = _ops.bind(namespace)
    state = _loader.STATE
    monkeypatch.setattr(state, "status", "ready")
    monkeypatch.setattr(state, "error", None)
    monkeypatch.setattr(state, "build_info", info)
    monkeypatch.setattr(state, "kernels", _build_info.kernel_set(info))
    monkeypatch.setitem(_loader._DEVICE_VERDICTS, -1, _compat.DeviceVerdict(True, "sass", "sm_90", "emulated"))
    monkeypatch.setattr(_checks, "KERNEL_DEVICE_TYPE", "cpu")
    _checks.reset()
    mock_ops.CALLS.clear()
    torch._dynamo.reset()
    yield info
    torch._dynamo.reset()
    _checks.reset()
    binding.close()


@pytest.fixture(scope="module")
def release_paths():
    """tools/release_paths.py, imported under its script name (tools/ is on pytest's pythonpath)."""
    import release_paths

    return release_paths
