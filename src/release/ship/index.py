"""Static package indexes: one PEP 503 "simple" index per wheel variant, of one release or of all published ones.

``python -m release.ship.index --wheels dist/release-<version> --out DIR [--base-url URL | --repo OWNER/NAME]``
(also run by ``nox -s release``, into ``dist/release-<version>-index``) writes::

    DIR/index.html                                  the variants, with their pip lines
    DIR/<variant>/simple/index.html                 PEP 503 root: the one project, flash-attn
    DIR/<variant>/simple/flash-attn/index.html      one link per wheel of the variant

A variant is (CUDA major, arch group, torch ABI) from each wheel's build info: ``cu13/legacy/stable``
(the stable-ABI wheels, every torch >= ``stable_abi.torch_min``) or ``cu13/legacy/torch2.14.1``
(an exact wheel serves one torch release, so each torch gets its own index: in one index pip would
take the highest label, a wheel for another torch). The wheels of both CUDA minors of a major (cu130,
cu132) share the variant, as either serves a torch with that CUDA major; pip picks the higher.

Each link is ``<base URL><file name, percent-encoded>#sha256=<hex>`` with
``data-requires-python`` from the wheel's METADATA (PEP 503), so pip checks the download against the
hash and refuses a file that differs. The default base URL is the GitHub release download URL of the
version's tag, ``https://github.com/<repo>/releases/download/v<version>-rev<N>/`` (the repo: ``--repo``, else
``$GITHUB_REPOSITORY``); GitHub keeps the ``+`` of a local version in asset names. A wheel with a
``<wheel>.sha256`` beside it must still match it, and ``write`` of a release folder checks its
SHA256SUMS first (release.checksums).

``--published RELEASES.jsonl --sums-dir DIR --repo OWNER/NAME --out SITE`` (index.yml) writes the same
layout for every published release at once, so earlier releases stay installable when a new one is
deployed: RELEASES.jsonl is ``gh api --paginate repos/OWNER/NAME/releases --jq '.[] | {tag_name, draft,
prerelease, id}'``, DIR/<tag>/SHA256SUMS each release's checksum file (``--list-tags`` prints the tags to
download: published, ``v<version>-rev<N>``). Everything read there is untrusted: a tag must have that
form, a SHA256SUMS line must be ``<64 hex>  <plain wheel file name>`` whose local label this project
writes (:func:`variant_of_name`); anything else is refused by name. Drafts are never listed (their assets
cannot be downloaded). Stdlib only: index.yml runs it with the runner's python3 and nothing installed.
"""

from __future__ import annotations

import argparse
import email.parser
import html
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.parse
from pathlib import Path

from flash_attn_wheel_names import install as wheel_install
from flash_attn_wheel_names import label as wheel_label
from release import checksums, index_url
from release.compile import tagging
from release.errors import ReleaseError, run_main

PROJECT = "flash-attn"  # PEP 503 normalized name of the flash_attn distribution
# the release tag is release.ship.gates.expected_tag: v<version>-rev<REVISION of flash_attn_wheel_names.label>
GITHUB_DOWNLOAD = "https://github.com/{repo}/releases/download/v{version}-rev{revision}/"
# A release tag (release.ship.gates.expected_tag), and a wheel of a release: plain file names only.
TAG_RE = re.compile(r"^v[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc|\.post|\.dev)[0-9]+)*-rev[0-9]+$")
_WHEEL_RE = re.compile(r"^flash_attn-([0-9][0-9a-z.]*)\+([a-z0-9.]+)-cp[0-9]+-(?:abi3|none|cp[0-9]+)-[a-z0-9_]+\.whl$")
# The local label of a release wheel (flash_attn_wheel_names.label.local_label, release kernel set).
_LABEL_RE = re.compile(
    r"^cu(?P<cu>[0-9]{3})torch(?:stable(?P<min>[0-9]+\.[0-9]+)|(?P<torch>[0-9]+(?:\.[0-9]+)*)cxx11abi(?:true|false))"
    r"\.(?P<group>[a-z0-9]+)\.rev(?P<rev>[0-9]+)$"
)


def variant(info: dict) -> str:
    """``cu13/legacy/stable`` or ``cu13/legacy/torch2.14.1``: the index a wheel of this build info is in
    (flash_attn_wheel_names.install's variant, the one the runtime names)."""
    major = str(info.get("cuda_version") or "").split(".")[0]
    if wheel_label.cuda_tag(info.get("cuda_version")) is None or not major.isdigit():
        raise ReleaseError(f"build info of group {info.get('group')!r} has no CUDA version; rebuild the wheel")
    stable = wheel_label.torch_abi(info) == wheel_label.TORCH_ABI_STABLE
    torch = None if stable else wheel_label.public_version(str(info.get("torch_version", "")))
    return wheel_install.variant(int(major), info["group"], torch, None)


def variant_of_name(name: str) -> str:
    """The variant (:func:`variant`) of a release wheel from its file name alone (index.yml has no wheel,
    only SHA256SUMS): ``...+cu130torchstable2.11.legacy.rev1-...`` -> ``cu13/legacy/stable``. ReleaseError for
    any name that is not a plain release wheel name of this project (a path, another kernel set, junk)."""
    m = _WHEEL_RE.fullmatch(name)
    label = _LABEL_RE.fullmatch(m.group(2)) if m else None
    if label is None:
        raise ReleaseError(f"{name!r} is not a release wheel name of flash_attn (plain file name, release label)")
    major = int(label["cu"][:2])  # cu130 -> 13, cu126 -> 12: the last digit is the minor
    return wheel_install.variant(major, label["group"], label["torch"], None)


def published_tags(releases: list[dict]) -> list[str]:
    """The tags of the published (non-draft) releases among `releases` (release.ship.gates.read_releases
    rows) whose tag is ``v<version>-rev<N>``, sorted; other tags are skipped, drafts never listed."""
    return sorted({r["tag_name"] for r in releases if not r["draft"] and TAG_RE.fullmatch(r["tag_name"])})


def published_entries(releases: list[dict], sums_dir: Path, repo: str) -> dict[str, list[dict]]:
    """{variant: [{file, url, sha256, requires_python, tag}]} of every published release (see the module
    docstring). ReleaseError when a release's SHA256SUMS is missing or holds a line that is not a release
    wheel of this project, or when two releases hold one file name with different hashes."""
    repo = index_url.check_repository(repo)
    out: dict[str, list[dict]] = {}
    seen: dict[str, str] = {}
    for tag in published_tags(releases):
        sums = Path(sums_dir) / tag / "SHA256SUMS"
        try:
            text = sums.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ReleaseError(
                f"cannot read {sums} ({e}); download it: gh release download {tag} -p SHA256SUMS"
            ) from None
        pairs = checksums.parse_sha256sums(text, source=f"{sums} of release {tag}")
        for digest, name in pairs:
            if not name.endswith(".whl"):
                continue  # build summaries, reports
            where = variant_of_name(name)
            if seen.setdefault(name, digest.lower()) != digest.lower():
                raise ReleaseError(f"{name} is in two releases with different sha256; delete one of the releases")
            out.setdefault(where, []).append(
                {
                    "file": name,
                    "url": f"https://github.com/{repo}/releases/download/{tag}/{urllib.parse.quote(name)}",
                    "sha256": digest.lower(),
                    "requires_python": ">=3.10" if "-cp310-abi3-" in name else None,
                    "tag": tag,
                }
            )
    if not out:
        raise ReleaseError("no published release has a wheel; publish the draft release first (index.yml runs then)")
    return {k: sorted(v, key=lambda e: (e["file"], e["tag"])) for k, v in out.items()}


def _metadata(wheel: Path) -> email.message.Message:
    with tagging.open_wheel(wheel) as zf:
        names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(names) != 1:
            raise ReleaseError(f"{wheel.name} has {len(names)} METADATA files; expected one. Rebuild it.")
        return email.parser.BytesParser().parsebytes(zf.read(names[0]))


pages_url = index_url.pages_url  # the one rule (release.index_url)


def repo_of(repo: str | None = None, env=None) -> str | None:
    """``OWNER/NAME`` of the wheels' GitHub release: `repo`, else ``$GITHUB_REPOSITORY``; None if neither."""
    env = os.environ if env is None else env
    repo = repo or env.get("GITHUB_REPOSITORY", "")
    return repo if repo.count("/") == 1 else None


def default_base_url(version: str, repo: str | None = None, env=None) -> str:
    """The GitHub release download URL of ``v<version>-rev<N>`` (see the module docstring)."""
    repo = repo_of(repo, env)
    if repo is None:
        raise ReleaseError(
            "the package index needs the wheels' download URL: pass --repo OWNER/NAME (their GitHub release) "
            "or --base-url URL (a folder the wheels are uploaded to)"
        )
    return GITHUB_DOWNLOAD.format(repo=repo, version=version, revision=wheel_label.REVISION)


def entries(wheels: list[Path], base_url: str) -> dict[str, list[dict]]:
    """{variant: [{file, url, sha256, requires_python}]} of `wheels` (sorted by file name)."""
    out: dict[str, list[dict]] = {}
    base = base_url if base_url.endswith("/") else base_url + "/"
    for wheel in sorted(wheels, key=lambda w: w.name):
        checksums.verify_sidecar(wheel)  # a <wheel>.sha256 beside it must still match
        digest = checksums.sha256_file(wheel)
        meta = _metadata(wheel)
        out.setdefault(variant(tagging.read_build_info(wheel)), []).append(
            {
                "file": wheel.name,
                "url": base + urllib.parse.quote(wheel.name),
                "sha256": digest,
                "requires_python": meta.get("Requires-Python"),
            }
        )
    return out


def _page(title: str, body: list[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html>\n<head><meta name="pypi:repository-version" content="1.0">'
        f"<title>{html.escape(title)}</title></head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n"
    )


def project_page(items: list[dict]) -> str:
    """The PEP 503 project page: one anchor per wheel, URL with its #sha256= fragment."""
    links = []
    for e in items:
        rp = f' data-requires-python="{html.escape(e["requires_python"])}"' if e["requires_python"] else ""
        links.append(f'<a href="{html.escape(e["url"])}#sha256={e["sha256"]}"{rp}>{html.escape(e["file"])}</a><br>')
    return _page(f"Links for {PROJECT}", [f"<h1>Links for {PROJECT}</h1>", *links])


def write(wheels: list[Path], out: Path, base_url: str, site_url: str = "") -> dict[str, list[dict]]:
    """Write the indexes of `wheels` into `out` (a new folder, written under a temporary name and
    renamed at the end); returns :func:`entries`. `site_url`: where `out` will be served, for the
    pip lines of the overview page (empty: relative). ReleaseError when `out` exists."""
    out = Path(out)
    if out.exists():
        raise ReleaseError(f"{out} already exists; the index is written once. Remove it or pass another --out")
    for sums in sorted({w.parent / "SHA256SUMS" for w in wheels}):
        if sums.is_file():
            checksums.verify_sha256sums(sums)
    return write_entries(entries(wheels, base_url), out, site_url)


def write_entries(found: dict[str, list[dict]], out: Path, site_url: str = "") -> dict[str, list[dict]]:
    """Write the pages of `found` ({variant: [entry]}) into the new folder `out` (see :func:`write`)."""
    out = Path(out)
    if out.exists():
        raise ReleaseError(f"{out} already exists; the index is written once. Remove it or pass another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        rows = []
        for name, items in sorted(found.items()):
            project = tmp / name / "simple" / PROJECT
            project.mkdir(parents=True)
            (project / "index.html").write_text(project_page(items), encoding="utf-8")
            root = _page("Simple index", [f'<a href="{PROJECT}/">{PROJECT}</a><br>'])
            (project.parent / "index.html").write_text(root, encoding="utf-8")
            line = wheel_install.install_line(site_url or ".", name)
            rows.append(
                f"<li><code>{html.escape(name)}</code>: <code>{html.escape(line)}</code> "
                f"({len(items)} wheel{'s' * (len(items) != 1)})</li>"
            )
        overview = _page(f"{PROJECT} wheel indexes", [f"<h1>{PROJECT} wheel indexes</h1>", "<ul>", *rows, "</ul>"])
        (tmp / "index.html").write_text(overview, encoding="utf-8")
        (tmp / "index.json").write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, out)
        out.chmod(0o755)  # mkdtemp made it 0700; a web server or another user reads it
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m release.ship.index", description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--wheels", type=Path, help="the release folder (or any folder of wheels)")
    src.add_argument("--published", type=Path, metavar="RELEASES.jsonl", help="every published release (index.yml)")
    src.add_argument("--list-tags", type=Path, metavar="RELEASES.jsonl", help="print the published release tags")
    p.add_argument("--sums-dir", type=Path, help="with --published: <dir>/<tag>/SHA256SUMS of each release")
    p.add_argument("--out", type=Path, help="folder to create with the indexes")
    p.add_argument("--base-url", help="URL of the folder the wheels are downloaded from (default: GitHub release)")
    p.add_argument("--repo", help="OWNER/NAME of the GitHub release (default $GITHUB_REPOSITORY)")
    p.add_argument(
        "--site-url",
        help="URL --out is served at, for the overview's pip lines (default: release.index_url of --repo or "
        "$GITHUB_REPOSITORY; none outside a workflow)",
    )
    p.add_argument(
        "--pages-of", metavar="OWNER/NAME", help="refuse unless --site-url is the index URL of this repository"
    )
    args = p.parse_args(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        from release.ship import gates  # the release list reader (gates imports nothing of this module)

        if args.list_tags:
            for tag in published_tags(gates.read_releases(args.list_tags)):
                print(tag)
            return 0
        if args.out is None:
            raise ReleaseError("--out is required: the folder to create with the indexes")
        repo = repo_of(args.repo)
        site = args.site_url
        if site is None:
            site = index_url.check_for_tag(repo) if repo else ""
        if args.pages_of and index_url.check_for_tag(args.pages_of) != site.rstrip("/") + "/":
            raise ReleaseError(
                f"{args.pages_of}'s package index is {index_url.check_for_tag(args.pages_of)}, but the overview "
                f"would name {site or 'no site'} (--site-url); drop --site-url or pass that URL"
            )
        if args.published:
            if args.sums_dir is None or repo is None:
                raise ReleaseError("--published needs --sums-dir DIR and --repo OWNER/NAME (or $GITHUB_REPOSITORY)")
            found = write_entries(published_entries(gates.read_releases(args.published), args.sums_dir, repo),
                                  args.out, site)  # fmt: skip
        else:
            wheels = sorted(w for w in args.wheels.glob("flash_attn-*.whl") if not w.name.startswith("."))
            if not wheels:
                raise ReleaseError(f"no flash_attn wheels in {args.wheels}")
            version = wheels[0].name.split("-")[1].split("+")[0]
            base = args.base_url or default_base_url(version, args.repo)
            found = write(wheels, args.out, base, site)
        for name, items in sorted(found.items()):
            print(f"release: index {args.out / name / 'simple'} ({len(items)} wheel(s))", flush=True)
        return 0

    return run_main(body, prog="release.ship.index")


if __name__ == "__main__":
    sys.exit(main())
