"""Progress of a long build that people can follow, and the summary at its end.

While the build runs, :class:`BuildProgress` reads the build output line by line. Ninja, writing
to a pipe, prints ``[finished/total] description`` each time an edge finishes; kernel
instantiation units are recognised by their generated source path
(``<build>/kernels/units/<unit>.cu``). The estimate of the time left weighs each unit by its
relative compile cost (``kernel_set.Unit.cost``, fitted to measured per-unit seconds: a
non-causal split-KV unit costs ~1.5 forward units), so the ETA does not jump when the heavy
units, which Ninja starts first, finish.

After the build, :func:`read_ninja_log` and :func:`summary` turn the entries the build added
to ``.ninja_log`` (the lines not in the :func:`ninja_log_lines` snapshot taken before it) into
the summary table (units compiled, wall time, slowest units, peak memory
of one compiler process, shared-object size per arch), printed with ``rich`` when available, and
:func:`write_trace` into the compile timeline beside the build log (a Chrome trace: one slice per
edge, for Perfetto or chrome://tracing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernels import kernel_set as kernel_sets
from release import checksums

NINJA_LINE_RE = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)$")
UNIT_PATH_RE = re.compile(r"kernels[/\\]units[/\\]([A-Za-z0-9_]+)\.cu\b")
# Weight of an edge that is not a kernel unit, on the scale of kernel_set.Unit.cost (a forward
# hdim64 unit is ~0.7): the binding sources and the dispatch include torch and CUTLASS headers but
# instantiate no kernel. Sized for small hosts, where they matter: on 2 cores 1.5-3 minutes each
# against 4-8 for a forward hdim64 unit; on the 16-core H200 host 5-9 s against 163 s (0.03).
OTHER_EDGE_COST = 0.2


def unit_cost(name: str) -> float:
    """Relative compile cost of a unit name (``_align`` split-KV companions cost as their unit)."""
    base = name[: -len("_align")] if name.endswith("_align") else name
    try:
        return kernel_sets.parse_unit(base).cost
    except kernel_sets.KernelSetError:
        return 1.0


def unit_of(text: str) -> str | None:
    """The kernel unit a build output line or ninja_log output names, if any."""
    m = UNIT_PATH_RE.search(text)
    return m.group(1) if m else None


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


@dataclass
class BuildProgress:
    """State of a running build, fed with its output lines."""

    units: list[str] = field(default_factory=list)  # unit names the build will compile (may be unknown)
    clock: object = time.monotonic
    # release.compile.estimate.Prediction of this build: the ETA follows its schedule (see eta()); None: no model
    prediction: object = None
    compiles_units: bool = True  # False for a binding/link build: no "kernel units" count in its status
    unit_finished_at: dict = field(default_factory=dict)  # unit -> elapsed seconds when it finished
    edges_done: int = 0
    edges_total: int = 0
    units_done: list[str] = field(default_factory=list)
    other_edges_done: int = 0
    started: float | None = None  # time of the first progress line's predecessor (the feed start)
    last: str = ""

    def __post_init__(self):
        self.started = self.clock()

    def set_units(self, names: list[str]) -> None:
        self.units = list(names)

    @property
    def units_total(self) -> int:
        return max(len(self.units), len(self.units_done))

    def feed(self, line: str) -> bool:
        """Take one output line; True when it was a Ninja progress line."""
        m = NINJA_LINE_RE.match(line.strip())
        if not m:
            return False
        self.edges_done, self.edges_total = int(m.group(1)), int(m.group(2))
        self.last = m.group(3)
        unit = unit_of(self.last)
        if unit:
            if unit not in self.units_done:
                self.units_done.append(unit)
            base = unit[: -len("_align")] if unit.endswith("_align") else unit
            self.unit_finished_at[base] = self.elapsed()  # an _align companion: its unit ends with the later
        else:
            self.other_edges_done += 1
        return True

    def elapsed(self) -> float:
        return self.clock() - self.started

    def eta(self) -> float | None:
        """Seconds left.

        With a prediction (release.compile.estimate) whose units all still lie ahead of Ninja (a build from
        scratch): its schedule, corrected by the units finished so far (Prediction.eta), so the ETA
        comes from the manifest's unit costs from the first second and moves while no edge
        finishes. Otherwise (no prediction, or an incremental build compiling fewer units than
        predicted): the cost-weighted throughput so far; None before an edge finished.
        """
        p = self.prediction
        if p is not None and (not self.edges_total or self.edges_total >= len(p.unit_finish)):
            return p.eta(self.elapsed(), self.unit_finished_at)
        done_cost = sum(unit_cost(u) for u in self.units_done) + OTHER_EDGE_COST * self.other_edges_done
        if done_cost == 0 or self.edges_total == 0:
            return None
        remaining_units = [u for u in self.units if u not in self.units_done]
        edges_left = self.edges_total - self.edges_done
        # Ninja's total counts only edges that need work: on an incremental build fewer units
        # remain than units.txt lists. Take the average remaining unit then.
        n_units_left = min(len(remaining_units), edges_left)
        if remaining_units and n_units_left < len(remaining_units):
            avg = sum(unit_cost(u) for u in remaining_units) / len(remaining_units)
            units_left_cost = avg * n_units_left
        else:
            units_left_cost = sum(unit_cost(u) for u in remaining_units)
        other_left = max(edges_left - n_units_left, 0) * OTHER_EDGE_COST
        return self.elapsed() * (units_left_cost + other_left) / done_cost

    def status(self) -> str:
        """One line: units done/total, edges, elapsed, ETA, the edge that just finished."""
        units = f"{len(self.units_done)}/{self.units_total}" if self.units_total else f"{len(self.units_done)}"
        eta = self.eta()
        eta_text = "estimating" if eta is None else format_seconds(eta)
        if self.prediction is not None:
            eta_text += f" (predicted {format_seconds(self.prediction.wall_seconds)} in all)"
            if eta == 0 and (self.edges_done < self.edges_total or not self.edges_total):  # running past it
                eta_text = f"past the estimate (predicted {format_seconds(self.prediction.wall_seconds)} in all)"
        token = self.last.split(" ")[-1]
        done = unit_of(self.last) or (token.replace("\\", "/").rsplit("/", 1)[-1] if "/" in token else self.last[:60])
        head = f"kernel units {units}, " if self.compiles_units else ""
        return (
            f"{head}edges {self.edges_done}/{self.edges_total}, elapsed "
            f"{format_seconds(self.elapsed())}, ETA {eta_text}" + (f" | {done}" if self.last else "")
        )


def units_of_build_dir(build_dir: Path) -> list[str]:
    """Unit names listed in <build>/kernels/units.txt (written at configure time), or []."""
    path = Path(build_dir) / "kernels" / "units.txt"
    if not path.is_file():
        return []
    return [u for u in (unit_of(line) for line in path.read_text(encoding="utf-8").splitlines()) if u]


# -- .ninja_log ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogEntry:
    """One line of a .ninja_log: an output file and its edge's times in ms from the start of its ninja run."""

    start_ms: int
    end_ms: int
    output: str
    cmd_hash: str = ""

    @property
    def seconds(self) -> float:
        return (self.end_ms - self.start_ms) / 1000.0


def ninja_log_lines(build_dir: Path) -> frozenset[str]:
    """The entry lines of <build_dir>/.ninja_log now (a snapshot to take before a build)."""
    path = Path(build_dir) / ".ninja_log"
    if not path.is_file():
        return frozenset()
    return frozenset(path.read_bytes().decode("utf-8", errors="replace").splitlines())


def parse_ninja_log_lines(text: str, seen: frozenset[str] = frozenset()) -> list[LogEntry]:
    """Every entry line of a .ninja_log text (v5-v7: start, end, mtime, output, hash), in file order.

    The one reader of the format, for the build summary (:func:`read_ninja_log`) and for
    bench/build.py (which splits the entries into ninja runs). Skips the ``# ninja log`` header,
    blank lines, lines in `seen`, and lines that are not tab-separated with integer times, so a
    log cut off mid-line still reads. Repeated outputs are all returned; callers pick the last.
    """
    entries = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#") or line in seen:
            continue
        parts = line.split("\t")
        if len(parts) < 4:
            continue
        try:
            start, end = int(parts[0]), int(parts[1])
        except ValueError:
            continue
        entries.append(LogEntry(start, end, parts[3], parts[4].strip() if len(parts) > 4 else ""))
    return entries


def read_ninja_log(path: Path, seen: frozenset[str] = frozenset()) -> list[LogEntry]:
    """Entries of a .ninja_log (v5-v7: start, end, mtime, output, hash) that are not in `seen`.

    Ninja appends one line per finished output; the last line of an output wins. It also
    recompacts the log now and then, rewriting the file with the last line of every output: a
    byte offset taken before the build then points into old entries, while the lines themselves
    are rewritten unchanged. So the entries of this build are the lines not in the snapshot
    `seen` (:func:`ninja_log_lines` before the build); with nothing to do there are none.
    """
    path = Path(path)
    if not path.is_file():
        return []
    text = path.read_bytes().decode("utf-8", errors="replace")
    return list({e.output: e for e in parse_ninja_log_lines(text, seen)}.values())


# -- compile timeline (Chrome trace) -------------------------------------------------------------

TRACE_NAME = "flash_attn_build_trace.json"


def chrome_trace(entries: list[LogEntry], title: str = "flash_attn build") -> dict:
    """The compile timeline of `entries` (.ninja_log lines of one build) as a Chrome trace.

    Trace Event Format, openable in Perfetto (ui.perfetto.dev) and chrome://tracing: one complete
    event (``"ph": "X"``) per edge, named by its kernel unit (category ``unit``) or output file
    (``edge``), ``ts`` / ``dur`` in microseconds from the start of the Ninja run, and ``tid`` a lane:
    each edge takes the lowest lane free at its start, so concurrent compiles never overlap in one
    lane and the number of lanes is the build's peak parallelism. Lanes are named by ``"M"``
    (metadata) events. Raises nothing; an empty list gives a trace without slices.
    """
    lanes_end: list[int] = []  # end (ms) of the last edge in each lane
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": title}}]
    for e in sorted(entries, key=lambda e: (e.start_ms, -e.end_ms, e.output)):
        lane = next((i for i, end in enumerate(lanes_end) if end <= e.start_ms), len(lanes_end))
        if lane == len(lanes_end):
            lanes_end.append(e.end_ms)
            events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": lane, "args": {"name": f"lane {lane}"}})
        lanes_end[lane] = e.end_ms
        unit = unit_of(e.output)
        events.append(
            {
                "ph": "X",
                "name": unit or e.output.replace("\\", "/").rsplit("/", 1)[-1],
                "cat": "unit" if unit else "edge",
                "ts": e.start_ms * 1000,
                "dur": max(e.end_ms - e.start_ms, 0) * 1000,
                "pid": 1,
                "tid": lane,
                "args": {"output": e.output, "seconds": round(e.seconds, 3)},
            }
        )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"source": ".ninja_log", "lanes": len(lanes_end)},
    }


def write_trace(build_dir: Path, entries: list[LogEntry]) -> Path:
    """Write :func:`chrome_trace` of `entries` to <build_dir>/flash_attn_build_trace.json (atomically,
    beside the build log); returns the path."""
    path = Path(build_dir) / TRACE_NAME
    checksums.atomic_write_text(path, json.dumps(chrome_trace(entries), separators=(",", ":")) + "\n")
    return path


# -- shared-object size per arch -----------------------------------------------------------------


def find_cuobjdump(nvcc: str | None = None) -> str | None:
    if nvcc:
        real = Path(nvcc).resolve()
        for cand in (real.parent / "cuobjdump", real.parent / "cuobjdump.exe"):
            if cand.is_file():
                return str(cand)
    return shutil.which("cuobjdump")


def group_by_arch(files: list[tuple[str, int]]) -> dict[str, int]:
    """{"sm_80": bytes, "compute_90 (PTX)": bytes} from extracted (file name, size) pairs."""
    sizes: dict[str, int] = {}
    for name, size in files:
        m = re.search(r"(?:sm|compute)_(\d+[af]?)", name)
        arch = m.group(1) if m else "?"
        key = f"compute_{arch} (PTX)" if name.endswith(".ptx") else f"sm_{arch}"
        sizes[key] = sizes.get(key, 0) + size
    return dict(sorted(sizes.items()))


def arch_sizes(library: Path, nvcc: str | None = None) -> dict[str, int]:
    """Device code size per arch in `library` (cuobjdump -xelf/-xptx), else {"total .so": size}."""
    library = Path(library)
    total = {"total .so": library.stat().st_size}
    tool = find_cuobjdump(nvcc)
    if not tool:
        return total
    with tempfile.TemporaryDirectory() as tmp:
        for flag in ("-xelf", "-xptx"):
            subprocess.run([tool, flag, "all", str(library.resolve())], cwd=tmp, capture_output=True, timeout=600)
        files = [(p.name, p.stat().st_size) for p in Path(tmp).iterdir() if p.is_file()]
    return {**group_by_arch(files), **total} if files else total


# -- summary -------------------------------------------------------------------------------------


def summary(
    entries: list[LogEntry],
    wall_seconds: float,
    peak_rss_bytes: int | None = None,
    sizes: dict[str, int] | None = None,
    slowest: int = 5,
) -> dict:
    """The summary record of one build (JSON-serialisable)."""
    units = sorted(((unit_of(e.output), e) for e in entries if unit_of(e.output)), key=lambda t: -t[1].seconds)
    return {
        "edges_run": len(entries),
        "units_compiled": len(units),
        "unit_names": sorted(u for u, _ in units),
        "wall_seconds": round(wall_seconds, 1),
        "unit_cpu_seconds": round(sum(e.seconds for _, e in units), 1),
        "slowest_units": [{"unit": u, "seconds": round(e.seconds, 1)} for u, e in units[:slowest]],
        "peak_rss_bytes": peak_rss_bytes,
        "sizes": sizes or {},
    }


def _mib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 2**20:.1f} MiB"


def summary_rows(s: dict) -> list[tuple[str, str]]:
    rows = [
        ("kernel units compiled", str(s["units_compiled"]) + ("" if s["units_compiled"] else " (nothing to do)")),
        ("build steps run", str(s["edges_run"])),
        ("wall time", format_seconds(s["wall_seconds"])),
        *(
            [("predicted before the build (wall time)", format_seconds(s["predicted_seconds"]))]
            if s.get("predicted_seconds") is not None
            else []
        ),
        ("unit compile time (sum)", format_seconds(s["unit_cpu_seconds"])),
        ("peak memory of one process", _mib(s["peak_rss_bytes"])),
    ]
    for item in s["slowest_units"]:
        rows.append((f"slowest: {item['unit']}", format_seconds(item["seconds"])))
    for arch, size in s["sizes"].items():
        rows.append((f"size: {arch}", _mib(size)))
    cache = s.get("compile_cache")
    if cache:
        rows.append(("compile cache (sccache) hits / misses", f"{cache['hits']} / {cache['misses']}"))
    return rows


def render_summary(s: dict, title: str = "flash_attn build summary") -> str:
    """Print the summary (rich table when rich is importable) and return its plain text."""
    rows = summary_rows(s)
    plain = title + "\n" + "\n".join(f"  {k:<40} {v}" for k, v in rows)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(plain, flush=True)
        return plain
    table = Table(title=title)
    table.add_column("what")
    table.add_column("value", justify="right")
    for k, v in rows:
        table.add_row(k, v)
    Console(width=max(shutil.get_terminal_size((100, 20)).columns, 80)).print(table)
    return plain


def peak_child_rss_bytes() -> int | None:
    """Largest resident set of one finished child process (ru_maxrss of RUSAGE_CHILDREN), if known."""
    try:
        import resource
    except ImportError:
        return None
    kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return kib * (1 if os.uname().sysname == "Darwin" else 1024) if kib else None
