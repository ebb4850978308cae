"""The machine a benchmark ran on, recorded in every result file of bench/.

:func:`collect` returns a JSON-serialisable record: GPUs (name, memory, compute capability) and
the driver from ``nvidia-smi``, the CUDA version the driver supports, nvcc's version, torch's
version / CUDA / cuDNN, Python, CPU model and cores, memory, load average, the repository commit.
Every field that cannot be found is None (a machine without a GPU, without nvcc or without torch
still gives a record), and the reason lands in ``notes``.

It never initialises CUDA in the calling process unless ``torch_cuda=True`` (benchmarks that
spawn workers keep the parent free of a CUDA context). ``python bench/machine.py`` prints it.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

__all__ = [
    "collect",
    "markdown",
    "parse_nvidia_smi_csv",
    "parse_driver_cuda_version",
    "parse_nvcc_version",
    "parse_meminfo",
    "parse_cpu_model",
]


def _run(cmd: list[str], timeout: float = 30.0, cwd: Path | None = None) -> str | None:
    """stdout of a command, or None when it is missing, fails or times out."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


# -- parsers (pure, tested on CPU) ---------------------------------------------------------------


def parse_nvidia_smi_csv(text: str, fields: list[str]) -> list[dict]:
    """Rows of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`` as dicts.

    Memory fields (``memory.*``) become integers (MiB); ``[N/A]`` and empty values become None.
    """
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            continue
        row: dict = {}
        for key, value in zip(fields, values, strict=True):
            if value in ("", "[N/A]", "N/A", "[Not Supported]"):
                row[key] = None
            elif key.startswith("memory.") and value.isdigit():
                row[key] = int(value)
            else:
                row[key] = value
        gpus.append(row)
    return gpus


def parse_driver_cuda_version(text: str) -> str | None:
    """The 'CUDA Version: 13.0' of plain ``nvidia-smi`` output (the newest CUDA the driver runs)."""
    m = re.search(r"CUDA Version:\s*([0-9]+(?:\.[0-9]+)*)", text or "")
    return m.group(1) if m else None


def parse_nvcc_version(text: str) -> str | None:
    """'13.0.88' from ``nvcc --version`` ('Cuda compilation tools, release 13.0, V13.0.88')."""
    m = re.search(r"release\s+[0-9.]+,\s*V([0-9.]+)", text or "")
    if m:
        return m.group(1)
    m = re.search(r"release\s+([0-9.]+)", text or "")
    return m.group(1) if m else None


def parse_meminfo(text: str) -> dict:
    """{'total_gib', 'available_gib'} from /proc/meminfo text (values in kB); missing keys are None."""
    values = {}
    for line in (text or "").splitlines():
        m = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if m:
            values[m.group(1)] = int(m.group(2))

    def gib(key: str) -> float | None:
        return round(values[key] / 2**20, 1) if key in values else None

    return {"total_gib": gib("MemTotal"), "available_gib": gib("MemAvailable")}


def parse_cpu_model(text: str) -> str | None:
    """The first 'model name' of /proc/cpuinfo text."""
    m = re.search(r"^model name\s*:\s*(.+)$", text or "", re.MULTILINE)
    return m.group(1).strip() if m else None


# -- probes --------------------------------------------------------------------------------------

_SMI_FIELDS = ["name", "driver_version", "memory.total", "compute_cap", "pci.bus_id"]


def _gpus(notes: list[str]) -> tuple[list[dict], str | None, str | None]:
    """(GPUs, driver version, driver CUDA version) from nvidia-smi; ([], None, None) without it."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        notes.append("nvidia-smi not found: no GPU information")
        return [], None, None
    fields = list(_SMI_FIELDS)
    out = _run([smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"])
    if out is None:  # older drivers lack compute_cap
        fields = [f for f in fields if f != "compute_cap"]
        out = _run([smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"])
    if out is None:
        notes.append("nvidia-smi --query-gpu failed")
        return [], None, None
    rows = parse_nvidia_smi_csv(out, fields)
    gpus = [
        {
            "name": r.get("name"),
            "memory_total_mib": r.get("memory.total"),
            "compute_capability": r.get("compute_cap"),
            "pci_bus_id": r.get("pci.bus_id"),
        }
        for r in rows
    ]
    driver = rows[0].get("driver_version") if rows else None
    return gpus, driver, parse_driver_cuda_version(_run([smi]) or "")


def _nvcc(notes: list[str]) -> dict:
    candidates = [os.environ.get("CUDACXX"), shutil.which("nvcc")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home:
            candidates.append(str(Path(home) / "bin" / "nvcc"))
    for path in filter(None, candidates):
        out = _run([path, "--version"])
        if out:
            return {"path": path, "version": parse_nvcc_version(out)}
    notes.append("nvcc not found")
    return {"path": None, "version": None}


def _torch(notes: list[str], torch_cuda: bool) -> dict:
    info: dict = {"version": None, "cuda": None, "cudnn": None, "device": None}
    try:
        import torch
    except Exception as exc:  # ImportError or a broken install
        notes.append(f"torch not importable: {exc}")
        return info
    info["version"] = torch.__version__
    info["cuda"] = torch.version.cuda
    try:
        info["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        info["cudnn"] = None
    if torch_cuda:
        try:
            if torch.cuda.is_available():
                i = torch.cuda.current_device()
                props = torch.cuda.get_device_properties(i)
                info["device"] = {
                    "index": i,
                    "name": props.name,
                    "capability": f"{props.major}.{props.minor}",
                    "multiprocessors": props.multi_processor_count,
                    "memory_gib": round(props.total_memory / 2**30, 1),
                }
            else:
                notes.append("torch.cuda.is_available() is False")
        except Exception as exc:
            notes.append(f"torch CUDA query failed: {exc}")
    return info


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _repo(notes: list[str]) -> dict:
    head = _run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT)
    if head is None:
        notes.append("not a git checkout (no commit recorded)")
        return {"commit": None, "dirty": None}
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT)
    return {"commit": head.strip(), "dirty": bool(status and status.strip())}


def collect(*, torch_cuda: bool = False) -> dict:
    """The machine record (see the module doc). ``torch_cuda`` also queries torch's current device."""
    notes: list[str] = []
    gpus, driver, driver_cuda = _gpus(notes)
    try:
        available_cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available_cores = os.cpu_count()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        load = None
    return {
        "recorded_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpus": gpus,
        "gpu_name": gpus[0]["name"] if gpus else None,
        "gpu_count": len(gpus),
        "driver_version": driver,
        "driver_cuda_version": driver_cuda,
        "nvcc": _nvcc(notes),
        "torch": _torch(notes, torch_cuda),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "cpu_model": parse_cpu_model(_read("/proc/cpuinfo")) or platform.processor() or None,
        "cpu_cores_logical": os.cpu_count(),
        "cpu_cores_available": available_cores,
        "memory": parse_meminfo(_read("/proc/meminfo")),
        "load_average": load,
        "repo": _repo(notes),
        "notes": notes,
    }


def markdown(info: dict) -> str:
    """A short Markdown list of the machine record, for the top of every report."""
    gpu = info.get("gpu_name") or "none found"
    if info.get("gpu_count", 0) > 1:
        gpu += f" (x{info['gpu_count']})"
    torch_info = info.get("torch") or {}
    mem = info.get("memory") or {}
    repo = info.get("repo") or {}
    commit = repo.get("commit")
    commit_text = (commit[:12] + (" (uncommitted changes)" if repo.get("dirty") else "")) if commit else "unknown"
    lines = [
        f"- GPU: {gpu}; driver {info.get('driver_version') or '?'} (CUDA {info.get('driver_cuda_version') or '?'})",
        f"- nvcc {((info.get('nvcc') or {}).get('version')) or '?'}; torch {torch_info.get('version') or '?'} "
        f"(CUDA {torch_info.get('cuda') or '?'}, cuDNN {torch_info.get('cudnn') or '?'}); "
        f"Python {info.get('python')}",
        f"- CPU: {info.get('cpu_model') or '?'}, {info.get('cpu_cores_available')} of "
        f"{info.get('cpu_cores_logical')} logical cores available; memory {mem.get('total_gib')} GiB "
        f"({mem.get('available_gib')} GiB available); load average {info.get('load_average')}",
        f"- recorded {info.get('recorded_utc')} on {info.get('platform')}; repository commit {commit_text}",
    ]
    for note in info.get("notes") or []:
        lines.append(f"- note: {note}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    record = collect(torch_cuda="--torch-cuda" in sys.argv)
    print(json.dumps(record, indent=1))
    print(markdown(record))
