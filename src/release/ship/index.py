"""Static package indexes of a release: one PEP 503 "simple" index per wheel variant.

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
SHA256SUMS first (release.ship.checksums). Stdlib only: the release workflow's index job runs it with
the runner's python3 and nothing installed.
"""

from __future__ import annotations

import argparse
import email.parser
import html
import json
import os
import shutil
import sys
import tempfile
import urllib.parse
from pathlib import Path

from flash_attn_wheel_names import install as wheel_install
from flash_attn_wheel_names import label as wheel_label
from release import manifest
from release.errors import ReleaseError, run_main
from release.ship import checksums, tagging

PROJECT = "flash-attn"  # PEP 503 normalized name of the flash_attn distribution
# the release tag is release.ship.gates.expected_tag: v<version>-rev<REVISION of flash_attn_wheel_names.label>
GITHUB_DOWNLOAD = "https://github.com/{repo}/releases/download/v{version}-rev{revision}/"
SITE_URL = manifest.load()["package_index"]["url"]  # where the indexes are served (README, python -m flash_attn)


def variant(info: dict) -> str:
    """``cu13/legacy/stable`` or ``cu13/legacy/torch2.14.1``: the index a wheel of this build info is in
    (flash_attn_wheel_names.install's variant, the one the runtime names)."""
    major = str(info.get("cuda_version") or "").split(".")[0]
    if wheel_label.cuda_tag(info.get("cuda_version")) is None or not major.isdigit():
        raise ReleaseError(f"build info of group {info.get('group')!r} has no CUDA version; rebuild the wheel")
    stable = wheel_label.torch_abi(info) == wheel_label.TORCH_ABI_STABLE
    torch = None if stable else wheel_label.public_version(str(info.get("torch_version", "")))
    return wheel_install.variant(int(major), info["group"], torch, None)


def _metadata(wheel: Path) -> email.message.Message:
    with tagging.open_wheel(wheel) as zf:
        names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(names) != 1:
            raise ReleaseError(f"{wheel.name} has {len(names)} METADATA files; expected one. Rebuild it.")
        return email.parser.BytesParser().parsebytes(zf.read(names[0]))


def pages_url(repo: str) -> str:
    """The GitHub Pages site of a project repository: ``https://<owner>.github.io/<name>/`` (the owner
    lowercased, as GitHub's host names are)."""
    owner, _, name = repo.partition("/")
    return f"https://{owner.lower()}.github.io/{name}/"


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
    found = entries(wheels, base_url)
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
    p.add_argument("--wheels", type=Path, required=True, help="the release folder (or any folder of wheels)")
    p.add_argument("--out", type=Path, required=True, help="folder to create with the indexes")
    p.add_argument("--base-url", help="URL of the folder the wheels are downloaded from (default: GitHub release)")
    p.add_argument("--repo", help="OWNER/NAME of the GitHub release (default $GITHUB_REPOSITORY)")
    p.add_argument(
        "--site-url", default=SITE_URL, help=f"URL --out is served at (default package_index.url, {SITE_URL})"
    )
    p.add_argument(
        "--pages-of", metavar="OWNER/NAME", help="refuse unless --site-url is the GitHub Pages site of this repository"
    )
    args = p.parse_args(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        if args.pages_of and pages_url(args.pages_of) != args.site_url.rstrip("/") + "/":
            raise ReleaseError(
                f"{args.pages_of}'s GitHub Pages site is {pages_url(args.pages_of)}, but the README and "
                f"`python -m flash_attn` name {args.site_url} (package_index.url of build-manifest.json): set it "
                "to the Pages site before a release publishes its indexes"
            )
        wheels = sorted(w for w in args.wheels.glob("flash_attn-*.whl") if not w.name.startswith("."))
        if not wheels:
            raise ReleaseError(f"no flash_attn wheels in {args.wheels}")
        version = wheels[0].name.split("-")[1].split("+")[0]
        base = args.base_url or default_base_url(version, args.repo)
        found = write(wheels, args.out, base, args.site_url)
        for name, items in sorted(found.items()):
            print(f"release: index {args.out / name / 'simple'} ({len(items)} wheel(s))", flush=True)
        return 0

    return run_main(body, prog="release.ship.index")


if __name__ == "__main__":
    sys.exit(main())
