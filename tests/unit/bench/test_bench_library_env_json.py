"""bench/bench_common.py: the library variable is the one flash_attn's loader reads, and result
files are strict JSON (NaN/inf as null)."""

from __future__ import annotations

import json
import math
import re

import bench_common as bc


def test_library_env_is_the_loaders():
    loader = (bc.REPO_ROOT / "flash_attn" / "_loader.py").read_text(encoding="utf-8")
    (name,) = re.findall(r'^LIBRARY_ENV = "([A-Z_]+)"', loader, re.MULTILINE)
    assert bc.LIBRARY_ENV == name == "FLASH_ATTN_LIB"
    target = bc.BuildTarget("none", "library", "/b", "/b/_C_custom.so", [str(bc.REPO_ROOT)])
    assert target.env({})[name] == "/b/_C_custom.so"


def test_write_results_is_strict_json(tmp_path):
    record = {"diff": math.nan, "ms": {"median": math.inf}, "shape": (2, 8), "ok": True, "path": tmp_path}
    j, _ = bc.write_results(tmp_path / "r", "kernels", record, "# t\n")

    def no_constant(name):
        raise ValueError(name)

    data = json.loads(j.read_text(), parse_constant=no_constant)
    assert data == {"diff": None, "ms": {"median": None}, "shape": [2, 8], "ok": True, "path": str(tmp_path)}
