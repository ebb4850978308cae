"""Compiler launcher that records each compile's wall time, CPU time and peak memory.

Used by bench/build.py as CMake's CMAKE_CUDA_COMPILER_LAUNCHER / CMAKE_CXX_COMPILER_LAUNCHER, and
as torch's PYTORCH_NVCC prefix for upstream's setup.py build::

    python measure_launcher.py --log FILE [--] <compiler> <args...>

It runs the compiler with the same arguments, stdin, stdout and stderr, exits with its status,
and appends one JSON line to FILE::

    {"output": "CMakeFiles/.../fwd_hdim64_fp16.cu.o", "cwd": "...", "compiler": "nvcc",
     "start": <epoch s>, "end": <epoch s>, "seconds": 101.3, "user_s": 99.8, "sys_s": 2.1,
     "maxrss_kib": 4123456, "returncode": 0}

``maxrss_kib`` is ``ru_maxrss`` of ``getrusage(RUSAGE_CHILDREN)`` after the compiler exits: the
peak resident set of the largest single process of the compile's process tree (nvcc, cicc,
ptxas, the host compiler), the figure ``/usr/bin/time -v`` reports as "Maximum resident set
size". Processes that run at the same time (nvcc --threads > 1) are not summed. Where the
``resource`` module is missing (Windows) it is null.

The line is written with one ``write`` to a file opened with O_APPEND, so parallel compiles
never interleave their lines. Stdlib only; keep it fast (it starts once per compile).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

try:
    import resource
except ImportError:  # Windows
    resource = None

LOG_ENV = "FLASH_ATTN_BENCH_LAUNCHER_LOG"
DRY_ENV = "FLASH_ATTN_BENCH_LAUNCHER_DRY"  # set: exit 1 at once without compiling


def split_argv(argv: list[str]) -> tuple[str | None, list[str]]:
    """(log file, compiler command) from the launcher's arguments (without argv[0]).

    Accepts ``--log FILE``, ``--log=FILE`` or $FLASH_ATTN_BENCH_LAUNCHER_LOG, then an optional
    ``--`` and the command.
    """
    log = os.environ.get(LOG_ENV)
    rest = list(argv)
    if rest and rest[0] == "--log":
        if len(rest) < 2:
            raise SystemExit("measure_launcher.py: --log needs a file")
        log, rest = rest[1], rest[2:]
    elif rest and rest[0].startswith("--log="):
        log, rest = rest[0][len("--log=") :], rest[1:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    return log, rest


def output_of(cmd: list[str]) -> str | None:
    """The output file a compiler command names: ``-o X``, ``-oX``, ``--output-file X|=X``, ``/FoX``."""
    for i, arg in enumerate(cmd):
        if arg in ("-o", "--output-file") and i + 1 < len(cmd):
            return cmd[i + 1]
        if arg.startswith("--output-file="):
            return arg.split("=", 1)[1]
        if arg.startswith("-o") and len(arg) > 2 and not arg.startswith("-opt"):
            return arg[2:]
        if arg.startswith(("/Fo", "-Fo")) and len(arg) > 3:
            return arg[3:]
    return None


def record(cmd: list[str], start: float, end: float, returncode: int, usage) -> dict:
    """The JSON record of one compile (``usage``: a resource.struct_rusage or None)."""
    return {
        "output": output_of(cmd),
        "cwd": os.getcwd(),
        "compiler": os.path.basename(cmd[0]) if cmd else None,
        "start": round(start, 3),
        "end": round(end, 3),
        "seconds": round(end - start, 3),
        "user_s": None if usage is None else round(usage.ru_utime, 3),
        "sys_s": None if usage is None else round(usage.ru_stime, 3),
        "maxrss_kib": None if usage is None else int(usage.ru_maxrss) // (1024 if sys.platform == "darwin" else 1),
        "returncode": returncode,
    }


def append_line(path: str, data: dict) -> None:
    line = (json.dumps(data, separators=(",", ":")) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    log, cmd = split_argv(sys.argv[1:] if argv is None else argv)
    if not cmd:
        print("usage: measure_launcher.py --log FILE [--] <compiler> <args...>", file=sys.stderr)
        return 2
    if os.environ.get(DRY_ENV):
        # bench/build.py --upstream-mode units: let setup.py write its build.ninja, compile nothing.
        print(f"measure_launcher.py: {DRY_ENV} is set; not running {os.path.basename(cmd[0])}", file=sys.stderr)
        return 1
    start = time.time()
    try:
        returncode = subprocess.call(cmd)
    except OSError as exc:
        print(f"measure_launcher.py: cannot run {cmd[0]}: {exc}", file=sys.stderr)
        returncode = 127
    end = time.time()
    if returncode < 0:  # killed by a signal: report it the way a shell does
        returncode = 128 - returncode
    usage = resource.getrusage(resource.RUSAGE_CHILDREN) if resource is not None else None
    if log:
        try:
            append_line(log, record(cmd, start, end, returncode, usage))
        except OSError as exc:  # never fail a compile because the log cannot be written
            print(f"measure_launcher.py: cannot append to {log}: {exc}", file=sys.stderr)
    return returncode


if __name__ == "__main__":
    sys.exit(main())
