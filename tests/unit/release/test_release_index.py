"""Static PEP 503 indexes of a release, one per (CUDA major, arch group, torch ABI) (release.ship.index).

Real: pip installing from a generated ``file://`` index into a fresh venv, and refusing a wheel whose
``#sha256=`` fragment does not match. Fakes: tiny flash_attn wheels (release_fakes.make_wheel,
tagged with release.compile.tagging), installed with ``--no-deps``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from release_fakes import build_info, make_wheel

from flash_attn_wheel_names import install as wheel_install
from release.compile import tagging
from release.errors import ReleaseError
from release.ship import index, publish

STABLE = {"torch_abi": "stable", "torch_min": "2.11"}
ENV = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}


@pytest.fixture
def release(tmp_path):
    """A folder with three tagged wheels: legacy and blackwell stable-ABI, legacy for torch 2.14.1."""
    folder = tmp_path / "release"
    for k, (group, extra) in enumerate((("legacy", STABLE), ("blackwell", STABLE), ("legacy", {}))):
        raw = make_wheel(tmp_path / f"raw{k}", group=group, info=build_info(group, **extra))
        tagged = tagging.retag(raw, tmp_path / f"tagged{k}")
        folder.mkdir(exist_ok=True)
        shutil.copyfile(tagged, folder / tagged.name)
    return folder


def test_variants():
    assert index.variant(build_info("legacy", **STABLE)) == "cu13/legacy/stable"
    assert index.variant(build_info("blackwell", cuda_version="13.2.51", **STABLE)) == "cu13/blackwell/stable"
    assert index.variant(build_info("legacy")) == "cu13/legacy/torch2.14.1"  # one torch per exact index


def test_writes_one_index_per_variant_with_hashes(release, tmp_path):
    found = index.write(sorted(release.glob("*.whl")), tmp_path / "site", "https://example.org/dl/")
    assert sorted(found) == ["cu13/blackwell/stable", "cu13/legacy/stable", "cu13/legacy/torch2.14.1"]
    (entry,) = found["cu13/legacy/stable"]
    assert entry["url"] == "https://example.org/dl/" + entry["file"].replace("+", "%2B")
    page = (tmp_path / "site" / "cu13/legacy/stable/simple/flash-attn/index.html").read_text()
    assert f'#sha256={entry["sha256"]}"' in page and 'data-requires-python="&gt;=3.10"' in page
    assert ">flash-attn</a>" in (tmp_path / "site" / "cu13/legacy/stable/simple/index.html").read_text()
    overview = (tmp_path / "site/index.html").read_text()
    assert "pip install flash-attn --index-url ./cu13/legacy/stable/simple" in overview
    with pytest.raises(ReleaseError, match="already exists"):
        index.write(sorted(release.glob("*.whl")), tmp_path / "site", "https://example.org/dl/")


def test_the_site_must_be_the_repositorys_index(tmp_path, release, capsys):
    assert index.pages_url("SomeOne/wheels") == "https://someone.github.io/wheels/"
    argv = ["--wheels", str(release), "--out", str(tmp_path / "site"), "--base-url", "https://x/"]
    assert index.main([*argv, "--pages-of", "someone/wheels", "--site-url", "https://other.github.io/w"]) == 2
    assert "someone/wheels's package index is" in capsys.readouterr().err and not (tmp_path / "site").exists()
    assert index.main([*argv, "--pages-of", "someone/wheels", "--site-url", "https://someone.github.io/wheels"]) == 0
    # no --site-url: the repository's own index, derived
    assert index.main([*argv[:3], str(tmp_path / "site2"), *argv[4:], "--repo", "someone/wheels"]) == 0
    overview = (tmp_path / "site2" / "index.html").read_text()
    assert "--index-url https://someone.github.io/wheels/cu13/" in overview


def test_default_base_url_is_the_github_release():
    url = index.default_base_url("2.8.3.post2", env={"GITHUB_REPOSITORY": "someone/flash-attn-wheels"})
    assert url == "https://github.com/someone/flash-attn-wheels/releases/download/v2.8.3.post2-rev1/"
    with pytest.raises(ReleaseError, match="--repo OWNER/NAME"):
        index.default_base_url("2.8.3.post2", env={})


def pip_install(tmp_path, simple, *extra):
    venv = tmp_path / "venv"
    if not venv.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-cache-dir",
           "--disable-pip-version-check", "--index-url", simple.as_uri(), *extra, "flash-attn"]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=tmp_path), python


@pytest.mark.parametrize("group", ["legacy", "blackwell"])
def test_pip_installs_the_groups_wheel_from_the_index(release, tmp_path, group):
    index.write(sorted(release.glob("*.whl")), tmp_path / "site", release.as_uri() + "/")
    proc, python = pip_install(tmp_path, tmp_path / "site" / f"cu13/{group}/stable/simple")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    show = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('flash-attn'))"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert show.stdout.strip() == f"2.8.3.post2+cu130torchstable2.11.{group}.rev1"


def test_pip_refuses_a_wheel_whose_hash_differs(release, tmp_path):
    index.write(sorted(release.glob("*.whl")), tmp_path / "site", release.as_uri() + "/")
    page = tmp_path / "site/cu13/legacy/stable/simple/flash-attn/index.html"
    (entry,) = json.loads((tmp_path / "site/index.json").read_text())["cu13/legacy/stable"]
    page.write_text(page.read_text().replace(entry["sha256"], "0" * 64))
    proc, _ = pip_install(tmp_path, page.parent.parent)
    assert proc.returncode != 0
    assert "DO NOT MATCH THE HASHES" in proc.stdout + proc.stderr


def test_release_session_writes_the_index_beside_the_release(release, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_REPOSITORY", "someone/wheels")
    for w in release.glob("*.whl"):  # the wheel session's sidecars
        from release import checksums

        checksums.write_sidecar(w)
    out = tmp_path / "dist" / "release-x"
    code = publish.main(["--wheels", str(release), "--out", str(out), "--allow-missing-reports",
                         "--reports", str(tmp_path / "none")])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    page = (tmp_path / "dist/release-x-index/cu13/legacy/torch2.14.1/simple/flash-attn/index.html").read_text()
    url = "https://github.com/someone/wheels/releases/download/v2.8.3.post2-rev1/"
    assert url + "flash_attn-2.8.3.post2%2Bcu130torch2.14.1" in page


def test_readme_gives_the_install_line_of_every_released_group():
    from release import _paths, manifest

    readme = (_paths.REPO_ROOT / "README.md").read_text(encoding="utf-8")
    # the site is the repository's (release.index_url): the README names it by its form, not a fixed URL
    assert manifest.load()["package_index"]["url"] is None
    for group in ("legacy", "blackwell"):
        line = wheel_install.install_line("SITE", wheel_install.variant(13, group, None, None))
        tail = line.split("SITE", 1)[1]
        assert re.search(r"    pip install flash-attn --index-url https://\S+" + re.escape(tail) + " ", readme), line


def test_release_session_without_a_repo_says_how_to_get_the_index(release, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    out = tmp_path / "dist" / "release-x"
    code = publish.main(["--wheels", str(release), "--out", str(out), "--allow-missing-reports",
                         "--reports", str(tmp_path / "none")])  # fmt: skip
    assert code == 0 and "no package index written: pass --repo OWNER/NAME" in capsys.readouterr().out
    assert out.is_dir() and not (tmp_path / "dist" / "release-x-index").exists()


def test_index_needs_only_the_standard_library():
    """The release workflow's index job runs it with the runner's python3, nothing installed."""
    from release import _paths

    code = "import sys, release.ship.index; "
    code += "bad = [m for m in ('packaging', 'wheel', 'rich', 'torch') if m in sys.modules]; "
    code += "sys.exit(f'imported {bad}' if bad else 0)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")} | {"PYTHONPATH": str(_paths.SRC_DIR)}
    proc = subprocess.run([sys.executable, "-s", "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
