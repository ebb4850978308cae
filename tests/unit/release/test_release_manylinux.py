"""release.ship.manylinux: the auditwheel show gate, on report data and on small real ELF libraries."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from release_fakes import make_wheel

from release import checksums
from release.compile import tagging
from release.errors import ReleaseError
from release.ship import manylinux


def report(sym_tag="manylinux_2_28_x86_64", libs=(), **overrides) -> dict:
    """An auditwheel show --json report of a wheel linking `libs` besides the policy's own."""
    policies = ["manylinux_2_28_x86_64", "manylinux_2_34_x86_64", "manylinux_2_39_x86_64"]
    data = {
        "version": 1,
        "wheel": "w.whl",
        "pure": False,
        "overall_tag": "linux_x86_64" if libs else sym_tag,
        "sym_tag": sym_tag,
        "pyfpe": False,
        "ucs2": False,
        "unsupported_isa": False,
        "versioned_symbols": {"libc.so.6": ["GLIBC_2.2.5"], "libstdc++.so.6": ["GLIBCXX_3.4.21"]},
        "external_libs": {lib: None for lib in libs},
        "policy_upgrades": {p: {"libs_to_eliminate": sorted(libs)} for p in policies} if libs else {},
    }
    data.update(overrides)
    return data


TORCH_LIBS = ("libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so", "libcudart.so.13")


def test_torch_and_cuda_runtime_libraries_stay_external():
    assert manylinux.audit(report(libs=TORCH_LIBS)) == []
    assert manylinux.audit(report(sym_tag="manylinux_2_17_x86_64", libs=TORCH_LIBS)) == [], "older is fine"


def test_symbols_newer_than_the_policy_fail():
    (problem,) = manylinux.audit(report(sym_tag="manylinux_2_34_x86_64"))
    assert "need manylinux_2_34_x86_64, newer than manylinux_2_28_x86_64" in problem and "GLIBCXX_3.4.21" in problem
    (problem,) = manylinux.audit(report(sym_tag="linux_x86_64"))
    assert "need linux_x86_64" in problem
    assert manylinux.audit(report(sym_tag="manylinux_2_34_x86_64"), policy="manylinux_2_34") == []


def test_libraries_reached_only_through_torch_are_not_the_wheels():
    # auditwheel run where torch is importable walks libtorch's own dependencies too
    rep = report(libs=(*TORCH_LIBS, "libcublas.so.13", "libnccl.so.2"))
    assert manylinux.audit(rep, direct=set(TORCH_LIBS) | {"libc.so.6"}) == []
    (problem,) = manylinux.audit(rep, direct={*TORCH_LIBS, "libnccl.so.2"})
    assert problem.endswith(
        "provides: libnccl.so.2. Link them statically or drop the dependency (they are never vendored)."
    )


def test_the_message_names_the_symbols_that_are_too_new():
    rep = report(sym_tag="manylinux_2_34_x86_64")
    rep["versioned_symbols"] = {
        "libc.so.6": ["GLIBC_2.2.5", "GLIBC_2.28", "GLIBC_2.32"],
        "libstdc++.so.6": ["GLIBCXX_3.4.21", "GLIBCXX_3.4.9"],
    }
    (problem,) = manylinux.audit(rep)
    assert "(GLIBC_2.32, GLIBCXX_3.4.21)" in problem


def test_other_external_libraries_and_flags_fail():
    (problem,) = manylinux.audit(report(libs=(*TORCH_LIBS, "libcublas.so.13", "libz.so.1")))
    assert "neither manylinux_2_28_x86_64 nor torch provides: libcublas.so.13, libz.so.1" in problem
    assert "uses PyFPE_jbuf" in manylinux.audit(report(pyfpe=True))[0]
    bl = report(policy_upgrades={"manylinux_2_28_x86_64": {"blacklisted_symbols": {"libc.so.6": ["x"]}}})
    assert "forbids" in manylinux.audit(bl)[0]
    assert "not an auditwheel" in manylinux.audit({"version": 2})[0]


def test_gate_retags_and_rewrites_the_checksum(tmp_path, monkeypatch):
    pytest.importorskip("wheel")
    wheel = make_wheel(tmp_path / "wh")
    checksums.write_sidecar(wheel)
    monkeypatch.setattr(manylinux, "auditwheel_show", lambda w, exe=None: report(libs=TORCH_LIBS))
    new = manylinux.gate(wheel)
    assert new.name.endswith("-cp310-abi3-manylinux_2_28_x86_64.whl")
    assert sorted(p.name for p in new.parent.iterdir()) == sorted([new.name, new.name + ".sha256"])
    assert checksums.verify_sha256sums(new.with_name(new.name + ".sha256")) == [new.name]


def test_gate_refuses_and_leaves_the_wheel(tmp_path, monkeypatch, capsys):
    wheel = make_wheel(tmp_path / "wh")
    before = wheel.read_bytes()
    monkeypatch.setattr(manylinux, "auditwheel_show", lambda w, exe=None: report(sym_tag="manylinux_2_35_x86_64"))
    assert manylinux.main([str(wheel.parent)]) == 2
    assert "is not manylinux_2_28" in capsys.readouterr().err
    assert [p.name for p in wheel.parent.iterdir()] == [wheel.name] and wheel.read_bytes() == before


def test_a_wheel_that_vendors_libraries_is_refused(tmp_path, monkeypatch):
    from wheel.wheelfile import WheelFile

    wheel = make_wheel(tmp_path / "wh")
    with WheelFile(wheel, "a") as wf:
        wf.writestr("flash_attn.libs/libcudart-1234.so.13", b"x")
    monkeypatch.setattr(manylinux, "auditwheel_show", lambda w, exe=None: report())
    with pytest.raises(ReleaseError, match="vendors libraries: flash_attn.libs/libcudart"):
        manylinux.gate(wheel)


# Real ELF files: auditwheel on libraries compiled here (gcc, glibc of this machine).


def _auditwheel() -> str | None:
    found = shutil.which("auditwheel") or str(Path(sys.executable).parent / "auditwheel")
    return found if os.path.isfile(found) else None


# ELF libraries and auditwheel exist on Linux only; there, a missing compiler or auditwheel is a
# missing install step (the tests session installs auditwheel), so it fails instead of skipping.
needs_tools = pytest.mark.skipif(sys.platform != "linux", reason="builds ELF libraries: runs on Linux only")


@pytest.fixture
def elf_tools():
    assert shutil.which("cc"), "these tests compile small libraries: install a C compiler (cc)"
    assert _auditwheel() is not None, (
        "auditwheel is missing: pip install auditwheel==6.8.2 (tool_pins.test of build-manifest.json)"
    )


def elf_wheel(tmp_path: Path, source: str, libs: dict[str, str] | None = None, flags: tuple = ()) -> Path:
    """A wheel whose flash_attn/_C_legacy.so is `source` compiled here, linked to fake `libs` (name -> C)."""
    build = tmp_path / "elf"
    build.mkdir(parents=True)
    link = []
    for name, code in (libs or {}).items():
        (build / f"{name}.c").write_text(code)
        subprocess.run(
            ["cc", "-shared", "-fPIC", "-o", str(build / f"lib{name}.so"), str(build / f"{name}.c")], check=True
        )
        link.append(f"-l{name}")
    (build / "ext.c").write_text(source)
    out = build / "_C_legacy.so"
    cmd = ["cc", "-shared", "-fPIC", "-o", str(out), str(build / "ext.c"), f"-L{build}", *link, *flags]
    subprocess.run(cmd, check=True)
    from wheel.wheelfile import WheelFile

    fake = make_wheel(tmp_path / "fake")
    wheel = tmp_path / "wh" / fake.name
    wheel.parent.mkdir()
    with WheelFile(fake) as src, WheelFile(wheel, "w") as dst:  # the same wheel, the real library inside
        for item in src.infolist():
            if item.filename.endswith(".so"):
                dst.write(str(out), item.filename)
            elif not item.filename.endswith("RECORD"):
                dst.writestr(item, src.read(item))
    return wheel


@needs_tools
def test_real_library_linking_fake_torch_passes(tmp_path, elf_tools):
    torch = {"torch": "int torch_fn(void) { return 1; }", "c10": "int c10_fn(void) { return 2; }"}
    code = "int torch_fn(void); int c10_fn(void); int f(void) { return torch_fn() + c10_fn(); }"
    wheel = elf_wheel(tmp_path, code, torch)
    got = manylinux.auditwheel_show(wheel, _auditwheel())
    assert set(got["external_libs"]) == {"libtorch.so", "libc10.so"}
    assert manylinux.audit(got) == []
    assert {"libtorch.so", "libc10.so"} <= manylinux.direct_needed(wheel)
    new = manylinux.gate(wheel, auditwheel=_auditwheel())
    assert new.name.endswith("manylinux_2_28_x86_64.whl")
    assert tagging.verify_wheel(new).tags == ("cp310-abi3-manylinux_2_28_x86_64",)


@needs_tools
def test_real_library_with_new_glibc_symbols_or_a_foreign_library_fails(tmp_path, elf_tools):
    foreign = elf_wheel(
        tmp_path / "a", "int z_fn(void); int f(void) { return z_fn(); }", {"zfoo": "int z_fn(void){return 3;}"}
    )
    (problem,) = manylinux.audit(manylinux.auditwheel_show(foreign, _auditwheel()))
    assert "libzfoo.so" in problem
    glibc = tuple(int(x) for x in os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")[:2])
    if glibc < (2, 34):
        pytest.skip("this machine's glibc is older than 2.34: a build here cannot need GLIBC_2.34")
    # pthread_create moved into libc in glibc 2.34: a build on a newer glibc references GLIBC_2.34.
    code = (
        "#include <pthread.h>\nstatic void *g(void *p) { return p; }\n"
        "int f(void) { pthread_t t; return pthread_create(&t, 0, g, 0); }"
    )
    newer = elf_wheel(tmp_path / "b", code, flags=("-pthread",))
    got = manylinux.auditwheel_show(newer, _auditwheel())
    problems = manylinux.audit(got)
    assert problems and "newer than manylinux_2_28_x86_64" in problems[0], json.dumps(got)
