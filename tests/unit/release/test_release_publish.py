"""The release session (release.ship.publish): gather, checksum and verify a release folder."""

from __future__ import annotations

import re

import pytest
from release_fakes import build_info, make_wheel, validation_report

from release import checksums
from release.compile import tagging
from release.errors import ReleaseError
from release.ship import publish

LEGACY = "2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1"
BLACKWELL = "2.8.3.post2+cu130torch2.14.1cxx11abitrue.blackwell.rev1"


@pytest.fixture
def wheelhouse(tmp_path):
    house = tmp_path / "wheelhouse"
    for group in ("legacy", "blackwell"):
        w = tagging.retag(make_wheel(tmp_path / f"raw-{group}", group=group, info=build_info(group)), house)
        checksums.write_sidecar(w)
    return house


def report(folder, version, failed=0, sha=None, sm=90):
    """The validation report tools/validate.py writes for the wheelhouse's wheel of `version` (a
    version of no wheel there records an unreadable file)."""
    wheel = folder.parent / "wheelhouse" / f"flash_attn-{version}-cp310-abi3-linux_x86_64.whl"
    validation_report(folder, wheel, failed=failed, sm=sm, version=version, sha256=sha)


def test_assemble_and_verify(tmp_path, wheelhouse):
    reports = tmp_path / "reports"
    report(reports, LEGACY)
    report(reports, BLACKWELL, sm=100)
    report(reports, "2.9.1+cu130torch2.14.1cxx11abitrue.legacy.rev1")  # another version: not shipped
    out = publish.assemble([wheelhouse], reports, tmp_path / "rel")
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        [
            "SHA256SUMS",
            f"flash_attn-{LEGACY}-cp310-abi3-linux_x86_64.whl",
            f"flash_attn-{BLACKWELL}-cp310-abi3-linux_x86_64.whl",
            f"validation-{LEGACY}-sm90.json",
            f"validation-{LEGACY}-sm90.md",
            f"validation-{BLACKWELL}-sm100.json",
            f"validation-{BLACKWELL}-sm100.md",
        ]
    )
    assert len(publish.verify_release(out)) == 6
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]


def test_missing_report_fails_unless_allowed(tmp_path, wheelhouse):
    reports = tmp_path / "reports"
    report(reports, LEGACY)
    with pytest.raises(ReleaseError, match=re.escape(f"no validation report for {BLACKWELL}")):
        publish.assemble([wheelhouse], reports, tmp_path / "rel")
    assert not (tmp_path / "rel").exists()
    out = publish.assemble([wheelhouse], reports, tmp_path / "rel", allow_missing_reports=True)
    assert (out / "SHA256SUMS").is_file()


def test_failed_report_is_never_shipped(tmp_path, wheelhouse):
    reports = tmp_path / "reports"
    report(reports, LEGACY, failed=2)
    report(reports, BLACKWELL)
    with pytest.raises(ReleaseError, match="2 failed case"):
        publish.assemble([wheelhouse], reports, tmp_path / "rel", allow_missing_reports=True)


def test_report_of_another_file(tmp_path, wheelhouse):
    reports = tmp_path / "reports"
    report(reports, LEGACY, sha="0" * 64)
    report(reports, BLACKWELL)
    with pytest.raises(ReleaseError, match="measured on another file"):
        publish.assemble([wheelhouse], reports, tmp_path / "rel")


def test_mixed_versions_and_duplicates(tmp_path, wheelhouse):
    tagging.retag(make_wheel(tmp_path / "old", version="2.9.1"), wheelhouse)
    with pytest.raises(ReleaseError, match="different versions"):
        publish.assemble([wheelhouse], None, tmp_path / "rel", allow_missing_reports=True)


def test_sidecar_mismatch_is_caught(tmp_path, wheelhouse):
    side = next(wheelhouse.glob("*legacy*.sha256"))
    side.write_text("0" * 64 + "  " + side.name[: -len(".sha256")] + "\n")
    with pytest.raises(ReleaseError, match="checksum mismatch"):
        publish.assemble([wheelhouse], None, tmp_path / "rel", allow_missing_reports=True)


def test_existing_out_is_refused(tmp_path, wheelhouse):
    (tmp_path / "rel").mkdir()
    with pytest.raises(ReleaseError, match="already exists"):
        publish.assemble([wheelhouse], None, tmp_path / "rel", allow_missing_reports=True)


def test_verify_detects_tampering_and_strays(tmp_path, wheelhouse):
    out = publish.assemble([wheelhouse], None, tmp_path / "rel", allow_missing_reports=True)
    (out / "extra.txt").write_text("x")
    with pytest.raises(ReleaseError, match="not in SHA256SUMS"):
        publish.verify_release(out)
    (out / "extra.txt").unlink()
    wheel = next(out.glob("*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"x")
    with pytest.raises(ReleaseError, match="checksum mismatch"):
        publish.verify_release(out)
    assert publish.main(["--verify", str(out)]) == 2


def test_no_wheels(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReleaseError, match="no flash_attn wheels"):
        publish.assemble([tmp_path / "empty"], None, tmp_path / "rel")
