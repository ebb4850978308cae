"""The shape detection of the upstream declarations the binding touches (src/kernels/upstream_shape.py).

Trees are synthetic variants of the pinned sdist's csrc/flash_attn/src (the shared `upstream_tree`
fixture): the pinned tree itself, a main-style tree (``uint64_t philox_args[4]`` read back through
a reinterpret_cast, as upstream main since PR #2669 has it), and trees of shapes the binding does
not know. The configure-time refusal through CMake is tests/real_builds/test_source_trees.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "src" / "kernels" / "upstream_shape.py"
KERNEL_DIR = Path("csrc") / "flash_attn" / "src"

import upstream_shape  # noqa: E402  (src/kernels/ is on pytest's pythonpath: the script's own folder when run)

PINNED_DECL = "at::PhiloxCudaState philox_args;"
PINNED_READ = "at::cuda::philox::unpack(params.philox_args)"
MAIN_DECL = "uint64_t philox_args[4];"
MAIN_READ = "at::cuda::philox::unpack(*reinterpret_cast<at::PhiloxCudaState const*>(params.philox_args))"


def run_script(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--tree", str(tree)], capture_output=True, text=True)


@pytest.fixture
def tree(tmp_path: Path, upstream_tree: Path) -> Path:
    """A writable copy of the pinned sdist's csrc/flash_attn/src."""
    shutil.copytree(upstream_tree / KERNEL_DIR, tmp_path / KERNEL_DIR)
    return tmp_path


def edit(tree: Path, name: str, old: str, new: str) -> None:
    path = tree / KERNEL_DIR / name
    text = path.read_text()
    assert text.count(old) == 1, f"{name} of the pinned sdist no longer holds `{old}` once"
    path.write_text(text.replace(old, new))


def main_style(tree: Path) -> Path:
    """The pinned tree with upstream main's philox_args: uint64_t[4], read back as an at::PhiloxCudaState."""
    edit(tree, "flash.h", PINNED_DECL, MAIN_DECL)
    edit(tree, "flash_fwd_kernel.h", PINNED_READ, MAIN_READ)
    return tree


def line_of(tree: Path, name: str, text: str) -> int:
    lines = (tree / KERNEL_DIR / name).read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if text in line)


def test_pinned_tree_is_the_philox_state_form(upstream_tree: Path):
    shape = upstream_shape.detect(upstream_tree)
    assert shape["philox_args"] == "PhiloxCudaState"
    assert shape["definitions"] == ["FLASH_ATTN_PHILOX_ARGS_WORDS=0"]
    assert f"flash.h:{line_of(upstream_tree, 'flash.h', PINNED_DECL)}" in shape["summary"]


def test_main_style_tree_is_the_four_word_form(tree: Path):
    main_style(tree)
    r = run_script(tree)
    assert r.returncode == 0, r.stderr
    shape = json.loads(r.stdout)
    assert shape["philox_args"] == "uint64_t[4]"
    assert shape["definitions"] == ["FLASH_ATTN_PHILOX_ARGS_WORDS=4"]


def test_main_style_spellings_are_whitespace_and_comment_insensitive(tree: Path):
    edit(tree, "flash.h", PINNED_DECL, "std::uint64_t   philox_args [ 4 ] ;  // opaque")
    edit(
        tree,
        "flash_fwd_kernel.h",
        PINNED_READ,
        "at::cuda::philox::unpack( *reinterpret_cast<const at::PhiloxCudaState *>( params.philox_args ) )",
    )
    assert upstream_shape.detect(tree)["philox_args"] == "uint64_t[4]"


def test_a_commented_out_declaration_does_not_count(tree: Path):
    edit(tree, "flash.h", PINNED_DECL, f"// {MAIN_DECL}\n    {PINNED_DECL}")
    assert upstream_shape.detect(tree)["philox_args"] == "PhiloxCudaState"


FWD_DECL = "void run_mha_fwd_(Flash_fwd_params &params, cudaStream_t stream);"
FWD_DECL_CHANGED = "void run_mha_fwd_(Flash_fwd_params &params, cudaStream_t stream, bool sync);"


@pytest.mark.parametrize(
    ("old", "new", "err_file", "err_line", "what", "found", "expected"),
    [
        # an unknown philox_args type
        (
            PINNED_DECL,
            "uint32_t philox_args[8];",
            "flash.h",
            "philox_args[8]",
            "Flash_fwd_params::philox_args",
            "uint32_t philox_args[8];",
            [PINNED_DECL, MAIN_DECL],
        ),
        # main's declaration, but the kernel still reads it as an at::PhiloxCudaState member
        (
            PINNED_DECL,
            MAIN_DECL,
            "flash_fwd_kernel.h",
            PINNED_READ,
            "the kernel's read of philox_args (declared as uint64_t[4] in flash.h)",
            PINNED_READ,
            [MAIN_READ],
        ),
        # rng_state is pointed at a (seed, offset) int64 tensor
        (
            "uint64_t * rng_state;",
            "uint32_t * rng_state;",
            "flash.h",
            "uint32_t * rng_state",
            "Flash_fwd_params::rng_state",
            "uint32_t * rng_state;",
            ["uint64_t * rng_state;"],
        ),
        # the dispatch calls run_mha_fwd_(params, stream)
        (
            FWD_DECL,
            FWD_DECL_CHANGED,
            "flash.h",
            "run_mha_fwd_(",
            "the launch template run_mha_fwd_",
            FWD_DECL_CHANGED,
            ["(Flash_fwd_params &, cudaStream_t);"],
        ),
    ],
)
def test_unknown_shape_is_refused_naming_file_line_found_and_expected(
    tree, old, new, err_file, err_line, what, found, expected
):
    edit(tree, "flash.h", old, new)
    r = run_script(tree)
    assert r.returncode == upstream_shape.EXIT_UNKNOWN and r.stdout == ""
    first = r.stderr.splitlines()[0]
    where = f"csrc/flash_attn/src/{err_file}:{line_of(tree, err_file, err_line)}"
    assert first.startswith(f"upstream_shape: error: {where}: {what}: found `"), first
    assert found in first
    for e in expected:
        assert e in first
    assert "--source-dir" in r.stderr and "src/binding/params.cpp" in r.stderr


def test_a_kernel_that_reads_philox_args_some_other_way_is_refused(tree: Path):
    main_style(tree)
    edit(
        tree,
        "flash_fwd_kernel.h",
        MAIN_READ,
        "FLASH_NAMESPACE::my_unpack(params.philox_args[0], params.philox_args[1])",
    )
    with pytest.raises(upstream_shape.ShapeError) as e:
        upstream_shape.detect(tree)
    assert e.value.file == "csrc/flash_attn/src/flash_fwd_kernel.h"
    assert e.value.line == line_of(tree, "flash_fwd_kernel.h", "my_unpack")
    assert "my_unpack" in e.value.found


def test_missing_member_and_missing_flash_h_are_refused(tree: Path, tmp_path: Path):
    edit(tree, "flash.h", PINNED_DECL, "")
    with pytest.raises(upstream_shape.ShapeError, match="philox_args: found `no such member`"):
        upstream_shape.detect(tree)
    (tree / KERNEL_DIR / "flash.h").unlink()
    r = run_script(tree)
    assert r.returncode == 2 and "csrc/flash_attn/src/flash.h: flash.h: found `file missing`" in r.stderr


def test_every_known_form_has_a_matching_branch_in_the_binding():
    """params.cpp must have a branch for each FLASH_ATTN_PHILOX_ARGS_WORDS the detection can emit."""
    source = (REPO / "src" / "binding" / "params.cpp").read_text()
    for form in upstream_shape.PHILOX_FORMS:
        assert f"FLASH_ATTN_PHILOX_ARGS_WORDS == {form.words}" in source, form.name
    assert "#error" in source  # an unknown value cannot compile silently
