"""Kernels archives: the torch-free kernel objects of one (OS, CUDA, arch group, kernel set).

They are built once, optionally in shards on several machines, and linked into the wheel of every torch.

``python -m release.archive.archives build --arch-group legacy [--shard K/N] [--out DIR] [build options]``
(``nox -s archive_legacy -- ...``) compiles the kernel set, or the K-th of N shards of it
(``kernel_set.split_shards``: balanced by the predicted compile seconds of each unit, longest
first), in a CMake build with ``FLASH_ATTN_KERNELS_ONLY=ON`` (no torch is looked for), and packs
the objects into an archive folder under DIR:

    kernels-<group>-<set>-<key12>[-shard<K>of<N>]/
        kernels-manifest.json        format, archive key, build key and the fields it covers, the
                                     name tokens, the kernel set and its units, the shard, every
                                     object with its unit and sha256, and the toolchain that
                                     compiled them
        objects/<unit>.o             one per unit (``dispatch.o`` in the whole set and in shard 1)

The archive key covers the build key, the name tokens, the shard and every object's path and
sha256, and the folder's name is derived from it: release.archive.integrity owns that rule and
checks it (and each object's SASS, read from its fatbin) on every read.

``python -m release.archive.archives gather DIR... [--out DIR]`` (``nox -s archive_gather``) verifies every
shard (release.archive.integrity.verify), checks that they share one build key, come from one
split (same N, every index once) and cover the kernel set exactly once, and writes the whole-set
archive that ``nox -s wheel_<group> -- --kernels DIR`` links (cmake/FlashAttnKernels.cmake runs
the same verifier again, with its own configuration's build key, before anything compiles).

Every step exits 2 with a message that names the offending shard or file, and writes its archive
under a temporary name that is renamed only when complete.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kernels import kernel_set as kernel_sets
from release import _paths, checksums, locks, outputs, pins
from release.archive import integrity
from release.compile import build_dirs, builder, compile_cache, estimate, options, prepare, progress, toolchain
from release.errors import ReleaseError, run_main

MANIFEST_NAME = integrity.MANIFEST_NAME
EXPORT_NAME = "kernels_export.json"  # written by cmake/FlashAttnKernels.cmake at generate time
FORMAT = integrity.FORMAT
key_of = integrity.build_key  # the build key of a fields record (what CMake computes)
archive_name = integrity.archive_name


@dataclass
class Archive:
    """A kernels archive folder and its parsed manifest."""

    path: Path
    manifest: dict

    @property
    def key(self) -> str:
        """The archive key (content-addressed: covers the objects)."""
        return self.manifest["key"]

    @property
    def build_key(self) -> str:
        """The build key (what the objects were built from; shared by the shards of one split)."""
        return self.manifest["build_key"]

    @property
    def shard(self) -> dict | None:
        return self.manifest["kernels"].get("shard")

    @property
    def set_units(self) -> list[str]:
        return sorted(unit_names(self.manifest["kernels"]))

    @property
    def object_units(self) -> list[str]:
        return [o["unit"] for o in self.manifest["objects"]]


def unit_names(kernels_record: dict) -> list[str]:
    """Unit names of a generator record (kernels.json), as kernel_set.Unit names them."""
    unit = kernel_sets.Unit
    return [unit(k["kind"], k["dtype"], k["head_dim"], k["causal"]).name for k in kernels_record["kernels"]]


def object_unit(path: str) -> tuple[str, str]:
    """(unit, object file name) of a compiled object: ``.../kernels/units/fwd_hdim64_fp16.cu.o`` ->
    (fwd_hdim64_fp16, fwd_hdim64_fp16.o); an ``_align`` companion keeps its name and counts as its
    unit; ``.../kernels/dispatch.cu.o`` -> (dispatch, dispatch.o). Windows objects end in .obj."""
    name = Path(path).name
    stem, suffix = name.split(".cu.", 1) if ".cu." in name else (Path(name).stem, Path(name).suffix.lstrip("."))
    unit = stem[: -len("_align")] if stem.endswith("_align") else stem
    return unit, f"{stem}.{suffix}"


def load(path: Path) -> Archive:
    """Read and check an archive folder's manifest (release.archive.integrity.read: shape, keys, folder
    name); ReleaseError naming the folder when it is not a kernels archive or does not verify."""
    return Archive(Path(path), integrity.read(Path(path)))


def _is_archive(path: Path, whole: bool) -> bool:
    """True when `path` holds a kernels manifest, of a whole set when `whole` (else of a shard)."""
    try:
        manifest = json.loads((Path(path) / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(manifest, dict) or not isinstance(manifest.get("kernels"), dict):
        return False
    return manifest.get("format") in (1, FORMAT) and (manifest["kernels"].get("shard") is None) == whole


def verify_objects(archive: Archive) -> None:
    """Every object of the manifest is inside the folder with its sha256 and the SASS of the archive's
    arch, and the key recomputed from them is the recorded one (release.archive.integrity.verify);
    ReleaseError naming the archive and the first object that is not."""
    integrity.verify(archive.path, archive.manifest)


def _remove_stale_temps(dest_parent: Path, name: str) -> None:
    """Remove the temporary folders (``.<name>.*``, never the ``.<name>.lock`` file) that a killed
    earlier session left for `name`; called while holding the output's lock, so none is in use."""
    for p in Path(dest_parent).glob(f".{name}.*"):
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)


def _write_archive(dest_parent: Path, manifest: dict, sources: list[tuple[Path, str]], inputs: list[Path] = ()) -> Path:
    """Seal `manifest` (release.archive.integrity.seal: format, build key, archive key, folder name),
    copy the objects (source path, archive-relative file) and the manifest into dest_parent/<name>
    through a temporary folder that is verified and renamed at the end (release.outputs), holding
    the output's lock; a temporary folder of that name left by a killed session is removed first.

    An existing folder of that name is replaced only when it is a kernels archive of the same kind
    (whole set or shard), with a message; anything else, or a name that is or holds one of
    `inputs`, is refused with ReleaseError before anything is written.
    """
    manifest, name = integrity.seal(manifest)
    final = Path(dest_parent) / name
    for src in inputs:
        if outputs.inside(final, src) or outputs.inside(src, final):
            raise ReleaseError(
                f"the archive would be written to {final}, which is or holds the input {src}; pass another --out "
                "(outside the input folders)"
            )
    whole = manifest["kernels"].get("shard") is None
    with locks.hold_output(final):
        _remove_stale_temps(dest_parent, name)
        tmp = outputs.temp_dir(dest_parent, f".{name}.")
        try:
            (tmp / "objects").mkdir()
            for src, rel in sources:
                shutil.copyfile(src, tmp / rel)
            text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
            (tmp / MANIFEST_NAME).write_text(text, encoding="utf-8")
            integrity.verify(tmp, manifest)  # what is renamed into place is what a reader accepts
            if outputs.replace_dir(tmp, final, "kernels archive", lambda p: _is_archive(p, whole)):
                print(f"release: replaced the earlier kernels archive {final}", flush=True)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final


def pack(build_dir: Path, dest_parent: Path, group_token: str, set_token: str, tc: toolchain.Toolchain) -> Path:
    """Archive the kernel objects of a finished kernels-only build (its kernels_export.json)."""
    export = json.loads((Path(build_dir) / EXPORT_NAME).read_text(encoding="utf-8"))
    if integrity.build_key(export["fields"]) != export["key"]:
        raise ReleaseError(
            f"{Path(build_dir) / EXPORT_NAME}: CMake's build key {export['key'][:12]} is not the one computed here "
            f"from its fields ({integrity.build_key(export['fields'])[:12]}); flash_attn_kernel_key and "
            "release.archive.integrity.build_key disagree: a bug, report it"
        )
    objects, sources = [], []
    for path in export["objects"]:
        src = Path(path) if Path(path).is_absolute() else Path(build_dir) / path
        unit, file_name = object_unit(path)
        rel = f"objects/{file_name}"
        objects.append({"file": rel, "unit": unit, "sha256": checksums.sha256_file(src)})
        sources.append((src, rel))
    manifest = {
        "fields": export["fields"],
        "name": {"group": group_token, "set": set_token},
        "kernels": export["kernels"],
        "objects": sorted(objects, key=lambda o: o["file"]),
        "toolchain": {
            "nvcc": tc.cuda_version,
            "host_compiler": f"{tc.compiler_id} {tc.compiler_version}",
            "python": sys.version.split()[0],
        },
    }
    return _write_archive(Path(dest_parent), manifest, sources)


def cmake_executable() -> str:
    """The cmake on PATH (the sessions install the pinned one); ReleaseError when there is none."""
    found = shutil.which("cmake")
    if not found:
        tools = " ".join(pins.lookup(["cmake", "ninja"]))
        raise ReleaseError(f"no cmake on PATH; install the pinned one: python -m pip install {tools}")
    return found


def kernels_build_dir(opts: options.BuildOptions, tc: toolchain.Toolchain, shard: str) -> Path:
    """build/kernels-<group>-<set>-cu<v>-<compiler>[-shard3of8]: no torch in the name, so every torch's
    wheel build reuses one kernels build (Ninja recompiles nothing there)."""
    parts = [
        "kernels",
        build_dirs.group_token(opts.group, opts.cuda_archs),
        build_dirs.kernel_set_token(opts.kernel_set),
        "cu" + build_dirs.cuda_digits(tc.cuda_version),
        build_dirs.compiler_token(tc.compiler_id, tc.compiler_version),
    ]
    if shard:
        index, count = kernel_sets.parse_shard(shard)
        parts.append(f"shard{index}of{count}")
    return opts.build_root / "-".join(parts)


# What a kernels build configures on top of the options: torch-free objects only, no archive linked
# (FLASH_ATTN_SHARD is the shard asked for, "" for the whole set).
KERNELS_ONLY_DEFINES = {"FLASH_ATTN_KERNELS_ONLY": "ON", "FLASH_ATTN_KERNELS": "", "FLASH_ATTN_SHARD": ""}


def build(
    opts: options.BuildOptions, tc: toolchain.Toolchain, shard: str = "", out: Path | None = None, prediction=None
):
    """Compile the kernel set (or one shard) of `opts` and archive it; returns (archive, summary).

    The archive goes to `out` (default: the kernels build folder itself, ``<build>/archive``).
    `prediction` (release.compile.estimate.kernels_step) drives the ETA, goes into the summary, and the
    measured speed is recorded for the next prediction (estimate.record).
    Raises ReleaseError when the configure or the build fails (with the log's tail).
    """
    bdir = kernels_build_dir(opts, tc, shard)
    cmake = cmake_executable()
    with locks.hold_build_folder(bdir):
        return _build_locked(opts, tc, bdir, cmake, shard, out, prediction)


def _build_locked(opts, tc, bdir: Path, cmake: str, shard: str, out: Path | None, prediction=None):
    """The part of :func:`build` that runs while the build folder's lock is held."""
    started = time.monotonic()
    with compile_cache.session(opts.cache) as cache:
        defines = compile_cache.settle(opts, cache).cmake_defines()  # no launcher when sccache could not start
        defines.update({**KERNELS_ONLY_DEFINES, "FLASH_ATTN_SHARD": shard})
        configure = [cmake, "-S", str(_paths.REPO_ROOT), "-B", str(bdir), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                     f"-DPython_EXECUTABLE={sys.executable}"]  # fmt: skip
        configure += [f"-D{k}={v}" for k, v in defines.items()]
        _, log_before = builder.run_streamed(configure, bdir, opts.verbose, what="the kernels configure")
        builder.run_streamed(
            [cmake, "--build", str(bdir)], bdir, opts.verbose, what="the kernels build", append=True,
            prediction=prediction,
        )  # fmt: skip
        cache_stats = cache.stats()
    # nvcc's --keep intermediates (cmake/FlashAttnKernels.cmake, flash_attn_deterministic_objects): tens of
    # MB per unit, needed by no later build; the folder itself stays (nvcc writes into it).
    intermediates = bdir / "nvcc-intermediates"
    if intermediates.is_dir():
        shutil.rmtree(intermediates)
        intermediates.mkdir()
    wall = time.monotonic() - started
    entries = progress.read_ninja_log(bdir / ".ninja_log", log_before)
    summary = progress.summary(entries, wall, progress.peak_child_rss_bytes(), {})
    if cache_stats:
        summary["compile_cache"] = cache_stats
    if prediction is not None:
        summary["predicted_seconds"] = round(prediction.wall_seconds, 1)
        estimate.record(prediction, wall, summary)
    checksums.atomic_write_text(bdir / builder.SUMMARY_NAME, json.dumps(summary, indent=1) + "\n")
    progress.write_trace(bdir, entries)
    group_token = build_dirs.group_token(opts.group, opts.cuda_archs)
    set_token = build_dirs.kernel_set_token(opts.kernel_set)
    if out is None:
        out = bdir / "archive"
        shutil.rmtree(out, ignore_errors=True)  # the archive of an earlier key of this folder
    return pack(bdir, out, group_token, set_token, tc), summary


def gather(paths: list[Path], out: Path) -> Path:
    """Check the shard archives and merge them into one whole-set archive under `out`.

    Raises ReleaseError, naming the shard folder, when: a folder is no kernels archive, does not
    verify (release.archive.integrity: shape, object paths, keys, folder name, objects' sha256 and
    SASS) or is already a whole set; a shard's build key (what its objects were built from) differs
    from the first one's (with the fields that differ); the shards come from different splits (N);
    an index is missing or given twice; a unit or object file is in two shards, or a unit in none.
    """
    if not paths:
        raise ReleaseError("give the shard folders to gather: nox -s archive_gather -- kernels/kernels-*-shard*")
    for p in paths:
        if outputs.inside(out, p):
            raise ReleaseError(f"--out {out} is, or lies inside, the input {p}; pass an --out outside the inputs")
    options.check_writable(Path(out), "--out", "kernels output folder")
    shards = [load(p) for p in paths]
    first = shards[0]
    for s in shards:
        if s.shard is None:
            raise ReleaseError(f"{s.path} is a whole-set archive, not a shard; it needs no gathering.")
    for s in shards[1:]:
        if s.manifest["name"] != first.manifest["name"]:
            raise ReleaseError(
                f"shard {s.path} is of {s.manifest['name']}, {first.path} of {first.manifest['name']} (group and "
                "kernel set); gather the shards of one archive_<group> split."
            )
        if s.build_key != first.build_key:
            diff = [
                f"{name}: {first.path.name} '{first.manifest['fields'].get(name)}', {s.path.name} '{value}'"
                for name, value in sorted(s.manifest["fields"].items())
                if first.manifest["fields"].get(name) != value
            ]
            raise ReleaseError(
                f"shard {s.path} was built with another key than {first.path} ({s.build_key[:12]} vs "
                f"{first.build_key[:12]}):\n  "
                + "\n  ".join(diff or ["(fields equal; the key format differs)"])
                + "\nRebuild that shard with the same options and toolchain as the others."
            )
    count = first.shard["count"]
    by_index: dict[int, Archive] = {}
    for s in shards:
        if s.shard["count"] != count:
            raise ReleaseError(
                f"{s.path} is shard {s.shard['index']}/{s.shard['count']}, but {first.path} is one of {count}; "
                "gather the shards of one split."
            )
        if s.shard["index"] in by_index:
            raise ReleaseError(
                f"shard {s.shard['index']}/{count} was given twice: {by_index[s.shard['index']].path} and {s.path}."
            )
        by_index[s.shard["index"]] = s
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing:
        raise ReleaseError(
            f"shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing (got {len(shards)} of {count}); build "
            "them with nox -s archive_<group> -- --shard K/N and the same options, then gather all."
        )
    owner: dict[str, Path] = {}
    for s in shards:
        verify_objects(s)
        for unit in dict.fromkeys(s.object_units):
            if unit in owner:
                raise ReleaseError(f"unit {unit} is in two shards: {owner[unit]} and {s.path}.")
            owner[unit] = s.path
    want = set(first.set_units) | {"dispatch"}
    absent = sorted(want - set(owner))
    extra = sorted(set(owner) - want)
    if absent or extra:
        raise ReleaseError(
            f"the shards do not cover kernel set '{first.manifest['kernels']['kernel_set']}' exactly: "
            + (f"missing {', '.join(absent)}" if absent else "")
            + ("; " if absent and extra else "")
            + (f"not in the set: {', '.join(extra)}" if extra else "")
        )
    files: dict[str, Path] = {}
    for s in shards:
        for o in s.manifest["objects"]:
            if o["file"] in files:
                raise ReleaseError(f"{o['file']} is in two shards: {files[o['file']]} and {s.path}.")
            files[o["file"]] = s.path
    manifest = {k: v for k, v in first.manifest.items() if k not in ("key", "build_key", "format")}
    manifest["kernels"] = dict(first.manifest["kernels"], shard=None)
    manifest["objects"] = sorted((o for s in shards for o in s.manifest["objects"]), key=lambda o: o["file"])
    manifest["gathered_from"] = [s.path.name for s in sorted(shards, key=lambda s: s.shard["index"])]
    sources = [(s.path / o["file"], o["file"]) for s in shards for o in s.manifest["objects"]]
    return _write_archive(Path(out), manifest, sources, inputs=[s.path for s in shards])


def predict_shard(opts: options.BuildOptions, units: list, shard: str, tc: toolchain.Toolchain | None = None):
    """Print and return the up-front prediction of a kernels build (its shard's units; the dispatch
    compiles in the whole set and in shard 1); with the toolchain `tc`, only what its build folder
    will rebuild (estimate.pending)."""
    index = 1
    if shard:
        index, count = kernel_sets.parse_shard(shard)
        units = kernel_sets.split_shards(units, count)[index - 1]
    todo = None
    if tc is not None:
        defines = {**opts.cmake_defines(), **KERNELS_ONLY_DEFINES, "FLASH_ATTN_SHARD": shard}
        todo = estimate.pending(kernels_build_dir(opts, tc, shard), estimate.project_options(defines))
    sass = estimate.sass_count(opts.group, opts.cuda_archs)
    step = estimate.kernels_step(units, sass, index == 1, opts.jobs, todo=todo)
    set_name = opts.kernel_set
    estimate.render(
        [step], lambda: estimate.cheaper_commands("kernels", opts.group, set_name, len(units), estimate.visible_sms())
    )
    return step


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m release.archive.archives", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile the kernel set (or one shard) and archive the objects")
    group, shard = options.OPTIONS[options.ARCH_GROUP], options.OPTIONS["FLASH_ATTN_SHARD"]
    b.add_argument(
        group["flag"], dest="groups", action="append", required=True, help=options.help_text(options.ARCH_GROUP)
    )
    b.add_argument(shard["flag"], help=options.help_text("FLASH_ATTN_SHARD") + " (default: the whole set)")
    options.add_arguments(b)
    g = sub.add_parser("gather", help="check shard archives and merge them into one")
    g.add_argument("shards", nargs="+", type=Path, help="the shard folders (kernels-...-shardKofN)")
    g.add_argument("--out", type=Path, default=_paths.REPO_ROOT / "kernels", help="output folder (default kernels/)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv

    def body() -> int:
        ns = parser().parse_args(argv)
        if ns.command == "gather":
            archive = gather(ns.shards, ns.out.resolve())
            print(f"release: gathered {len(ns.shards)} shards into {archive}", flush=True)
            return 0
        opts = prepare.options_of(ns)
        if opts.kernels is not None:
            raise ReleaseError(
                "--kernels / FLASH_ATTN_KERNELS links an archive into a wheel (nox -s wheel_<group>); a kernels "
                "build makes one: drop --kernels or unset FLASH_ATTN_KERNELS"
            )
        shard = options.pick(ns.shard, "FLASH_ATTN_SHARD", os.environ) or ""

        def check_shard(set_name: str, units: list) -> None:
            if not shard:
                return
            try:
                _, count = kernel_sets.parse_shard(shard)
            except ValueError as e:
                raise ReleaseError(f"--shard: {e}") from None
            if count > len(units):
                raise ReleaseError(
                    f"--shard {shard}: kernel set '{set_name}' has {len(units)} units, so at most {len(units)} "
                    "shards have work; pass a smaller N"
                )

        ready = prepare.prepare(opts, need_torch=False, check_out=False, before_probe=check_shard)
        set_name, units, tc = ready.set_name, ready.units, ready.tc
        out = ns.out.resolve() if ns.out else _paths.REPO_ROOT / "kernels"
        options.check_writable(out, "--out", "kernels output folder")  # before hours of compiling
        prediction = predict_shard(opts, units, shard, tc)
        archive, summary = build(opts, tc, shard, out, prediction)
        progress.render_summary(summary, title=f"flash_attn kernels {opts.group} {set_name} {shard}")
        print(f"release: {estimate.compare(prediction, summary['wall_seconds'])}", flush=True)
        print(f"release: wrote {archive}", flush=True)
        return 0

    return run_main(body, prog="release.archive.archives", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
