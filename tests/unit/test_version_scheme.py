"""This project's revision in the local label, and what pyproject.toml reads (README "Versions").

The public version is upstream's (consumers' gates: tests/unit/runtime/test_version_gates.py);
this project's revision is the ``rev<N>`` segment of the local label. The wheel's runtime
dependencies are torch plus what upstream's Python modules need (upstream_python.dependencies).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

from flash_attn_wheel_names import label as wheel_label

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = json.loads((ROOT / "build-manifest.json").read_text(encoding="utf-8"))
LABEL = wheel_label


def _labels() -> list[str]:
    """Labels of every kind a build makes: exact and stable ABI, release and other kernel sets."""
    return [
        LABEL.local_label("13.0", "2.14.1+cu130", True, "legacy"),
        LABEL.local_label("13.2", "2.15.0", True, "blackwell", "ci"),
        LABEL.local_label("13.0", None, True, "legacy", torch_abi="stable", torch_min="2.11"),
    ]


def test_the_revision_is_a_label_segment_before_the_kernel_set():
    release, ci, stable = _labels()
    assert release == f"cu130torch2.14.1cxx11abitrue.legacy.rev{LABEL.REVISION}"
    assert ci.endswith(f".blackwell.rev{LABEL.REVISION}.ci")
    assert stable == f"cu130torchstable2.11.legacy.rev{LABEL.REVISION}"
    # two revisions of this project on one upstream release are two distinct versions
    assert Version(f"2.8.3.post2+{release}") != Version(f"2.8.3.post2+{release.replace('rev1', 'rev2')}")


def test_runtime_dependencies_are_torch_plus_upstreams():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [Requirement(r).name for r in project["dependencies"]]
    assert names == ["torch", *MANIFEST["upstream_python"]["dependencies"]]


def test_version_file_is_what_pyproject_reads():
    text = (ROOT / "flash_attn" / "_version.py").read_text(encoding="utf-8")
    assert re.findall(r'^__version__ = "([^"]+)"$', text, re.MULTILINE) == [MANIFEST["upstream"]["version"]]


def test_swap_group_replaces_only_the_group_before_the_revision():
    ci = LABEL.local_label("13.2", "2.15.0", True, "legacy", "ci")
    assert LABEL.swap_group(ci, "legacy", "blackwell") == LABEL.local_label("13.2", "2.15.0", True, "blackwell", "ci")
    assert LABEL.swap_group("cu130torch2.14.1cxx11abitrue.legacy", "legacy", "blackwell") is None  # no revision
    assert LABEL.swap_group(ci.replace(".rev1", ".rev7"), "legacy", "blackwell") is None  # another revision
