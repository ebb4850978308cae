# Self-checking script, run by test_cmake_modules.py:
#
#   cmake -P module_scope.cmake
#
# Both modules are included inside a function, so their top-level data
# variables vanish when it returns; the functions must still work from the
# outer scope (each one loads its own data). Also checks
# flash_attn_arch_groups_list(). Outputs: "-- RESULT ..." lines. Errors:
# FATAL_ERROR with "MODULE_SCOPE FAILED" when a check fails.
cmake_minimum_required(VERSION 3.25)

function(load_modules)
  include("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../../cmake/FlashAttnArchGroups.cmake")
  include("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../../cmake/FlashAttnHostFlags.cmake")
endfunction()
load_modules()

if(DEFINED FLASH_ATTN_ARCH_GROUPS)
  message(FATAL_ERROR "MODULE_SCOPE FAILED: data leaked out of the function scope")
endif()

flash_attn_arch_groups_list(groups)
if(NOT groups STREQUAL "blackwell;legacy;custom")
  message(FATAL_ERROR "MODULE_SCOPE FAILED: groups = '${groups}'")
endif()

flash_attn_arch_group_targets(GROUP legacy CUDA_VERSION 13.0
  OUT_ARCHS a OUT_CUDA_ARCHITECTURES ca OUT_PTX_ARCH p OUT_SASS s)
if(NOT ca STREQUAL "80-real;89-real;90-real;90-virtual")
  message(FATAL_ERROR "MODULE_SCOPE FAILED: legacy -> '${ca}'")
endif()

flash_attn_host_flags(COMPILER_ID GNU COMPILER_VERSION 13.2.0 CUDA_VERSION 13.0
  TORCH_VERSION 2.14.1 OUT_CXX_FLAGS x OUT_CUDA_FLAGS c OUT_CXX_STANDARD std)
if(NOT x STREQUAL "-fvisibility=hidden" OR NOT std STREQUAL "20")
  message(FATAL_ERROR "MODULE_SCOPE FAILED: GNU -> '${x}' C++${std}")
endif()

message(STATUS "RESULT GROUPS=${groups}")
