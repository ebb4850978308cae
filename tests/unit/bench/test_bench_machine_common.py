"""bench/machine.py and bench/bench_common.py on CPU: parsers, the machine record without a GPU,
statistics, Markdown tables and the build targets the GPU benchmarks load."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import zipfile

import bench_common as bc
import bench_machine as bm
import pytest

SMI_CSV = "NVIDIA H200, 580.95.05, 143771, 9.0, 00000000:19:00.0\nNVIDIA H200, 580.95.05, 143771, 9.0, [N/A]\n"
SMI_PLAIN = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.95.05              Driver Version: 580.95.05      CUDA Version: 13.0     |
"""


def test_parse_nvidia_smi():
    fields = ["name", "driver_version", "memory.total", "compute_cap", "pci.bus_id"]
    rows = bm.parse_nvidia_smi_csv(SMI_CSV, fields)
    assert rows[0] == {
        "name": "NVIDIA H200",
        "driver_version": "580.95.05",
        "memory.total": 143771,
        "compute_cap": "9.0",
        "pci.bus_id": "00000000:19:00.0",
    }
    assert rows[1]["pci.bus_id"] is None
    assert bm.parse_nvidia_smi_csv("garbage\n\n", fields) == []
    assert bm.parse_driver_cuda_version(SMI_PLAIN) == "13.0"
    assert bm.parse_driver_cuda_version("no header") is None


def test_parse_nvcc_meminfo_cpuinfo():
    nvcc = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
    assert bm.parse_nvcc_version(nvcc) == "13.0.88"
    assert bm.parse_nvcc_version("Cuda compilation tools, release 12.8") == "12.8"
    assert bm.parse_nvcc_version("") is None
    mem = bm.parse_meminfo("MemTotal:       131072000 kB\nMemFree:  1 kB\nMemAvailable:   65536000 kB\n")
    assert mem == {"total_gib": 125.0, "available_gib": 62.5}
    assert bm.parse_meminfo("") == {"total_gib": None, "available_gib": None}
    cpu = "processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\nprocessor\t: 1\nmodel name\t: other\n"
    assert bm.parse_cpu_model(cpu) == "AMD EPYC 9654 96-Core Processor"


def test_collect_without_gpu(monkeypatch):
    real_which = bm.shutil.which
    monkeypatch.setattr(bm.shutil, "which", lambda name: None if name == "nvidia-smi" else real_which(name))
    info = bm.collect()
    assert info["gpus"] == [] and info["gpu_name"] is None and info["driver_version"] is None
    assert any("nvidia-smi not found" in n for n in info["notes"])
    assert info["cpu_cores_logical"] == os.cpu_count()
    assert info["python"].count(".") == 2
    json.dumps(info)  # serialisable
    md = bm.markdown(info)
    assert md.startswith("- GPU: none found; driver ?")
    assert "note: nvidia-smi not found" in md


def test_collect_with_a_fake_nvidia_smi(monkeypatch, tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\ncase "$1" in --query-gpu=*) printf "%s" "$CSV";; *) printf "%s" "$PLAIN";; esac\n')
    smi.chmod(0o755)
    monkeypatch.setenv("CSV", SMI_CSV)
    monkeypatch.setenv("PLAIN", SMI_PLAIN)
    real_which = bm.shutil.which
    monkeypatch.setattr(bm.shutil, "which", lambda name: str(smi) if name == "nvidia-smi" else real_which(name))
    info = bm.collect()
    assert info["gpu_name"] == "NVIDIA H200" and info["gpu_count"] == 2
    assert info["driver_version"] == "580.95.05" and info["driver_cuda_version"] == "13.0"
    assert info["gpus"][0]["memory_total_mib"] == 143771 and info["gpus"][0]["compute_capability"] == "9.0"
    assert "- GPU: NVIDIA H200 (x2); driver 580.95.05 (CUDA 13.0)" in bm.markdown(info)


def test_percentile_and_summarize():
    assert bc.percentile([1, 2, 3, 4], 50) == 2.5
    assert bc.percentile([5], 90) == 5
    assert bc.percentile([0, 10], 10) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        bc.percentile([], 50)
    s = bc.summarize([3.0, 1.0, 2.0, 10.0])
    assert s == {"n": 4, "median": 2.5, "min": 1.0, "max": 10.0, "p10": 1.3, "p90": 7.9, "mean": 4.0}


def test_md_table():
    md = bc.md_table(["a", "b|c", "n"], [[1, None, 2.5], ["x|y", "z"]], "lcr")
    assert md == ("| a | b\\|c | n |\n|:--|:-:|--:|\n| 1 |  | 2.5 |\n| x\\|y | z |  |\n")
    with pytest.raises(ValueError):
        bc.md_table(["a"], [[1, 2]])
    with pytest.raises(ValueError):
        bc.md_table(["a", "b"], [], "l")
    assert bc.fmt(None) == "-" and bc.fmt(float("nan")) == "-" and bc.fmt(1.234, 1, "x") == "1.2x"


def test_write_results(tmp_path):
    j, m = bc.write_results(tmp_path / "r", "kernels", {"x": 1}, "# t\n")
    assert json.loads(j.read_text()) == {"x": 1} and m.read_text() == "# t\n"


# -- build targets ----------------------------------------------------------------------------------


def test_parse_target_arg():
    assert bc.parse_target_arg("none=/b/none") == ("none", "/b/none")
    assert bc.parse_target_arg("/b/size-build") == ("size-build", "/b/size-build")
    with pytest.raises(bc.TargetError):
        bc.parse_target_arg("a b=/x")


def test_resolve_targets(tmp_path):
    build = tmp_path / "cmake-build"
    build.mkdir()
    (build / "_C_custom.so").write_bytes(b"\x7fELF")
    (build / "build_info_custom.json").write_text(json.dumps({"group": "custom", "fatbin_compression": "none"}))
    t = bc.resolve_target("none", str(build), tmp_path / "scratch")
    assert t.kind == "library" and t.library == str(build / "_C_custom.so")
    env = t.env({"PYTHONPATH": "/old", "FLASH_ATTN_LIB": "/stale"})
    assert env["FLASH_ATTN_LIB"] == str(build / "_C_custom.so")
    assert env["PYTHONPATH"] == os.pathsep.join([str(bc.REPO_ROOT), "/old"])
    assert bc.read_build_info_near(t.library)["fatbin_compression"] == "none"

    lib_file = bc.resolve_target("lib", str(build / "_C_custom.so"), tmp_path)
    assert lib_file.kind == "library" and lib_file.library == t.library

    site = tmp_path / "site"
    (site / "flash_attn").mkdir(parents=True)
    (site / "flash_attn" / "__init__.py").write_text("")
    (site / "flash_attn" / "_C_legacy.cpython-312-x86_64-linux-gnu.so").write_bytes(b"")
    s = bc.resolve_target("site", str(site), tmp_path)
    assert s.kind == "install_dir" and s.library.endswith("_C_legacy.cpython-312-x86_64-linux-gnu.so")
    env = s.env({"FLASH_ATTN_LIB": "/stale"})
    assert "FLASH_ATTN_LIB" not in env and env["PYTHONPATH"] == str(site)

    wheel = tmp_path / "flash_attn-2.9.2-cp310-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("flash_attn/__init__.py", "")
        zf.writestr("flash_attn/_C_legacy.so", "x")
    w = bc.resolve_target("whl", str(wheel), tmp_path / "scratch")
    assert w.kind == "wheel" and w.pythonpath == [str(tmp_path / "scratch" / "whl")]
    assert (tmp_path / "scratch" / "whl" / "flash_attn" / "_C_legacy.so").is_file()

    inst = bc.resolve_targets(None, tmp_path)
    assert [x.kind for x in inst] == ["installed"] and "FLASH_ATTN_LIB" not in inst[0].env({"A": "1"})

    with pytest.raises(bc.TargetError, match="no such"):
        bc.resolve_target("x", str(tmp_path / "missing"), tmp_path)
    with pytest.raises(bc.TargetError, match="neither"):
        bc.resolve_target("x", str(tmp_path / "scratch"), tmp_path)
    with pytest.raises(bc.TargetError, match="duplicate"):
        bc.resolve_targets([f"a={build}", f"a={site}"], tmp_path)
    (build / "_C_legacy.so").write_bytes(b"")
    with pytest.raises(bc.TargetError, match="several"):
        bc.resolve_target("x", str(build), tmp_path)


def test_kernel_set_is_the_repository_one():
    ks = bc.kernel_set()
    assert ks.__file__ == str(bc.KERNELS_DIR / "kernel_set.py")
    assert len(ks.resolve("dev")[1]) == 24


def test_bench_common_does_not_import_the_validation_suite():
    # bench/ has its own strict-JSON helper (json_safe); it imports neither the GPU suite
    # tools/validate.py nor any other script of tools/ (all on the path here, as in the tests).
    tools = sorted(p.stem for p in (bc.REPO_ROOT / "tools").glob("*.py"))
    code = f"import sys, bench_common; print(sorted(set({tools!r}) & set(sys.modules)))"
    path = [str(bc.REPO_ROOT / "bench"), str(bc.REPO_ROOT / "src"), str(bc.REPO_ROOT / "tools")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "validate" in tools and out.stdout.strip() == "[]"


def test_json_safe():
    torch = pytest.importorskip("torch")
    value = {
        "inf": float("inf"),
        "nan": float("nan"),
        "ok": 0.5,
        "flags": (True, None, 3),
        "dtype": torch.float16,
        "shape": torch.Size([2, 3]),
        "small": torch.tensor([1.0, float("nan")]),
        "big": torch.zeros(100),
        1: "int key",
    }
    safe = bc.json_safe(value)
    assert safe == {
        "inf": None,
        "nan": None,
        "ok": 0.5,
        "flags": [True, None, 3],
        "dtype": "torch.float16",
        "shape": [2, 3],
        "small": [1.0, None],
        "big": "tensor[100] torch.float32",
        "1": "int key",
    }
    json.dumps(safe, allow_nan=False)


def test_rotation():
    assert bc.rotation(["none", "size"], 0) == ["none", "size"]
    assert bc.rotation(["none", "size"], 1) == ["size", "none"]
    assert bc.rotation(["a", "b", "c"], 4) == ["b", "c", "a"]
    assert bc.rotation([], 3) == []


def test_result_dir_is_absolute_and_created(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = bc.result_dir("a/b")
    assert out == tmp_path / "a" / "b" and out.is_dir()
    assert bc.result_dir(out) == out  # an existing folder is fine


def test_script_parser_takes_the_first_paragraph():
    parser = bc.script_parser("First line.\n\n    python bench/x.py --out DIR\n")
    assert parser.description == "First line."
    assert parser.formatter_class is argparse.RawDescriptionHelpFormatter


def test_log_tail(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(50)), encoding="utf-8")
    assert bc.log_tail(log) == "\n".join(f"line {i}" for i in range(20, 50))
    assert bc.log_tail(log, 2) == "line 48\nline 49"
    assert bc.log_tail(tmp_path / "missing.log") == ""


def test_write_and_announce(tmp_path, capsys):
    bc.write_and_announce(tmp_path, "k", {"wall_s": 12.4}, "# k\n", "latency.py")
    assert capsys.readouterr().err == f"latency.py: wrote {tmp_path / 'k.json'} and {tmp_path / 'k.md'} in 12 s\n"
    bc.write_and_announce(tmp_path, "b", {}, "# b\n", "build.py")
    assert capsys.readouterr().err == f"build.py: wrote {tmp_path / 'b.json'} and {tmp_path / 'b.md'}\n"


def test_targets_or_not_run_writes_the_not_run_pair(tmp_path, capsys):
    out = tmp_path / "out"
    targets = bc.targets_or_not_run(["x=/no/such/place"], tmp_path / "w", out, "kernels", "T", "latency.py")
    assert targets is None
    assert capsys.readouterr().err.startswith("latency.py: x=/no/such/place: no such file")
    record = json.loads((out / "kernels.json").read_text(encoding="utf-8"))
    assert record["benchmark"] == "kernels" and "no such file" in record["error"]
    assert (out / "kernels.md").read_text(encoding="utf-8").startswith("# T\n\n**Not run**: x=/no/such/place")
    assert [t.label for t in bc.targets_or_not_run(None, tmp_path / "w", out, "k", "T", "s")] == ["installed"]
