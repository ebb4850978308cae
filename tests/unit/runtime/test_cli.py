"""``python -m flash_attn``: the report, its text and its exit codes, from made-up loader states."""

from __future__ import annotations

import json

import pytest

from flash_attn import LibraryNotBuiltError, TorchMismatchError, _build_info, _cli, _loader


def state(status="ready", info=None, error=None):
    s = _loader.LibraryState()
    s.status = status
    s.build_info = info
    s.kernels = _build_info.kernel_set(info) if info else frozenset()
    s.error = error
    s.dist_version = "2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1"
    if info:
        s.library = "/site/flash_attn/_C_legacy.so"
    return s


def test_ready_on_supported_gpu(legacy_info):
    report = _cli.collect(state(info=legacy_info), gpus=[(0, "NVIDIA H200", (9, 0))])
    assert report["exit_code"] == _cli.EXIT_OK
    assert report["gpus"][0]["ok"] and report["gpus"][0]["target"] == "sm_90"
    text = _cli.render_plain(report)
    for fragment in (
        "group",
        "legacy",
        "sm_80, sm_89, sm_90",
        "ptx_arch",
        "13.0.88",
        "2.14.1+cu130",
        "kernel_set",
        "dev",
        "fwd fp16 hd32,64,96,128,192",
        "applied=true",
        "NVIDIA H200",
        "OK",
    ):
        assert fragment in text
    json.dumps(report, default=str)


def test_unsupported_gpu_fails_and_names_the_wheel(legacy_info):
    report = _cli.collect(state(info=legacy_info), gpus=[(0, "NVIDIA GeForce RTX 5090", (12, 0))])
    assert report["exit_code"] == _cli.EXIT_CANNOT_RUN
    text = _cli.render_plain(report)
    assert "CANNOT RUN" in text and ".blackwell" in text and "cannot run" in report["summary"]


def test_no_gpu_visible(legacy_info):
    report = _cli.collect(state(info=legacy_info), gpus=[])
    assert report["exit_code"] == _cli.EXIT_OK
    assert "no CUDA device" in report["summary"]


def test_not_built():
    report = _cli.collect(state("not_built", error=LibraryNotBuiltError("missing; run nox -s dev")), gpus=[])
    assert report["exit_code"] == _cli.EXIT_NOT_BUILT
    assert "not built" in _cli.render_plain(report)


def test_torch_mismatch_shows_build_info_and_fails(legacy_info):
    report = _cli.collect(
        state("error", legacy_info, TorchMismatchError("built against torch 2.14.1")), gpus=[(0, "NVIDIA A100", (8, 0))]
    )
    assert report["exit_code"] == _cli.EXIT_CANNOT_RUN
    text = _cli.render_plain(report)
    assert "built against torch 2.14.1" in text and "sm_80" in text


@pytest.mark.parametrize("flag", ["--plain", "--json", None])
def test_main_uses_the_live_state(monkeypatch, capsys, legacy_info, flag):
    monkeypatch.setattr(_loader, "STATE", state(info=legacy_info))
    monkeypatch.setattr(_cli, "_probe_gpus", lambda: ([(0, "NVIDIA A10", (8, 6))], None))
    code = _cli.main([flag] if flag else [])
    out = capsys.readouterr().out
    assert code == _cli.EXIT_OK
    assert "NVIDIA A10" in out and "sm_80" in out
    if flag == "--json":
        assert json.loads(out)["gpus"][0]["route"] == "sass"


def test_rich_output_escapes_markup(monkeypatch, capsys, legacy_info):
    pytest.importorskip("rich")
    broken = state("error", legacy_info, TorchMismatchError("odd text [/] [bold]not a tag[/bold]"))
    monkeypatch.setattr(_loader, "STATE", broken)
    monkeypatch.setattr(_cli, "_probe_gpus", lambda: ([(0, "GPU [x]", (12, 0))], None))
    assert _cli.main([]) == _cli.EXIT_CANNOT_RUN
    out = capsys.readouterr().out
    assert "[/]" in out and "[bold]not a tag[/bold]" in out and "GPU [x]" in out


def test_says_which_torch_abi_and_range_the_wheel_serves(legacy_info):
    exact = _cli.collect(state(info=legacy_info), gpus=[])
    assert exact["torch_range"]["torch_abi"] == "exact"  # no torch_abi in the build info: an older, exact wheel
    text = _cli.render_plain(exact)
    assert "torch ABI     exact: serves torch 2.14.1 only, with CUDA 13.x and C++11 ABI true" in text
    stable_info = {**legacy_info, "torch_abi": "stable", "torch_min": "2.11"}
    stable = _cli.collect(state(info=stable_info), gpus=[])
    assert stable["torch_range"] == {
        "torch_abi": "stable",
        "serves": "torch >= 2.11 with CUDA 13.x (torch's stable ABI: one wheel for every torch from 2.11 on)",
    }
    text = _cli.render_plain(stable)
    assert "torch ABI     stable: serves torch >= 2.11 with CUDA 13.x" in text
    assert "torch_min" in text  # the build info rows list the new fields too
    assert _cli.collect(state("not_built"), gpus=[])["torch_range"] is None
