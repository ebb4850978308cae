"""build-manifest.json is the one source of the build's tables.

The first tests edit one arch group entry in a temporary copy of the manifest, point every reader
at the copy with $FLASH_ATTN_MANIFEST and see the change in the CMake targets (`cmake -P`), the
release matrix, the runtime's "install the other wheel" message (fed with a build info the build's
own CMake code writes) and the docs' table, with no file of the checkout edited; one adds an arch group
and sees it in the nox sessions, presets, arch checks and messages. The rest check
what cannot read the manifest itself (presets, workflows, docs prose) against it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flash_attn import _build_info, _compat
from release import manifest
from release.plan import doc_tables

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "build-manifest.json"
DATA = manifest.load(MANIFEST)


def _cmake() -> str | None:
    try:
        import cmake  # the PyPI package (the system cmake may be too old)
    except ImportError:
        return None
    exe = Path(getattr(cmake, "CMAKE_BIN_DIR", "")) / ("cmake.exe" if os.name == "nt" else "cmake")
    return str(exe) if exe.is_file() else None


CMAKE = _cmake()
needs_cmake = pytest.mark.skipif(CMAKE is None, reason="the PyPI `cmake` package is not installed")


def _env(manifest_file: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != manifest.ENV}
    if manifest_file is not None:
        env[manifest.ENV] = str(manifest_file)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    return env


def _edited_copy(tmp_path: Path, edit) -> Path:
    data = copy.deepcopy(DATA)
    edit({g["name"]: g for g in data["arch_groups"]})
    path = tmp_path / "build-manifest.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def _cmake_targets(manifest_file: Path | None, group: str) -> str:
    proc = subprocess.run(
        [CMAKE, f"-DGROUP={group}", "-DCUDA_VERSION=13.0", "-P", str(ROOT / "tests/cmake/arch_group_targets.cmake")],
        capture_output=True,
        text=True,
        env=_env(manifest_file),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("-- RESULT OUT_CUDA_ARCHITECTURES=")]
    return line.split("=", 1)[1]


def _matrix(manifest_file: Path | None, group: str) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "release.plan.matrix", "--group", group],
        capture_output=True,
        text=True,
        env=_env(manifest_file),
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["include"]


def _build_info_from_cmake(manifest_file: Path | None, group: str, tmp_path: Path) -> dict:
    out = tmp_path / f"build_info_{group}_{'copy' if manifest_file else 'repo'}.json"
    proc = subprocess.run(
        [CMAKE, f"-DGROUP={group}", "-DCUDA_VERSION=13.0.88", f"-DOUT={out}", "-P",
         str(ROOT / "tests/cmake/build_info.cmake")],
        capture_output=True,
        text=True,
        env=_env(manifest_file),
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return _build_info.read(out)


def _checkout_fingerprint() -> dict[str, str]:
    files = [MANIFEST, ROOT / "CMakePresets.json", *(ROOT / rel for rel in doc_tables.BLOCKS)]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


@needs_cmake
def test_one_arch_group_change_reaches_every_reader(tmp_path):
    before = _checkout_fingerprint()
    changed = _edited_copy(tmp_path, lambda groups: groups["legacy"].update(sms=[80, 86, 89, 90]))

    # CMake targets
    assert _cmake_targets(None, "legacy") == "80-real;89-real;90-real;90-virtual"
    assert _cmake_targets(changed, "legacy") == "80-real;86-real;89-real;90-real;90-virtual"

    # the release matrix
    assert {tuple(e["archs"]) for e in _matrix(None, "legacy")} == {(80, 89, 90)}
    assert {tuple(e["archs"]) for e in _matrix(changed, "legacy")} == {(80, 86, 89, 90)}

    # the runtime's "install the other wheel" message, from a build info the build's CMake code writes
    for manifest_file, sass in ((None, "sm_80, sm_89, sm_90"), (changed, "sm_80, sm_86, sm_89, sm_90")):
        info = _build_info_from_cmake(manifest_file, "blackwell", tmp_path)
        verdict = _compat.check_device(info, (8, 6), "NVIDIA A10")
        assert not verdict.ok and verdict.suggested_group == "legacy"
        assert f"'legacy' arch group (SASS {sass})" in verdict.message, verdict.message
        assert "Install the .legacy wheel" in verdict.message

    # the docs' table: the checkout's README is current for its manifest and stale for the copy;
    # `nox -s doc_tables` (release.plan.doc_tables) on a copy of the docs writes the changed row
    row = "| `legacy` | sm_80, sm_86, sm_89, sm_90 | compute_90 |"
    assert row in doc_tables.arch_groups_table(manifest.load(changed))
    assert doc_tables.main(["--check"]) == 0
    assert doc_tables.main(["--check", "--manifest", str(changed)]) == 1
    docs = tmp_path / "docs_copy"
    for rel in doc_tables.rendered_files():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_bytes((ROOT / rel).read_bytes())
    assert doc_tables.main(["--manifest", str(changed), "--root", str(docs)]) == 0
    assert row in (docs / "README.md").read_text(encoding="utf-8")
    assert doc_tables.main(["--check", "--manifest", str(changed), "--root", str(docs)]) == 0

    assert _checkout_fingerprint() == before, "a reader wrote into the checkout"


@needs_cmake
def test_a_ptx_change_reaches_cmake_matrix_build_info_and_docs(tmp_path):
    changed = _edited_copy(tmp_path, lambda groups: groups["blackwell"].update(ptx=120))
    assert _cmake_targets(changed, "blackwell") == "100f-real;120f-real;121-real;120-virtual"
    assert {e["ptx_arch"] for e in _matrix(changed, "blackwell")} == {120}
    assert _build_info_from_cmake(changed, "blackwell", tmp_path)["ptx_arch"] == 120
    assert "| `blackwell` | sm_100, sm_120, sm_121 | compute_120 |" in doc_tables.arch_groups_table(
        manifest.load(changed)
    )


@needs_cmake
def test_a_ptx_arch_outside_the_group_is_refused(tmp_path):
    changed = _edited_copy(tmp_path, lambda groups: groups["legacy"].update(ptx=100))
    proc = subprocess.run(
        [CMAKE, "-DGROUP=legacy", "-DCUDA_VERSION=13.0", "-P", str(ROOT / "tests/cmake/arch_group_targets.cmake")],
        capture_output=True,
        text=True,
        env=_env(changed),
        timeout=60,
    )
    assert proc.returncode != 0
    assert "ships PTX for 100, which is not one of its SMs" in " ".join(proc.stderr.split())


@needs_cmake
def test_cmake_names_a_missing_manifest_entry(tmp_path):
    data = copy.deepcopy(DATA)
    del data["archs"]["family_specific"]
    broken = tmp_path / "m.json"
    broken.write_text(json.dumps(data), encoding="utf-8")
    proc = subprocess.run(
        [CMAKE, "-DGROUP=legacy", "-DCUDA_VERSION=13.0", "-P", str(ROOT / "tests/cmake/arch_group_targets.cmake")],
        capture_output=True,
        text=True,
        env=_env(broken),
        timeout=60,
    )
    assert proc.returncode != 0
    assert "has no entry 'archs.family_specific.sms'" in " ".join(proc.stderr.split())


def test_a_pin_or_memory_figure_change_reaches_the_docs(tmp_path):
    data = copy.deepcopy(DATA)
    data["tool_pins"]["nox"] = "nox==2099.1.1"
    build = data["tool_pins"]["build"]
    data["tool_pins"]["build"] = ["cmake==9.9.9" if spec.startswith("cmake==") else spec for spec in build]
    data["build"]["nvcc_memory_gib"] = 11
    changed = tmp_path / "build-manifest.json"
    changed.write_text(json.dumps(data), encoding="utf-8")
    docs = tmp_path / "docs_copy"
    for rel in doc_tables.rendered_files():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_bytes((ROOT / rel).read_bytes())
    assert doc_tables.main(["--check", "--manifest", str(changed), "--root", str(docs)]) == 1
    assert doc_tables.main(["--manifest", str(changed), "--root", str(docs)]) == 0
    readme = (docs / "README.md").read_text(encoding="utf-8")
    reference = (docs / "docs/reference.md").read_text(encoding="utf-8")  # the README's reference material
    assert readme.count("nox==2099.1.1") == 1 and reference.count("nox==2099.1.1") == 1  # quick start, Windows
    assert "nox==" + DATA["tool_pins"]["nox"].split("==")[1] not in readme + reference
    assert "cmake==9.9.9 ninja==" in reference
    assert "(11 GiB per nvcc)" in reference
    assert "free memory / 11 GiB" in (docs / "docs/release.md").read_text(encoding="utf-8")  # the options table
    assert "(11 GiB per nvcc" in (docs / "docs/design.md").read_text(encoding="utf-8")
    gib = f"{DATA['build']['nvcc_memory_gib']} GiB"
    assert not [rel for rel in doc_tables.BLOCKS if gib in (docs / rel).read_text(encoding="utf-8")]


def test_the_docs_tables_are_current():
    assert doc_tables.stale(ROOT, DATA) == [], "run nox -s doc_tables"


def test_presets_match_the_manifest():
    """Each preset names a manifest group and kernel set, every released group has its preset, and
    no preset repeats an SM list or arch flag (CMake takes them from the manifest)."""
    presets = json.loads((ROOT / "CMakePresets.json").read_text(encoding="utf-8"))
    groups = manifest.arch_groups(DATA)
    visible = [p for p in presets["configurePresets"] if not p.get("hidden")]
    for preset in visible:
        variables = preset["cacheVariables"]
        assert variables["FLASH_ATTN_ARCH_GROUP"] in groups, preset["name"]
        assert variables["FLASH_ATTN_KERNEL_SET"] in DATA["kernels"]["sets"], preset["name"]
        assert "FLASH_ATTN_CUDA_ARCHS" not in variables and "CMAKE_CUDA_ARCHITECTURES" not in variables, preset["name"]
    text = json.dumps(presets)
    assert not re.findall(r"\b(?:sm_|compute_)\d+|\b\d{2,3}(?:;\d{2,3})+\b", text), "SMs belong in the manifest only"
    released = {name for name, g in groups.items() if g["released"]}
    by_name = {p["name"]: p["cacheVariables"]["FLASH_ATTN_ARCH_GROUP"] for p in visible}
    assert all(by_name.get(name) == name for name in released), (released, by_name)


def _option_rows(text: str) -> dict[str, str]:
    """CMake/env name -> default column of the options tables in a Markdown text."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"`FLASH_ATTN_\w+`", cells[1]):
            rows[cells[1].strip("`")] = cells[2]
    return rows


@pytest.mark.parametrize("doc", ["docs/release.md"])
def test_option_tables_state_the_manifest_defaults(doc):
    rows = _option_rows((ROOT / doc).read_text(encoding="utf-8"))
    assert len(rows) >= 8, rows
    for name, option in DATA["options"].items():
        if name not in rows:
            continue
        if option["default"]:  # an empty default is described in words ("the torch found", "—")
            first = re.match(r"`([^`]+)`", rows[name])
            assert first and first.group(1) == option["default"], (doc, name, rows[name], option["default"])
    jobs = rows.get("FLASH_ATTN_JOBS", "")
    assert f"{DATA['build']['nvcc_memory_gib']} GiB" in jobs, (doc, jobs)


_PIN_FILES = [".ci/run", "README.md", "docs/reference.md", "docs/ci.md", "docs/release.md", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / ".github" / "workflows").glob("*.yml"))]  # fmt: skip


def test_pins_written_outside_the_manifest_are_the_manifest_pins():
    pins = DATA["tool_pins"]
    pinned = dict(
        spec.split("==", 1) for spec in [pins["nox"], pins["ci_torch"], *pins["build"], *pins["test"], *pins["lint"]]
    )
    seen = 0
    for rel in _PIN_FILES:
        for name, version in re.findall(r"\b([A-Za-z][\w.-]*)==([0-9][\w.]*[0-9])", (ROOT / rel).read_text("utf-8")):
            if name in pinned:
                seen += 1
                assert version == pinned[name], f"{rel}: {name}=={version}, the manifest pins {pinned[name]}"
    assert seen, "no pin found at all: the pattern is broken"


def test_the_workflow_sizes_jobs_by_the_manifest_figure():
    text = (ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8")
    figures = set(re.findall(r"\)\s*/\s*(\d+)GB\)", text))  # ($total - 2GB) / 7GB)
    assert figures <= {str(DATA["build"]["nvcc_memory_gib"])}, figures


_PROSE = ["README.md", "docs/reference.md", "docs/release.md", "docs/ci.md", "docs/deltas.md",
          "docs/benchmarks.md",
          "src/kernels/apply_deltas.py"]  # fmt: skip


@pytest.mark.parametrize("rel", _PROSE)
def test_prose_mentions_agree_with_the_manifest(rel):
    """Docs prose that names a figure of the manifest names the manifest's figure."""
    text = (ROOT / rel).read_text(encoding="utf-8")
    version = DATA["upstream"]["version"]
    upstream = r"flash-attn(?:==| )(\d+\.\d+\.\d+(?:\.post\d+)?)\b|flash_attn-(\d[\w.]*)\.tar\.gz"
    for found in ("".join(m) for m in re.findall(upstream, text)):
        assert found == version, f"{rel}: upstream {found}, the manifest pins {version}"
    gib = str(DATA["build"]["nvcc_memory_gib"])
    for found in re.findall(r"(?:/ |\()(\d+) GiB(?: per nvcc)?", text):
        assert found == gib, f"{rel}: {found} GiB per nvcc, the manifest says {gib}"
    groups = manifest.arch_groups(DATA)
    for line in text.splitlines():
        for name, sms in re.findall(r"\b(legacy|blackwell)\b[^|\n]*?(sm_\d+(?:, sm_\d+)+)", line):
            listed = [int(x) for x in re.findall(r"\d+", sms)]
            assert listed == groups[name]["sms"], f"{rel}: {name} {listed} vs the manifest's {groups[name]['sms']}"


HOPPER = {"name": "hopper", "sms": [90], "ptx": 90, "released": False, "gpus": "H100 / H200 only"}


def _with_hopper(tmp_path: Path) -> Path:
    """A copy of the manifest with one more arch group, hopper (sm_90), before custom: the one edit that
    adding a group takes."""
    data = copy.deepcopy(DATA)
    data["arch_groups"].insert(len(data["arch_groups"]) - 1, HOPPER)
    path = tmp_path / "build-manifest.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def _python(manifest_file: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=_env(manifest_file), cwd=ROOT, timeout=120
    )


@needs_cmake
def test_adding_an_arch_group_is_one_manifest_edit(tmp_path, monkeypatch):
    """With $FLASH_ATTN_MANIFEST at a copy that adds hopper, the nox sessions, the presets, the CMake
    checker, the Python arch checks (which ask it) and the messages that name the groups all know it."""
    changed = _with_hopper(tmp_path)
    before = _checkout_fingerprint()

    # nox: wheel_hopper, archive_hopper (and its deprecated alias kernels_hopper), their help from the
    # group's fields (nox -l reads the copy)
    def sessions(manifest_file):
        proc = _python(manifest_file, "-m", "nox", "-l", "-f", str(ROOT / "noxfile.py"))
        assert proc.returncode == 0, proc.stderr
        return dict(re.findall(r"^[-*] (\w+) -> (.*)$", proc.stdout, re.MULTILINE))

    listed = sessions(changed)
    assert "sm_90: H100 / H200 only" in listed["wheel_hopper"] and "hopper kernel objects" in listed["archive_hopper"]
    assert listed["kernels_hopper"] == "(deprecated alias of archive_hopper)"
    assert not {"wheel_hopper", "archive_hopper", "kernels_hopper"} & set(sessions(None))

    # presets: rendered with a hopper preset; the checkout's file is stale for the copy
    presets = json.loads(doc_tables.cmake_presets(manifest.load(changed)))
    hopper = next(p for p in presets["configurePresets"] if p["name"] == "hopper")
    assert hopper["cacheVariables"] == {"FLASH_ATTN_ARCH_GROUP": "hopper", "FLASH_ATTN_KERNEL_SET": "release"}
    assert any(b["name"] == "hopper" for b in presets["buildPresets"])
    assert "CMakePresets.json" in doc_tables.stale(ROOT, manifest.load(changed))

    # the CMake checker (the configure's) and the Python checks, which ask it through cmake -P
    assert _cmake_targets(changed, "hopper") == "90-real;90-virtual"
    monkeypatch.setenv(manifest.ENV, str(changed))
    from release.compile import arch_rules
    from release.errors import ReleaseError

    assert arch_rules.check_archs("hopper", cuda_version="12.8") == [90]
    with pytest.raises(ReleaseError, match=r"Valid groups: blackwell, legacy, hopper, custom \(nox -s wheel_blackwell"):
        arch_rules.check_group("volta", f"({arch_rules.sessions_hint('wheel')})")

    # the session entry points: their help and their messages list the group
    proc = _python(changed, "-m", "release.sessions.wheels", "--arch-group", "volta")
    err = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and "Valid groups: blackwell, legacy, hopper, custom" in err, err
    assert "nox -s wheel_hopper, or nox -s wheel_custom" in err, err
    proc = _python(changed, "-m", "release.sessions.wheels", "--arch-group", "hopper", "--cuda-archs", "80")
    assert proc.returncode == 2 and "the hopper group has fixed archs" in proc.stderr, proc.stderr
    for module in (("release.sessions.wheels",), ("release.archive.archives", "build")):
        proc = _python(changed, "-m", *module, "--help")
        assert "blackwell, legacy, hopper, custom" in " ".join(proc.stdout.split()), proc.stdout
    # the runtime's "not built" message of a source checkout names the manifest's groups
    from flash_attn import _loader

    assert "group blackwell|legacy|hopper|custom)" in _loader.not_built_message([])

    assert _checkout_fingerprint() == before, "a reader wrote into the checkout"
