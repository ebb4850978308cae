"""The fault-injection counters and the Probe helper, shared by the fault tests (test_faults*.py).

conftest.py prints COUNTS at the end of the run; every count but "probes run" must be 0.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

COUNTS = {
    "probes run": 0,
    "inputs lost": 0,
    "corrupt outputs": 0,
    "paths outside the output": 0,
    "tracebacks": 0,
    "internal errors": 0,
}


def tree_digest(*roots: Path) -> dict[str, str]:
    """{path: sha256} of every file under `roots` (a missing root maps to "absent")."""
    found = {}
    for root in roots:
        if not root.exists():
            found[str(root)] = "absent"
        for p in sorted(root.rglob("*")) if root.is_dir() else [root] if root.exists() else []:
            if p.is_file():
                found[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return found


def tree_paths(root: Path) -> set[str]:
    """Every path under `root` (files, folders, links), relative to it; empty when `root` is absent."""
    if not root.exists():
        return set()
    return {os.path.relpath(os.path.join(d, n), root) for d, dirs, files in os.walk(root) for n in dirs + files}


class Probe:
    """One probe: counts it, its lost inputs, corrupt outputs, writes outside the output, tracebacks
    and internal errors (then asserts each 0).

    `watch` is a folder around the step's output (e.g. tmp_path) whose paths outside `allowed` must
    not change: :meth:`nothing_outside` compares them with the snapshot taken here.
    """

    def __init__(self, *inputs: Path, watch: Path | None = None):
        COUNTS["probes run"] += 1
        self.inputs = inputs
        self.before = tree_digest(*inputs)
        self.watch = watch
        self.watched = tree_digest(watch) if watch is not None else {}

    def inputs_kept(self) -> None:
        after = tree_digest(*self.inputs)
        lost = [p for p in self.before if after.get(p) != self.before[p]]
        COUNTS["inputs lost"] += len(lost)
        assert not lost, lost

    def output_ok(self, ok: bool, what: str) -> None:
        COUNTS["corrupt outputs"] += not ok
        assert ok, f"corrupt output: {what}"

    def nothing_outside(self, *allowed: Path) -> None:
        """No file under `watch` changed or appeared, except under the `allowed` output folders."""
        assert self.watch is not None, "Probe(watch=...) names the folder to watch"
        after = tree_digest(self.watch)
        roots = [str(a) for a in allowed]

        def inside(p: str) -> bool:
            return any(p == r or p.startswith(r + os.sep) for r in roots)

        changed = [p for p in set(after) | set(self.watched) if after.get(p) != self.watched.get(p) and not inside(p)]
        COUNTS["paths outside the output"] += len(changed)
        assert not changed, f"written outside the output: {sorted(changed)}"

    def one_error(self, stderr: str, code: int, want_code: int = 2) -> str:
        """stderr has exactly one `error:` line, no traceback and no internal error; the exit status
        is `want_code`."""
        COUNTS["tracebacks"] += "Traceback" in stderr
        assert "Traceback" not in stderr, stderr
        if want_code != 3:
            COUNTS["internal errors"] += code == 3 or "internal error" in stderr
            assert "internal error" not in stderr, stderr
        assert len([line for line in stderr.splitlines() if line.startswith("error:")]) == 1, stderr
        assert code == want_code, (code, stderr)
        self.inputs_kept()
        return " ".join(stderr.split())
