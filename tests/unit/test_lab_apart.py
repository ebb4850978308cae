"""The product never imports, runs or names the lab (lab/README.md, docs/design.md "Layout and imports").

The product: src/, flash_attn/, cmake/, CMakeLists.txt, noxfile.py, pyproject.toml and .github/
(every file git tracks there). In none of them may a path into lab/ appear (``lab/...``,
``lab\\...``, ``.../lab``, a ``"lab"`` path part), nor the file name of a lab script, nor, in Python,
an import of a lab script's module. The lab may use the product; this checks the other direction.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ["src", "flash_attn", "cmake", "CMakeLists.txt", "noxfile.py", "pyproject.toml", ".github"]
LAB = REPO / "lab"
# lab/ as a path: lab/x or lab\x, .../lab at the end of a path, or "lab" as one part of a joined path
LAB_PATH = re.compile(r"(?<![\w.-])lab[/\\]|[/\\]lab\b(?![.-])|[\"']lab[\"']")


def lab_scripts() -> list[str]:
    """File names of the lab's scripts (lab/*.py, lab/*.sh; evidence/ is covered by the path rule)."""
    return sorted(p.name for p in LAB.iterdir() if p.is_file() and p.suffix in (".py", ".sh"))


def product_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--", *PRODUCT], cwd=REPO, capture_output=True, check=True)
    return [name for name in out.stdout.decode().split("\0") if name]


def lab_references(name: str, text: str, scripts: list[str]) -> list[str]:
    """What in ``text`` (the file ``name``) refers to the lab: '<line>: <what>' for each finding."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in LAB_PATH.finditer(line):
            found.append(f"{number}: path {match.group(0)!r}")
        found += [f"{number}: script {script}" for script in scripts if script in line]
    if name.endswith(".py"):
        modules = {Path(script).stem for script in scripts if script.endswith(".py")} | {"lab"}
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found += [f"{node.lineno}: import {n}" for n in names if n.split(".")[0] in modules]
    return found


def test_the_lab_has_scripts_to_look_for():
    scripts = lab_scripts()
    assert "device_session.sh" in scripts and "host_profile.py" in scripts, scripts
    assert (LAB / "evidence" / "README.md").is_file()


@pytest.mark.parametrize(
    "text",
    [
        'script = ROOT / "lab" / "host_profile.py"',
        "bash lab/device_session.sh shards",
        "set(EVIDENCE ${CMAKE_SOURCE_DIR}/lab)",
        r"run: python lab\probe.py",
        "see lab/evidence/h200-2026-11-29-dev/build.md",
        "import host_profile",
        "from dropout_identity import compare",
    ],
)
def test_the_scan_finds_a_reference_to_the_lab(text):
    assert lab_references("x.py" if "import" in text else "x.txt", text, lab_scripts()), text


@pytest.mark.parametrize(
    "text",
    ["label/x", "gitlab/ci", "collab", "the lab measures the product", "a lab-made probe", "lab.md"],
)
def test_the_scan_leaves_other_words_alone(text):
    assert lab_references("x.txt", text, lab_scripts()) == [], text


def test_the_product_never_refers_to_the_lab():
    scripts = lab_scripts()
    files = product_files()
    assert "noxfile.py" in files and "pyproject.toml" in files and any(f.startswith(".github/") for f in files)
    found = []
    for name in files:
        try:
            text = (REPO / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        found += [f"{name}:{where}" for where in lab_references(name, text, scripts)]
    assert not found, "the product refers to lab/: " + "; ".join(found)
