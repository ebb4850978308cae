"""The release build matrix: every supported (OS, arch group, CUDA toolkit, torch) combination.

This module turns the manifest's ``release_matrix`` (build-manifest.json) into the job lists of
the release workflow. ``nox -s matrix`` prints one as the JSON a GitHub Actions
``strategy.matrix`` reads (``{"include": [...]}``); ``.github/workflows/release.yml`` feeds each
to its jobs with ``fromJSON``. ``--stage`` picks the list:

- ``link`` (the default): one entry per wheel: the link-and-package job that builds the binding
  against the gathered kernels of its (OS, CUDA, group), tags, smoke-tests and checksums the wheel.
  Its ``wheel`` fields are what SHA256SUMS must cover (release.ship.gates). With ``--torch-abi stable``
  (the default: ``release_matrix.torch_abi`` of the manifest) each (OS, group, CUDA) gets ONE
  stable-ABI wheel for every torch of the table >=
  ``stable_abi.torch_min`` (built against the oldest of them that has that CUDA build; the entry's
  ``torches`` lists the torches it serves), and a per-torch wheel for each torch below the minimum
  (none today); ``--torch-abi exact`` gives one per-torch wheel per (OS, group, CUDA, torch).
- ``shards``: one entry per (OS, CUDA, group) and shard ``K/N``: the torch-free job that compiles
  that slice of the kernel set (``nox -s archive_<group> -- --shard K/N``); N is the shard count
  of release.compile.compile_model (every shard job predicted within the job limit on a hosted runner).
- ``gather``: one entry per (OS, CUDA, group): the job that checks its N shard archives and writes
  the kernels archive the link jobs download (``nox -s archive_gather``).

``python -m release.plan.matrix [--stage link|shards|gather] [--torch-abi stable|exact] [--os OS] [--group G]
[--cuda X.Y] [--torch V] [--kernel-set S] [--runner OS=LABEL] [--output FILE] [--format json|table]``

Filters take one value, a comma-separated list, or may be repeated; an empty value means "all"
(so a workflow can pass its optional inputs through unchanged). ``--torch 2.14`` matches every
2.14.x in the table (and the stable-ABI wheel that serves it). An unknown value is an error that
lists the valid ones; filters that leave no combination are an error that says which combinations
exist.

The table itself (runner images, CUDA toolkits, torch releases and the CUDA builds of each, with
the facts behind it) is ``release_matrix`` in build-manifest.json; the released arch groups are
its ``arch_groups`` marked ``released``, the kernel sets its ``kernels.sets``.

The local version label is ``cu<XY>torch<torch>cxx11abi<true|false>.<group>`` for a per-torch
wheel and ``cu<XY>torchstable<torch_min>.<group>`` for a stable-ABI one (plus
``.<kernel set>`` for any set but ``release``), spelled by
src/flash_attn_wheel_names/label.py, the definition :func:`release.compile.tagging.local_label` uses on a wheel's build
info too. ``cxx11abi`` is what torch reports as ``torch._C._GLIBCXX_USE_CXX11_ABI``: true for the
Linux builds of these torch versions (libstdc++ new ABI only since torch 2.7), and true on Windows
too: MSVC has no such ABI switch, but torch reports the flag as set on every platform
(``torch.compiled_with_cxx11_abi()`` is ``return True`` in torch 2.14.1). The label's CUDA is the
toolkit's major and minor (nvcc's version in the build info), which the workflow matches to the
torch build it installs.

Linux wheels are built in PyTorch's manylinux_2_28 CUDA builder image (``container``: AlmaLinux 8,
glibc 2.28, the toolkit preinstalled under /usr/local/cuda-<X.Y>), checked with ``auditwheel
show`` and tagged ``manylinux_2_28_x86_64`` (``release.ship.manylinux``); the job runs on an
ubuntu-24.04 host. torch's own Linux wheels are manylinux_2_28 too, so the wheel runs wherever
torch does.

Stdlib only: ``nox -s matrix`` runs without installing anything.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from flash_attn_wheel_names import label as wheel_label
from release import _paths, manifest
from release.compile import compile_model
from release.errors import ReleaseError, run_main

_MANIFEST = manifest.load()
_MATRIX = _MANIFEST["release_matrix"]
PYTHON = _MATRIX["python"]  # interpreter of the build jobs; the wheel is cp310-abi3 whatever runs the build
WHEEL_PYTHON_TAG = "cp310-abi3"  # pyproject.toml: wheel.py-api = "cp310"
TORCH_INDEX = _MATRIX["torch_index"]


@dataclass(frozen=True)
class OsInfo:
    platform_tag: str  # the wheel's platform tag
    cxx11_abi: bool  # torch._C._GLIBCXX_USE_CXX11_ABI of the torch builds on this OS
    short: str  # used in job and artifact names
    image: str = ""  # container image of the build job ("" runs on the runner itself)
    manylinux: str = ""  # the policy `auditwheel show` must accept ("" on Windows)


# GitHub-hosted runner images the release is built on.
OSES: dict[str, OsInfo] = {name: OsInfo(**info) for name, info in _MATRIX["oses"].items()}
# `custom` is a local-build group, never released
GROUPS = tuple(name for name, g in manifest.arch_groups(_MANIFEST).items() if g["released"])
# CUDA toolkit minor -> exact toolkit the build job installs.
CUDA: dict[str, str] = dict(_MATRIX["cuda"])
# torch release -> CUDA builds of it that this project releases wheels for (manifest: torch_source).
TORCH: dict[str, tuple[str, ...]] = {torch: tuple(cudas) for torch, cudas in _MATRIX["torch"].items()}
KERNEL_SETS = tuple(_MANIFEST["kernels"]["sets"])
STAGES = ("link", "shards", "gather")  # the release workflow's job lists, in the order they run
# The minimum torch of a stable-ABI wheel (stable_abi.torch_min of the manifest; CMake reads the same entry).
TORCH_MIN = _MANIFEST["stable_abi"]["torch_min"]
# The wheels a release builds and their kernel set (release_matrix.torch_abi and .kernel_set of the
# manifest): the defaults of --torch-abi and --kernel-set here and in release.plan.plan. The choices of
# --torch-abi are flash_attn_wheel_names.label.TORCH_ABIS (the build info's values).
RELEASE_TORCH_ABI = _MATRIX["torch_abi"]
RELEASE_KERNEL_SET = _MATRIX["kernel_set"]


class MatrixError(ReleaseError, ValueError):
    """A filter or option the matrix cannot satisfy; the message says what is valid (exit 2)."""


def cu_tag(cuda: str) -> str:
    """The CUDA part of a PyTorch index and label: 13.0 -> cu130."""
    return wheel_label.cuda_tag(cuda)


def local_label(cuda: str, torch: str, cxx11_abi: bool, group: str, kernel_set: str, torch_abi: str) -> str:
    """The local version label a wheel of this combination gets (src/flash_attn_wheel_names/label.py spells it); a
    stable-ABI label names TORCH_MIN instead of `torch` and the C++11 ABI flag."""
    torch_min = TORCH_MIN if torch_abi == wheel_label.TORCH_ABI_STABLE else None
    return wheel_label.local_label(cuda, torch, cxx11_abi, group, kernel_set, torch_abi=torch_abi, torch_min=torch_min)


def release_tuple(version: str) -> tuple[int, ...]:
    """ "2.14.1" -> (2, 14, 1), "2.11" -> (2, 11): the numeric release of a table version."""
    return tuple(int(x) for x in version.split("."))


def stable_serves(torch: str, torch_min: str = TORCH_MIN) -> bool:
    """True when a stable-ABI wheel for torch >= `torch_min` serves torch release `torch` (2.11.0 >= 2.11)."""
    return release_tuple(torch) >= release_tuple(torch_min)


@dataclass(frozen=True)
class Wheel:
    """One wheel of the release: built against `torch` with binding `torch_abi`; serves `torches`."""

    os: str
    group: str
    cuda: str
    torch: str  # the torch the link job installs and builds against
    torch_abi: str  # "exact" or "stable"
    torches: tuple[str, ...]  # the torch releases of the table it serves ((torch,) for an exact wheel)


def release_wheels(
    torch_abi: str | None = None, table: dict[str, tuple[str, ...]] | None = None, torch_min: str = TORCH_MIN
) -> list[Wheel]:
    """Every wheel of the release for `table` (torch -> its CUDA builds; default the manifest's TORCH) and
    `torch_abi` (default RELEASE_TORCH_ABI).

    ``exact``: one per (OS, group, CUDA, torch). ``stable``: per (OS, group, CUDA) one stable-ABI wheel
    serving every torch >= `torch_min` with that CUDA build, built against the oldest of them, plus one
    exact wheel per torch below `torch_min` (their per-torch wheels stay).
    """
    table = TORCH if table is None else table
    torch_abi = torch_abi or RELEASE_TORCH_ABI
    out = []
    for os_name in OSES:
        for group in GROUPS:
            if torch_abi == wheel_label.TORCH_ABI_EXACT:
                out += [
                    Wheel(os_name, group, cuda, torch, wheel_label.TORCH_ABI_EXACT, (torch,))
                    for torch, cudas in table.items()
                    for cuda in cudas
                ]
                continue
            for cuda in CUDA:
                served = sorted((t for t, cudas in table.items() if cuda in cudas), key=release_tuple)
                out += [
                    Wheel(os_name, group, cuda, t, wheel_label.TORCH_ABI_EXACT, (t,))
                    for t in served
                    if not stable_serves(t, torch_min)
                ]
                stable = tuple(t for t in served if stable_serves(t, torch_min))
                if stable:
                    out.append(Wheel(os_name, group, cuda, stable[0], wheel_label.TORCH_ABI_STABLE, stable))
    return out


def wheel_name(version: str, label: str, platform_tag: str) -> str:
    """flash_attn-<version>+<label>-cp310-abi3-<platform>.whl (version without its own label)."""
    return f"flash_attn-{version.split('+')[0]}+{label}-{WHEEL_PYTHON_TAG}-{platform_tag}.whl"


def kernels_build(os_name: str, cuda: str, group: str) -> str:
    """Name of the kernels build of one (OS, CUDA, group), e.g. legacy-cu130-linux: every torch of that
    CUDA links against it; shard, gather and artifact names start with it."""
    return f"{group}-{cu_tag(cuda)}-{OSES[os_name].short}"


def combinations() -> list[tuple[str, str, str, str]]:
    """Every supported (os, group, cuda, torch), in a stable order."""
    return [
        (os_name, group, cuda, torch)
        for os_name in OSES
        for group in GROUPS
        for torch, cudas in TORCH.items()
        for cuda in cudas
    ]


def entry(
    os_name: str,
    group: str,
    cuda: str,
    torch: str,
    kernel_set: str = RELEASE_KERNEL_SET,
    version: str | None = None,
    runner: str | None = None,
    *,
    torch_abi: str,
    torches: Iterable[str] | None = None,
) -> dict:
    """One matrix entry: what a build job needs, and the wheel it must produce.

    `torch` is the torch the job builds against with binding `torch_abi` (a :class:`Wheel`'s: no
    default, an entry is one wheel); a stable-ABI entry (`torch_abi` "stable") serves
    `torches` (default: `torch` alone), all >= TORCH_MIN, and passes ``--torch-abi stable``.
    """
    info = OSES[os_name]
    version = version or _paths.package_version()
    label = local_label(cuda, torch, info.cxx11_abi, group, kernel_set, torch_abi)
    session = f"wheel_{group}"
    if torch_abi == wheel_label.TORCH_ABI_STABLE:
        name = f"{group}-{cu_tag(cuda)}-torchstable{TORCH_MIN}-{info.short}"
    else:
        name = f"{group}-{cu_tag(cuda)}-torch{torch}-{info.short}"
    # --torch-abi always: the wheel must be the one this entry names, whatever the session's default
    # (options.FLASH_ATTN_TORCH_ABI.default of the manifest) is.
    args = ["--torch-version", torch, "--torch-abi", torch_abi, "--kernel-set", kernel_set]
    return {
        "name": name,
        "os": os_name,
        "runner": runner or os_name,
        "group": group,
        "archs": list(manifest.arch_groups(_MANIFEST)[group]["sms"]),
        "ptx_arch": manifest.arch_groups(_MANIFEST)[group]["ptx"],
        "cuda": cuda,
        "cuda_full": CUDA[cuda],
        "cu": cu_tag(cuda),
        "torch": torch,
        "torch_abi": torch_abi,
        "torches": list(torches) if torches is not None else [torch],
        # the newest torch it serves: the link job smoke-tests a stable-ABI wheel under it too
        "torch_newest": max(torches, key=release_tuple) if torches else torch,
        "torch_min": TORCH_MIN if torch_abi == wheel_label.TORCH_ABI_STABLE else None,
        "torch_index": TORCH_INDEX.format(cu=cu_tag(cuda)),
        "python": PYTHON,
        "kernel_set": kernel_set,
        "session": session,
        "args": args,
        "command": " ".join(["nox", "-s", session, "--", *args]),
        "cxx11_abi": info.cxx11_abi,
        "container": info.image.format(cuda=cuda),
        "manylinux": info.manylinux,
        "label": label,
        "wheel": wheel_name(version, label, info.platform_tag),
        "kernels_artifact": f"kernels-{kernels_build(os_name, cuda, group)}",
    }


def _kernels_common(link: dict) -> dict:
    """The fields a shard or gather entry shares with the link entries of its (OS, CUDA, group)."""
    keys = ("os", "runner", "group", "archs", "ptx_arch", "cuda", "cuda_full", "cu", "python", "kernel_set")
    return {k: link[k] for k in keys} | {
        "container": link["container"],
        "build": kernels_build(link["os"], link["cuda"], link["group"]),
    }


def shard_entries(links: list[dict]) -> list[dict]:
    """The shard jobs of the (OS, CUDA, group) of `links`: N per build (release.compile.compile_model.shard_count)."""
    out = []
    for link in {kernels_build(e["os"], e["cuda"], e["group"]): e for e in links}.values():
        common = _kernels_common(link)
        n = compile_model.shard_count(link["os"], link["group"], link["kernel_set"])
        for k in range(1, n + 1):
            session = f"archive_{link['group']}"
            args = ["--kernel-set", link["kernel_set"], "--shard", f"{k}/{n}", "--cache", "sccache"]
            out.append(
                {"name": f"kernels-{common['build']}-{k}of{n}"}
                | common
                | {
                    "shard": f"{k}/{n}",
                    "shards": n,
                    "session": session,
                    "args": args,
                    "command": " ".join(["nox", "-s", session, "--", *args]),
                    "artifact": f"kernels-{common['build']}-shard{k}of{n}",
                }
            )
    return out


def gather_entries(links: list[dict]) -> list[dict]:
    """The gather job of each (OS, CUDA, group) of `links`: checks its shard archives, writes one."""
    out = []
    for link in {kernels_build(e["os"], e["cuda"], e["group"]): e for e in links}.values():
        common = _kernels_common(link)
        del common["container"]  # no compiler needed: the job runs on the runner itself
        # a file merge: Linux whatever OS the archives are for (release.yml runs gather on ubuntu-24.04)
        common["runner"] = compile_model.GATHER_OS
        n = compile_model.shard_count(link["os"], link["group"], link["kernel_set"])
        out.append(
            {"name": f"gather-{common['build']}"}
            | common
            | {
                "shards": n,
                "shard_pattern": f"kernels-{common['build']}-shard*",
                "session": "archive_gather",
                "command": "nox -s archive_gather -- <the shard archives> --out kernels-gathered",
                "artifact": link["kernels_artifact"],
            }
        )
    return out


def _values(raw: Iterable[str] | None) -> list[str]:
    """Flatten repeated / comma-separated filter values; empty strings mean no filter."""
    out: list[str] = []
    for item in raw or []:
        out += [v.strip() for v in item.split(",") if v.strip()]
    return out


def _check(kind: str, given: list[str], valid: Iterable[str], matches=lambda g, v: g == v) -> None:
    valid = list(valid)
    bad = [g for g in given if not any(matches(g, v) for v in valid)]
    if bad:
        raise MatrixError(f"unknown {kind} {', '.join(repr(b) for b in bad)}. Valid values: {', '.join(valid)}.")


def _torch_matches(given: str, torch: str) -> bool:
    """A torch filter: 2.14 matches 2.14.1; 2.14.1 matches only itself."""
    return torch == given or torch.startswith(given + ".")


def _parse_runners(raw: Iterable[str] | None) -> dict[str, str]:
    runners = {}
    for item in _values(raw):
        os_name, sep, label = item.partition("=")
        if not sep or not label.strip():
            raise MatrixError(f"--runner {item!r}: write it as OS=LABEL, e.g. --runner ubuntu-24.04=my-16-core-runner")
        _check("--runner OS", [os_name.strip()], OSES)
        runners[os_name.strip()] = label.strip()
    return runners


def build_matrix(
    oses: Iterable[str] | None = None,
    groups: Iterable[str] | None = None,
    cudas: Iterable[str] | None = None,
    torches: Iterable[str] | None = None,
    kernel_set: str | None = None,
    runners: Iterable[str] | None = None,
    version: str | None = None,
    stage: str = "link",
    torch_abi: str | None = None,
) -> dict:
    """{"include": [entry, ...]} of the wheels the filters select (all when none is given).

    `stage` is one of STAGES: the link entries (one per wheel), or the shard or gather jobs of the
    (OS, CUDA, group) those link entries need. `torch_abi` (one of flash_attn_wheel_names.label.TORCH_ABIS;
    default RELEASE_TORCH_ABI) picks the wheels (:func:`release_wheels`): stable-ABI wheels where they
    apply, or per-torch wheels only. `kernel_set` defaults to RELEASE_KERNEL_SET. A torch filter selects
    the wheels that serve a matching torch.
    """
    torch_abi = torch_abi or RELEASE_TORCH_ABI
    kernel_set = kernel_set or RELEASE_KERNEL_SET
    if stage not in STAGES:
        raise MatrixError(f"unknown --stage {stage!r}. Valid values: {', '.join(STAGES)}.")
    if torch_abi not in wheel_label.TORCH_ABIS:
        raise MatrixError(f"unknown --torch-abi {torch_abi!r}. Valid values: {', '.join(wheel_label.TORCH_ABIS)}.")
    oses, groups, cudas, torches = _values(oses), _values(groups), _values(cudas), _values(torches)
    _check("--os", oses, OSES)
    _check("--group", groups, GROUPS)
    _check("--cuda", cudas, CUDA)
    _check("--torch", torches, TORCH, _torch_matches)
    if kernel_set not in KERNEL_SETS:
        raise MatrixError(f"unknown --kernel-set {kernel_set!r}. Valid values: {', '.join(KERNEL_SETS)}.")
    runner_of = _parse_runners(runners)
    version = version or _paths.package_version()
    selected = [
        w
        for w in release_wheels(torch_abi)
        if (not oses or w.os in oses)
        and (not groups or w.group in groups)
        and (not cudas or w.cuda in cudas)
        and (not torches or any(_torch_matches(x, t) for x in torches for t in w.torches))
    ]
    if not selected:
        pairs = "; ".join(f"torch {t}: CUDA {', '.join(c)}" for t, c in TORCH.items())
        raise MatrixError(
            f"no supported combination matches --cuda {','.join(cudas) or '(any)'} --torch "
            f"{','.join(torches) or '(any)'}. Supported torch x CUDA: {pairs}."
        )
    links = [
        entry(
            w.os,
            w.group,
            w.cuda,
            w.torch,
            kernel_set=kernel_set,
            version=version,
            runner=runner_of.get(w.os),
            torch_abi=w.torch_abi,
            torches=w.torches,
        )
        for w in selected
    ]
    if stage == "shards":
        return {"include": shard_entries(links)}
    if stage == "gather":
        return {"include": gather_entries(links)}
    return {"include": links}


def format_table(matrix: dict) -> str:
    rows = [("name", "runs on", "session", "wheel / artifact")]
    rows += [(e["name"], e["runner"], e["command"], e.get("wheel") or e["artifact"]) for e in matrix["include"]]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m release.plan.matrix", description=__doc__.split("\n")[0])
    p.add_argument("--stage", default="link", help=f"job list: {', '.join(STAGES)} (default link: one per wheel)")
    p.add_argument(
        "--torch-abi",
        default=RELEASE_TORCH_ABI,
        help=f"stable (one stable-ABI wheel per (OS, CUDA, group) for torch >= {TORCH_MIN}, per-torch wheels "
        f"below it) or exact (a per-torch wheel for every torch); default {RELEASE_TORCH_ABI} "
        "(release_matrix.torch_abi of the manifest)",
    )
    p.add_argument("--os", action="append", help=f"runner image(s): {', '.join(OSES)}")
    p.add_argument("--group", action="append", help=f"arch group(s): {', '.join(GROUPS)}")
    p.add_argument("--cuda", action="append", help=f"CUDA toolkit(s): {', '.join(CUDA)}")
    p.add_argument("--torch", action="append", help=f"torch version(s) or minors: {', '.join(TORCH)}")
    p.add_argument(
        "--kernel-set",
        default=RELEASE_KERNEL_SET,
        help=f"kernel set of every entry: {', '.join(KERNEL_SETS)} "
        f"(default {RELEASE_KERNEL_SET}: release_matrix.kernel_set)",
    )
    p.add_argument(
        "--runner", action="append", help="OS=LABEL: run that OS's jobs on another runner label (larger runners)"
    )
    p.add_argument("--output", type=Path, help="write the JSON to this file instead of standard output")
    p.add_argument("--format", choices=("json", "table"), default="json", help="json (for workflows) or table")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        # MatrixError, and release.compile.compile_model's PlanError (a job over the limit), are ReleaseErrors: exit 2
        matrix = build_matrix(
            args.os,
            args.group,
            args.cuda,
            args.torch,
            args.kernel_set,
            args.runner,
            stage=args.stage,
            torch_abi=args.torch_abi,
        )
        text = format_table(matrix) if args.format == "table" else json.dumps(matrix, separators=(",", ":")) + "\n"
        if args.output:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            args.output.write_text(text, encoding="utf-8")
            print(f"release: {len(matrix['include'])} matrix entries written to {args.output}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return 0

    return run_main(body, prog="release.plan.matrix")


if __name__ == "__main__":
    sys.exit(main())
