"""Bad input gets a clear error before anything is built, and the output folder stays untouched."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
from release_fakes import make_wheel

from release.compile import options, toolchain
from release.compile.toolchain import Toolchain
from release.errors import ReleaseError
from release.sessions import wheels

GOOD = Toolchain("/usr/bin/nvcc", "13.0.88", "python", "2.14.1+cu130", "13.0", True, "gcc", "12.2.0", "/usr/bin/c++")


def opts(tmp_path, **kw) -> options.BuildOptions:
    kw.setdefault("group", "legacy")
    kw.setdefault("kernel_set", "ci")
    return options.BuildOptions(out_dir=tmp_path / "out", build_root=tmp_path / "build", **kw)


def fail_if_built(*a, **k):
    raise AssertionError("the build must not start")


@pytest.fixture(autouse=True)
def no_build(monkeypatch):
    monkeypatch.setattr(wheels.builder, "run_build", fail_if_built)


def run(o, probe=lambda: GOOD):
    return wheels.build_group(o, probe=probe)


def test_unknown_group(tmp_path):
    with pytest.raises(ReleaseError, match="unknown arch group 'hopper'. Valid groups: blackwell, legacy, custom"):
        run(opts(tmp_path, group="hopper"))


def test_unknown_kernel_set(tmp_path):
    with pytest.raises(ReleaseError, match="kernel set entry 'fwd_hdim65_fp16' matches no unit"):
        run(opts(tmp_path, kernel_set="fwd_hdim65_fp16"))


def test_custom_needs_archs_and_fixed_groups_refuse_them(tmp_path):
    with pytest.raises(ReleaseError, match="custom arch group needs --cuda-archs"):
        run(opts(tmp_path, group="custom"))
    with pytest.raises(ReleaseError, match="applies to the custom group only"):
        run(opts(tmp_path, cuda_archs=[80]))


@pytest.mark.parametrize(
    ("tc", "message"),
    [
        (dataclasses.replace(GOOD, nvcc=None, cuda_version=None), "no nvcc found"),
        (dataclasses.replace(GOOD, torch_cuda_version="12.8"), "the CUDA majors must match"),
        (dataclasses.replace(GOOD, torch_cuda_version=None, torch_version="2.14.1+cpu"), "is a CPU build"),
        (dataclasses.replace(GOOD, torch_version=None), "torch is not importable"),
        (dataclasses.replace(GOOD, compiler_id=None), "no host C\\+\\+ compiler"),
    ],
)
def test_toolchain_problems(tmp_path, tc, message):
    with pytest.raises(ReleaseError, match=message):
        run(opts(tmp_path), probe=lambda: tc)
    assert not (tmp_path / "out").exists()


def test_mismatch_message_names_both_versions():
    with pytest.raises(ReleaseError) as e:
        toolchain.check(dataclasses.replace(GOOD, torch_version="2.9.0+cu128", torch_cuda_version="12.8"))
    assert "CUDA 12.8" in str(e.value) and "13.0.88" in str(e.value)


def test_toolchain_help_prints_usage_without_probing(monkeypatch, capsys):
    def probe():
        raise AssertionError("--help must not probe the machine")

    monkeypatch.setattr(toolchain, "probe", probe)
    with pytest.raises(SystemExit) as done:
        toolchain.main(["--help"])
    assert done.value.code == 0 and "usage: python -m release.compile.toolchain" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        toolchain.main(["--bogus"])
    assert refused.value.code == 2


def test_asked_torch_differs(tmp_path, monkeypatch):
    monkeypatch.setattr(toolchain, "ensure_torch", lambda v, python=None: v)
    with pytest.raises(ReleaseError, match="asked for torch 2.13.0"):
        run(opts(tmp_path, torch_version="2.13.0"))


def test_out_dir_with_another_version(tmp_path):
    make_wheel(tmp_path / "out", version="2.9.1+cu130torch2.14.1cxx11abitrue.legacy.rev1")
    before = sorted(p.name for p in (tmp_path / "out").iterdir())
    with pytest.raises(ReleaseError, match="already holds flash_attn-2.9.1"):
        run(opts(tmp_path))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == before


def test_out_dir_with_same_version_other_group_is_fine(tmp_path):
    make_wheel(tmp_path / "out", group="blackwell", version="2.8.3.post2+cu130torch2.14.1cxx11abitrue.blackwell.rev1")
    options.check_out_dir(tmp_path / "out", "2.8.3.post2")


def test_out_path_is_a_file(tmp_path):
    (tmp_path / "out").write_text("")
    with pytest.raises(ReleaseError, match="is not a folder"):
        options.check_out_dir(tmp_path / "out", "2.8.3.post2")


@pytest.mark.parametrize(
    ("text", "archs"), [("80", [80]), ("90,80", [80, 90]), ("8.0;9.0", [80, 90]), ("sm_89 sm_89", [89])]
)
def test_parse_archs(text, archs):
    assert options.parse_archs(text) == archs


@pytest.mark.parametrize(("text", "message"), [("90a", "not an SM number"), ("75", "sm_80 or newer")])
def test_parse_archs_errors(text, message):
    with pytest.raises(ReleaseError, match=message):
        options.parse_archs(text)


def test_bad_jobs_and_fatbin_mode(tmp_path):
    with pytest.raises(ReleaseError, match=r"FLASH_ATTN_JOBS='0' \(--jobs\) is not a number of parallel nvcc jobs"):
        run(opts(tmp_path, jobs=0))
    with pytest.raises(
        ReleaseError, match="FLASH_ATTN_FATBIN_COMPRESSION='tiny' .--fatbin-compression. is not one of none, default"
    ):
        run(opts(tmp_path, passthrough={"FLASH_ATTN_FATBIN_COMPRESSION": "tiny"}))


def ns(**kw):
    base = {dest: None for dest, _, _ in options.PASS_THROUGH}
    base.update(group="legacy", kernel_set=None, cuda_archs=None, torch_version=None, out=None, build_root=None,
                jobs=None, smoke=True, smoke_deps=True, verbose=False, kernels=None, cache=None)  # fmt: skip
    base.update(kw)
    return argparse.Namespace(**base)


def test_environment_fallback_and_flag_precedence(tmp_path):
    env = {"FLASH_ATTN_KERNEL_SET": "dev", "FLASH_ATTN_JOBS": "3", "FLASH_ATTN_SDIST": str(tmp_path / "x.tar.gz"),
           "FLASH_ATTN_PACKED_FMA": "0", "FLASH_ATTN_FATBIN_COMPRESSION": "none"}  # fmt: skip
    o = options.from_namespace(ns(fatbin_compression="balance"), env)
    assert o.kernel_set == "dev" and o.jobs == 3
    assert o.passthrough == {
        "FLASH_ATTN_SDIST": str(tmp_path / "x.tar.gz"),
        "FLASH_ATTN_PACKED_FMA": "OFF",
        "FLASH_ATTN_FATBIN_COMPRESSION": "balance",
    }
    d = o.cmake_defines()
    assert d["FLASH_ATTN_ARCH_GROUP"] == "legacy" and d["FLASH_ATTN_CUDA_ARCHS"] == "" and d["FLASH_ATTN_JOBS"] == "3"


def test_defines_pass_every_option_with_its_default():
    # Every option on every configure, the defaults included, so no value from an earlier build in
    # the same folder survives in the CMake cache (issue: --apply-deltas OFF shipped on the next build).
    d = options.from_namespace(ns(), {}).cmake_defines()
    assert d == {"FLASH_ATTN_ARCH_GROUP": "legacy", "FLASH_ATTN_CUDA_ARCHS": "", "FLASH_ATTN_KERNEL_SET": "release",
                 "FLASH_ATTN_JOBS": "", "FLASH_ATTN_TORCH_ABI": "exact", "FLASH_ATTN_FATBIN_COMPRESSION": "size",
                 "FLASH_ATTN_SOURCE_DIR": "",
                 "FLASH_ATTN_SDIST": "", "FLASH_ATTN_CUTLASS_DIR": "", "FLASH_ATTN_APPLY_DELTAS": "ON",
                 "FLASH_ATTN_RESCALE_THRESHOLD": "8.0", "FLASH_ATTN_PACKED_FMA": "ON",
                 "FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET": "OFF", "FLASH_ATTN_KERNELS": "",
                 "FLASH_ATTN_KERNELS_ONLY": "OFF", "FLASH_ATTN_SHARD": "", "CMAKE_CUDA_COMPILER_LAUNCHER": "",
                 "CMAKE_CXX_COMPILER_LAUNCHER": ""}  # fmt: skip
    assert {name for _, name, _ in options.PASS_THROUGH} <= set(d)


def test_bad_boolean_and_jobs_env():
    with pytest.raises(ReleaseError, match="not a boolean"):
        options.from_namespace(ns(apply_deltas="maybe"), {})
    with pytest.raises(ReleaseError, match="FLASH_ATTN_JOBS='many'"):
        options.from_namespace(ns(), {"FLASH_ATTN_JOBS": "many"})


def test_session_group_cannot_be_overridden():
    with pytest.raises(ReleaseError, match="run nox -s wheel_custom"):
        wheels.parse(["--arch-group", "legacy", "--arch-group", "custom", "--cuda-archs", "80"])
    assert wheels.parse(["--arch-group", "legacy", "--arch-group", "legacy"]).group == "legacy"


def test_main_prints_error_and_exits_2(capsys):
    assert wheels.main(["--arch-group", "legacy", "--kernel-set", "nope"]) == 2
    assert "error: kernel set" in capsys.readouterr().err


def test_parse_compiler_banners():
    assert toolchain.parse_compiler_banner("gcc version 12.2.0 (Debian 12.2.0-14)") == ("gcc", "12.2.0")
    assert toolchain.parse_compiler_banner("Debian clang version 17.0.6 (x)\nTarget:") == ("clang", "17.0.6")
    cl = "Microsoft (R) C/C++ Optimizing Compiler Version 19.44.35207 for x64"
    assert toolchain.parse_compiler_banner(cl) == ("msvc", "19.44.35207")
    assert toolchain.parse_compiler_banner("something else") is None


def test_probe_nvcc_missing(monkeypatch):
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None)
    assert toolchain.probe_nvcc({}) == (None, None)


@pytest.mark.parametrize("gha", [False, True])
@pytest.mark.parametrize("annotate", [False, True])
def test_run_main_maps_errors_to_exit_codes_and_annotates_on_github(monkeypatch, capsys, gha, annotate):
    from release.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, CheckFailed, run_main

    monkeypatch.setenv("GITHUB_ACTIONS", "true" if gha else "false")

    def bad():
        raise ReleaseError("first line\nsecond line")

    def failed():
        raise CheckFailed("a check failed")

    assert run_main(bad, prog="release.x", annotate=annotate) == EXIT_BAD_INPUT == 2
    out, err = capsys.readouterr()
    assert err == "error: first line\nsecond line\n"
    assert out == ("::error title=release.x::first line\n" if gha and annotate else "")
    assert run_main(failed, prog="release.y") == EXIT_CHECK_FAILED == 1
    assert run_main(lambda: None) == 0


def test_every_release_module_main_goes_through_run_main():
    """One main() helper: no module of the release package maps ReleaseError to an exit status itself."""
    from pathlib import Path

    import release

    folder = Path(release.__file__).parent
    own = sorted(p.name for p in folder.rglob("*.py") if "except ReleaseError" in p.read_text(encoding="utf-8"))
    assert own == ["errors.py"], own
