"""nvcc gives the same object bytes for the same inputs with the kernels build's naming flags.

A small .cu shaped like an instantiation unit (an anonymous namespace, CCCL's cuda::std headers,
a __global__ template and its explicit instantiation, and no external non-template function or
variable) is compiled for sm_80 with nvcc, twice, in two folders at different paths, as the
kernels build compiles: ``--keep --keep-dir`` and the flags of ``flash_attn_object_naming_flags``
(cmake/FlashAttnKernels.cmake, read through tests/cmake/object_naming.cmake). Without the naming
flags the two objects differ (cudafe++ puts its process id and the source's absolute path into
the anonymous-namespace names); with them they have one sha256. Needs nvcc and the PyPI cmake;
a few seconds per compile.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tests" / "cmake" / "object_naming.cmake"
UNIT = """\
#include <cuda/std/tuple>
#include <cuda/std/iterator>
namespace {
__device__ int scale(int x) { return 3 * x + 1; }
}
template <typename T, int N>
__global__ void kernel(T* out, T a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) out[i] = a * static_cast<T>(scale(i));
}
template __global__ void kernel<float, 128>(float*, float);
"""
# the kernels' nvcc flags that matter here (cmake/FlashAttnHostFlags.cmake, the fatbin compression)
NVCC_FLAGS = ["-O3", "-std=c++17", "--use_fast_math", "--expt-relaxed-constexpr", "--expt-extended-lambda",
              "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_80,code=compute_80",
              "--compress-mode=size", "-Xcompiler=-fPIC"]  # fmt: skip

pytestmark = pytest.mark.build


def _cmake() -> str:
    try:
        import cmake  # the PyPI cmake: the modules need >= 3.25 for cmake -P
    except ImportError:
        pytest.skip("the cmake package from PyPI is not installed (pip install 'cmake>=4.0.2')")
    return str(Path(cmake.CMAKE_BIN_DIR) / ("cmake.exe" if os.name == "nt" else "cmake"))


def _naming_flags(source: Path, build: Path) -> list[str]:
    proc = subprocess.run([_cmake(), f"-DSOURCE={source}", f"-DBASE={build}", "-DCOMPILER_ID=GNU", "-P", str(DRIVER)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (flags,) = re.findall(r"^-- RESULT FLAGS=(.*)$", proc.stdout, flags=re.MULTILINE)
    return flags.split(";")


def _compile(build: Path, naming: bool) -> tuple[str, str]:
    """Compile UNIT in `build` (at kernels/units/probe.cu, as the generator lays out units);
    returns (sha256 of the object, cudafe++'s module id)."""
    shutil.rmtree(build, ignore_errors=True)
    source = build / "kernels" / "units" / "probe.cu"
    source.parent.mkdir(parents=True)
    source.write_text(UNIT)
    keep = build / "nvcc-intermediates"
    keep.mkdir()
    obj = build / "probe.cu.o"
    cmd = ["nvcc", *NVCC_FLAGS, "--keep", f"--keep-dir={keep}", *(_naming_flags(source, build) if naming else [])]
    proc = subprocess.run([*cmd, "-x", "cu", "-c", str(source), "-o", str(obj)], capture_output=True, text=True,
                          cwd=build, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return hashlib.sha256(obj.read_bytes()).hexdigest(), (keep / "probe.module_id").read_text()


@pytest.fixture(scope="module")
def nvcc() -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc on PATH: this test compiles with the CUDA toolkit")


def test_without_the_naming_flags_two_compiles_differ(nvcc, tmp_path: Path):
    # The control: this source does show the variation the flags remove (else the next test proves nothing).
    (sha_a, id_a), (sha_b, id_b) = _compile(tmp_path / "a", False), _compile(tmp_path / "b" / "deeper", False)
    assert id_a != id_b and sha_a != sha_b, (
        f"nvcc now gives module id {id_a} twice: it no longer varies without flash_attn_object_naming_flags"
    )


def test_with_the_naming_flags_two_compiles_at_different_paths_are_byte_identical(nvcc, tmp_path: Path):
    (sha_a, id_a), (sha_b, id_b) = _compile(tmp_path / "a", True), _compile(tmp_path / "b" / "deeper", True)
    assert id_a == id_b, "cudafe++'s module id still depends on the process or the path"
    assert sha_a == sha_b, f"same inputs, different object bytes: {sha_a} vs {sha_b}"
