"""Where the release's package index is served: the one rule, derived from the repository, never a placeholder.

``package_index`` of build-manifest.json holds no URL of its own by default (``"url": null``): the
index is the GitHub Pages site of the repository the release workflow runs in, ``GITHUB_REPOSITORY``
(:func:`pages_url`). A project served on a custom domain sets ``"url"`` and ``"repository"`` together:
that URL holds only for builds in that repository, so a fork's tag never ships wheels that send its
users to another project's index (release.ship.gates ``plan`` refuses such a tag in its first minute).

The wheel build (release.compile.builder.build_env) passes :func:`resolve` to CMake as
``FLASH_ATTN_INDEX_URL``; cmake/FlashAttnBuildInfo.cmake records it as the build info's
``install.index_url``, which ``python -m flash_attn`` prints as the install line. A build outside a
workflow (no ``GITHUB_REPOSITORY``) records "" and the install line is left out. Stdlib only: the
release gate imports it with the runner's python3 before anything is installed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from release import manifest
from release.errors import ReleaseError

ENV = "FLASH_ATTN_INDEX_URL"  # what CMake reads (cmake/FlashAttnBuildInfo.cmake)
# GitHub's rules for owner and repository names (letters, digits, - and _ . in the repository).
_REPO_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
# Any URL that still says it is a template: OWNER/REPO, <owner>, example hosts.
_PLACEHOLDER_RE = re.compile(r"OWNER|REPO\b|<[^>]*>|\{[^}]*\}|example\.(?:org|com)", re.IGNORECASE)


def check_repository(repo: str) -> str:
    """`repo` if it is ``owner/name`` as GitHub spells them; ReleaseError otherwise."""
    if not _REPO_RE.fullmatch(repo or "") or repo.split("/")[1] in (".", ".."):
        raise ReleaseError(f"{repo!r} is not a GitHub repository (owner/name); pass $GITHUB_REPOSITORY")
    return repo


def pages_url(repo: str) -> str:
    """The GitHub Pages site of `repo` (``owner/name``): ``https://<owner lowercased>.github.io/<name>/``,
    or ``https://<owner>.github.io/`` for the user/organization site repository ``<owner>/<owner>.github.io``
    (GitHub docs, "About GitHub Pages": types of sites). ReleaseError for a malformed `repo`."""
    owner, name = check_repository(repo).split("/")
    host = f"{owner.lower()}.github.io"
    return f"https://{host}/" if name.lower() == host else f"https://{host}/{name}/"


def is_placeholder(url: str) -> bool:
    """True when `url` is a template (OWNER/REPO and the like), which no wheel may record."""
    return bool(_PLACEHOLDER_RE.search(url or ""))


def configured(doc: Mapping | None = None) -> tuple[str | None, str | None]:
    """(url, repository) of ``package_index`` in the manifest; both None means: derive from the repository.

    ReleaseError when one is set without the other, or the URL is a placeholder or not https.
    """
    entry = (doc if doc is not None else manifest.load())["package_index"]
    url, repo = entry.get("url"), entry.get("repository")
    if (url is None) != (repo is None):
        raise ReleaseError(
            "package_index of build-manifest.json sets only one of url and repository: a custom index URL "
            'names the repository whose releases it serves ("repository": "owner/name"), or set both to null'
        )
    if url is not None:
        check_repository(repo)
        if is_placeholder(url) or not url.startswith("https://"):
            raise ReleaseError(
                f"package_index.url {url!r} of build-manifest.json is not a served https URL; set it to "
                "null (the repository's GitHub Pages site) or to the real index URL"
            )
        url = url.rstrip("/") + "/"
    return url, repo


def resolve(env: Mapping[str, str], doc: Mapping | None = None) -> str:
    """The index URL a build in environment `env` records: "" outside a workflow (no GITHUB_REPOSITORY),
    the manifest's URL in its own repository, else the repository's Pages site. Never a placeholder."""
    repo = env.get("GITHUB_REPOSITORY", "")
    if not repo:
        return ""
    url, owner_repo = configured(doc)
    if url is not None and repo.lower() == owner_repo.lower():
        return url
    return pages_url(repo)


def check_for_tag(repo: str, doc: Mapping | None = None) -> str:
    """The index URL a tag of `repo` publishes; ReleaseError when the manifest names a custom URL that
    belongs to another repository (a fork that kept the original's entry)."""
    url, owner_repo = configured(doc)
    check_repository(repo)
    if url is not None and repo.lower() != owner_repo.lower():
        raise ReleaseError(
            f"package_index.url of build-manifest.json is {url}, the index of {owner_repo}, but this release "
            f"runs in {repo}: its wheels would send users to another project's index. Set url and repository "
            f"to null (the index becomes {pages_url(repo)}) or to this repository's own index, commit, and tag again"
        )
    return url if url is not None else pages_url(repo)
