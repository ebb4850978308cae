"""METADATA that installs the right torch and declares every license file (release.compile.tagging, issue 29).

Real: pip and uv resolving a tagged wheel in an empty venv, ``--dry-run``. Stand-ins: the torch
wheels (tiny wheels named torch, release_fakes.stand_in_torch) on a local ``--find-links`` folder
with ``--no-index``, so nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from release_fakes import build_info, make_wheel, stand_in_torch

from release.compile import tagging

# no pip configuration of this machine (find-links, constraints, an index): only the folder counts
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))} | {"PIP_CONFIG_FILE": os.devnull}
TORCHES = ("2.14.0", "2.14.1", "2.15.0")


def add_licenses(wheel, names):
    """Add <dist-info>/licenses/<name> files and declare only LICENSE, as scikit-build-core writes it."""
    with zipfile.ZipFile(wheel) as zf:
        members = {n: zf.read(n) for n in zf.namelist() if not n.endswith("RECORD")}
    dist_info = next(n.split("/")[0] for n in members if n.endswith(".dist-info/METADATA"))
    members[f"{dist_info}/METADATA"] += b"License-File: LICENSE\n"
    for name in names:
        members[f"{dist_info}/licenses/{name}"] = f"{name} text\n".encode()
    from wheel.wheelfile import WheelFile

    wheel.unlink()
    with WheelFile(wheel, "w") as wf:
        for name, data in members.items():
            wf.writestr(name, data)
    return wheel


@pytest.fixture
def index(tmp_path):
    """A --find-links folder with the tagged exact wheel (built against torch 2.14.1) and three torches."""
    raw = make_wheel(tmp_path / "raw", info=build_info(), metadata_tail="Requires-Dist: torch\n")
    add_licenses(raw, ["LICENSE", "LICENSE-flash-attention"])
    tagged = tagging.retag(raw, tmp_path / "index")
    for version in TORCHES:
        stand_in_torch(tmp_path / "index", version)
    return tagged


def metadata(wheel):
    facts = tagging.verify_wheel(wheel)
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(f"{facts.dist_info}/METADATA").decode()


def test_exact_wheel_requires_its_torch_and_declares_every_license(index):
    text = metadata(index)
    assert "Requires-Dist: torch==2.14.1\n" in text and "Requires-Dist: torch\n" not in text
    assert text.count("License-File: LICENSE\n") == 1 and "License-File: LICENSE-flash-attention\n" in text


def test_declare_license_files_keeps_order_and_body():
    text = "Name: x\nLicense-File: LICENSE\nRequires-Dist: torch\n\nbody\nLicense-File: not a header\n"
    out = tagging.declare_license_files(text, ["LICENSE", "LICENSE-flash-attention"])
    assert out == (
        "Name: x\nLicense-File: LICENSE\nLicense-File: LICENSE-flash-attention\nRequires-Dist: torch\n\n"
        "body\nLicense-File: not a header\n"
    )
    assert tagging.declare_license_files(out, ["LICENSE", "LICENSE-flash-attention"]) == out


def empty_venv(path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, env=ENV)
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def test_pip_in_an_empty_venv_selects_the_torch_the_wheel_was_built_for(index, tmp_path):
    python = empty_venv(tmp_path / "venv")
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--no-index",
           "--disable-pip-version-check", "--find-links", str(index.parent), "--report", str(report),
           str(index)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    chosen = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    assert chosen["torch"] == "2.14.1"  # not the newest, 2.15.0, which a plain "torch" picked


@pytest.mark.skipif(shutil.which("uv") is None, reason="no uv (tool_pins.test of build-manifest.json)")
def test_uv_in_an_empty_venv_selects_the_torch_the_wheel_was_built_for(index, tmp_path):
    python = empty_venv(tmp_path / "venv")
    cmd = ["uv", "pip", "install", "--dry-run", "--no-index", "--no-cache", "--python", str(python),
           "--find-links", str(index.parent), str(index)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "torch==2.14.1" in out and "torch==2.15.0" not in out


def test_an_exact_wheel_with_a_plain_torch_requirement_is_refused(tmp_path):
    # a wheel tagged before this change (Requires-Dist: torch) is named, not shipped (smoke, release)
    from release.errors import ReleaseError
    from release.ship import smoke

    raw = make_wheel(tmp_path / "raw", info=build_info(), metadata_tail="Requires-Dist: torch\n")
    tagged = tagging.retag(raw, tmp_path / "tagged")
    smoke.check_contents(tagged, "legacy")
    old = make_wheel(tmp_path / "old", version=tagging.verify_wheel(tagged).version,
                     metadata_tail="Requires-Dist: torch\n")  # fmt: skip
    with pytest.raises(ReleaseError, match=r"does not require torch==2\.14\.1 \(found \['torch'\]\)"):
        smoke.check_contents(old, "legacy")
    assert smoke.torch_fits(build_info(), "2.14.1+cu130") and not smoke.torch_fits(build_info(), "2.15.0")
