"""Smoke test of one wheel in a fresh virtual environment.

1. Contents (on the file, no install): the wheel is self-consistent (file name, dist-info,
   METADATA and RECORD agree), holds exactly one ``flash_attn/_C_<group>`` shared object and
   one ``build_info_<group>.json`` of the same group, and its local version label is the one its
   build info implies.
2. A new virtual environment (``--system-site-packages`` by default, so the machine's torch is
   reused instead of downloaded; the wheel itself is installed into the venv and shadows
   anything outside it), ``pip install <wheel>``, then release/ship/smoke_check.py in it from an
   empty folder: pip metadata version, import, ``__version__``, build info, only this group's
   library installed, the library loads and reports the same build info.
3. Where the venv's torch sees a GPU: tools/release_paths.py (the seven release-note paths)
   when that script exists, run with the venv's python (a script of its own, never imported).

torch in the venv: an exact wheel needs the torch it was built against, a stable-ABI wheel any
torch >= its ``torch_min`` (:func:`torch_fits`); when the venv's torch does not fit, the build's
torch is installed. ``--torch V`` installs torch ``V`` instead (a stable wheel under another torch
of its range; a V outside the range is refused before anything is created).

``python -m release.ship.smoke WHEEL [--group G] [--no-deps] [--isolated] [--torch V] [--torch-index URL]``
(``--torch-index``: torch alone comes from there, as the release workflow's PyTorch index). Before the wheel is
opened, the ``<wheel>.sha256`` beside it (when there is one) must verify, so a damaged copy is
named as such. Exit status 1 when a check failed, 2 for bad input (a missing, truncated,
damaged or foreign file, an LFS pointer, a wrong checksum), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

from release import _paths, checksums
from release.compile import tagging
from release.errors import CheckFailed, ReleaseError, run_main

CHECK_SCRIPT = Path(__file__).with_name("smoke_check.py")
RELEASE_PATHS = _paths.REPO_ROOT / "tools" / "release_paths.py"


def check_contents(wheel: Path, group: str | None = None) -> tuple[tagging.WheelFacts, dict]:
    """Static checks of the wheel file; returns (facts, build info). Raises ReleaseError."""
    facts = tagging.verify_wheel(wheel)
    libs, infos = tagging.native_members(wheel)
    info = tagging.read_build_info(wheel)
    group = group or info.get("group")
    if libs != [group]:
        raise ReleaseError(
            f"{wheel.name} holds the shared objects {['_C_' + g for g in libs]}; expected exactly _C_{group} "
            "(one arch group per wheel). Rebuild from a clean build directory."
        )
    if infos != [group] or info.get("group") != group:
        raise ReleaseError(f"{wheel.name}: build info is for {infos}, expected only {group}")
    label = tagging.local_label(info)
    if facts.version != tagging.tagged_version(facts.version, label):
        raise ReleaseError(
            f"{wheel.name} has version {facts.version} but its build info implies the label +{label}; "
            "re-tag it with release.compile.tagging.retag"
        )
    requirement = tagging.torch_requirement(info)  # torch>=<min> (stable ABI) or torch==<its torch> (exact)
    if tagging.metadata_torch_requirements(wheel) != [requirement]:
        raise ReleaseError(
            f"{wheel.name}: its METADATA does not require {requirement} (found "
            f"{tagging.metadata_torch_requirements(wheel)}); re-tag it with release.compile.tagging.retag"
        )
    return facts, info


def torch_fits(info: dict, found: str | None) -> bool:
    """True when torch ``found`` (a version, None when torch is missing) can load the wheel of build info
    ``info``: the same release for an exact build, >= ``torch_min`` for a stable-ABI build."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if not found:
        return False
    requirement = tagging.torch_requirement(info)
    try:
        return SpecifierSet(requirement.removeprefix("torch")).contains(Version(found).public, prereleases=True)
    except InvalidVersion:
        return False


def venv_python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def make_venv(root: Path, system_site_packages: bool = True) -> Path:
    venv.EnvBuilder(system_site_packages=system_site_packages, with_pip=False, clear=True).create(root)
    return venv_python(root)


def pip_command(python: Path) -> list[str]:
    """pip of this interpreter acting on the venv `python` (pip >= 22.3; no pip bootstrap per venv)."""
    return [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


def _gpu_available(python: Path, cwd: Path) -> bool:
    proc = subprocess.run(
        [str(python), "-c", "import torch; print(int(torch.cuda.is_available()))"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_clean_env(),
    )
    return proc.returncode == 0 and proc.stdout.strip().endswith("1")


def _match_torch(python: Path, info: dict, cwd: Path, want: str | None = None, index: str | None = None) -> None:
    """Install torch ``want`` into the venv when given and the venv sees another; without ``want``, install
    the torch the wheel was built against when the one the venv sees does not fit it (:func:`torch_fits`).
    ``index``: the index torch alone comes from (``pip install --index-url``, e.g. PyTorch's cu130 index)."""
    from release.compile.toolchain import torch_public_version

    query = "import torch; print(torch.__version__)"
    proc = subprocess.run([str(python), "-c", query], capture_output=True, text=True, cwd=cwd, env=_clean_env())
    found = proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else None
    if want is None:
        if torch_fits(info, found):
            return
        want = torch_public_version(info["torch_version"])
    elif found and torch_public_version(found) == torch_public_version(want):
        return
    print(f"release: smoke venv has torch {found}; installing torch=={want}", flush=True)
    pip = [*pip_command(python), "install", *(["--index-url", index] if index else []), f"torch=={want}"]
    if subprocess.run(pip, cwd=cwd, env=_clean_env()).returncode != 0:
        raise ReleaseError(
            f"could not install torch=={want} into the smoke-test venv; give the index it is on with --torch-index"
        )


def smoke_test(
    wheel: Path,
    group: str | None = None,
    deps: bool = True,
    system_site_packages: bool = True,
    release_paths: Path | None = RELEASE_PATHS,
    torch: str | None = None,
    torch_index: str | None = None,
    verbose: bool = False,
) -> list[dict]:
    """Run every check; returns the check records, raises ReleaseError when one failed.

    A failed check raises CheckFailed (exit 1) whose message names each failed check with its
    exception line; the check script's tracebacks are printed (to stderr, before the error line)
    only with ``verbose`` (``-v``), never inside the error message.

    ``torch``: the torch release to test under (installed into the venv); ReleaseError before anything
    is created when the wheel cannot load in it (an exact wheel's other torch, a stable wheel's torch
    below its minimum).
    """
    wheel = Path(wheel).resolve()
    facts, info = check_contents(wheel, group)
    if torch is not None and not torch_fits(info, torch):
        serves = tagging.torch_requirement(info) or f"torch=={info['torch_version']}"
        raise ReleaseError(
            f"{wheel.name} serves {serves.replace('torch', 'torch ', 1).replace('>=', '>= ')}; --torch {torch} is "
            "outside it. Give a torch the wheel loads in, or leave --torch out."
        )
    group = info["group"]
    records = [{"check": "wheel contents and tag", "ok": True, "detail": facts.version}]
    with tempfile.TemporaryDirectory(prefix="flash_attn-smoke-") as tmp:
        tmp = Path(tmp)
        py = make_venv(tmp / "venv", system_site_packages)
        work = tmp / "work"
        work.mkdir()
        pip = [*pip_command(py), "install", "--no-input"]
        if not deps:
            pip.append("--no-deps")
        proc = subprocess.run([*pip, str(wheel)], capture_output=True, text=True, cwd=work, env=_clean_env())
        if proc.returncode != 0:
            raise ReleaseError(f"pip install {wheel.name} failed in a fresh venv:\n{proc.stdout}{proc.stderr}")
        records.append({"check": "pip install into a fresh venv", "ok": True, "detail": str(tmp / "venv")})
        _match_torch(py, info, work, torch, torch_index)
        proc = subprocess.run(
            [str(py), str(CHECK_SCRIPT), "--expect-version", facts.version, "--group", group],
            capture_output=True,
            text=True,
            cwd=work,
            env=_clean_env(),
        )
        try:
            found = json.loads(proc.stdout.strip().splitlines()[-1])
            if not isinstance(found, dict) or not isinstance(found.get("checks"), list):
                raise ValueError("not the check script's report")
        except (ValueError, IndexError):
            if verbose:
                print(f"{proc.stdout}{proc.stderr}".rstrip(), file=sys.stderr, flush=True)
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]  # the exception line, not its traceback
            raise ReleaseError(
                f"the smoke check script did not report (exit {proc.returncode}: {last}); run again with -v for its "
                "output"
            ) from None
        records += found["checks"]
        if found.get("build_info") not in (None, info):
            records.append({"check": "installed build info equals the wheel's", "ok": False, "detail": "differs"})
        if release_paths is not None and _gpu_available(py, work):
            if Path(release_paths).is_file():
                run = subprocess.run([str(py), str(release_paths)], cwd=work, env=_clean_env())
                ok = run.returncode == 0
                records.append({"check": "release-note paths on the GPU", "ok": ok, "detail": f"exit {run.returncode}"})
            else:
                records.append({"check": "release-note paths on the GPU", "ok": True, "detail": "script not present"})
    failed = [r for r in records if not r["ok"]]
    for r in records:
        print(f"  [{'ok' if r['ok'] else 'FAILED'}] {r['check']}: {r['detail']}", flush=True)
    if failed:
        if verbose and proc.stderr:
            print(proc.stderr.rstrip(), file=sys.stderr, flush=True)
        raise CheckFailed(
            f"smoke test of {wheel.name} failed: "
            + "; ".join(f"{r['check']} ({r['detail']})" for r in failed)
            + ("" if verbose else "; run again with -v for the check script's tracebacks")
        )
    return records


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m release.ship.smoke", description=__doc__.split("\n")[0])
    p.add_argument("wheels", nargs="+", type=Path, help="wheel files to test")
    p.add_argument("--group", help="expected arch group (default: the wheel's build info)")
    p.add_argument("--no-deps", dest="deps", action="store_false", help="pip install --no-deps (offline)")
    p.add_argument("--isolated", action="store_true", help="venv without system site-packages (downloads torch)")
    p.add_argument("--torch", help="torch release to test under (a stable-ABI wheel: any in its range)")
    p.add_argument(
        "--torch-index", help="index torch alone is installed from (PyTorch's cu1xx index); everything else: PyPI"
    )
    p.add_argument("-v", "--verbose", action="store_true", help="print the check script's tracebacks of a failure")
    args = p.parse_args(argv)

    def body() -> int:
        for wheel in args.wheels:
            if not wheel.is_file():
                raise ReleaseError(f"{wheel} is not a file; pass the path of a built .whl")
            checksums.verify_sidecar(wheel)
            print(f"release: smoke test of {wheel.name}", flush=True)
            smoke_test(
                wheel,
                args.group,
                deps=args.deps,
                system_site_packages=not args.isolated,
                torch=args.torch,
                torch_index=args.torch_index,
                verbose=args.verbose,
            )
        return 0

    return run_main(body, prog="release.ship.smoke", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
