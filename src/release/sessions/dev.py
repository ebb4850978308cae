"""The ``dev`` session: an editable install for local development that rebuilds on import.

``python -m release.sessions.dev [--arch-group legacy] [--kernel-set dev] [wheel options]`` builds for this
machine unless told otherwise (:func:`choose`): the SMs of its GPUs, or without one the ``ci`` set
for one SM, never on its own a build predicted over 30 minutes. It prints the predicted cost
(release.compile.estimate) and runs::

    pip install --no-build-isolation -e . -Ceditable.mode=redirect -Ceditable.rebuild=true \\
        -Ceditable.verbose=false -Cbuild-dir=<build dir> -Ccmake.define.CMAKE_MAKE_PROGRAM=<relay> \\
        -Ccmake.define.FLASH_ATTN_...=...

into the running environment (nox: ``.nox/dev``, kept between runs). scikit-build-core then
re-runs the Ninja build whenever ``import flash_attn`` happens in that environment, so editing a
source under src/ and importing again recompiles just what changed, with the CMake and Ninja that
configured the build folder whatever the shell's PATH holds (release.compile.editable: the relay, the
path hook), silently when nothing changed. The build directory is the wheel sessions' name for the
same options with ``-editable`` appended (``build/custom_sm80-ci-torch2.14.1-cu130-gcc12-editable``):
its own, because a wheel session reconfigures its folder to link a kernels archive, which would
undo the editable build.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from release import _paths
from release.compile import build_dirs, builder, compile_model, editable, estimate, options, prepare, toolchain
from release.errors import ReleaseError, run_main

DEV_KERNEL_SET = "dev"  # the named set of head dims 64 and 128 (kernels.sets of build-manifest.json)
EDITABLE_SUFFIX = "-editable"  # after the wheel sessions' build folder name (see the module docstring)


def install_command(python: str, build_dir, defines: dict[str, str], make_program) -> list[str]:
    """The ``pip install -e`` of the editable build: release.compile.editable.install_settings, then
    every CMake option of `defines` (name -> value)."""
    cmd = [python, "-m", "pip", "install", "-v", "--no-build-isolation", "--disable-pip-version-check"]
    cmd += editable.install_settings(build_dir, make_program)
    cmd += [f"-Ccmake.define.{name}={value}" for name, value in defines.items()]
    cmd += ["-e", str(_paths.REPO_ROOT)]
    return cmd


@dataclass(frozen=True)
class Choice:
    """What ``nox -s dev`` builds: arch group, SMs (custom group), kernel set, and why (one line)."""

    group: str
    cuda_archs: str  # "" for a fixed group, else "80,90"
    kernel_set: str
    why: str


def choose(
    group: str | None,
    cuda_archs: str | None,
    kernel_set: str | None,
    visible: list[int] | None,
    seconds=None,
) -> Choice:
    """The build for this machine (docs/release.md, "nox -s dev").

    An arch group, SMs or a kernel set that was given (flag or environment) is kept. Otherwise:
    with GPUs visible (`visible`: their SM numbers, estimate.visible_sms) the ``custom`` group for
    their SMs and the ``dev`` kernel set, unless `seconds(set, SM count)` (the predicted wall time
    here) puts it over estimate.LONG_SECONDS: then the ``ci`` set, saying how to ask for ``dev``;
    without a GPU (or unknown: None) the ``ci`` set for the oldest SM the project builds
    (``archs.min_sm``: its PTX runs on every newer GPU), a build of minutes, and the message says
    how to ask for more. So no choice of its own starts a build of more than 30 minutes.
    """
    usable = sorted(sm for sm in (visible or []) if sm >= options.MIN_SM)
    if group or cuda_archs:
        group = group or "custom"
        set_name = kernel_set or DEV_KERNEL_SET
        return Choice(group, cuda_archs or "", set_name, f"arch group {group} as asked")
    if usable:
        archs = ",".join(map(str, usable))
        why = f"the GPU(s) of this machine: sm_{', sm_'.join(map(str, usable))}"
        if kernel_set:
            return Choice("custom", archs, kernel_set, why)
        cost = seconds(DEV_KERNEL_SET, len(usable)) if seconds else 0.0
        if cost <= estimate.LONG_SECONDS:
            return Choice("custom", archs, DEV_KERNEL_SET, why)
        return Choice(
            "custom",
            archs,
            "ci",
            f"{why}; kernel set ci, as the {DEV_KERNEL_SET} set is predicted at "
            f"{estimate.progress.format_seconds(cost)} here (ask for it with --kernel-set {DEV_KERNEL_SET})",
        )
    set_name = kernel_set or "ci"
    gpus = "no CUDA device is visible" if visible is not None else "torch could not tell which GPUs are here"
    return Choice(
        "custom",
        str(options.MIN_SM),
        set_name,
        f"{gpus}: sm_{options.MIN_SM} only (its PTX runs on every newer GPU). For more: "
        f"nox -s dev -- --arch-group legacy --kernel-set {DEV_KERNEL_SET}, or --cuda-archs <your SMs>",
    )


def dev_seconds(kernel_set: str, sass: int) -> float:
    """Predicted wall seconds of an editable build of `kernel_set` for `sass` SMs on this machine."""
    return predict(estimate.units_of(kernel_set), sass).wall_seconds


def predict(units: list, sass: int, jobs: int | None = None, todo=None):
    """The estimate.Prediction of an editable build: the units, the dispatch and the binding in one
    build; `todo` (estimate.pending): only what an existing build folder will rebuild."""
    other = [compile_model.DISPATCH_SECONDS * sass, *compile_model.BINDING_SOURCES_SECONDS.values()]
    return estimate.predict("editable build (kernels, dispatch, binding)", units, sass, other, jobs, todo=todo)


def site_packages(python: str) -> Path:
    """The site-packages folder (sysconfig purelib) of the environment of `python`."""
    if Path(python).resolve() == Path(sys.executable).resolve():
        return Path(sysconfig.get_paths()["purelib"])
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        raise ReleaseError(f"{python} could not say where its site-packages are: {out.stderr.strip()[-300:]}")
    return Path(out.stdout.strip())


def main(argv: list[str] | None = None, probe=toolchain.probe, visible=None) -> int:
    """`visible`: a callable giving the SMs of the GPUs here (default estimate.visible_sms)."""
    p = argparse.ArgumentParser(prog="python -m release.sessions.dev", description=__doc__.split("\n")[0])
    flag = options.OPTIONS[options.ARCH_GROUP]["flag"]
    p.add_argument(
        flag,
        dest="group",
        help=f"{', '.join(options.GROUPS)} (default: custom with the SMs of the GPUs here; {options.ARCH_GROUP})",
    )
    options.add_arguments(p)
    p.set_defaults(kernel_set=None)
    ns = p.parse_args(sys.argv[1:] if argv is None else argv)
    env = os.environ

    def body() -> int:
        # the precedence of every entry point (options.pick, options.group_of): the flag, else the variable
        given_set = options.pick(ns.kernel_set, "FLASH_ATTN_KERNEL_SET", env)
        archs = options.pick(ns.cuda_archs, "FLASH_ATTN_CUDA_ARCHS", env)
        group = options.group_of(ns.group, env, f"{flag} asks for", lambda g: f"pass {flag} {g}")
        need_gpus = not (group or archs)
        found = (visible or estimate.visible_sms)() if need_gpus else None
        choice = choose(group, archs, given_set, found, seconds=dev_seconds)
        ns.group, ns.cuda_archs, ns.kernel_set = choice.group, choice.cuda_archs or None, choice.kernel_set
        opts = options.from_namespace(ns)

        def announce(set_name: str, units: list) -> None:
            print(
                f"release: dev build: arch group {opts.group}"
                + (f" (sm_{', sm_'.join(map(str, opts.cuda_archs))})" if opts.cuda_archs else "")
                + f", kernel set {set_name} ({len(units)} units): {choice.why}",
                flush=True,
            )

        ready = prepare.prepare(opts, need_torch=True, check_out=False, probe=probe, before_probe=announce)
        set_name, units, tc = ready.set_name, ready.units, ready.tc
        bdir = build_dirs.build_dir(
            opts.build_root, opts.group, opts.kernel_set, tc, opts.cuda_archs, opts.stable_torch_min()
        )
        bdir = bdir.with_name(bdir.name + EDITABLE_SUFFIX)
        relay = editable.write_ninja_relay(bdir, editable.pinned_ninja(), tc.python)
        sass = estimate.sass_count(opts.group, opts.cuda_archs)
        todo = estimate.pending(bdir, estimate.project_options(opts.cmake_defines()))
        step = predict(units, sass, opts.jobs, todo)
        estimate.render(
            [step],
            lambda: estimate.cheaper_commands("dev", opts.group, set_name, len(units), found or estimate.visible_sms()),
        )
        wall, _ = builder.run_streamed(
            install_command(tc.python, bdir, opts.cmake_defines(), relay),
            bdir,
            opts.verbose,
            what="the editable install",
            prediction=step,
        )
        hook = editable.write_path_hook(site_packages(tc.python), editable.configured_cmake(bdir))
        print(
            f"release: editable install done ({bdir.name}), {estimate.compare(step, wall)}. In this environment "
            f"`import flash_attn` rebuilds what changed under src/ (silent when nothing did), with the CMake "
            f"and ninja of this build ({hook.name}, {relay.name}); environment: {sys.prefix}",
            flush=True,
        )
        return 0

    return run_main(body, prog="release.sessions.dev")


if __name__ == "__main__":
    sys.exit(main())
