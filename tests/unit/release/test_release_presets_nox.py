"""CMakePresets.json (one configure + build preset per arch group, and dev) and the nox sessions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from release import manifest
from release.plan import doc_tables
from release.sessions import dev

ROOT = Path(__file__).resolve().parents[3]
PRESETS = json.loads((ROOT / "CMakePresets.json").read_text())
ALLOWED = {"FLASH_ATTN_ARCH_GROUP", "FLASH_ATTN_KERNEL_SET", "CMAKE_BUILD_TYPE"}


FIXED_GROUPS = [name for name, g in manifest.arch_groups().items() if g["sms"]]  # blackwell, legacy


def test_one_preset_per_group_and_dev():
    configure = {p["name"]: p for p in PRESETS["configurePresets"] if not p.get("hidden")}
    assert list(configure) == [*FIXED_GROUPS, "dev"]
    assert {b["name"]: b["configurePreset"] for b in PRESETS["buildPresets"]} == {n: n for n in configure}
    base = next(p for p in PRESETS["configurePresets"] if p["name"] == "base")
    assert base["generator"] == "Ninja" and base["binaryDir"].startswith("${sourceDir}/build/")
    expected = [(g, g, "release") for g in FIXED_GROUPS] + [("dev", doc_tables.DEV_PRESET_GROUP, "dev")]
    for name, group, kset in expected:
        cv = configure[name]["cacheVariables"]
        assert (cv["FLASH_ATTN_ARCH_GROUP"], cv["FLASH_ATTN_KERNEL_SET"]) == (group, kset)


def test_presets_are_rendered_from_the_manifest(tmp_path):
    """CMakePresets.json is release.plan.doc_tables' rendering: --check fails on a hand edit, and
    nox -s doc_tables (release.plan.doc_tables) writes it back."""
    assert (ROOT / "CMakePresets.json").read_text(encoding="utf-8") == doc_tables.cmake_presets(manifest.load())
    for rel in doc_tables.rendered_files():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((ROOT / rel).read_bytes())
    presets = tmp_path / "CMakePresets.json"
    presets.write_text(presets.read_text(encoding="utf-8").replace('"legacy"', '"legacy2"'), encoding="utf-8")
    assert doc_tables.main(["--check", "--root", str(tmp_path)]) == 1
    assert doc_tables.main(["--root", str(tmp_path)]) == 0
    assert presets.read_bytes() == (ROOT / "CMakePresets.json").read_bytes()


def test_presets_set_no_arch_or_flag_logic():
    for p in PRESETS["configurePresets"]:
        assert set(p.get("cacheVariables", {})) <= ALLOWED, p["name"]
        assert "environment" not in p and "toolchainFile" not in p
    text = json.dumps(PRESETS)
    for word in ("CUDA_ARCHITECTURES", "CMAKE_CUDA_FLAGS", "CMAKE_CXX_FLAGS", "gencode", "FLASH_ATTN_CUDA_ARCHS"):
        assert word not in text


def _cmake():
    try:
        import cmake
    except ImportError:
        return None
    exe = Path(cmake.CMAKE_BIN_DIR) / ("cmake.exe" if os.name == "nt" else "cmake")
    return str(exe) if exe.is_file() else None


@pytest.mark.skipif(_cmake() is None, reason="the PyPI cmake package is not installed")
def test_cmake_reads_the_presets():
    proc = subprocess.run([_cmake(), "--list-presets=all"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for name in (*FIXED_GROUPS, "dev"):
        assert f'"{name}"' in proc.stdout


@pytest.mark.skipif(shutil.which("nox") is None, reason="nox is not installed")
def test_nox_lists_the_sessions():
    proc = subprocess.run(["nox", "--list"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    per_group = [f"{kind}_{g}" for kind in ("wheel", "archive") for g in manifest.arch_groups()]
    for name in (*per_group, "archive_gather", "smoke", "validate", "release", "dev", "tests", "lint",
                 "bench_latency", "bench_build"):  # fmt: skip
        assert f" {name} -> " in proc.stdout, proc.stdout
    # the renamed sessions' old names stay listed for one release, each naming its new name
    renamed = {f"kernels_{g}": f"archive_{g}" for g in manifest.arch_groups()}
    renamed |= {"kernels_gather": "archive_gather", "bench_kernels": "bench_latency"}
    for old, new in renamed.items():
        assert f" {old} -> (deprecated alias of {new})\n" in proc.stdout, proc.stdout


def test_dev_install_command(tmp_path):
    cmd = dev.install_command(sys.executable, tmp_path / "k", {"FLASH_ATTN_KERNEL_SET": "dev"}, tmp_path / "relay")
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert "--no-build-isolation" in cmd and "-Ceditable.rebuild=true" in cmd
    assert f"-Cbuild-dir={tmp_path / 'k'}" in cmd and "-Ccmake.define.FLASH_ATTN_KERNEL_SET=dev" in cmd
    assert cmd[-2:] == ["-e", str(ROOT)]


def test_dev_rejects_bad_input_before_building(capsys):
    assert dev.main(["--kernel-set", "nope"], probe=lambda: pytest.fail("must not probe")) == 2
    assert "error: kernel set" in capsys.readouterr().err
