"""The import structure of src/ and flash_attn/, read with ast (nothing is imported), and the module index.

- No import cycle among the modules of src/release, counting the imports inside functions (the
  way a cycle hides).
- No module loaded through importlib (``importlib.util.spec_from_file_location``,
  ``importlib.import_module``, ``__import__``, ``runpy``) or reached by a ``sys.path`` edit,
  except release._paths loading flash_attn/_label.py and flash_attn/_install.py (its docstring says
  why: they ship inside ``flash_attn``, whose ``__init__`` loads the native library).
- src/release/__init__.py's module index names every module of the package once.
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
# file -> the paths (release._paths names) its loader may load
ALLOWED_LOADS = {"src/release/_paths.py": {"LABEL_PY", "INSTALL_PY"}}


def release_imports(path: Path) -> set[str]:
    """The src/release modules that `path` (a module of src/release) imports, anywhere in it."""
    modules = {p.stem for p in RELEASE.glob("*.py")}
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 1 and not base or node.level == 0 and base == "release":
                found |= {a.name for a in node.names if a.name in modules}  # from . import x / from release import x
            elif node.level == 1 or base.startswith("release."):
                found.add(base.removeprefix("release.").split(".")[0])  # from .x import y / from release.x import y
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("release.")}
    return (found & modules) - {path.stem}


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
    graph = {p.stem: release_imports(p) for p in RELEASE.glob("*.py")}
    assert graph["wheels"] >= {"archives", "prepare"} and "wheels" not in graph["archives"]  # the parser sees them
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
    rel = path.relative_to(ROOT).as_posix()
    loads = _hidden_loads(path)
    allowed = ALLOWED_LOADS.get(rel, set())
    if allowed:  # the loader's callers must pass one of the allowed paths
        calls = [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Call)]
        targets = {ast.unparse(c.args[1]) for c in calls if ast.unparse(c.func) == "_load_file"}
        assert targets and targets <= allowed, f"{rel} loads {sorted(targets - allowed)} by path"
        loads = [load for load in loads if not (load[1] == "spec_from_file_location" and load[2] == "path")]
    assert loads == [], f"{rel}: modules loaded around the import system: {loads}"


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
    index = re.findall(r"^- :mod:`release\.(\w+)`", (RELEASE / "__init__.py").read_text(encoding="utf-8"), re.M)
    modules = sorted(p.stem for p in RELEASE.glob("*.py") if p.stem != "__init__")
    assert sorted(index) == modules, (
        f"missing {sorted(set(modules) - set(index))}, extra {sorted(set(index) - set(modules))}"
    )
    assert len(index) == len(set(index))
