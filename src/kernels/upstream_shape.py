#!/usr/bin/env python3
"""Detect the shape of the upstream declarations the binding touches, or refuse the tree.

Run by cmake/FlashAttnUpstream.cmake at configure time, on the staged upstream tree::

    python src/kernels/upstream_shape.py --tree <root holding csrc/flash_attn/src>

Our binding (src/binding, compiled by us, not by upstream's setup.py) fills upstream's
``Flash_fwd_params`` and calls its launch templates, so it depends on a few declarations in
``csrc/flash_attn/src/flash.h`` that upstream has changed over time. This script reads them
(comments ignored, whitespace-insensitive) and prints one JSON object on stdout::

    {"philox_args": "uint64_t[4]", "definitions": ["FLASH_ATTN_PHILOX_ARGS_WORDS=4"],
     "summary": "Flash_fwd_params::philox_args is uint64_t[4] (flash.h:126)"}

``definitions`` are compile definitions for the binding. What is checked:

- ``Flash_fwd_params::philox_args`` (the dropout RNG state handed to the forward kernel):
  ``at::PhiloxCudaState philox_args;`` in flash-attn <= 2.8.3.post2 (FLASH_ATTN_PHILOX_ARGS_WORDS=0),
  or ``uint64_t philox_args[4];`` in upstream main since PR #2669 (=4): an opaque 32-byte buffer
  that holds the bytes of an ``at::PhiloxCudaState`` (word 0 seed or seed pointer, word 1 offset
  or offset pointer, word 2 the in-graph offset, word 3 the "captured" flag), which the forward
  kernel reinterprets as one. Every read of ``philox_args`` in the kernel headers must be the one
  that goes with the declared form, so the bytes the binding writes are the bytes the kernel reads.
- ``Flash_fwd_params::rng_state`` is ``uint64_t *`` (the binding points it at a (seed, offset) tensor).
- ``run_mha_fwd_``, ``run_mha_fwd_splitkv_dispatch``, ``run_mha_bwd_``: the template declarations
  the generated dispatch calls (src/kernels/generate_units.py).

Every other member the binding sets is checked by the compiler: the binding compiles before any
kernel unit (CMakeLists.txt), so a mismatch fails in the first minutes of the build.

Exit status: 0 and the JSON on stdout; 2 when a declaration has a shape the binding does not know,
with a message on stderr naming the file, the line, the declaration found and the ones expected.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# apply_deltas.py sits beside this script (CMake runs it as one, so this folder is sys.path[0]).
from apply_deltas import _code_only as code_only
from apply_deltas import matching_brace

KERNEL_DIR = Path("csrc") / "flash_attn" / "src"
EXIT_UNKNOWN = 2


@dataclass(frozen=True)
class PhiloxForm:
    """One known declaration of Flash_fwd_params::philox_args and how the kernel reads it."""

    name: str  # recorded in the build info (upstream.philox_args)
    words: int  # FLASH_ATTN_PHILOX_ARGS_WORDS: 0 = an at::PhiloxCudaState member, 4 = uint64_t[4]
    declarations: tuple[str, ...]
    kernel_reads: tuple[str, ...]  # the expressions the kernel headers may read it with
    origin: str


PHILOX_FORMS: tuple[PhiloxForm, ...] = (
    PhiloxForm(
        name="PhiloxCudaState",
        words=0,
        # the second: the same tree after src/kernels/torch_free_tree.py (a reused staged tree)
        declarations=("at::PhiloxCudaState philox_args;", "::flash_attn_wheels::PhiloxState philox_args;"),
        kernel_reads=("at::cuda::philox::unpack(params.philox_args)",),
        origin="flash-attn 2.8.3.post2 and earlier",
    ),
    PhiloxForm(
        name="uint64_t[4]",
        words=4,
        declarations=("uint64_t philox_args[4];", "std::uint64_t philox_args[4];"),
        kernel_reads=(
            "at::cuda::philox::unpack(*reinterpret_cast<at::PhiloxCudaState const*>(params.philox_args))",
            "at::cuda::philox::unpack(*reinterpret_cast<const at::PhiloxCudaState*>(params.philox_args))",
        ),
        origin="upstream main since PR #2669: the bytes of an at::PhiloxCudaState in 4 words",
    ),
)

RNG_STATE_DECLARATIONS = ("uint64_t * rng_state;", "std::uint64_t * rng_state;")

# The launch templates the generated dispatch calls; parameter names are not compared.
LAUNCH_TEMPLATES = {
    "run_mha_fwd_": "template<typename T, int Headdim, bool Is_causal> void run_mha_fwd_"
    "(Flash_fwd_params &, cudaStream_t);",
    "run_mha_fwd_splitkv_dispatch": "template<typename T, int Headdim, bool Is_causal> void "
    "run_mha_fwd_splitkv_dispatch(Flash_fwd_params &, cudaStream_t);",
    "run_mha_bwd_": "template<typename T, int Headdim, bool Is_causal> void run_mha_bwd_"
    "(Flash_bwd_params &, cudaStream_t);",
}

HINT = (
    "upstream_shape: the binding (src/binding) does not know this tree's declarations; build the pinned "
    "upstream sdist (`upstream` in build-manifest.json: leave out --source-dir / FLASH_ATTN_SOURCE_DIR), or teach "
    "src/kernels/upstream_shape.py and src/binding/params.cpp the new shape."
)


class ShapeError(Exception):
    """A declaration the binding relies on has a shape it does not know."""

    def __init__(self, file: Path | str, line: int, what: str, found: str, expected: list[str]):
        self.file, self.line, self.what, self.found, self.expected = str(file), line, what, found, expected
        options = " or ".join(f"`{e}`" for e in expected)
        where = f"{file}:{line}" if line else str(file)
        super().__init__(f"{where}: {what}: found `{found}`; the binding knows {options}")


def tokens(text: str) -> list[str]:
    """C++ tokens of text (words and single punctuation characters), comments removed."""
    return re.findall(r"\w+|[^\w\s]", code_only(text))


def _same(a: str, b: str) -> bool:
    return tokens(a) == tokens(b)


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _one_line(text: str) -> str:
    return " ".join(text.split())


def struct_body(code: str, name: str, file: Path) -> tuple[int, int]:
    """(index after '{', index of the matching '}') of `struct <name>` in comment-free code."""
    m = re.search(r"\bstruct\s+" + re.escape(name) + r"\b[^;{]*\{", code)
    if not m:
        raise ShapeError(file, 0, f"struct {name}", "no definition", [f"struct {name} ... {{ ... }};"])
    close = matching_brace(code, m.end() - 1)
    if close < 0:
        raise ShapeError(file, _line_of(code, m.start()), f"struct {name}", "unbalanced braces", ["a closed body"])
    return m.end(), close


def member_declaration(code: str, start: int, end: int, member: str) -> tuple[str, int] | None:
    """(declaration text up to its ';', index of its start) of the member named `member`, or None."""
    for m in re.finditer(r"\b" + re.escape(member) + r"\b", code[start:end]):
        at = start + m.start()
        begin = max(code.rfind(c, start, at) for c in ";{}") + 1
        semi = code.find(";", at, end)
        if semi < 0:
            continue
        decl = code[begin : semi + 1]
        if "(" in decl or "=" in decl.split(member)[0]:
            continue  # a use in an initializer or a member function, not the declaration
        lead = len(decl) - len(decl.lstrip())
        return decl.strip(), begin + lead
    return None


def _member(code: str, body: tuple[int, int], member: str, file: Path, expected: list[str]) -> tuple[str, int]:
    found = member_declaration(code, body[0], body[1], member)
    if found is None:
        raise ShapeError(file, 0, f"Flash_fwd_params::{member}", "no such member", expected)
    return found[0], _line_of(code, found[1])


def philox_form(src: Path, flash_h: str) -> tuple[PhiloxForm, int]:
    """The known form of Flash_fwd_params::philox_args in this tree, and its line in flash.h."""
    file = src / "flash.h"
    code = code_only(flash_h)
    body = struct_body(code, "Flash_fwd_params", file)
    expected = [d for f in PHILOX_FORMS for d in f.declarations[:1]]
    decl, line = _member(code, body, "philox_args", file, expected)
    form = next((f for f in PHILOX_FORMS if any(_same(decl, d) for d in f.declarations)), None)
    if form is None:
        raise ShapeError(file, line, "Flash_fwd_params::philox_args", _one_line(decl), expected)
    return form, line


def check_rng_state(src: Path, flash_h: str) -> None:
    file = src / "flash.h"
    code = code_only(flash_h)
    body = struct_body(code, "Flash_fwd_params", file)
    decl, line = _member(code, body, "rng_state", file, list(RNG_STATE_DECLARATIONS[:1]))
    if not any(_same(decl, d) for d in RNG_STATE_DECLARATIONS):
        raise ShapeError(file, line, "Flash_fwd_params::rng_state", _one_line(decl), list(RNG_STATE_DECLARATIONS[:1]))


def check_kernel_reads(src: Path, form: PhiloxForm) -> None:
    """Every read of philox_args in the kernel headers is one that goes with the declared form."""
    known = [tokens(r) for r in form.kernel_reads]
    for path in sorted(p for p in src.iterdir() if p.suffix in (".h", ".cuh") and p.name != "flash.h"):
        text = path.read_text(encoding="utf-8", errors="replace")
        code = code_only(text)
        for m in re.finditer(r"\bphilox_args\b", code):
            line_start = code.rfind("\n", 0, m.start()) + 1
            line_end = code.find("\n", m.end())
            line = code[line_start : None if line_end < 0 else line_end]
            toks = tokens(line)
            if not any(_contains(toks, k) for k in known):
                raise ShapeError(
                    path,
                    _line_of(code, m.start()),
                    f"the kernel's read of philox_args (declared as {form.name} in flash.h)",
                    _one_line(line),
                    list(form.kernel_reads[:1]),
                )


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def check_launch_templates(src: Path, flash_h: str) -> None:
    file = src / "flash.h"
    code = code_only(flash_h)
    for name, expected in LAUNCH_TEMPLATES.items():
        m = re.search(r"template\s*<[^;{]*?>\s*void\s+" + re.escape(name) + r"\s*\([^;{]*\)\s*;", code)
        if not m:
            raise ShapeError(file, 0, f"the launch template {name}", "no declaration", [expected])
        if _without_names(tokens(m.group(0))) != _without_names(tokens(expected)):
            raise ShapeError(
                file, _line_of(code, m.start()), f"the launch template {name}", _one_line(m.group(0)), [expected]
            )


def _without_names(toks: list[str]) -> list[str]:
    """toks without parameter names: a word that follows a type token and precedes ',', ')' or '>'."""

    def is_name(i: int) -> bool:
        word = re.fullmatch(r"[A-Za-z_]\w*", toks[i]) is not None
        return word and 0 < i < len(toks) - 1 and toks[i + 1] in (",", ")", ">") and toks[i - 1] not in ("(", ",", "<")

    return [t for i, t in enumerate(toks) if not is_name(i)]


def detect(tree: Path) -> dict:
    """Shape of the tree's declarations as {"philox_args", "definitions", "summary"}; ShapeError if unknown."""
    tree = Path(tree)
    src = tree / KERNEL_DIR
    try:
        flash_h_path = src / "flash.h"
        if not flash_h_path.is_file():
            raise ShapeError(
                flash_h_path, 0, "flash.h", "file missing", ["FlashAttention-2's csrc/flash_attn/src/flash.h"]
            )
        flash_h = flash_h_path.read_text(encoding="utf-8", errors="replace")
        form, line = philox_form(src, flash_h)
        check_kernel_reads(src, form)
        check_rng_state(src, flash_h)
        check_launch_templates(src, flash_h)
    except ShapeError as e:  # name the file relative to the tree (the staged copy's path means nothing to the user)
        path = Path(e.file)
        rel = path.relative_to(tree).as_posix() if path.is_relative_to(tree) else e.file
        raise ShapeError(rel, e.line, e.what, e.found, e.expected) from None
    return {
        "philox_args": form.name,
        "definitions": [f"FLASH_ATTN_PHILOX_ARGS_WORDS={form.words}"],
        "summary": f"Flash_fwd_params::philox_args is {form.name} (flash.h:{line}; {form.origin})",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", required=True, type=Path, help="upstream root (holds csrc/flash_attn/src)")
    args = ap.parse_args(argv)
    try:
        shape = detect(args.tree)
    except ShapeError as e:
        print(f"upstream_shape: error: {e}", file=sys.stderr)
        print(HINT, file=sys.stderr)
        return EXIT_UNKNOWN
    print(json.dumps(shape))
    return 0


if __name__ == "__main__":
    sys.exit(main())
