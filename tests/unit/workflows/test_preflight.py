"""release.plan.preflight: every torch wheel, image and toolkit archive the link jobs need exists before
any shard starts; a fake fetch stands in for the network (download.pytorch.org, registries, NVIDIA)."""

from __future__ import annotations

import json

import pytest

from release.errors import ReleaseError
from release.plan import matrix, preflight

TOKEN_REALM = 'Bearer realm="https://auth.example/token",service="registry.example",scope="x"'


class FakeNet:
    """The files of the full release matrix, less whatever a test removes; records each request."""

    def __init__(self, entries: list[dict]):
        self.pages: dict[str, set[str]] = {}
        self.images: set[tuple[str, str, str]] = set()
        self.urls: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        for e in entries:
            py = "cp" + e["python"].replace(".", "")
            for torch in {e["torch"], e["torch_newest"]}:
                plat = "win_amd64" if e["os"].startswith("windows") else "manylinux_2_28_x86_64"
                name = f"torch-{torch}+{e['cu']}-{py}-{py}-{plat}.whl"
                self.pages.setdefault(e["torch_index"].rstrip("/") + "/torch/", set()).add(name)
            if e["container"]:
                self.images.add(preflight.parse_image(e["container"]))
            else:
                self.urls.add(
                    f"https://developer.download.nvidia.com/compute/cuda/redist/redistrib_{e['cuda_full']}.json"
                )

    def __call__(self, url: str, method: str, headers: dict):
        self.calls.append((method, url))
        if url in self.pages:
            links = "".join(
                f'<a href="https://files/{n.replace("+", "%2B")}#sha256=00">{n}</a>' for n in sorted(self.pages[url])
            )
            return 200, {}, f"<html><body>{links}</body></html>".encode()
        if url.startswith("https://auth.example/token?"):
            return 200, {}, json.dumps({"token": "t"}).encode()
        if "/v2/" in url and "/manifests/" in url:
            if headers.get("Authorization") != "Bearer t":
                return 401, {"www-authenticate": TOKEN_REALM}, b""
            host, rest = url[len("https://") :].split("/v2/", 1)
            repo, tag = rest.split("/manifests/")
            return (200 if (host, repo, tag) in self.images else 404), {}, b""
        return (200 if url in self.urls else 404), {}, b""


@pytest.fixture
def entries() -> list[dict]:
    return matrix.build_matrix()["include"]


def test_the_full_release_passes_and_each_url_is_fetched_once(entries):
    net = FakeNet(entries)
    found = preflight.check(entries, net)
    torch_pages = [c for c in net.calls if c[1].endswith("/torch/")]
    assert len(torch_pages) == len(set(torch_pages)) == len({e["torch_index"] for e in entries})
    # both torches of every stable entry (build and newest), both CUDA images, the Windows redistributables
    assert any("torch 2.15.0+cu132 for cp312 windows" in line for line in found)
    assert sum(line.startswith("image ") for line in found) == len({e["container"] for e in entries if e["container"]})
    assert sum(line.startswith("CUDA ") for line in found) == len(
        {e["cuda_full"] for e in entries if not e["container"]}
    )


def test_a_missing_windows_torch_is_named(entries):
    net = FakeNet(entries)
    page = net.pages["https://download.pytorch.org/whl/cu132/torch/"]
    page.discard("torch-2.15.0+cu132-cp312-cp312-win_amd64.whl")
    page.add("torch-2.15.0+cu132-cp311-cp311-win_amd64.whl")  # another Python does not count
    with pytest.raises(ReleaseError) as err:
        preflight.check(entries, net)
    lines = str(err.value).splitlines()
    assert lines[0].startswith("preflight: 1 file(s)")
    assert lines[1].strip() == "torch 2.15.0+cu132 for cp312 windows on https://download.pytorch.org/whl/cu132/"


def test_a_missing_image_and_cuda_archive_are_named(entries):
    net = FakeNet(entries)
    net.images.discard(("registry-1.docker.io", "pytorch/manylinux2_28-builder", "cuda13.2"))
    net.urls = {u for u in net.urls if "13.2" not in u}
    with pytest.raises(ReleaseError) as err:
        preflight.check(entries, net)
    text = str(err.value)
    assert "image pytorch/manylinux2_28-builder:cuda13.2" in text and "redistrib_13.2.2.json" in text
    assert "cuda13.0" not in text


def test_image_references():
    assert preflight.parse_image("pytorch/manylinux2_28-builder:cuda13.0") == (
        "registry-1.docker.io",
        "pytorch/manylinux2_28-builder",
        "cuda13.0",
    )
    assert preflight.parse_image("ubuntu") == ("registry-1.docker.io", "library/ubuntu", "latest")
    assert preflight.parse_image("ghcr.io/o/i@sha256:ab") == ("ghcr.io", "o/i", "sha256:ab")


def test_a_network_failure_is_retried_then_one_error(entries, monkeypatch):
    monkeypatch.setattr(preflight, "RETRY_DELAYS", (0, 0))

    def down(url, method, headers):
        raise OSError("connection refused")

    with pytest.raises(ReleaseError, match="preflight cannot reach .*connection refused"):
        preflight.check(entries, down)


def test_cli_exit_codes(entries, tmp_path, monkeypatch, capsys):
    doc = tmp_path / "link.json"
    doc.write_text(json.dumps({"include": entries}))
    monkeypatch.setattr(preflight, "http_fetch", FakeNet(entries))
    monkeypatch.setattr(preflight.check, "__defaults__", (FakeNet(entries),))
    assert preflight.main(["--matrix", str(doc)]) == 0
    assert "preflight: ok torch 2.11.0+cu130" in capsys.readouterr().out
    doc.write_text("{}")
    assert preflight.main(["--matrix", str(doc)]) == 2
    assert capsys.readouterr().err.startswith("error: cannot read the link matrix")
