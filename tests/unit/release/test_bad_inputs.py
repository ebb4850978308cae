"""Bad input to the release tooling: one case per failure mode of issue 11.

Each case calls a module's ``main()`` in-process (no nvcc runs: the toolchain probe is replaced,
and a build, if one were started, fails the test), then checks three things: the message says
what was found and what to do, the exit status is the documented one (2 bad input, 1 failed
check, 130 interrupted), and the output folder holds nothing new (no build folder either).
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from fault_probes import Probe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from release_fakes import build_info, make_wheel

from release import checksums, manifest
from release.compile import arch_rules, builder, options, tagging, toolchain
from release.compile.toolchain import Toolchain
from release.errors import ReleaseError
from release.sessions import wheels
from release.ship import publish, smoke

ROOT = Path(__file__).resolve().parents[3]

SETTINGS = settings(max_examples=100, deadline=None, derandomize=True, database=None)
# capsys is read (and so reset) by every example of the property tests that use it
CAPTURED = settings(SETTINGS, suppress_health_check=[HealthCheck.function_scoped_fixture])
GOOD = Toolchain("/usr/bin/nvcc", "13.0.88", sys.executable, "2.14.1+cu130", "13.0", True, "gcc", "12.2.0", "c++")


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A wheel session's surroundings: out/ (with one unrelated file), build/, a probe, no real build."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("user file\n")
    monkeypatch.setattr(toolchain, "probe", lambda: GOOD)
    for name in list(__import__("os").environ):
        if name.startswith("FLASH_ATTN_") or name == "CUDACXX":
            monkeypatch.delenv(name)

    def no_build(*a, **k):
        raise AssertionError("a build was started for bad input")

    monkeypatch.setattr(builder, "run_build", no_build)
    return tmp_path


def run_wheels(tmp_path: Path, *args: str, group: str = "legacy") -> int:
    argv = ["--arch-group", group, "--out", str(tmp_path / "out"), "--build-root", str(tmp_path / "build"), *args]
    return wheels.main(argv)


def assert_nothing_new(tmp_path: Path) -> None:
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["keep.txt"]
    build = tmp_path / "build"
    assert not build.exists() or list(build.iterdir()) == [], list(build.iterdir())


def expect(capsys, code: int, got: int, *needles: str, absent: tuple[str, ...] = ()) -> str:
    err = " ".join(capsys.readouterr().err.split())
    assert got == code, err
    for n in needles:
        assert n in err, err
    for n in absent:
        assert n not in err, err
    assert "Traceback" not in err
    return err


# -- options: checked before anything is created --------------------------------------------------


@pytest.mark.parametrize("spec", [",", ";", " , ; "])
def test_empty_kernel_set_is_refused(env, capsys, spec):
    code = run_wheels(env, "--kernel-set", spec)
    expect(capsys, 2, code, "lists no unit", "release, dev, ci")
    assert_nothing_new(env)


def test_unknown_kernel_set_is_refused(env, capsys):
    code = run_wheels(env, "--kernel-set", "fwd_hdim65_fp16")
    expect(capsys, 2, code, "'fwd_hdim65_fp16' matches no unit")
    assert_nothing_new(env)


def test_unknown_group_names_only_sessions_that_exist(env, capsys):
    code = run_wheels(env, "--arch-group", "hopper")
    expect(capsys, 2, code, "unknown arch group 'hopper'", "nox -s wheel_legacy", absent=("wheel_hopper",))
    assert_nothing_new(env)


@pytest.mark.parametrize("sm", ["101", "110"])
def test_thor_is_refused_early_with_the_cmake_sentence(env, capsys, sm):
    code = run_wheels(env, "--cuda-archs", sm, group="custom")
    err = expect(capsys, 2, code, f"sm_{sm} (Jetson Thor) is not built by this project", "from --cuda-archs")
    # The same sentence as the CMake module's FATAL_ERROR: both take the reason from the manifest.
    cmake_text = re.sub(r'"\s*\n\s*"', "", (ROOT / "cmake" / "FlashAttnArchGroups.cmake").read_text())
    assert "is not built by this project. ${FLASH_ATTN_REFUSED_REASON_${sm}}. Remove sm_${sm} from" in cmake_text
    (reason,) = {a["reason"] for a in manifest.load()["archs"]["refused"] if a["sm"] == int(sm)}
    sentence = f"is not built by this project. {reason}. Remove sm_{sm} from --cuda-archs."
    assert "sm_101 was renamed sm_110 in CUDA 13" in reason and sentence in err
    assert_nothing_new(env)


@pytest.mark.parametrize(
    ("group", "archs", "cuda", "needle"),
    [
        (
            "custom",
            "80,100",
            "12.6.85",
            "sm_100 (Blackwell, B200) needs CUDA 12.8 or newer; this toolkit is CUDA 12.6.85",
        ),
        ("custom", "121", "12.8.93", "sm_121 (Blackwell, GB10 / DGX Spark) needs CUDA 12.9"),
        ("blackwell", "", "12.8.93", "sm_121 (Blackwell, GB10 / DGX Spark) needs CUDA 12.9"),
    ],
)
def test_archs_the_toolkit_cannot_build_are_refused_before_the_build_folder(
    env, capsys, monkeypatch, group, archs, cuda, needle
):
    monkeypatch.setattr(toolchain, "probe", lambda: replace(GOOD, cuda_version=cuda, torch_cuda_version="12.6"))
    code = run_wheels(env, *(["--cuda-archs", archs] if archs else []), group=group)
    expect(capsys, 2, code, needle, "Install CUDA >=")
    assert_nothing_new(env)


def test_arch_rules_are_the_cmake_modules():
    """release.compile.arch_rules asks cmake/FlashAttnArchGroups.cmake (cmake -P), which reads the manifest."""
    assert arch_rules.check_archs("legacy") == [80, 89, 90] and arch_rules.check_archs("blackwell") == [100, 120, 121]
    assert arch_rules.check_archs("custom", [90, 80, 90], "12.8") == [80, 90]
    assert arch_rules.parse_archs("9.0, sm_80;80") == [80, 90] and arch_rules.parse_archs(" ; ") == []
    with pytest.raises(ReleaseError, match=r"sm_100 \(Blackwell, B200\) needs CUDA 12.8 or newer"):
        arch_rules.check_archs("custom", [80, 100], "12.6")
    with pytest.raises(ReleaseError, match=r"^sm_95 is not an architecture this project builds\. Known: sm_80, sm_86"):
        arch_rules.check_archs("custom", [95])
    # No rule sentence of the CMake module is written again in Python.
    python = "".join(
        (ROOT / "src" / "release" / f).read_text()
        for f in ("compile/arch_rules.py", "compile/options.py", "sessions/wheels.py")
    )
    for sentence in ("is not built by this project", "is not an architecture this project builds", "needs CUDA",
                     "Valid groups:", "or newer (Ampere)", "is not an SM number", "applies to the custom group only",
                     "custom arch group needs"):  # fmt: skip
        assert sentence not in python


def test_unwritable_out_is_refused_before_the_build(env, capsys):
    code = run_wheels(env, "--out", "/proc/flash_attn-wheelhouse")  # nothing can be created in /proc
    expect(capsys, 2, code, "output folder /proc/flash_attn-wheelhouse is not writable", "pass another --out")
    assert not (env / "build").exists()


def test_read_only_out_is_refused_before_the_build(env, capsys, monkeypatch):
    (env / "out").chmod(0o555)
    if getattr(os, "geteuid", lambda: 1)() == 0:  # root writes into a 0555 folder: fail its writes as a user's would
        real = Path.write_bytes

        def denied(self, data):
            if self.parent == env / "out":
                raise PermissionError(errno.EACCES, "Permission denied", str(self))
            return real(self, data)

        monkeypatch.setattr(Path, "write_bytes", denied)
    try:
        code = run_wheels(env)
    finally:
        (env / "out").chmod(0o755)
    expect(capsys, 2, code, "is not writable")
    assert_nothing_new(env)


def test_out_that_is_a_file_is_refused(env, capsys):
    code = run_wheels(env, "--out", str(env / "out" / "keep.txt" / "sub"))
    expect(capsys, 2, code, "is not a folder", "pass another --out")
    assert_nothing_new(env)


def test_out_with_another_version_is_refused(env, capsys):
    make_wheel(env / "out", version="2.9.1")
    before = sorted(p.name for p in (env / "out").iterdir())
    code = run_wheels(env)
    expect(capsys, 2, code, "already holds flash_attn-2.9.1", "pass another --out")
    assert sorted(p.name for p in (env / "out").iterdir()) == before


def test_sdist_that_is_a_folder_is_refused(env, capsys):
    code = run_wheels(env, "--sdist", str(env))
    expect(capsys, 2, code, "is a folder", "flash_attn-2.8.3.post2.tar.gz")
    assert_nothing_new(env)


def test_user_sdist_with_a_wrong_hash_is_named_not_the_pin(env, capsys):
    fake = env / "flash_attn-2.8.3.post2.tar.gz"
    fake.write_bytes(b"not the sdist")
    code = run_wheels(env, "--sdist", str(fake))
    version, want = manifest.upstream_pin()
    expect(
        capsys, 2, code, "is not the pinned sdist flash-attn==2.8.3.post2", checksums.sha256_file(fake), want,
        "pip download --no-deps --no-binary :all:", "with torch installed", absent=("Delete it",),
    )  # fmt: skip
    assert version == "2.8.3.post2"
    assert_nothing_new(env)


@pytest.mark.parametrize("flag", ["--source-dir", "--cutlass-dir"])
def test_source_and_cutlass_dirs_must_be_folders(env, capsys, flag):
    code = run_wheels(env, flag, str(env / "out" / "keep.txt"))
    expect(capsys, 2, code, f"{flag} {env / 'out' / 'keep.txt'}", "is a file", "pass an existing folder")
    assert_nothing_new(env)


def test_arch_group_environment_variable_that_disagrees_is_an_error(env, capsys, monkeypatch):
    monkeypatch.setenv("FLASH_ATTN_ARCH_GROUP", "blackwell")
    code = run_wheels(env)
    expect(
        capsys, 2, code, "FLASH_ATTN_ARCH_GROUP=blackwell is set", "builds the legacy group", "nox -s wheel_blackwell"
    )
    assert_nothing_new(env)


def test_cudacxx_naming_a_missing_file_is_an_error_of_the_probe(env, capsys, monkeypatch):
    nvcc, version = toolchain.probe_nvcc({"CUDACXX": str(env / "no" / "nvcc"), "PATH": ""})
    assert (nvcc, version) == (str(env / "no" / "nvcc"), None)  # not silently another nvcc
    monkeypatch.setattr(toolchain, "probe", lambda: replace(GOOD, nvcc=nvcc, cuda_version=None))
    code = run_wheels(env)
    expect(capsys, 2, code, f"CUDACXX={nvcc} does not exist", "unset it")
    assert_nothing_new(env)


# -- after the build: stale settings, interrupts ----------------------------------------------------


def test_build_info_that_disagrees_with_the_options_is_refused_by_name(env, capsys, monkeypatch):
    stale = build_info(deltas={"applied": False, "rescale_threshold": 0, "packed_fma": True,
                               "broken_no_max_reset": False}, fatbin_compression="none")  # fmt: skip

    def run_build(build_dir, defines, outdir, **k):
        assert defines["FLASH_ATTN_APPLY_DELTAS"] == "ON" and defines["FLASH_ATTN_RESCALE_THRESHOLD"] == "8.0"
        return builder.BuildResult(make_wheel(Path(outdir), info=stale), {}, Path("log"))

    monkeypatch.setattr(builder, "run_build", run_build)
    code = run_wheels(env, "--kernel-set", "ci")
    expect(
        capsys, 2, code, "does not match the options asked for", "FLASH_ATTN_APPLY_DELTAS (--apply-deltas): asked True",
        "FLASH_ATTN_FATBIN_COMPRESSION (--fatbin-compression): asked 'size'", "Remove the build folder",
    )  # fmt: skip
    assert_nothing_new(env)


def test_old_nvcc_records_fatbin_compression_none():
    o = options.BuildOptions(group="legacy", passthrough={"FLASH_ATTN_FATBIN_COMPRESSION": "balance"})
    assert o.expected_build_info("12.6.85")["fatbin_compression"] == "none"
    assert o.expected_build_info("13.0.88")["fatbin_compression"] == "balance"


def test_ctrl_c_prints_one_line_and_exits_130(env, capsys, monkeypatch):
    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(builder, "run_build", interrupted)
    code = run_wheels(env, "--kernel-set", "ci")
    err = capsys.readouterr().err
    assert code == 130 and err.strip().count("\n") == 0 and "interrupted" in err and "Traceback" not in err
    assert_nothing_new(env)  # the staging folder went too


# -- corrupt or foreign artifacts: smoke and release --------------------------------------------


def _damaged(tmp_path: Path, kind: str, sidecar: bool) -> Path:
    wheel = make_wheel(tmp_path / "wh", version="2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1")
    data = bytearray(wheel.read_bytes())
    if sidecar:
        checksums.write_sidecar(wheel)
    if kind == "truncated":
        wheel.write_bytes(bytes(data[: len(data) // 2]))
    elif kind == "lfs":
        wheel.write_bytes(b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + b"\nsize 9\n")
    elif kind == "flipped":
        with zipfile.ZipFile(wheel) as zf:
            info = zf.getinfo("flash_attn/build_info_legacy.json")
        at = info.header_offset + 30 + len(info.filename) + len(info.extra) + 5  # inside the member's data
        data[at] ^= 0xFF
        wheel.write_bytes(bytes(data))
    return wheel


CORRUPT = [
    ("truncated", False, "is not a readable wheel"),
    ("lfs", False, "is a Git LFS pointer file, not a wheel"),
    ("flipped", False, "is not a readable wheel"),
    ("truncated", True, "checksum mismatch"),
    ("flipped", True, "checksum mismatch"),
]


@pytest.mark.parametrize(("kind", "sidecar", "needle"), CORRUPT)
def test_smoke_refuses_corrupt_wheels_with_exit_2(tmp_path, capsys, kind, sidecar, needle):
    wheel = _damaged(tmp_path, kind, sidecar)
    before = sorted(p.name for p in wheel.parent.iterdir())
    expect(capsys, 2, smoke.main([str(wheel), "--no-deps"]), needle)
    assert sorted(p.name for p in wheel.parent.iterdir()) == before


@pytest.mark.parametrize(("kind", "sidecar", "needle"), CORRUPT)
def test_release_refuses_corrupt_wheels_and_creates_no_folder(tmp_path, capsys, kind, sidecar, needle):
    wheel = _damaged(tmp_path, kind, sidecar)
    out = tmp_path / "dist" / "release"
    code = publish.main(["--wheels", str(wheel.parent), "--out", str(out), "--allow-missing-reports"])
    expect(capsys, 2, code, needle)
    assert not (tmp_path / "dist").exists() or list((tmp_path / "dist").iterdir()) == []


def test_sidecar_is_checked_before_the_zip_is_opened(tmp_path, monkeypatch):
    wheel = _damaged(tmp_path, "flipped", sidecar=True)
    opened = []
    monkeypatch.setattr(tagging, "open_wheel", lambda p: opened.append(p))
    with pytest.raises(ReleaseError, match="checksum mismatch"):
        publish.check_wheels([wheel])
    assert opened == []


# -- checksums: from any folder -------------------------------------------------------------------


def test_sha256_file_verifies_from_any_folder(tmp_path, monkeypatch, capsys):
    wheel = make_wheel(tmp_path / "wheelhouse")
    sidecar = checksums.write_sidecar(wheel)
    assert sidecar.read_text() == f"{checksums.sha256_file(wheel)}  {wheel.name}\n"  # sha256sum -c format
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert checksums.main([str(sidecar)]) == 0
    assert f"{wheel}: OK" in capsys.readouterr().out
    wheel.write_bytes(wheel.read_bytes()[:-1])
    expect(capsys, 2, checksums.main([str(sidecar)]), "checksum mismatch", "download or build it again")


def test_option_defaults_are_the_manifest_defaults_and_every_option_is_read_from_it():
    # options.DEFAULTS is passed on every build; it must be what CMake uses when nothing is given:
    # every option of the table with its default. CMake declares every option in one loop over the
    # same table (flash_attn_option), no module names an option of its own.
    data = manifest.load()["options"]
    assert options.DEFAULTS == {k: v["default"] for k, v in data.items()}
    text = "".join((ROOT / "cmake" / f"FlashAttn{m}.cmake").read_text() for m in ("Options", "Deltas"))
    assert not re.findall(r"^flash_attn_option\((FLASH_ATTN_\w+)\)", text, re.MULTILINE)
    assert (
        'string(JSON _fa_name MEMBER "${_fa_options}" ${_fa_i})' in text and "  flash_attn_option(${_fa_name})" in text
    )
    assert "\noption(" not in text  # plain option() ignores the environment


def test_plain_pip_install_passes_every_option_too():
    # pip install . (no nox) must not keep stale cache values either: pyproject.toml defines every
    # option, empty, and CMake reads empty as the environment variable when set, else the default
    # (the block is rendered from the manifest: release.plan.doc_tables).
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    table = pyproject["tool"]["scikit-build"]["cmake"]["define"]
    sessions = options.BuildOptions(group="legacy").cmake_defines()
    launchers = {"CMAKE_CUDA_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER_LAUNCHER"}  # CMake reads them from the env
    assert set(table) == set(sessions) - launchers == set(manifest.load()["options"])
    assert all(spec == "" for spec in table.values())
    macro = (ROOT / "cmake" / "FlashAttnOptions.cmake").read_text()
    assert 'if("${${name}}" STREQUAL "")' in macro and "FORCE)" in macro


# -- reproducible re-tagging --------------------------------------------------------------------


def test_retag_gives_the_same_bytes_whatever_the_raw_wheels_timestamps(tmp_path, monkeypatch):
    # Two raw wheels with the same content, zipped at different times (as a build without
    # SOURCE_DATE_EPOCH writes them): re-tagging must give identical files.
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1600000000")
    raw_a = make_wheel(tmp_path / "raw_a")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    raw_b = make_wheel(tmp_path / "raw_b")
    assert raw_a.read_bytes() != raw_b.read_bytes()
    monkeypatch.delenv("SOURCE_DATE_EPOCH")  # the re-tag takes the checkout's commit time
    first = tagging.retag(raw_a, tmp_path / "a")
    time.sleep(2.1)  # zip timestamps have 2 s resolution: a clock-stamped re-tag would differ now
    second = tagging.retag(raw_b, tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as zf:
        assert len({i.date_time for i in zf.infolist()}) == 1


def test_source_date_epoch_prefers_the_environment():
    assert tagging.source_date_epoch({"SOURCE_DATE_EPOCH": "1700000000"}) == "1700000000"
    assert tagging.source_date_epoch({}).isdigit()


# -- issue 34: the rest of the probe list (each ended in a default build, exit 3 or a traceback) ---------


def _one_error(capsys, code: int, *needles: str, inputs: tuple[Path, ...] = ()) -> str:
    """One fault probe (fault_probes.COUNTS): one error: line, exit 2, no traceback, no internal error."""
    err = Probe(*inputs).one_error(capsys.readouterr().err, code)
    for n in needles:
        assert n in err, err
    return err


@pytest.mark.parametrize("value", ["", " ", "\t"])
def test_an_empty_shard_is_refused_not_the_whole_set(env, capsys, no_kernels_build, value):
    from release.archive import archives

    code = archives.main(["build", "--arch-group", "legacy", "--kernel-set", "release", "--shard", value])
    _one_error(capsys, code, "--shard was given an empty value", "leave --shard out")
    assert no_kernels_build == []  # before: the 72 units of the release set on this one runner


@pytest.mark.parametrize("flag", ["--kernel-set", "--cuda-archs"])
def test_dev_refuses_an_empty_flag_instead_of_its_default(env, capsys, monkeypatch, flag):
    from release.sessions import dev

    monkeypatch.setattr(dev.builder, "run_streamed", lambda *a, **k: pytest.fail("a build was started"))
    code = dev.main([flag, "", "--arch-group", "custom"], probe=lambda: GOOD, visible=lambda: [90])
    _one_error(capsys, code, f"{flag} was given an empty value")


@SETTINGS
@given(value=st.text(alphabet=" \t\n\r\x0b\x0c", max_size=4), name=st.sampled_from(list(options.OPTIONS)))
def test_every_option_read_through_pick_refuses_a_blank_flag(value, name):
    with pytest.raises(ReleaseError, match="was given an empty value"):
        options.pick(value, name, {name: "from-the-environment"})
    assert options.pick(None, name, {name: ""}) is None  # an empty variable stays "not set", as CMake reads it


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", "NaN", "0", "-1"])
def test_runner_memory_must_be_a_finite_positive_number(capsys, value):
    from release.plan import plan

    _one_error(capsys, plan.main([f"--runner-memory-gib={value}"]), "finite memory > 0 GiB")


@CAPTURED
@given(memory=st.floats(), cores=st.integers(-(2**40), 2**40))
def test_any_runner_plans_or_is_refused(capsys, memory, cores):
    from release.plan import plan

    code = plan.main(["--json", f"--runner-memory-gib={memory!r}", f"--runner-cores={cores}"])
    if code != 0:
        _one_error(capsys, code, "a runner needs")
    else:
        capsys.readouterr()


def _no_pip(monkeypatch) -> list:
    calls = []
    monkeypatch.setattr(toolchain, "ensure_torch", lambda v, *a, **k: calls.append(v) or pytest.fail(f"pip ran: {v}"))
    return calls


def test_a_torch_version_that_is_no_version_is_refused_before_pip(env, capsys, monkeypatch):
    calls = _no_pip(monkeypatch)
    code = run_wheels(env, "--kernel-set", "ci", "--torch-version", "latest; rm -rf /")
    _one_error(capsys, code, "--torch-version 'latest; rm -rf /' is not a version")
    assert calls == [] and not (env / "build").exists()


@pytest.mark.parametrize("version", ["2.10.0", "2.10.1+cu128", "1.13"])
def test_the_stable_abi_torch_range_is_checked_before_pip(env, capsys, monkeypatch, version):
    calls = _no_pip(monkeypatch)
    code = run_wheels(env, "--kernel-set", "ci", "--torch-abi", "stable", "--torch-version", version)
    _one_error(capsys, code, f"found torch {version}", f"Pass --torch-version {options.TORCH_MIN}.0")
    assert calls == []


@SETTINGS
@given(version=st.text(max_size=12))
def test_any_torch_version_text_is_a_version_or_one_error(version):
    try:
        options.check_torch_version(version)
    except ReleaseError as e:
        assert "is not a version" in str(e)
    else:
        from packaging.version import Version

        Version(version)


@pytest.mark.parametrize("value", ["abc", "80,x", "8.0", ",", "sm_90"])
def test_visible_sms_that_are_no_sm_numbers_are_one_error(env, capsys, monkeypatch, value):
    from release.sessions import dev

    monkeypatch.setenv("FLASH_ATTN_VISIBLE_SMS", value)
    monkeypatch.setattr(dev.builder, "run_streamed", lambda *a, **k: pytest.fail("a build was started"))
    code = dev.main([], probe=lambda: GOOD)
    _one_error(capsys, code, "FLASH_ATTN_VISIBLE_SMS=", "is not a list of SM numbers")


@SETTINGS
@given(value=st.text(max_size=10))
def test_visible_sms_parse_or_refuse(value):
    from release.compile import estimate

    try:
        found = estimate.visible_sms({"FLASH_ATTN_VISIBLE_SMS": value})
    except ReleaseError as e:
        assert "FLASH_ATTN_VISIBLE_SMS" in str(e)
    else:
        assert found is None or all(isinstance(sm, int) and sm >= 0 for sm in found)


def test_a_failing_smoke_check_prints_no_traceback_without_v(tmp_path, capsys, monkeypatch):
    """The check script's traceback of a failed check stays out of the error (and comes with -v)."""
    import subprocess

    wheel = tagging.retag(make_wheel(tmp_path / "raw"), tmp_path / "t")
    checksums.write_sidecar(wheel)
    child_err = 'Traceback (most recent call last):\n  File "smoke_check.py", line 9\nOSError: bad ELF\n'
    report = {"checks": [{"check": "native library loads", "ok": False, "detail": "OSError: bad ELF"}]}

    def run(cmd, **kwargs):
        out = json.dumps(report) if str(smoke.CHECK_SCRIPT) in map(str, cmd) else ""
        return subprocess.CompletedProcess(cmd, 0 if not out else 1, out, child_err if out else "")

    monkeypatch.setattr(smoke, "make_venv", lambda root, *a: root / "bin" / "python")
    monkeypatch.setattr(smoke, "_match_torch", lambda *a, **k: None)
    monkeypatch.setattr(smoke, "_gpu_available", lambda *a: False)
    monkeypatch.setattr(smoke.subprocess, "run", run)
    code = smoke.main([str(wheel), "--no-deps"])
    err = capsys.readouterr().err
    Probe(wheel).one_error(err, code, want_code=1)
    assert "native library loads (OSError: bad ELF)" in err and "run again with -v" in err
    code = smoke.main([str(wheel), "--no-deps", "-v"])
    assert code == 1 and "Traceback (most recent call last)" in capsys.readouterr().err


def _pinned_cmake() -> str | None:
    try:
        import cmake  # the PyPI package of tool_pins.build (the system cmake may be older than 3.25)
    except ImportError:
        return None
    return str(Path(cmake.CMAKE_BIN_DIR) / ("cmake.exe" if os.name == "nt" else "cmake"))


@pytest.mark.skipif(_pinned_cmake() is None, reason="the PyPI cmake package is not installed (tool_pins.build)")
def test_a_damaged_cached_sdist_is_downloaded_again(tmp_path):
    """A truncated sdist in the download cache is the cache's, not FLASH_ATTN_SDIST's: it is fetched again
    (here from a file:// URL of a manifest copy whose pin is that file), so a rerun does not fail the same way."""
    import subprocess

    good = tmp_path / "pypi" / "flash_attn-2.8.3.post2.tar.gz"
    good.parent.mkdir()
    good.write_bytes(b"the pinned sdist's bytes\n" * 100)
    data = json.loads((ROOT / "build-manifest.json").read_text())
    version = data["upstream"]["version"]
    data["upstream"].update(sha256=checksums.sha256_file(good), url=good.as_uri())
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    cached = tmp_path / "cache" / f"flash_attn-{version}.tar.gz"
    cached.parent.mkdir()
    cached.write_bytes(good.read_bytes()[:1000])  # a copy cut short
    Probe(good)
    cmd = [_pinned_cmake(), f"-DFLASH_ATTN_MANIFEST={tmp_path / 'manifest.json'}", "-P"]
    cmd.append(str(ROOT / "cmake" / "scripts" / "FetchUpstreamSdist.cmake"))
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "FLASH_ATTN_CACHE_DIR": str(cached.parent)}
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "is damaged" in proc.stdout + proc.stderr and "FLASH_ATTN_SDIST" not in proc.stderr
    assert cached.read_bytes() == good.read_bytes()
    assert f"flash_attn-sdist={cached}" in proc.stdout


# -- issue 34: what a SIGKILLed session leaves is cleaned by the next session under that root ------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the compilers by session id in /proc")
def test_the_next_build_under_the_root_stops_a_killed_sessions_compiles_in_another_folder(env, capsys):
    from test_faults import start_session

    from release import procs
    from release.compile import prepare

    root = env / "build"
    session, compiler = start_session(env, root / "killed-build-folder")
    session.kill()
    session.communicate()
    try:
        assert procs.alive(compiler)  # SIGKILL cannot be caught: the fake compiler runs on
        opts = options.BuildOptions(group="legacy", kernel_set="ci", build_root=root, out_dir=env / "out")
        prepare.prepare(opts, need_torch=False, check_out=False, probe=lambda: GOOD)  # another folder's build
        err = capsys.readouterr().err
        Probe().output_ok(not procs.alive(compiler), "a compiler of the killed session still runs")
        assert "stopped 2 process(es) of its build" in err, err  # the fake Ninja and its compiler
        assert not (root / "killed-build-folder" / ".flash_attn-session.lock.json").exists()
        prepare.prepare(opts, need_torch=False, check_out=False, probe=lambda: GOOD)
        assert "taking over" not in capsys.readouterr().err  # stopped once, then nothing is stale
    finally:
        if procs.alive(compiler):
            os.kill(compiler, 9)


def test_a_killed_sessions_staging_folder_is_removed_by_the_next_build_of_that_folder(env, capsys, monkeypatch):
    folders = []

    def stop(build_dir, *a, **k):
        folders.append(Path(build_dir))
        raise ReleaseError("stopped here by the test")

    monkeypatch.setattr(builder, "run_build", stop)
    assert run_wheels(env, "--kernel-set", "ci", "--no-smoke") == 2
    bdir = folders[0]
    stale = env / "build" / f".staging-{bdir.name}-k1ll3d"
    (stale / "raw").mkdir(parents=True)
    (stale / "raw" / "flash_attn-half.whl").write_bytes(b"a killed session's raw wheel")
    assert run_wheels(env, "--kernel-set", "ci", "--no-smoke") == 2
    capsys.readouterr()
    Probe().output_ok(not stale.exists(), f"{stale} outlived the next build of {bdir.name}")
    assert [p.name for p in (env / "build").iterdir() if p.name.startswith(".staging-")] == []
