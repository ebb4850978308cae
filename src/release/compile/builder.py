"""Run one wheel build: ``python -m build --wheel --no-isolation`` into its build folder (release.compile.build_dirs).

scikit-build-core gets ``-C build-dir=<build dir>`` and every CMake option as
``-C cmake.define.NAME=VALUE``. The output is streamed: all of it into
``<build dir>/flash_attn_build.log``; on the console the configure decisions
(``-- flash_attn: ...``), errors, and one progress line per finished Ninja edge (units done /
total, ETA), or a rich progress bar on a terminal. ``--verbose`` shows every line.
At the end a summary table is printed and written to ``<build dir>/flash_attn_build_summary.json``,
and the compile timeline to ``<build dir>/flash_attn_build_trace.json`` (progress.write_trace).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from flash_attn_wheel_names import native
from release import _paths, checksums, index_url, locks, procs
from release.compile import estimate, machine, options, progress, tagging
from release.errors import ReleaseError

_SHOWN_RE = re.compile(
    r"^-- flash_attn:|CMake (Error|Warning)|\berror\b|FAILED:|^\* |Successfully built|^ninja: |No work to do",
    re.IGNORECASE,
)
# Shown lines that carry the failure itself (the final message then points at them, not repeats them).
_ERROR_RE = re.compile(r"CMake Error|\berror\b|FAILED:", re.IGNORECASE)
LOG_NAME = "flash_attn_build.log"
SUMMARY_NAME = "flash_attn_build_summary.json"


def build_command(python: str, source_dir: Path, build_dir: Path, outdir: Path, defines: dict[str, str]) -> list[str]:
    """The `python -m build` command line of one wheel build."""
    cmd = [python, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(outdir)]
    cmd.append(f"-Cbuild-dir={build_dir}")
    for name, value in defines.items():
        cmd.append(f"-Ccmake.define.{name}={value}")
    cmd.append(str(source_dir))
    return cmd


def build_env(base: dict | None = None) -> dict[str, str]:
    """The build's environment: Ninja's status format, unbuffered output, SOURCE_DATE_EPOCH
    (tagging.source_date_epoch) for the wheel's zip timestamps, so the same inputs give the same bytes, and
    FLASH_ATTN_INDEX_URL, the package index the build info records (release.index_url.resolve: derived from
    GITHUB_REPOSITORY, "" outside a workflow; a value set by hand is replaced, never trusted), and
    FLASH_ATTN_CACHE_DIR, the sdist cache folder as release.compile.options.sdist_cache_dir resolves it (so
    the folder the session checked is the one cmake/FlashAttnUpstream.cmake downloads into; CMake's own
    copy of the rule serves a plain ``pip install .`` only)."""
    env = dict(os.environ if base is None else base)
    env[index_url.ENV] = index_url.resolve(env)
    env[options.CACHE_DIR_ENV] = str(options.sdist_cache_dir(env))
    env["SOURCE_DATE_EPOCH"] = tagging.source_date_epoch(env)
    env["NINJA_STATUS"] = "[%f/%t] "  # the format BuildProgress parses: finished/total edges
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class BuildResult:
    wheel: Path
    summary: dict
    log: Path


TICK_SECONDS = 60.0  # the longest silence of the plain progress output (a log file, CI) during a compile


class _Display:
    """Console output of a streaming build: rich progress bar on a terminal, plain lines otherwise.

    A compile can run for many minutes without a Ninja line, so a background thread calls
    :meth:`tick` every few seconds: the bar's ETA moves, and plain output gets a status line when
    nothing was printed for `tick_seconds` (so a log shows the build alive at least once a minute).
    """

    def __init__(self, state: progress.BuildProgress, verbose: bool, tick_seconds: float = TICK_SECONDS, clock=None):
        self.state, self.verbose = state, verbose
        self.tick_seconds = tick_seconds
        self.clock = clock or time.monotonic
        self.last_print = self.clock()
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.bar = None
        if sys.stdout.isatty():
            try:
                from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

                self.bar = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), transient=True)
                self.task = self.bar.add_task("configuring", total=None)
                self.bar.start()
            except ImportError:
                self.bar = None

    def start_ticking(self) -> None:
        """Call :meth:`tick` from a daemon thread every few seconds until :meth:`close`."""

        def loop():
            while not self.stopped.wait(min(5.0, self.tick_seconds)):
                self.tick()

        threading.Thread(target=loop, name="flash_attn-progress", daemon=True).start()

    def tick(self) -> None:
        """Refresh the bar; on plain output print the status when nothing was printed for tick_seconds."""
        if self.bar or self.clock() - self.last_print >= self.tick_seconds:
            self.progressed()

    def line(self, text: str) -> None:
        with self.lock:
            if self.bar:
                self.bar.console.print(text, markup=False, highlight=False)
            else:
                print(text, flush=True)
            self.last_print = self.clock()

    def progressed(self) -> None:
        s = self.state
        with self.lock:
            if self.bar:
                total = s.units_total or s.edges_total
                done = len(s.units_done) if s.units_total else s.edges_done
                self.bar.update(self.task, description=s.status(), total=total, completed=done)
            else:
                print(f"[flash_attn] {s.status()}", flush=True)
            self.last_print = self.clock()

    def close(self) -> None:
        self.stopped.set()
        if self.bar:
            self.bar.stop()


def kept_objects(build_dir: Path) -> int:
    """Compiled objects (.o / .obj) under a build folder: what an interrupted build keeps for its rerun."""
    return sum(1 for p in Path(build_dir).rglob("*") if p.suffix in (".o", ".obj") and p.is_file())


def run_streamed(
    cmd: list[str],
    build_dir: Path,
    verbose: bool = False,
    cwd: Path = _paths.REPO_ROOT,
    what: str = "the build",
    append: bool = False,
    prediction=None,
    compiles_units: bool = True,
) -> tuple[float, int]:
    """Run `cmd` (a build whose CMake binary dir is `build_dir`) with streamed, followable output.

    The output goes to ``<build_dir>/flash_attn_build.log`` (appended to with `append`, for a
    second command of the same build). The command runs in a session of its own (release.procs),
    recorded in the build folder's lock when this process holds it (release.locks), and is stopped with
    everything it started when this function is left early (Ctrl-C, SIGTERM, an error); on Ctrl-C one
    line says what the build folder kept (its compiled objects, which a rerun reuses). `prediction`
    (release.compile.estimate.Prediction) drives the ETA; `compiles_units` False (a binding/link build) drops
    the kernel-unit count from the status. Returns (wall seconds, the .ninja_log lines before the run);
    raises ReleaseError when the command fails: its errors were shown as they came (CMake's once), so
    the message gives the log's path, with the log's last lines only when no error line was shown.
    """
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    log_path = build_dir / LOG_NAME
    log_before = progress.ninja_log_lines(build_dir)
    state = progress.BuildProgress(units=[], prediction=prediction, compiles_units=compiles_units)
    display = _Display(state, verbose)
    display.start_ticking()
    tail: deque[str] = deque(maxlen=80)
    started = time.monotonic()
    if not append:
        display.line(f"release: build directory {build_dir}")
    proc = None
    shown_error = False
    # Registered as a running build for its whole run: a build beside it is not recorded as this
    # machine's speed (estimate.record), nor is this one.
    running = machine.running(estimate.cache_dir(), f"{what} in {build_dir}")
    try:
        with running, open(log_path, "a" if append else "w", encoding="utf-8") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                encoding="utf-8",
                errors="replace",
                bufsize=1,
                env=build_env(),
                cwd=cwd,
                **procs.popen_kwargs(),
            )
            lock = locks.held(build_dir)
            if lock is not None:
                lock.record(proc.pid)
            in_message = False  # inside the indented text of a shown "CMake Warning/Error" block
            for raw in proc.stdout:
                line = raw.rstrip("\n")
                log.write(raw)
                tail.append(line)
                if in_message and not verbose:
                    in_message = line.startswith(" ") or line == ""
                    if in_message and line:
                        display.line(line)
                        continue
                if state.feed(line):
                    if not state.units and compiles_units:
                        state.set_units(progress.units_of_build_dir(build_dir))
                    display.progressed()
                    if verbose:
                        display.line(line)
                elif verbose or _SHOWN_RE.search(line):
                    display.line(line)
                    in_message = line.startswith("CMake Warning") or line.startswith("CMake Error")
                    shown_error = shown_error or bool(_ERROR_RE.search(line))
            rc = proc.wait()
    except KeyboardInterrupt:
        print(
            f"release: interrupted {what}; kept {build_dir} with {kept_objects(build_dir)} compiled object(s) "
            "(the same command again compiles only what is missing); the output folder was not written",
            file=sys.stderr,
            flush=True,
        )
        raise
    finally:
        display.close()
        if proc is not None and proc.poll() is None:
            procs.stop_child(proc)  # an interrupt or error on our side: the compiles end with us
    if rc != 0:
        if verbose or shown_error:
            raise ReleaseError(f"{what} failed (exit {rc}) with the error shown above; the full log is {log_path}")
        raise ReleaseError(
            "{} failed (exit {}). Last lines of its log:\n{}\nThe full log is {}".format(
                what, rc, "\n".join(list(tail)[-20:]), log_path
            )
        )
    return time.monotonic() - started, log_before


def run_build(
    build_dir: Path,
    defines: dict[str, str],
    outdir: Path,
    python: str = sys.executable,
    source_dir: Path = _paths.REPO_ROOT,
    verbose: bool = False,
    nvcc: str | None = None,
    prediction=None,
) -> BuildResult:
    """Build one wheel into `outdir`; raises ReleaseError (see run_streamed) when it fails.

    With ``FLASH_ATTN_KERNELS`` (a kernels archive, as the wheel sessions pass) the build compiles
    only the binding and links the archive, so its progress counts no kernel units.
    `prediction` (release.compile.estimate) drives the ETA and goes into the summary."""
    build_dir = Path(build_dir)
    cmd = build_command(python, source_dir, build_dir, outdir, defines)
    links_archive = bool(defines.get("FLASH_ATTN_KERNELS"))
    wall, log_before = run_streamed(
        cmd, build_dir, verbose, cwd=source_dir, prediction=prediction, compiles_units=not links_archive
    )
    wheels = sorted(Path(outdir).glob("*.whl"))
    if len(wheels) != 1:
        raise ReleaseError(f"the build exited 0 but left {len(wheels)} wheels in {outdir}; see {build_dir / LOG_NAME}")
    entries = progress.read_ninja_log(build_dir / ".ninja_log", log_before)
    s = progress.summary(entries, wall, progress.peak_child_rss_bytes(), library_sizes(wheels[0], nvcc))
    if prediction is not None:
        s["predicted_seconds"] = round(prediction.wall_seconds, 1)
    checksums.atomic_write_text(build_dir / SUMMARY_NAME, json.dumps(s, indent=1) + "\n")
    # The compile timeline beside the log, from the same .ninja_log entries (Perfetto, chrome://tracing).
    progress.write_trace(build_dir, entries)
    return BuildResult(wheel=wheels[0], summary=s, log=build_dir / LOG_NAME)


def library_sizes(wheel: Path, nvcc: str | None = None) -> dict[str, int]:
    """Per-arch device code size of the wheel's flash_attn/_C_<group> library (see progress.arch_sizes)."""
    with tagging.open_wheel(wheel) as zf:
        libs = [n for n in zf.namelist() if native.wheel_library_group(n)]
        if not libs:
            return {}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(zf.extract(libs[0], tmp))
            return progress.arch_sizes(path, nvcc)
