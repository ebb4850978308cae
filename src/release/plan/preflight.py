"""Preflight of a release: everything the link jobs will download exists, checked before any shard starts.

``PYTHONPATH=src python3 -m release.plan.preflight --matrix link.json`` (release.yml's matrix job, right
after ``nox -s matrix``) checks, for every entry of the link matrix (release.plan.matrix):

- each torch wheel the job installs, ``torch==<torch>`` and, for a stable-ABI entry, ``torch==<torch_newest>``
  (its second smoke test), for the entry's Python and platform, is listed on the entry's PyTorch index
  (``torch_index``: the PEP 503 page ``<index>/torch/``);
- the container image of a Linux entry exists (a registry manifest ``HEAD``, with the anonymous pull
  token the registry's ``WWW-Authenticate`` header names: Docker Hub and GHCR both work so);
- the NVIDIA redistributable manifest a Windows entry installs its toolkit from
  (release.windows.cuda_redist: ``redistrib_<cuda_full>.json``) exists.

Without it the first such failure came in a link job, after the 4-6 hours of shards. Each URL is checked
once; every missing file is listed, one per line, after ``error:``, and the command exits 2. A network
error is retried, then reported as such (the run stops: nothing was checked). Stdlib only (urllib), so it
runs with the runner's python3 before anything is installed; tests pass a fake ``fetch``.
"""

from __future__ import annotations

import argparse
import html.parser
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from release.errors import ReleaseError, run_main
from release.windows import cuda_redist

# fetch(url, method, headers) -> (HTTP status, response headers lowercased, body); raises OSError on a
# network failure (never for an HTTP status).
Fetch = Callable[[str, str, dict], tuple[int, dict, bytes]]
MANIFEST_ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
RETRY_DELAYS = (5, 20)


@dataclass(frozen=True)
class Need:
    """One file a link job needs: `what` (for the error line) and how to find it."""

    kind: str  # "torch", "image" or "cuda"
    what: str
    url: str
    file: str = ""  # torch: the wheel file name pattern's prefix; else ""
    platform: str = ""  # torch: "linux" or "windows"


def http_fetch(
    url: str, method: str = "GET", headers: dict | None = None, timeout: float = 30
) -> tuple[int, dict, bytes]:
    """The real :data:`Fetch`: urllib, an HTTP error status returned, not raised."""
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read() if method != "HEAD" else b""
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in (e.headers or {}).items()}, b""


def _retrying(fetch: Fetch, sleep=time.sleep) -> Fetch:
    def call(url: str, method: str = "GET", headers: dict | None = None):
        for attempt in range(len(RETRY_DELAYS) + 1):
            try:
                return fetch(url, method, headers or {})
            except OSError as e:
                if attempt == len(RETRY_DELAYS):
                    raise ReleaseError(f"preflight cannot reach {url} ({e}); re-run the matrix job") from None
                sleep(RETRY_DELAYS[attempt])
        raise AssertionError("unreachable")

    return call


def _wheel_platform(os_name: str) -> str:
    return "windows" if os_name.startswith("windows") else "linux"


def needs(entries: list[dict]) -> list[Need]:
    """The files the link `entries` will download, each once, in a stable order."""
    out: dict[tuple, Need] = {}
    for e in entries:
        py = "cp" + str(e["python"]).replace(".", "")
        plat = _wheel_platform(e["os"])
        index = e["torch_index"].rstrip("/")
        torches = [e["torch"]] + ([e["torch_newest"]] if e.get("torch_abi") == "stable" else [])
        for torch in torches:
            prefix = f"torch-{torch}+{e['cu']}-{py}-{py}-"
            what = f"torch {torch}+{e['cu']} for {py} {plat} on {index}/"
            out.setdefault(("torch", index, prefix, plat), Need("torch", what, f"{index}/torch/", prefix, plat))
        if e.get("container"):
            out.setdefault(("image", e["container"]), Need("image", f"image {e['container']}", e["container"]))
        if plat == "windows":
            url = f"{cuda_redist.NVIDIA_REDIST}redistrib_{e['cuda_full']}.json"
            out.setdefault(("cuda", url), Need("cuda", f"CUDA {e['cuda_full']} redistributables ({url})", url))
    return list(out.values())


class _Links(html.parser.HTMLParser):
    """The anchor texts of a PEP 503 page (the file names)."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []
        self._in_a = False

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._in_a = True
            href = dict(attrs).get("href") or ""
            self.names.append(urllib.parse.unquote(href.split("#")[0].rsplit("/", 1)[-1]))

    def handle_endtag(self, tag):
        self._in_a = self._in_a and tag != "a"


def wheel_names(page: bytes) -> set[str]:
    """File names a PEP 503 simple page links (from each href's last path segment, unquoted)."""
    p = _Links()
    p.feed(page.decode("utf-8", "replace"))
    return set(p.names)


def _platform_ok(name: str, prefix: str, plat: str) -> bool:
    rest = name[len(prefix) :] if name.startswith(prefix) else ""
    if plat == "windows":
        return rest == "win_amd64.whl"
    return bool(
        re.fullmatch(r"(?:manylinux[0-9a-z_]*_x86_64|linux_x86_64)(?:\.manylinux[0-9a-z_]*_x86_64)*\.whl", rest)
    )


def parse_image(ref: str) -> tuple[str, str, str]:
    """(registry host, repository, tag or digest) of an image reference; Docker Hub's short names expanded."""
    name, _, digest = ref.partition("@")
    first = name.split("/", 1)[0]
    if "/" in name and ("." in first or ":" in first or first == "localhost"):
        host, repo = name.split("/", 1)
    else:
        host, repo = "registry-1.docker.io", name if "/" in name else f"library/{name}"
    if digest:
        return host, repo, digest
    repo, _, tag = repo.partition(":")
    return host, repo, tag or "latest"


def _bearer(challenge: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', challenge))


def image_exists(ref: str, fetch: Fetch) -> bool:
    """True when the registry has a manifest for `ref` (HEAD; an anonymous token when it asks for one)."""
    host, repo, tag = parse_image(ref)
    url = f"https://{host}/v2/{repo}/manifests/{tag}"
    headers = {"Accept": MANIFEST_ACCEPT}
    status, got, _ = fetch(url, "HEAD", headers)
    if status == 401 and got.get("www-authenticate", "").lower().startswith("bearer "):
        params = _bearer(got["www-authenticate"])
        query = urllib.parse.urlencode({"service": params.get("service", ""), "scope": f"repository:{repo}:pull"})
        tstatus, _, body = fetch(f"{params.get('realm', '')}?{query}", "GET", {})
        try:
            token = json.loads(body or b"{}").get("token") if tstatus == 200 else None
        except ValueError:
            token = None
        if not token:
            return False
        status, _, _ = fetch(url, "HEAD", headers | {"Authorization": f"Bearer {token}"})
    return status == 200


def check(entries: list[dict], fetch: Fetch = http_fetch) -> list[str]:
    """Check every :func:`needs` of `entries`; returns the lines of what was found. ReleaseError listing
    every missing file (one per line) when any is missing."""
    fetch = _retrying(fetch)
    pages: dict[str, set[str]] = {}
    missing, found = [], []
    for need in needs(entries):
        if need.kind == "torch":
            if need.url not in pages:
                status, _, body = fetch(need.url, "GET", {"Accept": "text/html"})
                pages[need.url] = wheel_names(body) if status == 200 else set()
            hit = sorted(n for n in pages[need.url] if _platform_ok(n, need.file, need.platform))
            ok = bool(hit)
            note = hit[0] if hit else ""
        elif need.kind == "image":
            ok, note = image_exists(need.url, fetch), ""
        else:
            ok, note = fetch(need.url, "HEAD", {})[0] == 200, ""
        (found if ok else missing).append(f"{need.what}{': ' + note if note else ''}")
    if missing:
        raise ReleaseError(
            f"preflight: {len(missing)} file(s) the link jobs need do not exist (change the matrix in "
            "build-manifest.json release_matrix, or wait for the upload):\n  " + "\n  ".join(missing)
        )
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m release.plan.preflight", description=__doc__.split("\n")[0])
    p.add_argument("--matrix", type=Path, required=True, help="the link matrix JSON (nox -s matrix --stage link)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)

    def body() -> int:
        try:
            doc = json.loads(args.matrix.read_text(encoding="utf-8"))
            entries = doc["include"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ReleaseError(
                f"cannot read the link matrix {args.matrix} ({e}); write it with nox -s matrix"
            ) from None
        for line in check(entries):
            print(f"preflight: ok {line}", flush=True)
        return 0

    return run_main(body, prog="release.plan.preflight")


if __name__ == "__main__":
    sys.exit(main())
