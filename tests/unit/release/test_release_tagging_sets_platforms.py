"""release.compile.tagging: the kernel-set segment of the label, and the manylinux platform tag."""

from __future__ import annotations

import zipfile

import pytest
from packaging.utils import parse_wheel_filename
from packaging.version import Version
from release_fakes import VERSION, build_info, make_wheel

from flash_attn_wheel_names import label as wheel_label
from release.compile import tagging
from release.errors import ReleaseError

RELEASE_LABEL = "cu130torch2.14.1cxx11abitrue.legacy.rev1"


@pytest.mark.parametrize("kernel_set", ["ci", "dev", "custom"])
def test_a_non_release_kernel_set_is_a_label_segment(kernel_set):
    label = tagging.local_label(build_info(kernel_set=kernel_set))
    assert label == f"{RELEASE_LABEL}.{kernel_set}"
    full = f"{VERSION}+{label}"
    assert str(Version(full)) == full, "PEP 440 normal form"
    assert Version(full) != Version(f"{VERSION}+{RELEASE_LABEL}")


def test_the_release_kernel_set_adds_nothing():
    assert tagging.local_label(build_info(kernel_set="release")) == RELEASE_LABEL


def test_build_info_without_a_kernel_set_is_an_error():
    info = build_info()
    del info["kernel_set"]
    with pytest.raises(ReleaseError, match="local version label"):
        tagging.local_label(info)


@pytest.mark.parametrize("bad", ["", "Release", "my-set", "a.b"])
def test_label_refuses_a_segment_that_is_not_one_lowercase_word(bad):
    label = wheel_label
    with pytest.raises(ValueError, match="kernel set"):
        label.local_label("13.0", "2.14.1", True, "legacy", bad)
    with pytest.raises(ValueError, match="arch group"):
        label.local_label("13.0", "2.14.1", True, bad or "", "release")


def test_retag_of_a_ci_build_never_gives_the_release_name(tmp_path):
    pytest.importorskip("wheel")
    if tagging._wheel_version() < tagging.MIN_WHEEL:
        pytest.skip("re-tagging needs wheel >= 0.48")
    raw = make_wheel(tmp_path / "raw", info=build_info(kernel_set="ci"))
    tagged = tagging.retag(raw, tmp_path / "out")
    assert tagged.name == f"flash_attn-{VERSION}+{RELEASE_LABEL}.ci-cp310-abi3-linux_x86_64.whl"


def test_platform_tag_of_a_policy():
    assert tagging.platform_tag("manylinux_2_28") == "manylinux_2_28_x86_64"
    assert tagging.platform_tag("manylinux_2_34", "aarch64") == "manylinux_2_34_aarch64"
    for bad in ("manylinux2014", "linux", "manylinux_2_28_x86_64", ""):
        with pytest.raises(ReleaseError, match="manylinux_<major>_<minor>"):
            tagging.platform_tag(bad)


def test_retag_platform_rewrites_name_and_wheel_file(tmp_path):
    pytest.importorskip("wheel")
    raw = make_wheel(tmp_path / "wh")
    new = tagging.retag_platform(raw, "manylinux_2_28_x86_64")
    assert new.name == f"flash_attn-{VERSION}-cp310-abi3-manylinux_2_28_x86_64.whl"
    assert sorted(p.name for p in new.parent.iterdir()) == [new.name], "the old wheel is gone, no temp left"
    _, _, _, tags = parse_wheel_filename(new.name)
    assert {str(t) for t in tags} == {"cp310-abi3-manylinux_2_28_x86_64"}
    facts = tagging.verify_wheel(new)  # RECORD and name agree
    with zipfile.ZipFile(new) as zf:
        wheel_file = zf.read(f"{facts.dist_info}/WHEEL").decode()
    assert "Tag: cp310-abi3-manylinux_2_28_x86_64" in wheel_file and "linux_x86_64\n" not in wheel_file.replace(
        "manylinux_2_28_x86_64", ""
    )
    assert tagging.retag_platform(new, "manylinux_2_28_x86_64") == new, "already tagged: unchanged"


def test_retag_platform_failure_leaves_the_wheel(tmp_path, monkeypatch):
    raw = make_wheel(tmp_path / "wh")
    before = raw.read_bytes()

    def fail(cmd, **kw):
        raise ReleaseError("wheel tags failed (exit 1)")

    monkeypatch.setattr(tagging, "_check_call", fail)
    with pytest.raises(ReleaseError, match="wheel tags failed"):
        tagging.retag_platform(raw, "manylinux_2_28_x86_64")
    assert [p.name for p in raw.parent.iterdir()] == [raw.name] and raw.read_bytes() == before
