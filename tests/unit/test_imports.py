"""The import structure of src/ and flash_attn/, read with ast (nothing is imported), and the module index.

- No import cycle among the modules of src/release, counting the imports inside functions (the
  way a cycle hides).
- No module loaded through importlib (``importlib.util.spec_from_file_location``,
  ``importlib.import_module``, ``__import__``, ``runpy``) or reached by a ``sys.path`` edit.
- flash_attn_wheel_names, which the wheel's runtime and the release tooling both import, imports
  nothing outside the standard library.
- src/release/__init__.py's module index names every module of the package and its sub-packages
  once, and each sub-package's docstring says what it holds.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / "src" / "release"
SCANNED = sorted([*(ROOT / "src").rglob("*.py"), *(ROOT / "flash_attn").rglob("*.py")])
HIDDEN_LOADERS = {"spec_from_file_location", "import_module", "__import__", "run_path", "run_module"}


def _module_name(path: Path) -> str:
    """The dotted name of `path` under src/release without the ``release.`` prefix: ``sessions.wheels``,
    ``errors``; a sub-package's ``__init__.py`` is its package name (``sessions``). A deprecated alias
    file ``deprecated/old_<package>/<module>.py`` is imported as ``<package>.<module>`` (the old path
    whose ``__path__`` holds its folder: release._moved.alias_folder)."""
    parts = path.relative_to(RELEASE).with_suffix("").parts
    if len(parts) == 3 and parts[0] == "deprecated" and parts[1].startswith("old_") and parts[2] != "__init__":
        parts = (parts[1].removeprefix("old_"), parts[2])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in RELEASE.rglob("*.py") if p != RELEASE / "__init__.py"}
SUBPACKAGES = {name for name, p in MODULES.items() if p.name == "__init__.py"}


def release_imports(path: Path) -> set[str]:
    """The src/release modules (dotted names under ``release.``) that `path`, a module of src/release,
    imports anywhere in it, relative or absolute; importing a sub-package counts as importing its
    ``__init__``."""
    own = _module_name(path)
    package = own.split(".")[:-1] if path.name != "__init__.py" else own.split(".")
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # from . import x / from .x import y, resolved against the package
                base = ".".join([*package[: len(package) - node.level + 1], *([node.module] if node.module else [])])
            elif node.module == "release" or (node.module or "").startswith("release."):
                base = node.module.removeprefix("release").removeprefix(".")
            else:
                continue
            for alias in node.names:
                name = f"{base}.{alias.name}" if base else alias.name
                found.add(name if name in MODULES else base)  # a module imported, else a name of `base`
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("release.") for a in node.names if a.name.startswith("release.")}
    return {m for m in found if m in MODULES} - {own}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph[v]:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_among_the_release_modules():
    graph = {name: release_imports(p) for name, p in MODULES.items()}
    # the parser sees them: absolute imports of a sibling, of another sub-package's module, of a top-level one
    assert graph["sessions.wheels"] >= {"archive.archives", "compile.prepare", "locks"}
    assert "sessions.wheels" not in graph["archive.archives"]
    assert cycles(graph) == [], "import cycles among src/release modules"


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def _hidden_loads(path: Path) -> list[tuple[int, str, str]]:
    """(line, what, first argument's source) of each importlib/runpy load or sys.path edit in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        first = ast.unparse(node.args[1] if name == "spec_from_file_location" and len(node.args) > 1 else
                            node.args[0]) if node.args else ""  # fmt: skip
        if name in HIDDEN_LOADERS:
            found.append((node.lineno, name, first))
        elif name in {"insert", "append", "extend"} and ast.unparse(func.value) == "sys.path":
            found.append((node.lineno, "sys.path." + name, first))
    return sorted(found)


@pytest.mark.parametrize("path", SCANNED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_loaded_around_the_import_system(path):
    loads = _hidden_loads(path)
    assert loads == [], f"{path.relative_to(ROOT).as_posix()}: modules loaded around the import system: {loads}"


def _top_level_imports(path: Path) -> set[str]:
    """The top-level names `path` imports (absolute imports only; a relative one is the package itself)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted((ROOT / "src" / "flash_attn_wheel_names").glob("*.py")), ids=lambda p: p.name)
def test_the_shared_naming_rules_import_only_the_standard_library(path):
    import sys

    outside = _top_level_imports(path) - set(sys.stdlib_module_names) - {"__future__", "flash_attn_wheel_names"}
    assert outside == set(), f"{path.name} imports {sorted(outside)}: the runtime and the release tooling both load it"


def test_the_import_reader_sees_third_party_imports(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import re\nfrom packaging.version import Version\nfrom . import sibling\n")
    assert _top_level_imports(f) == {"re", "packaging"}


def test_the_load_finder_sees_importlib_and_sys_path(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(
        "import importlib, importlib.util, sys\n"
        "m = importlib.import_module('flash_attn')\n"
        "s = importlib.util.spec_from_file_location('k', 'src/kernels/kernel_set.py')\n"
        "sys.path.insert(0, 'src/kernels')\n"
    )
    assert [what for _, what, _ in _hidden_loads(f)] == ["import_module", "spec_from_file_location", "sys.path.insert"]


def test_the_package_docstring_lists_every_release_module_once():
    index = re.findall(r"^- :mod:`release\.([\w.]+)`", (RELEASE / "__init__.py").read_text(encoding="utf-8"), re.M)
    modules = sorted(set(MODULES) - SUBPACKAGES)
    assert sorted(index) == modules, (
        f"missing {sorted(set(modules) - set(index))}, extra {sorted(set(index) - set(modules))}"
    )
    assert len(index) == len(set(index))


def test_every_sub_package_says_what_it_holds():
    folders = {_module_name(p.parent / "__init__.py") for p in RELEASE.rglob("*.py") if p.parent != RELEASE}
    assert folders == SUBPACKAGES, f"folders of src/release without an __init__.py: {sorted(folders - SUBPACKAGES)}"
    for name in sorted(SUBPACKAGES):
        doc = ast.get_docstring(ast.parse(MODULES[name].read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 5, f"release.{name} has no docstring saying what it holds"
