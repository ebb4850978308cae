"""Fake wheels and build info for the release tooling and workflow tests.

In tests/, which pytest puts on sys.path for every test (tests/conftest.py lives here).
"""

from __future__ import annotations

import json
from pathlib import Path

VERSION = "2.8.3.post2"
# The stdlib-only package every wheel ships beside flash_attn (pyproject.toml wheel.packages): the smoke
# check in the wheel's venv reads the library name rule from it.
SHARED_PACKAGE = Path(__file__).resolve().parents[1] / "src" / "flash_attn_wheel_names"


def build_info(group: str = "legacy", **overrides) -> dict:
    info = {
        "version": VERSION,
        "group": group,
        "archs": [80, 89, 90],
        "sass": ["sm_80", "sm_89", "sm_90"],
        "ptx_arch": 90,
        "cuda_version": "13.0.88",
        "torch_version": "2.14.1+cu130",
        "torch_cuda_version": "13.0",
        "cxx11_abi": True,
        "kernel_set": "release",
        "kernels": [{"kind": "fwd", "dtype": "fp16", "head_dim": 64, "causal": False}],
        "deltas": {"applied": True, "rescale_threshold": 8.0, "packed_fma": True, "broken_no_max_reset": False},
        "upstream": {"version": "2.8.3.post2", "sha256": "d0f9", "source": "sdist"},
        "compilers": {"cxx": "GNU 12.2.0", "cuda": "NVIDIA 13.0.88"},
        "fatbin_compression": "size",
        "head_dims": [32, 64, 96, 128, 192, 256],
    }
    info.update(overrides)
    return info


def make_wheel(
    folder: Path,
    group: str = "legacy",
    version: str = VERSION,
    libs: list[str] | None = None,
    info: dict | None = None,
    init: bool = True,
    metadata_tail: str = "",
) -> Path:
    """A small wheel shaped like the real one: flash_attn/{__init__.py,_C_<group>.so,build_info_<group>.json}
    and the shared package flash_attn_wheel_names/.

    ``metadata_tail`` is appended to METADATA's headers (e.g. ``"Requires-Dist: torch\\n\\n# body\\n"``)."""
    from wheel.wheelfile import WheelFile

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"flash_attn-{version}-cp310-abi3-linux_x86_64.whl"
    dist_info = f"flash_attn-{version}.dist-info"
    with WheelFile(path, "w") as wf:
        if init:
            wf.writestr("flash_attn/__init__.py", f'__version__ = "{version.split("+")[0]}"\n')
        for g in libs if libs is not None else [group]:
            wf.writestr(f"flash_attn/_C_{g}.so", b"\x7fELF not a real library " + g.encode())
        wf.writestr(f"flash_attn/build_info_{group}.json", json.dumps(info or build_info(group)))
        for module in sorted(SHARED_PACKAGE.glob("*.py")):
            wf.writestr(f"flash_attn_wheel_names/{module.name}", module.read_bytes())
        wf.writestr(
            f"{dist_info}/METADATA",
            f"Metadata-Version: 2.1\nName: flash_attn\nVersion: {version}\nRequires-Python: >=3.10\n{metadata_tail}",
        )
        wf.writestr(
            f"{dist_info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp310-abi3-linux_x86_64\n",
        )
    return path


def stand_in_torch(folder: Path, version: str) -> Path:
    """A tiny wheel named torch, standing in for the real one in a --no-index resolution."""
    from wheel.wheelfile import WheelFile

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"torch-{version}-py3-none-any.whl"
    with WheelFile(path, "w") as wf:
        wf.writestr("torch_stand_in.py", "")
        wf.writestr(f"torch-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        wf.writestr(
            f"torch-{version}.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
    return path


def validation_report(
    folder: Path,
    wheel: Path,
    passed: int = 3,
    failed: int = 0,
    sm: int = 90,
    version: str | None = None,
    sha256: str | None = None,
) -> Path:
    """A validation report of `wheel` written by tools/validate.py's own writer (finish, write_report):
    `passed` and `failed` accuracy rows and one latency row on sm_`sm`; `version` (default the
    wheel's, from its file name) and `sha256` (default the file's) replace what the report records.
    Returns the JSON file."""
    import validate  # tools/validate.py (tools/ is on pytest's pythonpath); imports torch only when it runs

    rows = [{"name": f"case {i}", "status": "passed"} for i in range(passed)]
    rows += [{"name": f"bad case {i}", "status": "FAILED", "detail": "rel_Linf 1.0"} for i in range(failed)]
    ctx = {"flash_attn": version or wheel.name.split("-")[1], "sm": sm, "wheel": validate.wheel_record(wheel)}
    if sha256 is not None:
        ctx["wheel"]["sha256"] = sha256
    latency = [{"name": "fp16 B=2 H=8 S=1024 D=128", "status": "measured", "fwd_ms": 0.12, "fwd_bwd_ms": 0.5}]
    sections = {"accuracy": rows, "shapes": [], "backward": [], "edges": [], "latency": latency}
    jpath, _ = validate.write_report(validate.finish(sections, ctx, "flash_attn_func"), folder)
    return jpath
