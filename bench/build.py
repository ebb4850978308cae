"""Build cost of one kernel set for one arch list: ours (CMake + Ninja) against upstream's setup.py.

Our build (``--out``)::

    python bench/build.py --out DIR [--sdist PATH] [--archs 90] [--kernel-set dev] [--jobs N]

configures and builds this repository with CMake directly::

    cmake -S <repo> -B DIR/ours-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASH_ATTN_ARCH_GROUP=custom
          -DFLASH_ATTN_CUDA_ARCHS=90 -DFLASH_ATTN_KERNEL_SET=dev -DFLASH_ATTN_SDIST=<sdist> -DFLASH_ATTN_JOBS=<n>
          -DCMAKE_CUDA_COMPILER_LAUNCHER=<python>;bench/measure_launcher.py;--log;<file> (and CXX)
    cmake --build DIR/ours-build

and reports the configure and build wall times, each compile's seconds (``.ninja_log``), peak
memory and CPU time (bench/measure_launcher.py), the critical path through Ninja's dependency
graph, and the lower bound ``max(longest compile, sum of compile seconds / jobs)``.

Upstream (the same sdist built by its own setup.py, same nvcc, ``MAX_JOBS`` = jobs,
``FLASH_ATTN_CUDA_ARCHS`` / ``TORCH_CUDA_ARCH_LIST`` = the same archs, ``FLASH_ATTENTION_FORCE_BUILD=TRUE``)::

    python bench/build.py --out DIR --upstream UPDIR ...       # inline, after ours (~15-20 min more)
    python bench/build.py --upstream-background UPDIR ...      # start it detached, return at once
    python bench/build.py --out DIR --reuse-ours --collect UPDIR [--wait-s 1800]

The upstream sdist is unpacked into UPDIR/src and built in place with ``pip wheel
--no-build-isolation --no-deps -v`` (in place so that its ``build/temp.*/.ninja_log``
survives); nvcc is wrapped through torch's ``PYTORCH_NVCC`` with the same launcher, so upstream's
units get peak memory too. ``--upstream-mode units`` builds only the units both sides build:
setup.py runs once with the launcher in dry mode (every nvcc exits at once) to write its
``build.ninja``, then ``ninja -j <jobs> <those objects>`` runs upstream's own compile commands.

Upstream always builds all of its units, so the comparison "for the same units" is, in order
of preference: the measured ``units``-mode wall time; else a replay of the full build's
``.ninja_log`` (the common units in the order upstream's ninja started them, with upstream's
durations, on ``jobs`` slots); plus always the per-unit seconds of every common unit. The
report says which basis it used. Targets (reported, not asserted): our build wall time within
1.15x of the lower bound, and at most 0.8x of upstream's for the same units.

Writes DIR/build.json and DIR/build.md.

Sharded against unsharded (bench/build_sharded.py; writes DIR/build_sharded.json and .md)::

    python bench/build.py --out DIR --sharded 4x4 [--kernel-set dev --archs 90 --sdist PATH]
                          [--only sharded|unsharded|both|report]
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import bench_common as bc
import build_sharded
import machine

from release import manifest  # src/ is on PYTHONPATH: see bench_common
from release.checksums import sha256_file
from release.compile import options  # the sdist cache folder rule (options.sdist_cache_dir)
from release.compile.progress import parse_ninja_log_lines  # the one .ninja_log line reader

LAUNCHER = Path(__file__).resolve().parent / "measure_launcher.py"
DRY_ENV = "FLASH_ATTN_BENCH_LAUNCHER_DRY"
TARGET_LOWER_BOUND_RATIO = 1.15
TARGET_UPSTREAM_RATIO = 0.8


# -- the pin (read from build-manifest.json, never copied) ---------------------------------------


def upstream_pin(text: str | None = None) -> tuple[str, str]:
    """(version, sha256) of the pinned upstream sdist: ``upstream`` in build-manifest.json (or `text`)."""
    try:
        data = manifest.load() if text is None else json.loads(text)
        version, sha = data["upstream"]["version"], data["upstream"]["sha256"]
    except (ValueError, KeyError, TypeError) as e:
        raise RuntimeError(f"the build manifest has no upstream version/sha256 ({e}); see docs/manifest.md") from None
    return version, sha


# -- .ninja_log ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Edge:
    """One finished Ninja edge: times in ms from the start of its build, and its output files."""

    start_ms: int
    end_ms: int
    outputs: tuple[str, ...]
    cmd_hash: str = ""

    @property
    def seconds(self) -> float:
        return (self.end_ms - self.start_ms) / 1000.0

    @property
    def name(self) -> str:
        return self.outputs[0]


def parse_ninja_log(text: str) -> list[list[Edge]]:
    """The builds recorded in a .ninja_log (format v5-v7: start_ms end_ms mtime output hash).

    The lines are read by :func:`release.compile.progress.parse_ninja_log_lines` (the one reader of the
    format). Ninja appends a line per output when its edge finishes, with times relative to the
    start of that ninja run, so a decreasing end time starts a new build (as ninjatracing does). Lines of
    one edge with several outputs (same start, end and command hash) are joined; within a build
    a repeated output keeps its last line.
    """
    builds: list[list[tuple[int, int, str, str]]] = []
    current: list[tuple[int, int, str, str]] = []
    last_end = -1
    for entry in parse_ninja_log_lines(text):
        if entry.end_ms < last_end and current:
            builds.append(current)
            current = []
        last_end = entry.end_ms
        current.append((entry.start_ms, entry.end_ms, entry.output, entry.cmd_hash))
    if current:
        builds.append(current)
    result = []
    for lines in builds:
        latest: dict[str, tuple[int, int, str, str]] = {}
        for item in lines:
            latest.pop(item[2], None)
            latest[item[2]] = item
        grouped: dict[tuple[int, int, str], list[str]] = {}
        for start, end, output, h in latest.values():
            key = (start, end, h) if h else (start, end, output)
            grouped.setdefault(key, []).append(output)
        edges = [
            Edge(k[0], k[1], tuple(outs), k[2] if len(k) == 3 and k[2] not in outs else "")
            for k, outs in grouped.items()
        ]
        result.append(sorted(edges, key=lambda e: (e.end_ms, e.start_ms, e.name)))
    return result


def last_build(text: str) -> list[Edge]:
    """Edges of the most recent build in a .ninja_log text ([] when empty)."""
    builds = parse_ninja_log(text)
    return builds[-1] if builds else []


# -- unit names ----------------------------------------------------------------------------------

_OUR_OBJ_RE = re.compile(
    r"^(?P<unit>(?:bwd|fwd_split|fwd)_hdim\d+_(?:fp16|bf16)(?:_causal)?)(?P<align>_align)?\.cu\.(?:o|obj)$"
)
_UPSTREAM_OBJ_RE = re.compile(
    r"^flash_(?P<kind>fwd_split|fwd|bwd)_hdim(?P<dim>\d+)_(?P<dtype>fp16|bf16)(?P<causal>_causal)?_sm\d+\.(?:o|obj)$"
)


def _valid_unit(name: str) -> str | None:
    ks = bc.kernel_set()
    try:
        return ks.parse_unit(name).name
    except ks.KernelSetError:
        return None


def our_unit_of(path: str) -> str | None:
    """Unit name of one of our objects (``.../kernels/units/fwd_hdim64_fp16.cu.o``); split-KV
    ``_align`` companions map to their unit. None for anything else (binding, dispatch, link)."""
    m = _OUR_OBJ_RE.match(os.path.basename(path.replace("\\", "/")))
    return _valid_unit(m.group("unit")) if m else None


def upstream_unit_of(path: str) -> str | None:
    """Our unit name for an upstream object: ``flash_fwd_hdim64_fp16_sm80.o`` -> ``fwd_hdim64_fp16``,
    ``flash_bwd_hdim128_bf16_causal_sm80.o`` -> ``bwd_hdim128_bf16_causal``,
    ``flash_fwd_split_hdim64_fp16_sm80.o`` -> ``fwd_split_hdim64_fp16``. None for flash_api.o etc."""
    m = _UPSTREAM_OBJ_RE.match(os.path.basename(path.replace("\\", "/")))
    if not m:
        return None
    return _valid_unit(f"{m.group('kind')}_hdim{m.group('dim')}_{m.group('dtype')}{m.group('causal') or ''}")


def upstream_object_name(unit: str) -> str:
    """The object base name upstream's setup.py gives a unit (sources are named ..._sm80.cu for every arch)."""
    ks = bc.kernel_set()
    u = ks.parse_unit(unit)
    return f"flash_{u.kind}_hdim{u.head_dim}_{u.dtype}{'_causal' if u.causal else ''}_sm80.o"


def edge_kind(output: str, unit_of) -> str:
    """'unit' (a kernel instantiation unit), 'compile' (another object) or 'other' (link, ...)."""
    if unit_of(output):
        return "unit"
    if output.endswith((".o", ".obj")):
        return "compile"
    return "other"


# -- arithmetic ----------------------------------------------------------------------------------


def lower_bound(durations: list[float], jobs: int) -> float:
    """max(longest, sum / jobs): no schedule of these compiles on `jobs` slots finishes sooner."""
    if not durations:
        return 0.0
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    return max(max(durations), sum(durations) / jobs)


def simulate_schedule(durations: list[float], jobs: int) -> float:
    """Makespan of starting the jobs in the given order, each on the first free of `jobs` slots."""
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    slots = [0.0] * jobs
    heapq.heapify(slots)
    for d in durations:
        t = heapq.heappop(slots)
        heapq.heappush(slots, t + d)
    return max(slots) if durations else 0.0


def critical_path(durations: dict[str, float], deps: dict[str, set[str]]) -> tuple[float, list[str]]:
    """Longest chain (seconds, edge names first to last) through the dependency graph.

    ``durations``: edge name -> seconds; ``deps``: edge name -> names of the edges it waits for
    (names not in ``durations`` are ignored). Raises ValueError on a cycle.
    """
    finish: dict[str, float] = {}
    via: dict[str, str | None] = {}
    state: dict[str, int] = {}

    def visit(node: str) -> float:
        if state.get(node) == 2:
            return finish[node]
        if state.get(node) == 1:
            raise ValueError(f"dependency cycle through {node}")
        state[node] = 1
        best, best_dep = 0.0, None
        for d in sorted(deps.get(node, ())):
            if d in durations and d != node:
                f = visit(d)
                if f > best:
                    best, best_dep = f, d
        finish[node] = best + durations[node]
        via[node] = best_dep
        state[node] = 2
        return finish[node]

    if not durations:
        return 0.0, []
    for node in durations:
        visit(node)
    end = max(finish, key=lambda n: (finish[n], n))
    chain = []
    node: str | None = end
    while node is not None:
        chain.append(node)
        node = via[node]
    return finish[end], chain[::-1]


def fallback_deps(edges: list[Edge], unit_of) -> dict[str, set[str]]:
    """Dependencies guessed without Ninja: every non-compile edge waits for the compiles that
    finished before it started (true for a compile-then-link build)."""
    compiles = [e for e in edges if edge_kind(e.name, unit_of) != "other"]
    deps: dict[str, set[str]] = {}
    for e in edges:
        if edge_kind(e.name, unit_of) == "other":
            deps[e.name] = {c.name for c in compiles if c.end_ms <= e.start_ms}
    return deps


def parse_ninja_query(text: str) -> dict[str, set[str]]:
    """``ninja -t query`` output -> {target: inputs (explicit, implicit '|' and order-only '||')}."""
    result: dict[str, set[str]] = {}
    target = None
    section = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if not raw.startswith(" "):
            target = raw.rstrip()[:-1] if raw.rstrip().endswith(":") else raw.rstrip()
            result.setdefault(target, set())
            section = None
            continue
        line = raw.strip()
        if line.startswith("input:"):
            section = "input"
            continue
        if line.endswith(":") and not line.startswith(("|", "||")):
            section = line[:-1]  # outputs:, validations:
            continue
        if section == "input" and target is not None:
            name = line[3:] if line.startswith("|| ") else line[2:] if line.startswith("| ") else line
            result[target].add(name.strip())
    return result


def ninja_deps(build_dir: Path, edges: list[Edge]) -> dict[str, set[str]] | None:
    """Edge name -> names of logged edges it depends on (through phony targets), from
    ``ninja -t query``; None when Ninja cannot answer."""
    ninja = shutil.which("ninja")
    if not ninja:
        return None
    by_output = {o: e.name for e in edges for o in e.outputs}
    graph: dict[str, set[str]] = {}
    answered = []

    def query(names: list[str]) -> None:
        names = [n for n in names if n not in graph]
        if not names:
            return
        proc = subprocess.run([ninja, "-C", str(build_dir), "-t", "query", *names], capture_output=True, text=True)
        if proc.returncode == 0:
            graph.update(parse_ninja_query(proc.stdout))
            answered.append(True)
            return
        if len(names) == 1:  # a name Ninja does not know (e.g. from an older build.ninja): no inputs
            graph[names[0]] = set()
            return
        for n in names:
            query([n])

    query(sorted(by_output))
    if not answered:  # no build.ninja, or none of the logged outputs is in it
        return None
    for _ in range(6):  # follow phony/unlogged targets a few levels deep
        pending = {i for ins in graph.values() for i in ins if i not in by_output and i not in graph}
        if not pending:
            break
        query(sorted(pending))

    def reach(name: str, seen: set[str]) -> set[str]:
        found = set()
        for i in graph.get(name, ()):
            if i in seen:
                continue
            seen.add(i)
            if i in by_output:
                found.add(by_output[i])
            else:
                found |= reach(i, seen)
        return found

    deps = {}
    for e in edges:
        ins: set[str] = set()
        for o in e.outputs:
            ins |= reach(o, set())
        deps[e.name] = ins - {e.name}
    return deps


# -- launcher records ----------------------------------------------------------------------------


def read_launcher_log(path: Path) -> dict[str, dict]:
    """measure_launcher.py JSON lines -> {absolute normalised output path: record} (last wins)."""
    records: dict[str, dict] = {}
    if not Path(path).is_file():
        return records
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if not r.get("output"):
            continue
        records[os.path.normpath(os.path.join(r.get("cwd") or "", r["output"]))] = r
    return records


def edge_records(edges: list[Edge], build_dir: Path, launcher: dict[str, dict], unit_of) -> list[dict]:
    """One JSON record per edge: output, kind, unit, seconds, start/end, launcher's memory and CPU."""
    rows = []
    for e in edges:
        rec = None
        for o in e.outputs:
            rec = launcher.get(os.path.normpath(os.path.join(str(build_dir), o)))
            if rec:
                break
        rows.append(
            {
                "output": e.name,
                "kind": edge_kind(e.name, unit_of),
                "unit": unit_of(e.name),
                "seconds": round(e.seconds, 3),
                "start_s": round(e.start_ms / 1000.0, 3),
                "end_s": round(e.end_ms / 1000.0, 3),
                "peak_rss_mib": None
                if not rec or rec.get("maxrss_kib") is None
                else round(rec["maxrss_kib"] / 1024, 1),
                "cpu_s": None if not rec or rec.get("user_s") is None else round(rec["user_s"] + rec["sys_s"], 1),
            }
        )
    return rows


def per_unit_seconds(rows: list[dict]) -> dict[str, float]:
    """Unit -> compile seconds (a split-KV unit's _align companion adds to its unit)."""
    units: dict[str, float] = {}
    for r in rows:
        if r["unit"]:
            units[r["unit"]] = round(units.get(r["unit"], 0.0) + r["seconds"], 3)
    return units


def analyse(edges: list[Edge], rows: list[dict], jobs: int, deps: dict[str, set[str]] | None, unit_of) -> dict:
    """Sums, longest compile, lower bound, critical path of one build's edges."""
    compiles = [r["seconds"] for r in rows if r["kind"] != "other"]
    durations = {e.name: e.seconds for e in edges}
    basis = "ninja -t query"
    if deps is None:
        deps, basis = fallback_deps(edges, unit_of), "guessed: links wait for the compiles that ended before them"
    cp_s, chain = critical_path(durations, deps)
    lb = lower_bound(compiles, jobs)
    span = (max(e.end_ms for e in edges) - min(e.start_ms for e in edges)) / 1000.0 if edges else 0.0
    peaks = [r["peak_rss_mib"] for r in rows if r["peak_rss_mib"] is not None]
    return {
        "edges": len(edges),
        "units": sum(1 for r in rows if r["kind"] == "unit"),
        "sum_compile_s": round(sum(compiles), 1),
        "longest_compile_s": round(max(compiles), 1) if compiles else 0.0,
        "jobs": jobs,
        "lower_bound_s": round(lb, 1),
        "lower_bound_formula": "max(longest compile, sum of compile seconds / jobs); compiles = every .o edge",
        "critical_path_s": round(cp_s, 1),
        "critical_path": chain,
        "critical_path_basis": basis,
        "ninja_span_s": round(span, 1),
        "peak_rss_mib_max": max(peaks) if peaks else None,
    }


# -- small process helpers -----------------------------------------------------------------------


class MemorySampler:
    """Samples system memory in use (MemTotal - MemAvailable) once a second; keeps the peak."""

    def __init__(self) -> None:
        self.peak_gib: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        try:
            info = machine.parse_meminfo(Path("/proc/meminfo").read_text())
        except OSError:
            return
        if info["total_gib"] is None or info["available_gib"] is None:
            return
        used = round(info["total_gib"] - info["available_gib"], 1)
        self.peak_gib = used if self.peak_gib is None else max(self.peak_gib, used)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self._sample()

    def __enter__(self):
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run_logged(
    cmd: list[str], log: Path, env: dict | None = None, cwd: Path | None = None, echo: bool = True
) -> tuple[int, float]:
    """Run a command, its output appended to `log` (and echoed to stderr); (exit status, seconds)."""
    t0 = time.perf_counter()
    with open(log, "a", encoding="utf-8", errors="replace") as fh:
        fh.write(f"$ {shlex.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd, text=True, errors="replace"
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            if echo:
                sys.stderr.write(line)
        rc = proc.wait()
    return rc, time.perf_counter() - t0


def find_nvcc(explicit: str | None) -> str | None:
    """nvcc both builds use: --nvcc, $CUDACXX, nvcc on PATH, $CUDA_HOME/bin/nvcc (resolved)."""
    cands = [explicit, os.environ.get("CUDACXX"), shutil.which("nvcc")]
    if os.environ.get("CUDA_HOME"):
        cands.append(str(Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc"))
    for c in filter(None, cands):
        if Path(c).is_file():
            return str(Path(c).resolve())
    return None


def cuda_home_for(nvcc: str) -> str:
    """The CUDA toolkit root for torch's CUDA_HOME: the first of $CUDA_HOME, $CUDA_PATH, <nvcc>/../..
    and /usr/local/cuda that holds bin/nvcc and include/cuda_runtime.h (nvcc may be a wrapper script)."""

    def is_toolkit(root: Path) -> bool:
        return (root / "bin" / "nvcc").is_file() and (
            (root / "include" / "cuda_runtime.h").is_file() or any(root.glob("targets/*/include/cuda_runtime.h"))
        )

    fallback = Path(nvcc).resolve().parent.parent
    for cand in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), fallback, "/usr/local/cuda"):
        if cand and is_toolkit(Path(cand)):
            return str(Path(cand))
    return str(fallback)


def find_sdist(explicit: str | None, version: str) -> Path | None:
    """--sdist, $FLASH_ATTN_SDIST, <repo>/.sdist/, or the CMake download cache."""
    name = f"flash_attn-{version}.tar.gz"
    cache = options.sdist_cache_dir()  # the build's own rule, $FLASH_ATTN_CACHE_DIR first
    for c in (explicit, os.environ.get("FLASH_ATTN_SDIST"), bc.REPO_ROOT / ".sdist" / name, Path(cache) / name):
        if c and Path(c).is_file():
            return Path(c).resolve()
    return None


def normalise_archs(text: str) -> list[str]:
    """'90', '80;90', '80,90', 'sm_90' -> ['90'] / ['80', '90']."""
    archs = [a.strip().lower().removeprefix("sm_").removeprefix("sm") for a in re.split(r"[;, ]+", text) if a.strip()]
    for a in archs:
        if not re.fullmatch(r"\d+[af]?", a):
            raise ValueError(f"'{a}' is not an SM number such as 90")
    return archs


def torch_arch_list(archs: list[str]) -> str:
    """TORCH_CUDA_ARCH_LIST for SM numbers: ['80', '90'] -> '8.0;9.0', ['100a'] -> '10.0a'."""
    out = []
    for a in archs:
        digits = re.match(r"\d+", a).group(0)
        out.append(f"{digits[:-1]}.{digits[-1]}{a[len(digits) :]}")
    return ";".join(out)


# -- our build -----------------------------------------------------------------------------------


def _fresh_build_dir(args: argparse.Namespace, out: Path) -> Path:
    """An empty build directory: ``--build-dir`` (emptied only with ``--clean``) or DIR/ours-build."""
    build_dir = Path(args.build_dir).resolve() if args.build_dir else out / "ours-build"
    if build_dir.exists() and any(build_dir.iterdir()):
        if args.build_dir and not args.clean:
            raise SystemExit(
                f"build.py: {build_dir} is not empty; pass --clean to delete it (the benchmark needs a "
                "fresh build directory) or choose another --build-dir"
            )
        shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True)
    return build_dir


def configure_command(
    args: argparse.Namespace, build_dir: Path, sdist: Path, nvcc: str | None, launcher: list[str]
) -> list[str]:
    """The ``cmake -S <repo> -B <build_dir> ...`` line of our build (module doc), compiles through ``launcher``."""
    archs = ";".join(args.archs)
    configure = [
        "cmake",
        "-S",
        str(bc.REPO_ROOT),
        "-B",
        str(build_dir),
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DFLASH_ATTN_ARCH_GROUP=custom",
        f"-DFLASH_ATTN_CUDA_ARCHS={archs}",
        f"-DFLASH_ATTN_KERNEL_SET={args.kernel_set}",
        f"-DFLASH_ATTN_SDIST={sdist}",
        f"-DFLASH_ATTN_JOBS={args.jobs}",
        f"-DPython_EXECUTABLE={sys.executable}",
        f"-DCMAKE_CUDA_COMPILER_LAUNCHER={';'.join(launcher)}",
        f"-DCMAKE_CXX_COMPILER_LAUNCHER={';'.join(launcher)}",
    ]
    if nvcc:
        configure.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
    if args.fatbin_compression:
        configure.append(f"-DFLASH_ATTN_FATBIN_COMPRESSION={args.fatbin_compression}")
    return configure + (args.cmake_arg or [])


def _record_our_outputs(record: dict, build_dir: Path, launcher_log: Path, jobs: int) -> None:
    """Add the compile edges (.ninja_log and launcher log), their analysis and the built library to ``record``."""
    ninja_log = build_dir / ".ninja_log"
    edges = last_build(ninja_log.read_text(encoding="utf-8", errors="replace")) if ninja_log.is_file() else []
    rows = edge_records(edges, build_dir, read_launcher_log(launcher_log), our_unit_of)
    record["edges"] = rows
    record["unit_seconds"] = per_unit_seconds(rows)
    record["analysis"] = analyse(edges, rows, jobs, ninja_deps(build_dir, edges), our_unit_of)
    lib = bc.find_native_library(build_dir) if build_dir.is_dir() else None
    if lib:
        record["library"] = {"path": str(lib), "bytes": lib.stat().st_size}
        info = bc.read_build_info_near(str(lib))
        if info:
            info.pop("kernels", None)
            record["build_info"] = info


def build_ours(args: argparse.Namespace, out: Path, sdist: Path, nvcc: str | None) -> dict:
    """Configure and build this repository with CMake (module doc); the record of times, edges and library."""
    build_dir = _fresh_build_dir(args, out)
    launcher_log = out / "ours_units.jsonl"
    launcher_log.unlink(missing_ok=True)
    launcher = [sys.executable, str(LAUNCHER), "--log", str(launcher_log)]
    configure = configure_command(args, build_dir, sdist, nvcc, launcher)
    build = ["cmake", "--build", str(build_dir)]
    log = out / "ours_build.log"
    log.unlink(missing_ok=True)
    ks = bc.kernel_set()
    set_name, units = ks.resolve(args.kernel_set)
    started = time.time()
    rc, configure_s = run_logged(configure, log)
    record: dict = {
        "build_dir": str(build_dir),
        "log": str(log),
        "kernel_set": args.kernel_set,
        "kernel_set_name": set_name,
        "units_expected": [u.name for u in units],
        "archs": args.archs,
        "jobs": args.jobs,
        "nvcc": nvcc,
        "configure_command": shlex.join(configure),
        "build_command": shlex.join(build),
        "configure_s": round(configure_s, 1),
        "started_epoch": round(started, 1),
    }
    if rc != 0:
        record.update(state="failed", error=f"configure failed (exit {rc})", log_tail=bc.log_tail(log))
        return record
    build_started = time.time()
    with MemorySampler() as mem:
        rc, build_s = run_logged(build, log)
    record.update(
        build_s=round(build_s, 1),
        total_s=round(configure_s + build_s, 1),
        build_started_epoch=round(build_started, 1),
        finished_epoch=round(time.time(), 1),
        system_memory_used_peak_gib=mem.peak_gib,
    )
    if rc != 0:
        record.update(state="failed", error=f"build failed (exit {rc})", log_tail=bc.log_tail(log))
    else:
        record["state"] = "done"
    _record_our_outputs(record, build_dir, launcher_log, args.jobs)
    return record


# -- upstream build ------------------------------------------------------------------------------


def _status_path(updir: Path) -> Path:
    return updir / "status.json"


def read_status(updir: Path) -> dict:
    try:
        return json.loads(_status_path(updir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def write_status(updir: Path, **fields) -> dict:
    status = read_status(updir)
    status.update(fields)
    tmp = _status_path(updir).with_suffix(".tmp")
    tmp.write_text(json.dumps(status, indent=1) + "\n", encoding="utf-8")
    tmp.replace(_status_path(updir))
    return status


def upstream_request(args: argparse.Namespace, sdist: Path, nvcc: str | None) -> dict:
    ks = bc.kernel_set()
    _, units = ks.resolve(args.kernel_set)
    return {
        "sdist": str(sdist),
        "archs": args.archs,
        "jobs": args.jobs,
        "nvcc": nvcc,
        "mode": args.upstream_mode,
        "units": [u.name for u in units],
        "nvcc_threads": args.upstream_nvcc_threads,
        "python": sys.executable,
    }


def _extract(sdist: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(sdist) as tf:
        try:
            tf.extractall(dest, filter="data")
        except TypeError:  # Python without extraction filters
            tf.extractall(dest)  # noqa: S202 - the sdist's hash was checked
    roots = [p for p in dest.iterdir() if p.is_dir()]
    if len(roots) != 1 or not (roots[0] / "setup.py").is_file():
        raise RuntimeError(f"{sdist} did not unpack to one folder with setup.py")
    return roots[0]


def _build_ninja_objects(path: Path) -> list[str]:
    """Output paths of the build statements in a build.ninja ('$ ' and '$:' unescaped)."""
    outs = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.startswith("build "):
            continue
        head = re.split(r"(?<!\$):", line[len("build ") :], maxsplit=1)[0]
        for tok in re.split(r"(?<!\$) ", head.strip()):
            if tok and tok != "|":
                outs.append(tok.replace("$ ", " ").replace("$:", ":").replace("$$", "$"))
    return outs


def _timed_run(updir: Path, command: list[str], log: Path, env: dict) -> dict:
    """Run upstream's build command with wall time and peak memory; record the outcome in status.json."""
    t0 = time.time()
    with MemorySampler() as mem:
        rc, wall = run_logged(command, log, env=env, echo=False)
    return write_status(
        updir,
        state="done" if rc == 0 else "failed",
        returncode=rc,
        wall_s=round(wall, 1),
        build_started_epoch=round(t0, 1),
        finished_epoch=round(time.time(), 1),
        system_memory_used_peak_gib=mem.peak_gib,
        log_tail=None if rc == 0 else bc.log_tail(log),
    )


def _prepare_upstream_tree(updir: Path, req: dict, version: str, sha: str) -> tuple[Path, str]:
    """The sdist checked against the pin (``version``, ``sha``) and unpacked into updir/src, the tools
    checked; (source tree, nvcc).

    Raises RuntimeError saying what is missing: a sha256 other than the pin's, no nvcc, no ninja, or
    a Python without torch, setuptools, packaging and wheel.
    """
    actual = sha256_file(Path(req["sdist"]))
    if actual != sha:
        raise RuntimeError(f"{req['sdist']} has sha256 {actual}, expected the pin {sha} ({version})")
    tree = _extract(Path(req["sdist"]), updir / "src")
    nvcc = req.get("nvcc")
    if not nvcc:
        raise RuntimeError("no nvcc found: put one on PATH, set CUDACXX or pass --nvcc")
    if not shutil.which("ninja"):
        raise RuntimeError("ninja is not on PATH: torch's BuildExtension needs it for a parallel build")
    python = req["python"]
    probe = subprocess.run(
        [python, "-c", "import torch, setuptools, packaging, wheel.bdist_wheel"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        raise RuntimeError(
            "upstream's setup.py needs torch, setuptools, packaging and wheel (wheel.bdist_wheel) "
            f"in {python}; install them (pip install wheel packaging setuptools). "
            f"{probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else ''}"
        )
    return tree, nvcc


def upstream_env(req: dict, nvcc: str, units_log: Path, base: dict) -> tuple[dict, dict]:
    """Environment of upstream's setup.py (same archs, jobs and nvcc, through the launcher), and the
    part of it the report records."""
    python = req["python"]
    env = dict(base)
    env.update(
        {
            "FLASH_ATTENTION_FORCE_BUILD": "TRUE",  # never try to download a prebuilt wheel
            "FLASH_ATTN_CUDA_ARCHS": ";".join(req["archs"]),
            "TORCH_CUDA_ARCH_LIST": torch_arch_list(req["archs"]),
            "MAX_JOBS": str(req["jobs"]),
            "CUDA_HOME": cuda_home_for(nvcc),
            "PYTORCH_NVCC": shlex.join([python, str(LAUNCHER), "--log", str(units_log), nvcc]),
        }
    )
    env.pop(DRY_ENV, None)
    if req.get("nvcc_threads"):
        env["NVCC_THREADS"] = str(req["nvcc_threads"])
    recorded_env = {
        k: env[k]
        for k in (
            "FLASH_ATTENTION_FORCE_BUILD",
            "FLASH_ATTN_CUDA_ARCHS",
            "TORCH_CUDA_ARCH_LIST",
            "MAX_JOBS",
            "CUDA_HOME",
            "PYTORCH_NVCC",
        )
    }
    recorded_env["NVCC_THREADS"] = env.get("NVCC_THREADS", "unset (setup.py default: 4)")
    return env, recorded_env


def pip_wheel_command(python: str, wheel_dir: Path, tree: Path, use_pep517: bool) -> list[str]:
    """``python -m pip wheel`` of the unpacked sdist in place, verbose, without isolation or deps."""
    pip = [
        python,
        "-m",
        "pip",
        "wheel",
        "--no-build-isolation",
        "--no-deps",
        "--no-binary",
        ":all:",
        "-v",
        "-w",
        str(wheel_dir),
        str(tree),
    ]
    if use_pep517:
        # PEP 517 path: a failed build keeps build/ (the legacy path runs `setup.py clean --all`,
        # which deletes the .ninja_log and build.ninja this benchmark reads).
        pip.insert(pip.index("--no-build-isolation"), "--use-pep517")
    return pip


def _build_upstream_units(updir: Path, req: dict, tree: Path, pip: list[str], log: Path, env: dict) -> dict:
    """The ``units`` mode: setup.py writes build.ninja, ninja compiles only the common units (module doc)."""
    units_log = updir / "units.jsonl"
    # setup.py writes build.ninja with every nvcc call failing at once, then ninja compiles only the
    # common units with upstream's own commands.
    dry_env = dict(env, **{DRY_ENV: "1"})
    run_logged(pip, log, env=dry_env, echo=False)
    temps = sorted((tree / "build").glob("temp*/build.ninja"))
    if not temps:
        raise RuntimeError(f"setup.py wrote no build/temp*/build.ninja (see {log})")
    temp = temps[0].parent
    for stale in [*temp.rglob("*.o"), temp / ".ninja_log", temp / ".ninja_deps"]:
        stale.unlink(missing_ok=True)
    units_log.unlink(missing_ok=True)
    wanted = set(req["units"])
    objects = [o for o in _build_ninja_objects(temp / "build.ninja") if upstream_unit_of(o) in wanted]
    missing = sorted(wanted - {upstream_unit_of(o) for o in objects})
    ninja = [shutil.which("ninja"), "-C", str(temp), "-v", "-j", str(req["jobs"]), *objects]
    write_status(updir, state="building units", ninja_command=shlex.join(ninja), units_missing=missing)
    return _timed_run(updir, ninja, log, env)


def run_upstream(updir: Path) -> dict:
    """Build upstream as described by updir/request.json; progress and result in updir/status.json."""
    req = json.loads((updir / "request.json").read_text(encoding="utf-8"))
    version, sha = upstream_pin()
    log = updir / "upstream.log"
    units_log = updir / "units.jsonl"
    units_log.unlink(missing_ok=True)
    write_status(updir, state="preparing", pid=os.getpid(), started_epoch=round(time.time(), 1))
    try:
        tree, nvcc = _prepare_upstream_tree(updir, req, version, sha)
        python = req["python"]
        env, recorded_env = upstream_env(req, nvcc, units_log, dict(os.environ))
        wheel_dir = updir / "wheel"
        pip = pip_wheel_command(python, wheel_dir, tree, _pip_knows_use_pep517(python))
        write_status(
            updir,
            state="building",
            tree=str(tree),
            env=recorded_env,
            command=shlex.join(pip),
            mode=req["mode"],
            jobs=req["jobs"],
            archs=req["archs"],
            nvcc=nvcc,
        )
        if req["mode"] == "full":
            _timed_run(updir, pip, log, env)
            wheels = sorted(wheel_dir.glob("*.whl")) if wheel_dir.is_dir() else []
            wheel = {"path": str(wheels[0]), "bytes": wheels[0].stat().st_size} if wheels else None
            return write_status(updir, wheel=wheel)
        return _build_upstream_units(updir, req, tree, pip, log, env)
    except Exception as exc:
        return write_status(
            updir,
            state="failed",
            error=f"{type(exc).__name__}: {exc}",
            finished_epoch=round(time.time(), 1),
            log_tail=bc.log_tail(log),
        )


def _pip_knows_use_pep517(python: str) -> bool:
    proc = subprocess.run([python, "-m", "pip", "wheel", "--help"], capture_output=True, text=True)
    return "--use-pep517" in proc.stdout


def prepare_upstream_dir(updir: Path, request: dict) -> None:
    status = read_status(updir)
    if status.get("state") in ("starting", "preparing", "building", "building units") and _alive(status.get("pid")):
        raise SystemExit(f"build.py: an upstream build is still running in {updir} (pid {status['pid']})")
    updir.mkdir(parents=True, exist_ok=True)
    _status_path(updir).unlink(missing_ok=True)
    (updir / "upstream.log").unlink(missing_ok=True)
    shutil.rmtree(updir / "wheel", ignore_errors=True)
    (updir / "request.json").write_text(json.dumps(request, indent=1) + "\n", encoding="utf-8")


def _alive(pid) -> bool:
    """Whether process `pid` still runs (a zombie, finished but not yet reaped, does not)."""
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except (OSError, ValueError):
        return False
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return True


def start_background(updir: Path) -> int:
    """Start run_upstream detached (own session, no terminal, output to updir/runner.log); return its pid."""
    write_status(updir, state="starting", launched_epoch=round(time.time(), 1))
    with open(updir / "runner.log", "w", encoding="utf-8") as runner_log:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--upstream-run", str(updir)],
            stdin=subprocess.DEVNULL,
            stdout=runner_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    return proc.pid  # the runner records its own pid (the same) in status.json


def find_upstream_ninja_log(path: Path) -> Path | None:
    """The .ninja_log of an upstream build: <dir>/.ninja_log, <dir>/src/*/build/temp*/, or any build/temp*/ below."""
    path = Path(path)
    if path.is_file() and path.name == ".ninja_log":
        return path
    for pattern in (
        ".ninja_log",
        "src/*/build/temp*/.ninja_log",
        "build/temp*/.ninja_log",
        "**/build/temp*/.ninja_log",
    ):
        found = sorted(path.glob(pattern))
        if found:
            return found[0]
    return None


def collect_upstream(updir: Path, wait_s: float = 0.0) -> dict:
    """Upstream's status and per-unit seconds from updir (finished or not); waits up to wait_s for it."""
    deadline = time.time() + wait_s
    status = read_status(updir)
    while status.get("state") not in ("done", "failed", None) and time.time() < deadline:
        if status.get("pid") and not _alive(status["pid"]):
            break
        time.sleep(10)
        status = read_status(updir)
    if status.get("state") not in ("done", "failed", None) and status.get("pid") and not _alive(status["pid"]):
        status["state"] = "died"
    ninja_log = find_upstream_ninja_log(updir)
    result = {"dir": str(updir), **status}
    result.setdefault("state", "unknown (no status.json: a log from elsewhere)")
    result["ninja_log"] = str(ninja_log) if ninja_log else None
    if ninja_log is None:
        result["edges"], result["unit_seconds"] = [], {}
        return result
    edges = last_build(ninja_log.read_text(encoding="utf-8", errors="replace"))
    rows = edge_records(edges, ninja_log.parent, read_launcher_log(updir / "units.jsonl"), upstream_unit_of)
    result["edges"] = rows
    result["unit_seconds"] = per_unit_seconds(rows)
    result["start_order"] = [r["unit"] for r in sorted(rows, key=lambda r: (r["start_s"], r["output"])) if r["unit"]]
    result["analysis"] = analyse(edges, rows, int(status.get("jobs") or 1), None, upstream_unit_of)
    return result


# -- comparison and report -----------------------------------------------------------------------


def _per_unit(ours_units: dict[str, float], up_units: dict[str, float]) -> dict:
    """The units both built, ours alone, and each common unit's seconds side by side (with their sum)."""
    common = sorted(set(ours_units) & set(up_units))
    res: dict = {"common_units": common, "units_only_ours": sorted(set(ours_units) - set(up_units))}
    res["per_unit"] = [
        {
            "unit": u,
            "ours_s": ours_units[u],
            "upstream_s": up_units[u],
            "ratio": round(ours_units[u] / up_units[u], 3) if up_units[u] else None,
        }
        for u in common
    ]
    if common:
        so, su = sum(ours_units[u] for u in common), sum(up_units[u] for u in common)
        res["per_unit_sum"] = {
            "ours_s": round(so, 1),
            "upstream_s": round(su, 1),
            "ratio": round(so / su, 3) if su else None,
            "basis": f"sum of compile seconds of the {len(common)} units both built",
        }
    return res


def _same_units_upstream(upstream: dict, ours_units: dict, up_units: dict, common: list[str], jobs: int) -> dict | None:
    """Upstream's seconds for our units and their basis: measured (``units`` mode) or a replay of its
    full build's log; None when neither is possible."""
    if upstream.get("mode") == "units" and upstream.get("state") == "done" and not upstream.get("units_missing"):
        return {
            "upstream_s": upstream.get("wall_s"),
            "basis": f"measured: ninja -j {jobs} on upstream's build.ninja, only the common units' objects "
            "(upstream's own compile commands; no link)",
        }
    if common and set(ours_units) <= set(up_units):
        order = [u for u in upstream.get("start_order", []) if u in ours_units]
        return {
            "upstream_s": round(simulate_schedule([up_units[u] for u in order], jobs), 1),
            "basis": f"estimate: replay of upstream's full-build .ninja_log, the {len(order)} common units in "
            f"the order its ninja started them, upstream's durations, {jobs} slots (no link)",
        }
    return None


def _with_our_side(same: dict, ours: dict, wall: float) -> dict:
    """``same`` with our wall time, the ratio, and our compile phase alone for reference."""
    same["ours_s"] = wall
    same["ratio"] = round(wall / same["upstream_s"], 3)
    same["ours_basis"] = "our cmake --build wall time (all compiles, binding and dispatch included, and the link)"
    compiles = [r for r in ours.get("edges") or [] if r["kind"] != "other"]
    if compiles:  # for reference: our compile phase alone, as upstream's figure has no link
        span = max(r["end_s"] for r in compiles) - min(r["start_s"] for r in compiles)
        same["ours_compile_span_s"] = round(span, 1)
        same["ratio_compile_span"] = round(span / same["upstream_s"], 3)
    return same


def compare(ours: dict, upstream: dict | None) -> dict:
    """Per-unit and same-units comparison; every number says what it is based on."""
    res: dict = {"targets": []}
    a = ours.get("analysis") or {}
    wall = ours.get("build_s")
    if wall and a.get("lower_bound_s"):
        ratio = wall / a["lower_bound_s"]
        res["targets"].append(
            {
                "target": "build wall <= 1.15 x lower bound",
                "value": round(ratio, 3),
                "goal": TARGET_LOWER_BOUND_RATIO,
                "met": ratio <= TARGET_LOWER_BOUND_RATIO,
                "detail": f"cmake --build {wall:.0f} s vs lower bound {a['lower_bound_s']:.0f} s",
            }
        )
    if not upstream:
        res["upstream"] = "not measured"
        return res
    res["warnings"] = []
    for key in ("jobs", "archs"):
        if upstream.get(key) is not None and ours.get(key) is not None and upstream[key] != ours[key]:
            res["warnings"].append(f"upstream was built with {key} {upstream[key]}, ours with {ours[key]}")
    ours_units = ours.get("unit_seconds") or {}
    up_units = upstream.get("unit_seconds") or {}
    res.update(_per_unit(ours_units, up_units))
    common = res["common_units"]
    jobs = int(upstream.get("jobs") or ours.get("jobs") or 1)
    same = _same_units_upstream(upstream, ours_units, up_units, common, jobs)
    if same and wall and same["upstream_s"]:
        res["same_units"] = same = _with_our_side(same, ours, wall)
        res["targets"].append(
            {
                "target": "build wall <= 0.8 x upstream setup.py for the same units",
                "value": same["ratio"],
                "goal": TARGET_UPSTREAM_RATIO,
                "met": same["ratio"] <= TARGET_UPSTREAM_RATIO,
                "detail": same["basis"],
            }
        )
    elif common:
        res["same_units"] = {
            "basis": "per-unit seconds only: upstream's log lacks some of our units "
            f"({', '.join(sorted(set(ours_units) - set(up_units)))}) or our build failed"
        }
    if upstream.get("mode") == "full" and upstream.get("state") == "done":
        res["full_builds"] = {
            "ours_s": wall,
            "ours_units": len(ours_units),
            "upstream_s": upstream.get("wall_s"),
            "upstream_units": len(up_units),
            "note": "not the same units: upstream's setup.py always builds all of its units",
        }
    # Did the two builds overlap in time (they then shared the CPUs and the numbers are not clean)?
    o0, o1 = ours.get("build_started_epoch"), ours.get("finished_epoch")
    u0, u1 = upstream.get("build_started_epoch") or upstream.get("started_epoch"), upstream.get("finished_epoch")
    if o0 and o1 and u0:
        res["overlapped"] = bool(o0 < (u1 or time.time()) and u0 < o1)
    return res


def _mib_to_gib(v: float | None) -> str:
    return "-" if v is None else f"{v / 1024:.2f}"


def _our_summary_rows(ours: dict, a: dict) -> list[list]:
    """Rows of the "what / seconds" table of our build: phases, compile totals, bounds, memory, size."""
    rows = [
        ["configure", bc.fmt(ours.get("configure_s"), 1)],
        ["build (cmake --build)", bc.fmt(ours.get("build_s"), 1)],
        ["total", bc.fmt(ours.get("total_s"), 1)],
        ["sum of compile seconds", bc.fmt(a.get("sum_compile_s"), 1)],
        ["longest compile", bc.fmt(a.get("longest_compile_s"), 1)],
        [f"lower bound: max(longest, sum / {a.get('jobs')})", bc.fmt(a.get("lower_bound_s"), 1)],
        ["critical path", bc.fmt(a.get("critical_path_s"), 1)],
        ["peak RSS of one compile (GiB)", _mib_to_gib(a.get("peak_rss_mib_max"))],
        ["peak system memory in use (GiB)", bc.fmt(ours.get("system_memory_used_peak_gib"), 1)],
    ]
    if ours.get("library"):
        rows.append(["shared object (MiB)", bc.fmt(ours["library"]["bytes"] / 2**20, 1)])
    return rows


def _edges_table(ours: dict, up: dict | None) -> str:
    """Our compile edges, slowest first, beside upstream's seconds and peak memory for the same unit."""
    up_units = (up or {}).get("unit_seconds") or {}
    up_mem = {r["unit"]: r["peak_rss_mib"] for r in (up or {}).get("edges", []) if r.get("unit")}
    body = []
    for r in sorted(ours.get("edges") or [], key=lambda r: -r["seconds"]):
        label = r["unit"] or os.path.basename(r["output"])
        if r["unit"] and r["output"].endswith(("_align.cu.o", "_align.cu.obj")):
            label += " (align)"
        u = up_units.get(r["unit"]) if r["unit"] else None
        body.append(
            [
                label,
                r["kind"],
                bc.fmt(r["seconds"], 1),
                _mib_to_gib(r["peak_rss_mib"]),
                bc.fmt(r["cpu_s"], 1),
                bc.fmt(u, 1),
                _mib_to_gib(up_mem.get(r["unit"])) if r["unit"] else "-",
                bc.fmt(r["seconds"] / u, 2, "x") if u else "-",
            ]
        )
    headers = ["edge", "kind", "seconds", "peak RSS GiB", "CPU s", "upstream s", "upstream peak GiB", "ours / upstream"]
    return bc.md_table(headers, body, "llrrrrrr")


def _render_ours(ours: dict, up: dict | None) -> str:
    """The "Our build" section's body: settings, the summary table, the critical path and the edges."""
    a = ours.get("analysis") or {}
    parts = [
        f"- kernel set `{ours.get('kernel_set')}` ({len(ours.get('units_expected') or [])} units), "
        f"archs {';'.join(ours.get('archs') or [])}, {ours.get('jobs')} jobs, nvcc {ours.get('nvcc')}\n"
        f"- state: {ours.get('state')}{(': ' + ours['error']) if ours.get('error') else ''}\n"
        f"- `{ours.get('configure_command')}`\n- `{ours.get('build_command')}`\n\n"
    ]
    parts.append(bc.md_table(["what", "seconds (unless stated)"], _our_summary_rows(ours, a), "lr"))
    if a.get("critical_path"):
        parts.append(
            f"\nCritical path ({a.get('critical_path_basis')}): "
            + " -> ".join(f"`{os.path.basename(n)}`" for n in a["critical_path"])
            + "\n"
        )
    parts.append("\n### Edges (slowest first)\n\n")
    parts.append(_edges_table(ours, up))
    return "".join(parts)


def _render_upstream(up: dict | None) -> str:
    """The "Upstream setup.py" section's body: folder, mode, state, wall time, commands, environment."""
    if not up:
        return "Not measured in this run (use --upstream DIR, or --upstream-background DIR then --collect DIR).\n"
    parts = [
        f"- folder `{up.get('dir')}`, mode `{up.get('mode')}`, state **{up.get('state')}**"
        f"{(': ' + up['error']) if up.get('error') else ''}\n"
        f"- wall {bc.fmt(up.get('wall_s'), 1)} s; {len(up.get('unit_seconds') or {})} units in "
        f"`{up.get('ninja_log')}`\n"
    ]
    if up.get("command"):
        parts.append(f"- `{up['command']}`\n")
    if up.get("ninja_command"):
        parts.append(f"- `{up['ninja_command']}`\n")
    for k, v in (up.get("env") or {}).items():
        parts.append(f"- {k}={v}\n")
    if up.get("log_tail") and up.get("state") != "done":
        parts.append("\n```\n" + up["log_tail"] + "\n```\n")
    return "".join(parts)


def _render_same_units(s: dict) -> str:
    """The same-units line(s) of the comparison: the ratio and its basis, or why there is none."""
    if s.get("ratio") is None:
        return f"- same units: {s['basis']}\n"
    text = (
        f"- same units: ours {s['ours_s']} s vs upstream {s['upstream_s']} s = {s['ratio']}x; "
        f"upstream: {s['basis']}; ours: {s['ours_basis']}\n"
    )
    if s.get("ours_compile_span_s") is not None:
        text += (
            f"- same units, our compile phase only (first compile start to last compile end, no "
            f"link): {s['ours_compile_span_s']} s = {s['ratio_compile_span']}x upstream\n"
        )
    return text


def _render_comparison(cmp_: dict) -> str:
    """The "Comparison" section's body and, when there are any, the targets table."""
    parts = []
    if cmp_.get("per_unit_sum"):
        s = cmp_["per_unit_sum"]
        parts.append(
            f"- per unit: ours {s['ours_s']} s vs upstream {s['upstream_s']} s = {s['ratio']}x ({s['basis']})\n"
        )
    if cmp_.get("same_units"):
        parts.append(_render_same_units(cmp_["same_units"]))
    if cmp_.get("full_builds"):
        f = cmp_["full_builds"]
        parts.append(
            f"- full builds (context, {f['note']}): ours {f['ours_s']} s for {f['ours_units']} units, "
            f"upstream {f['upstream_s']} s for {f['upstream_units']} units\n"
        )
    for w in cmp_.get("warnings") or []:
        parts.append(f"- **warning: {w}**\n")
    if cmp_.get("overlapped"):
        parts.append("- **warning: our build and upstream's ran at the same time; both timings are inflated**\n")
    if cmp_.get("upstream") == "not measured":
        parts.append("- upstream not measured\n")
    if cmp_.get("targets"):
        parts.append("\n## Targets (reported, not asserted)\n\n")
        body = [
            [t["target"], bc.fmt(t["value"], 3), t["goal"], "yes" if t["met"] else "no", t["detail"]]
            for t in cmp_["targets"]
        ]
        parts.append(bc.md_table(["target", "value", "goal", "met", "basis"], body, "lrrll"))
    return "".join(parts)


def render_markdown(record: dict) -> str:
    """build.md: the machine, our build, upstream's build and the comparison with its targets."""
    ours = record.get("ours") or {}
    parts = ["# flash_attn build benchmark\n\n", machine.markdown(record["machine"]), "\n## Our build\n\n"]
    if ours:
        parts.append(_render_ours(ours, record.get("upstream")))
    parts.append("\n## Upstream setup.py\n\n")
    parts.append(_render_upstream(record.get("upstream")))
    parts.append("\n## Comparison\n\n")
    parts.append(_render_comparison(record.get("comparison") or {}))
    return "".join(parts)


def write_report(out: Path, ours: dict, upstream: dict | None) -> dict:
    record = {
        "benchmark": "build",
        "machine": machine.collect(),
        "ours": ours,
        "upstream": upstream,
        "comparison": compare(ours, upstream),
    }
    bc.write_and_announce(out, "build", record, render_markdown(record), "build.py")
    return record


# -- CLI -----------------------------------------------------------------------------------------


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = bc.script_parser(__doc__)
    p.add_argument("--out", type=Path, help="result folder (build.json, build.md, logs, ours-build/)")
    p.add_argument("--sdist", help="flash_attn-<pin>.tar.gz (default: $FLASH_ATTN_SDIST, <repo>/.sdist, the cache)")
    p.add_argument("--archs", default="90", help="SM list, e.g. 90 or 80;90 (default 90)")
    p.add_argument("--kernel-set", default="dev", help="kernel set of our build (default dev)")
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="parallel compiles, ours (FLASH_ATTN_JOBS) and upstream's (MAX_JOBS); default: logical cores",
    )
    p.add_argument("--nvcc", help="nvcc both builds use (default: $CUDACXX, PATH, $CUDA_HOME/bin)")
    p.add_argument("--build-dir", help="our CMake build folder (default OUT/ours-build, recreated)")
    p.add_argument("--clean", action="store_true", help="delete a non-empty --build-dir first")
    p.add_argument(
        "--fatbin-compression",
        choices=manifest.option_choices("FLASH_ATTN_FATBIN_COMPRESSION"),
        help="FLASH_ATTN_FATBIN_COMPRESSION of our build (default: the project's)",
    )
    p.add_argument("--cmake-arg", action="append", help="extra argument for our cmake configure; repeatable")
    p.add_argument("--reuse-ours", action="store_true", help="do not build; take our results from OUT/build.json")
    p.add_argument("--upstream", type=Path, metavar="DIR", help="also build upstream inline, after ours, in DIR")
    p.add_argument(
        "--upstream-background",
        type=Path,
        metavar="DIR",
        help="start upstream's build detached in DIR and return at once (nothing else is done)",
    )
    p.add_argument(
        "--collect",
        type=Path,
        metavar="DIR",
        help="take upstream's results from DIR (a --upstream-background folder, or any folder holding "
        "upstream's build/temp*/.ninja_log)",
    )
    p.add_argument("--wait-s", type=float, default=0.0, help="with --collect: wait up to this long for it to finish")
    p.add_argument(
        "--upstream-mode",
        choices=["full", "units"],
        default="full",
        help="full: pip wheel of the whole sdist; units: upstream's compile commands for our units only",
    )
    p.add_argument("--upstream-nvcc-threads", type=int, help="NVCC_THREADS for setup.py (default: unset, i.e. 4)")
    p.add_argument(
        "--sharded",
        metavar="NxM",
        help="N shard builds of M jobs each, gathered and linked, against one build of N*M jobs "
        "(bench/build_sharded.py; e.g. 4x4)",
    )
    p.add_argument(
        "--only",
        choices=["sharded", "unsharded", "both", "report"],
        default="both",
        help="with --sharded: which part to run (report: none, only rewrite the report); default both",
    )
    p.add_argument("--upstream-run", type=Path, help=argparse.SUPPRESS)  # internal: the detached runner
    args = p.parse_args(argv)
    try:
        args.archs = normalise_archs(args.archs)
    except ValueError as exc:
        p.error(f"--archs: {exc}")
    if args.jobs < 1:
        p.error("--jobs must be >= 1")
    if not (args.upstream_run or args.upstream_background) and args.out is None:
        p.error("--out is required (except with --upstream-background)")
    if args.upstream and args.collect:
        p.error("--upstream and --collect exclude each other")
    if args.only != "both" and not args.sharded:
        p.error("--only needs --sharded NxM")
    return args


def _no_sdist(version: str) -> int:
    """Say that the pinned sdist was not found and how to give it; the exit status 2."""
    print(f"build.py: no flash_attn-{version}.tar.gz found; pass --sdist PATH", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """The command line (module doc); 0 when our build (or the part asked for) succeeded."""
    args = _parse(argv)
    if args.upstream_run:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        status = run_upstream(args.upstream_run.resolve())
        return 0 if status.get("state") == "done" else 1
    version, _ = upstream_pin()
    if args.sharded:
        sdist = find_sdist(args.sdist, version)
        if sdist is None and args.only != "report" and os.environ.get(build_sharded.FAKE_ENV) != "1":
            return _no_sdist(version)
        return build_sharded.main(args.out.resolve(), args.sharded, args.only, args.kernel_set, args.archs, sdist)
    nvcc = find_nvcc(args.nvcc)
    need_sdist = not args.reuse_ours or args.upstream or args.upstream_background
    sdist = find_sdist(args.sdist, version)
    if need_sdist and sdist is None:
        return _no_sdist(version)
    if args.upstream_background:
        updir = args.upstream_background.resolve()
        prepare_upstream_dir(updir, upstream_request(args, sdist, nvcc))
        pid = start_background(updir)
        print(
            f"build.py: upstream build started in the background (pid {pid}) in {updir}; collect it later with "
            f"python bench/build.py --out OUT --reuse-ours --collect {updir} [--wait-s SECONDS]",
            file=sys.stderr,
        )
        return 0
    out = bc.result_dir(args.out)
    if args.reuse_ours:
        try:
            ours = json.loads((out / "build.json").read_text(encoding="utf-8"))["ours"]
        except (OSError, ValueError, KeyError) as exc:
            print(f"build.py: --reuse-ours needs an earlier {out / 'build.json'} ({exc})", file=sys.stderr)
            return 2
        # upstream must be built like ours was: same jobs, archs and (for --upstream-mode units) units
        args.jobs, args.archs, args.kernel_set = ours["jobs"], ours["archs"], ours["kernel_set"]
    else:
        ours = build_ours(args, out, sdist, nvcc)
        write_report(out, ours, None)  # our results are safe even if upstream's build is interrupted
    upstream = None
    if args.upstream:
        updir = args.upstream.resolve()
        prepare_upstream_dir(updir, upstream_request(args, sdist, nvcc))
        run_upstream(updir)
        upstream = collect_upstream(updir)
    elif args.collect:
        upstream = collect_upstream(args.collect.resolve(), args.wait_s)
    record = write_report(out, ours, upstream)
    for t in record["comparison"]["targets"]:
        print(
            f"build.py: target '{t['target']}': {t['value']} (goal {t['goal']}) -> {'met' if t['met'] else 'NOT met'}",
            file=sys.stderr,
        )
    return 0 if ours.get("state") == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
