"""The wheel sessions: build one arch group's wheel, tag it, checksum it, smoke-test it.

``python -m release.sessions.wheels --arch-group legacy [options]`` (what ``nox -s wheel_legacy -- [options]``
runs). In order, stopping at the first problem with a message that says what to do:

1. check the options (``release.compile.options``): group, archs (the rules of
   build-manifest.json that CMake applies too, Thor refused), kernel set (``kernel_set.resolve``; an empty
   one is refused), jobs, sdist (the pinned file), source and CUTLASS folders, output folder
   (writable, no wheel of another version in it);
2. with ``--torch-version``, install that torch into the running environment when it differs;
3. probe the toolchain (``release.compile.toolchain``): nvcc present, torch a CUDA build of the same
   CUDA major, host compiler present; every arch buildable by this nvcc;
4. compile the kernel objects, torch-free, in their own build directory shared by every torch
   (``release.archive.archives``; skipped with ``--kernels ARCHIVE``), then build the binding against torch
   and link it with those objects in its named build directory (``release.compile.build_dirs``, created
   only now), every option passed explicitly, with progress and a summary of each step;
5. compare the wheel's build info with the options asked for (a mismatch names the option),
   then tag it with its local version label (``release.compile.tagging``; a stable-ABI wheel,
   ``--torch-abi stable``, also gets ``Requires-Dist: torch>=<torch_min>``), in a staging folder;
6. smoke-test the tagged wheel in a fresh venv (``release.ship.smoke``);
7. move it into the output folder atomically, with ``<wheel>.sha256`` beside it.

Nothing is written to the output folder before step 7, so a failure leaves it as it was.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
from pathlib import Path

from release import checksums, locks, outputs
from release.archive import archives
from release.compile import build_dirs, builder, compile_cache, estimate, options, prepare, progress, tagging
from release.errors import run_main
from release.ship import smoke


def publish(wheel: Path, out_dir: Path) -> tuple[Path, Path]:
    """Move a finished wheel into out_dir atomically and write its .sha256; returns both paths.

    A file of the same name there is this tool's earlier wheel of the same name (a wheel's name
    holds its version and label): it is replaced, and the message says so.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / wheel.name
    partial = outputs.temp_file(final)
    try:
        shutil.copyfile(wheel, partial)
        earlier = final.exists()
        os.replace(partial, final)
        if earlier:
            print(f"release: replaced the earlier {final.name} in {out_dir}", flush=True)
    finally:
        if partial.exists():
            partial.unlink()
    return final, checksums.write_sidecar(final)


def build_group(opts: options.BuildOptions, probe=None) -> Path:
    """Steps 1-7 for one group; returns the published wheel. `probe` defaults to toolchain.probe
    (steps 1-3 are release.compile.prepare)."""

    def announce(set_name: str, units: list) -> None:
        print(f"release: arch group {opts.group}, kernel set {set_name} ({len(units)} units)", flush=True)
        if opts.stable_torch_min():
            print(f"release: torch ABI stable: one wheel for every torch >= {opts.stable_torch_min()}", flush=True)

    ready = prepare.prepare(opts, need_torch=True, probe=probe, before_probe=announce)
    set_name, units, tc = ready.set_name, ready.units, ready.tc
    print(
        f"release: nvcc {tc.cuda_version} ({tc.nvcc}), torch {tc.torch_version} (CUDA {tc.torch_cuda_version}, "
        f"cxx11 ABI {tc.cxx11_abi}), {tc.compiler_id} {tc.compiler_version}",
        flush=True,
    )
    bdir = build_dirs.build_dir(
        opts.build_root, opts.group, opts.kernel_set, tc, opts.cuda_archs, opts.stable_torch_min()
    )
    if opts.kernels is not None:
        # a damaged, edited, renamed or swapped archive is refused before anything is written (CMake checks again)
        archives.verify_objects(archives.load(opts.kernels))
    steps = predict(opts, set_name, units, tc, bdir)
    opts.build_root.mkdir(parents=True, exist_ok=True)
    kernels_summary = None
    if opts.kernels is None:
        # Kernels first, torch-free, in a build folder every torch's wheel shares (release.archive.archives).
        archive, kernels_summary = archives.build(opts, tc, prediction=steps[0])
        print(f"release: kernels archive {archive}", flush=True)
        opts = dataclasses.replace(opts, kernels=archive)
        ready = dataclasses.replace(ready, opts=opts)
    else:
        print(f"release: linking the kernels archive {opts.kernels}; no kernel unit compiles", flush=True)
    with locks.hold_build_folder(bdir):
        final, sidecar, result = _build_binding(ready, bdir, steps[-1])
    if kernels_summary is not None:
        progress.render_summary(kernels_summary, title=f"flash_attn {opts.group} kernels ({opts.kernels.parent.name})")
    progress.render_summary(result.summary, title=f"flash_attn {opts.group} binding and link ({bdir.name})")
    actual = result.summary["wall_seconds"] + (kernels_summary["wall_seconds"] if kernels_summary else 0.0)
    print(f"release: compile steps {estimate.compare(estimate.total(steps), actual)}", flush=True)
    print(f"release: wrote {final}\nrelease: wrote {sidecar}", flush=True)
    return final


def _build_binding(ready: prepare.Prepared, bdir: Path, prediction=None) -> tuple[Path, Path, builder.BuildResult]:
    """Steps 4 (binding and link) to 7 in the locked build folder `bdir`; returns (wheel, sidecar, result).
    `prediction` (release.compile.estimate) of the binding and link drives the ETA."""
    opts, tc = ready.opts, ready.tc
    # Staging folders of this build folder are made only under its lock (held here): any left is a killed session's.
    for stale in opts.build_root.glob(f".staging-{bdir.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    staging = outputs.temp_dir(opts.build_root, f".staging-{bdir.name}-")
    try:
        with compile_cache.session(opts.cache) as cache:
            defines = compile_cache.settle(opts, cache).cmake_defines()  # no launcher after a fallback
            result = builder.run_build(
                bdir,
                defines,
                staging / "raw",
                python=tc.python,
                verbose=opts.verbose,
                nvcc=tc.nvcc,
                prediction=prediction,
            )
            stats = cache.stats()
        if stats:
            result.summary["compile_cache"] = stats
        info = tagging.read_build_info(result.wheel)
        ready.check_build_info(info, bdir)
        tagged = tagging.retag(result.wheel, staging / "tagged")
        print(f"release: tagged {tagged.name}", flush=True)
        if opts.smoke:
            smoke.smoke_test(tagged, opts.group, deps=opts.smoke_deps)
        else:
            smoke.check_contents(tagged, opts.group)
            print("release: smoke test skipped (--no-smoke); contents checked only", flush=True)
        options.check_out_dir(opts.out_dir, info["version"])
        final, sidecar = publish(tagged, opts.out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final, sidecar, result


def predict(opts: options.BuildOptions, set_name: str, units: list, tc=None, binding_dir: Path | None = None) -> list:
    """Print and return the up-front prediction of a wheel build's steps (release.compile.estimate): the
    kernels build unless --kernels links an archive, then the binding and link. With the toolchain
    `tc` and the binding's build folder, each step predicts only what its folder will rebuild
    (estimate.pending; the kernels archive's path is not compared, it is this build's output)."""
    defines = opts.cmake_defines()
    binding_todo = None
    if binding_dir is not None:
        binding_todo = estimate.pending(binding_dir, estimate.project_options(defines, "FLASH_ATTN_KERNELS"))
    steps = [estimate.binding_step(opts.jobs, todo=binding_todo)]
    if opts.kernels is None:
        sass = estimate.sass_count(opts.group, opts.cuda_archs)
        todo = None
        if tc is not None:
            kernels = {**defines, **archives.KERNELS_ONLY_DEFINES}
            todo = estimate.pending(archives.kernels_build_dir(opts, tc, ""), estimate.project_options(kernels))
        steps.insert(0, estimate.kernels_step(units, sass, jobs=opts.jobs, todo=todo))
    estimate.render(
        steps, lambda: estimate.cheaper_commands("wheel", opts.group, set_name, len(units), estimate.visible_sms())
    )
    return steps


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m release.sessions.wheels", description=__doc__.split("\n")[0])
    group = options.ARCH_GROUP
    p.add_argument(
        options.OPTIONS[group]["flag"], dest="groups", action="append", required=True, help=options.help_text(group)
    )
    options.add_arguments(p)
    return p


def parse(argv: list[str], env=None) -> options.BuildOptions:
    """BuildOptions from the session's arguments. --arch-group may come twice (the session's own
    and the user's): they must agree (release.compile.prepare.options_of)."""
    return prepare.options_of(parser().parse_args(argv), env)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_main(lambda: build_group(parse(argv)) and 0, prog="release.sessions.wheels", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
