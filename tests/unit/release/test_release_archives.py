"""Kernels archives (release.archive.archives): packing a kernels-only build and gathering shards.

The archives here are made from small files standing in for objects; the real sharded build is
tests/real_builds/test_sharded_build.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from archive_fakes import FIELDS, SET, TOKENS, fatbin_object, make_shard, write_archive  # noqa: F401 (re-exported)

from release.archive import archives
from release.errors import ReleaseError


def two_shards(tmp_path: Path) -> list[Path]:
    return [make_shard(tmp_path, 1, 2, SET[:1]), make_shard(tmp_path, 2, 2, SET[1:])]


def test_gather_merges_shards_into_one_whole_set_archive(tmp_path: Path):
    out = archives.gather(two_shards(tmp_path), tmp_path / "out")
    archive = archives.load(out)
    assert archive.shard is None and out.name == f"kernels-custom_sm80-list-{archive.key[:12]}"
    assert archive.build_key == archives.key_of(FIELDS)
    assert sorted(archive.object_units) == sorted(SET + ["dispatch"])
    archives.verify_objects(archive)  # every object copied with its sha256
    assert archive.manifest["gathered_from"] == [p.name for p in two_shards(tmp_path / "again")]


def test_a_shard_with_another_key_is_refused_by_name_with_the_differing_field(tmp_path: Path):
    good = make_shard(tmp_path, 1, 2, SET[:1])
    fields = {**FIELDS, "definitions": "FLASH_NAMESPACE=flash;FLASH_ATTN_RESCALE_THRESHOLD=4.0f"}
    other = make_shard(tmp_path / "t4", 2, 2, SET[1:], fields=fields)
    with pytest.raises(ReleaseError) as e:
        archives.gather([good, other], tmp_path / "out")
    assert str(other) in str(e.value) and "another key" in str(e.value)
    assert "definitions" in str(e.value) and "THRESHOLD=4.0f" in str(e.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())  # nothing written


@pytest.mark.parametrize(
    ("shards", "message"),
    [
        (lambda t: [make_shard(t, 1, 2, SET[:1])], "shard(s) 2/2 missing"),
        (lambda t: [make_shard(t, 1, 2, SET[:1]), make_shard(t / "b", 1, 2, SET[:1])], "given twice"),
        (lambda t: [make_shard(t, 1, 2, SET[:2]), make_shard(t, 2, 2, SET[1:])], "is in two shards"),
        (lambda t: [make_shard(t, 1, 2, SET[:1]), make_shard(t, 2, 2, SET[1:2])], "missing bwd_hdim64_fp16"),
        (lambda t: [make_shard(t, 1, 2, SET[:1]), make_shard(t, 2, 3, SET[1:])], "one split"),
    ],
)
def test_incomplete_or_overlapping_shards_are_named(tmp_path: Path, shards, message):
    with pytest.raises(ReleaseError) as e:
        archives.gather(shards(tmp_path), tmp_path / "out")
    assert message in str(e.value), str(e.value)


def test_a_damaged_object_is_named(tmp_path: Path):
    shards = two_shards(tmp_path)
    (shards[1] / "objects" / "bwd_hdim64_fp16.o").write_bytes(fatbin_object("truncated"))
    with pytest.raises(ReleaseError, match="bwd_hdim64_fp16.*damaged"):
        archives.gather(shards, tmp_path / "out")


def test_not_an_archive_and_a_whole_set_are_refused(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReleaseError, match="no kernels-manifest.json|does not exist"):
        archives.gather([tmp_path / "empty"], tmp_path / "out")
    whole = archives.gather(two_shards(tmp_path), tmp_path / "out")
    with pytest.raises(ReleaseError, match="whole-set archive"):
        archives.gather([whole], tmp_path / "out2")


def test_object_names_map_to_units():
    assert archives.object_unit("CMakeFiles/x.dir/kernels/units/fwd_hdim64_fp16.cu.o") == (
        "fwd_hdim64_fp16", "fwd_hdim64_fp16.o")  # fmt: skip
    assert archives.object_unit("CMakeFiles/x.dir/kernels/units/fwd_split_hdim64_bf16_align.cu.obj") == (
        "fwd_split_hdim64_bf16", "fwd_split_hdim64_bf16_align.obj")  # fmt: skip
    assert archives.object_unit("CMakeFiles/x.dir/kernels/dispatch.cu.o") == ("dispatch", "dispatch.o")
