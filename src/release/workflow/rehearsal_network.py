"""The network a hosted runner reaches, as the release rehearsal's runner Python sees it.

This machine reaches neither download.pytorch.org nor a container registry. The rehearsal installs
this module into the Python its jobs run (the venv standing in for ``actions/setup-python``) through a
``.pth`` file, so stdlib ``urllib.request.urlopen`` (release.plan.preflight, the only stdlib client of
the network among the rehearsed Linux steps) answers as those services would for what the rehearsal
holds, read from ``$REHEARSAL_NETWORK`` (JSON: {"images": [refs], "pages": {url: html}}):

- a URL of ``pages`` is that page: the torch project page as download.pytorch.org lists it (the
  rehearsal's torches for each CPython and manylinux). The index folder pip reads holds an empty page
  instead, so pip keeps the machine's torch and never tries to download a wheel the rehearsal lacks;
- another ``file://`` URL of a folder is its ``index.html``, as a web server serves an index folder;
- ``HEAD https://<registry>/v2/<repo>/manifests/<tag>`` is 200 for an image the rehearsal maps onto
  its fake image root, 404 for any other (the registry's answer for an image that does not exist);
- anything else is unreachable (URLError), as on this machine.

pip does not use urllib.request, so it is unaffected.
"""

from __future__ import annotations

import io
import json
import os
import urllib.error
import urllib.request
import urllib.response
from email.message import Message
from pathlib import Path
from urllib.parse import unquote, urlparse

PTH = "import release_rehearsal_network_shim\n"  # what the rehearsal writes into the venv's site-packages


def _config() -> dict:
    try:
        return json.loads(os.environ.get("REHEARSAL_NETWORK") or "{}")
    except ValueError:
        return {}


def _reference(host: str, path: str) -> str | None:
    """``repo:tag`` as an image reference (Docker Hub's default host and library/ dropped) of a manifest URL."""
    parts = path.split("/v2/", 1)[-1].split("/manifests/")
    if len(parts) != 2:
        return None
    repo, tag = parts
    if host == "registry-1.docker.io":
        return f"{repo.removeprefix('library/')}:{tag}"
    return f"{host}/{repo}:{tag}"


def urlopen(url, data=None, timeout=None, **kwargs):
    """urllib.request.urlopen for the rehearsal's network (module docstring)."""
    req = url if isinstance(url, urllib.request.Request) else urllib.request.Request(url)
    parsed = urlparse(req.full_url)
    pages = _config().get("pages", {})
    if req.full_url in pages:
        headers = Message()
        headers["Content-Type"] = "text/html"
        return urllib.response.addinfourl(io.BytesIO(pages[req.full_url].encode()), headers, req.full_url, 200)
    if parsed.scheme == "file":
        path = Path(unquote(parsed.path))
        if path.is_dir():
            path = path / "index.html"
        body = path.read_bytes()
        headers = Message()
        headers["Content-Type"] = "text/html"
        resp = urllib.response.addinfourl(io.BytesIO(body), headers, req.full_url, 200)
        return resp
    if parsed.scheme == "https" and "/manifests/" in parsed.path:
        ref = _reference(parsed.netloc, parsed.path)
        if ref in set(_config().get("images", [])):
            headers = Message()
            resp = urllib.response.addinfourl(io.BytesIO(b""), headers, req.full_url, 200)
            return resp
        raise urllib.error.HTTPError(req.full_url, 404, "manifest unknown", Message(), io.BytesIO(b""))
    raise urllib.error.URLError("the rehearsal's runner has no network but its fake index and registry")


def install(site_packages: Path) -> None:
    """Make the Python of `site_packages` use :func:`urlopen`: this module's own source as a shim module
    (it needs nothing of this project at startup) and a .pth file that imports it."""
    source = Path(__file__).read_text(encoding="utf-8")
    shim = source + "\n\nurllib.request.urlopen = urlopen\n"
    (site_packages / "release_rehearsal_network_shim.py").write_text(shim, encoding="utf-8")
    (site_packages / "release_rehearsal_network.pth").write_text(PTH, encoding="utf-8")
