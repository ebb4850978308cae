"""lab/dropout_identity.py --compare on CPU, with made-up runs (the --save half needs a GPU)."""

from __future__ import annotations

import copy

import dropout_identity
import torch


def run(**overrides) -> dict:
    tensors = {"out": torch.randn(2, 8, 4, 64).half(), "P": torch.randn(2, 4, 128, 128).half()}
    doc = {"flash_attn": "2.8.3.post2+x", "torch_abi": "exact", "torch": "2.11.0", "seed": 1234, "p": 0.17,
           "shapes": {"base": {"tensors": tensors, "generator_offset": 256}}}  # fmt: skip
    doc.update(overrides)
    return doc


def test_identical_runs_pass_and_any_bit_or_offset_fails(tmp_path, capsys):
    a = run()
    b = copy.deepcopy(a) | {"torch_abi": "stable", "torch": "2.14.1"}
    lines, ok = dropout_identity.compare(a, b)
    assert ok and lines[-1] == "PASSED: bit-identical" and "(stable, torch 2.14.1)" in lines[0]
    flipped = copy.deepcopy(b)
    flipped["shapes"]["base"]["tensors"]["P"][0, 0, 0, 0] *= -1  # one dropped entry more or less
    lines, ok = dropout_identity.compare(a, flipped)
    assert not ok and any("P" in line and "DIFFERENT (1 elements" in line for line in lines)
    moved = copy.deepcopy(b)
    moved["shapes"]["base"]["generator_offset"] = 0
    assert not dropout_identity.compare(a, moved)[1]
    torch.save(a, tmp_path / "a.pt")
    torch.save(b, tmp_path / "b.pt")
    assert dropout_identity.main(["--compare", str(tmp_path / "a.pt"), str(tmp_path / "b.pt")]) == 0
    torch.save(flipped, tmp_path / "c.pt")
    assert dropout_identity.main(["--compare", str(tmp_path / "a.pt"), str(tmp_path / "c.pt")]) == 1
    torch.save(run(seed=1), tmp_path / "d.pt")
    assert dropout_identity.main(["--compare", str(tmp_path / "a.pt"), str(tmp_path / "d.pt")]) == 2
    assert "different seed" in capsys.readouterr().out
