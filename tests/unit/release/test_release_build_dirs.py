"""Build directory names (release.compile.build_dirs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from release.compile import build_dirs
from release.compile.toolchain import Toolchain


def test_named_set_name():
    name = build_dirs.build_dir_name("legacy", "dev", "2.14.1+cu130", "13.0.88", "gcc", "12.2.0")
    assert name == "legacy-dev-torch2.14.1-cu130-gcc12"


def test_every_component_changes_the_name():
    base = ("legacy", "dev", "2.14.1+cu130", "13.0.88", "gcc", "12.2.0")
    names = {build_dirs.build_dir_name(*base)}
    for i, other in enumerate(("blackwell", "release", "2.13.0+cu130", "12.8.93", "clang", "13.1.0")):
        args = list(base)
        args[i] = other
        names.add(build_dirs.build_dir_name(*args))
    assert len(names) == 7


def test_torch_local_label_and_cuda_patch_do_not_matter():
    a = build_dirs.build_dir_name("legacy", "ci", "2.14.1+cu130", "13.0.88", "gcc", "12.2.0")
    b = build_dirs.build_dir_name("legacy", "ci", "2.14.1", "13.0.48", "gcc", "12.3.0")
    assert a == b


def test_explicit_list_gets_a_short_hash_independent_of_spelling():
    a = build_dirs.kernel_set_token("fwd_hdim64_fp16,fwd_hdim64_bf16")
    b = build_dirs.kernel_set_token("fwd_hdim64_bf16; fwd_hdim64_fp16")
    c = build_dirs.kernel_set_token("fwd_hdim64_*16")  # the same two units as a pattern
    d = build_dirs.kernel_set_token("fwd_hdim64_fp16")
    assert a == b == c and a.startswith("list-") and len(a) == len("list-") + 8
    assert d != a


def test_named_sets_keep_their_name():
    assert [build_dirs.kernel_set_token(s) for s in ("release", "dev", "ci")] == ["release", "dev", "ci"]


def test_custom_group_name_holds_its_archs():
    name = build_dirs.build_dir_name("custom", "ci", "2.14.1", "13.0", "gcc", "12.2.0", archs=[90, 80, 80])
    assert name.startswith("custom_sm80_90-ci-")


@pytest.mark.parametrize(
    ("cid", "ver", "token"),
    [("gcc", "12.2.0", "gcc12"), ("clang", "17.0.6", "clang17"), ("msvc", "19.44.35207", "msvc1944")],
)
def test_compiler_token(cid, ver, token):
    assert build_dirs.compiler_token(cid, ver) == token


@pytest.mark.parametrize(("v", "d"), [("13.0.88", "130"), ("12.8", "128"), ("12.10.1", "1210")])
def test_cuda_digits(v, d):
    assert build_dirs.cuda_digits(v) == d


def test_cuda_digits_rejects_garbage():
    with pytest.raises(ValueError):
        build_dirs.cuda_digits("thirteen")


def test_build_dir_from_toolchain(tmp_path):
    tc = Toolchain("/usr/bin/nvcc", "13.0.88", "python", "2.14.1+cu130", "13.0", True, "gcc", "12.2.0", "c++")
    assert build_dirs.build_dir(Path("/b"), "legacy", "release", tc) == Path(
        "/b/legacy-release-torch2.14.1-cu130-gcc12"
    )
