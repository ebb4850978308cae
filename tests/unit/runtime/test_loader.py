"""The loader: finding the library, refusing a mismatched torch before loading, load errors, GPU checks."""

from __future__ import annotations

import json
import re
import warnings

import mock_ops
import pytest
import torch

from flash_attn import (
    LibraryLoadError,
    LibraryNotBuiltError,
    TorchMismatchError,
    UnsupportedGPUError,
    _loader,
    _ops,
)


@pytest.fixture
def package_dir(tmp_path, monkeypatch):
    """Point the loader at an empty package folder; restore the real state afterwards."""
    monkeypatch.setattr(_loader, "_package_dirs", lambda: [tmp_path])
    monkeypatch.delenv(_loader.LIBRARY_ENV, raising=False)
    yield tmp_path
    monkeypatch.undo()
    _loader.initialize(force=True, warn=False)


@pytest.fixture
def load_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.ops, "load_library", lambda path: calls.append(path))
    return calls


def _running_info(info: dict) -> dict:
    """Build info claiming the running torch, so the torch check passes."""
    return dict(
        info,
        torch_version=torch.__version__,
        torch_cuda_version=torch.version.cuda or "13.0",
        cxx11_abi=bool(torch.compiled_with_cxx11_abi()),
    )


def _install(folder, group: str, info: dict | None, library_bytes: bytes = b"not an ELF file") -> None:
    (folder / f"_C_{group}.so").write_bytes(library_bytes)
    if info is not None:
        (folder / f"build_info_{group}.json").write_text(json.dumps(info), encoding="utf-8")


# --- find_library -------------------------------------------------------------------------------


def test_find_library(tmp_path):
    assert _loader.find_library([tmp_path]) is None
    (tmp_path / "_C_blackwell.pyd").write_bytes(b"")
    library, info, group = _loader.find_library([tmp_path / "absent", tmp_path])
    assert (library.name, info.name, group) == ("_C_blackwell.pyd", "build_info_blackwell.json", "blackwell")


def test_find_library_accepts_abi_suffixes(tmp_path):
    (tmp_path / "_C_legacy.abi3.so").write_bytes(b"")
    (tmp_path / "_C_legacy.txt").write_bytes(b"")
    assert _loader.find_library([tmp_path])[2] == "legacy"


def test_two_groups_in_one_folder_is_an_error(tmp_path):
    (tmp_path / "_C_legacy.so").write_bytes(b"")
    (tmp_path / "_C_blackwell.so").write_bytes(b"")
    with pytest.raises(LibraryLoadError, match="several arch groups"):
        _loader.find_library([tmp_path])


def test_environment_variable_wins(tmp_path):
    other = tmp_path / "build"
    other.mkdir()
    (other / "_C_custom.so").write_bytes(b"")
    (tmp_path / "_C_legacy.so").write_bytes(b"")
    assert _loader.find_library([tmp_path], str(other / "_C_custom.so"))[2] == "custom"
    with pytest.raises(LibraryLoadError, match=_loader.LIBRARY_ENV):
        _loader.find_library([tmp_path], str(tmp_path / "nothing.so"))


# --- initialize ---------------------------------------------------------------------------------


def test_source_checkout_without_build(package_dir, load_calls):
    state = _loader.initialize(force=True)
    assert state.status == "not_built" and state.build_info is None
    assert load_calls == []
    for call in (_loader.require_library, lambda: _loader.require_ready(0)):
        with pytest.raises(LibraryNotBuiltError) as info:
            call()
        message = str(info.value)
        assert "nox -s dev" in message and "pip install ." in message and str(package_dir) in message


def test_torch_mismatch_is_raised_before_loading(package_dir, load_calls, legacy_info):
    _install(package_dir, "legacy", dict(legacy_info, torch_version="2.9.0+cu126", torch_cuda_version="12.6"))
    with pytest.warns(RuntimeWarning, match="2.9.0"):
        state = _loader.initialize(force=True)
    assert load_calls == [], "the library must not be loaded with a mismatched torch"
    assert state.status == "error" and isinstance(state.error, TorchMismatchError)
    with pytest.raises(TorchMismatchError) as info:
        _loader.require_ready(0)
    assert "2.9.0+cu126" in str(info.value) and torch.__version__ in str(info.value)


def test_missing_build_info(package_dir, load_calls):
    _install(package_dir, "legacy", None)
    with pytest.warns(RuntimeWarning):
        state = _loader.initialize(force=True)
    assert load_calls == []
    with pytest.raises(LibraryLoadError, match="build_info_legacy.json"):
        _loader.require_library()
    assert state.status == "error"


def test_group_of_build_info_must_match_the_library(package_dir, load_calls, legacy_info):
    _install(package_dir, "blackwell", _running_info(legacy_info))
    with pytest.warns(RuntimeWarning, match="group 'legacy'"):
        _loader.initialize(force=True)
    assert load_calls == []


def test_load_failure_is_reported_with_the_path(package_dir, legacy_info):
    _install(package_dir, "legacy", _running_info(legacy_info))
    with pytest.warns(RuntimeWarning, match="is not a loadable shared library"):
        state = _loader.initialize(force=True)  # the real torch.ops.load_library on a non-ELF file
    with pytest.raises(LibraryLoadError) as info:
        _loader.require_library()
    text = str(info.value)
    assert "_C_legacy.so" in text and state.status == "error"
    # the loader's own reason stays, and the CUDA runtime / torch are not blamed for a non-library
    assert re.search("invalid ELF header|file too short", text) and "usual causes" not in text


def test_library_without_the_operators(package_dir, load_calls, legacy_info):
    _install(package_dir, "legacy", _running_info(legacy_info))
    with pytest.warns(RuntimeWarning, match="does not define"):
        _loader.initialize(force=True)
    assert len(load_calls) == 1


@pytest.fixture
def mock_library(package_dir, monkeypatch, legacy_info):
    """A 'loadable' library whose operators are the CPU mocks (bound under their own namespace)."""
    info = _running_info(legacy_info)
    _install(package_dir, "legacy", info)
    namespace = mock_ops.define()
    real_bind = _ops.bind
    monkeypatch.setattr(torch.ops, "load_library", lambda path: None)
    monkeypatch.setattr(_ops, "bind", lambda ns: real_bind(namespace))
    monkeypatch.setitem(mock_ops.BUILD_INFO_JSON, "value", json.dumps(info))
    return info


def test_successful_load_registers_fakes(mock_library):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        state = _loader.initialize(force=True)
    assert state.status == "ready" and state.error is None
    assert state.kernels and _ops.is_bound()
    assert _loader.require_library() is state
    q = torch.empty(2, 100, 4, 64, dtype=torch.float16, device="meta")
    out, lse, p, rng = torch.ops.flash_attn_mock.fwd(q, q, q, None, 0.0, 0.125, False, -1, -1, 0.0, False, None)
    assert out.shape == q.shape and lse.shape == (2, 4, 100) and p.shape == (0,)


def test_compiled_build_info_wins_over_a_stale_file(mock_library, monkeypatch):
    compiled = dict(mock_library, kernel_set="release")
    monkeypatch.setitem(mock_ops.BUILD_INFO_JSON, "value", json.dumps(compiled))
    with pytest.warns(RuntimeWarning, match="kernel_set"):
        state = _loader.initialize(force=True)
    assert state.build_info["kernel_set"] == "release"


@pytest.fixture
def gpu(monkeypatch):
    """Pretend device 0 is a given GPU."""

    def install(capability, name):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: capability)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: name)

    return install


def test_require_ready_checks_the_gpu_before_the_first_kernel(mock_library, gpu):
    _loader.initialize(force=True)
    gpu((8, 6), "NVIDIA A10")
    assert _loader.require_ready(0) is True
    assert _loader.device_verdict(0).target == "sm_80"


def test_require_ready_refuses_a_gpu_of_another_group(mock_library, gpu):
    _loader.initialize(force=True)
    gpu((12, 0), "NVIDIA GeForce RTX 5090")
    with pytest.raises(UnsupportedGPUError) as info:
        _loader.require_ready(0)
    message = str(info.value)
    for expected in ("NVIDIA GeForce RTX 5090", "12.0", "sm_120", "'legacy'", ".blackwell", "pip install"):
        assert expected in message


def test_editable_install_location_wins(package_dir, load_calls, legacy_info, tmp_path_factory, monkeypatch):
    """find_spec('flash_attn._C_<group>') (an editable install rebuilds there) names the library to load."""
    _install(package_dir, "legacy", dict(legacy_info, torch_version="0.0.1"))
    rebuilt = tmp_path_factory.mktemp("install_tree")
    _install(rebuilt, "legacy", dict(legacy_info, torch_version="0.0.2"))
    spec = type("Spec", (), {"origin": str(rebuilt / "_C_legacy.so")})()
    monkeypatch.setattr(
        _loader.importlib.util, "find_spec", lambda name: spec if name == "flash_attn._C_legacy" else None
    )
    with pytest.warns(RuntimeWarning, match="0.0.2"):
        state = _loader.initialize(force=True)
    assert state.library == rebuilt / "_C_legacy.so" and state.build_info_path.parent == rebuilt


def test_failed_editable_rebuild_is_reported(package_dir, load_calls, legacy_info, monkeypatch):
    _install(package_dir, "legacy", _running_info(legacy_info))

    def rebuild_fails(name):
        raise RuntimeError("ninja: build stopped: subcommand failed")

    monkeypatch.setattr(_loader.importlib.util, "find_spec", rebuild_fails)
    with pytest.warns(RuntimeWarning, match="ninja"):
        _loader.initialize(force=True)
    with pytest.raises(LibraryLoadError, match="nox -s dev"):
        _loader.require_library()
    assert load_calls == []


# --- stable-ABI builds --------------------------------------------------------------------------


def test_stable_build_loads_under_a_newer_torch_and_turns_the_reservation_on(package_dir, monkeypatch, legacy_info):
    from flash_attn import _rng

    # built against torch 2.11.0, any C++11 ABI: the running torch (2.14 here) is in its range
    info = dict(_running_info(legacy_info), torch_abi="stable", torch_min="2.11", torch_version="2.11.0+cu130")
    info["cxx11_abi"] = not info["cxx11_abi"]
    _install(package_dir, "legacy", info)
    namespace = mock_ops.define()
    real_bind = _ops.bind
    monkeypatch.setattr(torch.ops, "load_library", lambda path: None)
    monkeypatch.setattr(_ops, "bind", lambda ns: real_bind(namespace))
    monkeypatch.setitem(mock_ops.BUILD_INFO_JSON, "value", json.dumps(info))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        state = _loader.initialize(force=True)
    assert state.status == "ready" and _rng.RESERVE is True
    _install(package_dir, "legacy", _running_info(legacy_info))  # an exact build again: decided anew
    monkeypatch.setitem(mock_ops.BUILD_INFO_JSON, "value", json.dumps(_running_info(legacy_info)))
    assert _loader.initialize(force=True).status == "ready" and _rng.RESERVE is False


def test_stable_build_refuses_a_torch_below_its_minimum_before_loading(package_dir, load_calls, legacy_info):
    info = dict(_running_info(legacy_info), torch_abi="stable", torch_min="9.0")  # a minimum above this torch
    _install(package_dir, "legacy", info)
    with pytest.warns(RuntimeWarning, match="stable-ABI build for torch >= 9.0"):
        state = _loader.initialize(force=True)
    assert load_calls == [] and isinstance(state.error, TorchMismatchError)
    assert "pip install 'torch>=9.0'" in str(state.error)
