"""``nox -s upstream_tests``: upstream FlashAttention's own test suite against an installed wheel.

    python -m release.ship.upstream_tests --wheel WHEEL [--sample N] [--seed S] [--jobs J] [--out DIR]
                                     [--sdist FILE] [-- extra pytest arguments]

The pinned sdist's ``tests/test_flash_attn.py`` and ``tests/test_rotary.py`` are extracted into a
temporary folder and run unmodified with pytest, from that folder, so ``import flash_attn`` finds
the installed wheel (the session installs it) and never a checkout. The cases kept are those whose
head dim dispatches to a kernel head dim the wheel has in full (every unit of that head dim in the
build info's ``kernels``); ``--sample`` runs a reproducible sample of them spread over every test
function (:mod:`release.ship.upstream_tests_plugin`). ``--jobs J`` runs J pytest-xdist workers on the
one GPU (needs pytest-xdist). The per-function counts are printed and written to
``<out>/upstream_tests.json`` with the wheel's file name, sha256 and label (schema
``upstream-tests/1``, release.ship.reports; ``nox -s release`` checks it and ships it).

Needs a CUDA GPU the wheel runs on. Exit status: pytest's (0 all passed, 1 some failed, 5 nothing
selected), 2 on bad input (no such wheel, a wheel that has no complete head dim, pytest missing).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from kernels import kernel_set as kernel_sets
from release import _paths, checksums, manifest
from release.compile import tagging, upstream
from release.errors import ReleaseError, run_main
from release.ship import reports

TEST_FILES = ("tests/test_flash_attn.py", "tests/test_rotary.py")
PLUGIN = "release.ship.upstream_tests_plugin"


def complete_head_dims(info: dict) -> list[int]:
    """Head dims of which the build info's ``kernels`` hold every unit of the manifest (all kinds,
    dtypes, causal or not): the only ones upstream's tests can exercise without hitting a stub."""
    units = kernel_sets.all_units()
    want: dict[int, set] = {}
    for u in units:
        want.setdefault(u.head_dim, set()).add((u.kind, u.dtype, u.causal))
    have: dict[int, set] = {}
    for k in info.get("kernels") or []:
        have.setdefault(int(k["head_dim"]), set()).add((k["kind"], k["dtype"], bool(k["causal"])))
    return sorted(d for d, combos in want.items() if combos <= have.get(d, set()))


def wheel_facts(wheel: Path) -> dict[str, str]:
    """What the summary records of the wheel under test (release.ship.reports checks it against the
    released wheel): file name, sha256 and label (the local part of the version in the file name)."""
    version = wheel.name.split("-")[1] if wheel.name.count("-") >= 2 else ""
    return {"file": wheel.name, "sha256": checksums.sha256_file(wheel), "label": reports.wheel_label(version)}


def pytest_command(
    tests_dir: Path, head_dims: list[int], args: argparse.Namespace, summary: Path, wheel: dict | None = None
) -> list[str]:
    """The pytest command line (run from ``tests_dir``'s parent) for the given wheel facts (`wheel`:
    :func:`wheel_facts`, recorded in the summary)."""
    kernel_dims = manifest.load()["kernels"]["head_dims"]
    cmd = [sys.executable, "-m", "pytest", "-p", PLUGIN, "-q", "-rfE", "--tb=short"]
    cmd += [f"--fa-head-dims={','.join(map(str, head_dims))}", f"--fa-kernel-dims={','.join(map(str, kernel_dims))}"]
    cmd += [f"--fa-sample={args.sample}", f"--fa-seed={args.seed}", f"--fa-summary={summary}"]
    cmd += [f"--fa-wheel-{key}={value}" for key, value in (wheel or {}).items()]
    if args.jobs > 1:
        cmd += ["-n", str(args.jobs)]
    cmd += [str(tests_dir.parent / f) for f in TEST_FILES]
    return cmd + list(args.pytest_args)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="nox -s upstream_tests --", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--wheel", required=True, type=Path, help="the flash_attn wheel under test (the session installs it)"
    )
    ap.add_argument("--sample", type=int, default=0, help="run at most N cases, spread over every test function")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sample (default 0)")
    ap.add_argument("--jobs", type=int, default=1, help="pytest-xdist workers on the GPU (default 1: no xdist)")
    ap.add_argument("--out", type=Path, default=_paths.REPO_ROOT / "reports", help="folder of upstream_tests.json")
    ap.add_argument("--sdist", help="the pinned upstream sdist (default: the build's download cache)")
    ap.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    return ap


def run(args: argparse.Namespace) -> int:
    if args.sample < 0 or args.jobs < 1:
        raise ReleaseError("--sample must be >= 0 and --jobs >= 1")
    info = tagging.read_build_info(args.wheel)  # ReleaseError names a missing or damaged wheel
    head_dims = complete_head_dims(info)
    if not head_dims:
        raise ReleaseError(
            f"{args.wheel.name} (kernel set {info.get('kernel_set')!r}) has no head dim with all its units, so "
            "upstream's tests would only reach stubs; test a wheel built with --kernel-set dev or release"
        )
    sdist = upstream.pinned_sdist(args.sdist)
    args.out.mkdir(parents=True, exist_ok=True)
    summary = (args.out / "upstream_tests.json").resolve()
    with tempfile.TemporaryDirectory(prefix="flash_attn-upstream-tests-") as tmp:
        root = upstream.extract_sdist(sdist, Path(tmp))
        tests_dir = root / "tests"
        missing = [f for f in TEST_FILES if not (root / f).is_file()]
        if missing:
            raise ReleaseError(f"the sdist {sdist.name} has no {', '.join(missing)}")
        cmd = pytest_command(tests_dir, head_dims, args, summary, wheel_facts(args.wheel))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(_paths.SRC_DIR), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        print(f"upstream_tests: {info.get('kernel_set')} wheel, head dims {head_dims}; {' '.join(cmd[3:])}", flush=True)
        # from an empty folder beside the tests: never a checkout's flash_attn/
        rc = subprocess.call(cmd, cwd=tmp, env=env)
    print(f"upstream_tests: per-function counts in {summary}")
    return rc


def main(argv: list[str] | None = None) -> int:
    return run_main(lambda: run(parser().parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
