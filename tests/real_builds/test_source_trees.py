"""Local source trees (FLASH_ATTN_SOURCE_DIR): detected, refused at configure time, or built as they are.

Each test configures the real CMakeLists.txt (CMake + Ninja, no compile) against a synthetic
variant of the pinned sdist's tree (the shared `upstream_tree` fixture; CUTLASS from it too):

- main-style: ``uint64_t philox_args[4]`` read back through a reinterpret_cast, as in upstream
  main since PR #2669. The binding gets FLASH_ATTN_PHILOX_ARGS_WORDS=4, and the generated
  build.ninja compiles every binding and dispatch object before any kernel unit (fail fast);
- an unknown shape: refused by the configure, naming file, line, declaration found and expected;
- fork-style (its own rescale threshold and fma_f32x2, like ussoewwin/flash-attention): refused by
  the deltas, then configured as it is with FLASH_ATTN_APPLY_DELTAS=OFF, which the build info records.

The refusals happen before anything is compiled; each test prints the seconds the configure took
to refuse (a measurement for lab/evidence, not a pass/fail bound). About 20 s per configure on
2 idle cores: needs nvcc and torch, like every configure of this project.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNEL_DIR = Path("csrc") / "flash_attn" / "src"

PINNED_DECL = "at::PhiloxCudaState philox_args;"
PINNED_READ = "at::cuda::philox::unpack(params.philox_args)"
MAIN_DECL = "uint64_t philox_args[4];"
MAIN_READ = "at::cuda::philox::unpack(*reinterpret_cast<at::PhiloxCudaState const*>(params.philox_args))"
RESCALE_TEMPLATE = "template<bool Is_first, bool Check_inf=false, typename Tensor0, typename Tensor1>"
UTILS_INCLUDE = '#include "utils.h"'


def _cmake() -> str:
    import cmake  # the PyPI cmake (>= 4.0.2), installed by the tests session

    return str(Path(cmake.CMAKE_BIN_DIR) / "cmake")


def configure(build: Path, tree: Path, cutlass: Path, *defines: str) -> tuple[subprocess.CompletedProcess, float]:
    """Configure the project for a custom sm_80 'ci' build of `tree`; returns (result, seconds)."""
    args = [
        _cmake(),
        "-S",
        str(ROOT),
        "-B",
        str(build),
        "-G",
        "Ninja",
        f"-DPython_EXECUTABLE={sys.executable}",
        "-DFLASH_ATTN_ARCH_GROUP=custom",
        "-DFLASH_ATTN_CUDA_ARCHS=80",
        "-DFLASH_ATTN_KERNEL_SET=ci",
        f"-DFLASH_ATTN_SOURCE_DIR={tree}",
        f"-DFLASH_ATTN_CUTLASS_DIR={cutlass}",
        *defines,
    ]
    start = time.monotonic()
    result = subprocess.run(args, capture_output=True, text=True)
    return result, time.monotonic() - start


def flat(result: subprocess.CompletedProcess) -> str:
    return " ".join((result.stdout + result.stderr).split())  # CMake wraps long messages


@pytest.fixture
def tree(tmp_path: Path, upstream_tree: Path) -> Path:
    """A writable local tree: the pinned csrc/flash_attn and a flash_attn/__init__.py of its own version."""
    root = tmp_path / "tree"
    shutil.copytree(upstream_tree / "csrc" / "flash_attn", root / "csrc" / "flash_attn")
    (root / "flash_attn").mkdir()
    (root / "flash_attn" / "__init__.py").write_text('__version__ = "2.8.4"\n')
    return root


@pytest.fixture
def cutlass(upstream_tree: Path) -> Path:
    return upstream_tree / "csrc" / "cutlass" / "include"


def edit(tree: Path, name: str, old: str, new: str) -> None:
    path = tree / KERNEL_DIR / name
    text = path.read_text()
    assert text.count(old) == 1, f"{name} of the pinned sdist no longer holds `{old}` once"
    path.write_text(text.replace(old, new))


def ninja_graph(build_ninja: Path) -> dict[str, set[str]]:
    """output -> every input (explicit, implicit, order-only) of the build statements of build.ninja."""
    graph: dict[str, set[str]] = {}
    for line in build_ninja.read_text().splitlines():
        m = re.match(r"build (.+?): \S+(.*)$", line)
        if not m:
            continue
        inputs = set(m.group(2).replace("||", " ").replace("|", " ").split())
        for out in m.group(1).split():
            graph.setdefault(out, set()).update(inputs)
    return graph


def closure(graph: dict[str, set[str]], node: str) -> set[str]:
    seen, todo = set(), [node]
    while todo:
        for dep in graph.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_main_style_tree_gets_the_four_word_binding_and_compiles_the_binding_first(tmp_path, tree, cutlass):
    edit(tree, "flash.h", PINNED_DECL, MAIN_DECL)
    edit(tree, "flash_fwd_kernel.h", PINNED_READ, MAIN_READ)
    build = tmp_path / "b"
    result, _ = configure(build, tree, cutlass)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "philox_args is uint64_t[4]" in result.stdout and "FLASH_ATTN_PHILOX_ARGS_WORDS=4" in result.stdout

    text = (build / "build.ninja").read_text()
    graph = ninja_graph(build / "build.ninja")
    binding = {o for o in graph if "flash_attn_binding.dir" in o and o.endswith(".o")}
    # the torch-free kernel library of the group: the dispatch and the units
    kernels = {o for o in graph if "flash_attn_kernels_custom.dir" in o and o.endswith(".o")}
    assert {Path(o).name for o in binding} == {
        "params.cpp.o",
        "fwd.cpp.o",
        "bwd.cpp.o",
        "kvcache.cpp.o",
        "ops.cpp.o",
        "torch_free_bridge.cpp.o",
        "kernel_errors.cpp.o",
    }  # fmt: skip  (the exact ABI: ops_stable.cpp belongs to FLASH_ATTN_TORCH_ABI=stable)
    assert sorted(Path(o).name for o in kernels) == ["dispatch.cu.o", "fwd_hdim64_fp16.cu.o"]
    for obj in kernels:
        assert binding <= closure(graph, obj), f"{obj} may start before the binding objects"
    for obj in binding:
        assert not kernels & closure(graph, obj)
    # only the binding gets the shape's definition
    for stmt in re.split(r"\n(?=build )", text):
        if any(stmt.startswith(f"build {o}:") for o in binding):
            assert "-DFLASH_ATTN_PHILOX_ARGS_WORDS=4" in stmt
        if any(stmt.startswith(f"build {o}:") for o in kernels):
            assert "FLASH_ATTN_PHILOX_ARGS_WORDS" not in stmt

    info = json.loads((build / "build_info_custom.json").read_text())
    assert info["upstream"] == {
        "version": "2.8.4",
        "sha256": "",
        "source": str(tree.resolve()),
        "philox_args": "uint64_t[4]",
    }
    assert info["deltas"]["applied"] is True


def test_unknown_shape_is_refused_by_the_configure(tmp_path, tree, cutlass, record_property):
    edit(tree, "flash.h", PINNED_DECL, "uint32_t philox_args[8];")
    line = next(i for i, t in enumerate((tree / KERNEL_DIR / "flash.h").read_text().splitlines(), 1) if "[8]" in t)
    build = tmp_path / "b"
    result, seconds = configure(build, tree, cutlass)
    print(f"unknown shape refused after {seconds:.1f} s of configure")
    record_property("seconds_to_refusal", round(seconds, 1))
    assert result.returncode != 0
    text = flat(result)
    assert (
        f"csrc/flash_attn/src/flash.h:{line}: Flash_fwd_params::philox_args: found `uint32_t philox_args[8];`" in text
    )
    assert f"`{PINNED_DECL}`" in text and f"`{MAIN_DECL}`" in text
    assert f"FLASH_ATTN_SOURCE_DIR={tree}" in text and "before compiling anything" in text
    assert not (build / "build.ninja").exists()  # nothing can compile


def test_fork_style_tree_is_refused_with_deltas_and_configures_as_it_is_without(
    tmp_path, tree, cutlass, record_property
):
    fork_template = RESCALE_TEMPLATE.replace("Check_inf=false,", "Check_inf=false, bool Use_rescale_threshold=false,")
    edit(tree, "softmax.h", RESCALE_TEMPLATE, fork_template)
    helper = "__forceinline__ __device__ void fma_f32x2(float &d0, float &d1, float a0, float a1) { d0 = a0; d1 = a1; }"
    edit(tree, "softmax.h", UTILS_INCLUDE, UTILS_INCLUDE + "\n" + helper)
    lines = (tree / KERNEL_DIR / "softmax.h").read_text().splitlines()
    rescale_line = next(i for i, t in enumerate(lines, 1) if "Use_rescale_threshold" in t)
    fma_line = next(i for i, t in enumerate(lines, 1) if "fma_f32x2" in t)

    build = tmp_path / "b"
    result, seconds = configure(build, tree, cutlass)
    print(f"fork-style tree refused by the deltas after {seconds:.1f} s of configure")
    record_property("seconds_to_refusal", round(seconds, 1))
    assert result.returncode != 0
    text = flat(result)
    assert f"csrc/flash_attn/src/softmax.h:{rescale_line}: rescale skip (like A-1)" in text
    assert f"csrc/flash_attn/src/softmax.h:{fma_line}: packed FMA (like A-2)" in text
    assert "--apply-deltas OFF" in text and "nothing was compiled" in text
    assert not (build / "build.ninja").exists()

    result, _ = configure(build, tree, cutlass, "-DFLASH_ATTN_APPLY_DELTAS=OFF")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "kernel deltas not applied" in result.stdout
    staged = build / "upstream" / KERNEL_DIR / "softmax.h"
    assert staged.read_text() == (tree / KERNEL_DIR / "softmax.h").read_text()  # compiled as it is
    assert not (build / "upstream" / KERNEL_DIR / "flash_attn_wheels_deltas.h").exists()
    info = json.loads((build / "build_info_custom.json").read_text())
    assert info["deltas"] == {
        "applied": False,
        "rescale_threshold": None,
        "packed_fma": None,
        "broken_no_max_reset": None,
    }
    assert info["upstream"]["source"] == str(tree.resolve()) and info["upstream"]["version"] == "2.8.4"
    assert info["upstream"]["philox_args"] == "PhiloxCudaState"
