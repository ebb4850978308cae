"""The unit cost model that orders compiles heaviest first (src/kernels/kernel_set.py)."""

from __future__ import annotations

from kernels import kernel_set as ks


def _order(spec: str) -> list[str]:
    _, units = ks.resolve(spec)
    return [u.name for u in ks.order_heaviest_first(units)]


MEASURED = ks._MEASURED_SECONDS  # unit_costs.measured_seconds of build-manifest.json


def test_dev_order_follows_the_measured_seconds():
    order = _order("dev")
    # the dev set's four heaviest keys are fp16 and bf16 of its two heaviest measured keys
    heaviest = sorted((k for k in MEASURED if "hdim64" in k or "hdim128" in k), key=MEASURED.get)[-2:]
    top = {ks.parse_unit(n) for n in order[:4]}
    assert {f"{u.kind}_hdim{u.head_dim}" + ("_causal" if u.causal else "") for u in top} == set(heaviest)
    lightest = min((k for k in MEASURED if "hdim64" in k or "hdim128" in k), key=MEASURED.get)
    assert {n.replace("_fp16", "").replace("_bf16", "") for n in order[-2:]} == {lightest}


def test_measured_units_cost_their_seconds_relative_to_the_reference_unit():
    ref = ks._COSTS["reference_unit"]
    assert ks.parse_unit(f"{ref}_fp16").cost == 1.0
    unit = ks.parse_unit("bwd_hdim64_bf16_causal")
    assert abs(unit.cost - MEASURED["bwd_hdim64_causal"] / MEASURED[ref]) < 1e-9
    assert abs(unit.seconds - MEASURED["bwd_hdim64_causal"]) < 1e-9


def test_every_head_dim_of_the_manifest_is_measured_and_used_as_it_is():
    # all six head dims were measured on one H100 host (lab/evidence/h100-2026-12-07-release-full):
    # each unit takes its own key's seconds, no nearest dim and no above_factor
    for unit in ks.all_units():
        key = f"{unit.kind}_hdim{unit.head_dim}" + ("_causal" if unit.causal else "")
        assert abs(unit.seconds - MEASURED[key]) < 1e-6, key
    release = _order("release")
    heaviest = max(release, key=lambda n: ks.parse_unit(n).seconds)
    assert release[0] == heaviest


def test_an_unmeasured_head_dim_takes_the_nearest_measured_one(monkeypatch):
    # the rule for a head dim added without a measurement: the nearest measured (ties: the larger),
    # times the kind's above_factor above above_head_dim
    dims = [d for d in ks._MEASURED_DIMS if d != 96]
    monkeypatch.setattr(ks, "_MEASURED_DIMS", dims)
    assert abs(ks.parse_unit("bwd_hdim96_fp16").seconds - MEASURED["bwd_hdim128"]) < 1e-6  # 64 and 128 tie
    dims = [d for d in ks._MEASURED_DIMS if d != 192]
    monkeypatch.setattr(ks, "_MEASURED_DIMS", dims)
    factor = ks._ABOVE_FACTOR["fwd"]
    assert abs(ks.parse_unit("fwd_hdim192_fp16").seconds - MEASURED["fwd_hdim256"] * factor) < 1e-6


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
