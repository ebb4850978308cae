"""Build options of the wheel sessions: command-line flags, environment variables, CMake defines.

Every option is an entry of ``options`` in build-manifest.json (:data:`OPTIONS`): its type, choices
or range, flag, default, help text, the sentence that refuses a bad value, and the build info key
that records it (docs/manifest.md). This module derives its flags, defaults, checks and the build
info comparison from that table; cmake/FlashAttnOptions.cmake declares and checks the CMake cache
variables from the same table, and ``release.plan.doc_tables`` renders pyproject.toml's defines and the
options table of docs/release.md from it.

Precedence, the same in every entry point (wheels, kernel archives, dev): :func:`pick`. A flag
wins over the environment variable of the same name, which is the default of a flag not given; for
the arch group, which decides what a session builds, a set ``FLASH_ATTN_ARCH_GROUP`` that disagrees
with the flag is refused (:func:`group_of`).
Every option, the ones left at their default included (:data:`DEFAULTS`), is passed to CMake as
``-C cmake.define.NAME=VALUE`` on every build, so a reused build directory never keeps a stale
value in its cache (a CMake cache variable ignores the environment once it is set); after the
build, :func:`check_build_info` compares the wheel's build info with what was asked.

:func:`from_namespace` turns parsed flags into :class:`BuildOptions`; :func:`BuildOptions.validate`
checks everything that can be checked before anything is created (group, archs, kernel set,
sdist, source and CUTLASS folders, output folder), :func:`BuildOptions.validate_toolchain` what
needs the probed nvcc (archs the toolkit cannot build); both raise
:class:`~release.errors.ReleaseError` with what to do next.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kernels import kernel_set as kernel_sets
from release import _paths, checksums, manifest
from release.compile import arch_rules
from release.errors import ReleaseError

_MANIFEST = manifest.load()
# The options table: CMake/environment name -> entry (type, flag, default, doc, ...), in manifest order.
OPTIONS: dict[str, dict] = _MANIFEST["options"]
GROUPS = tuple(manifest.arch_groups(_MANIFEST))
MIN_SM = int(_MANIFEST["archs"]["min_sm"])
DEFAULT_KERNEL_SET = OPTIONS["FLASH_ATTN_KERNEL_SET"]["default"]
# The minimum torch of a stable-ABI wheel (which the CMake side compiles as TORCH_TARGET_VERSION).
TORCH_MIN = _MANIFEST["stable_abi"]["torch_min"]
ARCH_GROUP = "FLASH_ATTN_ARCH_GROUP"


def choices(name: str) -> list[str]:
    """The values option `name` accepts (manifest.option_choices of the loaded manifest)."""
    return manifest.option_choices(name, _MANIFEST)


def fill_text(name: str, key: str) -> str:
    """Text `key` (doc, invalid) of option `name`, placeholders filled in (manifest.option_text)."""
    return manifest.option_text(name, key, _MANIFEST)


def label(name: str) -> str:
    """How a message names option `name`: ``FLASH_ATTN_X (--flag)``, or the bare name without a flag."""
    flag = OPTIONS[name].get("flag")
    return f"{name} ({flag})" if flag else name


def help_text(name: str) -> str:
    """The --help text of option `name`: its doc (without Markdown backticks), its default, its variable."""
    default = OPTIONS[name]["default"]
    return fill_text(name, "doc").replace("`", "") + (f" (default {default})" if default else "") + f" ({name})"


def check_value(name: str, value: str) -> None:
    """Refuse `value` for option `name` by its entry when the entry has an ``invalid`` sentence: an
    enum must be one of :func:`choices`; a number or integer must match ``pattern`` (integer: digits)
    and lie in [min, below). "" passes (unset). ReleaseError ``NAME='value' (--flag) <sentence>``;
    CMake's flash_attn_option_check refuses the same values with the same sentence."""
    entry = OPTIONS[name]
    if not entry.get("invalid") or value == "":
        return
    ok = True
    if entry["type"] == "enum":
        ok = value in choices(name)
    elif entry["type"] in ("number", "integer"):
        ok = bool(re.fullmatch(entry.get("pattern") or r"^[0-9]+$", value))
        ok = ok and ("min" not in entry or float(value) >= entry["min"])
        ok = ok and ("below" not in entry or float(value) < entry["below"])
    if not ok:
        raise ReleaseError(
            f"{name}='{value}'{' (' + entry['flag'] + ')' if entry.get('flag') else ''} {fill_text(name, 'invalid')}"
        )


def empty_flag(flag: str) -> ReleaseError:
    """The one refusal of a flag given an empty value (what to do: give one, or leave the flag out)."""
    return ReleaseError(
        f"{flag} was given an empty value (an unset shell variable?); give a value, or leave {flag} out for its "
        "default."
    )


def pick(flag_value, name: str, env: Mapping[str, str]) -> str | None:
    """The one precedence rule of every option in every entry point: the flag's value when the flag
    was given, else the environment variable `name` when set and not empty, else None (CMake then
    uses the manifest's default). The flag wins over the variable.

    A flag given an empty or blank value (``--shard ''``, an unset shell variable) is a ReleaseError
    (exit 2), never "not given": falling back to the default would build something else than asked
    (the whole release set on one runner for an empty shard). An empty variable stays "not set", as
    CMake reads it (pyproject.toml passes every option, empty when unset)."""
    if flag_value is not None:
        if isinstance(flag_value, str) and not flag_value.strip():
            raise empty_flag(OPTIONS.get(name, {}).get("flag") or name)
        return str(flag_value)
    value = env.get(name, "")
    return value if value != "" else None


def group_of(flag: str | None, env: Mapping[str, str], asked: str, instead) -> str | None:
    """The arch group an entry point builds, by :func:`pick`: the flag, else FLASH_ATTN_ARCH_GROUP, else
    None (dev then picks for the GPUs here). The arch group decides what a session builds, so a set
    FLASH_ATTN_ARCH_GROUP that disagrees with the flag is refused rather than overridden, in every entry
    point: ReleaseError ``... is set, but <asked> the <flag> group. Unset it, or <instead(variable's value)>.``"""
    from_env = pick(None, ARCH_GROUP, env)
    if flag is not None and from_env is not None and from_env != flag:
        raise ReleaseError(
            f"{ARCH_GROUP}={from_env} is set, but {asked} the {flag} group. Unset it, or {instead(from_env)}."
        )
    return pick(flag, ARCH_GROUP, env)


# Options whose flag the entry point adds itself (--arch-group: the session's; --shard: kernel archives only).
_ENTRY_POINT_FLAGS = (ARCH_GROUP, "FLASH_ATTN_SHARD")
# Options BuildOptions holds in fields of their own (parsed, not passed through as text).
_FIELDS = ("FLASH_ATTN_CUDA_ARCHS", "FLASH_ATTN_KERNEL_SET", "FLASH_ATTN_JOBS", "FLASH_ATTN_KERNELS")


def _dest(name: str) -> str:
    return OPTIONS[name]["flag"][2:].replace("-", "_")


# (CLI dest, CMake/env name, help) of the pass-through options: every option with a flag that is neither
# the entry point's nor a field of its own; None means "not given". Their defaults are the manifest's.
PASS_THROUGH = tuple(
    (_dest(name), name, help_text(name))
    for name, entry in OPTIONS.items()
    if entry.get("flag") and name not in _ENTRY_POINT_FLAGS + _FIELDS
)
# The value CMake uses when an option is not given (options.<name>.default of the manifest, which
# cmake/FlashAttnOptions.cmake applies); "" is "not set" for the paths. Every option is passed on every
# build: FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET (test only, never a session flag) as OFF, so a value
# set by hand in a build folder's cache cannot reach a wheel.
DEFAULTS = {name: entry["default"] for name, entry in OPTIONS.items()}
# Compile caches the sessions can put in front of nvcc and the host compiler (release.compile.compile_cache).
CACHES = ("none", "sccache")
# nvcc gained --compress-mode in CUDA 12.8 (options.FLASH_ATTN_FATBIN_COMPRESSION.min_cuda of the
# manifest); older nvcc builds without it (recorded as "none").
COMPRESS_MODE_MIN_CUDA = tuple(int(x) for x in OPTIONS["FLASH_ATTN_FATBIN_COMPRESSION"]["min_cuda"].split("."))


def parse_archs(text: str) -> list[int]:
    """SM numbers of --cuda-archs ("80;90", "80,90", "8.0 9.0" or "sm_80"): sorted, without duplicates;
    parsed by cmake/FlashAttnArchGroups.cmake through :func:`arch_rules.parse_archs`."""
    return arch_rules.parse_archs(text, "--cuda-archs")


def _on_off(value: str | None, what: str) -> str | None:
    if value is None:
        return None
    v = value.strip().upper()
    if v in ("1", "ON", "TRUE", "YES", "Y"):
        return "ON"
    if v in ("0", "OFF", "FALSE", "NO", "N"):
        return "OFF"
    raise ReleaseError(f"{what}='{value}' is not a boolean; use ON or OFF.")


@dataclass
class BuildOptions:
    """Everything one wheel build needs to know besides the toolchain."""

    group: str
    kernel_set: str = DEFAULT_KERNEL_SET
    cuda_archs: list[int] = field(default_factory=list)
    torch_version: str | None = None
    out_dir: Path = _paths.DEFAULT_WHEELHOUSE
    build_root: Path = _paths.DEFAULT_BUILD_ROOT
    jobs: int | None = None
    passthrough: dict[str, str] = field(default_factory=dict)  # CMake name -> value
    smoke: bool = True
    smoke_deps: bool = True
    verbose: bool = False
    kernels: Path | None = None  # a whole-set kernels archive to link instead of compiling the kernels
    cache: str = "none"  # CACHES

    def validate(self, check_out: bool = True) -> tuple[str, list]:
        """Check the options before building; returns kernel_set.resolve(self.kernel_set).

        Raises ReleaseError for an unknown group, a custom group without archs (or archs for a
        fixed group), an unknown kernel set, a bad job count or fatbin mode, a --torch-version
        that is not a version, and an output folder that already holds a flash_attn wheel of
        another version.
        """
        # The group and its SM list, by cmake/FlashAttnArchGroups.cmake (toolkit rules: validate_toolchain).
        arch_rules.check_archs(
            self.group, self.cuda_archs, group_hint=f"({arch_rules.sessions_hint('wheel', _MANIFEST)})"
        )
        if self.cache not in CACHES:
            raise ReleaseError(f"--cache {self.cache}: use one of {', '.join(CACHES)}")
        if self.kernels is not None and not (self.kernels / "kernels-manifest.json").is_file():
            raise ReleaseError(
                f"--kernels {self.kernels} is not a kernels archive (no kernels-manifest.json); pass the folder "
                "nox -s archive_<group> or nox -s archive_gather wrote."
            )
        if self.jobs is not None:
            check_value("FLASH_ATTN_JOBS", str(self.jobs))
        if self.torch_version is not None:
            check_torch_version(self.torch_version)
        for name, value in self.passthrough.items():
            check_value(name, value)
        try:
            resolved = kernel_sets.resolve(self.kernel_set)
        except kernel_sets.KernelSetError as e:
            raise ReleaseError(f"kernel set: {e}") from None
        check_inputs(self.passthrough)
        check_build_root(self.build_root)
        if not (self.passthrough.get("FLASH_ATTN_SDIST") or self.passthrough.get("FLASH_ATTN_SOURCE_DIR")):
            check_sdist_cache()
        if check_out:
            check_out_dir(self.out_dir, _paths.package_version())
            check_writable(self.out_dir)
        return resolved

    def validate_toolchain(self, cuda_version: str) -> None:
        """Checks that need nvcc's version: every arch of the group must be buildable by it."""
        arch_rules.check_archs(self.group, self.cuda_archs, cuda_version)
        if _cuda_tuple(cuda_version) < COMPRESS_MODE_MIN_CUDA and self.fatbin_compression() != "none":
            print(
                f"release: nvcc {cuda_version} has no --compress-mode; fatbin compression is none "
                f"(--fatbin-compression {self.fatbin_compression()} is unused)",
                flush=True,
            )

    def torch_abi(self) -> str:
        """``exact`` or ``stable`` (FLASH_ATTN_TORCH_ABI, default the manifest's)."""
        return self.passthrough.get("FLASH_ATTN_TORCH_ABI", DEFAULTS["FLASH_ATTN_TORCH_ABI"])

    def validate_torch(self, torch_version: str) -> None:
        """A stable-ABI build needs a torch >= the minimum it serves (its headers declare that stable ABI);
        ReleaseError naming the torch to use otherwise. Exact builds take any torch."""
        from packaging.version import InvalidVersion, Version

        if self.stable_torch_min() is None:
            return
        try:
            older = Version(torch_version).release < Version(TORCH_MIN).release
        except InvalidVersion:
            older = True
        if older:
            raise ReleaseError(
                f"--torch-abi stable builds the wheel for every torch >= {TORCH_MIN}, which needs a torch >= "
                f"{TORCH_MIN} to build against; found torch {torch_version}. Pass --torch-version {TORCH_MIN}.0 "
                "(or newer), or build the per-torch wheel of this torch with --torch-abi exact."
            )

    def stable_torch_min(self) -> str | None:
        """The minimum torch of a stable-ABI build (the manifest's ``stable_abi.torch_min``), None for exact."""
        return TORCH_MIN if self.torch_abi() == "stable" else None

    def fatbin_compression(self) -> str:
        return self.passthrough.get("FLASH_ATTN_FATBIN_COMPRESSION", DEFAULTS["FLASH_ATTN_FATBIN_COMPRESSION"])

    def cmake_defines(self) -> dict[str, str]:
        """The -D values of this build: every option of the table, defaults included, so a reused cache
        never keeps a stale value (the init cache scikit-build-core writes sets each one with FORCE)."""
        defines = dict(DEFAULTS)
        defines.update(
            {
                ARCH_GROUP: self.group,
                "FLASH_ATTN_CUDA_ARCHS": ";".join(map(str, self.cuda_archs)),
                "FLASH_ATTN_KERNEL_SET": self.kernel_set,
                "FLASH_ATTN_JOBS": str(self.jobs) if self.jobs else "",
            }
        )
        defines.update(self.passthrough)
        if self.kernels is not None:
            defines["FLASH_ATTN_KERNELS"] = str(self.kernels)
        # The launcher is passed on every configure too ("" = none), so a cache asked for once does
        # not stay in a reused build folder.
        launcher = "sccache" if self.cache == "sccache" else ""
        defines["CMAKE_CUDA_COMPILER_LAUNCHER"] = launcher
        defines["CMAKE_CXX_COMPILER_LAUNCHER"] = launcher
        return defines

    def expected_build_info(self, cuda_version: str | None = None) -> dict[str, object]:
        """What the build info of this build must say, as {dotted key: value} (see check_build_info):
        the value of every option with a ``build_info`` key in the table (bool as True/False, number as
        float), then what the build derives: the fatbin mode an older nvcc records as none, the upstream
        source, the stable minimum torch; the deltas' switches only when they are applied, the SMs for
        the custom group only. The kernel set is compared by check_build_info itself."""
        d = self.cmake_defines()
        expected: dict[str, object] = {}
        for name, entry in OPTIONS.items():
            if entry.get("build_info") and entry["build_info"] not in ("kernel_set", "archs", "upstream.source"):
                expected[entry["build_info"]] = _typed(name, d[name])
        if cuda_version and _cuda_tuple(cuda_version) < COMPRESS_MODE_MIN_CUDA:
            expected["fatbin_compression"] = "none"
        # A local tree is recorded by its absolute path (CMake's file(REAL_PATH), forward slashes).
        tree = d["FLASH_ATTN_SOURCE_DIR"]
        source = Path(tree).resolve().as_posix() if tree else "sdist-file" if d["FLASH_ATTN_SDIST"] else "sdist"
        expected["upstream.source"] = source
        # the minimum torch a stable build serves is the manifest's (CMake reads the same entry)
        expected["torch_min"] = TORCH_MIN if d["FLASH_ATTN_TORCH_ABI"] == "stable" else None
        if not expected["deltas.applied"]:
            del expected["deltas.rescale_threshold"], expected["deltas.packed_fma"]
        if self.group == "custom":
            expected["archs"] = list(self.cuda_archs)
        return expected


def check_torch_version(version: str) -> None:
    """Refuse a ``--torch-version`` that is not a PEP 440 version (``2.14.1``, ``2.14.1+cu130``), before
    pip is asked to install ``torch==<it>``; ReleaseError (exit 2) saying what to pass instead. The
    syntax is packaging's (what pip itself parses)."""
    from packaging.version import InvalidVersion, Version

    try:
        Version(version)
    except InvalidVersion:
        raise ReleaseError(
            f"--torch-version {version!r} is not a version; pass a torch release such as "
            f"{TORCH_MIN}.0 (pip installs torch==<it> into the session)"
        ) from None


def _typed(name: str, value: str) -> object:
    """An option's CMake value as the build info records it: bool True/False, number float, else text."""
    kind = OPTIONS[name]["type"]
    return value == "ON" if kind == "bool" else float(value) if kind == "number" else value


def _info_labels() -> dict[str, str]:
    """Build info key -> the option(s) that set it, as the refusal names them (from the table's
    ``build_info``): ``FLASH_ATTN_SOURCE_DIR / FLASH_ATTN_SDIST (--source-dir / --sdist)``."""
    names: dict[str, list[str]] = {}
    for name, entry in OPTIONS.items():
        if entry.get("build_info"):
            names.setdefault(entry["build_info"], []).append(name)
    labels = {}
    for key, group in names.items():
        flags = [OPTIONS[n]["flag"] for n in group if OPTIONS[n].get("flag")]
        labels[key] = " / ".join(group) + (f" ({' / '.join(flags)})" if flags else "")
    labels["torch_min"] = "stable_abi.torch_min of build-manifest.json (FLASH_ATTN_TORCH_ABI=stable)"
    return labels


# Which option sets each checked build info key (named in the refusal).
_INFO_OPTION = _info_labels()


# What a build info without the key means (written before the key existed): a binding on torch's C++ API.
_ABSENT_MEANS: dict[str, object] = {"torch_abi": "exact"}


def _cuda_tuple(version: str) -> tuple[int, int]:
    parts = [int(x) for x in re.findall(r"\d+", version)[:2]]
    return (parts + [0, 0])[0], (parts + [0, 0])[1]


def check_build_info(info: dict, expected: dict[str, object], kernel_set: str, build_dir: Path) -> None:
    """Refuse a built wheel whose build info disagrees with the options asked for.

    `expected` maps dotted keys of the build info (``deltas.applied``) to values
    (BuildOptions.expected_build_info); the kernel set must match by name ("custom" for a list).
    Raises ReleaseError naming each option whose value did not reach the build.
    """
    problems = []
    for key, want in expected.items():
        got: object = info
        for part in key.split("."):
            got = got.get(part) if isinstance(got, dict) else None
        if got is None:
            got = _ABSENT_MEANS.get(key)
        if isinstance(want, float):
            ok = isinstance(got, (int, float)) and float(got) == want
        else:
            ok = got == want
        if not ok:
            problems.append(f"{_INFO_OPTION.get(key, key)}: asked {want!r}, the build info says {got!r}")
    set_name = kernel_sets.resolve(kernel_set)[0]
    if info.get("kernel_set") != set_name:
        problems.append(f"{_INFO_OPTION['kernel_set']}: asked {set_name!r}, built {info.get('kernel_set')!r}")
    if problems:
        raise ReleaseError(
            "the built wheel does not match the options asked for, so it was not tagged:\n  "
            + "\n  ".join(problems)
            + f"\nRemove the build folder {build_dir} and build again."
        )


def check_inputs(passthrough: Mapping[str, str]) -> None:
    """--sdist must be the pinned sdist file, --source-dir and --cutlass-dir existing folders."""
    sdist = passthrough.get("FLASH_ATTN_SDIST")
    if sdist:
        path = Path(sdist)
        version, want = manifest.upstream_pin()
        if not path.is_file():
            what = "a folder" if path.is_dir() else "not there"
            raise ReleaseError(
                f"--sdist {path} is {what}; pass the file flash_attn-{version}.tar.gz, or leave --sdist out and the "
                "build downloads the pinned sdist with pip."
            )
        found = checksums.sha256_file(path)
        if found != want:
            raise ReleaseError(
                f"--sdist {path} is not the pinned sdist flash-attn=={version}: its sha256 is {found}, expected "
                f"{want}. Get the right file with `FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE pip download --no-deps "
                f"--no-binary :all: --no-build-isolation flash-attn=={version}` (with torch installed), or leave "
                "--sdist out and the build downloads it. A tree of another "
                "version builds with --source-dir."
            )
    for name, flag in (("FLASH_ATTN_SOURCE_DIR", "--source-dir"), ("FLASH_ATTN_CUTLASS_DIR", "--cutlass-dir")):
        value = passthrough.get(name)
        if value and not Path(value).is_dir():
            what = "a file" if Path(value).exists() else "not there"
            raise ReleaseError(f"{flag} {value} ({name}) is {what}; pass an existing folder, or leave it out.")
    source = passthrough.get("FLASH_ATTN_SOURCE_DIR")
    if source and not (Path(source) / "csrc" / "flash_attn" / "src" / "flash.h").is_file():
        raise ReleaseError(
            f"--source-dir {source} has no csrc/flash_attn/src/flash.h; expected the root of an upstream "
            "FlashAttention-2 source tree (the folder that holds setup.py and csrc/)."
        )


def check_writable(folder: Path, flag: str = "--out", what: str = "output folder") -> None:
    """Refuse a folder this process cannot write (probe file created and deleted), or a path that is
    a file where a folder is expected. `flag` and `what` name it in the message.

    When the folder does not exist yet, its nearest existing parent is probed, so the check
    creates nothing that stays behind.
    """
    target = Path(folder)
    while not target.exists() and target.parent != target:
        target = target.parent
    if not target.is_dir():
        raise ReleaseError(f"{what} {folder}: {target} is not a folder; pass another {flag}")
    probe = target / f".flash_attn-write-probe-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise ReleaseError(
            f"{what} {folder} is not writable ({e.strerror}: {target}); pass another {flag} or fix its "
            "permissions. Nothing was built."
        ) from None


def check_build_root(build_root: Path) -> None:
    """The build root must be a writable folder (or creatable), with an ASCII path on Windows."""
    check_writable(build_root, "--build-root", "build root")
    if os.name == "nt" and not str(build_root).isascii():
        raise ReleaseError(
            f"--build-root {build_root} has non-ASCII characters; on Windows the build is tested with ASCII paths "
            r"only (MSVC and nvcc read paths in the console's code page). Pass an ASCII path such as C:\b."
        )


def check_sdist_cache(env: Mapping[str, str] | None = None) -> None:
    """When the pinned sdist is not in the download cache yet, the cache folder must be writable (else
    the build would fail later with what looks like a download failure)."""
    folder = sdist_cache_dir(env)
    version, _ = manifest.upstream_pin()
    if not (folder / f"flash_attn-{version}.tar.gz").is_file():
        check_writable(folder, CACHE_DIR_ENV, "sdist download cache")


CACHE_DIR_ENV = "FLASH_ATTN_CACHE_DIR"  # the per-user cache folder (sdist download, build speed records)


def sdist_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the build keeps the downloaded sdist, and the per-user cache of release.compile.estimate:
    $FLASH_ATTN_CACHE_DIR, else %LOCALAPPDATA%/flash_attn_wheels on Windows, else
    $XDG_CACHE_HOME/flash_attn_wheels or ~/.cache/flash_attn_wheels. The Python owner of the rule: the
    sessions pass its result to CMake as $FLASH_ATTN_CACHE_DIR (release.compile.builder.build_env);
    cmake/FlashAttnUpstream.cmake (flash_attn_cache_dir) repeats it for a plain ``pip install .``."""
    env = os.environ if env is None else env
    if env.get(CACHE_DIR_ENV):
        return Path(env[CACHE_DIR_ENV])
    if os.name == "nt" and env.get("LOCALAPPDATA"):
        return Path(env["LOCALAPPDATA"]) / "flash_attn_wheels"
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "flash_attn_wheels"
    return Path.home() / ".cache" / "flash_attn_wheels"


def check_out_dir(out_dir: Path, version: str) -> None:
    """Refuse an output folder that holds flash_attn wheels of another (public) version."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import Version

    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise ReleaseError(f"output folder {out_dir} exists and is not a folder; pass another --out")
    ours = Version(version).public
    for whl in sorted(out_dir.glob("*.whl")):
        try:
            name, ver, _, _ = parse_wheel_filename(whl.name)
        except InvalidWheelFilename:
            continue
        if name == "flash-attn" and ver.public != ours:
            raise ReleaseError(
                f"output folder {out_dir} already holds {whl.name} (version {ver.public}); this build makes "
                f"{ours}. Move the old wheels away or pass another --out, so a release folder holds one version."
            )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The wheel sessions' flags: one per option of the table with a flag (help from its doc; the
    arch group and the shard are the entry point's), then the session-only ones."""
    for name, entry in OPTIONS.items():
        if entry.get("flag") and name not in _ENTRY_POINT_FLAGS:
            kind = int if entry["type"] == "integer" else None
            p.add_argument(entry["flag"], dest=_dest(name), type=kind, help=help_text(name))
    p.add_argument("--torch-version", help="torch to build against; installed into the session if it differs")
    p.add_argument("--out", type=Path, help="output folder of the tagged wheel (default wheelhouse/)")
    p.add_argument("--build-root", type=Path, help="parent of the keyed build directories (default build/)")
    p.add_argument(
        "--cache", choices=CACHES, help="compile cache in front of nvcc and the C++ compiler (FLASH_ATTN_CACHE)"
    )
    p.add_argument("--no-smoke", dest="smoke", action="store_false", help="skip the smoke test (not for releases)")
    p.add_argument(
        "--smoke-no-deps", dest="smoke_deps", action="store_false", help="smoke test: pip install --no-deps (offline)"
    )
    p.add_argument("-v", "--verbose", action="store_true", help="show every line of the build output")


def from_namespace(ns: argparse.Namespace, env: Mapping[str, str] | None = None) -> BuildOptions:
    """BuildOptions from parsed flags; unset flags fall back to the environment variables (:func:`pick`)."""
    env = os.environ if env is None else env

    for dest in ("kernel_set", "cuda_archs", "torch_version", "kernels", "cache", *(d for d, _, _ in PASS_THROUGH)):
        value = getattr(ns, dest, None)
        if isinstance(value, str) and not value.strip():
            raise empty_flag("--" + dest.replace("_", "-"))

    archs_text = pick(ns.cuda_archs, "FLASH_ATTN_CUDA_ARCHS", env)
    jobs_text = pick(ns.jobs, "FLASH_ATTN_JOBS", env)
    if jobs_text is not None:
        check_value("FLASH_ATTN_JOBS", jobs_text)
    jobs = int(jobs_text) if jobs_text is not None else None
    passthrough = {}
    for dest, name, _ in PASS_THROUGH:
        value = pick(getattr(ns, dest), name, env)
        if value is None:
            continue
        if OPTIONS[name]["type"] == "bool":
            value = _on_off(value, name)
        elif OPTIONS[name]["type"] == "path":
            value = str(Path(value).expanduser().resolve())
        passthrough[name] = value
    kernels = pick(ns.kernels, "FLASH_ATTN_KERNELS", env)
    return BuildOptions(
        kernels=Path(kernels).expanduser().resolve() if kernels else None,
        cache=pick(ns.cache, "FLASH_ATTN_CACHE", env) or "none",
        group=ns.group,
        kernel_set=pick(ns.kernel_set, "FLASH_ATTN_KERNEL_SET", env) or DEFAULT_KERNEL_SET,
        cuda_archs=parse_archs(archs_text) if archs_text else [],
        torch_version=ns.torch_version,
        out_dir=(ns.out or _paths.DEFAULT_WHEELHOUSE).resolve(),
        build_root=(ns.build_root or _paths.DEFAULT_BUILD_ROOT).resolve(),
        jobs=jobs,
        passthrough=passthrough,
        smoke=ns.smoke,
        smoke_deps=ns.smoke_deps,
        verbose=ns.verbose,
    )
