"""Evidence that the kernel objects do not depend on torch: two torch versions, one set of objects.

``python -m release.archive.torch_independence --torch 2.14.1 --torch 2.15.0 --out DIR [--cuda-archs 80
--kernel-set ci --build-root build/torch-independence]`` (``nox -s torch_independence``):

1. makes one venv per torch (``--system-site-packages``, so a torch already on the machine is
   reused; another one is installed with pip) with the pinned build tools;
2. in the first venv, builds the wheel (``release.sessions.wheels``: the kernels torch-free in
   ``<build root>/kernels-...``, then the binding against that torch) and records the sha256 of
   every kernel object;
3. in the second venv, builds the wheel with the same build root: the kernels build is reused, and
   the run's ``.ninja_log`` lines show that no kernel unit compiled (only the binding did);
4. moves the kernels build away and compiles the kernels again in the second venv, at the same
   path, and compares every object's sha256 with step 2's (the objects hold no build path either:
   docs/release.md, byte identity; the build test compares a recompile at another path).

Writes DIR/torch_independence.json and DIR/README.md (the tables), and exits 1 when an object
differs or the second wheel compiled a kernel unit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

from release import _paths, pins
from release.archive import archives
from release.errors import CheckFailed, ReleaseError, run_main


def _venv(path: Path, torch: str) -> Path:
    """A venv at `path` with the build pins and torch==`torch`; returns its python."""
    py = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if not py.exists():
        venv.EnvBuilder(system_site_packages=True, with_pip=True).create(path)
    subprocess.run([str(py), "-m", "pip", "install", "-q", *pins.BUILD], check=True)
    from release.compile.toolchain import ensure_torch

    ensure_torch(torch, str(py))
    return py


def _run(py: Path, module: str, args: list[str], log: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(_paths.SRC_DIR)}
    env["PATH"] = os.pathsep.join([str(py.parent), env.get("PATH", "")])  # the venv's cmake and ninja
    proc = subprocess.run([str(py), "-m", f"release.{module}", *args], capture_output=True, text=True, env=env)
    log.write_text(proc.stdout + proc.stderr, encoding="utf-8")
    if proc.returncode != 0:
        raise ReleaseError(f"release.{module} failed in {py.parent.parent} (exit {proc.returncode}); see {log}")
    return proc.stdout


def _objects(folder: Path) -> dict[str, str]:
    """{object file: sha256} of the one kernels archive in `folder` (a build's ``archive/`` or an --out)."""
    (archive,) = sorted(Path(folder).glob("kernels-*"))
    return {o["file"]: o["sha256"] for o in archives.load(archive).manifest["objects"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m release.archive.torch_independence", description=__doc__.split("\n")[0])
    p.add_argument("--torch", action="append", required=True, help="torch version; give it twice")
    p.add_argument("--out", type=Path, required=True, help="folder for the evidence files")
    p.add_argument("--cuda-archs", default="80")
    p.add_argument("--kernel-set", default="ci")
    p.add_argument("--build-root", type=Path, default=_paths.DEFAULT_BUILD_ROOT / "torch-independence")
    ns = p.parse_args(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        if len(ns.torch) != 2:
            raise ReleaseError("give two torch versions: --torch 2.14.1 --torch 2.15.0")
        out, root = ns.out.resolve(), ns.build_root.resolve()
        out.mkdir(parents=True, exist_ok=True)
        flow = ["--arch-group", "custom", "--cuda-archs", ns.cuda_archs, "--kernel-set", ns.kernel_set,
                "--build-root", str(root), "--smoke-no-deps"]  # fmt: skip
        record: dict = {"torch": ns.torch, "kernel_set": ns.kernel_set, "cuda_archs": ns.cuda_archs, "wheels": []}
        pys = [_venv(root / f"venv-torch{t}", t) for t in ns.torch]
        kdir_a: Path | None = None
        for i, py in enumerate(pys):
            text = _run(
                py,
                "sessions.wheels",
                [*flow, "--out", str(out / f"wheel-torch{ns.torch[i]}")],
                out / f"build-{i + 1}.log",
            )
            kdirs = sorted(root.glob("kernels-*"))
            kdir_a = kdirs[0]
            summary = json.loads((kdir_a / "flash_attn_build_summary.json").read_text())
            (wheel,) = (out / f"wheel-torch{ns.torch[i]}").glob("*.whl")
            record["wheels"].append({
                "torch": ns.torch[i], "wheel": wheel.name, "kernel_units_compiled": summary["units_compiled"],
                "kernel_unit_names": summary["unit_names"], "objects": _objects(kdir_a / "archive"),
                "linked": "no kernel unit compiles" in text or summary["units_compiled"] == 0,
            })  # fmt: skip
        # A real recompile of the kernels under the second torch, at the same path.
        aside = kdir_a.with_name(kdir_a.name + ".first")
        if aside.exists():
            shutil.rmtree(aside)
        kdir_a.rename(aside)
        kflow = [a for a in flow if a != "--smoke-no-deps"]
        _run(
            pys[1],
            "archive.archives",
            ["build", *kflow, "--out", str(root / "recompiled")],
            out / "kernels-recompile.log",
        )
        summary = json.loads((kdir_a / "flash_attn_build_summary.json").read_text())
        first, again = record["wheels"][0]["objects"], _objects(root / "recompiled")
        record["recompile"] = {"torch": ns.torch[1], "kernel_units_compiled": summary["units_compiled"],
                               "objects": again, "identical": first == again}  # fmt: skip
        second = record["wheels"][1]
        ok = first == again and second["kernel_units_compiled"] == 0 and summary["units_compiled"] > 0
        record["ok"] = ok
        (out / "torch_independence.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        (out / "README.md").write_text(_markdown(record), encoding="utf-8")
        print(_markdown(record), flush=True)
        if not ok:
            raise CheckFailed("the kernel objects differ between the torch versions, or the second wheel compiled "
                              f"kernel units; see {out / 'torch_independence.json'}")  # fmt: skip
        return 0

    return run_main(body, prog="release.archive.torch_independence")


def _markdown(r: dict) -> str:
    lines = [f"# Kernel objects and torch: {r['torch'][0]} and {r['torch'][1]}\n",
             f"Kernel set `{r['kernel_set']}`, SMs {r['cuda_archs']}; "
             "`python -m release.archive.torch_independence`.\n",
             "| step | torch | wheel | kernel units compiled |", "|---|---|---|---|"]  # fmt: skip
    for i, w in enumerate(r["wheels"]):
        lines.append(f"| wheel {i + 1} | {w['torch']} | `{w['wheel']}` | {w['kernel_units_compiled']} |")
    rc = r["recompile"]
    lines.append(f"| kernels again (same path) | {rc['torch']} | - | {rc['kernel_units_compiled']} |")
    lines += ["", "| object | sha256 with the first torch | sha256 recompiled with the second | equal |",
              "|---|---|---|---|"]  # fmt: skip
    for f, h in sorted(r["wheels"][0]["objects"].items()):
        other = rc["objects"].get(f, "(missing)")
        lines.append(f"| `{f}` | `{h}` | `{other}` | {'yes' if other == h else 'NO'} |")
    lines.append(f"\nResult: {'PASSED' if r['ok'] else 'FAILED'}\n")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
