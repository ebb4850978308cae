"""No function in bench/ is longer than the project's limit (issue 36: bench/ to the project's standard).

A function's length is ``end_lineno - lineno + 1`` of its ``ast`` node (the ``def`` line through its
last line, docstring and nested functions included); methods and nested functions count on their own.
src/ and flash_attn/ are not checked yet: several of their functions are over the limit today.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
MAX_LINES = 80  # the project's "about 80 lines" for one function
CHECKED = ("bench",)  # folders under the repository root whose .py files are held to MAX_LINES


def long_functions(root: Path, limit: int = MAX_LINES) -> list[str]:
    """``path:line name (N lines)`` for every function or method in ``root``'s .py files over ``limit`` lines.

    Paths are relative to ``root``'s parent; a file that does not parse raises SyntaxError.
    """
    found = []
    for path in sorted(Path(root).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    name = path.relative_to(Path(root).parent).as_posix()
                    found.append(f"{name}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_over_the_limit():
    offenders = [f for folder in CHECKED for f in long_functions(REPO / folder)]
    assert not offenders, (
        f"functions over {MAX_LINES} lines (split them into named functions with docstrings):\n  "
        + "\n  ".join(offenders)
    )


def test_a_long_function_is_found(tmp_path):
    root = tmp_path / "pkg"
    root.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES - 1))
    (root / "short.py").write_text(f"def fits():\n{body}\n", encoding="utf-8")  # exactly MAX_LINES lines
    nested = "\n".join(f"        y{i} = {i}" for i in range(MAX_LINES))
    (root / "long.py").write_text(f"class C:\n    def method(self):\n{nested}\n", encoding="utf-8")
    assert long_functions(root) == [f"pkg/long.py:2 method ({MAX_LINES + 1} lines)"]
