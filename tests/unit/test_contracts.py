"""Each contract between the languages and entry points is defined once (docs/design.md "Who owns which rule").

Scans the tracked files (``git ls-files``) and fails when a second definition appears:

- the native library's file name pattern ``_C_<group>`` and the build info's ``build_info_<group>.json``
  as a regex: only ``flash_attn_wheel_names.native``;
- the "built without" message of a kernel left out of the kernel set: spelled in Python only by
  ``flash_attn_wheel_names.native`` (which src/kernels/generate_units.py renders into the C++), in no
  C++ or CMake string;
- which manifest is in use (``$FLASH_ATTN_MANIFEST``, else ``build-manifest.json``): only
  ``flash_attn_wheel_names.manifest_file`` names the file or the variable in Python; ``.ci/run``
  reads it through ``release.manifest``;
- the torch-ABI choices (a literal of both names, or a ``TORCH_ABIS``): only
  ``flash_attn_wheel_names.label``, which the manifest's ``FLASH_ATTN_TORCH_ABI`` choices must equal;
  no ``--torch-abi`` or ``torch_abi`` parameter defaults to a literal (the defaults are the manifest's).

Python files are read with ast: docstrings and comments may name these things, code may not. tests/
is not scanned (tests spell the expected values on purpose).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

import pytest

from flash_attn_wheel_names import label, native

ROOT = Path(__file__).resolve().parents[2]

NATIVE = "src/flash_attn_wheel_names/native.py"
MANIFEST_FILE = "src/flash_attn_wheel_names/manifest_file.py"
LABEL = "src/flash_attn_wheel_names/label.py"

_LIBRARY_REGEX = re.compile(r"(_C_|build_info_)[(\[\\]")  # a regex of the name: _C_(, _C_[, _C_\w
_NOT_BUILT = "was built without"
_ABI_NAMES = {label.TORCH_ABI_EXACT, label.TORCH_ABI_STABLE}


def tracked(*patterns: str) -> list[Path]:
    """The tracked files matching git pathspecs `patterns`, tests/ left out."""
    out = subprocess.run(["git", "ls-files", "-z", "--", *patterns], cwd=ROOT, capture_output=True, check=True)
    names = [n for n in out.stdout.decode().split("\0") if n and not n.startswith("tests/")]
    return [ROOT / n for n in names]


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of `tree` (module, class and function docstrings)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string constant of `tree` that is not a docstring (f-string parts included)."""
    skip = _docstrings(tree)
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
    ]


def python_findings(path: Path, rel: str) -> list[str]:
    """Second definitions in the Python file `path` (named `rel`, its path from the root), one line each."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for line, text in _strings(tree):
        if _LIBRARY_REGEX.search(text) and rel != NATIVE:
            found.append(f"{rel}:{line}: a regex of the native library or build info name: {text!r}")
        if _NOT_BUILT in text and rel != NATIVE:
            found.append(f"{rel}:{line}: the not-built message (flash_attn_wheel_names.native): {text!r}")
        if text in ("build-manifest.json", "FLASH_ATTN_MANIFEST") and rel != MANIFEST_FILE:
            found.append(
                f"{rel}:{line}: the manifest's name or variable (flash_attn_wheel_names.manifest_file): {text!r}"
            )
    for node in ast.walk(tree):
        if rel == LABEL:
            break
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and len(node.elts) >= 2:
            values = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if values == _ABI_NAMES:
                found.append(f"{rel}:{node.lineno}: the torch-ABI choices (flash_attn_wheel_names.label.TORCH_ABIS)")
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "TORCH_ABIS" for t in targets):
                found.append(f"{rel}:{node.lineno}: a second TORCH_ABIS (flash_attn_wheel_names.label)")
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            flags = [a.value for a in node.args if isinstance(a, ast.Constant)]
            for kw in node.keywords:
                if "--torch-abi" in flags and kw.arg == "default" and isinstance(kw.value, ast.Constant):
                    found.append(f"{rel}:{node.lineno}: --torch-abi defaults to the literal {kw.value.value!r}")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
            for arg, default in pairs:
                if arg.arg == "torch_abi" and isinstance(default, ast.Constant) and default.value in _ABI_NAMES:
                    found.append(f"{rel}:{node.lineno}: {node.name}(torch_abi={default.value!r}), a literal default")
    return found


def native_findings(path: Path, rel: str) -> list[str]:
    """The not-built message in a C++ or CMake string of `path` (comments left out)."""
    found = []
    for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        code = line.split("//")[0] if path.suffix in (".h", ".cpp", ".cu", ".cuh") else line.split("#")[0]
        if re.search(r'"[^"]*' + _NOT_BUILT, code):
            found.append(f"{rel}:{i}: the not-built message in a string (render it from flash_attn_wheel_names.native)")
    return found


def test_no_second_definition_in_python():
    files = tracked("*.py")
    assert any(p.name == "noxfile.py" for p in files) and len(files) > 50, "the scan sees the tracked Python files"
    found = [f for p in files for f in python_findings(p, p.relative_to(ROOT).as_posix())]
    assert found == [], "a contract is defined a second time:\n" + "\n".join(found)


def test_no_second_not_built_message_in_cxx_or_cmake():
    files = tracked("*.h", "*.cpp", "*.cu", "*.cuh", "*.cmake", "CMakeLists.txt")
    found = [f for p in files for f in native_findings(p, p.relative_to(ROOT).as_posix())]
    assert found == [], "\n".join(found)


def test_ci_run_reads_the_manifest_through_release_manifest():
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    code = [line for line in lines if not line.lstrip().startswith("#") and "echo" not in line]
    assert any("from release import manifest" in line and "manifest.load()" in line for line in code)
    assert not [line for line in code if "build-manifest.json" in line], "read the manifest through release.manifest"


def test_the_manifest_torch_abi_choices_are_the_runtime_s():
    options = json.loads((ROOT / "build-manifest.json").read_text(encoding="utf-8"))["options"]
    assert tuple(options["FLASH_ATTN_TORCH_ABI"]["choices"]) == label.TORCH_ABIS


@pytest.mark.parametrize(
    "planted",
    [
        'LIB = re.compile(r"_C_(\\w+)\\.so")\n',
        'INFO = re.compile(r"^flash_attn/build_info_([a-z0-9_]+)\\.json$")\n',
        'if "flash_attn was built without" in message:\n    pass\n',
        'path = root / "build-manifest.json"\n',
        'path = os.environ.get("FLASH_ATTN_MANIFEST")\n',
        'ABIS = ("stable", "exact")\n',
        "TORCH_ABIS = label.TORCH_ABIS\n",
        'p.add_argument("--torch-abi", default="stable")\n',
        'def plan(kernel_set, torch_abi: str = "stable"):\n    pass\n',
        'def entry(*, torch_abi="exact"):\n    pass\n',
    ],
)
def test_the_scan_finds_a_planted_second_definition(tmp_path, planted):
    f = tmp_path / "m.py"
    f.write_text(f'"""A module; its docstring may name build-manifest.json and _C_(group)."""\n{planted}')
    assert len(python_findings(f, "src/release/m.py")) == 1


def test_the_scan_leaves_docstrings_and_the_owners_alone(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('def f():\n    """Reads build-manifest.json; "flash_attn was built without" is native.py\'s."""\n')
    assert python_findings(f, "src/release/m.py") == []
    assert python_findings(ROOT / NATIVE, NATIVE) == []


def test_the_native_scan_finds_a_cxx_string_not_a_comment(tmp_path):
    f = tmp_path / "d.cu"
    f.write_text('// throws "flash_attn was built without ..."\nconst char* m = "flash_attn was built without";\n')
    assert [x.split(":")[1] for x in native_findings(f, "d.cu")] == ["2"]


def test_the_library_name_rules():
    assert native.library_group("_C_legacy.so") == "legacy"
    assert native.library_group("_C_legacy.cpython-312-x86_64-linux-gnu.so") == "legacy"
    assert native.library_group("_C_blackwell.pyd") == "blackwell"
    assert native.library_group("_C_my_group.so") is None  # a group is one label segment
    assert native.library_group("_C_Legacy.so") is None
    assert native.library_group("_C_legacy.so.bak") is None
    assert native.wheel_library_group("flash_attn/_C_legacy.so") == "legacy"
    assert native.wheel_library_group("flash_attn/sub/_C_legacy.so") is None
    assert native.wheel_build_info_group("flash_attn/build_info_legacy.json") == "legacy"
    assert native.build_info_name("legacy") == "build_info_legacy.json"
    assert native.library_group(native.library_name("custom", ".pyd")) == "custom"
    assert native.is_not_built_message(f"RuntimeError: {native.NOT_BUILT_PREFIX} the backward kernel")


def test_cmake_writes_the_names_the_runtime_reads():
    """CMake spells the two file names itself (a configure has no Python to ask for a target name);
    this holds its spelling to flash_attn_wheel_names.native's."""
    cmakelists = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    assert f'OUTPUT_NAME "{native.LIBRARY_PREFIX}${{group}}"' in cmakelists
    assert f'/{native.BUILD_INFO_PREFIX}${{group}}{native.BUILD_INFO_SUFFIX}"' in cmakelists
    assert f"DESTINATION {native.PACKAGE}" in cmakelists
    suffixes = re.findall(
        r'set\(FLASH_ATTN_MODULE_SUFFIX "([^"]+)"\)', (ROOT / "cmake" / "FlashAttnOptions.cmake").read_text()
    )
    assert sorted(suffixes) == sorted(native.LIBRARY_SUFFIXES)
