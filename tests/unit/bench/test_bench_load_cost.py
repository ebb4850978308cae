"""bench/load_cost.py on CPU: ELF section sizes, run order, statistics, the report, and a run
whose child cannot load anything (no GPU here)."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path

import bench_load_cost as lc
import pytest


def _write_elf64(path: Path, sections: dict[str, bytes]) -> None:
    """A minimal little-endian ELF64 file with the given sections (plus the null and .shstrtab ones)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [*sections, ".shstrtab"])
    body = b"".join(sections.values())
    data_off = 64
    strtab_off = data_off + len(body)
    shoff = strtab_off + len(names)
    headers = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    name_off, off = 1, data_off
    for n, content in sections.items():
        headers.append(struct.pack("<IIQQQQIIQQ", name_off, 1, 0, 0, off, len(content), 0, 0, 1, 0))
        name_off += len(n) + 1
        off += len(content)
    headers.append(struct.pack("<IIQQQQIIQQ", name_off, 3, 0, 0, strtab_off, len(names), 0, 0, 1, 0))
    ident = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(headers), len(headers) - 1)
    path.write_bytes(ehdr + body + names + b"".join(headers))


def test_elf_section_sizes_of_a_synthetic_file(tmp_path):
    path = tmp_path / "_C_custom.so"
    _write_elf64(path, {".text": b"\x90" * 100, ".nv_fatbin": b"\1" * 4096})
    sizes = lc.elf_section_sizes(path)
    assert sizes[".nv_fatbin"] == 4096 and sizes[".text"] == 100
    (tmp_path / "not_elf.so").write_bytes(b"hello world, not an ELF file at all")
    assert lc.elf_section_sizes(tmp_path / "not_elf.so") == {}


def test_elf_section_sizes_agree_with_readelf():
    readelf = shutil.which("readelf")
    libdir = Path(sysconfig.get_config_var("LIBDIR") or "/usr/lib")
    candidates = sorted(libdir.glob("libpython3*.so*")) + sorted(Path("/usr/lib/x86_64-linux-gnu").glob("libz.so*"))
    if os.name == "nt":
        pytest.skip("reads ELF sections with readelf: not on Windows")
    assert readelf and candidates, "needs readelf (binutils) and a shared library to read"
    lib = candidates[0].resolve()
    out = subprocess.run([readelf, "-S", "-W", str(lib)], capture_output=True, text=True, check=True).stdout
    expected = {}
    for m in re.finditer(r"\]\s+(\.\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", out):
        expected[m.group(1)] = expected.get(m.group(1), 0) + int(m.group(2), 16)
    sizes = lc.elf_section_sizes(lib)
    assert expected and {k: sizes.get(k) for k in expected} == expected


def test_summarise_runs_skips_failures():
    runs = [
        {"ready_s": 3.0, "first_call_s": 0.2},
        {"ready_s": 5.0, "first_call_s": 0.4},
        {"ready_s": 4.0, "first_call_s": 0.3},
        {"ready_s": None, "error": "boom"},
    ]
    s = lc.summarise_runs(runs)
    assert s["runs_ok"] == 3 and s["runs_failed"] == 1
    assert s["ready_s"]["median"] == 4.0 and s["first_call_s"]["median"] == 0.3
    assert "import_torch_s" not in s


def test_render_markdown_compares_to_the_first_build():
    def build(label, size, fatbin, ready, first):
        runs = [{"ready_s": ready, "first_call_s": first, "import_flash_attn_s": 0.1}]
        return {
            "label": label,
            "sizes": {"bytes": size, "nv_fatbin_bytes": fatbin, "fatbin_compression": label},
            "summary": lc.summarise_runs(runs),
            "runs": runs,
            "warmup": [],
        }

    record = {
        "machine": {"notes": []},
        "reps": 1,
        "warmup_runs": 1,
        "wall_s": 20.0,
        "shape": {"dtype": "fp16", "batch": 2, "seqlen": 1024, "heads": 8, "head_dim": 64, "causal": False},
        "builds": [build("none", 300 * 2**20, 290 * 2**20, 4.0, 0.5), build("size", 100 * 2**20, 90 * 2**20, 4.2, 0.7)],
    }
    md = lc.render_markdown(record)
    assert "| none | none | 300.0 | 290.0 | 4.000 | 4.000 |" in md
    assert "- `size`: .so size 0.33x, ready +200 ms, import_flash_attn +0 ms, first_call +200 ms" in md


def test_cli_child_failure_is_reported(tmp_path):
    lib_dir = tmp_path / "b"
    lib_dir.mkdir()
    _write_elf64(lib_dir / "_C_custom.so", {".nv_fatbin": b"\0" * 1000})
    (lib_dir / "build_info_custom.json").write_text(json.dumps({"group": "custom", "fatbin_compression": "none"}))
    proc = subprocess.run(
        [
            sys.executable,
            str(lc.__file__),
            "--out",
            str(tmp_path / "out"),
            "--build",
            f"none={lib_dir}",
            "--reps",
            "1",
            "--warmup-runs",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    record = json.loads((tmp_path / "out" / "load_cost.json").read_text())
    b = record["builds"][0]
    assert b["sizes"]["nv_fatbin_bytes"] == 1000 and b["sizes"]["fatbin_compression"] == "none"
    assert b["summary"]["runs_failed"] == 1 and "error" in b["runs"][0]
    assert "## Errors" in (tmp_path / "out" / "load_cost.md").read_text()


FAKE_TORCH = """
float16, bfloat16 = "fp16", "bf16"


def randn(*args, **kwargs):
    return object()


class cuda:
    @staticmethod
    def synchronize():
        pass
"""

FAKE_FLASH_ATTN = """
import time

from . import _loader

_calls = []


def build_info():
    return {"fatbin_compression": "size", "kernel_set": "ci"}


def flash_attn_func(q, k, v, causal=False):
    _calls.append(1)
    time.sleep(0.4 if len(_calls) == 1 else 0.0)  # the first call loads the module
"""


def test_run_once_protocol_with_fake_modules(tmp_path):
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(FAKE_TORCH)
    (site / "flash_attn").mkdir()
    (site / "flash_attn" / "__init__.py").write_text(FAKE_FLASH_ATTN)
    (site / "flash_attn" / "_loader.py").write_text("class STATE:\n    library = '/x/_C_custom.so'\n")
    target = lc.bc.BuildTarget(label="fake", kind="install_dir", source=str(site), pythonpath=[str(site)])
    run = lc.run_once(target, ["--seqlen", "128"], timeout_s=120)
    assert "error" not in run, run
    assert run["returncode"] == 0 and run["fatbin_compression"] == "size" and run["library"] == "/x/_C_custom.so"
    assert run["first_call_s"] >= 0.4 > run["second_call_s"]
    # the parent stops its clock at the first call, before the second one and the exit
    assert run["first_call_s"] <= run["ready_s"] <= run["exit_s"]
    assert 0 <= run["python_start_s"] < run["ready_s"]


def test_run_once_times_out(tmp_path):
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("import time\ntime.sleep(60)\n")
    target = lc.bc.BuildTarget(label="hang", kind="install_dir", pythonpath=[str(site)])
    run = lc.run_once(target, [], timeout_s=3)
    assert "killed after 3 s" in run["error"] and run["exit_s"] < 30
