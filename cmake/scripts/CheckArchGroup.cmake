# CheckArchGroup.cmake: the arch-group rules of cmake/FlashAttnArchGroups.cmake for callers outside a
# configure (the Python release tooling, release.compile.arch_rules), so the rules are written once.
#
# Usage (script mode):
#   cmake -DGROUP=<g> [-DARCHS=<80,90>] [-DCUDA_VERSION=<x.y[.z]>] [-DGROUP_ONLY=ON | -DPARSE_ONLY=ON]
#         [-DARCHS_FLAG=<name>] [-DGROUP_HINT=<text>] [-DTOOLKIT_HINT=<text>] [-DCUSTOM_PREFIX=<text>]
#         [-DFLASH_ATTN_MANIFEST=<file>] -P cmake/scripts/CheckArchGroup.cmake
#
# GROUP_ONLY checks the group name only; PARSE_ONLY parses ARCHS as a custom list (it may be
# empty) and applies the oldest-SM rule only (the sessions' --cuda-archs, before the group is
# known); otherwise flash_attn_arch_group_parse() and flash_attn_arch_group_check() run (the
# toolkit rule only with CUDA_VERSION). ARCHS_FLAG, GROUP_HINT, TOOLKIT_HINT and CUSTOM_PREFIX
# word the remedies for the caller's users (see those functions).
# Output on success, on stdout: "flash_attn-archs=<SMs, ';'-separated>" and "flash_attn-ptx=<SM>"
# (both empty with GROUP_ONLY). Errors: the module's FATAL_ERROR (exit code 1, the message on stderr).
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../FlashAttnArchGroups.cmake")

# Optional keywords, passed on only when given (the functions have their own defaults).
set(flag "")
if(DEFINED ARCHS_FLAG)
  set(flag ARCHS_FLAG "${ARCHS_FLAG}")
endif()
set(group_hint "")
if(DEFINED GROUP_HINT)
  set(group_hint GROUP_HINT "${GROUP_HINT}")
endif()
set(custom_prefix "")
if(DEFINED CUSTOM_PREFIX)
  set(custom_prefix CUSTOM_PREFIX "${CUSTOM_PREFIX}")
endif()
set(toolkit "")
if(NOT "${CUDA_VERSION}" STREQUAL "")
  set(toolkit CUDA_VERSION "${CUDA_VERSION}")
endif()
set(toolkit_hint "")
if(DEFINED TOOLKIT_HINT)
  set(toolkit_hint TOOLKIT_HINT "${TOOLKIT_HINT}")
endif()
# A trailing comma keeps ARCHS_TEXT non-empty (an empty keyword value draws CMP0174's warning).
string(REPLACE ";" "," archs_text "${ARCHS},")

set(archs "")
set(ptx "")
if(GROUP_ONLY)
  flash_attn_arch_group_parse(GROUP "${GROUP}" GROUP_ONLY ${group_hint} OUT_ARCHS archs)
elseif(PARSE_ONLY)
  flash_attn_arch_group_parse(GROUP custom ARCHS_TEXT "${archs_text}" ALLOW_EMPTY ${flag} OUT_ARCHS archs)
  if(archs)
    flash_attn_arch_group_check(GROUP custom ARCHS ${archs} ${flag} MIN_ARCH_ONLY OUT_PTX_ARCH ptx)
  endif()
else()
  flash_attn_arch_group_parse(GROUP "${GROUP}" ${toolkit} ARCHS_TEXT "${archs_text}" ${flag} ${group_hint}
    ${custom_prefix} OUT_ARCHS archs)
  flash_attn_arch_group_check(GROUP "${GROUP}" ARCHS ${archs} ${toolkit} ${flag} ${toolkit_hint} OUT_PTX_ARCH ptx)
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "flash_attn-archs=${archs}")
execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "flash_attn-ptx=${ptx}")
