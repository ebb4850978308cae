// Kernel dispatch: the only interface between our binding (src/binding) and the
// instantiation units generated for the chosen kernel set (src/kernels/generate_units.py).
//
// The generated file `dispatch.cu` in the build directory implements these functions
// with one `case` per unit that the kernel set built.  A combination that the kernel set
// left out reaches a stub that raises (raise_error of torch_free.h: the binding throws c10::Error,
// a RuntimeError in Python) with the text
//   flash_attn was built without <what> (kernel set '<set>'); rebuild with ...
//
// Head dimensions are dispatched on the rounded head dim that upstream's kernels are
// instantiated for: the smallest of kernels.head_dims in build-manifest.json that is >= params.d.
#pragma once

#include <cuda_runtime_api.h>

#include "namespace_config.h"  // from the extracted upstream tree
#include "flash.h"             // Flash_fwd_params / Flash_bwd_params (upstream)

namespace flash_attn_wheels {

// Rounded head dim the kernels are instantiated for; 0 if head_dim > 256 or <= 0.
int kernel_head_dim(int head_dim);

// Forward. split_kv selects the split-KV kernels (params.num_splits > 1, or the KV-cache
// path that appends new keys / uses a block table).  Dispatches on params.is_bf16,
// kernel_head_dim(params.d) and params.is_causal.  Raises (raise_error) for a stub.
void run_fwd(FLASH_NAMESPACE::Flash_fwd_params& params, cudaStream_t stream, bool split_kv);

// Backward.  Dispatches like run_fwd.  Raises (raise_error) for a stub.
void run_bwd(FLASH_NAMESPACE::Flash_bwd_params& params, cudaStream_t stream);

// True when the kernel set holds the unit; kind is "fwd", "fwd_split" or "bwd".
bool has_kernel(const char* kind, bool bf16, int head_dim, bool causal);

// Name of the kernel set this library was built with ("release", "dev", "ci", "custom").
const char* kernel_set_name();

}  // namespace flash_attn_wheels
