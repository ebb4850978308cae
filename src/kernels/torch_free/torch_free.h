// torch_free.h: what the kernel objects need from torch, defined by this project instead.
//
// The instantiation units and the dispatch compile without torch's include directories, so one
// set of kernel objects serves a wheel for every torch version (docs/release.md, "Kernels
// archives"). Upstream's kernel headers name three torch pieces; the headers beside this one
// (ATen/cuda/CUDAGeneratorImpl.h, ATen/cuda/detail/UnpackRaw.cuh, c10/cuda/CUDAException.h) stand
// in for them, and only the kernel targets have this folder on their include path:
//   - the Philox state the forward kernel reads its dropout seed and offset from (PhiloxState);
//   - its unpack into (seed, offset);
//   - C10_CUDA_CHECK / C10_CUDA_KERNEL_LAUNCH_CHECK, which here call raise_cuda_error.
// The binding defines raise_error and raise_cuda_error (src/binding/kernel_errors.cpp: a RuntimeError
// in Python, in both torch ABIs); its exact (ATen) build converts torch's at::PhiloxCudaState into
// PhiloxState, with static_asserts that every torch member it reads exists with a type that fits
// (src/binding/torch_free_bridge.cpp), and its stable-ABI build fills PhiloxState from the rng_state
// the Python layer reserves.
#pragma once

#include <cstdint>
#include <cstdio>   // upstream's hardware_info.h calls fprintf(stderr, ...) and exit() and
#include <cstdlib>  // got <cstdio>/<cstdlib> through torch's headers
#include <tuple>

#include <cuda_runtime_api.h>

namespace flash_attn_wheels {

// Dropout RNG state as the forward kernel reads it: either the values themselves, or (under CUDA
// graph capture) device pointers to the seed and to a base offset that the graph advances, plus a
// per-capture increment. The member types are the widest torch has used (torch 2.14 widened its
// offset_intragraph_ from 32 to 64 bits), so the layout is the same for every torch: the binding
// fills it from torch's at::PhiloxCudaState member by member (src/binding/torch_free_bridge.cpp),
// and the staged flash.h declares Flash_fwd_params::philox_args with this type
// (src/kernels/torch_free_tree.py), so the binding and the kernels agree on the parameter block.
struct PhiloxState {
  union Word {
    uint64_t value;
    int64_t* pointer;
  };
  Word seed;
  Word offset;
  uint64_t offset_intragraph;
  bool captured;
};

// Throws the binding's error type with `message` (a RuntimeError in Python). Defined by the binding.
[[noreturn]] void raise_error(const char* message);

// Throws for a failed CUDA runtime call made by a kernel launcher: `error` is what the call
// returned, `file`/`line` where the check sits. Defined by the binding.
[[noreturn]] void raise_cuda_error(cudaError_t error, const char* file, int line);

}  // namespace flash_attn_wheels

// The source file's name without its folders where the compiler offers it (GCC >= 12, Clang): the
// kernel objects then hold no build-folder path, so two builds of one key give the same bytes.
#if defined(__FILE_NAME__)
#define FLASH_ATTN_SOURCE_NAME __FILE_NAME__
#else
#define FLASH_ATTN_SOURCE_NAME __FILE__
#endif
