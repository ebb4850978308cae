"""release.archive.fatbin: the SASS and PTX targets read from an nvcc object's fatbin headers.

On synthetic bytes (test_release_archives.fatbin_object, and damaged variants), and on two tiny
objects compiled here with nvcc (a kernel for sm_80 SASS plus compute_90 PTX, and a host-only
source: about 3 s), whose targets must read as nvcc was asked.
"""

from __future__ import annotations

import shutil
import struct
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_release_archives import fatbin_object

from release.archive import fatbin


def test_synthetic_objects_read_their_targets():
    assert fatbin.targets(fatbin_object("x", sass=(80, 90), ptx=(90,))) == ({80, 90}, {90})
    assert fatbin.entries(fatbin_object("x", sass=(100,))) == [("sass", 100)]
    two = fatbin_object("a", sass=(80,)) + b"padding" + fatbin_object("b", sass=(89,))
    assert fatbin.targets(two) == ({80, 89}, set())


@pytest.mark.parametrize(
    "data",
    [
        b"\x7fELF no device code",
        fatbin_object("x")[:-3],  # truncated inside the last payload
        fatbin_object("x")[:30],  # truncated inside the fatbin header
        fatbin_object("x").replace(struct.pack("<HHI", 2, 0x101, 32), struct.pack("<HHI", 7, 0x101, 32)),  # kind 7
        fatbin_object("x").replace(struct.pack("<HHI", 2, 0x101, 32), struct.pack("<HHI", 2, 0x101, 8)),  # tiny hdr
    ],
)
def test_damaged_or_missing_fatbins_are_refused(data):
    with pytest.raises(fatbin.NotAFatbin):
        fatbin.entries(data)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.binary(max_size=256), st.integers(0, 255))
def test_arbitrary_bytes_never_raise_anything_but_not_a_fatbin(noise, cut):
    data = noise[: cut // 2] + fatbin_object("x", sass=(80,))[:cut] + noise
    try:
        fatbin.entries(data)
    except fatbin.NotAFatbin:
        pass


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("80-real;89-real;90-real;90-virtual", ({80, 89, 90}, {90})),
        ("100f-real;120f-real;121-real;121f-virtual", ({100, 120, 121}, {121})),
        ("80", ({80}, {80})),
        ("80-real,90", ({80, 90}, {90})),
    ],
)
def test_cuda_architectures_give_the_expected_targets(text, want):
    assert fatbin.expected(text) == want


@pytest.mark.parametrize("text", ["sm_80", "80-fake", "x-real"])
def test_odd_cuda_architectures_are_refused(text):
    with pytest.raises(ValueError):
        fatbin.expected(text)


def test_objects_compiled_by_nvcc_read_as_asked(tmp_path):
    nvcc = shutil.which("nvcc")
    assert nvcc, "nvcc is needed on PATH (CI's test machine has the CUDA toolkit, as the build tests do)"
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n")
    (tmp_path / "h.cu").write_text("int host_only(int a) { return a + 1; }\n")
    gencode = ["-gencode", "arch=compute_80,code=sm_80"]
    subprocess.run([nvcc, "-c", "k.cu", "-o", "k.o", *gencode, "-gencode", "arch=compute_90,code=compute_90"],
                   cwd=tmp_path, check=True, capture_output=True)  # fmt: skip
    subprocess.run([nvcc, "-c", "h.cu", "-o", "h.o", *gencode], cwd=tmp_path, check=True, capture_output=True)
    assert fatbin.targets((tmp_path / "k.o").read_bytes()) == ({80}, {90})
    assert fatbin.targets((tmp_path / "h.o").read_bytes()) == ({80}, set())  # host-only: a cubin all the same
