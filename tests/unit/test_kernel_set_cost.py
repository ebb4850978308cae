"""The unit cost model that orders compiles heaviest first (src/kernels/kernel_set.py)."""

from __future__ import annotations

from kernels import kernel_set as ks


def _order(spec: str) -> list[str]:
    _, units = ks.resolve(spec)
    return [u.name for u in ks.order_heaviest_first(units)]


def test_dev_order_follows_the_measured_h200_seconds():
    order = _order("dev")
    # sm_90 on the H200: the non-causal split-KV units (327-342 s) are the longest, then the
    # non-causal backward (261-266 s); the causal fwd hdim64 units (112 s) the shortest.
    assert set(order[:4]) == {f"fwd_split_hdim{d}_{t}" for d in (64, 128) for t in ("fp16", "bf16")}
    assert set(order[4:8]) == {f"bwd_hdim{d}_{t}" for d in (64, 128) for t in ("fp16", "bf16")}
    assert set(order[-2:]) == {"fwd_hdim64_fp16_causal", "fwd_hdim64_bf16_causal"}


def test_measured_units_cost_their_seconds_relative_to_fwd_hdim128():
    assert ks.parse_unit("fwd_hdim128_fp16").cost == 1.0
    assert abs(ks.parse_unit("bwd_hdim64_bf16_causal").cost - 191.8 / 228.8) < 1e-9


def test_head_dims_above_128_take_their_own_measurement():
    # 192 and 256 were measured on an H100 host (lab/evidence/h100-2026-12-07-release-partial): their
    # seconds are used as they are, no above_factor; fwd hdim192 causal agrees with docs/design.md's
    # 109 s from the H200 within 10 %
    assert abs(ks.parse_unit("bwd_hdim256_fp16").cost * 228.8 - 261.7) < 1e-6
    assert abs(ks.parse_unit("fwd_split_hdim192_bf16_causal").cost * 228.8 - 164.3) < 1e-6
    assert abs(ks.parse_unit("fwd_hdim192_fp16_causal").cost * 228.8 / 109 - 1) < 0.1
    # 96 is still unmeasured: it takes 128's seconds (the tie goes to the larger)
    assert ks.parse_unit("bwd_hdim96_fp16").cost == ks.parse_unit("bwd_hdim128_fp16").cost
    release = _order("release")
    assert release.index("bwd_hdim256_fp16") < release.index("fwd_hdim256_fp16")


def test_shards_cover_the_set_once_and_balance_by_predicted_seconds():
    _, units = ks.resolve("dev")
    shards = ks.split_shards(units, 4)
    names = [u.name for shard in shards for u in shard]
    assert sorted(names) == sorted(u.name for u in units)  # every unit exactly once
    loads = [sum(u.seconds for u in shard) for shard in shards]
    assert max(loads) - min(loads) < max(u.seconds for u in units)  # LPT: within one unit
    assert ks.split_shards(units, 4) == shards  # deterministic: every machine computes the same split
    assert [len(s) for s in ks.split_shards(units[:2], 3)] == [1, 1, 0]


def test_shard_specs_are_one_based_k_of_n():
    assert ks.parse_shard("3/8") == (3, 8)
    for bad in ("0/8", "9/8", "3", "a/b", ""):
        try:
            ks.parse_shard(bad)
        except ks.ShardError as e:
            assert "K/N" in str(e)
        else:
            raise AssertionError(bad)
