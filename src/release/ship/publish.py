"""The ``release`` session: gather wheels and validation reports into one verified release folder.

``python -m release.ship.publish [--wheels wheelhouse] [--reports reports] [--out dist/release-<version>]``

1. every wheel is self-consistent (file name, dist-info, METADATA, RECORD), holds one arch
   group's library and carries the label its build info implies; a ``<wheel>.sha256`` beside it
   (written by the wheel session) must still match;
2. all wheels have the same public version and distinct labels;
3. every wheel has a validation report (``validation-*.json`` from ``tools/validate.py``) for its
   full version, and every report of a wheel here, and the upstream-tests summary
   (``upstream_tests*.json``) when there is one, validates against its schema
   (release.ship.reports: counts present and integers, at least one passed case, none failed) and
   names the wheel's sha256 and label; ``--allow-missing-reports`` downgrades a missing report to a
   warning, never a malformed or failing one;
4. wheels and reports (JSON + Markdown) are copied into a staging folder, ``SHA256SUMS`` is
   written and verified (also with ``sha256sum -c`` when it is on PATH), then the staging folder
   is renamed to --out, which must not exist yet.

``python -m release.ship.publish --verify DIR`` re-checks an existing release folder.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from release import _paths, checksums, locks, outputs
from release.compile.options import check_writable
from release.errors import ReleaseError, run_main
from release.ship import index, reports, smoke


def collect_wheels(sources: list[Path]) -> list[Path]:
    wheels = []
    for src in sources:
        if src.is_dir():
            wheels += sorted(p for p in src.glob("flash_attn-*.whl") if not p.name.startswith("."))
        elif src.is_file() and src.suffix == ".whl":
            wheels.append(src)
        else:
            raise ReleaseError(f"{src} is neither a wheel nor a folder of wheels")
    if not wheels:
        raise ReleaseError(f"no flash_attn wheels in {', '.join(map(str, sources))}; build them with nox -s wheel_*")
    return [w.resolve() for w in wheels]


def check_wheels(wheels: list[Path]) -> dict[Path, str]:
    """Checks 1 and 2; returns {wheel: full version}."""
    from packaging.version import Version

    versions = {}
    for w in wheels:
        checksums.verify_sidecar(w)  # before the zip is opened: a damaged copy is named as such
        facts, _ = smoke.check_contents(w)
        versions[w] = facts.version
    publics = {Version(v).public for v in versions.values()}
    if len(publics) != 1:
        raise ReleaseError(f"the wheels have different versions {sorted(publics)}; a release holds one version")
    seen: dict[str, Path] = {}
    for w, v in versions.items():
        if v in seen:
            raise ReleaseError(f"{w.name} and {seen[v].name} have the same version {v}; keep one of them")
        seen[v] = w
    return versions


def load_reports(
    folder: Path | None, required: bool = True, pattern: str = "validation-*.json"
) -> list[tuple[Path, dict]]:
    """The reports matching `pattern` in `folder` (validation reports by default), as (path, JSON object).

    ReleaseError for a `folder` that is a file, or is missing while `required` (a release needs
    its reports), and for a report that is not strict JSON holding an object (reports.read). None,
    or a missing folder that is not required, gives no reports.
    """
    if folder is None:
        return []
    if not folder.exists():
        if not required:
            return []
        raise ReleaseError(
            f"the reports folder {folder} does not exist; pass the folder nox -s validate wrote with --reports "
            "(or --allow-missing-reports, not for releases)"
        )
    if not folder.is_dir():
        raise ReleaseError(f"--reports {folder} is a file; pass the folder that holds the validation-*.json reports")
    return [(path, reports.read(path)) for path in sorted(folder.glob(pattern)) if path.is_file()]


def _field(record: dict, name: str) -> dict:
    """record[name] when it is a JSON object, else {} (a report of another shape matches nothing)."""
    value = record.get(name)
    return value if isinstance(value, dict) else {}


def _checked(path: Path, report: dict, kind: str, wheel: Path, sha256: str, version: str) -> list[str]:
    """Problems of one report of `wheel`: its schema's (release.ship.reports), else the wheel it names."""
    found = reports.problems(report, kind)
    if not found:
        record = _field(_field(report, "context"), "wheel") if kind == reports.VALIDATION else report["wheel"]
        found = reports.identity_problems(record, wheel, sha256, version)
    return [f"{path.name}: {p}" for p in found]


def match_reports(
    versions: dict[Path, str],
    validation: list[tuple[Path, dict]],
    allow_missing: bool = False,
    upstream: list[tuple[Path, dict]] = (),
) -> list[Path]:
    """Check 3; returns the report files (JSON and the Markdown beside each) to ship.

    A validation report is the wheel's when its ``context.flash_attn`` is the wheel's full version;
    one whose version is not a string names no wheel and is refused (it could be any wheel's). Each
    upstream-tests summary must be of a wheel here. ReleaseError listing every problem.
    """
    shipped, problems = [], []
    sha = {w: checksums.sha256_file(w) for w in versions}
    for path, r in validation:
        if not isinstance(_field(r, "context").get("flash_attn"), str):
            problems.append(
                f"{path.name}: names no wheel (no context.flash_attn); not a report of tools/validate.py, remove it"
            )
    for wheel, version in versions.items():
        mine = [(p, r) for p, r in validation if _field(r, "context").get("flash_attn") == version]
        if not mine:
            msg = f"{wheel.name}: no validation report for {version} (run nox -s validate -- WHEEL on a GPU)"
            if allow_missing:
                print(f"warning: {msg}", file=sys.stderr)
            else:
                problems.append(msg)
            continue
        for path, r in mine:
            failed = _field(r, "counts").get("FAILED", 0)
            if isinstance(failed, int) and not isinstance(failed, bool) and failed > 0:
                problems.append(f"{path.name}: {failed} failed case(s); a release ships only passing reports")
            else:
                problems += _checked(path, r, reports.VALIDATION, wheel, sha[wheel], version)
            shipped.append(path)
            md = path.with_suffix(".md")
            if md.is_file():
                shipped.append(md)
    for path, r in upstream:
        found = reports.problems(r, reports.UPSTREAM_TESTS)
        wheel = next((w for w in versions if sha[w] == _field(r, "wheel").get("sha256")), None)
        if found:
            problems += [f"{path.name}: {p}" for p in found]
        elif wheel is None:
            problems.append(
                f"{path.name}: tested {_field(r, 'wheel').get('file')}, which is none of this release's wheels; run "
                "nox -s upstream_tests -- WHEEL on a wheel of this release, or remove the file"
            )
        else:
            problems += _checked(path, r, reports.UPSTREAM_TESTS, wheel, sha[wheel], versions[wheel])
        shipped.append(path)
    if problems:
        raise ReleaseError("the release does not verify:\n  " + "\n  ".join(problems))
    return shipped


def verify_release(folder: Path) -> list[str]:
    """Re-check a release folder: it holds regular files only (what is published: no folder, no
    link), SHA256SUMS names exactly those files, each once and nothing outside the folder
    (release.checksums, release.confine), they verify (python and `sha256sum -c`), and so
    does each wheel. ReleaseError naming the folder and the first offending entry otherwise."""
    sums = folder / "SHA256SUMS"
    if not sums.is_file() or sums.is_symlink():
        raise ReleaseError(f"{folder} has no SHA256SUMS")
    odd = sorted(p.name for p in folder.iterdir() if p.is_symlink() or not p.is_file())
    if odd:
        raise ReleaseError(f"{folder}: {odd} are not regular files; a release folder holds only the files it publishes")
    names = checksums.verify_sha256sums(sums)
    listed = set(names)
    unlisted = [p.name for p in folder.iterdir() if p.name != "SHA256SUMS" and p.name not in listed]
    if unlisted or "SHA256SUMS" in listed:
        raise ReleaseError(
            f"{folder}: files not in SHA256SUMS: {unlisted}"
            + ("; SHA256SUMS lists itself" if "SHA256SUMS" in listed else "")
            + " (it must list exactly the release's files)"
        )
    tool = shutil.which("sha256sum")
    if tool:
        proc = subprocess.run([tool, "-c", "--strict", "SHA256SUMS"], cwd=folder, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ReleaseError(f"sha256sum -c SHA256SUMS failed in {folder}:\n{proc.stdout}{proc.stderr}")
    check_wheels(sorted(folder.glob("*.whl")))
    return names


def assemble(
    wheel_sources: list[Path], reports_dir: Path | None, out: Path | None, allow_missing_reports: bool = False
) -> Path:
    wheels = collect_wheels(wheel_sources)
    versions = check_wheels(wheels)
    shipped = match_reports(
        versions,
        load_reports(reports_dir, not allow_missing_reports),
        allow_missing_reports,
        load_reports(reports_dir, False, "upstream_tests*.json"),
    )
    public = next(iter(versions.values())).split("+")[0]
    out = (out or _paths.REPO_ROOT / "dist" / f"release-{public}").resolve()
    exists = f"{out} already exists; a release folder is written once. Remove it or pass another --out"
    if out.exists():
        raise ReleaseError(exists)
    check_writable(out.parent, "--out", "release folder's parent")
    with locks.hold_output(out):  # one release session per output folder
        if out.exists():  # written by a session that ended while we waited for the lock
            raise ReleaseError(exists)
        for stale in out.parent.glob(f".{out.name}.partial-*"):  # a killed session's; made only under this lock
            shutil.rmtree(stale, ignore_errors=True)
        staging = outputs.temp_dir(out.parent, f".{out.name}.partial-")
        try:
            for f in [*wheels, *shipped]:
                shutil.copyfile(f, staging / f.name)
            checksums.write_sha256sums([p for p in staging.iterdir() if p.is_file()], staging / "SHA256SUMS")
            verify_release(staging)
            staging.rename(out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out


def write_index(release: Path, base_url: str | None, repo: str | None) -> Path | None:
    """The release's package indexes (release.ship.index) in ``<release>-index`` beside it; skipped, with a
    line saying how to get them, when the wheels' download URL is unknown (no --index-base-url, --repo
    or $GITHUB_REPOSITORY)."""
    wheels = sorted(release.glob("flash_attn-*.whl"))
    version = wheels[0].name.split("-")[1].split("+")[0]
    if not (base_url or index.repo_of(repo)):
        print(
            "release: no package index written: pass --repo OWNER/NAME (the GitHub release of the wheels) or "
            "--index-base-url URL",
            flush=True,
        )
        return None
    base = base_url or index.default_base_url(version, repo)
    out = release.with_name(release.name + "-index")
    index.write(wheels, out, base)
    print(f"release: package indexes in {out} (wheels from {base})", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m release.ship.publish", description=__doc__.split("\n")[0])
    p.add_argument("--wheels", type=Path, action="append", help="wheel files or folders (default wheelhouse/)")
    p.add_argument("--reports", type=Path, default=_paths.REPO_ROOT / "reports", help="validation reports folder")
    p.add_argument("--out", type=Path, help="release folder to create (default dist/release-<version>)")
    p.add_argument("--allow-missing-reports", action="store_true", help="warn instead of failing (not for releases)")
    p.add_argument("--verify", type=Path, metavar="DIR", help="only verify an existing release folder")
    p.add_argument("--index-base-url", help="package index: URL the wheels are downloaded from (release.ship.index)")
    p.add_argument("--repo", help="package index: OWNER/NAME of the GitHub release (default $GITHUB_REPOSITORY)")
    args = p.parse_args(argv)

    def body() -> int:
        if args.verify:
            names = verify_release(args.verify)
            print(f"release: {args.verify} verifies ({len(names)} files)")
            return 0
        out = assemble(args.wheels or [_paths.DEFAULT_WHEELHOUSE], args.reports, args.out, args.allow_missing_reports)
        print(f"release: {out}")
        for line in (out / "SHA256SUMS").read_text(encoding="utf-8").splitlines():
            print(f"  {line}")
        write_index(out, args.index_base_url, args.repo)
        return 0

    return run_main(body, prog="release.ship.publish", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
