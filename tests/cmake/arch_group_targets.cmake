# Driver for flash_attn_arch_group_targets(), run by test_cmake_modules.py:
#
#   cmake [-DGROUP=<g>] -DCUDA_VERSION=<v> [-DARCHS=<list>] -P arch_group_targets.cmake
#
# Arguments: GROUP, CUDA_VERSION and ARCHS are passed on only when defined, so
# a test can leave any of them out; -DARCHS= (defined, empty) passes the ARCHS
# keyword with no value. -DQUOTED=ON passes ARCHS "${ARCHS}" as one quoted
# argument instead of separate ones.
# Outputs: one stdout line per result, "-- RESULT <NAME>=<value>", after the
# module's own status lines.
# Errors: whatever the function raises (cmake exits non-zero, text on stderr).
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/FlashAttnArchGroups.cmake")

set(args "")
if(DEFINED GROUP)
  list(APPEND args GROUP "${GROUP}")
endif()
if(DEFINED CUDA_VERSION)
  list(APPEND args CUDA_VERSION "${CUDA_VERSION}")
endif()
set(outs
  OUT_ARCHS archs
  OUT_CUDA_ARCHITECTURES cuda_archs
  OUT_PTX_ARCH ptx
  OUT_SASS sass)
if(QUOTED AND DEFINED ARCHS)
  # ARCHS "<value>" as one quoted argument, the way CMakeLists.txt passes an
  # option through.
  flash_attn_arch_group_targets(${args} ARCHS "${ARCHS}" ${outs})
elseif(DEFINED ARCHS)
  flash_attn_arch_group_targets(${args} ARCHS ${ARCHS} ${outs})
else()
  flash_attn_arch_group_targets(${args} ${outs})
endif()

message(STATUS "RESULT OUT_ARCHS=${archs}")
message(STATUS "RESULT OUT_CUDA_ARCHITECTURES=${cuda_archs}")
message(STATUS "RESULT OUT_PTX_ARCH=${ptx}")
message(STATUS "RESULT OUT_SASS=${sass}")
