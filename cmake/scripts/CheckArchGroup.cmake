# CheckArchGroup.cmake: the arch-group rules of cmake/FlashAttnArchGroups.cmake for callers outside a
# configure (the Python release tooling, release.arch_rules), so the rules are written once.
#
# Usage (script mode):
#   cmake -DGROUP=<g> [-DARCHS=<80,90>] [-DCUDA_VERSION=<x.y[.z]>] [-DGROUP_ONLY=ON]
#         [-DARCHS_FLAG=<name>] [-DGROUP_HINT=<text>] [-DTOOLKIT_HINT=<text>]
#         [-DFLASH_ATTN_MANIFEST=<file>] -P cmake/scripts/CheckArchGroup.cmake
#
# GROUP_ONLY checks the group name only; otherwise flash_attn_arch_group_parse() and
# flash_attn_arch_group_check() run (the toolkit rule only with CUDA_VERSION). ARCHS_FLAG, GROUP_HINT
# and TOOLKIT_HINT word the remedies for the caller's users (see those functions).
# Output on success, on stdout: "flash_attn-archs=<SMs, ';'-separated>" and "flash_attn-ptx=<SM>"
# (both empty with GROUP_ONLY). Errors: the module's FATAL_ERROR (exit code 1, the message on stderr).
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../FlashAttnArchGroups.cmake")

set(hints "")
foreach(name IN ITEMS ARCHS_FLAG GROUP_HINT)
  if(DEFINED ${name})
    list(APPEND hints ${name} "${${name}}")
  endif()
endforeach()
set(archs "")
set(ptx "")
if(GROUP_ONLY)
  flash_attn_arch_group_parse(GROUP "${GROUP}" GROUP_ONLY ${hints} OUT_ARCHS archs)
else()
  set(toolkit "")
  if(NOT "${CUDA_VERSION}" STREQUAL "")
    set(toolkit CUDA_VERSION "${CUDA_VERSION}")
  endif()
  # A trailing comma keeps the keyword's value non-empty (an empty one draws CMP0174's warning).
  string(REPLACE ";" "," archs_text "${ARCHS},")
  flash_attn_arch_group_parse(GROUP "${GROUP}" ${toolkit} ARCHS_TEXT "${archs_text}" ${hints} OUT_ARCHS archs)
  set(remedies "")
  if(DEFINED ARCHS_FLAG)
    list(APPEND remedies ARCHS_FLAG "${ARCHS_FLAG}")
  endif()
  if(DEFINED TOOLKIT_HINT)
    list(APPEND remedies TOOLKIT_HINT "${TOOLKIT_HINT}")
  endif()
  flash_attn_arch_group_check(GROUP "${GROUP}" ARCHS ${archs} ${toolkit} ${remedies} OUT_PTX_ARCH ptx)
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "flash_attn-archs=${archs}")
execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "flash_attn-ptx=${ptx}")
