"""Gates of the release workflow: which run may publish, and checks that stop a wrong release early.

``PYTHONPATH=src python3 -m release.ship.gates <command> [options]``; stdlib only, so a job runs it with
the runner's own python3 before it installs anything (the ``plan`` check takes seconds, in the
first minute of a release). Each command exits 0 or prints what is wrong and what to do, exits 2.

- ``plan``: does this run publish? Only a tag push ``refs/tags/v<version>`` publishes (a push has
  no inputs: full matrix, ``release`` kernel set), or a manual dispatch on such a tag that assembles
  the wheels of that tag's earlier push run (``--from-run``, checked by ``source-run``). A dispatch
  that builds never publishes, whatever its inputs. Any tag ref must be ``v`` + the version in
  flash_attn/_version.py, or the run stops here. With ``--repository`` (the workflow passes
  ``github.repository``), a tag also stops here when the package index URL its wheels would record is
  not this repository's (release.index_url.check_for_tag: a custom URL of another repository).
- ``draft``: the tag's GitHub release does not exist yet or is still a draft (``--releases``: the JSON
  lines ``{tag_name, draft, id}`` of every release, drafts included); a published release is refused, so a
  re-run never replaces assets users already download. Prints ``state=new|draft`` to ``--github-output``.
- ``source-run``: the run given with ``--from-run`` is a completed tag push of release.yml for
  this tag and commit (the JSON of ``GET /repos/{owner}/{repo}/actions/runs/{id}``).
- ``cuda``: the CUDA toolkit under ``--cuda-home`` is exactly the matrix's patch (version.json).
- ``torch``: the torch that ``python`` imports is the matrix entry's version, CUDA build and C++
  ABI flag (``torch._C._GLIBCXX_USE_CXX11_ABI``), so a wheel name never disagrees with its build.
- ``artifacts``: the downloaded ``wheel-*`` artifacts are exactly the matrix's, each with exactly its
  wheel, .sha256 and build summary (nothing another step uploaded); copies them to one folder.
- ``sums``: SHA256SUMS verifies and lists exactly the wheels of the matrix, every one and no other.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from flash_attn_wheel_names import label as wheel_label
from release import _paths, checksums, index_url
from release.compile import toolchain
from release.errors import ReleaseError, run_main
from release.plan import matrix

RELEASE_WORKFLOW = ".github/workflows/release.yml"
TAG_PREFIX = "refs/tags/"


@dataclass(frozen=True)
class Plan:
    """What a run of release.yml does: `publish` (draft release + attestations) or build only."""

    publish: bool
    tag: str  # the tag name when the ref is a tag, else ""
    reason: str  # one line for the job summary


def expected_tag(version: str) -> str:
    """The tag a release of `version` is pushed as: v + the version + -rev<REVISION of
    src/flash_attn_wheel_names/label.py> (v2.8.3.post2-rev1): the version is upstream's, the revision this project's."""
    return f"v{version}-rev{wheel_label.REVISION}"


def check_tag(tag: str, version: str) -> None:
    """Raise ReleaseError unless `tag` is ``v<version>`` (version: flash_attn/_version.py)."""
    if tag != expected_tag(version):
        raise ReleaseError(
            f"tag {tag!r} does not match flash_attn/_version.py ({version!r}): a release is tagged "
            f"{expected_tag(version)}. Delete the tag (git push --delete origin {tag}) and tag the commit "
            f"{expected_tag(version)}, or set __version__ in flash_attn/_version.py (REVISION in "
            "src/flash_attn_wheel_names/label.py), commit, and tag that commit."
        )


def plan(
    event: str,
    ref: str,
    version: str,
    kernel_set: str = "",
    filters: dict[str, str] | None = None,
    from_run: str = "",
) -> Plan:
    """Decide whether a run publishes (see the module docstring); ReleaseError for a bad tag or inputs.

    `event` is github.event_name, `ref` github.ref (refs/tags/v... or refs/heads/...), `kernel_set`
    and `filters` ({"os": "...", ...}) the dispatch inputs (empty on a push), `from_run` the run id
    whose wheels are assembled instead of building ("" to build).
    """
    tag = ref[len(TAG_PREFIX) :] if ref.startswith(TAG_PREFIX) else ""
    if tag:
        check_tag(tag, version)
    filtered = sorted(k for k, v in (filters or {}).items() if v and v.strip())
    non_release = kernel_set not in ("", "release")
    if from_run:
        if not from_run.isdigit():
            raise ReleaseError(f"from_run {from_run!r} is not a run id (the number in .../actions/runs/<id>)")
        if tag and (filtered or non_release):  # elsewhere the inputs say which wheels that run built
            raise ReleaseError(
                f"from_run on {tag} assembles the whole release of its push run; leave the other inputs empty "
                f"(given: {', '.join(filtered + (['kernel_set=' + kernel_set] if non_release else []))})"
            )
    if not tag:
        return Plan(False, "", f"{ref or 'this ref'} is not a release tag: wheels are built and kept as artifacts")
    if event == "push":
        if filtered or non_release:  # a push has no inputs; never publish if something set them anyway
            return Plan(False, tag, f"a push of {tag} with inputs {filtered or kernel_set}: not published")
        return Plan(True, tag, f"tag push {tag}: every wheel of the matrix, kernel set release, draft release")
    if event == "workflow_dispatch" and from_run:
        return Plan(True, tag, f"assembles the draft release {tag} from the wheels of run {from_run}")
    return Plan(
        False,
        tag,
        f"a {event} run on {tag} builds but never publishes; push the tag to release, or dispatch with "
        "from_run=<id of the tag's push run> to assemble its wheels",
    )


def check_source_run(run: dict, tag: str, sha: str, workflow: str = RELEASE_WORKFLOW) -> None:
    """Raise ReleaseError unless `run` (the REST API's workflow run JSON) is the push run of `tag` at `sha`.

    The wheels of that run were built from this commit with the full matrix and the release kernel
    set; `sums` still checks that every one of them arrived.
    """
    problems = []
    if run.get("event") != "push":
        problems.append(f"its event is {run.get('event')!r}, not a tag push")
    if run.get("head_branch") != tag:
        problems.append(f"it ran for {run.get('head_branch')!r}, not the tag {tag!r}")
    if run.get("head_sha") != sha:
        problems.append(f"it built commit {run.get('head_sha')}, this run is for {sha}")
    if str(run.get("path", "")).split("@")[0] != workflow:
        problems.append(f"it is a run of {run.get('path')!r}, not {workflow}")
    if run.get("status") != "completed":
        problems.append(f"it is {run.get('status')!r}; wait until it has completed")
    if problems:
        raise ReleaseError(
            f"run {run.get('id')} cannot be assembled into {tag}: " + "; ".join(problems) + ". Give from_run the id "
            f"of the run the push of {tag} started (Actions tab, workflow release, event push)."
        )


def read_cuda_version(cuda_home: Path) -> str:
    """The toolkit version (e.g. 13.0.2) from <cuda_home>/version.json; ReleaseError when absent."""
    path = Path(cuda_home) / "version.json"
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["cuda"]["version"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ReleaseError(
            f"cannot read the CUDA toolkit version from {path} ({e}); is {cuda_home} a toolkit?"
        ) from None


def check_cuda(found: str, expected: str) -> None:
    """Raise ReleaseError unless toolkit version `found` is `expected` (both x.y.z: the patch counts)."""
    if found != expected:
        raise ReleaseError(
            f"the CUDA toolkit is {found} but the matrix builds with {expected} (release.plan.matrix CUDA). Use an "
            f"image or installer of {expected}, or change CUDA in src/release/plan/matrix.py and docs/ci.md together."
        )


def check_torch(found: dict | None, torch: str, cuda: str, cxx11_abi: bool) -> None:
    """Raise ReleaseError unless `found` (toolchain.probe_torch: version, cuda, abi) is the entry's torch.

    `torch` is the public version ("2.14.1"), `cuda` torch's CUDA build ("13.0"), `cxx11_abi` the value
    of ``torch._C._GLIBCXX_USE_CXX11_ABI`` the entry's wheel name carries.
    """
    if not found:
        raise ReleaseError("torch is not importable; the step that installs torch must run first")
    problems = []
    if str(found.get("version", "")).split("+")[0] != torch:
        problems.append(f"version {found.get('version')} (expected {torch})")
    if found.get("cuda") != cuda:
        problems.append(f"CUDA {found.get('cuda')} (expected {cuda}: install from the cu{cuda.replace('.', '')} index)")
    if found.get("abi") is not cxx11_abi:
        problems.append(
            f"torch._C._GLIBCXX_USE_CXX11_ABI {found.get('abi')} (the wheel name says "
            f"cxx11abi{str(cxx11_abi).lower()}; fix OsInfo.cxx11_abi in src/release/plan/matrix.py if torch changed it)"
        )
    if problems:
        raise ReleaseError("the installed torch is not the matrix entry's: " + "; ".join(problems))


def expected_wheels(matrix_doc: dict) -> list[str]:
    """The wheel names a matrix ({"include": [...]}) promises."""
    return sorted(e["wheel"] for e in matrix_doc["include"])


def check_sums(sums: Path, expected: list[str]) -> list[str]:
    """Verify SHA256SUMS (every hash) and that its wheels are exactly `expected`; returns the names.

    Raises ReleaseError naming the wheels that are missing and those that no matrix entry promised.
    """
    names = checksums.verify_sha256sums(Path(sums))
    wheels = {n for n in names if n.endswith(".whl")}
    missing, extra = sorted(set(expected) - wheels), sorted(wheels - set(expected))
    if missing or extra:
        lines = [f"missing ({len(missing)}): {m}" for m in missing] + [f"not in the matrix: {x}" for x in extra]
        raise ReleaseError(
            f"{sums} covers {len(wheels & set(expected))} of the {len(expected)} wheels of the matrix:\n  "
            + "\n  ".join(lines)
            + "\nRe-run the failed build jobs, or assemble from a run that has them all (from_run)."
        )
    return names


ARTIFACT_PREFIX = "wheel-"  # release.yml's link jobs upload wheel-<entry name>


def artifact_files(entry: dict) -> set[str]:
    """The files a link job's artifact holds: the wheel, its .sha256 and the build summary."""
    return {entry["wheel"], entry["wheel"] + ".sha256", f"build-summary-{entry['name']}.json"}


def check_artifacts(folder: Path, matrix_doc: dict, out: Path) -> list[str]:
    """Copy exactly the matrix's wheel artifacts from `folder` (download-artifact without merging) to `out`.

    Several artifacts arrive as ``folder/<artifact>/``; download-artifact v5+ extracts a single one
    straight into `folder` (docs/ci.md), which is accepted only when the matrix has one entry. Raises
    ReleaseError for a missing artifact, an artifact no entry names (a step could upload one: the
    sccache action exports the runtime token to later steps) or a file an artifact should not hold.
    Returns the copied file names.
    """
    entries = {ARTIFACT_PREFIX + e["name"]: e for e in matrix_doc["include"]}
    folder = Path(folder)
    dirs = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    files = sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    if files and not dirs and len(entries) == 1:
        layout = {next(iter(entries)): folder}  # one artifact, extracted flat
    elif files:
        raise ReleaseError(f"{folder} holds files {files} beside artifact folders; expected one folder per artifact")
    else:
        layout = {d: folder / d for d in dirs}
    problems = [
        f"missing artifact {n} (its link job failed or did not upload)" for n in sorted(set(entries) - set(layout))
    ]
    problems += [f"artifact {n} is not one of the matrix's wheels" for n in sorted(set(layout) - set(entries))]
    for name in sorted(set(layout) & set(entries)):
        got = {p.name for p in layout[name].iterdir()}
        want = artifact_files(entries[name])
        if got != want:
            problems.append(f"artifact {name} holds {sorted(got)}; expected {sorted(want)}")
    if problems:
        raise ReleaseError("the wheel artifacts are not the matrix's:\n  " + "\n  ".join(problems))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    copied = []
    for name, entry in entries.items():
        for f in sorted(artifact_files(entry)):
            shutil.copy2(layout[name] / f, out / f)
            copied.append(f)
    return copied


def read_releases(path: Path) -> list[dict]:
    """The releases of ``gh api --paginate repos/OWNER/REPO/releases --jq '.[] | {tag_name, draft, id}'``:
    one JSON object a line (untrusted: each must have a string tag_name and a boolean draft)."""
    out = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ReleaseError(f"cannot read the release list {path}: {e}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        if not (isinstance(doc, dict) and isinstance(doc.get("tag_name"), str) and isinstance(doc.get("draft"), bool)):
            raise ReleaseError(f"{path} line {n} is not a release ({{tag_name, draft, id}}); list them with gh api")
        out.append(doc)
    return out


def draft_state(releases: list[dict], tag: str) -> str:
    """``new`` when no release has `tag`, ``draft`` when its release is a draft; ReleaseError when it is
    published (assets of a published release are never replaced) or when several releases share the tag."""
    mine = [r for r in releases if r["tag_name"] == tag]
    if len(mine) > 1:
        raise ReleaseError(
            f"{len(mine)} releases have the tag {tag}; delete the extra drafts (gh release list) and re-run"
        )
    if not mine:
        return "new"
    if not mine[0]["draft"]:
        raise ReleaseError(
            f"release {tag} is already published; a published release is never changed (its users may have "
            f"installed its wheels). Bump REVISION in src/flash_attn_wheel_names/label.py and tag the next revision"
        )
    return "draft"


def _write_outputs(path: str | None, values: dict[str, str]) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in values.items())


def _summary(text: str) -> None:
    print(text)
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text + "\n")


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ReleaseError(f"expected true or false, got {text!r}")
    return text.lower() == "true"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m release.ship.gates", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    pl = sub.add_parser("plan", help="does this run publish? (and: a tag is v<version>)")
    pl.add_argument("--event", required=True, help="github.event_name")
    pl.add_argument("--ref", required=True, help="github.ref")
    pl.add_argument("--kernel-set", default="")
    for name in ("os", "group", "cuda", "torch"):
        pl.add_argument(f"--{name}", default="", help=f"the {name} dispatch input (a filter)")
    pl.add_argument("--from-run", default="", help="run id whose wheels are assembled instead of building")
    pl.add_argument("--github-output", help="append publish=, tag= to this file ($GITHUB_OUTPUT)")
    pl.add_argument("--repository", default="", help="github.repository: a tag checks the index URL it records")
    dr = sub.add_parser("draft", help="the tag's release is new or still a draft (never published)")
    dr.add_argument("--releases", type=Path, required=True, help="JSON lines {tag_name, draft, id} (gh api)")
    dr.add_argument("--tag", required=True)
    dr.add_argument("--github-output", help="append state=new|draft to this file ($GITHUB_OUTPUT)")
    sr = sub.add_parser("source-run", help="the --from-run run is the tag's push run of release.yml")
    sr.add_argument("--run-json", type=Path, required=True, help="gh api repos/OWNER/REPO/actions/runs/ID")
    sr.add_argument("--tag", required=True)
    sr.add_argument("--sha", required=True, help="github.sha of this run")
    cu = sub.add_parser("cuda", help="the toolkit under --cuda-home is --expect (x.y.z)")
    cu.add_argument("--cuda-home", type=Path, required=True)
    cu.add_argument("--expect", required=True)
    to = sub.add_parser("torch", help="the torch of --python is the matrix entry's")
    to.add_argument("--python", default=sys.executable)
    to.add_argument("--torch", required=True)
    to.add_argument("--cuda", required=True, help="torch.version.cuda expected, e.g. 13.0")
    to.add_argument("--cxx11-abi", required=True, help="true or false")
    ar = sub.add_parser("artifacts", help="the downloaded wheel artifacts are exactly the matrix's; copy them")
    ar.add_argument("--dir", type=Path, required=True, help="download-artifact's path (not merged)")
    ar.add_argument("--matrix", type=Path, required=True, help="the link matrix JSON of this run")
    ar.add_argument("--out", type=Path, required=True, help="folder the wheels, .sha256 and summaries go to")
    su = sub.add_parser("sums", help="SHA256SUMS verifies and covers every wheel of the matrix")
    su.add_argument("--sums", type=Path, required=True)
    which = su.add_mutually_exclusive_group(required=True)
    which.add_argument("--matrix", type=Path, help="the matrix JSON this run built (nox -s matrix --output)")
    which.add_argument("--full-release", action="store_true", help="the unfiltered release matrix")
    return p


def run(args: argparse.Namespace) -> None:
    if args.command == "plan":
        filters = {k: getattr(args, k) for k in ("os", "group", "cuda", "torch")}
        version = _paths.package_version()
        got = plan(args.event, args.ref, version, args.kernel_set, filters, args.from_run)
        url = index_url.check_for_tag(args.repository) if got.tag and args.repository else ""
        _write_outputs(args.github_output, {"publish": str(got.publish).lower(), "tag": got.tag})
        if url:
            _summary(f"release gate: the wheels record the package index {url}")
        _summary(f"release gate: {'PUBLISH' if got.publish else 'no release'}: {got.reason} (version {version})")
    elif args.command == "draft":
        state = draft_state(read_releases(args.releases), args.tag)
        _write_outputs(args.github_output, {"state": state})
        _summary(f"release gate: release {args.tag}: {'none yet, a draft is created' if state == 'new' else 'a draft'}")
    elif args.command == "source-run":
        run_doc = json.loads(args.run_json.read_text(encoding="utf-8"))
        check_source_run(run_doc, args.tag, args.sha)
        _summary(f"release gate: run {run_doc.get('id')} is the push run of {args.tag} at {args.sha}")
    elif args.command == "cuda":
        found = read_cuda_version(args.cuda_home)
        check_cuda(found, args.expect)
        _summary(f"release gate: CUDA toolkit {found} under {args.cuda_home}")
    elif args.command == "torch":
        found = toolchain.probe_torch(args.python)
        check_torch(found, args.torch, args.cuda, _bool(args.cxx11_abi))
        _summary(f"release gate: torch {found['version']} (CUDA {found['cuda']}, cxx11 ABI {found['abi']})")
    elif args.command == "artifacts":
        copied = check_artifacts(args.dir, json.loads(args.matrix.read_text(encoding="utf-8")), args.out)
        _summary(f"release gate: {len(copied)} files of the matrix's wheel artifacts in {args.out}")
    elif args.command == "sums":
        doc = matrix.build_matrix() if args.full_release else json.loads(args.matrix.read_text(encoding="utf-8"))
        expected = expected_wheels(doc)
        check_sums(args.sums, expected)
        _summary(f"release gate: {args.sums} verifies and covers all {len(expected)} wheels of the matrix")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    return run_main(lambda: run(args), prog=f"release gate {args.command}", annotate=True)


if __name__ == "__main__":
    sys.exit(main())
