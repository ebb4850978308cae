"""Kernel deltas A-1/A-2: the transformation script (src/kernels/apply_deltas.py) and the math of A-1.

The script is run on a copy of upstream's csrc/flash_attn/src, taken from the pinned sdist by the
shared `upstream_tree` fixture (tests/conftest.py).  The compile check of the
patched headers is tools/sass_audit.py (minutes per unit), not here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "src" / "kernels" / "apply_deltas.py"
KERNEL_DIR = Path("csrc") / "flash_attn" / "src"


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


@pytest.fixture
def tree(tmp_path: Path, upstream_tree: Path) -> Path:
    """A writable copy of the pinned sdist's csrc/flash_attn/src (the shared extraction stays untouched)."""
    shutil.copytree(upstream_tree / KERNEL_DIR, tmp_path / KERNEL_DIR)
    return tmp_path


def softmax_h(tree: Path) -> Path:
    return tree / KERNEL_DIR / "softmax.h"


# ---------------------------------------------------------------------------------------------
# The transformation


def test_apply_patches_softmax_and_adds_header(tree: Path, upstream_tree: Path):
    original = softmax_h(tree).read_text()
    r = run_script("--tree", str(tree))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert (
        len(lines) == 3
        and any("softmax.h" in line for line in lines)
        and any("flash_fwd_kernel.h" in line for line in lines)
        and any("flash_attn_wheels_deltas.h" in line for line in lines)
    )
    patched = softmax_h(tree).read_text()
    assert "flash-attn-wheels-deltas v2" in patched
    assert '#include "flash_attn_wheels_deltas.h"' in patched
    assert patched.count("flash_attn_wheels::deltas::rescale_o_max_lagging<Check_inf, kMaxLagging>(") == 1
    assert patched.count("template <int kNRows, bool kMaxLagging = true>") == 1
    assert patched.count("flash_attn_wheels::deltas::exp2_row(") == 1
    # upstream's rescale loop and per-column exp2 loop are gone, everything else is kept
    assert "scores_scale" not in patched and "scores_scale" in original
    # the loop of scale_apply_exp2 went; max_scale_exp2_sum (not used by the kernels) keeps its copy
    assert original.count("tensor(mi, ni) * scale - max_scaled") == 2
    assert patched.count("tensor(mi, ni) * scale - max_scaled") == 1
    assert "normalize_softmax_lse" in patched and "max_scale_exp2_sum" in patched
    header = (tree / KERNEL_DIR / "flash_attn_wheels_deltas.h").read_text()
    for macro in (
        "FLASH_ATTN_RESCALE_THRESHOLD",
        "FLASH_ATTN_PACKED_FMA",
        "FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET",
        "UNFUSE_FMA",
        "fma.rn.f32x2",
        "__CUDA_ARCH__ >= 1000",
    ):
        assert macro in header
    assert "asm volatile" not in header  # the packed FMA must stay schedulable
    # softmax.h changed, and in flash_fwd_kernel.h only the Softmax of the forward that can return P
    fwd_old = (upstream_tree / KERNEL_DIR / "flash_fwd_kernel.h").read_text().splitlines()
    fwd_new = (tree / KERNEL_DIR / "flash_fwd_kernel.h").read_text().splitlines()
    changed = [(a, b) for a, b in zip(fwd_old, fwd_new, strict=True) if a != b]
    assert len(changed) == 1 and "/*kMaxLagging=*/!Return_softmax" in changed[0][1], changed
    lines = fwd_new.index(changed[0][1])
    assert "compute_attn_1rowblock(" in "\n".join(fwd_new[:lines]).rsplit("inline __device__ void", 1)[1]
    src = upstream_tree / KERNEL_DIR
    for p in src.iterdir():
        if p.name not in ("softmax.h", "flash_fwd_kernel.h"):
            assert (tree / KERNEL_DIR / p.name).read_bytes() == p.read_bytes(), p.name


def test_apply_is_idempotent(tree: Path):
    assert run_script("--tree", str(tree)).returncode == 0
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tree / KERNEL_DIR).iterdir()}
    r = run_script("--tree", str(tree))
    assert r.returncode == 0, r.stderr
    assert "already applied" in r.stdout
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (tree / KERNEL_DIR).iterdir()}
    assert after == before


def test_check_only_writes_nothing(tree: Path):
    before = softmax_h(tree).read_bytes()
    r = run_script("--tree", str(tree), "--check-only")
    assert r.returncode == 0, r.stderr
    assert "would patch" in r.stdout
    assert softmax_h(tree).read_bytes() == before
    assert not (tree / KERNEL_DIR / "flash_attn_wheels_deltas.h").exists()


def test_header_refreshed_when_stale(tree: Path):
    assert run_script("--tree", str(tree)).returncode == 0
    header = tree / KERNEL_DIR / "flash_attn_wheels_deltas.h"
    header.write_text("// stale\n")
    r = run_script("--tree", str(tree))
    assert r.returncode == 0 and "flash_attn_wheels_deltas.h" in r.stdout
    assert header.read_text() == (REPO / "src" / "kernels" / "deltas" / "flash_attn_wheels_deltas.h").read_text()


@pytest.mark.parametrize(
    "old,new,anchor",
    [
        # the rescale loop changed shape
        ("row_sum(mi) *= scores_scale;", "row_sum(mi) = row_sum(mi) * scores_scale;", "row_sum(mi) *= scores_scale"),
        # the function the A-1 edit lives in was renamed
        ("void softmax_rescale_o(", "void softmax_rescale_o_v2(", "void softmax_rescale_o("),
        # the per-column exp2 loop was rewritten
        (
            "for (int ni = 0; ni < size<1>(tensor); ++ni)  {\n            // Instead",
            "for (int ni = 0; ni < kCols; ++ni)  {\n            // Instead",
            "for (int ni = 0; ni < size<1>(tensor); ++ni)",
        ),
        # the exp2 of the new block no longer follows the rescale loop
        (
            "FLASH_NAMESPACE::scale_apply_exp2(scores, row_max, softmax_scale_log2);\n            // We don't do",
            "// moved\n            // We don't do",
            "FLASH_NAMESPACE::scale_apply_exp2(scores, row_max, softmax_scale_log2);",
        ),
        # LSE no longer built from row_max (A-1's exactness argument would not hold)
        (
            "row_max(mi) * softmax_scale + __logf(sum)",
            "row_max(mi) * softmax_scale + logf(sum)",
            "row_max(mi) * softmax_scale + __logf(sum)",
        ),
    ],
)
def test_mangled_tree_is_refused(tree: Path, old: str, new: str, anchor: str):
    path = softmax_h(tree)
    text = path.read_text()
    assert old in text, "test precondition: upstream text changed"
    path.write_text(text.replace(old, new, 1))
    before = path.read_bytes()
    for extra in ([], ["--check-only"]):
        r = run_script("--tree", str(tree), *extra)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "softmax.h" in r.stderr and anchor in r.stderr, r.stderr
        assert "FLASH_ATTN_APPLY_DELTAS=OFF" in r.stderr
    assert path.read_bytes() == before  # never half-patched
    assert not (tree / KERNEL_DIR / "flash_attn_wheels_deltas.h").exists()


def test_duplicated_anchor_is_refused(tree: Path):
    path = softmax_h(tree)
    text = path.read_text()
    path.write_text(text.replace('#include "utils.h"', '#include "utils.h"\n#include "utils.h"', 1))
    r = run_script("--tree", str(tree))
    assert r.returncode == 2 and "found 2 times" in r.stderr and '#include "utils.h"' in r.stderr


def test_forward_kernel_shape_checked(tree: Path):
    fwd = tree / KERNEL_DIR / "flash_fwd_kernel.h"
    fwd.write_text(fwd.read_text().replace("softmax_rescale_o", "online_softmax_step"))
    r = run_script("--tree", str(tree))
    assert r.returncode == 2 and "flash_fwd_kernel.h" in r.stderr and "softmax_rescale_o" in r.stderr
    assert "flash-attn-wheels-deltas" not in softmax_h(tree).read_text()


def test_missing_tree_is_refused(tmp_path: Path):
    r = run_script("--tree", str(tmp_path))
    assert r.returncode == 2 and "softmax.h" in r.stderr


def test_other_marker_version_is_refused(tree: Path):
    assert run_script("--tree", str(tree)).returncode == 0
    path = softmax_h(tree)
    path.write_text(path.read_text().replace("flash-attn-wheels-deltas v2", "flash-attn-wheels-deltas v1"))
    r = run_script("--tree", str(tree))
    assert r.returncode == 2 and "re-extract" in r.stderr


def test_crlf_tree_keeps_line_endings(tree: Path):
    path = softmax_h(tree)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    r = run_script("--tree", str(tree))
    assert r.returncode == 0, r.stderr
    data = path.read_bytes()
    assert b"rescale_o_max_lagging" in data and b"\n" not in data.replace(b"\r\n", b"")


# ---------------------------------------------------------------------------------------------
# Trees that carry their own version of the deltas (like the fork ussoewwin/flash-attention)

RESCALE_TEMPLATE = "template<bool Is_first, bool Check_inf=false, typename Tensor0, typename Tensor1>"
FORK_TEMPLATE = RESCALE_TEMPLATE.replace("Check_inf=false,", "Check_inf=false, bool Use_rescale_threshold=false,")
UTILS_INCLUDE = '#include "utils.h"'
FORK_FMA_HELPER = (
    "__forceinline__ __device__ void fma_f32x2(float &d0, float &d1, float a0, float a1, float b, float c) {\n"
    '    asm("fma.rn.f32x2 ..." : "=f"(d0), "=f"(d1) : "f"(a0), "f"(a1), "f"(b), "f"(c));\n'
    "}\n"
)


def fork_style(tree: Path) -> Path:
    """The pinned softmax.h with its own rescale threshold template parameter and an fma_f32x2 helper."""
    path = softmax_h(tree)
    text = path.read_text()
    assert text.count(RESCALE_TEMPLATE) == 1 and text.count(UTILS_INCLUDE) == 1, "test precondition: upstream changed"
    path.write_text(
        text.replace(RESCALE_TEMPLATE, FORK_TEMPLATE).replace(UTILS_INCLUDE, UTILS_INCLUDE + "\n" + FORK_FMA_HELPER)
    )
    return tree


def _line(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def test_fork_style_tree_is_refused_naming_each_marker(tree: Path):
    path = softmax_h(fork_style(tree))
    before = path.read_bytes()
    for extra in ([], ["--check-only"]):
        r = run_script("--tree", str(tree), *extra)
        assert r.returncode == 3, r.stdout + r.stderr
        rel = "csrc/flash_attn/src/softmax.h"
        assert f"{rel}:{_line(path, 'Use_rescale_threshold')}: rescale skip (like A-1)" in r.stderr, r.stderr
        assert f"{rel}:{_line(path, 'void fma_f32x2(')}: packed FMA (like A-2)" in r.stderr, r.stderr
        assert f"{rel}:{_line(path, 'fma.rn.f32x2')}: packed FMA (like A-2)" in r.stderr, r.stderr
        assert "--apply-deltas OFF" in r.stderr and "FLASH_ATTN_APPLY_DELTAS=OFF" in r.stderr
    assert path.read_bytes() == before  # nothing written, no hybrid
    assert not (tree / KERNEL_DIR / "flash_attn_wheels_deltas.h").exists()


@pytest.mark.parametrize(
    ("file", "old", "new", "kind"),
    [
        (
            "softmax.h",
            RESCALE_TEMPLATE,
            RESCALE_TEMPLATE.replace("typename Tensor0", "int RescaleThreshold, typename Tensor0"),
            "rescale skip",
        ),
        (
            "softmax.h",
            UTILS_INCLUDE,
            UTILS_INCLUDE + "\nstatic constexpr float kRescaleSkipThreshold = -0.01f;",
            "rescale skip",
        ),
        (
            "softmax.h",
            UTILS_INCLUDE,
            UTILS_INCLUDE + '\ninline __device__ void f2() { asm("fma.rn.ftz.f32x2 %0, %1, %2, %3;"); }',
            "packed FMA",
        ),
        (
            "flash_fwd_kernel.h",
            "softmax.template softmax_rescale_o</*Is_first=*/false",
            "softmax.template softmax_rescale_o</*Is_first=*/false, /*Check_inf=*/false, RescaleThreshold",
            "rescale skip",
        ),
    ],
)
def test_a_single_marker_anywhere_in_the_headers_is_refused(tree: Path, file: str, old: str, new: str, kind: str):
    path = tree / KERNEL_DIR / file
    text = path.read_text()
    assert old in text, "test precondition: upstream changed"
    path.write_text(text.replace(old, new, 1))
    r = run_script("--tree", str(tree))
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"csrc/flash_attn/src/{file}:" in r.stderr and kind in r.stderr, r.stderr


def test_markers_in_comments_do_not_count(tree: Path):
    path = softmax_h(tree)
    text = path.read_text()
    path.write_text(
        text.replace(UTILS_INCLUDE, UTILS_INCLUDE + "\n// unlike fma_f32x2 or a RescaleThreshold, nothing here")
    )
    r = run_script("--tree", str(tree))
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------------------------
# The math of A-1: a numpy model of the forward online softmax, one key block at a time, in the
# kernel's order (last block first) and precision (fp32 state, P rounded to fp16 before P @ V).


def online_softmax(s, v, block, scale, threshold=0.0, mode="reset", p_dtype=np.float16):
    """Returns (out, lse, stats) of softmax(scale * s) @ v computed block by block.

    mode: "reset"    A-1 as built: a skipped row keeps its previous max (max lagging)
          "no_reset" the broken variant: skip the rescale but take the new max
    threshold 0 is upstream (always rescale).  -inf entries of s are masked keys.
    """
    scale_log2 = np.float32(scale * np.log2(np.e))
    s = s.astype(np.float32)
    rows, n = s.shape
    starts = list(range(0, n, block))[::-1]
    m = np.full(rows, -np.inf, np.float32)
    lsum = np.zeros(rows, np.float32)
    o = np.zeros((rows, v.shape[1]), np.float32)
    stats = {"skipped": 0, "rescaled": 0, "p_max": 0.0}
    for k, j0 in enumerate(starts):
        blk = s[:, j0 : j0 + block]
        m_prev = m.copy()
        m = np.maximum(m_prev, blk.max(axis=1))
        if k > 0:
            with np.errstate(invalid="ignore"):
                delta = (m_prev - m) * scale_log2
                skip = (m_prev != -np.inf) & (delta >= -threshold) if threshold > 0 else np.zeros(rows, bool)
            if mode == "reset":
                m = np.where(skip, m_prev, m)
            cur = np.where(m == -np.inf, np.float32(0), m)  # Check_inf
            r = np.where(skip, np.float32(1), np.exp2((m_prev - cur) * scale_log2)).astype(np.float32)
            lsum *= r
            o *= r[:, None]
            stats["skipped"] += int(skip.sum())
            stats["rescaled"] += int((~skip).sum())
        base = np.where(m == -np.inf, np.float32(0), m * scale_log2).astype(np.float32)
        p = np.exp2(blk * scale_log2 - base[:, None]).astype(np.float32)
        stats["p_max"] = max(stats["p_max"], float(p.max()))
        lsum += p.sum(axis=1)
        o += p.astype(p_dtype).astype(np.float32) @ v[j0 : j0 + block].astype(np.float32)
    with np.errstate(divide="ignore"):
        empty = lsum == 0
        lse = np.where(empty, np.inf, m * np.float32(scale) + np.log(np.where(empty, 1, lsum)))
        out = o / np.where(empty, 1, lsum)[:, None]
    return out, lse, stats


def exact_softmax(s, v, scale):
    s = s.astype(np.float64) * scale
    mx = s.max(axis=1, keepdims=True)
    e = np.exp(s - mx)
    return (e @ v.astype(np.float64)) / e.sum(axis=1, keepdims=True), (mx[:, 0] + np.log(e.sum(axis=1)))


def growing_max_scores(rng, rows, n, block, scale, lo=1.0, hi=7.0):
    """Scores whose running row max (processing the last block first) grows by lo..hi log2 units
    at every block: each block holds one exact peak, the rest lies up to 3 units below it."""
    scale_log2 = scale * np.log2(np.e)
    nblocks = -(-n // block)
    growth = rng.uniform(lo, hi, size=(rows, nblocks))
    growth[:, -1] = 0.0
    peak = np.cumsum(growth[:, ::-1], axis=1)[:, ::-1]  # block b's peak, increasing towards block 0
    t = np.repeat(peak, block, axis=1)[:, :n] - rng.uniform(0.0, 3.0, size=(rows, n))
    for b in range(nblocks):
        j = b * block + rng.integers(0, min(block, n - b * block), size=rows)
        t[np.arange(rows), j] = peak[:, b]
    return t / scale_log2


def rel_linf(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("block", [32, 64, 128])
def test_max_lagging_is_exact_when_max_grows_every_block(block):
    rng = np.random.default_rng(1000 + block)
    rows, n, d, scale = 16, 8 * block + block // 2, 32, 0.125
    s = growing_max_scores(rng, rows, n, block, scale)
    v = rng.standard_normal((n, d)).astype(np.float32)
    ref_o, ref_lse = exact_softmax(s, v, scale)

    out, lse, st = online_softmax(s, v, block, scale, threshold=8.0, mode="reset")
    # the kept (stale) max lags: growths add up until they pass 8, then that block rescales
    assert st["skipped"] > st["rescaled"] > 0
    assert 2.0 < st["p_max"] <= 256.0  # probabilities before conversion exceed 1, bounded by 2^8
    assert rel_linf(out, ref_o) < 2e-3
    assert np.abs(lse - ref_lse).max() < 1e-4

    # threshold 0 is upstream's always-rescale path: exact too, and never above 1
    out0, lse0, st0 = online_softmax(s, v, block, scale, threshold=0.0)
    assert st0["skipped"] == 0 and st0["p_max"] <= 1.0
    assert rel_linf(out0, ref_o) < 2e-3 and np.abs(lse0 - ref_lse).max() < 1e-4
    assert rel_linf(out, out0) < 2e-3


@pytest.mark.parametrize("block", [32, 64, 128])
def test_skip_without_max_reset_is_wrong(block):
    rng = np.random.default_rng(2000 + block)
    rows, n, d, scale = 16, 8 * block, 32, 0.125
    s = growing_max_scores(rng, rows, n, block, scale)
    v = rng.standard_normal((n, d)).astype(np.float32)
    ref_o, ref_lse = exact_softmax(s, v, scale)
    out, lse, st = online_softmax(s, v, block, scale, threshold=8.0, mode="no_reset")
    assert st["skipped"] > 0
    # stale blocks overweighted by 2^growth: far outside any rounding gate
    assert rel_linf(out, ref_o) > 0.2
    assert np.abs(lse - ref_lse).max() > 0.5


def test_large_jump_takes_the_rescale_path():
    # growth 9..20 log2 units per block: beyond the threshold, every block rescales; still exact
    rng = np.random.default_rng(3)
    block, rows, n, d, scale = 64, 8, 512, 16, 0.1
    s = growing_max_scores(rng, rows, n, block, scale, lo=9.0, hi=20.0)
    v = rng.standard_normal((n, d)).astype(np.float32)
    ref_o, ref_lse = exact_softmax(s, v, scale)
    out, lse, st = online_softmax(s, v, block, scale, threshold=8.0)
    assert st["skipped"] == 0 and st["p_max"] <= 1.0
    assert rel_linf(out, ref_o) < 2e-3 and np.abs(lse - ref_lse).max() < 1e-4


def test_masked_rows_and_blocks():
    # rows whose first-processed blocks are fully masked (causal-like), and fully masked rows
    rng = np.random.default_rng(4)
    block, rows, n, d, scale = 32, 12, 256, 16, 0.125
    s = growing_max_scores(rng, rows, n, block, scale)
    v = rng.standard_normal((n, d)).astype(np.float32)
    visible = np.array([n - 20 * r for r in range(rows)])  # row r sees keys < n - 20 r
    visible[-2:] = 0  # two fully masked rows
    mask = np.arange(n)[None, :] >= visible[:, None]
    s = np.where(mask, -np.inf, s)
    out, lse, st = online_softmax(s, v, block, scale, threshold=8.0)
    assert np.isfinite(out).all()
    assert np.all(out[-2:] == 0) and np.all(lse[-2:] == np.inf)  # upstream's result for empty rows
    ref_o, ref_lse = exact_softmax(s[:-2], v, scale)
    assert rel_linf(out[:-2], ref_o) < 2e-3
    assert np.abs(lse[:-2] - ref_lse).max() < 1e-4
    assert st["skipped"] > 0


# ---------------------------------------------------------------------------------------------
# The SASS audit's instruction counting (tools/sass_audit.py), on a made-up dump


def test_sass_audit_counts_forward_kernels_only():
    import importlib.util

    spec = importlib.util.spec_from_file_location("sass_audit", REPO / "tools" / "sass_audit.py")
    audit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(audit)
    dump = """
	code for sm_100
		Function : _ZN5flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsILi64EEEvv
        /*0000*/                   LDC R1, c[0x0][0x37c] ;                 /* 0x0000df00ff017b82 */
        /*00a0*/                   FFMA2 R4, R4.F32x2.HI_LO, UR6.F32, R0.F32 ;  /* 0x0000000604047c49 */
        /*00b0*/                   MUFU.EX2 R7, R4 ;                       /* 0x0000000400077308 */
        /*00c0*/              @!P1 MUFU.EX2 R5, R5 ;                       /* 0x0000000500057308 */
        /*00d0*/                   FFMA.FTZ R0, R0, UR6, R5 ;              /* 0x0000000600007c23 */
		Function : _ZN5flash23flash_bwd_dq_dk_dv_kernelEv
        /*0000*/                   FFMA2 R4, R4.F32x2.HI_LO, UR6.F32, R0.F32 ;  /* 0x0000000604047c49 */
"""
    c = audit.count_sass(dump)
    assert c["kernels"] == 1
    assert c["total"]["FFMA2"] == 1 and c["total"]["FFMA"] == 1 and c["total"]["MUFU.EX2"] == 2
    assert c["total"]["instructions"] == 5


def test_forward_softmax_declaration_checked_before_anything_is_written(tree: Path):
    """The forward that returns P must get kMaxLagging = !Return_softmax; without its Softmax
    declaration the tree is refused and neither softmax.h nor flash_fwd_kernel.h is touched."""
    fwd = tree / KERNEL_DIR / "flash_fwd_kernel.h"
    original = fwd.read_text()
    first = original.index("FLASH_NAMESPACE::Softmax<2 * size<1>(acc_o)> softmax;")
    fwd.write_text(original[:first] + "auto softmax = make_softmax(acc_o);" + original[first + 53 :])
    r = run_script("--tree", str(tree))
    assert r.returncode == 2 and "compute_attn_1rowblock" in r.stderr, r.stderr
    assert "flash-attn-wheels-deltas" not in softmax_h(tree).read_text()
    assert "kMaxLagging" not in fwd.read_text()


@pytest.mark.parametrize("missing", ["FLASH_ATTN_RESCALE_THRESHOLD", "FLASH_ATTN_PACKED_FMA"])
def test_the_delta_header_has_no_default_of_its_own(missing):
    # The defaults live in options of build-manifest.json only (CMake passes both defines on every
    # build): a compile without one stops with #error instead of taking a copy of the default.
    cpp = shutil.which("cpp") or pytest.skip("no C preprocessor")
    header = (REPO / "src" / "kernels" / "deltas" / "flash_attn_wheels_deltas.h").read_text()
    text = header.replace("#include <cute/tensor.hpp>", "")  # preprocessing only: no CUTLASS needed
    given = {"FLASH_ATTN_RESCALE_THRESHOLD": "8.0f", "FLASH_ATTN_PACKED_FMA": "1"}
    defines = [f"-D{name}={value}" for name, value in given.items()]

    def preprocess(args):
        return subprocess.run([cpp, "-x", "c++", "-P", *args, "-"], input=text, capture_output=True, text=True)

    assert preprocess(defines).returncode == 0
    without = preprocess([d for d in defines if not d.startswith(f"-D{missing}=")])
    assert without.returncode != 0 and f"{missing} is not defined" in without.stderr, without.stderr
    assert "8.0f" not in header and f"#define {missing} " not in header
