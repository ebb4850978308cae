"""Reading the workflow files in tests (a module of its own name, so no test imports `conftest`)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
WORKFLOWS = ROOT / ".github" / "workflows"


def load_workflow(name: str) -> dict:
    """A workflow file as data. PyYAML reads the key `on` as True (YAML 1.1); it is put back as "on"."""
    yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read the workflow files (pip install pyyaml)")
    doc = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    if True in doc:
        doc["on"] = doc.pop(True)
    return doc
