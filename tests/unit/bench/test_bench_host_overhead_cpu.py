"""bench/host_overhead_cpu.py: the CPU measurement of the Python layer's per-call cost runs and
prints one line of numbers per case (in a child process: it rebinds flash_attn's operators)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "host_overhead_cpu.py"
NUMBER = r"-?\d+\.\d\d \( *-?\d+\.\d\d\)"


def test_prints_api_raw_and_difference_for_every_case():
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--calls", "3", "--repeats", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if re.search(rf"{NUMBER} +{NUMBER} +{NUMBER}$", line)]
    cases = [row.split("  ")[0] for row in rows]
    assert len(rows) == 6, run.stdout
    assert sum(c.startswith("flash_attn_func") for c in cases) == 2
    assert sum(c.startswith("flash_attn_with_kvcache decode") for c in cases) == 2
