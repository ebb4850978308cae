"""bench/binding_cost.py on CPU: its C++ sources name every case in both APIs, and it refuses what it cannot run."""

from __future__ import annotations

import binding_cost as bc
import pytest


def test_every_case_is_timed_in_both_sources_in_order():
    for source, column in ((bc._ATEN, 1), (bc._STABLE, 2)):
        position = 0
        for case in bc._CASES:
            position = source.index(case[column], position)  # raises when a case is missing or out of order
        assert source.count("r.push_back(ns_per(n,") == len(bc._CASES)
    assert "TORCH_LIBRARY(fa_cost_aten" in bc._ATEN and "STABLE_TORCH_LIBRARY(fa_cost_stable" in bc._STABLE
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
