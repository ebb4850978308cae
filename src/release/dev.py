"""The ``dev`` session: an editable install for local development that rebuilds on import.

``python -m release.dev [--arch-group legacy] [--kernel-set dev] [wheel options]`` runs::

    pip install --no-build-isolation -e . -Ceditable.rebuild=true -Cbuild-dir=<keyed dir> \\
        -Ccmake.define.FLASH_ATTN_...=...

into the running environment (nox: ``.nox/dev``, kept between runs). scikit-build-core then
re-runs the Ninja build whenever ``import flash_attn`` happens in that environment, so editing a
source under src/ and importing again recompiles just what changed. The build directory is the
keyed one the wheel sessions use (``build/legacy-dev-torch2.14.1-cu130-gcc12``), so a wheel
session with the same group and kernel set reuses the developer's objects and vice versa.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import _paths, build_key, builder, manifest, options, toolchain
from .errors import run_main


def install_command(python: str, build_dir, defines: dict[str, str]) -> list[str]:
    cmd = [python, "-m", "pip", "install", "-v", "--no-build-isolation", "--disable-pip-version-check"]
    cmd += ["-Ceditable.rebuild=true", "-Ceditable.verbose=true", f"-Cbuild-dir={build_dir}"]
    cmd += [f"-Ccmake.define.{name}={value}" for name, value in defines.items()]
    cmd += ["-e", str(_paths.REPO_ROOT)]
    return cmd


def main(argv: list[str] | None = None, probe=toolchain.probe) -> int:
    p = argparse.ArgumentParser(prog="python -m release.dev", description=__doc__.split("\n")[0])
    default = os.environ.get("FLASH_ATTN_ARCH_GROUP") or manifest.option_default("FLASH_ATTN_ARCH_GROUP")
    p.add_argument(
        "--arch-group",
        dest="group",
        default=default,
        help=f"{', '.join(options.GROUPS)} (default {default}; FLASH_ATTN_ARCH_GROUP)",
    )
    options.add_arguments(p)
    p.set_defaults(kernel_set=None)
    ns = p.parse_args(sys.argv[1:] if argv is None else argv)
    if not ns.kernel_set:
        ns.kernel_set = os.environ.get("FLASH_ATTN_KERNEL_SET") or "dev"

    def body() -> int:
        opts = options.from_namespace(ns)
        opts.validate(check_out=False)
        if opts.torch_version:
            toolchain.ensure_torch(opts.torch_version)
        tc = probe()
        toolchain.check(tc, want_torch=opts.torch_version)
        opts.validate_toolchain(tc.cuda_version)
        bdir = build_key.build_dir(
            opts.build_root, opts.group, opts.kernel_set, tc, opts.cuda_archs, opts.stable_torch_min()
        )
        builder.run_streamed(
            install_command(tc.python, bdir, opts.cmake_defines()), bdir, opts.verbose, what="the editable install"
        )
        print(
            f"release: editable install done ({bdir.name}). In this environment `import flash_attn` rebuilds what "
            f"changed under src/; environment: {sys.prefix}",
            flush=True,
        )
        return 0

    return run_main(body, prog="release.dev")


if __name__ == "__main__":
    sys.exit(main())
