"""One options table (issue 27): an option's default, range, choices or help text is one edit of
build-manifest.json, and CMake, release.compile.options, pyproject.toml's defines and docs/release.md follow.

Each test edits a copy of the manifest and points every reader at it (FLASH_ATTN_MANIFEST):
CMake configures a project of the option modules only, release.compile.options is imported in a fresh
interpreter, and release.plan.doc_tables renders a copy of the docs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from release import manifest
from release.compile import options
from release.errors import ReleaseError
from release.plan import doc_tables

ROOT = Path(__file__).resolve().parents[3]
THRESHOLD, FATBIN, NEW = "FLASH_ATTN_RESCALE_THRESHOLD", "FLASH_ATTN_FATBIN_COMPRESSION", "FLASH_ATTN_TEST_KNOB"


def _cmake() -> str | None:
    try:
        import cmake  # the PyPI package (the system cmake may be too old)

        exe = Path(cmake.CMAKE_BIN_DIR) / ("cmake.exe" if os.name == "nt" else "cmake")
        if exe.is_file():
            return str(exe)
    except ImportError:
        pass
    return shutil.which("cmake")


CMAKE = _cmake()


@pytest.fixture
def edited(tmp_path) -> Path:
    """A copy of the manifest with one option's default, range and doc changed, one enum's choices and
    default changed, and one option added (type, flag, choices, the sentence that refuses a value)."""
    data = manifest.load()
    threshold = data["options"][THRESHOLD]
    threshold.update(default="4.5", below=12, doc="edited A-1 threshold, below {below}")
    data["options"][FATBIN].update(choices=["none", "size", "extra"], default="extra")
    data["options"][NEW] = {
        "type": "enum",
        "choices": ["alpha", "beta"],
        "flag": "--test-knob",
        "default": "alpha",
        "invalid": "is not one of {choices}",
        "doc": "a knob added by one manifest edit: {choices}",
    }
    path = tmp_path / "build-manifest.json"
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def _configure(tmp_path: Path, manifest_file: Path, *defines: str) -> subprocess.CompletedProcess:
    """Configure a project that includes only the option modules, reading `manifest_file`; it prints
    each option's value as RESULT <name>=<value>."""
    src = tmp_path / "src"
    if not src.exists():
        src.mkdir()
        root = ROOT.as_posix()
        (src / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.28)\nproject(options_only NONE)\n"
            f'include("{root}/cmake/FlashAttnOptions.cmake")\ninclude("{root}/cmake/FlashAttnDeltas.cmake")\n'
            f"foreach(n {THRESHOLD} {FATBIN} {NEW})\n"
            '  message(STATUS "RESULT ${n}=${${n}}")\nendforeach()\n'
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASH_ATTN_")}
    env["FLASH_ATTN_MANIFEST"] = str(manifest_file)
    build = tmp_path / f"build{len(list(tmp_path.glob('build*')))}"
    cmd = [CMAKE, "-S", str(src), "-B", str(build), *(f"-D{d}" for d in defines)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def _results(proc: subprocess.CompletedProcess) -> dict[str, str]:
    assert proc.returncode == 0, proc.stderr
    return dict(re.findall(r"^-- RESULT (\w+)=(.*)$", proc.stdout, re.MULTILINE))


def _error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0, proc.stdout
    return " ".join(proc.stderr.split())


@pytest.mark.skipif(CMAKE is None, reason="no cmake")
def test_cmake_declares_and_checks_the_options_of_the_edited_table(tmp_path, edited):
    values = _results(_configure(tmp_path, edited))
    assert values == {THRESHOLD: "4.5", FATBIN: "extra", NEW: "alpha"}
    cache = next(tmp_path.glob("build*/CMakeCache.txt")).read_text()
    assert f"//edited A-1 threshold, below 12\n{THRESHOLD}:STRING=4.5" in cache
    assert _results(_configure(tmp_path, edited, f"{THRESHOLD}=11.5"))[THRESHOLD] == "11.5"
    refused = _error(_configure(tmp_path, edited, f"{THRESHOLD}=12"))
    assert f"{THRESHOLD}='12' must be a number from 0 to below 12, such as 4.5" in refused
    mode = _error(_configure(tmp_path, edited, f"{FATBIN}=balance"))
    assert f"{FATBIN}='balance' is not one of none, size, extra" in mode
    assert f"{NEW}='gamma' is not one of alpha, beta" in _error(_configure(tmp_path, edited, f"{NEW}=gamma"))
    # the job count: refused here by its entry's sentence (no check of its own in the compile pool)
    for jobs in ("0", "many"):
        with pytest.raises(ReleaseError) as python_said:
            options.check_value("FLASH_ATTN_JOBS", jobs)
        sentence = str(python_said.value).replace(" (--jobs)", "")
        assert sentence in _error(_configure(tmp_path, edited, f"FLASH_ATTN_JOBS={jobs}")), sentence


def test_release_options_follow_the_edited_table(edited):
    script = f"""
import json
from release.compile import options
from release.sessions import wheels
from release.errors import ReleaseError
out = {{"defaults": options.DEFAULTS, "help": wheels.parser().format_help(), "refused": []}}
for name, value in (("{THRESHOLD}", "12"), ("{THRESHOLD}", "11.5"), ("{FATBIN}", "balance"), ("{NEW}", "gamma")):
    try:
        options.check_value(name, value)
    except ReleaseError as e:
        out["refused"].append(str(e))
out["defines"] = wheels.parse(["--arch-group", "legacy", "--test-knob", "beta"], {{}}).cmake_defines()
print(json.dumps(out))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASH_ATTN_")}
    env.update(FLASH_ATTN_MANIFEST=str(edited), PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert [got["defaults"][name] for name in (THRESHOLD, FATBIN, NEW)] == ["4.5", "extra", "alpha"]
    assert got["refused"] == [
        f"{THRESHOLD}='12' (--rescale-threshold) must be a number from 0 to below 12, such as 4.5 (0: upstream's "
        "behaviour): A-1 lets the output grow by up to 2^T before rescaling, and fp16 holds at most 65504 < 2^16 "
        "(docs/deltas.md).",
        f"{FATBIN}='balance' (--fatbin-compression) is not one of none, size, extra",
        f"{NEW}='gamma' (--test-knob) is not one of alpha, beta",
    ]
    helptext = " ".join(got["help"].split())
    assert "edited A-1 threshold, below 12 (default 4.5)" in helptext and "--test-knob" in helptext
    assert got["defines"][NEW] == "beta" and got["defines"][THRESHOLD] == "4.5"


def test_pyproject_and_the_readme_follow_the_edited_table(tmp_path, edited):
    docs = tmp_path / "docs_copy"
    for rel in [*doc_tables.BLOCKS, *doc_tables.FILES]:
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, docs / rel)
    assert doc_tables.main(["--check", "--manifest", str(edited), "--root", str(docs)]) == 1
    assert doc_tables.main(["--manifest", str(edited), "--root", str(docs)]) == 0
    readme = (docs / "docs/release.md").read_text(encoding="utf-8")  # the options tables' home
    assert f"| `--rescale-threshold` | `{THRESHOLD}` | `4.5` | edited A-1 threshold, below 12 |" in readme
    assert f"| `--fatbin-compression` | `{FATBIN}` | `extra` | nvcc `--compress-mode`: none, size, extra " in readme
    assert f"| `--test-knob` | `{NEW}` | `alpha` | a knob added by one manifest edit: alpha, beta |" in readme
    tomllib = pytest.importorskip("tomllib")
    defines = tomllib.loads((docs / "pyproject.toml").read_text())["tool"]["scikit-build"]["cmake"]["define"]
    assert list(defines) == list(manifest.load(edited)["options"]) and defines[NEW] == ""


def test_the_checkouts_tables_are_rendered_from_the_manifest():
    # pyproject.toml's defines and docs/release.md's options table are the manifest's rendering (nox -s doc_tables)
    data = manifest.load()
    assert doc_tables.stale(ROOT, data) == []
    assert doc_tables.cmake_defines(data) in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert doc_tables.options_table(data) in (ROOT / "docs" / "release.md").read_text(encoding="utf-8")


def test_every_option_has_a_type_and_the_fields_its_type_needs():
    types = {"enum", "string", "list", "path", "bool", "integer", "number"}
    for name, entry in options.OPTIONS.items():
        assert entry["type"] in types, name
        assert entry.get("flag") is None or re.fullmatch(r"--[a-z][a-z-]+", entry["flag"]), name
        assert {"default", "doc"} <= set(entry), name
        if entry["type"] == "enum":
            assert options.choices(name) and entry["default"] in options.choices(name), name
        if entry["type"] == "bool":
            assert entry["default"] in ("ON", "OFF"), name
        if entry.get("invalid"):  # a checked value: its default passes its own check
            options.check_value(name, entry["default"])
    with pytest.raises(ReleaseError, match="from 0 to below 16, such as 8.0"):
        options.check_value(THRESHOLD, "16")
