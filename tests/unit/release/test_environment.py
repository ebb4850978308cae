"""The environment-variable registry (release.environment) against the code that reads the variables.

The scan covers the tracked Python, CMake, shell and workflow files (lab/evidence/ holds records of
past runs, not code, and src/release/environment.py names every variable: both are left out):

- Python outside tests/: every string literal that is a whole ``FLASH_ATTN_*`` name or a registry
  entry's name (a name the code spells is a variable it reads, sets for a child, or a CMake define of
  the options table), and every upper-case name read with ``os.environ.get``/``os.environ[...]``/
  ``os.getenv``/``env.get``;
- Python under tests/: only ``FLASH_ATTN_*`` names read that way (tests also *set* variables, and name
  made-up options);
- CMake: ``ENV{NAME}``; shell: ``$FLASH_ATTN_*``/``${FLASH_ATTN_*``; workflows: ``vars.FLASH_ATTN_*``
  and ``env.FLASH_ATTN_*``.

CMake's own ``FLASH_ATTN_*`` variables (set and read as CMake variables) and C++ macros are not reads
of the environment and are not scanned.
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from release import environment, manifest
from release.plan import doc_tables

ROOT = Path(__file__).resolve().parents[3]
PREFIXED = re.compile(r"FLASH_ATTN_[A-Z0-9_]+")
UPPER = re.compile(r"[A-Z][A-Z0-9_]*")
CMAKE_ENV = re.compile(r"ENV\{([A-Za-z_][A-Za-z0-9_]*)\}")
SHELL_READ = re.compile(r"\$\{?(FLASH_ATTN_[A-Z0-9_]+)")
WORKFLOW_READ = re.compile(r"\b(?:vars|env)\.(FLASH_ATTN_[A-Z0-9_]+)")
ENV_NAMES = {"env", "environ"}  # the parameter names of functions that take an environment mapping


def _is_environment(node: ast.AST) -> bool:
    """`node` is ``os.environ`` (or ``environ``) or a name the code gives an environment mapping."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ"
    return isinstance(node, ast.Name) and node.id in ENV_NAMES


def python_reads(text: str) -> set[str]:
    """Names read as environment variables in Python `text`: the literal first argument of
    ``os.getenv``/``<environment>.get`` and the literal key of ``<environment>[...]``."""
    out = set()
    for node in ast.walk(ast.parse(text)):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr == "getenv" or (node.func.attr == "get" and _is_environment(node.func.value)):
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environment(node.value):
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            out.add(key.value)
    return out


def python_spelled(text: str) -> set[str]:
    """Every string literal of Python `text` that is a whole ``FLASH_ATTN_*`` name or a registry
    entry's name (such as ``REHEARSAL_NETWORK``, set for a child process as a dict key)."""
    registered = {v.name for v in environment.REGISTRY}
    return {
        node.value
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (PREFIXED.fullmatch(node.value) or node.value in registered)
    }


def names_in(rel: str, text: str) -> set[str]:
    """The environment variables file `rel` (relative to the checkout) reads, by the module docstring's rules."""
    if rel.endswith(".py"):
        reads = python_reads(text)
        if rel.startswith("tests/"):
            return {n for n in reads if PREFIXED.fullmatch(n)}
        return python_spelled(text) | {n for n in reads if UPPER.fullmatch(n)}
    if rel.endswith(".cmake") or rel.endswith("CMakeLists.txt"):
        return set(CMAKE_ENV.findall(text))
    if rel.startswith(".github/workflows/"):
        return set(WORKFLOW_READ.findall(text))
    return set(SHELL_READ.findall(text))


REGISTRY_FILE = Path(environment.__file__).resolve().relative_to(ROOT).as_posix()  # names every variable


def scanned_files() -> list[str]:
    """The tracked files the scan reads (relative paths), the registry's own module left out."""
    patterns = ["*.py", "*.cmake", "CMakeLists.txt", "*.sh", ".ci/*", ".github/workflows/*.yml"]
    out = subprocess.run(["git", "ls-files", "-z", *patterns], cwd=ROOT, capture_output=True, check=True).stdout
    return sorted(f for f in out.decode().split("\0") if f and not f.startswith("lab/evidence/") and f != REGISTRY_FILE)


def scan(files: dict[str, str]) -> dict[str, set[str]]:
    """Variable name -> the files (of `files`: relative path -> text) that read it."""
    found = defaultdict(set)
    for rel, text in files.items():
        for name in names_in(rel, text):
            found[name].add(rel)
    return dict(found)


def unregistered(found: dict[str, set[str]], data: dict) -> list[str]:
    """The names of `found` that are neither in the registry, nor options of manifest `data`, nor
    :data:`release.environment.STANDARD`: a ``FLASH_ATTN_*`` one always counts, another one only
    when a file outside tests/ reads it."""
    known = environment.names(data) | set(environment.STANDARD)
    return sorted(
        name
        for name, where in found.items()
        if name not in known and (PREFIXED.fullmatch(name) or any(not f.startswith("tests/") for f in where))
    )


# Files that read variables but are not listed as readers: the tests (they also set variables), and
# the lab, which the product never names (tests/unit/test_lab_apart.py).
UNLISTED = ("tests/", "lab/")


def reader_mismatches(found: dict[str, set[str]]) -> list[str]:
    """For each registry entry: readers listed that do not read it (stale), and files outside
    :data:`UNLISTED` that read it but are not listed (missing). Empty when "read by" is exact."""
    out = []
    for var in environment.REGISTRY:
        where = found.get(var.name, set())
        out += [f"{var.name}: {r} is listed but does not read it" for r in var.readers if r not in where]
        out += [
            f"{var.name}: {f} reads it but is not listed"
            for f in sorted(where)
            if f not in var.readers and not f.startswith(UNLISTED)
        ]
    return out


@pytest.fixture(scope="module")
def found() -> dict[str, set[str]]:
    return scan({rel: (ROOT / rel).read_text(encoding="utf-8") for rel in scanned_files()})


DATA = manifest.load()


def test_every_variable_the_code_reads_is_registered(found):
    assert unregistered(found, DATA) == [], "add it to release.environment.REGISTRY or STANDARD; nox -s doc_tables"


def test_every_entry_is_read_where_it_says(found):
    assert reader_mismatches(found) == []
    assert sorted(set(environment.STANDARD) - set(found)) == [], "a STANDARD name nothing reads any more"


def test_every_option_is_read_from_the_environment_by_cmake():
    # the options are not registry entries: CMake's one loop reads each one's environment variable
    cmake = (ROOT / "cmake" / "FlashAttnOptions.cmake").read_text(encoding="utf-8")
    assert 'if(DEFINED ENV{${name}} AND NOT "$ENV{${name}}" STREQUAL "")' in cmake


def test_entries_are_unique_and_well_formed():
    names = [v.name for v in environment.REGISTRY]
    assert len(names) == len(set(names))
    assert not set(names) & set(environment.option_names(DATA)), "an option is documented by the options table"
    assert not set(names) & set(environment.STANDARD)
    for var in environment.REGISTRY:
        assert var.affects and set(var.affects) <= set(environment.AFFECTS), var.name
        assert var.meaning and var.default and var.readers, var.name
        assert all((ROOT / r).is_file() for r in var.readers), var.name


def test_the_scan_sees_reads_in_every_language():
    files = {
        "src/a.py": 'import os\nX = "FLASH_ATTN_NEW_A"\nos.environ.get("NEW_B")\nos.environ["NEW_C"]\n',
        "tests/t.py": 'import os\nos.getenv("FLASH_ATTN_NEW_D")\nmonkeypatch.setenv("FLASH_ATTN_SET_ONLY", "1")\n',
        "cmake/X.cmake": 'set(d "$ENV{FLASH_ATTN_NEW_E}")\nset(FLASH_ATTN_INTERNAL 1)\n',
        "lab/x.sh": 'echo "${FLASH_ATTN_NEW_F:-0}" $FLASH_ATTN_NEW_G\n',
        ".github/workflows/w.yml": "X: ${{ vars.FLASH_ATTN_NEW_H }}\n",
        "tests/u.py": 'import os\nos.environ.get("TEST_ONLY")\n',
    }
    found = scan(files)
    assert unregistered(found, DATA) == [f"FLASH_ATTN_NEW_{c}" for c in "ADEFGH"] + ["NEW_B", "NEW_C"]
    assert "FLASH_ATTN_SET_ONLY" not in found and "FLASH_ATTN_INTERNAL" not in found


def test_a_listed_reader_that_does_not_read_it_is_found(found, monkeypatch):
    var = environment.REGISTRY[0]
    moved = environment.EnvVar(var.name, var.meaning, var.default, (*var.readers, "noxfile.py"), var.affects)
    dropped = environment.EnvVar(var.name, var.meaning, var.default, var.readers[1:], var.affects)
    assert "noxfile.py" not in found[var.name]
    monkeypatch.setattr(environment, "REGISTRY", (moved,))
    assert reader_mismatches(found) == [f"{var.name}: noxfile.py is listed but does not read it"]
    monkeypatch.setattr(environment, "REGISTRY", (dropped,))
    assert reader_mismatches(found) == [f"{var.name}: {var.readers[0]} reads it but is not listed"]


def test_the_docs_table_is_the_registrys_rendering(monkeypatch):
    doc = (ROOT / "docs" / "environment.md").read_text(encoding="utf-8")
    assert environment.table(DATA) in doc
    assert "docs/environment.md" not in doc_tables.stale(ROOT, DATA)
    # an edited entry makes the checkout's table stale (nox -s doc_tables --check fails)
    var = environment.REGISTRY[0]
    edited = environment.EnvVar(var.name, "edited meaning", var.default, var.readers, var.affects)
    monkeypatch.setattr(environment, "REGISTRY", (edited, *environment.REGISTRY[1:]))
    assert "docs/environment.md" in doc_tables.stale(ROOT, DATA)
