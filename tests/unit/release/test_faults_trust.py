"""Fault injection, trust chain (issue 34): hostile artifacts against the readers that take them.

The probes of the issue, each replayed: a shard manifest whose object path climbs out of the
output (zip-slip), a forged but self-consistent manifest, a renamed shard or gathered folder,
objects of another arch, checksum lines naming files outside the release, malformed manifests, a
temporary folder left by a killed gather. Then the same families as Hypothesis properties
(bounded and derandomized, so CI reproduces them): generated manifests, object paths, checksum
lines and wheel member names. Every probe counts into fault_probes.COUNTS, whose line ends the run:
no input lost, no corrupt output accepted, nothing written outside the output, no traceback, no
internal error. Cost: about 20 s on 2 cores.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import posixpath
import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest
import test_faults
from fault_probes import Probe
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from release_fakes import build_info, make_wheel
from test_faults import shards
from test_release_archives import FIELDS, SET, fatbin_object, make_shard

from release import checksums, confine
from release.archive import archives, integrity
from release.compile import tagging
from release.errors import ReleaseError
from release.sessions import wheels
from release.ship import publish

session_env = test_faults.session_env  # the fixture: a wheel session's surroundings without a toolchain
BOUNDED = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
T4 = {**FIELDS, "definitions": "FLASH_NAMESPACE=flash;FLASH_ATTN_RESCALE_THRESHOLD=4.0f"}


def manifest_of(folder: Path) -> dict:
    return json.loads((folder / archives.MANIFEST_NAME).read_text())


def rewrite(folder: Path, manifest: dict, rekey: bool = True, rename: bool = True) -> Path:
    """Write `manifest` into `folder`; with `rekey` its build and archive keys recomputed the way a
    forger who knows the rule would (unchecked: the shape may be hostile); with `rename` the folder
    renamed to the name those keys give. Returns the folder's (new) path."""
    if rekey:
        with contextlib.suppress(Exception):
            manifest["build_key"] = integrity.build_key(manifest["fields"])
        with contextlib.suppress(Exception):
            manifest["key"] = integrity.archive_key(manifest)
    (folder / archives.MANIFEST_NAME).write_text(json.dumps(manifest))
    if rename:
        with contextlib.suppress(Exception):
            name = integrity.archive_name(manifest["name"]["group"], manifest["name"]["set"], manifest["key"],
                                          manifest["kernels"]["shard"])  # fmt: skip
            if name != folder.name and not (folder.parent / name).exists():
                folder = folder.rename(folder.parent / name)
    return folder


def run(main, argv: list[str]) -> tuple[int, str]:
    """(exit status, stderr) of a module's main in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def expect_file(tmp: Path, fields=FIELDS) -> Path:
    """What flash_attn_import_kernels writes for a build of `fields` and the set SET."""
    f = tmp / "kernels_expected.json"
    f.write_text(json.dumps({"build_key": integrity.build_key(fields), "fields": fields, "units": SET}))
    return f


def link_refuses(archive: Path, tmp: Path, session_env: Path, message: str, fields=FIELDS) -> None:
    """Both links refuse `archive` with `message`: the wheel flow's Python check before the build and
    the verifier CMake's flash_attn_import_kernels runs (release.archive.integrity --expect)."""
    p = Probe(archive, watch=tmp)
    argv = ["--arch-group", "legacy", "--kernel-set", "ci", "--build-root", str(session_env / "b")]
    code, err = run(wheels.main, [*argv, "--kernels", str(archive), "--out", str(session_env / "w")])
    assert message in p.one_error(err, code)
    code, err = run(integrity.main, [str(archive), "--expect", str(expect_file(tmp, fields))])
    assert message in p.one_error(err, code) and str(archive) in err
    p.nothing_outside(tmp / "kernels_expected.json")


def gather_refuses(inputs: list[Path], tmp: Path, message: str) -> str:
    out = tmp / "a" / "b" / "out"
    p = Probe(*inputs, watch=tmp)
    code, err = run(archives.main, ["gather", *map(str, inputs), "--out", str(out)])
    text = p.one_error(err, code)
    assert message in text, text
    p.nothing_outside(out)
    assert not out.exists() or not [q for q in out.iterdir() if not q.name.endswith(".lock")]
    return text


# -- the examples -------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["objects/../../../victim.txt", "objects/../../victim.txt", "/tmp/victim.txt"])
def test_zip_slip_object_path_is_refused_and_nothing_outside_is_written(tmp_path, bad):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    inputs = shards(tmp_path / "in")
    manifest = manifest_of(inputs[1])
    manifest["objects"][0]["file"] = bad
    inputs[1] = rewrite(inputs[1], manifest)  # a valid key over the hostile list
    text = gather_refuses(inputs, tmp_path, "so it could name a file outside its folder")
    assert repr(bad) in text and str(inputs[1]) in text
    assert victim.read_text() == "keep me\n"


def test_an_edited_and_rekeyed_shard_is_refused_by_gather(tmp_path):
    # threshold 4 written over objects compiled with threshold 8, the build key recomputed (the old rule)
    inputs = shards(tmp_path / "in")
    manifest = manifest_of(inputs[1])
    manifest.update(fields=T4, build_key=integrity.build_key(T4))
    rewrite(inputs[1], manifest, rekey=False, rename=False)
    gather_refuses(inputs, tmp_path, "was edited or damaged")


def test_a_fully_resealed_shard_of_another_build_is_refused_by_gather_by_name(tmp_path):
    inputs = shards(tmp_path / "in")
    manifest = manifest_of(inputs[1])
    manifest["fields"] = T4
    inputs[1] = rewrite(inputs[1], manifest)
    text = gather_refuses(inputs, tmp_path, "another key")
    assert str(inputs[1]) in text and "THRESHOLD=4.0f" in text


def test_an_edited_and_rekeyed_gathered_archive_is_refused_by_both_links(session_env, tmp_path):
    archive = archives.gather(shards(tmp_path / "in"), tmp_path / "k")
    manifest = manifest_of(archive)
    manifest.update(fields=T4, build_key=integrity.build_key(T4))
    rewrite(archive, manifest, rekey=False, rename=False)
    link_refuses(archive, tmp_path, session_env, "was edited or damaged")


def test_a_resealed_gathered_archive_of_another_build_is_refused_by_the_link_naming_the_field(session_env, tmp_path):
    archive = archives.gather(shards(tmp_path / "in"), tmp_path / "k")
    manifest = manifest_of(archive)
    manifest["fields"] = T4
    archive = rewrite(archive, manifest)  # self-consistent: only the linking build's key tells
    p = Probe(archive)
    code, err = run(integrity.main, [str(archive), "--expect", str(expect_file(tmp_path))])
    text = p.one_error(err, code)
    assert "another build key" in text and "definitions" in text and "THRESHOLD=4.0f" in text


def test_a_renamed_gathered_folder_is_refused_by_both_links(session_env, tmp_path):
    archive = archives.gather(shards(tmp_path / "in"), tmp_path / "k")
    renamed = archive.rename(archive.with_name(archive.name[:-12] + "91f16bbbe61e"))
    link_refuses(renamed, tmp_path, session_env, "the folder's name is not")


def test_a_shard_folder_renamed_to_another_arch_is_refused_by_gather(tmp_path):
    inputs = shards(tmp_path / "in")
    inputs[1] = inputs[1].rename(inputs[1].with_name(inputs[1].name.replace("custom_sm80", "custom_sm90")))
    text = gather_refuses(inputs, tmp_path, "the folder's name is not")
    assert str(inputs[1]) in text


def test_objects_of_another_arch_are_refused_read_from_the_object(tmp_path, session_env):
    # a shard for sm_90, consistently keyed and named, whose objects hold sm_80 SASS
    fields90 = {**FIELDS, "cuda_architectures": "90-real"}
    one = make_shard(tmp_path / "in90", 1, 2, SET[:1], fields=fields90, sass=(90,))
    two = make_shard(tmp_path / "in90", 2, 2, SET[1:], fields=fields90, sass=(80,))
    text = gather_refuses([one, two], tmp_path, "an object of another arch")
    assert "sm_80" in text and str(two) in text
    # a gathered archive with one object swapped for another arch's, its sha256 and keys redone
    archive = archives.gather(shards(tmp_path / "in"), tmp_path / "k")
    manifest = manifest_of(archive)
    swapped = fatbin_object("an sm_90 object", sass=(90,))
    (archive / manifest["objects"][0]["file"]).write_bytes(swapped)
    manifest["objects"][0]["sha256"] = hashlib.sha256(swapped).hexdigest()
    archive = rewrite(archive, manifest)
    link_refuses(archive, tmp_path, session_env, "an object of another arch")


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (lambda m: m.update(objects={"a": 1}), "'objects' is not a non-empty list"),
        (lambda m: m["objects"][0].pop("sha256"), "objects[0].sha256"),
        (lambda m: m.pop("kernels"), "'kernels' is not an object"),
        (lambda m: m["kernels"].update(shard="1/2"), "'kernels.shard'"),
    ],
)
def test_malformed_manifests_are_one_error_not_an_internal_error(tmp_path, break_it, message):
    inputs = shards(tmp_path / "in")
    manifest = manifest_of(inputs[1])
    break_it(manifest)
    inputs[1] = rewrite(inputs[1], manifest)
    assert str(inputs[1]) in gather_refuses(inputs, tmp_path, message)


def test_a_temporary_folder_left_by_a_killed_gather_is_removed_by_the_rerun(tmp_path):
    inputs = shards(tmp_path / "in")
    name = archives.gather(inputs, tmp_path / "scratch").name
    out = tmp_path / "out"
    stale = out / f".{name}.k1ll3d"  # what outputs.temp_dir left when SIGKILL stopped the copy
    (stale / "objects").mkdir(parents=True)
    (stale / "objects" / "dispatch.o").write_bytes(b"\0" * 4096)
    p = Probe(*inputs)
    final = archives.gather(inputs, out)
    assert not stale.exists() and sorted(q.name for q in out.iterdir()) == sorted([name, f".{name}.lock"])
    p.output_ok(archives.verify_objects(archives.load(final)) is None, "gathered archive")


def release_folder(tmp_path: Path) -> Path:
    """A release folder as assemble writes it (one wheel and SHA256SUMS), without the report checks."""
    rel = tmp_path / "rel"
    rel.mkdir()
    wheel = tagging.retag(make_wheel(tmp_path / "raw", group="legacy", info=build_info("legacy")), rel)
    checksums.write_sha256sums([wheel], rel / "SHA256SUMS")
    return rel


@pytest.mark.parametrize("bad", ["../outside_rel.txt", "/etc/hostname", "sub/inner.txt", "..\\outside_rel.txt"])
def test_release_verify_refuses_a_sha256sums_line_outside_the_release(tmp_path, bad):
    rel = release_folder(tmp_path)
    (tmp_path / "outside_rel.txt").write_text("not ours\n")
    digest = checksums.sha256_file(tmp_path / "outside_rel.txt")
    with (rel / "SHA256SUMS").open("a") as f:
        f.write(f"{digest}  {bad}\n")
    p = Probe(rel)
    code, err = run(publish.main, ["--verify", str(rel)])
    text = p.one_error(err, code)
    assert "SHA256SUMS" in text and repr(bad) in text, text


def test_release_verify_refuses_a_link_in_the_release_folder(tmp_path):
    rel = release_folder(tmp_path)
    (tmp_path / "outside_rel.txt").write_text("not ours\n")
    (rel / "extra.txt").symlink_to(tmp_path / "outside_rel.txt")
    with (rel / "SHA256SUMS").open("a") as f:
        f.write(f"{checksums.sha256_file(rel / 'extra.txt')}  extra.txt\n")
    p = Probe(rel)
    code, err = run(publish.main, ["--verify", str(rel)])
    assert "not regular files" in p.one_error(err, code)


@pytest.mark.parametrize("bad", ["../outside.txt", "/etc/hostname"])
def test_checksums_refuses_names_outside_its_folder(tmp_path, bad):
    (tmp_path / "outside.txt").write_text("x\n")
    folder = tmp_path / "sums"
    folder.mkdir()
    target = Path("/etc/hostname") if bad.startswith("/") and Path(bad).is_file() else tmp_path / "outside.txt"
    (folder / "SHA256SUMS").write_text(f"{checksums.sha256_file(target)}  {bad}\n")
    p = Probe(folder)
    code, err = run(checksums.main, [str(folder / "SHA256SUMS")])
    assert repr(bad) in p.one_error(err, code)


def test_release_refuses_a_wheel_whose_sidecar_names_a_file_outside(tmp_path):
    house = tmp_path / "wheelhouse"
    wheel = tagging.retag(make_wheel(tmp_path / "raw", group="legacy", info=build_info("legacy")), house)
    sidecar = checksums.write_sidecar(wheel)
    (tmp_path / "outside.txt").write_text("x\n")
    with sidecar.open("a") as f:
        f.write(f"{checksums.sha256_file(tmp_path / 'outside.txt')}  ../outside.txt\n")
    p = Probe(house, watch=tmp_path)
    code, err = run(publish.main, ["--wheels", str(house), "--reports", str(tmp_path / "r"), "--out",
                                   str(tmp_path / "release")])  # fmt: skip
    assert "'../outside.txt'" in p.one_error(err, code)
    p.nothing_outside()


# -- the same families as properties -------------------------------------------------------------

_SEGMENTS = st.sampled_from(["..", ".", "", "objects", "dispatch.o", "a", "C:", "c:x", "\\", "..\\..", "~", "\x00",
                             "ü", " ", "//server", "etc", "victim.txt"])  # fmt: skip
HOSTILE_PATHS = st.one_of(
    st.lists(_SEGMENTS, min_size=1, max_size=6).map("/".join),
    st.text(alphabet="./\\:a~\x00 ", min_size=0, max_size=12),
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=True) | st.text(max_size=8) | HOSTILE_PATHS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _set_at(manifest: dict, path: list, value) -> None:
    """Set `value` at `path` in `manifest` (keys into dicts, indexes into lists) if that path exists."""
    node = manifest
    for step in path[:-1]:
        node = node[step] if isinstance(node, dict) and step in node else None
        if node is None:
            return
    if isinstance(node, dict):
        node[path[-1]] = value


PLACES = st.sampled_from([
    ["format"], ["key"], ["build_key"], ["fields"], ["fields", "cuda_architectures"], ["name"], ["name", "group"],
    ["kernels"], ["kernels", "shard"], ["kernels", "kernels"], ["objects"], ["toolchain"],
])  # fmt: skip


def _hostile_gather(root: Path, change) -> None:
    """Gather two shards, the second changed by `change(manifest, objects)` and re-keyed and renamed,
    into root/a/b/out: refused with one error line, or a whole archive that verifies; never an
    internal error or traceback, an input changed, or a path outside the output written."""
    inputs = shards(root / "in")
    (root / "victim.txt").write_text("keep me\n")
    manifest = manifest_of(inputs[1])
    change(manifest)
    inputs[1] = rewrite(inputs[1], manifest)
    out = root / "a" / "b" / "out"
    p = Probe(*inputs, watch=root)
    code, err = run(archives.main, ["gather", *map(str, inputs), "--out", str(out)])
    if code == 0:
        (final,) = [q for q in out.iterdir() if q.is_dir()]
        p.output_ok(archive_verifies(final), f"gathered {final}")
    else:
        p.one_error(err, code)
    p.nothing_outside(out)


def archive_verifies(folder: Path) -> bool:
    try:
        archives.verify_objects(archives.load(folder))
    except ReleaseError:
        return False
    return True


@BOUNDED
@given(place=PLACES, value=JSON)
def test_generated_manifest_fields_never_escape_or_crash(place, value):
    with tempfile.TemporaryDirectory() as tmp:
        _hostile_gather(Path(tmp), lambda m: _set_at(m, place, value))


@BOUNDED
@given(bad=HOSTILE_PATHS, where=st.sampled_from(["file", "unit"]))
def test_generated_object_paths_never_escape_or_crash(bad, where):
    with tempfile.TemporaryDirectory() as tmp:
        _hostile_gather(Path(tmp), lambda m: m["objects"][0].update({where: bad}))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(name=st.one_of(HOSTILE_PATHS, st.text(max_size=16)))
def test_the_confinement_rule_accepts_only_paths_inside(name):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        try:
            path = confine.join(root, name, "probe")
        except ReleaseError as e:
            assert str(e).count("\n") == 0
            return
        assert posixpath.normpath(name) == name and not name.startswith("/") and ".." not in name.split("/")
        assert "\\" not in name and ":" not in name
        real = os.path.realpath(path)
        assert os.path.commonpath([real, os.path.realpath(root)]) == os.path.realpath(root)


@BOUNDED
@given(lines=st.lists(st.tuples(st.sampled_from(["good", "other"]), HOSTILE_PATHS), min_size=1, max_size=3))
def test_generated_checksum_lines_never_verify_a_file_outside(lines):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "rel" / "inner"
        folder.mkdir(parents=True)
        (folder / "good").write_text("good\n")
        (root / "victim.txt").write_text("outside\n")
        digest = {"good": checksums.sha256_file(folder / "good"), "other": checksums.sha256_file(root / "victim.txt")}
        (folder / "SHA256SUMS").write_text("".join(f"{digest[d]}  {n}\n" for d, n in lines))
        p = Probe(folder, watch=root)
        code, err = run(checksums.main, [str(folder / "SHA256SUMS")])
        if code == 0:
            # only files of the folder itself can have verified
            names = [n for _, n in lines]
            p.output_ok(all((folder / n).resolve().parent == folder.resolve() for n in names), f"verified {names}")
        else:
            p.one_error(err, code)
        p.nothing_outside()


@pytest.fixture(scope="module")
def tagged_wheel(tmp_path_factory) -> Path:
    """One tagged wheel (retag runs `wheel pack`: too slow to repeat per example)."""
    tmp = tmp_path_factory.mktemp("wheel")
    return tagging.retag(make_wheel(tmp / "raw", group="legacy", info=build_info("legacy")), tmp / "w")


@BOUNDED
@given(bad=HOSTILE_PATHS.filter(lambda n: confine._why(n) is not None), in_record=st.booleans())
def test_generated_wheel_member_names_are_refused(tagged_wheel, bad, in_record):
    assume(in_record or (bad and "\x00" not in bad and not bad.endswith("/")))  # zipfile: no name, cut at NUL, folder
    with tempfile.TemporaryDirectory() as tmp:
        wheel = Path(tmp) / tagged_wheel.name
        hostile = wheel.with_name("hostile.tmp")
        with zipfile.ZipFile(tagged_wheel) as src, zipfile.ZipFile(hostile, "w") as dst:
            for info in src.infolist():
                data = src.read(info)
                if in_record and info.filename.endswith("/RECORD"):
                    data += f"{bad},,\n".encode("utf-8", "surrogatepass")
                dst.writestr(info, data)
            if not in_record:
                dst.writestr(bad, b"x")
        shutil.move(hostile, wheel)
        p = Probe()
        with pytest.raises(ReleaseError) as e:
            tagging.verify_wheel(wheel)
        p.one_error(f"error: {e.value}".replace("\n", " "), 2)
