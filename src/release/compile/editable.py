"""The tools an editable install rebuilds with on import: the CMake and Ninja that configured it.

scikit-build-core (``editable.rebuild = true``) rebuilds an editable install when a module that
CMake installed is imported (``flash_attn._C_<group>``, which the loader looks up on every
``import flash_attn``): its import hook (scikit_build_core/resources/_editable_redirect.py, 1.1.2,
the pin of ``tool_pins.build``) runs ``cmake --build .`` and ``cmake --install .``, with ``cmake``
looked up on PATH, and ``cmake --build`` runs the generator's make program recorded in the cache
(``CMAKE_MAKE_PROGRAM``). Both can differ from the configuring tools in a shell other than the nox
session: scikit-build-core records ``ninja`` without a path when the ninja package lies in the
system site-packages (its ``BIN_DIR`` is empty then), so an older system ninja that cannot read
the newer ``.ninja_log`` rebuilds everything, and a system CMake older than the project's minimum
runs the install. So the ``dev`` session (release.sessions.dev):

- configures with ``CMAKE_MAKE_PROGRAM`` set to :func:`write_ninja_relay`'s script in the build
  folder (on Windows the pinned ninja's absolute path), which runs the pinned ninja by its
  absolute path (:func:`tool_path`);
- writes :data:`PTH_NAME` into the environment's site-packages (:func:`write_path_hook`): it puts
  the folder of the CMake recorded in the build folder's cache (``CMAKE_COMMAND``,
  :func:`configured_cmake`) first on PATH in that environment's Python processes, so the hook's
  ``cmake`` is the configuring one whatever the shell's PATH holds;
- turns the hook's own output off (``editable.verbose = false``: the ``Running cmake --build``
  line and CMake's ``-- Up-to-date:`` install lines), while the relay passes Ninja's lines on to
  stderr, except :data:`QUIET` (``ninja: no work to do.``, and the status line of CMake's glob
  check, an edge every Ninja run of a CONFIGURE_DEPENDS build runs): an import with nothing to
  rebuild prints nothing, one that rebuilds prints one ``[done/total] step`` line per build step,
  as the builds do.
"""

from __future__ import annotations

import importlib.metadata
import os
import shlex
import shutil
import sys
from pathlib import Path, PurePath

from release import checksums
from release.errors import ReleaseError

RELAY_NAME = "flash_attn_ninja"  # in the build folder, beside CMakeCache.txt, with flash_attn_ninja.py
PTH_NAME = "flash_attn_dev_tools.pth"
# Lines the relay drops: Ninja's "nothing to do", and the end of the status line of the glob check
# (cmake.verify_globs) that runs on every build and re-runs CMake only when a globbed folder changed.
QUIET = ("ninja: no work to do.", "Re-checking globbed directories...")

# The relay: a Python script (run by the dev environment's interpreter) so that it can drop lines,
# started by a POSIX shell script, whose quoting takes any path (a '#!' line cannot hold a space).
# The configure asks ``--version`` and CMake runs ``-t`` tools (restat, recompact) whose output it
# reads: those go straight to ninja.
_RELAY_PY = '''"""Written by release.sessions.dev for the editable install: the pinned ninja, its lines on stderr."""
import os, subprocess, sys

NINJA = {ninja!r}
args = sys.argv[1:]
if "--version" in args or "-t" in args:
    os.execv(NINJA, [NINJA, *args])
proc = subprocess.Popen([NINJA, *args], stdout=subprocess.PIPE, text=True, errors="replace")
for line in proc.stdout:
    if not line.strip().endswith({quiet!r}):
        sys.stderr.write(line)
        sys.stderr.flush()
sys.exit(proc.wait())
'''
_RELAY_SH = """#!/bin/sh
# Written by release.sessions.dev: CMAKE_MAKE_PROGRAM of the editable install (see {script}).
exec {python} {script} "$@"
"""


def tool_path(dist: str, exe: str, env=None) -> Path | None:
    """Absolute path of the program `exe` (``ninja``, ``cmake``) that the installed distribution
    `dist` (the PyPI ``ninja`` / ``cmake`` package of ``tool_pins.build``) ships, else of `exe` on
    PATH (`env`'s, default os.environ), else None.

    The distribution's file list (importlib.metadata) finds its binary wherever pip put it: in
    this environment's scripts folder or in the system site-packages a ``--system-site-packages``
    venv sees. Of several matches, one inside the package (``cmake/data/bin/cmake``) wins over a
    console-script launcher in ``bin/``.
    """
    names = {exe, exe + ".exe"}
    try:
        files = importlib.metadata.distribution(dist).files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    found = []
    for f in files:
        if PurePath(str(f)).name not in names:
            continue
        path = Path(str(f.locate())).resolve()
        if path.is_file() and os.access(path, os.X_OK):
            found.append(path)
    found.sort(key=lambda p: "data" not in p.parts)
    if found:
        return found[0]
    on_path = shutil.which(exe, path=(env or os.environ).get("PATH"))
    return Path(on_path).resolve() if on_path else None


def pinned_ninja() -> Path:
    """The pinned ninja's absolute path (:func:`tool_path`); raises ReleaseError when there is none."""
    ninja = tool_path("ninja", "ninja")
    if ninja is None:
        raise ReleaseError(
            "no ninja found (neither the ninja package nor one on PATH); install the build pins, "
            "e.g. run nox -s dev, which installs tool_pins.build of build-manifest.json"
        )
    return ninja


def write_ninja_relay(build_dir: Path, ninja: Path, python: str = sys.executable) -> Path:
    """Write the relay (see the module docstring) into `build_dir` and return the path CMake should
    record as ``CMAKE_MAKE_PROGRAM`` (absolute, as are the paths inside it); on Windows, where a
    script is no program CMake can run, the absolute `ninja` itself (its lines then stay hidden
    during an import)."""
    if os.name == "nt":
        return Path(ninja)
    build_dir = Path(build_dir).resolve()  # CMake and the starter run it from other folders
    build_dir.mkdir(parents=True, exist_ok=True)
    path = build_dir / RELAY_NAME
    script = path.with_suffix(".py")
    checksums.atomic_write_text(script, _RELAY_PY.format(ninja=str(ninja), quiet=QUIET))
    checksums.atomic_write_text(path, _RELAY_SH.format(python=shlex.quote(python), script=shlex.quote(str(script))))
    path.chmod(0o755)
    return path


def configured_cmake(build_dir: Path) -> Path:
    """The CMake that configured `build_dir`: ``CMAKE_COMMAND`` of its CMakeCache.txt.

    Raises ReleaseError when the cache is missing or names no existing file (the build did not
    configure)."""
    cache = Path(build_dir) / "CMakeCache.txt"
    try:
        lines = cache.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as e:
        raise ReleaseError(f"{cache} is not readable ({e}); run nox -s dev again") from None
    for line in lines:
        if line.startswith("CMAKE_COMMAND:"):
            path = Path(line.split("=", 1)[1].strip())
            if path.is_file():
                return path
    raise ReleaseError(f"{cache} names no existing CMAKE_COMMAND; run nox -s dev again")


def write_path_hook(site_dir: Path, cmake: Path) -> Path:
    """Write :data:`PTH_NAME` into `site_dir` (the environment's site-packages): one ``import`` line,
    run at every start of that environment's Python, that puts `cmake`'s folder first on PATH
    unless it is first already. Returns the file."""
    folder = str(Path(cmake).parent)
    code = (
        f"import os; d = {folder!r}; p = os.environ.get('PATH', ''); "
        "os.environ['PATH'] = p if p.split(os.pathsep)[0] == d else d + os.pathsep + p"
    )
    path = Path(site_dir) / PTH_NAME
    # A .pth file runs only lines that start with "import"; the comment line says who wrote it.
    checksums.atomic_write_text(path, f"# release.sessions.dev: the CMake of the editable flash_attn\n{code}\n")
    return path


def install_settings(build_dir: Path, make_program: Path) -> list[str]:
    """scikit-build-core settings (``-C``) of the editable install: redirect mode, rebuilt on import,
    the hook's own output off, in `build_dir`, with `make_program` recorded as CMAKE_MAKE_PROGRAM."""
    return [
        "-Ceditable.mode=redirect",
        "-Ceditable.rebuild=true",
        "-Ceditable.verbose=false",
        f"-Cbuild-dir={build_dir}",
        f"-Ccmake.define.CMAKE_MAKE_PROGRAM={make_program}",
    ]
