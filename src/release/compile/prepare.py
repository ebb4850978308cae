"""The one prepare step of every build entry point: check the options, probe the toolchain, and
know what the build info must say.

The wheel sessions (release.sessions.wheels), the kernels archive builds (release.archive.archives) and the
editable install (release.sessions.dev) all start with :func:`prepare`; each then builds in its own way.
It sits below all three (it imports none of them), so the archive builds need nothing from the
wheel module. The arch group a session was started for is reconciled with the user's
``--arch-group`` and ``FLASH_ATTN_ARCH_GROUP`` by :func:`options_of` (wheel and archive sessions).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from release import locks
from release.compile import arch_rules, options, toolchain
from release.errors import ReleaseError


@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare` found: the resolved kernel set and the probed toolchain."""

    opts: options.BuildOptions
    set_name: str  # the named set, or "custom" for a list of units
    units: list  # kernel_set.Unit of the set
    tc: toolchain.Toolchain

    def expected_build_info(self) -> dict[str, object]:
        """What the built wheel's build info must say (options.BuildOptions.expected_build_info with
        the probed nvcc, which decides whether fatbin compression can apply)."""
        return self.opts.expected_build_info(self.tc.cuda_version)

    def check_build_info(self, info: dict, build_dir: Path) -> None:
        """ReleaseError naming each option the built wheel's build info `info` disagrees with
        (options.check_build_info); `build_dir` is named as the folder to remove."""
        options.check_build_info(info, self.expected_build_info(), self.opts.kernel_set, build_dir)


def prepare(
    opts: options.BuildOptions,
    need_torch: bool,
    check_out: bool = True,
    probe: Callable[[], toolchain.Toolchain] | None = None,
    before_probe: Callable[[str, list], None] | None = None,
) -> Prepared:
    """Validate `opts`, then probe and check the toolchain; ReleaseError at the first problem.

    In order: BuildOptions.validate (the output folder too when `check_out`); the compiles killed
    sessions left running under the build root stopped (locks.reap_stale); `before_probe(set name,
    units)`, the caller's announcement and its own checks on the resolved set; with `need_torch`,
    the ``--torch-version`` torch checked against a stable-ABI build's minimum, then installed when
    it differs; `probe()` (default toolchain.probe)
    and toolchain.check (torch only when `need_torch`: the kernel objects compile without it);
    the archs this nvcc cannot build; with `need_torch`, a stable-ABI build's minimum torch.
    """
    set_name, units = opts.validate(check_out=check_out)
    locks.reap_stale(opts.build_root)  # compiles a killed session left running under this build root
    if before_probe is not None:
        before_probe(set_name, units)
    if need_torch and opts.torch_version:
        opts.validate_torch(opts.torch_version)  # a stable build's torch range, before pip installs it
        toolchain.ensure_torch(opts.torch_version)
    tc = (probe or toolchain.probe)()
    if need_torch:
        toolchain.check(tc, want_torch=opts.torch_version)
    else:
        toolchain.check(tc, need_torch=False)
    opts.validate_toolchain(tc.cuda_version)
    if need_torch:
        opts.validate_torch(tc.torch_version)
    return Prepared(opts, set_name, units, tc)


def options_of(ns: argparse.Namespace, env=None) -> options.BuildOptions:
    """BuildOptions from parsed arguments with one or more ``--arch-group`` (ns.groups): the session's
    own and the user's must agree, and so must a set ``FLASH_ATTN_ARCH_GROUP``, so that
    ``nox -s wheel_legacy`` never silently builds another group."""
    groups = list(dict.fromkeys(ns.groups))
    for g in groups:
        if g not in options.GROUPS:
            arch_rules.check_group(g, f"({arch_rules.sessions_hint('wheel', repeat_nox=True)})")
    if len(groups) > 1:
        raise ReleaseError(
            f"this session builds the {groups[0]} group but --arch-group {groups[-1]} was given; run "
            f"{session_of(groups[-1])} instead"
        )
    if env is None:
        env = os.environ
    ns.group = options.group_of(
        groups[0],
        env,
        "this session builds",
        lambda g: f"run {session_of(g) if g in options.GROUPS else 'the session of the group you want'}",
    )
    return options.from_namespace(ns, env)


def session_of(group: str) -> str:
    """The nox command that builds `group`."""
    return "nox -s wheel_custom -- --cuda-archs 80,90" if group == "custom" else f"nox -s wheel_{group}"
