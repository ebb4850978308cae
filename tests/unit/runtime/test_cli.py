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


INSTALL = {"index_url": "https://example.org/fa/", "stable_torch_min": "2.11"}


@pytest.mark.parametrize(
    "torch_version, cuda, expected",
    [
        ("2.14.1+cu130", "13.0", "cu13/blackwell/stable"),  # torch >= the stable minimum: the stable index
        ("2.10.0+cu130", "13.0", "cu13/blackwell/torch2.10.0"),  # older: that torch's exact wheel
        ("2.14.1+cu132", "13.2", "cu13/blackwell/stable"),
    ],
)
def test_a_wheel_that_cannot_run_here_prints_the_install_line(legacy_info, monkeypatch, torch_version, cuda, expected):
    monkeypatch.setattr(_cli.torch, "__version__", torch_version)
    monkeypatch.setattr(_cli.torch.version, "cuda", cuda)
    info = dict(legacy_info, install=INSTALL)
    report = _cli.collect(state(info=info), gpus=[(0, "NVIDIA GeForce RTX 5090", (12, 0))])
    assert report["exit_code"] == _cli.EXIT_CANNOT_RUN
    line = f"pip install flash-attn --index-url https://example.org/fa/{expected}/simple"
    assert report["install"] == line
    assert f"install the wheel for this GPU and torch: {line}" in _cli.render_plain(report)


def test_no_install_line_when_it_runs_or_cannot_be_told(legacy_info, monkeypatch):
    monkeypatch.setattr(_cli.torch.version, "cuda", "13.0")
    info = dict(legacy_info, install=INSTALL)
    assert _cli.collect(state(info=info), gpus=[(0, "NVIDIA H200", (9, 0))])["install"] is None  # it runs
    old = _cli.collect(state(info=legacy_info), gpus=[(0, "RTX 5090", (12, 0))])  # built before "install"
    assert old["exit_code"] == _cli.EXIT_CANNOT_RUN and old["install"] is None
    turing = _cli.collect(state(info=info), gpus=[(0, "T4", (7, 5))])  # no group covers it
    assert turing["install"] is None
    # built outside the release workflow (no index URL), or with the old template URL: no line, never a fake site
    for url in ("", "https://OWNER.github.io/REPO/"):
        local = dict(legacy_info, install=dict(INSTALL, index_url=url))
        assert _cli.collect(state(info=local), gpus=[(0, "RTX 5090", (12, 0))])["install"] is None
