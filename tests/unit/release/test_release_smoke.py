"""Smoke test of a wheel (release.ship.smoke): static checks, and a real fresh-venv run on a fake wheel."""

from __future__ import annotations

import pytest
from release_fakes import build_info, make_wheel

from release.compile import tagging
from release.errors import ReleaseError
from release.ship import smoke


def test_contents_of_a_good_tagged_wheel(fake_wheel, tmp_path):
    tagged = tagging.retag(fake_wheel, tmp_path / "t")
    facts, info = smoke.check_contents(tagged, "legacy")
    assert facts.version.endswith("+cu130torch2.14.1cxx11abitrue.legacy.rev1") and info["group"] == "legacy"


def test_untagged_wheel_is_refused(fake_wheel):
    with pytest.raises(ReleaseError, match="implies the label"):
        smoke.check_contents(fake_wheel)


def test_two_shared_objects_are_refused(tmp_path):
    wheel = tagging.retag(make_wheel(tmp_path / "raw", libs=["legacy", "blackwell"]), tmp_path / "t")
    with pytest.raises(ReleaseError, match="expected exactly _C_legacy"):
        smoke.check_contents(wheel)


def test_group_mismatch_is_refused(fake_wheel, tmp_path):
    tagged = tagging.retag(fake_wheel, tmp_path / "t")
    with pytest.raises(ReleaseError, match="_C_blackwell"):
        smoke.check_contents(tagged, "blackwell")


def test_label_must_match_build_info(tmp_path):
    raw = make_wheel(tmp_path / "raw", info=build_info(cxx11_abi=False))
    wrong = tagging.retag(raw, tmp_path / "t", label="cu130torch2.14.1cxx11abitrue.legacy.rev1")
    with pytest.raises(ReleaseError, match="cxx11abifalse"):
        smoke.check_contents(wrong)


def test_fresh_venv_run_reports_each_check(tmp_path, capsys):
    """A fake wheel installs and imports, but its library is not a real ELF: the load check must fail."""
    tagged = tagging.retag(make_wheel(tmp_path / "raw"), tmp_path / "t")
    with pytest.raises(ReleaseError) as e:
        smoke.smoke_test(tagged, "legacy", deps=False, release_paths=None)
    out = capsys.readouterr().out
    for line in (
        "[ok] pip install into a fresh venv",
        "[ok] pip metadata reports the full version: 2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1",
        "[ok] import flash_attn (the installed package)",
        "[ok] build info of the arch group: build_info_legacy.json",
        "[ok] only this group's shared object is installed: _C_legacy.so",
        "[FAILED] native library loads",
    ):
        assert line in out, out
    assert "native library loads" in str(e.value)


def test_main_rejects_missing_file(tmp_path, capsys):
    assert smoke.main([str(tmp_path / "nope.whl")]) == 2  # bad input
    assert "is not a file" in capsys.readouterr().err
