"""The package version is upstream's, so consumers' version gates accept the wheel (README "Versions").

The public version equals the pinned upstream release (build-manifest.json upstream.version), this
project's revision is the ``rev<N>`` segment of the local label, and the gates written for the
official wheel accept every label a build can produce. Also: the wheel's runtime dependencies are
pyproject's torch plus what upstream's Python modules need (upstream_python.dependencies).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from release import _paths

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = json.loads((ROOT / "build-manifest.json").read_text(encoding="utf-8"))
LABEL = _paths.label()


def _labels() -> list[str]:
    """Labels of every kind a build makes: exact and stable ABI, release and other kernel sets."""
    return [
        LABEL.local_label("13.0", "2.14.1+cu130", True, "legacy"),
        LABEL.local_label("13.2", "2.15.0", True, "blackwell", "ci"),
        LABEL.local_label("13.0", None, True, "legacy", torch_abi="stable", torch_min="2.11"),
    ]


def test_package_version_is_the_pinned_upstream_release():
    assert _paths.package_version() == MANIFEST["upstream"]["version"]


def test_the_revision_is_a_label_segment_before_the_kernel_set():
    release, ci, stable = _labels()
    assert release == f"cu130torch2.14.1cxx11abitrue.legacy.rev{LABEL.REVISION}"
    assert ci.endswith(f".blackwell.rev{LABEL.REVISION}.ci")
    assert stable == f"cu130torchstable2.11.legacy.rev{LABEL.REVISION}"
    # two revisions of this project on one upstream release are two distinct versions
    assert Version(f"2.8.3.post2+{release}") != Version(f"2.8.3.post2+{release.replace('rev1', 'rev2')}")


@pytest.mark.parametrize("label", _labels())
@pytest.mark.parametrize(
    "spec",
    [
        # xformers (ops/fmha/flash.py): FLASH_VER_MIN = 2.7.1, FLASH_VER_LAST = 2.8.4, checked as
        # FLASH_VER_MIN <= parse(flash_attn.__version__) <= FLASH_VER_LAST
        ">=2.7.1,<=2.8.4",
        # a pin of the upstream release the wheel replaces, and a range
        "==2.8.3.post2",
        ">=2.6",
        "~=2.8.3",
    ],
)
def test_consumer_gates_accept_every_label(label: str, spec: str):
    version = Version(f"{_paths.package_version()}+{label}")
    assert version in SpecifierSet(spec), f"{version} not in {spec}"
    if spec == ">=2.7.1,<=2.8.4":  # xformers compares Version objects, local label included
        assert Version("2.7.1") <= version <= Version("2.8.4")


def test_a_pin_of_the_base_release_cannot_match_a_post_release():
    """PEP 440: ==2.8.3 matches 2.8.3 and 2.8.3+local only, never 2.8.3.post2 (the README says so)."""
    assert Version("2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1") not in SpecifierSet("==2.8.3")
    assert Version("2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1") in SpecifierSet("==2.8.3.*")


def test_runtime_dependencies_are_torch_plus_upstreams():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [Requirement(r).name for r in project["dependencies"]]
    assert names == ["torch", *MANIFEST["upstream_python"]["dependencies"]]


def test_version_file_is_what_pyproject_reads():
    text = (ROOT / "flash_attn" / "_version.py").read_text(encoding="utf-8")
    assert re.findall(r'^__version__ = "([^"]+)"$', text, re.MULTILINE) == [MANIFEST["upstream"]["version"]]
