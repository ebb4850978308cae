"""bench/binding_cost.py on CPU: it times the calls the binding makes, and refuses what it cannot run."""

from __future__ import annotations

from pathlib import Path

import binding_cost as bc
import pytest

BINDING = Path(__file__).resolve().parents[3] / "src" / "binding"


def test_the_benchmark_times_the_calls_the_binding_makes():
    """Each allocation and guard call of a binding backend is among the cases timed for that API, so
    the per-call figures stay about the code that runs (a binding that changes its calls fails here)."""
    backends = {
        bc._ATEN: ("tensor_api_aten.h", ["at::detail::empty_cuda", "at::detail::empty_strided_cuda", "at::empty_like"]),
        bc._STABLE: (
            "tensor_api_stable.h",
            ["aoti_torch_empty_strided", "torch::stable::empty_like", "torch::stable::accelerator::DeviceGuard"],
        ),
    }
    for source, (header, calls) in backends.items():
        binding = (BINDING / header).read_text(encoding="utf-8")
        for call in calls:
            assert call in binding, f"{header} no longer calls {call}: update bench/binding_cost.py"
            assert call in source, f"bench/binding_cost.py does not time {call} ({header} calls it)"
    assert "c10::cuda::CUDAGuard" in bc._ATEN and "DeviceGuard = c10::cuda::CUDAGuard" in (
        BINDING / "tensor_api_aten.h"
    ).read_text(encoding="utf-8")
    assert all(src.count("r.push_back(ns_per(n,") == len(bc._CASES) for src in (bc._ATEN, bc._STABLE))
    assert "at::" not in bc._STABLE and "c10::" not in bc._STABLE  # the stable extension stays on the stable ABI


def test_api_without_cuda_says_so(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bc.main(["api", "--n", "10"]) == 1
    assert "needs a CUDA device" in capsys.readouterr().err


def test_compare_refuses_a_site_that_is_not_label_equals_folder(tmp_path, capsys):
    assert bc.main(["compare", str(tmp_path)]) == 2
    assert bc.main(["compare", f"x={tmp_path / 'missing'}"]) == 2
    assert "is not LABEL=FOLDER" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["api", "--n", "0"], ["compare", "a=/", "--rounds", "0"]])
def test_counts_below_one_are_refused(argv):
    with pytest.raises(SystemExit) as exit_info:
        bc.main(argv)
    assert exit_info.value.code == 2
