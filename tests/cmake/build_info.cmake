# Driver for flash_attn_write_build_info(), run by the unit tests: the build info the build itself
# would write, without a compiler, torch or upstream tree.
#
#   cmake -DGROUP=<g> -DCUDA_VERSION=<v> [-DARCHS=<list>] -DOUT=<file> -P build_info.cmake
#
# Arguments: GROUP, CUDA_VERSION (e.g. 13.0.88) and ARCHS (custom group only) go to
# flash_attn_arch_group_targets(); OUT is the JSON file to write. The torch, compiler and upstream
# fields get fixed made-up values; the kernel set is `ci` (one unit, fwd hdim64 fp16) with the
# manifest's head dims. Honours FLASH_ATTN_MANIFEST like every manifest reader.
# Errors: whatever the modules raise (cmake exits non-zero, text on stderr).
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/FlashAttnBuildInfo.cmake")

flash_attn_arch_group_targets(GROUP "${GROUP}" CUDA_VERSION "${CUDA_VERSION}" ARCHS "${ARCHS}"
  OUT_ARCHS archs OUT_CUDA_ARCHITECTURES cuda_archs OUT_PTX_ARCH ptx OUT_SASS sass)
flash_attn_manifest_get(head_dims kernels head_dims)
set(kernels_json "${OUT}.kernels.json")
file(WRITE "${kernels_json}" "{\"kernel_set\": \"ci\", \"head_dims\": ${head_dims}, \"kernels\": "
     "[{\"kind\": \"fwd\", \"dtype\": \"fp16\", \"head_dim\": 64, \"causal\": false}]}")
set(FLASH_ATTN_APPLY_DELTAS ON)
set(FLASH_ATTN_PACKED_FMA ON)
set(FLASH_ATTN_RESCALE_THRESHOLD 8.0)
set(FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET OFF)
flash_attn_manifest_get(upstream_version upstream version)
flash_attn_write_build_info(
  OUT_JSON "${OUT}" OUT_HEADER "${OUT}.h" KERNELS_JSON "${kernels_json}" VERSION "2.8.3.post2" GROUP "${GROUP}"
  ARCHS ${archs} SASS ${sass} PTX_ARCH "${ptx}" CUDA_VERSION "${CUDA_VERSION}" TORCH_VERSION "2.14.1+cu130"
  TORCH_CUDA_VERSION "13.0" CXX11_ABI ON TORCH_ABI exact UPSTREAM_SOURCE "sdist" UPSTREAM_VERSION "${upstream_version}"
  UPSTREAM_SHA256 "0" FATBIN_COMPRESSION "size" CXX_COMPILER "GNU 13.2.0" CUDA_COMPILER "NVIDIA ${CUDA_VERSION}")
