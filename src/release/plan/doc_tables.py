"""Tables in the docs (and CMakePresets.json) that are rendered from the build manifest.

A block looks like this in a Markdown file::

    <!-- manifest:arch-groups -->
    | arch group | SASS | PTX | GPUs |
    ...
    <!-- /manifest:arch-groups -->

A table block is rendered whole from the manifest (the arch groups, the options table, the
environment variables of :mod:`release.environment` with the manifest's options; in
pyproject.toml, whose markers are TOML comments, the ``cmake.define`` lines); a ``pins-*`` or
``values-*`` block keeps its hand-written text (commands, prose, the sessions' own flags) and gets
the manifest's values put in: every
``name==version`` of a pinned tool from ``tool_pins``, the GiB per nvcc job from ``build``.

CMakePresets.json is rendered whole (:data:`FILES`): one preset per arch group with fixed SMs.

``python -m release.plan.doc_tables`` rewrites every block and file from the manifest (``nox -s doc_tables``);
``--check`` changes nothing and exits 1 naming each stale block (a unit test runs the check).
``--manifest FILE`` (or ``$FLASH_ATTN_MANIFEST``) renders from another manifest; ``--root DIR``
works on another checkout. Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from release import _paths, environment, manifest
from release.errors import CheckFailed, ReleaseError, run_main


def arch_groups_table(data: dict) -> str:
    """The arch group table (README.md): group, SASS, PTX and GPUs of each group, then a line on
    family-specific SASS. Markdown text ending in a newline."""
    family = data["archs"]["family_specific"]
    lines = ["| arch group | SASS | PTX | GPUs |", "|---|---|---|---|"]
    for group in data["arch_groups"]:
        if group["sms"]:
            sass = ", ".join(f"sm_{sm}" for sm in group["sms"])
            ptx = f"compute_{group['ptx']}"
        else:
            sass, ptx = "the SMs you list", "newest listed"
        lines.append(f"| `{group['name']}` | {sass} | {ptx} | {group['gpus']} |")
    names = [f"sm_{sm}" for sm in family["sms"]]
    plain = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    special = ", ".join(f"sm_{sm}f" for sm in family["sms"])
    lines += [
        "",
        f"With CUDA >= {family['min_cuda']}, {plain} are compiled as family-specific SASS ({special}), which",
        "runs on every GPU of the same major. Each wheel embeds PTX for one SM only.",
    ]
    return "\n".join(lines) + "\n"


def _inline(value) -> str:
    """`value` as JSON on one line, an object with blanks inside its braces ({ "a": 1 })."""
    text = json.dumps(value, separators=(", ", ": "))
    return f"{{ {text[1:-1]} }}" if isinstance(value, dict) and value else text


def _preset(fields: dict) -> str:
    lines = [f'      "{key}": {_inline(value)}' for key, value in fields.items()]
    return "    {\n" + ",\n".join(lines) + "\n    }"


# The dev preset's group: the one the README's quick start and `nox -s dev -- --arch-group` examples use.
DEV_PRESET_GROUP = "legacy"


def cmake_presets(data: dict) -> str:
    """CMakePresets.json, whole: a hidden base preset (Ninja, Release, build/preset-<name>), one
    configure and one build preset per arch group with fixed SMs (the release kernel set), in the
    manifest's order, and ``dev`` (DEV_PRESET_GROUP, the dev kernel set). The presets name groups
    and kernel sets only; CMake takes the SMs from the manifest. JSON text ending in a newline."""
    base = {
        "name": "base",
        "hidden": True,
        "description": "Ninja, Release, one binary folder per preset. Archs, flags and kernel units come from cmake/; "
        "Python (with torch) is the one CMake finds: activate its environment or set Python_EXECUTABLE.",
        "generator": "Ninja",
        "binaryDir": "${sourceDir}/build/preset-${presetName}",
        "architecture": {"value": "x64", "strategy": "external"},
        "cacheVariables": {"CMAKE_BUILD_TYPE": "Release"},
    }
    configure = [base]
    dev_units = data["kernels"]["sets"]["dev"]["about"].split(",")[0]  # "head dims 64 and 128"
    for group in data["arch_groups"]:
        if group["sms"]:
            configure.append({
                "name": group["name"],
                "inherits": "base",
                "displayName": f"{group['name']} arch group, release kernel set",
                "cacheVariables": {"FLASH_ATTN_ARCH_GROUP": group["name"], "FLASH_ATTN_KERNEL_SET": "release"},
            })  # fmt: skip
    configure.append({
        "name": "dev",
        "inherits": "base",
        "displayName": f"dev: {DEV_PRESET_GROUP} group, dev kernel set ({dev_units})",
        "cacheVariables": {"FLASH_ATTN_ARCH_GROUP": DEV_PRESET_GROUP, "FLASH_ATTN_KERNEL_SET": "dev"},
    })  # fmt: skip
    build = [{"name": p["name"], "configurePreset": p["name"], "displayName": p["name"]} for p in configure[1:]]
    return (
        "{\n"
        '  "version": 6,\n'
        '  "cmakeMinimumRequired": { "major": 4, "minor": 0, "patch": 2 },\n'
        '  "configurePresets": [\n' + ",\n".join(_preset(p) for p in configure) + "\n  ],\n"
        '  "buildPresets": [\n' + ",\n".join(f"    {_inline(b)}" for b in build) + "\n  ]\n"
        "}\n"
    )


def options_table(data: dict) -> str:
    """The options table (docs/release.md): one row per entry of the manifest's ``options``, in
    its order: flag (— for CMake and environment only), variable, default (the ``default``, or
    ``default_doc`` in words when it is empty), and the ``doc`` with its placeholders filled in; the
    memory per nvcc job as ``manifest_values`` puts it. Markdown text ending in a newline."""
    lines = ["| flag | variable / CMake define | default | meaning |", "|---|---|---|---|"]
    for name, entry in data["options"].items():
        flag = f"`{entry['flag']}`" if entry.get("flag") else "—"
        default = f"`{entry['default']}`" if entry["default"] else entry.get("default_doc") or "—"
        lines.append(f"| {flag} | `{name}` | {default} | {manifest.option_text(name, 'doc', data)} |")
    return manifest_values(data, "\n".join(lines) + "\n")


def cmake_defines(data: dict) -> str:
    """pyproject.toml's ``[tool.scikit-build.cmake.define]`` lines: every option, empty, so a plain
    ``pip install .`` passes each one on every configure and a reused build folder keeps no value of an
    earlier build (CMake reads empty as the option's environment variable, else the manifest default)."""
    return "".join(f'{name} = ""\n' for name in data["options"])


def tool_pins(data: dict) -> dict[str, str]:
    """Package name -> pinned version of every ``tool_pins`` entry (``nox==2026.10.20`` -> nox: 2026.10.20)."""
    pins = data["tool_pins"]
    specs = [v for k, v in pins.items() if k != "notes" and isinstance(v, str)]
    specs += [s for k, v in pins.items() if k != "notes" and isinstance(v, list) for s in v]
    return dict(spec.split("==", 1) for spec in specs)


def manifest_values(data: dict, body: str) -> str:
    """`body` (hand-written commands, prose or a table) with the manifest's values put in: each
    ``name==version`` of a pinned tool gets the manifest's version, and the memory per nvcc job
    (``N GiB per nvcc``, ``/ N GiB``) ``build.nvcc_memory_gib``. Other text is kept as it is."""
    pins = tool_pins(data)
    gib = str(data["build"]["nvcc_memory_gib"])

    def repin(m: re.Match) -> str:
        return f"{m.group(1)}=={pins[m.group(1)]}" if m.group(1) in pins else m.group(0)

    body = re.sub(r"\b([A-Za-z][\w.-]*)==([0-9][\w.+]*[0-9])", repin, body)
    return re.sub(r"(?<=/ )\d+(?= GiB)|\b\d+(?= GiB per nvcc)", gib, body)


def _table(renderer: Callable[[dict], str]) -> Callable[[dict, str], str]:
    return lambda data, body: renderer(data)


# file (relative to the checkout) -> block name -> renderer(manifest, the block's current text)
BLOCKS: dict[str, dict[str, Callable[[dict, str], str]]] = {
    "README.md": {
        "arch-groups": _table(arch_groups_table),
        "pins-quick-start": manifest_values,
    },
    # the README's reference material (release builds and their cost, CMake by hand, Windows)
    "docs/reference.md": {
        "values-release-cost": manifest_values,
        "pins-cmake": manifest_values,
        "pins-windows": manifest_values,
    },
    "docs/release.md": {
        "options": _table(options_table),
        "values-options": manifest_values,
        "values-plan": manifest_values,
    },
    "pyproject.toml": {"cmake-define": _table(cmake_defines)},
    "docs/design.md": {"values-compile": manifest_values},
    "docs/ci.md": {"values-jobs": manifest_values},
    "docs/environment.md": {"environment": _table(environment.table)},
}


# file (relative to the checkout) -> renderer(manifest) of the whole file
FILES: dict[str, Callable[[dict], str]] = {"CMakePresets.json": cmake_presets}


def rendered_files() -> list[str]:
    """Every file this module renders, in whole or in blocks (relative to the checkout)."""
    return [*BLOCKS, *FILES]


def _block_re(name: str) -> re.Pattern:
    # In a TOML file the markers are comments: "# <!-- manifest:name -->" (the "# " of the end marker is kept).
    return re.compile(rf"(<!-- manifest:{name} -->\n)(.*?)((?:# )?<!-- /manifest:{name} -->)", re.DOTALL)


def render(text: str, blocks: dict[str, Callable[[dict, str], str]], data: dict, where: str = "") -> str:
    """`text` with each named block replaced by its rendering (a table, or the block's own text with the
    manifest's pins). Raises ValueError for a missing marker."""
    for name, renderer in blocks.items():
        pattern = _block_re(name)
        if not pattern.search(text):
            raise ValueError(
                f"{where or 'the text'} has no <!-- manifest:{name} --> ... <!-- /manifest:{name} --> block; "
                "restore the markers (git checkout -- that file) so the table can be rendered"
            )
        text = pattern.sub(lambda m, r=renderer: m.group(1) + r(data, m.group(2)) + m.group(3), text)
    return text


def stale(root: Path, data: dict) -> list[str]:
    """Files under `root` whose blocks differ from `data`'s rendering (relative paths)."""
    out = []
    for rel, blocks in BLOCKS.items():
        text = (root / rel).read_text(encoding="utf-8")
        if render(text, blocks, data, rel) != text:
            out.append(rel)
    for rel, renderer in FILES.items():
        if (root / rel).read_text(encoding="utf-8") != renderer(data):
            out.append(rel)
    return out


def rewrite(root: Path, rel: str, data: dict) -> None:
    """Write `data`'s rendering of the file `rel` under `root` (its blocks, or the whole file)."""
    path = root / rel
    if rel in FILES:
        path.write_text(FILES[rel](data), encoding="utf-8")
    else:
        path.write_text(render(path.read_text(encoding="utf-8"), BLOCKS[rel], data, rel), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m release.plan.doc_tables", description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 when a block is stale")
    p.add_argument(
        "--manifest", type=Path, help="manifest to render from (default: $FLASH_ATTN_MANIFEST or the checkout's)"
    )
    p.add_argument("--root", type=Path, default=_paths.REPO_ROOT, help="checkout whose docs to render")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)

    def body() -> None:
        try:
            data = manifest.load(args.manifest)
            changed = stale(args.root, data)
            if not args.check:
                for rel in changed:
                    rewrite(args.root, rel, data)
        except (RuntimeError, ValueError, OSError) as e:  # an unreadable manifest, a lost marker, a file
            raise ReleaseError(str(e)) from None
        if args.check and changed:
            raise CheckFailed(f"{', '.join(changed)}: stale manifest tables; run nox -s doc_tables")
        for rel in changed:
            print(f"release.plan.doc_tables: {rel} rewritten", file=sys.stderr)

    return run_main(body, prog="release.plan.doc_tables")


if __name__ == "__main__":
    sys.exit(main())
