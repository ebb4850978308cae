"""lab/unit_costs.py: per-unit compile seconds from shards' .ninja_log files, as the manifest's keys."""

from __future__ import annotations

import json

import pytest
import unit_costs


def _log(path, rows):
    lines = ["# ninja log v7"] + [f"{a}\t{b}\t0\t{out}\th{i}" for i, (a, b, out) in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_units_become_the_manifest_keys_mean_of_both_dtypes(tmp_path):
    one = _log(tmp_path / "1.txt", [(0, 100_000, "k/kernels/units/bwd_hdim256_fp16_causal.cu.o"),
                                    (0, 9_000, "binding/ops.cpp.o")])  # fmt: skip
    two = _log(tmp_path / "2.txt", [(5, 120_005, "k/kernels/units/bwd_hdim256_bf16_causal.cu.o")])
    per_unit = unit_costs.unit_seconds([one, two])
    assert per_unit == {"bwd_hdim256_fp16_causal": 100.0, "bwd_hdim256_bf16_causal": 120.0}
    assert unit_costs.measured_seconds(per_unit) == {"bwd_hdim256_causal": 110.0}


def test_a_unit_in_two_logs_or_in_one_dtype_only_is_refused(tmp_path, capsys):
    one = _log(tmp_path / "1.txt", [(0, 1000, "kernels/units/fwd_hdim32_fp16.cu.o")])
    with pytest.raises(ValueError, match="two logs"):
        unit_costs.unit_seconds([one, one])
    with pytest.raises(ValueError, match="fewer than 2 dtypes: fwd_hdim32"):
        unit_costs.measured_seconds(unit_costs.unit_seconds([one]))
    assert unit_costs.main(["--ninja-log", str(one)]) == 2
    assert "error:" in capsys.readouterr().err


def test_recalibrated_prediction_uses_the_measured_costs(tmp_path):
    # both fwd hdim64 units measured at 10 s: one shard, one job compiles them one after the other
    # (20 s) plus the dispatch, instead of the manifest's hundreds of seconds
    rows = [(0, 10_000, "kernels/units/fwd_hdim64_fp16.cu.o"), (0, 10_000, "kernels/units/fwd_hdim64_bf16.cu.o")]
    log = _log(tmp_path / "1.txt", rows)
    shard = {"shard": 1, "units": ["a", "b"], "predicted_seconds": 300.0, "measured_seconds": 21.0}
    record = {"kernel_set": "fwd_hdim64_fp16,fwd_hdim64_bf16", "shards": 1, "jobs_per_shard": 1, "shard_rows": [shard]}
    sharded = tmp_path / "sharded.json"
    sharded.write_text(json.dumps(record))
    out = tmp_path / "out.json"
    assert unit_costs.main(["--ninja-log", str(log), "--sharded", str(sharded), "--json", str(out)]) == 0
    row = json.loads(out.read_text())["shards"][0]
    assert row["predicted_before"] == 300.0
    assert 20.0 <= row["predicted_after"] < 50.0, row
