#!/usr/bin/env python3
"""Apply this project's kernel deltas (A-1, A-2) to an extracted FlashAttention-2 tree, in place.

    python src/kernels/apply_deltas.py --tree <root holding csrc/flash_attn/src> [--check-only]

A-1 (rescale skip with max lagging) and A-2 (packed FMA before exp2) live in our own header
``src/kernels/deltas/flash_attn_wheels_deltas.h``.  This script copies that header next to the
upstream ``softmax.h`` and makes four anchored edits there:

  1. after ``#include "utils.h"``: a marker line and ``#include "flash_attn_wheels_deltas.h"``;
  2. in ``scale_apply_exp2``: the inner per-column loop becomes a call to ``exp2_row`` (A-2);
  3. in ``Softmax::softmax_rescale_o``: the per-row rescale loop becomes a call to
     ``rescale_o_max_lagging<Check_inf, kMaxLagging>`` (A-1);
  4. ``Softmax`` gains the template parameter ``bool kMaxLagging = true``;

and one in ``flash_fwd_kernel.h``: the ``Softmax`` of ``compute_attn_1rowblock`` (the forward that
can return the attention probabilities P) is declared with ``kMaxLagging = !Return_softmax``.  A
kernel that writes P (a testing output: ``return_attn_probs`` with dropout) thus rescales at every
key block as upstream does, so P is relative to each block's running max as upstream's tests
rebuild it; every other forward kernel keeps A-1.

Before writing anything it verifies that the tree has the shape these edits assume (each anchor
found exactly once, the loops hold what they should, the code around them is in the expected
order).  On a mismatch it writes nothing and exits with status 2, naming the file and the anchor.
A tree that already carries the marker is left as it is (the header copy is refreshed if it
differs), so a second run is a no-op.  Files are written to a temporary file and renamed, never
half-written.  Thresholds and switches are not baked in: the patched code reads the macros
FLASH_ATTN_RESCALE_THRESHOLD, FLASH_ATTN_PACKED_FMA and FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET.

A tree that carries its own rescale skip or packed FMA (a fork such as ussoewwin/flash-attention,
whose softmax.h has a ``Use_rescale_threshold`` template parameter and ``fma_f32x2``) is refused
before anything is written: patching it would mix two kernel lines that neither side tested.  The
message names each marker found (file, line) and suggests building the tree as it is with
``--apply-deltas OFF`` (FLASH_ATTN_APPLY_DELTAS=OFF).

Exit status: 0 applied or already applied; 2 the tree does not match (or was patched by another
version of these deltas); 3 the tree carries its own version of the deltas' changes.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

DELTAS_VERSION = 2  # 2: A-1 off in the Return_softmax forward (P on upstream's base)
MARKER = f"flash-attn-wheels-deltas v{DELTAS_VERSION}: A-1 rescale skip, A-2 packed FMA"
MARKER_PREFIX = "flash-attn-wheels-deltas v"
HEADER_NAME = "flash_attn_wheels_deltas.h"
HEADER_SOURCE = Path(__file__).resolve().parent / "deltas" / HEADER_NAME
KERNEL_DIR = Path("csrc") / "flash_attn" / "src"

EXIT_MISMATCH = 2
EXIT_FOREIGN = 3

# Signs that a tree already carries its own kernel change of the kind make (matched in
# comment-free code of csrc/flash_attn/src/*.h and *.cuh, our header excepted). The fork
# ussoewwin/flash-attention has `Use_rescale_threshold` (template parameter of softmax_rescale_o,
# threshold -0.01) and `fma_f32x2` (an fma.rn.f32x2 helper in scale_apply_exp2).
FOREIGN_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("rescale skip (like A-1)", re.compile(r"\b\w*rescale\w*threshold\w*\b", re.IGNORECASE)),
    ("packed FMA (like A-2)", re.compile(r"\bfma_f32x2\b|\bfma\.rn(?:\.ftz)?\.f32x2\b|\b__ffma2_r[nzdu]\b")),
)
FOREIGN_SHOWN = 8  # findings listed in the message; the rest are counted


class DeltaShapeError(Exception):
    """The tree does not have the shape the deltas expect."""

    def __init__(self, file: str, anchor: str, problem: str):
        self.file = file
        self.anchor = anchor
        self.problem = problem
        super().__init__(f"{file}: {problem}: expected anchor `{anchor}`")


class ForeignDeltasError(DeltaShapeError):
    """The tree already carries its own rescale skip or packed FMA; findings are (file, line, kind, code)."""

    def __init__(self, findings: list[tuple[str, int, str, str]]):
        self.findings = findings
        shown = [f"  {f}:{line}: {kind}: `{code}`" for f, line, kind, code in findings[:FOREIGN_SHOWN]]
        if len(findings) > FOREIGN_SHOWN:
            shown.append(f"  ... and {len(findings) - FOREIGN_SHOWN} more")
        problem = (
            "the tree already carries its own kernel changes of the kind the deltas make:\n"
            + "\n".join(shown)
            + "\napplying A-1/A-2 on top would mix two kernel lines that neither side tested; build the tree as it "
            "is with --apply-deltas OFF (nox -s wheel_custom -- ... --apply-deltas OFF, or FLASH_ATTN_APPLY_DELTAS=OFF)"
        )
        Exception.__init__(self, problem)
        self.file, self.anchor, self.problem = findings[0][0], "", problem


# ---------------------------------------------------------------------------------------------
# Small C++ text helpers (enough for upstream's headers: comments, strings, braces).


def _skip_comment_or_literal(text: str, i: int) -> int:
    """If a comment or string/char literal starts at i, return the index after it, else i."""
    if text.startswith("//", i):
        j = text.find("\n", i)
        return len(text) if j < 0 else j
    if text.startswith("/*", i):
        j = text.find("*/", i + 2)
        return len(text) if j < 0 else j + 2
    if text[i] in "\"'":
        quote, j = text[i], i + 1
        while j < len(text) and text[j] != quote:
            j += 2 if text[j] == "\\" else 1
        return j + 1
    return i


def matching_brace(text: str, open_index: int) -> int:
    """Index of the '}' matching the '{' at open_index (comments and literals ignored), or -1."""
    assert text[open_index] == "{"
    depth, i = 0, open_index
    while i < len(text):
        j = _skip_comment_or_literal(text, i)
        if j != i:
            i = j
            continue
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _code_only(text: str) -> str:
    """text with comments blanked out (same length), so anchors never match inside comments."""
    out, i = [], 0
    while i < len(text):
        j = _skip_comment_or_literal(text, i)
        if j != i:
            chunk = text[i:j]
            if chunk.startswith(("//", "/*")):
                chunk = re.sub(r"[^\n]", " ", chunk)
            out.append(chunk)
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _ws_join(anchor: str) -> str:
    # Comments in the anchor count as whitespace (anchors are matched against comment-free code);
    # whitespace between two word characters is required (\s+), elsewhere optional (\s*).
    tokens = re.findall(r"\w+|[^\w\s]", _code_only(anchor))
    pattern = ""
    for prev, tok in zip([None] + tokens[:-1], tokens, strict=True):
        if prev is not None:
            pattern += (
                r"\s+" if (prev[-1].isalnum() or prev[-1] == "_") and (tok[0].isalnum() or tok[0] == "_") else r"\s*"
            )
        pattern += re.escape(tok)
    return pattern


def find_once(code: str, anchor: str, file: str, start: int = 0, end: int | None = None, what: str = "") -> re.Match:
    """The single match of anchor in code[start:end]; DeltaShapeError if absent or repeated."""
    end = len(code) if end is None else end
    rx = re.compile(_ws_join(anchor))
    hits = list(rx.finditer(code, start, end))
    where = f" in {what}" if what else ""
    if not hits:
        raise DeltaShapeError(file, anchor, f"anchor not found{where}")
    if len(hits) > 1:
        raise DeltaShapeError(file, anchor, f"anchor found {len(hits)} times{where}, expected once")
    return hits[0]


def function_body(code: str, signature_anchor: str, file: str) -> tuple[int, int]:
    """(index of '{', index of matching '}') of the function whose signature matches the anchor."""
    m = find_once(code, signature_anchor, file)
    brace = code.find("{", m.end())
    if brace < 0:
        raise DeltaShapeError(file, signature_anchor, "function body not found")
    close = matching_brace(code, brace)
    if close < 0:
        raise DeltaShapeError(file, signature_anchor, "unbalanced braces in function body")
    return brace, close


def loop_span(code: str, loop_anchor: str, file: str, start: int, end: int, what: str) -> tuple[int, int]:
    """Span (start of line of the `#pragma unroll` before the loop, end of line of its '}')."""
    m = find_once(code, loop_anchor, file, start, end, what)
    brace = code.find("{", m.end())
    if brace < 0 or code[m.end() : brace].strip():
        raise DeltaShapeError(file, loop_anchor, f"loop body does not follow the loop header in {what}")
    close = matching_brace(code, brace)
    if close < 0 or close > end:
        raise DeltaShapeError(file, loop_anchor, f"unbalanced loop body in {what}")
    line_start = code.rfind("\n", 0, m.start()) + 1
    before = code[:line_start].rstrip(" \t\n")
    prev_line_start = before.rfind("\n") + 1
    if before[prev_line_start:].strip() != "#pragma unroll":
        raise DeltaShapeError(file, "#pragma unroll", f"expected right before `{loop_anchor}` in {what}")
    line_end = code.find("\n", close)
    return prev_line_start, (len(code) if line_end < 0 else line_end)


def _require(code: str, anchors: list[str], file: str, start: int, end: int, what: str) -> None:
    for anchor in anchors:
        if not re.search(_ws_join(anchor), code[start:end]):
            raise DeltaShapeError(file, anchor, f"not found in {what}")


def _indent_of(code: str, index: int) -> str:
    line_start = code.rfind("\n", 0, index) + 1
    return re.match(r"[ \t]*", code[line_start:]).group(0)


# ---------------------------------------------------------------------------------------------
# The edits of softmax.h.

A1_CALL = (
    "flash_attn_wheels::deltas::rescale_o_max_lagging<Check_inf, kMaxLagging>("
    "row_max, scores_max_prev, row_sum, acc_o_rowcol, softmax_scale_log2);  // A-1 (flash_attn wheels)"
)
A2_CALL = "flash_attn_wheels::deltas::exp2_row(tensor, mi, scale, max_scaled);  // A-2 (flash_attn wheels)"
SOFTMAX_TEMPLATE = "template <int kNRows>"
SOFTMAX_TEMPLATE_NEW = "template <int kNRows, bool kMaxLagging = true>  // kMaxLagging: A-1 (flash_attn wheels)"
FWD_SOFTMAX = "FLASH_NAMESPACE::Softmax<2 * size<1>(acc_o)> softmax;"
FWD_SOFTMAX_NEW = (
    "FLASH_NAMESPACE::Softmax<2 * size<1>(acc_o), /*kMaxLagging=*/!Return_softmax> softmax;"
    "  // A-1 off where P is returned (flash_attn wheels)"
)
FWD_FUNCTION = "inline __device__ void compute_attn_1rowblock("


def patch_softmax(text: str, file: str) -> str:
    """Return softmax.h with A-1 and A-2 routed through our header; DeltaShapeError on mismatch."""
    code = _code_only(text)  # same indices as text, comments blanked

    # Shape checks that A-1's exactness relies on: the LSE is built from row_max, the base of row_sum.
    _require(
        code,
        ["row_max(mi) * softmax_scale + __logf(sum)"],
        file,
        0,
        len(code),
        "normalize_softmax_lse (A-1 needs LSE = row_max * scale + log(row_sum))",
    )

    edits: list[tuple[int, int, str]] = []

    # 1. include our header after utils.h
    inc = find_once(code, '#include "utils.h"', file)
    inc_line_end = text.find("\n", inc.end())
    edits.append((inc_line_end, inc_line_end, f'\n// {MARKER} (src/kernels/apply_deltas.py)\n#include "{HEADER_NAME}"'))

    # 2. A-2: the per-column loop of scale_apply_exp2
    what = "scale_apply_exp2"
    fb, fe = function_body(code, "__device__ void scale_apply_exp2(", file)
    _require(code, ["const float max_scaled ="], file, fb, fe, what)
    s, e = loop_span(code, "for (int ni = 0; ni < size<1>(tensor); ++ni)", file, fb, fe, what)
    _require(
        text,
        ["tensor(mi, ni) = exp2f(", "* scale - max_scaled", "UNFUSE_FMA"],
        file,
        s,
        e,
        "the per-column loop of scale_apply_exp2",
    )
    edits.append((s, e, _indent_of(text, s) + A2_CALL))

    # 3. A-1: the per-row rescale loop of softmax_rescale_o
    what = "softmax_rescale_o"
    fb, fe = function_body(code, "void softmax_rescale_o(", file)
    _require(code, ["Check_inf"], file, code.rfind("template", 0, fb), fb, "the template header of softmax_rescale_o")
    s, e = loop_span(code, "for (int mi = 0; mi < size(row_max); ++mi)", file, fb, fe, what)
    _require(
        text,
        ["scores_max_prev(mi) - scores_max_cur", "row_sum(mi) *= scores_scale", "acc_o_rowcol(mi, ni) *= scores_scale"],
        file,
        s,
        e,
        "the rescale loop of softmax_rescale_o",
    )
    # the loop must sit between the max update and the exp2 of the new block
    _require(
        code,
        [
            "cute::copy(row_max, scores_max_prev);",
            "reduce_max</*zero_init=*/false>(scores, row_max);",
            "Tensor acc_o_rowcol =",
        ],
        file,
        fb,
        s,
        "softmax_rescale_o before the rescale loop",
    )
    after = code[e:fe].lstrip()
    if not re.match(_ws_join("FLASH_NAMESPACE::scale_apply_exp2(scores, row_max, softmax_scale_log2);"), after):
        raise DeltaShapeError(
            file,
            "FLASH_NAMESPACE::scale_apply_exp2(scores, row_max, softmax_scale_log2);",
            "expected right after the rescale loop of softmax_rescale_o",
        )
    edits.append((s, e, _indent_of(text, s) + A1_CALL))

    # 4. the Softmax struct's template header gains kMaxLagging (A-1 per instantiation)
    struct = find_once(code, "struct Softmax {", file)
    header = code.rfind("template", 0, struct.start())
    if header < 0 or not re.fullmatch(_ws_join(SOFTMAX_TEMPLATE), code[header : struct.start()].strip()):
        raise DeltaShapeError(file, SOFTMAX_TEMPLATE, "expected right before `struct Softmax {`")
    edits.append((header, header + len(text[header : struct.start()].rstrip()), SOFTMAX_TEMPLATE_NEW))

    out = text
    for start, end, new in sorted(edits, reverse=True):
        out = out[:start] + new + out[end:]
    return out


def check_forward_kernel(text: str, file: str) -> None:
    """The forward kernel must reach the patched code through Softmax::softmax_rescale_o."""
    code = _code_only(text)
    for anchor in ["softmax.template softmax_rescale_o</*Is_first=*/false", "softmax.template normalize_softmax_lse"]:
        if not re.search(_ws_join(anchor), code):
            raise DeltaShapeError(file, anchor, "not found (the deltas patch Softmax in softmax.h for this kernel)")


def patch_forward_kernel(text: str, file: str) -> str:
    """flash_fwd_kernel.h with compute_attn_1rowblock's Softmax declared ``kMaxLagging = !Return_softmax``.

    The P that kernel writes when it returns the probabilities is then on upstream's base (each
    block's running max). DeltaShapeError when the function, its Return_softmax parameter or the
    declaration is not found exactly once.
    """
    code = _code_only(text)
    what = "compute_attn_1rowblock"
    fb, fe = function_body(code, FWD_FUNCTION, file)
    _require(code, ["bool Return_softmax"], file, code.rfind("template", 0, fb), fb, f"the template header of {what}")
    m = find_once(code, FWD_SOFTMAX, file, fb, fe, what)
    return text[: m.start()] + FWD_SOFTMAX_NEW + text[m.end() :]


# ---------------------------------------------------------------------------------------------
# File handling.


@dataclass
class Change:
    path: Path
    text: str
    crlf: bool
    note: str


def _read(path: Path) -> tuple[str, bool]:
    raw = path.read_bytes().decode("utf-8")
    crlf = "\r\n" in raw
    return raw.replace("\r\n", "\n"), crlf


def _write_atomic(path: Path, text: str, crlf: bool) -> None:
    data = (text.replace("\n", "\r\n") if crlf else text).encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def foreign_deltas(tree: Path) -> list[tuple[str, int, str, str]]:
    """Markers of the tree's own rescale skip / packed FMA as (file relative to tree, line, kind, code line)."""
    kdir = tree / KERNEL_DIR
    found = []
    for path in sorted(p for p in kdir.iterdir() if p.suffix in (".h", ".cuh") and p.name != HEADER_NAME):
        code = _code_only(_read(path)[0])
        lines = code.split("\n")
        for number, line in enumerate(lines, start=1):
            for kind, rx in FOREIGN_MARKERS:
                if rx.search(line):
                    found.append((path.relative_to(tree).as_posix(), number, kind, " ".join(line.split())))
    return found


def plan(tree: Path) -> list[Change]:
    """Verify the tree and return the changes to make (empty when already applied)."""
    kdir = tree / KERNEL_DIR
    softmax = kdir / "softmax.h"
    fwd = kdir / "flash_fwd_kernel.h"
    for p in (softmax, fwd):
        if not p.is_file():
            raise DeltaShapeError(str(p), p.name, "file missing (--tree must hold csrc/flash_attn/src)")
    header_text = HEADER_SOURCE.read_text(encoding="utf-8")

    changes: list[Change] = []
    text, crlf = _read(softmax)
    found = re.search(re.escape(MARKER_PREFIX) + r"(\d+)", text)
    if found and int(found.group(1)) != DELTAS_VERSION:
        raise DeltaShapeError(
            str(softmax), MARKER, f"already patched by deltas v{found.group(1)}; re-extract the upstream tree"
        )
    if not found and (foreign := foreign_deltas(tree)):
        raise ForeignDeltasError(foreign)
    fwd_text, fwd_crlf = _read(fwd)
    check_forward_kernel(fwd_text, str(fwd))
    if found:
        done = [(softmax, text, a) for a in (f'#include "{HEADER_NAME}"', A1_CALL.split("(")[0], A2_CALL.split("(")[0])]
        done += [(softmax, text, SOFTMAX_TEMPLATE_NEW), (fwd, fwd_text, FWD_SOFTMAX_NEW)]
        for path, content, anchor in done:
            if anchor not in content:
                raise DeltaShapeError(
                    str(path), anchor, "marker present but the patch is incomplete; re-extract the upstream tree"
                )
    else:
        # both files are checked before either is written
        new_fwd = patch_forward_kernel(fwd_text, str(fwd))
        changes.append(
            Change(
                softmax, patch_softmax(text, str(softmax)), crlf, "A-1 rescale skip with max lagging, A-2 packed FMA"
            )
        )
        changes.append(Change(fwd, new_fwd, fwd_crlf, "A-1 off in the forward that returns P"))

    header = kdir / HEADER_NAME
    if not header.is_file() or header.read_text(encoding="utf-8") != header_text:
        changes.append(Change(header, header_text, False, "deltas header (project code)"))
    return changes


def apply(tree: Path, check_only: bool = False) -> list[str]:
    """Apply the deltas to tree; returns one line per changed (or, with check_only, to-change) file."""
    tree = Path(tree)
    changes = plan(tree)
    lines = []
    # header first: a softmax.h that includes it must never exist without it
    for ch in sorted(changes, key=lambda c: c.path.name != HEADER_NAME):
        rel = ch.path.relative_to(tree) if ch.path.is_relative_to(tree) else ch.path
        if check_only:
            lines.append(f"would patch {rel.as_posix()} ({ch.note})")
        else:
            _write_atomic(ch.path, ch.text, ch.crlf)
            lines.append(f"patched {rel.as_posix()} ({ch.note})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--tree", required=True, type=Path, help="extracted upstream root (holds csrc/flash_attn/src); edited in place"
    )
    ap.add_argument("--check-only", action="store_true", help="verify the tree's shape, write nothing")
    args = ap.parse_args(argv)
    try:
        lines = apply(args.tree, check_only=args.check_only)
    except ForeignDeltasError as e:
        print(f"apply_deltas: error: {e}", file=sys.stderr)
        return EXIT_FOREIGN
    except DeltaShapeError as e:
        print(f"apply_deltas: error: {e}", file=sys.stderr)
        print(
            "apply_deltas: the tree does not have the shape the flash_attn wheels deltas (A-1, A-2) expect; "
            "use the pinned upstream sources (leave out --source-dir; the pin is `upstream` in "
            "build-manifest.json), or build a tree that carries its own version with FLASH_ATTN_APPLY_DELTAS=OFF.",
            file=sys.stderr,
        )
        return EXIT_MISMATCH
    for line in lines:
        print(line)
    if not lines:
        print(f"deltas v{DELTAS_VERSION} already applied to {args.tree}; nothing changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
