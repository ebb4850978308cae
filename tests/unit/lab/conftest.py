"""Puts lab/ on sys.path for the tests of its scripts.

The lab's scripts run as ``python lab/<name>.py`` (lab/ is then sys.path[0]) and the tests import
them under those names. pyproject.toml's pytest ``pythonpath`` names only the product's folders:
the product never refers to lab/ (tests/unit/test_lab_apart.py), so the lab's tests add it here.
"""

from __future__ import annotations

import sys
from pathlib import Path

LAB = Path(__file__).resolve().parents[3] / "lab"

if str(LAB) not in sys.path:
    sys.path.insert(0, str(LAB))
