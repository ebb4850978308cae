"""lab/host_profile.py on CPU: its table of profiler rows, and its refusals (the profile needs a GPU)."""

from __future__ import annotations

from types import SimpleNamespace

import host_profile
import pytest


class FakeProfile:
    """What host_profile reads of a torch.profiler run: key_averages() with per-key totals (us)."""

    def __init__(self, *events):
        self.events = [
            SimpleNamespace(key=k, self_cpu_time_total=s, cpu_time_total=t, count=c) for k, s, t, c in events
        ]

    def key_averages(self):
        return self.events


def test_rows_are_per_call_and_ordered_by_self_cpu_time():
    prof = FakeProfile(
        ("aten::empty", 400.0, 400.0, 800),
        ("flash_attn::fwd", 1000.0, 3000.0, 200),
        ("cudaLaunchKernel", 600.0, 600.0, 200),
    )
    lines = host_profile._per_call_rows(prof, calls=200, rows=2)
    assert len(lines) == 3  # header and the two largest rows
    assert lines[1].split()[-1] == "flash_attn::fwd" and lines[2].split()[-1] == "cudaLaunchKernel"
    assert [float(x) for x in lines[1].split()[:3]] == [5.0, 15.0, 1.0]  # us per call, count per call


def test_without_cuda_it_says_so_and_fails(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert host_profile.main([]) == 1
    assert "no CUDA device" in capsys.readouterr().err


def test_calls_below_one_are_refused():
    with pytest.raises(SystemExit) as exit_info:
        host_profile.main(["--calls", "0"])
    assert exit_info.value.code == 2
