"""tools/sass_audit.py compiles with the build's nvcc flags, taken from cmake/FlashAttnHostFlags.cmake.

nvcc and g++ are stand-ins that print a version; cmake (a test pin) runs the real CMake module.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import sass_audit  # tools/sass_audit.py (tools/ is on pytest's pythonpath)
import torch

pytestmark = pytest.mark.skipif(os.name == "nt", reason="uses POSIX shell scripts as stand-in compilers")
ROOT = Path(__file__).resolve().parents[3]


def _tool(path: Path, output: str) -> str:
    path.write_text(f"#!/bin/sh\necho '{output}'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _cmake_cuda_flags(torch_version: str) -> list[str]:
    """OUT_CUDA_FLAGS of flash_attn_host_flags, through the CMake tests' own driver."""
    args = ["-DCOMPILER_ID=GNU", "-DCOMPILER_VERSION=12.2.0", "-DCUDA_VERSION=13.0", f"-DTORCH_VERSION={torch_version}"]
    proc = subprocess.run(
        [shutil.which("cmake"), *args, "-P", str(ROOT / "tests/cmake/host_flags.cmake")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("-- RESULT OUT_CUDA_FLAGS=")]
    return line.split("=", 1)[1].split(";")


@pytest.mark.parametrize(("torch_version", "std"), [("2.14.1+cu130", "-std=c++20"), ("2.12.0", "-std=c++17")])
def test_the_audit_takes_the_nvcc_flags_of_the_build(tmp_path, monkeypatch, torch_version, std):
    nvcc = _tool(tmp_path / "nvcc", "Cuda compilation tools, release 13.0, V13.0.88")
    monkeypatch.setenv("CUDAHOSTCXX", _tool(tmp_path / "g++", "12.2.0"))
    monkeypatch.setattr(torch, "__version__", torch_version)
    flags = sass_audit.nvcc_flags(tmp_path, nvcc)
    assert flags == _cmake_cuda_flags(torch_version) + sass_audit.UNIT_DEFINES
    assert std in flags and "--use_fast_math" in flags


def test_a_failing_host_flags_call_stops_the_audit(tmp_path, monkeypatch):
    nvcc = _tool(tmp_path / "nvcc", "Cuda compilation tools, release 13.0, V13.0.88")
    monkeypatch.setenv("CUDAHOSTCXX", _tool(tmp_path / "g++", "12.2.0"))
    monkeypatch.setattr(torch, "__version__", "not-a-version")
    with pytest.raises(SystemExit, match="flash_attn_host_flags failed"):
        sass_audit.nvcc_flags(tmp_path, nvcc)


def test_the_audit_threshold_is_written_as_the_build_writes_it():
    # its default is the manifest's (options.FLASH_ATTN_RESCALE_THRESHOLD.default), as CMake passes it
    assert [sass_audit.float_literal(v) for v in ("8", "8.0", "8.0f")] == ["8.0f"] * 3
