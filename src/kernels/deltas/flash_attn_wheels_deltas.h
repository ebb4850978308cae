// flash_attn wheels: kernel deltas for the FlashAttention-2 forward online softmax.
//
// This header is the project's own code.  src/kernels/apply_deltas.py copies it next to the
// upstream softmax.h inside the build directory and routes two loops of softmax.h through the
// functions below; see docs/deltas.md for the math and the switches.
//
//   A-1  rescale_o_max_lagging(): at every non-first key block, when the row max grew by at most
//        FLASH_ATTN_RESCALE_THRESHOLD (log2 units, i.e. after multiplying by softmax_scale_log2),
//        keep the previous max ("max lagging") and skip rescaling the output accumulator and the
//        row sum.  The probabilities of the current block are then computed against the kept max,
//        so they can reach 2^threshold (256 for 8.0), and output, row sum and LSE stay exact.
//        A Softmax whose kMaxLagging is false (the forward kernel instantiated with Return_softmax,
//        which writes P to memory for testing) takes upstream's rescale at every block, so the P it
//        returns is relative to each block's running max, as upstream's tests rebuild it.
//   A-2  exp2_row(): x * scale - max_scaled for two columns at once with fma.rn.f32x2 on
//        sm_100 and newer (ptxas lowers it to FFMA2 where the hardware has it).
//
// Compile-time switches (passed by CMake, see cmake/FlashAttnDeltas.cmake; their defaults live in
// options of build-manifest.json only, so a missing one stops the compile instead of taking a copy):
//   FLASH_ATTN_RESCALE_THRESHOLD            float literal, required; 0 compiles upstream's always-rescale path
//   FLASH_ATTN_PACKED_FMA                   0 or 1, required
//   FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET  test only (define to 1): skip without keeping the old max,
//                                           which is wrong on purpose so the A-1 tests can fail
//   UNFUSE_FMA                              PyTorch's switch: separate multiply and subtract, no FMA
#pragma once

#include <cmath>

#include <cute/tensor.hpp>

#ifndef FLASH_ATTN_RESCALE_THRESHOLD
#error "FLASH_ATTN_RESCALE_THRESHOLD is not defined: flash_attn_delta_definitions (cmake/FlashAttnDeltas.cmake) passes it, its default is options.FLASH_ATTN_RESCALE_THRESHOLD.default of build-manifest.json"
#endif

#ifndef FLASH_ATTN_PACKED_FMA
#error "FLASH_ATTN_PACKED_FMA is not defined: flash_attn_delta_definitions (cmake/FlashAttnDeltas.cmake) passes it, its default is options.FLASH_ATTN_PACKED_FMA.default of build-manifest.json"
#endif

#ifndef FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET
#define FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET 0
#endif

// fma.rn.f32x2 exists from PTX ISA 8.6 for sm_100 and newer targets; older targets never see it.
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 1000) && FLASH_ATTN_PACKED_FMA && !defined(UNFUSE_FMA)
#define FLASH_ATTN_WHEELS_FFMA2 1
#else
#define FLASH_ATTN_WHEELS_FFMA2 0
#endif

namespace flash_attn_wheels {
namespace deltas {

// Threshold of A-1 in log2 units; 0 disables the skip entirely (upstream code path).
inline constexpr float kRescaleThreshold = float(FLASH_ATTN_RESCALE_THRESHOLD);
static_assert(kRescaleThreshold >= 0.f, "FLASH_ATTN_RESCALE_THRESHOLD must be >= 0 (0 = upstream behaviour)");
inline constexpr bool kBrokenNoMaxReset = (FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET) != 0;

// d0 = a0 * b + c, d1 = a1 * b + c, rounded to nearest once each (same results as two FFMA).
// Plain asm (not volatile): the instruction has no side effects, so the compiler may move,
// merge or drop it like any other arithmetic.
__forceinline__ __device__ void fma2_broadcast(float &d0, float &d1, float a0, float a1, float b, float c) {
#if FLASH_ATTN_WHEELS_FFMA2
    asm("{\n\t"
        ".reg .b64 fa_a, fa_b, fa_c, fa_d;\n\t"
        "mov.b64 fa_a, {%2, %3};\n\t"
        "mov.b64 fa_b, {%4, %4};\n\t"
        "mov.b64 fa_c, {%5, %5};\n\t"
        "fma.rn.f32x2 fa_d, fa_a, fa_b, fa_c;\n\t"
        "mov.b64 {%0, %1}, fa_d;\n\t"
        "}"
        : "=f"(d0), "=f"(d1)
        : "f"(a0), "f"(a1), "f"(b), "f"(c));
#else
    d0 = __fmaf_rn(a0, b, c);
    d1 = __fmaf_rn(a1, b, c);
#endif
}

// Row mi of a (rows, cols) register tensor: t = exp2(t * scale - max_scaled).
// Columns are taken in pairs; an odd last column is done with one scalar FMA.
template <typename TensorT>
__forceinline__ __device__ void exp2_row(TensorT &tensor, int mi, float scale, float max_scaled) {
    constexpr int kCols = decltype(cute::size<1>(tensor))::value;
#if defined(UNFUSE_FMA)
    // Multiply rounded on its own, then subtract (PyTorch builds define UNFUSE_FMA).
    #pragma unroll
    for (int ni = 0; ni < kCols; ++ni) {
        tensor(mi, ni) = exp2f(__fmul_rn(tensor(mi, ni), scale) - max_scaled);
    }
#else
    const float neg_max_scaled = -max_scaled;
    #pragma unroll
    for (int ni = 0; ni + 1 < kCols; ni += 2) {
        float y0, y1;
        fma2_broadcast(y0, y1, tensor(mi, ni), tensor(mi, ni + 1), scale, neg_max_scaled);
        tensor(mi, ni) = exp2f(y0);
        tensor(mi, ni + 1) = exp2f(y1);
    }
    if constexpr (kCols % 2 == 1) {
        tensor(mi, kCols - 1) = exp2f(__fmaf_rn(tensor(mi, kCols - 1), scale, neg_max_scaled));
    }
#endif
}

// Called after row_max was raised to max(row_max_prev, max of the new block) and before the
// new block's probabilities are computed against row_max.
//
// For each row: delta = (row_max_prev - row_max) * scale_log2 <= 0 is how far (log2 units) the max
// moved.  If delta >= -threshold the row keeps row_max_prev as its base: the output accumulator
// and the row sum keep their scale, and exp2(x * scale_log2 - row_max_prev * scale_log2) of the
// new block is at most 2^threshold.  Otherwise the upstream rescale by exp2(delta) runs.  A warp
// whose rows all skip jumps over the rescale altogether.
//
// A row whose previous max is -inf (all keys so far masked) always takes the upstream path, which
// handles -inf with Check_inf exactly as before (no -inf - -inf).
//
// MaxLagging = false compiles upstream's always-rescale path whatever the threshold: the forward
// kernels that return P (Return_softmax) use it, so their P keeps upstream's base (docs/deltas.md).
template <bool Check_inf, bool MaxLagging, typename TensorMax, typename TensorMaxPrev, typename TensorSum, typename TensorAcc>
__forceinline__ __device__ void rescale_o_max_lagging(TensorMax &row_max, TensorMaxPrev const &row_max_prev,
                                                      TensorSum &row_sum, TensorAcc &acc_o_rowcol,
                                                      float scale_log2) {
    constexpr int kRows = decltype(cute::size(row_max))::value;
    constexpr float kThreshold = MaxLagging ? kRescaleThreshold : 0.f;
    bool rescale_row[kRows];
    bool any_rescale = false;
    #pragma unroll
    for (int mi = 0; mi < kRows; ++mi) {
        rescale_row[mi] = true;
        if constexpr (kThreshold > 0.f) {
            const float prev = row_max_prev(mi);
            const bool skip = prev != -INFINITY && (prev - row_max(mi)) * scale_log2 >= -kThreshold;
            if (skip) {
                if constexpr (!kBrokenNoMaxReset) { row_max(mi) = prev; }
                rescale_row[mi] = false;
            }
        }
        any_rescale |= rescale_row[mi];
    }
    if constexpr (kThreshold > 0.f) {
        // Warp-uniform exit: when no row of the warp needs it, the rescale is skipped as a whole
        // (per row it would only be predicated off, still taking issue slots).  Every thread of
        // the warp reaches this point (softmax_rescale_o is called by the whole thread block).
        if (!__any_sync(0xffffffffu, any_rescale)) { return; }
    }
    #pragma unroll
    for (int mi = 0; mi < kRows; ++mi) {
        if (!rescale_row[mi]) { continue; }
        const float cur = !Check_inf ? row_max(mi) : (row_max(mi) == -INFINITY ? 0.0f : row_max(mi));
        const float rescale = exp2f((row_max_prev(mi) - cur) * scale_log2);
        row_sum(mi) *= rescale;
        #pragma unroll
        for (int ni = 0; ni < cute::size<1>(acc_o_rowcol); ++ni) { acc_o_rowcol(mi, ni) *= rescale; }
    }
}

}  // namespace deltas
}  // namespace flash_attn_wheels
