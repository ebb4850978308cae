"""``python -m flash_attn``: print the build info, which torch ABI the wheel uses and which torch
releases it serves, and whether this wheel can run here.

Exit codes:
    0  the library is loaded, and every visible GPU can run it (or no GPU is visible, so nothing
       could be checked; the output says so);
    1  the library cannot run here: torch mismatch, load failure, or a visible GPU this wheel's
       arch group does not cover (the output names the wheel to install, and the ``pip install
       flash-attn --index-url ...`` line for this GPU and torch: flash_attn_wheel_names.install);
    2  no native library: a source checkout that was never built (``nox -s dev`` or ``pip install .``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import torch

from flash_attn_wheel_names import install as _install

from . import _build_info, _compat, _loader

__all__ = ["EXIT_OK", "EXIT_CANNOT_RUN", "EXIT_NOT_BUILT", "collect", "render_plain", "main"]

EXIT_OK = 0
EXIT_CANNOT_RUN = 1
EXIT_NOT_BUILT = 2

_FIELD_ORDER = (
    "version",
    "group",
    "archs",
    "sass",
    "ptx_arch",
    "cuda_version",
    "torch_version",
    "torch_cuda_version",
    "cxx11_abi",
    "torch_abi",
    "torch_min",
    "kernel_set",
    "kernels",
    "deltas",
    "upstream",
    "compilers",
    "fatbin_compression",
)


def _format_value(key: str, value: Any) -> str:
    if key == "kernels" and isinstance(value, list):
        try:
            keys = _build_info.kernel_set({"kernels": value})
        except (KeyError, TypeError, ValueError):
            return f"{len(value)} units"
        return f"{len(value)} units: {_build_info.describe_kernels(keys)}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_format_value(k, v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def build_info_rows(info: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, text) rows of a build info, known fields first."""
    keys = [k for k in _FIELD_ORDER if k in info] + [k for k in info if k not in _FIELD_ORDER]
    return [(key, _format_value(key, info[key])) for key in keys]


def torch_range(info: dict[str, Any]) -> dict[str, Any]:
    """Which torch ABI a build uses and which torch releases it serves, e.g. ``{"torch_abi": "stable",
    "serves": "torch >= 2.11 with CUDA 13.x (one wheel for every torch from 2.11 on)"}``; a build info
    without ``torch_abi`` (an older wheel) is exact."""
    cuda = _build_info.cuda_major(info.get("torch_cuda_version") or info.get("cuda_version"))
    cuda_text = f"CUDA {cuda}.x" if cuda is not None else "CUDA ?"
    if _build_info.is_stable(info):
        serves = (
            f"torch >= {info.get('torch_min')} with {cuda_text} (torch's stable ABI: one wheel for every torch "
            f"from {info.get('torch_min')} on)"
        )
        return {"torch_abi": "stable", "serves": serves}
    built = _build_info.public_version(str(info.get("torch_version", "?")))
    abi = str(info.get("cxx11_abi", "?")).lower()
    serves = f"torch {built} only, with {cuda_text} and C++11 ABI {abi} (torch's C++ API: one wheel per torch)"
    return {"torch_abi": "exact", "serves": serves}


def _probe_gpus() -> tuple[list[tuple[int, str, tuple[int, int]]], str | None]:
    """Visible CUDA devices as (index, name, capability), and an error text if probing failed."""
    try:
        if not torch.cuda.is_available():
            return [], None
        devices = []
        for index in range(torch.cuda.device_count()):
            devices.append((index, torch.cuda.get_device_name(index), tuple(torch.cuda.get_device_capability(index))))
        return devices, None
    except Exception as exc:  # a broken driver must not hide the build info
        return [], f"probing CUDA devices failed: {exc}"


def collect(
    state: _loader.LibraryState | None = None, gpus: Sequence[tuple[int, str, tuple[int, int]]] | None = None
) -> dict[str, Any]:
    """Gather the report :func:`main` prints, as a JSON-serializable dict with an ``exit_code``.

    Args:
        state: the loader state (default: the live one).
        gpus: visible devices as ``(index, name, (major, minor))`` (default: probed with torch.cuda).
    """
    state = state or _loader.STATE
    gpu_error = None
    if gpus is None:
        gpus, gpu_error = _probe_gpus()
    report: dict[str, Any] = {
        "flash_attn": state.dist_version,
        "status": state.status,
        "library": str(state.library) if state.library else None,
        "build_info_path": str(state.build_info_path) if state.build_info_path else None,
        "error": str(state.error) if state.error else None,
        "build_info": state.build_info,
        "torch_range": torch_range(state.build_info) if state.build_info is not None else None,
        "torch": {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "cxx11_abi": bool(torch.compiled_with_cxx11_abi()),
        },
        "gpus": [],
        "gpu_error": gpu_error,
    }
    for index, name, capability in gpus:
        entry: dict[str, Any] = {"index": index, "name": name, "capability": f"{capability[0]}.{capability[1]}"}
        if state.build_info is not None:
            verdict = _compat.check_device(
                state.build_info, capability, name, device_index=index, dist_version=state.dist_version
            )
            entry.update(ok=verdict.ok, route=verdict.route, target=verdict.target, message=verdict.message)
        else:
            entry.update(ok=None, route=None, target=None, message="no build info to compare with")
        report["gpus"].append(entry)

    if state.status == "not_built":
        code, summary = EXIT_NOT_BUILT, "not built: no native library, so no kernel can run (see above to build it)"
    elif state.status != "ready":
        code, summary = EXIT_CANNOT_RUN, "cannot run: the native library is not usable (see the error above)"
    elif any(gpu["ok"] is False for gpu in report["gpus"]):
        code, summary = EXIT_CANNOT_RUN, "cannot run on every visible GPU (see the GPU lines above)"
    elif not report["gpus"]:
        code = EXIT_OK
        summary = "library loaded; no CUDA device is visible, so whether this wheel runs on your GPU was not checked"
        if gpu_error:
            summary += f" ({gpu_error})"
    else:
        code, summary = EXIT_OK, "this wheel can run on every visible GPU"
    report["exit_code"] = code
    report["summary"] = summary
    report["install"] = install_line(state.build_info, report) if code == EXIT_CANNOT_RUN else None
    return report


def install_line(info: dict[str, Any] | None, report: dict[str, Any]) -> str | None:
    """The pip line that installs the wheel for the first GPU this one cannot serve (any, when the
    library did not load) and the running torch (flash_attn_wheel_names.install), or None when it cannot be
    told: no GPU, a CPU-only torch, a GPU no arch group covers, or a build info without an index URL
    (a wheel built before it existed, or outside the release workflow) or with the template URL some
    development wheels carried (``https://OWNER.github.io/REPO/``: no such site)."""
    install = (info or {}).get("install") or {}
    cuda = _build_info.cuda_major(torch.version.cuda)
    gpus = [g for g in report["gpus"] if g["ok"] is False] or report["gpus"]
    url = str(install.get("index_url") or "")
    if not url.startswith("https://") or "//OWNER." in url or cuda is None or not gpus:
        return None
    major, minor = (int(x) for x in gpus[0]["capability"].split("."))
    group = _compat.group_for_capability(info, (major, minor))
    if group is None:
        return None
    where = _install.variant(cuda, group, torch.__version__, install.get("stable_torch_min"))
    return _install.install_line(install["index_url"], where)


def render_plain(report: dict[str, Any]) -> str:
    """The report as plain text."""
    lines = [f"flash_attn {report['flash_attn']}", f"  status        {report['status']}"]
    if report["library"]:
        lines.append(f"  library       {report['library']}")
    if report["error"]:
        lines.append(f"  error         {report['error']}")
    if report.get("torch_range"):
        lines.append(f"  torch ABI     {report['torch_range']['torch_abi']}: serves {report['torch_range']['serves']}")
    info = report["build_info"]
    if info is not None:
        lines.append("build info")
        rows = build_info_rows(info)
        width = max(len(key) for key, _ in rows)
        lines += [f"  {key.ljust(width)}  {text}" for key, text in rows]
    torch_info = report["torch"]
    lines.append("running")
    lines.append(
        f"  torch {torch_info['version']}, CUDA {torch_info['cuda'] or 'none'}, "
        f"C++11 ABI {str(torch_info['cxx11_abi']).lower()}"
    )
    lines.append("GPUs")
    if not report["gpus"]:
        lines.append("  none visible" + (f" ({report['gpu_error']})" if report["gpu_error"] else ""))
    for gpu in report["gpus"]:
        verdict = {True: "OK", False: "CANNOT RUN", None: "?"}[gpu["ok"]]
        lines.append(
            f"  {gpu['index']}  {gpu['name']}  (compute capability {gpu['capability']})  {verdict}: {gpu['message']}"
        )
    lines.append(f"result: {report['summary']}")
    if report.get("install"):
        lines.append(f"install the wheel for this GPU and torch: {report['install']}")
    return "\n".join(lines)


def _render_rich(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    def styled(text: Any, style: str) -> str:
        return f"[{style}]{escape(str(text))}[/]"

    console = Console()
    status_style = {"ready": "green", "not_built": "yellow"}.get(report["status"], "red")
    console.print(
        f"[bold]flash_attn {escape(str(report['flash_attn']))}[/]  status: {styled(report['status'], status_style)}"
    )
    if report["library"]:
        console.print(f"library: {escape(report['library'])}")
    if report["error"]:
        console.print(styled(report["error"], status_style))
    if report.get("torch_range"):
        span = report["torch_range"]
        console.print(f"torch ABI: [bold]{escape(span['torch_abi'])}[/]: serves {escape(span['serves'])}")
    if report["build_info"] is not None:
        table = Table(title="build info", show_header=False)
        table.add_column("field", style="bold")
        table.add_column("value", overflow="fold")
        for key, text in build_info_rows(report["build_info"]):
            table.add_row(escape(key), escape(text))
        console.print(table)
    torch_info = report["torch"]
    console.print(
        escape(
            f"running torch {torch_info['version']}, CUDA {torch_info['cuda'] or 'none'}, "
            f"C++11 ABI {str(torch_info['cxx11_abi']).lower()}"
        )
    )
    if report["gpus"]:
        gpus = Table(title="GPUs")
        for column in ("index", "name", "capability", "verdict", "how / why"):
            gpus.add_column(column, overflow="fold")
        for gpu in report["gpus"]:
            verdict = {True: "[green]OK[/]", False: "[red]CANNOT RUN[/]", None: "?"}[gpu["ok"]]
            cells = (str(gpu["index"]), gpu["name"], gpu["capability"], gpu["message"])
            index, name, capability, message = (escape(str(cell)) for cell in cells)
            gpus.add_row(index, name, capability, verdict, message)
        console.print(gpus)
    else:
        console.print(escape("GPUs: none visible" + (f" ({report['gpu_error']})" if report["gpu_error"] else "")))
    style = {EXIT_OK: "green", EXIT_NOT_BUILT: "yellow"}.get(report["exit_code"], "red")
    console.print(styled(f"result: {report['summary']}", style))
    if report.get("install"):
        console.print(f"install the wheel for this GPU and torch: [bold]{escape(report['install'])}[/]")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m flash_attn``; returns the exit code (see the module doc)."""
    parser = argparse.ArgumentParser(
        prog="python -m flash_attn",
        description="Print flash_attn's build info and whether this wheel can run on the visible GPUs.",
        epilog="exit codes: 0 runs here (or no GPU to check), 1 cannot run here, 2 no native library built",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--plain", action="store_true", help="plain text even when rich is installed")
    args = parser.parse_args(argv)
    report = collect()
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    elif args.plain:
        print(render_plain(report))
    else:
        try:
            _render_rich(report)
        except ImportError:
            print(render_plain(report))
    return report["exit_code"]
