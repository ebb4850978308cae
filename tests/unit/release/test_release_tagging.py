"""Local version label and wheel re-tagging (release.compile.tagging) on small fake wheels."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest
from packaging.utils import parse_wheel_filename
from packaging.version import Version
from release_fakes import VERSION, build_info, make_wheel, stand_in_torch

from release.compile import tagging
from release.errors import ReleaseError

LABEL = "cu130torch2.14.1cxx11abitrue.legacy.rev1"


def test_label_from_build_info():
    assert tagging.local_label(build_info()) == LABEL


@pytest.mark.parametrize(
    ("overrides", "label"),
    [
        ({"cuda_version": "12.8.93", "torch_version": "2.13.0+cu128", "group": "blackwell"},
         "cu128torch2.13.0cxx11abitrue.blackwell.rev1"),
        ({"cxx11_abi": False}, "cu130torch2.14.1cxx11abifalse.legacy.rev1"),
        ({"torch_version": "2.14.1"}, LABEL),  # no local label of its own
        ({"cuda_version": "13.0", "group": "custom"}, "cu130torch2.14.1cxx11abitrue.custom.rev1"),
    ],
)  # fmt: skip
def test_label_variants(overrides, label):
    assert tagging.local_label(build_info(**overrides)) == label


def test_label_is_pep440_normal_form():
    label = tagging.local_label(build_info(group="legacy"))
    full = f"{VERSION}+{label}"
    assert str(Version(full)) == full


def test_label_bad_build_info():
    with pytest.raises(ReleaseError, match="local version label"):
        tagging.local_label({"group": "legacy"})


def test_tagged_version_replaces_existing_label():
    assert tagging.tagged_version("2.8.3.post2+old.label", LABEL) == f"2.8.3.post2+{LABEL}"


def test_retag_writes_label_everywhere(fake_wheel, tmp_path):
    out = tmp_path / "out"
    tagged = tagging.retag(fake_wheel, out)
    full = f"{VERSION}+{LABEL}"
    assert tagged.name == f"flash_attn-{full}-cp310-abi3-linux_x86_64.whl"
    name, version, build, tags = parse_wheel_filename(tagged.name)
    assert (name, str(version), build) == ("flash-attn", full, ())
    assert {str(t) for t in tags} == {"cp310-abi3-linux_x86_64"}
    facts = tagging.verify_wheel(tagged)  # dist-info name, METADATA, RECORD hashes
    assert facts.version == full and facts.dist_info == f"flash_attn-{full}.dist-info"
    with zipfile.ZipFile(tagged) as zf:
        assert f"Version: {full}" in zf.read(f"flash_attn-{full}.dist-info/METADATA").decode()
        record = zf.read(f"flash_attn-{full}.dist-info/RECORD").decode()
        assert f"flash_attn-{full}.dist-info/METADATA,sha256=" in record
        assert "flash_attn/_C_legacy.so,sha256=" in record
        assert not [n for n in zf.namelist() if n.startswith(f"flash_attn-{VERSION}.dist-info")]
    assert sorted(p.name for p in out.iterdir()) == [tagged.name]  # nothing half-written left


def test_retag_is_idempotent(fake_wheel, tmp_path):
    once = tagging.retag(fake_wheel, tmp_path / "a")
    twice = tagging.retag(once, tmp_path / "b")
    assert once.name == twice.name
    tagging.verify_wheel(twice)


def test_tagged_wheel_installs_and_reports_full_version(fake_wheel, tmp_path):
    tagged = tagging.retag(fake_wheel, tmp_path / "out")
    target = tmp_path / "target"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
         "--target", str(target), str(tagged)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}
    query = "import importlib.metadata as m; print(m.version('flash_attn'))"
    got = subprocess.run([sys.executable, "-c", query], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert got.stdout.strip() == f"{VERSION}+{LABEL}", got.stderr
    assert (target / "flash_attn" / "_C_legacy.so").is_file()


def test_verify_detects_tampered_member(fake_wheel, tmp_path):
    bad = tmp_path / fake_wheel.name
    with zipfile.ZipFile(fake_wheel) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename.endswith(".so"):
                data += b"tampered"
            dst.writestr(item, data)
    with pytest.raises(ReleaseError, match="RECORD hash/size of flash_attn/_C_legacy.so"):
        tagging.verify_wheel(bad)


def test_verify_detects_renamed_file(fake_wheel, tmp_path):
    renamed = tmp_path / f"flash_attn-{VERSION}+{LABEL}-cp310-abi3-linux_x86_64.whl"
    renamed.write_bytes(fake_wheel.read_bytes())  # the file name alone is not a tag
    with pytest.raises(ReleaseError, match="dist-info folder"):
        tagging.verify_wheel(renamed)


def test_verify_rejects_non_normal_form(fake_wheel, tmp_path):
    upper = tmp_path / f"flash_attn-{VERSION}+CU130-cp310-abi3-linux_x86_64.whl"
    upper.write_bytes(fake_wheel.read_bytes())
    with pytest.raises(ReleaseError, match="normal form"):
        tagging.verify_wheel(upper)


def test_retag_needs_one_build_info(tmp_path):
    wheel = make_wheel(tmp_path / "raw")
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr("flash_attn/build_info_blackwell.json", "{}")
    with pytest.raises(ReleaseError, match="2 build info files"):
        tagging.retag(wheel, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_native_members(tmp_path):
    wheel = make_wheel(tmp_path, libs=["legacy", "blackwell"])
    libs, infos = tagging.native_members(wheel)
    assert sorted(libs) == ["blackwell", "legacy"] and infos == ["legacy"]


# -- stable-ABI wheels: label and Requires-Dist ------------------------------------------------------

STABLE = {"torch_abi": "stable", "torch_min": "2.11"}
STABLE_LABEL = "cu130torchstable2.11.legacy.rev1"


@pytest.mark.parametrize(
    ("overrides", "label"),
    [
        (STABLE, STABLE_LABEL),
        ({**STABLE, "cxx11_abi": False, "torch_version": "2.12.1+cu132", "cuda_version": "13.2.1"},
         "cu132torchstable2.11.legacy.rev1"),  # neither the build's torch nor the C++11 ABI flag is in it
        ({**STABLE, "kernel_set": "dev"}, STABLE_LABEL + ".dev"),
        ({"torch_abi": "exact", "torch_min": None}, LABEL),
    ],
)  # fmt: skip
def test_stable_label_variants(overrides, label):
    got = tagging.local_label(build_info(**overrides))
    assert got == label and str(Version(f"{VERSION}+{got}")) == f"{VERSION}+{got}"


def test_stable_label_needs_torch_min():
    with pytest.raises(ReleaseError, match="local version label"):
        tagging.local_label(build_info(torch_abi="stable"))


def test_set_torch_requirement_replaces_only_torch_and_keeps_the_body():
    text = "Name: flash_attn\nRequires-Dist: numpy\nRequires-Dist: torch\nRequires-Python: >=3.10\n\n# torch\nbody\n"
    out = tagging.set_torch_requirement(text, "torch>=2.11")
    assert out == (
        "Name: flash_attn\nRequires-Dist: numpy\nRequires-Dist: torch>=2.11\nRequires-Python: >=3.10\n\n# torch\nbody\n"
    )
    assert tagging.set_torch_requirement("Name: x\n", "torch>=2.11") == "Name: x\nRequires-Dist: torch>=2.11\n"
    assert tagging.set_torch_requirement(out, "torch>=2.11") == out  # idempotent (a re-tag)


def test_stable_wheel_requires_torch_from_its_minimum(tmp_path):
    raw = make_wheel(
        tmp_path / "raw", info=build_info(**STABLE), metadata_tail="Requires-Dist: torch\n\n# flash_attn\ntext\n"
    )
    tagged = tagging.retag(raw, tmp_path / "out")
    full = f"{VERSION}+{STABLE_LABEL}"
    assert tagged.name == f"flash_attn-{full}-cp310-abi3-linux_x86_64.whl"
    facts = tagging.verify_wheel(tagged)  # RECORD covers the rewritten METADATA
    assert facts.version == full and facts.dist_info == f"flash_attn-{full}.dist-info"
    assert tagging.metadata_torch_requirements(tagged) == ["torch>=2.11"]
    with zipfile.ZipFile(tagged) as zf:
        assert zf.read(f"{facts.dist_info}/METADATA").decode().endswith("\n\n# flash_attn\ntext\n")
    # an exact wheel requires the torch release it was built against (issue 29: a plain torch picked the newest)
    exact = tagging.retag(make_wheel(tmp_path / "raw2", metadata_tail="Requires-Dist: torch\n"), tmp_path / "out2")
    assert tagging.metadata_torch_requirements(exact) == ["torch==2.14.1"]


def test_resolvers_read_the_stable_requirement():
    from packaging.requirements import Requirement

    requirement = Requirement(tagging.torch_requirement(build_info(**STABLE)))
    assert requirement.name == "torch"
    for version, ok in (("2.10.0", False), ("2.11.0", True), ("2.14.1+cu130", True), ("2.15.0", True), ("3.1", True)):
        assert requirement.specifier.contains(version) is ok, version
    exact = Requirement(tagging.torch_requirement(build_info()))  # built against 2.14.1+cu130
    for version, ok in (("2.14.0", False), ("2.14.1", True), ("2.14.1+cu130", True), ("2.15.0", False)):
        assert exact.specifier.contains(version) is ok, version


def test_pip_resolves_the_stable_wheel_against_a_torch_index(tmp_path):
    # pip install --dry-run --no-index: with torch 2.10.0 and 2.15.0 on the index the stable wheel's
    # Requires-Dist picks 2.15.0; with only 2.10.0 the resolution fails (nothing installs).
    raw = make_wheel(tmp_path / "raw", info=build_info(**STABLE), metadata_tail="Requires-Dist: torch\n")
    tagged = tagging.retag(raw, tmp_path / "index")
    stand_in_torch(tmp_path / "index", "2.10.0")
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--disable-pip-version-check",
           "--ignore-installed", "--find-links", str(tmp_path / "index"), str(tagged)]  # fmt: skip
    # no pip configuration of this machine (find-links, constraints): only the folder is the index
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    old_only = subprocess.run(pip, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert old_only.returncode != 0 and "torch>=2.11" in old_only.stdout + old_only.stderr
    stand_in_torch(tmp_path / "index", "2.15.0")
    proc = subprocess.run(pip, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "torch-2.15.0" in proc.stdout and "torch-2.10.0" not in proc.stdout
