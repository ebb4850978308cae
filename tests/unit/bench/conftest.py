"""Makes the bench/ scripts importable by the tests.

The scripts import each other as top-level modules (they run as ``python bench/<name>.py``, so
bench/ is sys.path[0]); bench/ is on pytest's pythonpath (pyproject.toml). The scripts whose names
other packages use too (``build`` is PyPA's build frontend and the repository's build/ folder) are
registered under ``bench_<name>`` aliases, which the tests import.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"

for _name in ("build", "load_cost", "machine"):
    _alias = f"bench_{_name}"
    if _alias not in sys.modules:
        _spec = importlib.util.spec_from_file_location(_alias, BENCH / f"{_name}.py")
        _module = importlib.util.module_from_spec(_spec)
        sys.modules[_alias] = _module  # dataclasses look their module up while the class is created
        _spec.loader.exec_module(_module)
