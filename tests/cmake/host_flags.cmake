# Driver for flash_attn_host_flags(), run by test_cmake_modules.py:
#
#   cmake -DCOMPILER_ID=<id> -DCOMPILER_VERSION=<v> -DCUDA_VERSION=<v>
#         -DTORCH_VERSION=<v> -P host_flags.cmake
#
# Arguments: each -D is passed on only when defined, so a test can leave one
# out. Outputs: "-- RESULT <NAME>=<value>" lines on stdout. Errors: whatever
# the function raises (cmake exits non-zero, text on stderr).
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/FlashAttnHostFlags.cmake")

set(args "")
foreach(kw IN ITEMS COMPILER_ID COMPILER_VERSION CUDA_VERSION TORCH_VERSION)
  if(DEFINED ${kw})
    list(APPEND args ${kw} "${${kw}}")
  endif()
endforeach()

flash_attn_host_flags(${args}
  OUT_CXX_FLAGS cxx_flags
  OUT_CUDA_FLAGS cuda_flags
  OUT_CXX_STANDARD cxx_std)

message(STATUS "RESULT OUT_CXX_FLAGS=${cxx_flags}")
message(STATUS "RESULT OUT_CUDA_FLAGS=${cuda_flags}")
message(STATUS "RESULT OUT_CXX_STANDARD=${cxx_std}")
