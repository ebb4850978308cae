# FlashAttnTorchAbi.cmake: which torch C++ API the binding is compiled against (FLASH_ATTN_TORCH_ABI).
#
#   exact   ATen/c10 and TORCH_LIBRARY: the wheel loads under the one torch it was built against
#           (its local version label names that torch).
#   stable  torch's stable ABI only (torch/csrc/stable, torch/headeronly, the C shims) and
#           STABLE_TORCH_LIBRARY, compiled with TORCH_TARGET_VERSION = the minimum torch of
#           build-manifest.json (stable_abi.torch_min): one wheel serves that torch and every later one.
#           docs/stable-abi.md says why that minimum and what differs (dropout's Philox state comes
#           from Python).
# The kernel objects are the same for both (they include no torch header at all).
#
# flash_attn_torch_abi(ABI <exact|stable> TORCH_VERSION <version torch reports>
#                      OUT_MIN <var> OUT_DEFINITIONS <var> OUT_EXCLUDED <var> OUT_TORCH_TARGET <var>)
#   OUT_MIN         the minimum torch major.minor of a stable build ("2.11"), "" for exact;
#   OUT_DEFINITIONS compile definitions of the binding (stable: FLASH_ATTN_STABLE_ABI,
#                   TORCH_TARGET_VERSION as torch's 0xMMmm000000000000 encoding, USE_CUDA);
#   OUT_EXCLUDED    binding sources (file names under src/binding) the other ABI owns;
#   OUT_TORCH_TARGET the link target: flash_attn_torch (exact) or flash_attn_torch_stable.
#   Errors (FATAL_ERROR, at configure time): ABI not one of the manifest's choices; a stable build
#   against a torch older than the minimum (its headers lack the API the binding uses).
function(flash_attn_torch_abi)
  cmake_parse_arguments(arg "" "ABI;TORCH_VERSION;OUT_MIN;OUT_DEFINITIONS;OUT_EXCLUDED;OUT_TORCH_TARGET" "" ${ARGN})
  flash_attn_option_check(FLASH_ATTN_TORCH_ABI "${arg_ABI}")  # cmake/FlashAttnOptions.cmake
  if(arg_ABI STREQUAL "exact")
    set(${arg_OUT_MIN} "" PARENT_SCOPE)
    set(${arg_OUT_DEFINITIONS} "" PARENT_SCOPE)
    set(${arg_OUT_EXCLUDED} "ops_stable.cpp" PARENT_SCOPE)
    set(${arg_OUT_TORCH_TARGET} flash_attn_torch PARENT_SCOPE)
    return()
  endif()
  flash_attn_manifest_get(torch_min stable_abi torch_min)
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _ "${arg_TORCH_VERSION}")
  set(built "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
  if(built VERSION_LESS torch_min)
    message(FATAL_ERROR "flash_attn: FLASH_ATTN_TORCH_ABI=stable needs torch >= ${torch_min} to build against "
                        "(found ${arg_TORCH_VERSION}): install torch>=${torch_min}, or build the exact ABI "
                        "(FLASH_ATTN_TORCH_ABI=exact) for this torch.")
  endif()
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)$" _ "${torch_min}")
  math(EXPR major "${CMAKE_MATCH_1}" OUTPUT_FORMAT HEXADECIMAL)
  math(EXPR minor "${CMAKE_MATCH_2}" OUTPUT_FORMAT HEXADECIMAL)
  # torch/csrc/stable/version.h: TORCH_VERSION_M_m_0 = (M << 56) | (m << 48), two hex digits each.
  string(SUBSTRING "${major}" 2 -1 major)
  string(SUBSTRING "${minor}" 2 -1 minor)
  foreach(part major minor)
    string(LENGTH "${${part}}" length)
    if(length EQUAL 1)
      set(${part} "0${${part}}")
    endif()
  endforeach()
  set(${arg_OUT_MIN} "${torch_min}" PARENT_SCOPE)
  set(${arg_OUT_DEFINITIONS} FLASH_ATTN_STABLE_ABI=1 "TORCH_TARGET_VERSION=0x${major}${minor}000000000000" USE_CUDA=1
      PARENT_SCOPE)
  set(${arg_OUT_EXCLUDED} "ops.cpp;torch_free_bridge.cpp" PARENT_SCOPE)
  set(${arg_OUT_TORCH_TARGET} flash_attn_torch_stable PARENT_SCOPE)
  message(STATUS "flash_attn: torch stable ABI, TORCH_TARGET_VERSION ${torch_min} (built against torch "
                 "${arg_TORCH_VERSION}; serves torch >= ${torch_min})")
endfunction()
