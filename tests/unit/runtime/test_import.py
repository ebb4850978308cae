"""Importing flash_attn without a GPU and without a built library; the version; ``python -m flash_attn``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flash_attn import _metadata

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "flash_attn"
NAMES = ROOT / "src" / "flash_attn_wheel_names"  # shipped beside flash_attn (pyproject.toml wheel.packages)


@pytest.fixture(scope="module")
def unbuilt_checkout(tmp_path_factory):
    """The wheel's Python packages only, laid out as installed: no native library, whatever this tree holds."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(
        PACKAGE, root / "flash_attn", ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.json", "__pycache__")
    )
    shutil.copytree(NAMES, root / NAMES.name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(root), CUDA_VISIBLE_DEVICES="")
    env.pop("FLASH_ATTN_LIB", None)
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_import_works_without_gpu_or_build(unbuilt_checkout):
    script = (
        "import flash_attn, torch\n"
        "assert not torch.cuda.is_available()\n"
        "print(flash_attn.__file__)\n"
        "print(flash_attn.__version__)\n"
        "print(flash_attn._loader.STATE.status)\n"
        "print(flash_attn.build_info())\n"
        "import sys\n"
        "print('torch._dynamo' in sys.modules)\n"
        "try:\n"
        "    flash_attn._loader.require_ready(0)\n"
        "except flash_attn.LibraryNotBuiltError as exc:\n"
        "    print('ERROR', exc)\n"
    )
    result = run(unbuilt_checkout, "-W", "error::RuntimeWarning", "-c", script)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(str(unbuilt_checkout))
    assert lines[1].split("+")[0] == "2.8.3.post2"
    assert lines[2:4] == ["not_built", "None"]
    assert lines[4] == "False", "importing flash_attn must not import torch._dynamo (slow)"
    assert "nox -s dev" in lines[5] and "pip install ." in lines[5]


def test_cli_says_not_built_and_fails(unbuilt_checkout):
    result = run(unbuilt_checkout, "-m", "flash_attn", "--plain")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "not built" in result.stdout and "nox -s dev" in result.stdout
    result = run(unbuilt_checkout, "-m", "flash_attn", "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 2 and report["exit_code"] == 2 and report["status"] == "not_built"


def test_version_choice():
    assert _metadata.choose_version("2.8.3.post2", None) == "2.8.3.post2"
    label = "2.8.3.post2+cu130torch2.14.1cxx11abitrue.legacy.rev1"
    assert _metadata.choose_version("2.8.3.post2", label) == label
    # an installed upstream flash_attn shadowed by this checkout: keep our own version
    assert _metadata.choose_version("2.8.3.post2", "2.8.3.post2") == "2.8.3.post2"


def test_version_from_metadata(monkeypatch):
    label = "2.8.3.post2+cu130torch2.14.1cxx11abitrue.blackwell.rev1"
    monkeypatch.setattr(_metadata.metadata, "version", lambda name: label)
    assert _metadata.package_version() == label

    def missing(name):
        raise _metadata.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_metadata.metadata, "version", missing)
    assert _metadata.package_version() == "2.8.3.post2"
