"""Tests of cmake/FlashAttnArchGroups.cmake, cmake/FlashAttnHostFlags.cmake and the option macro.

Each test runs one of the `cmake -P` driver scripts in this folder with the
CMake from the `cmake` Python package (PyPI; the system cmake may be too old)
and compares the exact results. No GPU and no nvcc are needed: the functions
take the CUDA version as an argument. The option test configures a project that
includes only the option modules (no language enabled).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import archive_fakes
import pytest

HERE = Path(__file__).resolve().parent


def _find_cmake() -> str | None:
    try:
        import cmake  # the PyPI package
    except ImportError:
        return None
    exe = Path(cmake.CMAKE_BIN_DIR) / ("cmake.exe" if os.name == "nt" else "cmake")
    return str(exe) if exe.is_file() else None


CMAKE = _find_cmake()
pytestmark = pytest.mark.skipif(
    CMAKE is None,
    reason="the PyPI `cmake` package is not installed (python3 -m pip install cmake); "
    "these tests need its cmake >= 3.25 to run the modules with `cmake -P`",
)


def run_script(script: str, **defines: str) -> subprocess.CompletedProcess:
    """Run tests/cmake/<script> with -D<name>=<value> for each keyword."""
    cmd = [CMAKE]
    cmd += [f"-D{name}={value}" for name, value in defines.items()]
    cmd += ["-P", str(HERE / script)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def results(proc: subprocess.CompletedProcess) -> dict[str, str]:
    assert proc.returncode == 0, f"cmake failed:\n{proc.stdout}\n{proc.stderr}"
    out = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^-- RESULT (\w+)=(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def status_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line[3:] for line in proc.stdout.splitlines() if line.startswith("-- flash_attn:")]


def error_text(proc: subprocess.CompletedProcess) -> str:
    """The FATAL_ERROR text, whitespace collapsed (CMake wraps long messages)."""
    assert proc.returncode != 0, f"cmake succeeded but should have failed:\n{proc.stdout}"
    assert "CMake Error" in proc.stderr, proc.stderr
    return " ".join(proc.stderr.split())


def arch_group(group=None, cuda=None, archs=None, quoted=False):
    defines = {"QUOTED": "ON"} if quoted else {}
    if group is not None:
        defines["GROUP"] = group
    if cuda is not None:
        defines["CUDA_VERSION"] = cuda
    if archs is not None:
        defines["ARCHS"] = archs
    return run_script("arch_group_targets.cmake", **defines)


# --------------------------------------------------------------------------
# Arch groups: results
# --------------------------------------------------------------------------

LEGACY = {
    "OUT_ARCHS": "80;89;90",
    "OUT_CUDA_ARCHITECTURES": "80-real;89-real;90-real;90-virtual",
    "OUT_PTX_ARCH": "90",
    "OUT_SASS": "sm_80;sm_89;sm_90",
}

BLACKWELL_FAMILY = {
    "OUT_ARCHS": "100;120;121",
    "OUT_CUDA_ARCHITECTURES": "100f-real;120f-real;121-real;121-virtual",
    "OUT_PTX_ARCH": "121",
    "OUT_SASS": "sm_100f;sm_120f;sm_121",
}


@pytest.mark.parametrize("cuda", ["12.8", "12.9", "13.0", "13.2", "13.0.88"])
def test_legacy(cuda):
    proc = arch_group("legacy", cuda)
    assert results(proc) == LEGACY
    assert status_lines(proc) == [
        f"flash_attn: arch group legacy (CUDA {cuda}) -> CUDA_ARCHITECTURES "
        "80-real;89-real;90-real;90-virtual (SASS: sm_80;sm_89;sm_90; PTX: compute_90)"
    ]


@pytest.mark.parametrize("cuda", ["12.9", "13.0", "13.2", "12.9.1"])
def test_blackwell(cuda):
    proc = arch_group("blackwell", cuda)
    assert results(proc) == BLACKWELL_FAMILY
    assert status_lines(proc) == [
        f"flash_attn: sm_100 -> 100f-real (family-specific SASS, CUDA {cuda} >= 12.9)",
        f"flash_attn: sm_120 -> 120f-real (family-specific SASS, CUDA {cuda} >= 12.9)",
        f"flash_attn: arch group blackwell (CUDA {cuda}) -> CUDA_ARCHITECTURES "
        "100f-real;120f-real;121-real;121-virtual "
        "(SASS: sm_100f;sm_120f;sm_121; PTX: compute_121)",
    ]


@pytest.mark.parametrize(
    "cuda, archs, expected",
    [
        # plain SASS before family-specific targets exist (CUDA 12.8)
        ("12.8", "80;90", ("80;90", "80-real;90-real;90-virtual", "90", "sm_80;sm_90")),
        (
            "12.8",
            "8.0;10.0;12.0",
            ("80;100;120", "80-real;100-real;120-real;120-virtual", "120", "sm_80;sm_100;sm_120"),
        ),
        ("12.9", "8.0;9.0", ("80;90", "80-real;90-real;90-virtual", "90", "sm_80;sm_90")),
        ("12.9", "12.0", ("120", "120f-real;120-virtual", "120", "sm_120f")),
        # unsorted, duplicated, mixed spellings
        ("13.0", "90;80;9.0;sm_80", ("80;90", "80-real;90-real;90-virtual", "90", "sm_80;sm_90")),
        (
            "13.0",
            "100;103",
            ("100;103", "100f-real;103-real;103-virtual", "103", "sm_100f;sm_103"),
        ),
        ("13.2", "sm_86;12.1", ("86;121", "86-real;121-real;121-virtual", "121", "sm_86;sm_121")),
        (
            "13.2",
            "80;89;90;100;120;121",
            (
                "80;89;90;100;120;121",
                "80-real;89-real;90-real;100f-real;120f-real;121-real;121-virtual",
                "121",
                "sm_80;sm_89;sm_90;sm_100f;sm_120f;sm_121",
            ),
        ),
    ],
)
def test_custom(cuda, archs, expected):
    keys = ("OUT_ARCHS", "OUT_CUDA_ARCHITECTURES", "OUT_PTX_ARCH", "OUT_SASS")
    assert results(arch_group("custom", cuda, archs)) == dict(zip(keys, expected, strict=True))


@pytest.mark.parametrize("quoted", [False, True])
@pytest.mark.parametrize("archs", ["", ";"])
def test_fixed_group_ignores_empty_archs(archs, quoted):
    """CMakeLists.txt passes ARCHS "${FLASH_ATTN_CUDA_ARCHS}" for every group."""
    assert results(arch_group("legacy", "13.0", archs, quoted)) == LEGACY
    assert results(arch_group("blackwell", "13.0", archs, quoted)) == BLACKWELL_FAMILY


@pytest.mark.parametrize("archs", ["8.0;9.0", "80,90", "8.0 9.0", " sm_90 ; 80 "])
def test_custom_archs_as_one_quoted_argument(archs):
    """ARCHS "<list>" arrives as one element under PARSE_ARGV; it is split."""
    assert results(arch_group("custom", "13.0", archs, quoted=True)) == {
        "OUT_ARCHS": "80;90",
        "OUT_CUDA_ARCHITECTURES": "80-real;90-real;90-virtual",
        "OUT_PTX_ARCH": "90",
        "OUT_SASS": "sm_80;sm_90",
    }


def test_groups_list_and_scope():
    """Modules included in a function scope still work; the list helper."""
    proc = run_script("module_scope.cmake")
    assert results(proc) == {"GROUPS": "blackwell;legacy;custom"}


# --------------------------------------------------------------------------
# Arch groups: refusals
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "group, cuda, archs, message",
    [
        # Blackwell before CUDA 12.8
        ("blackwell", "12.6", None, "sm_100 (Blackwell, B200) needs CUDA 12.8 or newer; this toolkit is CUDA 12.6"),
        ("custom", "12.6", "100", "sm_100 (Blackwell, B200) needs CUDA 12.8 or newer; this toolkit is CUDA 12.6"),
        (
            "custom",
            "12.4",
            "80;120",
            "sm_120 (Blackwell, RTX 50xx / RTX PRO) needs CUDA 12.8 or newer; this toolkit is CUDA 12.4",
        ),
        # sm_121 before CUDA 12.9
        (
            "blackwell",
            "12.8",
            None,
            "sm_121 (Blackwell, GB10 / DGX Spark) needs CUDA 12.9 or newer; this toolkit is CUDA 12.8",
        ),
        (
            "custom",
            "12.8.1",
            "12.1",
            "sm_121 (Blackwell, GB10 / DGX Spark) needs CUDA 12.9 or newer; this toolkit is CUDA 12.8.1",
        ),
        # below sm_80
        ("custom", "13.0", "75", "FlashAttention-2 needs sm_80 or newer (Ampere); sm_75 was requested"),
        ("custom", "12.8", "7.0;8.0", "FlashAttention-2 needs sm_80 or newer (Ampere); sm_70 was requested"),
        # Thor
        (
            "custom",
            "13.0",
            "110",
            "sm_110 (Jetson Thor) is not built by this project. sm_101 was renamed sm_110 in CUDA 13, "
            "and the blackwell group targets discrete GPUs (sm_100, sm_120) and GB10 (sm_121), not Thor.",
        ),
        (
            "custom",
            "12.9",
            "100;101",
            "sm_101 (Jetson Thor) is not built by this project. sm_101 was renamed sm_110 in CUDA 13",
        ),
        # unknown group, empty custom list
        ("hopper", "13.0", None, "unknown arch group 'hopper'. Valid groups: blackwell, legacy, custom"),
        (None, "13.0", None, "no arch group given. Pass GROUP with one of: blackwell, legacy, custom"),
        ("custom", "13.0", "", "the custom arch group needs ARCHS, e.g. GROUP custom ARCHS 80,90."),
        ("custom", "13.0", None, "the custom arch group needs ARCHS"),
        ("custom", "13.0", ";", "the custom arch group needs ARCHS"),
        # other misuse
        (
            "legacy",
            "13.0",
            "80",
            "ARCHS applies to the custom group only; the legacy group has fixed archs (80, 89, 90)",
        ),
        (
            "blackwell",
            "13.0",
            "100;120",
            "ARCHS applies to the custom group only; the blackwell group has fixed archs (100, 120, 121). "
            "Use GROUP custom ARCHS 100,120",
        ),
        ("custom", "13.0", "90a", "'90a' in ARCHS is not an SM number"),
        ("custom", "13.0", "95", "sm_95 is not an architecture this project builds"),
        ("legacy", "thirteen", None, "CUDA_VERSION 'thirteen' is not a CUDA version"),
        ("legacy", None, None, "CUDA_VERSION is required"),
    ],
)
def test_arch_refusals(group, cuda, archs, message):
    assert message in error_text(arch_group(group, cuda, archs))
    if archs is not None:
        assert message in error_text(arch_group(group, cuda, archs, quoted=True))


# --------------------------------------------------------------------------
# Host flags
# --------------------------------------------------------------------------

NVCC_COMMON = [
    "-O3",
    "--use_fast_math",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
]

MSVC_CXX20 = ["/Zc:preprocessor", "/Zc:__cplusplus", "/permissive-", "/std:c++20", "/bigobj", "/EHsc"]
MSVC_CXX17 = ["/Zc:preprocessor", "/Zc:__cplusplus", "/std:c++17", "/bigobj", "/EHsc"]


def host_flags(compiler_id, compiler_version, cuda, torch):
    defines = {}
    for key, value in (
        ("COMPILER_ID", compiler_id),
        ("COMPILER_VERSION", compiler_version),
        ("CUDA_VERSION", cuda),
        ("TORCH_VERSION", torch),
    ):
        if value is not None:
            defines[key] = value
    return run_script("host_flags.cmake", **defines)


def split(value: str) -> list[str]:
    return value.split(";") if value else []


@pytest.mark.parametrize(
    "cuda, torch, std, cxx",
    [
        ("13.2", "2.14.1+cu130", "20", MSVC_CXX20),
        ("13.2", "2.13.0", "20", MSVC_CXX20),
        ("13.0", "2.13.0.dev20260601+cu130", "20", MSVC_CXX20),
        ("12.8", "2.13.1+cu128", "20", MSVC_CXX20),
        ("13.2", "2.12.1+cu130", "17", MSVC_CXX17),
        ("12.8", "2.9.0", "17", MSVC_CXX17),
    ],
)
def test_msvc(cuda, torch, std, cxx):
    out = results(host_flags("MSVC", "19.44.35207.1", cuda, torch))
    assert out["OUT_CXX_STANDARD"] == std
    assert split(out["OUT_CXX_FLAGS"]) == cxx
    assert split(out["OUT_CUDA_FLAGS"]) == NVCC_COMMON + [f"-std=c++{std}"] + [f"-Xcompiler={flag}" for flag in cxx]
    # /permissive- and /std:c++20 only with torch >= 2.13
    assert ("/permissive-" in cxx) == (std == "20")


def test_msvc_cuda_13_2_status_says_zc_preprocessor_is_required():
    proc = host_flags("MSVC", "19.44.35207", "13.2", "2.14.1+cu130")
    assert "-Xcompiler=/Zc:preprocessor" in split(results(proc)["OUT_CUDA_FLAGS"])
    assert status_lines(proc) == [
        "flash_attn: host MSVC 19.44.35207, torch 2.14.1, CUDA 13.2 -> C++20, host flags "
        "/Zc:preprocessor;/Zc:__cplusplus;/permissive-;/std:c++20;/bigobj;/EHsc "
        "(/Zc:preprocessor required by CCCL for CUDA >= 13.2)"
    ]


def test_msvc_before_cuda_13_2_still_passes_zc_preprocessor():
    proc = host_flags("MSVC", "19.44.35207", "12.9", "2.14.1")
    assert split(results(proc)["OUT_CXX_FLAGS"])[0] == "/Zc:preprocessor"
    assert "required from 13.2" in status_lines(proc)[0]


@pytest.mark.parametrize("compiler_id, version", [("GNU", "13.2.0"), ("Clang", "18.1.8")])
@pytest.mark.parametrize("torch, std", [("2.14.1+cu130", "20"), ("2.13.0", "20"), ("2.12.0+cu128", "17")])
def test_gnu_like(compiler_id, version, torch, std):
    out = results(host_flags(compiler_id, version, "13.0.88", torch))
    assert out == {
        "OUT_CXX_STANDARD": std,
        "OUT_CXX_FLAGS": "-fvisibility=hidden",
        "OUT_CUDA_FLAGS": ";".join(NVCC_COMMON + [f"-std=c++{std}", "-Xcompiler=-fvisibility=hidden"]),
    }


@pytest.mark.parametrize(
    "compiler_id, compiler_version, cuda, torch, message",
    [
        ("GNU", "13.2.0", "13.0", "abc", "TORCH_VERSION 'abc' is not a version"),
        ("GNU", "13.2.0", "13.0", "2", "TORCH_VERSION '2' is not a version"),
        ("MSVC", "19.44", "13.2", "2.x", "TORCH_VERSION '2.x' is not a version"),
        ("GNU", "13.2.0", "13.0", "2.14.1+", "TORCH_VERSION '2.14.1+' is not a version"),
        ("GNU", "13.2.0", "13.0", "latest", "TORCH_VERSION 'latest' is not a version"),
        ("GNU", "13.2.0", "13.0", None, "TORCH_VERSION is required"),
        ("GNU", "13.2.0", "13.x", "2.14.1", "CUDA_VERSION '13.x' is not a version"),
        ("GNU", "gcc", "13.0", "2.14.1", "COMPILER_VERSION 'gcc' is not a version"),
        ("NVHPC", "25.1", "13.0", "2.14.1", "host compiler 'NVHPC' is not supported; supported: MSVC, GNU, Clang"),
        ("MSVC", "19.20.27508", "13.0", "2.12.0", "MSVC 19.20.27508 has no /Zc:preprocessor"),
        ("MSVC", "19.28.29910", "13.0", "2.13.0", "MSVC 19.28.29910 has no /std:c++20"),
    ],
)
def test_host_flag_refusals(compiler_id, compiler_version, cuda, torch, message):
    assert message in error_text(host_flags(compiler_id, compiler_version, cuda, torch))


def test_msvc_19_28_is_fine_for_cxx17():
    out = results(host_flags("MSVC", "19.28.29910", "12.8", "2.12.0"))
    assert split(out["OUT_CXX_FLAGS"]) == MSVC_CXX17


def _configure_options(tmp_path: Path, *args: str, env: dict | None = None) -> dict[str, str]:
    """Configure a project that only includes the option modules; returns the options' values."""
    src = tmp_path / "src"
    if not src.exists():
        src.mkdir()
        root = HERE.parents[1].as_posix()
        (src / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.28)\nproject(options_only NONE)\n"
            f'include("{root}/cmake/FlashAttnOptions.cmake")\ninclude("{root}/cmake/FlashAttnDeltas.cmake")\n'
            "foreach(n FLASH_ATTN_ARCH_GROUP FLASH_ATTN_KERNEL_SET FLASH_ATTN_APPLY_DELTAS\n"
            "          FLASH_ATTN_RESCALE_THRESHOLD)\n"
            '  message(STATUS "RESULT ${n}=${${n}}")\nendforeach()\n'
        )
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("FLASH_ATTN_")}
    proc = subprocess.run(
        [CMAKE, "-S", str(src), "-B", str(tmp_path / "build"), *args],
        capture_output=True, text=True, timeout=120, env={**full_env, **(env or {})},
    )  # fmt: skip
    return results(proc)


def test_an_empty_option_value_resets_a_reused_cache_to_the_manifest_default(tmp_path):
    # pyproject.toml passes every option, empty when its variable is unset (what pip install . does
    # without FLASH_ATTN_* set): an earlier build's value in the cache must not survive that.
    first = _configure_options(tmp_path, "-DFLASH_ATTN_ARCH_GROUP=blackwell", "-DFLASH_ATTN_APPLY_DELTAS=OFF")
    assert first["FLASH_ATTN_ARCH_GROUP"] == "blackwell" and first["FLASH_ATTN_APPLY_DELTAS"] == "OFF"
    empty = [f"-D{n}=" for n in ("FLASH_ATTN_ARCH_GROUP", "FLASH_ATTN_KERNEL_SET", "FLASH_ATTN_APPLY_DELTAS")]
    again = _configure_options(tmp_path, *empty)
    assert again["FLASH_ATTN_ARCH_GROUP"] == "legacy" and again["FLASH_ATTN_APPLY_DELTAS"] == "ON"
    assert again["FLASH_ATTN_KERNEL_SET"] == "release" and again["FLASH_ATTN_RESCALE_THRESHOLD"] == "8.0"
    # The environment variable is the value of an empty define too (FLASH_ATTN_ARCH_GROUP=custom pip install .).
    from_env = _configure_options(tmp_path, *empty, env={"FLASH_ATTN_ARCH_GROUP": "custom"})
    assert from_env["FLASH_ATTN_ARCH_GROUP"] == "custom"


def test_torch_free_code_compiles_as_cxx17_whatever_the_torch():
    # the kernel objects (TORCH_VERSION none) get upstream's standard and no torch-only MSVC flag
    gnu = results(host_flags("GNU", "12.2.0", "13.0.88", "none"))
    assert gnu["OUT_CXX_STANDARD"] == "17" and "-std=c++17" in gnu["OUT_CUDA_FLAGS"]
    msvc = results(host_flags("MSVC", "19.44.35207", "13.2", "none"))
    assert msvc["OUT_CXX_STANDARD"] == "17" and "/permissive-" not in msvc["OUT_CXX_FLAGS"]
    assert "/Zc:preprocessor" in msvc["OUT_CXX_FLAGS"]  # CCCL 13.2 needs it without torch too
    with_torch = results(host_flags("GNU", "12.2.0", "13.0.88", "2.14.1+cu130"))
    assert with_torch["OUT_CXX_STANDARD"] == "20"


def _kernel_key(**fields: str) -> dict[str, str]:
    return results(run_script("kernel_key.cmake", FIELDS="|".join(f"{k}={v}" for k, v in fields.items())))


def test_the_kernel_key_is_a_hash_of_its_fields_in_any_order():
    base = {"cuda_compiler": "NVIDIA 13.0.88", "definitions": "FLASH_ATTN_RESCALE_THRESHOLD=8.0f", "units": "a,b"}
    one = _kernel_key(**base)
    assert re.fullmatch(r"[0-9a-f]{64}", one["KEY"])
    assert _kernel_key(**dict(reversed(list(base.items()))))["KEY"] == one["KEY"]
    for name in base:  # any field that changes changes the key
        assert _kernel_key(**{**base, name: base[name] + "x"})["KEY"] != one["KEY"], name
    assert '"definitions" : "FLASH_ATTN_RESCALE_THRESHOLD=8.0f"' in one["FIELDS"]


def _naming(source: str, compiler_id: str) -> list[str]:
    proc = run_script("object_naming.cmake", SOURCE=source, BASE="/b/kernels-x", COMPILER_ID=compiler_id)
    return results(proc)["FLAGS"].split(";")


@pytest.mark.parametrize("compiler_id", ["GNU", "Clang"])
def test_object_naming_seeds_nvcc_with_the_path_below_the_build_folder(compiler_id):
    flags = _naming("/b/kernels-x/kernels/units/fwd_hdim64_fp16.cu", compiler_id)
    assert flags == [
        "-frandom-seed=kernels/units/fwd_hdim64_fp16.cu",  # nvcc: cudafe++, cicc and the host compiler
        "-Xcudafe=--orig_src_path_name=kernels/units/fwd_hdim64_fp16.cu",
    ]
    assert _naming("/b/kernels-x/kernels/units/bwd_hdim64_fp16.cu", compiler_id) != flags  # one seed per source


def test_object_naming_gives_msvc_hosts_no_host_compiler_option():
    flags = _naming("/b/kernels-x/kernels/dispatch.cu", "MSVC")
    # cl.exe has no -frandom-seed: the seed goes to cudafe++ only (it makes the module id)
    assert flags == ["-Xcudafe=--frandom-seed=kernels/dispatch.cu", "-Xcudafe=--orig_src_path_name=kernels/dispatch.cu"]


def test_the_python_key_of_the_fields_is_the_cmake_key():
    # release.archive.archives.key_of re-checks an archive's key against its fields (an edited manifest is
    # refused); it must compute what flash_attn_kernel_key computes.
    from release.archive import archives

    fields = {"format": "1", "definitions": "FLASH_NAMESPACE=flash", "cuda_flags": 'a "q" \\b', "units": "x,y"}
    assert archives.key_of(fields) == _kernel_key(**fields)["KEY"]


@pytest.mark.parametrize("threshold", ["16", "16.0", "100"])
def test_a_threshold_fp16_cannot_hold_is_refused(tmp_path, threshold):
    # A-1 lets the output grow by 2^T before rescaling; fp16's largest value is 65504 < 2^16.
    src = tmp_path / "src"
    src.mkdir()
    root = HERE.parents[1].as_posix()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.28)\nproject(options_only NONE)\n"
        f'include("{root}/cmake/FlashAttnOptions.cmake")\ninclude("{root}/cmake/FlashAttnDeltas.cmake")\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASH_ATTN_")}
    cmd = [CMAKE, "-S", str(src), "-B", str(tmp_path / "b"), f"-DFLASH_ATTN_RESCALE_THRESHOLD={threshold}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert "number from 0 to below 16" in error_text(proc)
    ok = subprocess.run([*cmd[:-1], "-DFLASH_ATTN_RESCALE_THRESHOLD=15.5"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr


def fake_upstream_tree(root: Path) -> Path:
    """The four upstream headers generate_units.py inspects, with the names it looks for."""
    src = root / "csrc" / "flash_attn" / "src"
    src.mkdir(parents=True)
    from kernels import kernel_set

    dims = " ".join(str(d) for d in kernel_set.HEAD_DIMS)
    (src / "flash.h").write_text("Flash_fwd_params Flash_bwd_params run_mha_fwd_splitkv_dispatch\n")
    (src / "flash_fwd_launch_template.h").write_text(" ".join(f"run_mha_fwd_hdim{d}" for d in dims.split()))
    (src / "flash_bwd_launch_template.h").write_text(" ".join(f"run_mha_bwd_hdim{d}" for d in dims.split()))
    (src / "namespace_config.h").write_text("FLASH_NAMESPACE\n")
    return root


@pytest.mark.parametrize("name", ["b röt ü", "b r ö/ünïcödé"])
def test_a_build_root_with_spaces_and_non_ascii_characters_reads_back_its_unit_paths(tmp_path, name):
    # Issue 28, finding 6: file(STRINGS) without ENCODING UTF-8 split "b röt ü" at the "ö"
    # ("Cannot find source file: .../b r").
    out = tmp_path / name / "kernels"
    proc = run_script("generate_units.cmake", TREE=str(fake_upstream_tree(tmp_path / "up")), OUT=str(out),
                      KERNEL_SET="ci", PYTHON=sys.executable)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    sources = [Path(line.split("=", 1)[1]) for line in proc.stdout.splitlines() if line.startswith("-- RESULT SOURCE=")]
    assert sources == [out / "units" / "fwd_hdim64_fp16.cu"]


CMAKE_FIELDS = {"format": "1", "definitions": "X=1", "cuda_architectures": "80-real"}


def _import(tmp_path: Path, archive: Path, definitions: str = "X=1") -> subprocess.CompletedProcess:
    (tmp_path / "work").mkdir(exist_ok=True)
    return run_script("import_kernels.cmake", ARCHIVE=str(archive), WORK=str(tmp_path / "work"), PYTHON=sys.executable,
                      DEFINITIONS=definitions, UNITS=";".join(archive_fakes.SET))  # fmt: skip


@pytest.fixture
def cmake_archive(tmp_path) -> Path:
    """A gathered archive (stand-in objects) whose build key is that of CMAKE_FIELDS."""
    from release.archive import archives

    make = archive_fakes.make_shard
    shards = [make(tmp_path / "s", 1, 2, archive_fakes.SET[:1], fields=CMAKE_FIELDS),
              make(tmp_path / "s", 2, 2, archive_fakes.SET[1:], fields=CMAKE_FIELDS)]  # fmt: skip
    return archives.gather(shards, tmp_path / "k")


def test_linking_a_verified_archive_imports_its_objects(tmp_path, cmake_archive):
    # CMake's key and Python's build key agree, and the verifier hands CMake the object paths.
    out = results(_import(tmp_path, cmake_archive))
    from release.archive import archives

    manifest = archives.load(cmake_archive).manifest
    assert out["KEY"] == manifest["build_key"]
    assert out["OBJECTS"].split(";") == [(cmake_archive / o["file"]).as_posix() for o in manifest["objects"]]


def test_linking_an_archive_of_another_build_key_names_the_field(tmp_path, cmake_archive):
    text = error_text(_import(tmp_path, cmake_archive, definitions="X=2"))
    assert "built with another build key" in text and "definitions: archive 'X=1', this build 'X=2'" in text


def test_linking_an_archive_whose_key_was_edited_says_so(tmp_path, cmake_archive):
    # Issue 28, finding 10 (an edited key named no field); issue 34: the archive key covers the objects.
    import json

    manifest_file = cmake_archive / "kernels-manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest_file.write_text(json.dumps(dict(manifest, key="0" * 64)))
    text = error_text(_import(tmp_path, cmake_archive))
    assert "does not verify" in text and "was edited or damaged" in text and str(cmake_archive) in text
