"""Helpers shared by the bench/ scripts: statistics, Markdown tables, result files, build targets.

A *build target* is what a GPU benchmark loads flash_attn from, given on the command line as
``LABEL=PATH``. PATH may be:

- a CMake build directory (holds ``_C_<group>.so`` and ``build_info_<group>.json``) or the
  library file itself: the child process imports this checkout's ``flash_attn`` package with
  ``FLASH_ATTN_LIB`` (the variable flash_attn's loader reads) pointing at the library;
- an install folder that holds a ``flash_attn/`` package (``pip install --target DIR``, a
  site-packages folder): the child gets ``PYTHONPATH=DIR``;
- a wheel (``.whl``): unpacked under the result folder, then as an install folder.

Without any, the target ``installed`` is whatever ``import flash_attn`` finds in the running
interpreter. Each target runs in its own process, since two builds register the same
``torch.ops.flash_attn`` namespace.

The bench/ scripts run as ``python bench/<script>.py`` (bench/ is then sys.path[0]) with the
release package on the path: ``PYTHONPATH=src`` from the checkout's root (the nox sessions set it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from flash_attn_wheel_names import native  # the library and build-info file names, owned once
from kernels import kernel_set as _kernel_set

REPO_ROOT = Path(__file__).resolve().parents[1]
KERNELS_DIR = REPO_ROOT / "src" / "kernels"
# The variable flash_attn's loader reads for the library to load (flash_attn/_loader.py LIBRARY_ENV).
LIBRARY_ENV = "FLASH_ATTN_LIB"


def kernel_set():
    """src/kernels/kernel_set.py (the single definition of unit names), ``kernels.kernel_set`` as
    the release tooling imports it."""
    return _kernel_set


# -- command lines -------------------------------------------------------------------------------


def script_parser(doc: str) -> argparse.ArgumentParser:
    """The parser of a bench/ script: its module doc's first paragraph as description, layout kept."""
    return argparse.ArgumentParser(
        description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )


def add_out_and_builds(parser: argparse.ArgumentParser, out_help: str, build_help: str) -> None:
    """The ``--out DIR`` (a Path) and repeatable ``--build LABEL=PATH`` options of a GPU benchmark
    (see the module doc for what PATH may be; :func:`targets_or_not_run` resolves them)."""
    parser.add_argument("--out", type=Path, help=out_help)
    parser.add_argument("--build", action="append", metavar="LABEL=PATH", help=build_help)


def result_dir(path: Path) -> Path:
    """``--out`` made absolute and created (with its parents); the folder every result file goes to."""
    out = Path(path).resolve()
    out.mkdir(parents=True, exist_ok=True)
    return out


def rotation(items: list, rep: int) -> list:
    """Order of repetition ``rep``: ``items`` rotated left by ``rep`` places, so none is always first."""
    if not items:
        return []
    k = rep % len(items)
    return items[k:] + items[:k]


# -- statistics ----------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """q-th percentile (0..100) with linear interpolation between closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    data = sorted(values)
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summarize(values: list[float], digits: int = 4) -> dict:
    """{'n', 'median', 'min', 'max', 'p10', 'p90', 'mean'} of a sample, rounded."""
    return {
        "n": len(values),
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "p10": round(percentile(values, 10), digits),
        "p90": round(percentile(values, 90), digits),
        "mean": round(statistics.fmean(values), digits),
    }


# -- Markdown ------------------------------------------------------------------------------------


def _cell(value) -> str:
    if value is None:
        return ""
    return str(value).replace("|", "\\|").replace("\n", " ")


def md_table(headers: list[str], rows: list[list], align: str | None = None) -> str:
    """A GitHub Markdown table. ``align`` is one letter per column: l(eft), r(ight), c(enter).

    Cells are str()-ed; None becomes empty; '|' is escaped; rows shorter than the header are padded.
    """
    if align is None:
        align = "l" * len(headers)
    if len(align) != len(headers):
        raise ValueError(f"align has {len(align)} letters for {len(headers)} columns")
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    for row in rows:
        if len(row) > len(headers):
            raise ValueError(f"row has {len(row)} cells for {len(headers)} columns: {row}")
        cells = [_cell(v) for v in row] + [""] * (len(headers) - len(row))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def fmt(value: float | None, digits: int = 2, suffix: str = "") -> str:
    """Number with fixed digits, or '-' for None/NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}{suffix}"


# -- result files --------------------------------------------------------------------------------


def json_safe(value):
    """``value`` as strict JSON holds it (``json.dumps(..., allow_nan=False)`` accepts the result).

    NaN and +/-inf become None; dict keys become str; tuples, sets and lists (``torch.Size`` too)
    become lists; a torch tensor of at most 64 elements becomes its nested list of numbers, a larger
    one a short ``tensor[shape] dtype`` string; anything else (dtypes, paths) becomes ``str(value)``.
    torch is never imported here: tensors are recognised only when the caller has imported torch.
    Every bench/ result file goes through it. Raises nothing.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.numel() <= 64:
            return json_safe(value.detach().cpu().tolist())
        return f"tensor{list(value.shape)} {value.dtype}"
    return str(value)


def write_results(out_dir: Path, stem: str, record: dict, markdown: str) -> tuple[Path, Path]:
    """Write <out>/<stem>.json (strict JSON: NaN/inf as null) and <out>/<stem>.md; returns both paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{stem}.json"
    md_path = out_dir / f"{stem}.md"
    text = json.dumps(json_safe(record), indent=1, sort_keys=False, allow_nan=False)
    json_path.write_text(text + "\n", encoding="utf-8")
    md_path.write_text(markdown, encoding="utf-8")
    return json_path, md_path


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file (for a failed step's record); "" when it cannot be read."""
    try:
        return "\n".join(Path(path).read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def write_and_announce(out_dir: Path, stem: str, record: dict, markdown: str, script: str) -> tuple[Path, Path]:
    """:func:`write_results`, then ``<script>: wrote <json> and <md>`` on stderr (with ``in N s`` when the
    record has ``wall_s``); returns both paths."""
    json_path, md_path = write_results(out_dir, stem, record, markdown)
    took = f" in {record['wall_s']:.0f} s" if "wall_s" in record else ""
    print(f"{script}: wrote {json_path} and {md_path}{took}", file=sys.stderr)
    return json_path, md_path


# -- build targets -------------------------------------------------------------------------------


class TargetError(ValueError):
    """A build target on the command line that cannot be used; the message says why."""


@dataclass
class BuildTarget:
    """One flash_attn build to load in a child process (see the module doc)."""

    label: str
    kind: str  # "installed", "library", "install_dir", "wheel"
    source: str | None = None  # what was given on the command line
    library: str | None = None  # the _C_<group> file, when known
    pythonpath: list[str] = field(default_factory=list)  # prepended to PYTHONPATH

    def env(self, base: dict | None = None) -> dict:
        """Environment for a child process that imports this build."""
        env = dict(os.environ if base is None else base)
        env.pop(LIBRARY_ENV, None)
        if self.kind == "library":
            env[LIBRARY_ENV] = str(self.library)
        if self.pythonpath:
            old = env.get("PYTHONPATH")
            env["PYTHONPATH"] = os.pathsep.join(self.pythonpath + ([old] if old else []))
        return env

    def as_dict(self) -> dict:
        return {"label": self.label, "kind": self.kind, "source": self.source, "library": self.library}


def find_native_library(folder: Path) -> Path | None:
    """The one ``_C_<group>.so``/``.pyd`` directly in ``folder``; TargetError when several."""
    if not Path(folder).is_dir():
        return None
    found = sorted(p for p in Path(folder).iterdir() if native.library_group(p.name) and p.is_file())
    if len(found) > 1:
        raise TargetError(
            f"{folder} holds several native libraries ({', '.join(p.name for p in found)}); "
            "give the library file itself"
        )
    return found[0] if found else None


def parse_target_arg(text: str) -> tuple[str, str]:
    """'LABEL=PATH' -> (label, path); a bare PATH gets its folder/file name as label."""
    if "=" in text and not text.startswith("="):
        label, path = text.split("=", 1)
        label = label.strip()
    else:
        path = text.lstrip("=")
        label = Path(path).name or path
    if not label or any(c in label for c in "/\\ \t"):
        raise TargetError(f"'{text}': the label before '=' must be a short name without spaces or slashes")
    return label, path


def resolve_target(label: str, path: str | None, scratch: Path) -> BuildTarget:
    """Turn LABEL=PATH into a :class:`BuildTarget`; wheels are unpacked under ``scratch/label``."""
    if path is None:
        return BuildTarget(label=label, kind="installed")
    p = Path(path).expanduser().resolve()
    if not p.exists():
        raise TargetError(f"{label}={path}: no such file or folder")
    if p.is_file() and p.suffix == ".whl":
        dest = Path(scratch) / label
        if dest.exists():
            import shutil

            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        with zipfile.ZipFile(p) as zf:
            zf.extractall(dest)
        if not (dest / "flash_attn" / "__init__.py").is_file():
            raise TargetError(f"{label}={path}: the wheel holds no flash_attn package")
        lib = find_native_library(dest / "flash_attn")
        return BuildTarget(label, "wheel", str(p), str(lib) if lib else None, [str(dest)])
    if p.is_file():
        if native.library_group(p.name) is None:
            raise TargetError(f"{label}={path}: a file must be a _C_<group>.so/.pyd library or a .whl")
        return BuildTarget(label, "library", str(p), str(p), [str(REPO_ROOT)])
    if (p / "flash_attn" / "__init__.py").is_file():
        lib = find_native_library(p / "flash_attn")
        return BuildTarget(label, "install_dir", str(p), str(lib) if lib else None, [str(p)])
    if p.name == "flash_attn" and (p / "__init__.py").is_file():
        lib = find_native_library(p)
        return BuildTarget(label, "install_dir", str(p), str(lib) if lib else None, [str(p.parent)])
    lib = find_native_library(p)
    if lib is not None:
        return BuildTarget(label, "library", str(p), str(lib), [str(REPO_ROOT)])
    raise TargetError(
        f"{label}={path}: found neither a _C_<group>.so (a CMake build directory) nor a flash_attn/ package "
        "(an install folder) there"
    )


def resolve_targets(args: list[str] | None, scratch: Path) -> list[BuildTarget]:
    """All --build arguments resolved; [installed] when none. Labels must be unique."""
    if not args:
        return [resolve_target("installed", None, scratch)]
    targets = [resolve_target(*parse_target_arg(a), scratch) for a in args]
    labels = [t.label for t in targets]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise TargetError(f"duplicate build labels: {', '.join(dupes)}")
    return targets


def targets_or_not_run(
    build_args: list[str] | None, scratch: Path, out_dir: Path, stem: str, title: str, script: str
) -> list[BuildTarget] | None:
    """:func:`resolve_targets` of the ``--build`` arguments, or None after reporting why not.

    On a :class:`TargetError` the message goes to stderr as ``<script>: <message>`` and
    ``<out_dir>/<stem>.json`` (``{"benchmark": stem, "error": ...}``) and ``<stem>.md`` (``# <title>``
    and **Not run**) are written, so that a run that could not start still leaves its result files;
    the caller then exits with status 2.
    """
    try:
        return resolve_targets(build_args, scratch)
    except TargetError as exc:
        print(f"{script}: {exc}", file=sys.stderr)
        record = {"benchmark": stem, "error": str(exc)}
        write_results(out_dir, stem, record, f"# {title}\n\n**Not run**: {exc}\n")
        return None


def read_build_info_near(library: str | None) -> dict | None:
    """build_info_<group>.json beside a native library, parsed; None when absent or unreadable."""
    if not library:
        return None
    lib = Path(library)
    group = native.library_group(lib.name)
    if group is None:
        return None
    path = lib.with_name(native.build_info_name(group))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
