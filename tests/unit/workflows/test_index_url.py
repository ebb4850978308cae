"""The package index: its URL derived from the repository (release.index_url, never a placeholder in a
wheel), the tag gate that refuses another repository's URL, the draft-only publish gate, and the index of
every published release that index.yml builds from SHA256SUMS files (release.ship.index --published)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from release import index_url, manifest
from release.compile import builder
from release.errors import ReleaseError
from release.ship import gates, index

ROOT = Path(__file__).resolve().parents[3]
VERSION = "2.8.3.post2"
TAG = f"refs/tags/v{VERSION}-rev1"
CUSTOM = {"package_index": {"url": "https://wheels.example.net/fa/", "repository": "Dao/flash"}}


# --- the URL ------------------------------------------------------------------------------------------


def test_pages_url_of_a_project_and_of_a_user_site():
    assert index_url.pages_url("SomeOne/wheels") == "https://someone.github.io/wheels/"
    assert index_url.pages_url("SomeOne/someone.github.io") == "https://someone.github.io/"
    for bad in ("", "a", "a/b/c", "../x", "a/..", "a b/c", "-a/b"):
        with pytest.raises(ReleaseError, match="not a GitHub repository"):
            index_url.pages_url(bad)


def test_the_manifest_holds_no_placeholder_and_cmake_does_not_read_it():
    entry = manifest.load()["package_index"]
    assert entry["url"] is None and entry["repository"] is None, "derived from the repository (release.index_url)"
    cmake = (ROOT / "cmake" / "FlashAttnBuildInfo.cmake").read_text(encoding="utf-8")
    assert "package_index" not in cmake.split("function(flash_attn_write_build_info)")[1]
    assert 'set(index_url "$ENV{FLASH_ATTN_INDEX_URL}")' in cmake


def test_a_build_records_the_repositorys_index_or_none():
    assert builder.build_env({"GITHUB_REPOSITORY": "Me/fa"})[index_url.ENV] == "https://me.github.io/fa/"
    assert builder.build_env({})[index_url.ENV] == "", "outside a workflow: no install line"
    # a value set by hand never reaches the wheel
    hand = {"FLASH_ATTN_INDEX_URL": "https://OWNER.github.io/REPO/"}
    assert builder.build_env(hand)[index_url.ENV] == ""
    assert index_url.resolve({"GITHUB_REPOSITORY": "dao/flash"}, CUSTOM) == "https://wheels.example.net/fa/"
    assert index_url.resolve({"GITHUB_REPOSITORY": "fork/flash"}, CUSTOM) == "https://fork.github.io/flash/"


# GitHub owner and repository names; the URL any of them gets is never a template.
_OWNER = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,20}", fullmatch=True)
_NAME = st.from_regex(r"[A-Za-z0-9._-]{1,30}", fullmatch=True).filter(lambda n: n not in (".", ".."))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(_OWNER, _NAME, st.sampled_from(["env", "hand", "none"]))
def test_no_placeholder_can_reach_a_tagged_wheel(owner, name, how):
    """Whatever the environment of a tagged build, the URL its build info records is the repository's
    Pages site or nothing: never OWNER/REPO, a template or a hand-set value."""
    env = {"FLASH_ATTN_INDEX_URL": "https://OWNER.github.io/REPO/"} if how == "hand" else {}
    if how != "none":
        env["GITHUB_REPOSITORY"] = f"{owner}/{name}"
    url = builder.build_env(env)[index_url.ENV]
    if how == "none":
        assert url == ""
    else:
        assert url == index_url.check_for_tag(f"{owner}/{name}") == index_url.pages_url(f"{owner}/{name}")
        assert url.startswith("https://") and not re.search(r"OWNER|/REPO/|[<>{}]", url)


def test_a_placeholder_or_half_custom_entry_is_refused():
    for doc, message in (
        ({"package_index": {"url": "https://OWNER.github.io/REPO/", "repository": "a/b"}}, "not a served https"),
        ({"package_index": {"url": "http://x.org/", "repository": "a/b"}}, "not a served https"),
        ({"package_index": {"url": "https://x.org/", "repository": None}}, "sets only one"),
    ):
        with pytest.raises(ReleaseError, match=message):
            index_url.resolve({"GITHUB_REPOSITORY": "a/b"}, doc)


def test_the_tag_gate_refuses_another_repositorys_index(tmp_path, monkeypatch, capsys):
    assert index_url.check_for_tag("dao/flash", CUSTOM) == "https://wheels.example.net/fa/"
    with pytest.raises(ReleaseError, match="another project's index"):
        index_url.check_for_tag("fork/flash", CUSTOM)
    custom = tmp_path / "manifest.json"
    doc = manifest.load()
    doc["package_index"] = CUSTOM["package_index"]
    custom.write_text(json.dumps(doc), encoding="utf-8")
    monkeypatch.setenv(manifest.ENV, str(custom))
    out = tmp_path / "out"
    argv = ["plan", "--event", "push", "--ref", TAG, "--github-output", str(out)]
    assert gates.main([*argv, "--repository", "fork/flash"]) == 2
    assert "another project's index" in capsys.readouterr().err and not out.exists(), "refused before any output"
    assert gates.main([*argv, "--repository", "Dao/flash"]) == 0
    assert "https://wheels.example.net/fa/" in capsys.readouterr().out
    # a branch run builds nothing that ships: no check
    assert gates.main(["plan", "--event", "push", "--ref", "refs/heads/main", "--repository", "fork/flash"]) == 0


# --- publish writes only a draft ----------------------------------------------------------------------


def _releases(tmp_path: Path, rows: list) -> Path:
    path = tmp_path / "releases.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_draft_gate_new_draft_published(tmp_path, capsys):
    tag = f"v{VERSION}-rev1"
    old = {"tag_name": f"v{VERSION}-rev0", "draft": False, "id": 1}
    assert gates.draft_state(gates.read_releases(_releases(tmp_path, [old])), tag) == "new"
    assert gates.draft_state([old, {"tag_name": tag, "draft": True, "id": 2}], tag) == "draft"
    with pytest.raises(ReleaseError, match="already published"):
        gates.draft_state([old, {"tag_name": tag, "draft": False, "id": 2}], tag)
    with pytest.raises(ReleaseError, match="2 releases have the tag"):
        gates.draft_state([{"tag_name": tag, "draft": True, "id": 2}, {"tag_name": tag, "draft": True, "id": 3}], tag)
    out = tmp_path / "out"
    rows = [old, {"tag_name": tag, "draft": True, "id": 2}]
    assert (
        gates.main(["draft", "--releases", str(_releases(tmp_path, rows)), "--tag", tag, "--github-output", str(out)])
        == 0
    )
    assert out.read_text() == "state=draft\n"
    published = _releases(tmp_path, [{"tag_name": tag, "draft": False, "id": 2}])
    assert gates.main(["draft", "--releases", str(published), "--tag", tag]) == 2
    assert "already published" in capsys.readouterr().err


@pytest.mark.parametrize("line", ["not json", "[1]", '{"tag_name": 1, "draft": false}', '{"tag_name": "v1"}'])
def test_a_malformed_release_list_is_refused(tmp_path, line):
    with pytest.raises(ReleaseError, match="line 1 is not a release"):
        gates.read_releases(_releases(tmp_path, [line]))


# --- the index of every published release ---------------------------------------------------------------

H = "ab" * 32


def _wheel(label: str, version: str = VERSION, plat: str = "linux_x86_64") -> str:
    return f"flash_attn-{version}+{label}-cp310-abi3-{plat}.whl"


def test_variant_of_a_wheel_name():
    assert index.variant_of_name(_wheel("cu130torchstable2.11.legacy.rev1")) == "cu13/legacy/stable"
    assert index.variant_of_name(_wheel("cu132torchstable2.11.blackwell.rev2", plat="win_amd64")) == (
        "cu13/blackwell/stable"
    )
    exact = _wheel("cu126torch2.10.1cxx11abitrue.legacy.rev1")
    assert index.variant_of_name(exact) == "cu12/legacy/torch2.10.1"
    for bad in (
        "../" + exact,
        "dir/" + exact,
        _wheel("cu130torchstable2.11.legacy.rev1.ci"),  # another kernel set never ships
        "flash_attn-2.8.3.post2-cp310-abi3-linux_x86_64.whl",
        "other-1.0+cu130torchstable2.11.legacy.rev1-cp310-abi3-linux_x86_64.whl",
        exact.replace(".whl", ".whl\n"),
    ):
        with pytest.raises(ReleaseError, match="not a release wheel name"):
            index.variant_of_name(bad)


def _published(tmp_path: Path) -> tuple[Path, Path]:
    rows = [
        {"tag_name": f"v{VERSION}-rev1", "draft": False, "prerelease": False, "id": 1},
        {"tag_name": f"v{VERSION}-rev2", "draft": False, "prerelease": False, "id": 2},
        {"tag_name": f"v{VERSION}-rev3", "draft": True, "prerelease": False, "id": 3},  # never listed
        {"tag_name": "nightly", "draft": False, "prerelease": True, "id": 4},  # not a release tag
    ]
    sums = tmp_path / "sums"
    for rev in (1, 2):
        d = sums / f"v{VERSION}-rev{rev}"
        d.mkdir(parents=True)
        names = [_wheel(f"cu130torchstable2.11.legacy.rev{rev}"), _wheel(f"cu130torchstable2.11.blackwell.rev{rev}")]
        d.joinpath("SHA256SUMS").write_text(
            "".join(f"{H}  {n}\n" for n in names) + f"{H}  build-summary-x.json\n", encoding="utf-8"
        )
    return _releases(tmp_path, rows), sums


def test_the_index_lists_every_published_release_and_no_draft(tmp_path, capsys):
    releases, sums = _published(tmp_path)
    assert index.main(["--list-tags", str(releases)]) == 0
    assert capsys.readouterr().out.split() == [f"v{VERSION}-rev1", f"v{VERSION}-rev2"]
    argv = ["--published", str(releases), "--sums-dir", str(sums), "--repo", "Me/fa", "--out", str(tmp_path / "site")]
    assert index.main(argv) == 0, capsys.readouterr().err
    page = (tmp_path / "site/cu13/legacy/stable/simple/flash-attn/index.html").read_text()
    for rev in (1, 2):
        name = _wheel(f"cu130torchstable2.11.legacy.rev{rev}").replace("+", "%2B")
        assert f"https://github.com/Me/fa/releases/download/v{VERSION}-rev{rev}/{name}#sha256={H}" in page
    assert "rev3" not in page and "nightly" not in page
    assert "--index-url https://me.github.io/fa/cu13/legacy/stable/simple" in (tmp_path / "site/index.html").read_text()


def test_an_untrusted_sums_file_is_refused_and_nothing_written(tmp_path, capsys):
    releases, sums = _published(tmp_path)
    f = sums / f"v{VERSION}-rev2" / "SHA256SUMS"
    f.write_text(f.read_text() + f"{H}  ../../evil/{_wheel('cu130torchstable2.11.legacy.rev2')}\n")
    argv = ["--published", str(releases), "--sums-dir", str(sums), "--repo", "Me/fa", "--out", str(tmp_path / "site")]
    assert index.main(argv) == 2
    err = capsys.readouterr().err  # refused by the confinement rule of SHA256SUMS, naming the file
    assert "SHA256SUMS of release" in err and "outside its folder" in err, err
    assert not (tmp_path / "site").exists() and not list(tmp_path.glob(".site.partial-*"))
    f.unlink()
    assert index.main(argv) == 2 and "download it: gh release download" in capsys.readouterr().err
