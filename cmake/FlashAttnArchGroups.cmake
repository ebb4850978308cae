# FlashAttnArchGroups.cmake
#
# GPU architecture groups of the flash_attn wheels, kept as data, and the one
# function that turns a group plus a CUDA toolkit version into the value of the
# CUDA_ARCHITECTURES target property.
#
# Vocabulary (docs/design.md): an "arch group" is a named
# set of SM numbers built into one wheel; SASS is machine code for one SM; PTX
# is the virtual ISA that the driver JIT-compiles for GPUs newer than any SASS
# in the file. Each group embeds PTX for its newest arch only.
#
# What CMake makes of the values below (CMake 4.4.5, nvcc 13.0, Ninja): CMake
# does not validate the spellings, it turns each entry into one nvcc flag:
#   NN-real     -> --generate-code=arch=compute_NN,code=[sm_NN]
#   NN-virtual  -> --generate-code=arch=compute_NN,code=[compute_NN]
#   100f-real   -> --generate-code=arch=compute_100f,code=[sm_100f]
#   120f-real   -> --generate-code=arch=compute_120f,code=[sm_120f]
# and nvcc then runs `ptxas -arch=sm_100f` etc. nvcc 13.0 rejects compute_101
# ("Unsupported gpu architecture") because sm_101 became sm_110 in CUDA 13.
#
# Usage:
#   include(FlashAttnArchGroups)
#   flash_attn_arch_group_targets(GROUP legacy CUDA_VERSION ${CMAKE_CUDA_COMPILER_VERSION}
#     OUT_ARCHS archs OUT_CUDA_ARCHITECTURES cuda_archs OUT_PTX_ARCH ptx OUT_SASS sass)
#   set_property(TARGET _C PROPERTY CUDA_ARCHITECTURES "${cuda_archs}")

# ---------------------------------------------------------------------------
# _flash_attn_arch_group_data()  (internal macro)
#
# Arguments: none. Outputs: sets the FLASH_ATTN_* data variables below in the
# calling scope. Errors: none. It is a macro, called by this file at include
# time (so callers can read FLASH_ATTN_ARCH_GROUPS) and at the start of each
# function, so the functions work from any directory or function scope, also
# one that never included this file itself.
# ---------------------------------------------------------------------------
macro(_flash_attn_arch_group_data)
  # The groups, in the order users see them in messages.
  set(FLASH_ATTN_ARCH_GROUPS blackwell legacy custom)

  # Fixed members of each named group (docs/design.md, "What it produces"):
  # blackwell = B200/B300 (sm_100), RTX 50xx / RTX PRO (sm_120), GB10 / DGX Spark
  # (sm_121); legacy = A100 (sm_80), Ada (sm_89), Hopper (sm_90). The custom
  # group takes its members from the ARCHS argument.
  set(FLASH_ATTN_ARCH_GROUP_blackwell 100 120 121)
  set(FLASH_ATTN_ARCH_GROUP_legacy 80 89 90)

  # Every SM this project can build, with the first CUDA toolkit that can
  # generate code for it (NVIDIA CUDA toolkit release notes: sm_80 in 11.0,
  # sm_86 in 11.1, sm_87 in 11.4, sm_89/sm_90 in 11.8, sm_100/sm_120 in 12.8,
  # sm_103/sm_121 in 12.9). Adding an arch means adding it here.
  set(FLASH_ATTN_KNOWN_ARCHS 80 86 87 89 90 100 103 120 121)
  set(FLASH_ATTN_ARCH_MIN_CUDA_80 11.0)
  set(FLASH_ATTN_ARCH_MIN_CUDA_86 11.1)
  set(FLASH_ATTN_ARCH_MIN_CUDA_87 11.4)
  set(FLASH_ATTN_ARCH_MIN_CUDA_89 11.8)
  set(FLASH_ATTN_ARCH_MIN_CUDA_90 11.8)
  set(FLASH_ATTN_ARCH_MIN_CUDA_100 12.8)
  set(FLASH_ATTN_ARCH_MIN_CUDA_103 12.9)
  set(FLASH_ATTN_ARCH_MIN_CUDA_120 12.8)
  set(FLASH_ATTN_ARCH_MIN_CUDA_121 12.9)
  set(FLASH_ATTN_ARCH_NAME_80 "Ampere, A100")
  set(FLASH_ATTN_ARCH_NAME_86 "Ampere, RTX 30xx / A10")
  set(FLASH_ATTN_ARCH_NAME_87 "Ampere, Jetson Orin")
  set(FLASH_ATTN_ARCH_NAME_89 "Ada, RTX 40xx / L40")
  set(FLASH_ATTN_ARCH_NAME_90 "Hopper, H100 / H200")
  set(FLASH_ATTN_ARCH_NAME_100 "Blackwell, B200")
  set(FLASH_ATTN_ARCH_NAME_103 "Blackwell, B300")
  set(FLASH_ATTN_ARCH_NAME_120 "Blackwell, RTX 50xx / RTX PRO")
  set(FLASH_ATTN_ARCH_NAME_121 "Blackwell, GB10 / DGX Spark")

  # FlashAttention-2 kernels use Ampere instructions (cp.async, bf16 mma);
  # upstream flash_api.cpp refuses older GPUs at run time ("FlashAttention only
  # supports Ampere GPUs or newer").
  set(FLASH_ATTN_MIN_ARCH 80)

  # Jetson Thor: sm_101 in CUDA 12.8/12.9, renamed sm_110 in CUDA 13.0 (nvcc 13.0
  # lists sm_110 and rejects compute_101). Not built by this project.
  set(FLASH_ATTN_THOR_ARCHS 101 110)

  # Archs whose SASS is emitted in family-specific form (`NNf`) once the toolkit
  # has that form (introduced in CUDA 12.9). sm_100f SASS runs on every member of
  # the 10.x family (sm_100, sm_103), sm_120f on the 12.x family (sm_120,
  # sm_121). It replaces plain NN-real: emitting both would compile every unit
  # twice for the same GPU.
  set(FLASH_ATTN_FAMILY_SPECIFIC_ARCHS 100 120)
  set(FLASH_ATTN_FAMILY_SPECIFIC_MIN_CUDA 12.9)
endmacro()
_flash_attn_arch_group_data()

# ---------------------------------------------------------------------------
# flash_attn_arch_groups_list(<out_var>)
#
# Arguments: <out_var> name of a variable in the caller's scope.
# Outputs:   <out_var> = the valid group names, "blackwell;legacy;custom".
# Errors:    FATAL_ERROR when <out_var> is missing.
# Source:    FLASH_ATTN_ARCH_GROUPS above (docs/design.md, "What it produces").
# ---------------------------------------------------------------------------
function(flash_attn_arch_groups_list out_var)
  if(NOT out_var OR NOT ARGC EQUAL 1)
    message(FATAL_ERROR "flash_attn_arch_groups_list: expects exactly one argument, the output variable name")
  endif()
  _flash_attn_arch_group_data()
  set(${out_var} "${FLASH_ATTN_ARCH_GROUPS}" PARENT_SCOPE)
endfunction()

# ---------------------------------------------------------------------------
# _flash_attn_parse_arch(<text> <out_var>)  (internal)
#
# Arguments: <text> one entry of a custom ARCHS list: "80", "8.0" or "sm_80".
# Outputs:   <out_var> = the SM as an integer ("80"); "8.0" means 8*10+0, the
#            compute-capability spelling used by TORCH_CUDA_ARCH_LIST.
# Errors:    FATAL_ERROR for anything else (e.g. "90a", "compute_90", "abc"),
#            saying how to write it.
# Source:    compute capability X.Y is SM number X*10+Y (CUDA programming guide).
# ---------------------------------------------------------------------------
function(_flash_attn_parse_arch text out_var)
  string(STRIP "${text}" t)
  if(t MATCHES "^(sm_)?([0-9]+)$")
    math(EXPR sm "${CMAKE_MATCH_2}")
  elseif(t MATCHES "^([0-9]+)\\.([0-9])$")
    math(EXPR sm "${CMAKE_MATCH_1} * 10 + ${CMAKE_MATCH_2}")
  else()
    message(FATAL_ERROR
      "flash_attn: '${text}' in ARCHS is not an SM number. Write the SM as 80, "
      "8.0 or sm_80; suffixes such as 'a'/'f' and PTX-only entries are chosen "
      "by this module, not by ARCHS.")
  endif()
  set(${out_var} "${sm}" PARENT_SCOPE)
endfunction()

# ---------------------------------------------------------------------------
# flash_attn_arch_group_targets(
#     GROUP <blackwell|legacy|custom>
#     CUDA_VERSION <x.y[.z]>
#     [ARCHS <list>]                    # required for GROUP custom, else empty
#     OUT_ARCHS <var>
#     OUT_CUDA_ARCHITECTURES <var>
#     OUT_PTX_ARCH <var>
#     OUT_SASS <var>)
#
# Arguments:
#   GROUP         a name from flash_attn_arch_groups_list().
#   CUDA_VERSION  the toolkit version, e.g. ${CMAKE_CUDA_COMPILER_VERSION}
#                 ("13.0.88") or "12.8".
#   ARCHS         GROUP custom only: SM numbers as 80;90, 8.0;9.0 or
#                 sm_80;sm_90, as separate arguments or one quoted string
#                 (";", "," or blanks between entries). Duplicates are
#                 dropped, the list is sorted.
#                 Other groups accept it only empty (pass-through options).
# Outputs (set in the caller's scope):
#   OUT_ARCHS              integer SM list, ascending, e.g. 80;89;90.
#   OUT_CUDA_ARCHITECTURES value for the CUDA_ARCHITECTURES target property:
#                          one SASS entry per arch - NN-real, or NNf-real for
#                          sm_100/sm_120 when CUDA >= 12.9 - then one PTX entry
#                          NN-virtual for the newest arch only, e.g.
#                          80-real;89-real;90-real;90-virtual.
#   OUT_PTX_ARCH           the newest arch, the one shipped as PTX (e.g. 90).
#   OUT_SASS               the SASS targets for humans and build info, e.g.
#                          sm_80;sm_89;sm_90 or sm_100f;sm_120f;sm_121.
# Status lines: one per family-specific choice, then one summary line.
# Errors (message(FATAL_ERROR), each naming what to do):
#   - unknown GROUP (lists the valid groups); missing GROUP/CUDA_VERSION/OUT_*;
#     unparsed arguments; a non-empty ARCHS for a fixed group (an empty one
#     is ignored); an empty custom ARCHS;
#   - CUDA_VERSION not of the form x.y or x.y.z;
#   - any arch below sm_80: "FlashAttention-2 needs sm_80 or newer (Ampere)"
#     (upstream flash_api.cpp refuses pre-Ampere GPUs at run time);
#   - sm_101 / sm_110 (Jetson Thor): not built by this project (docs/design.md);
#   - an arch missing from FLASH_ATTN_KNOWN_ARCHS;
#   - an arch newer than the toolkit: sm_100/sm_120 before CUDA 12.8,
#     sm_103/sm_121 before CUDA 12.9 (toolkit release notes; see the table).
# Rules and their sources:
#   - PTX only for the newest arch (docs/design.md: forward compatibility at the
#     smallest fatbin). It is always plain compute_NN, also for 121 on
#     CUDA >= 12.9, although CMake passes 121f-virtual through as well:
#     family-specific ('f') and arch-specific ('a') PTX can only be JIT-compiled
#     inside its own family, plain PTX on every later GPU.
#   - sm_121 keeps SASS of its own (121-real) next to 120f-real: a GB10 then runs
#     code compiled for exactly its SM.
# ---------------------------------------------------------------------------
function(flash_attn_arch_group_targets)
  _flash_attn_arch_group_data()
  set(one_value GROUP CUDA_VERSION OUT_ARCHS OUT_CUDA_ARCHITECTURES OUT_PTX_ARCH OUT_SASS)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "${one_value}" "ARCHS")

  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR
      "flash_attn_arch_group_targets: unexpected arguments '${ARG_UNPARSED_ARGUMENTS}'. "
      "Known keywords: GROUP CUDA_VERSION ARCHS OUT_ARCHS OUT_CUDA_ARCHITECTURES OUT_PTX_ARCH OUT_SASS.")
  endif()
  foreach(kw IN ITEMS OUT_ARCHS OUT_CUDA_ARCHITECTURES OUT_PTX_ARCH OUT_SASS CUDA_VERSION)
    if(NOT DEFINED ARG_${kw} OR "${ARG_${kw}}" STREQUAL "")
      message(FATAL_ERROR "flash_attn_arch_group_targets: ${kw} is required.")
    endif()
  endforeach()
  string(REPLACE ";" ", " valid_groups "${FLASH_ATTN_ARCH_GROUPS}")
  if(NOT DEFINED ARG_GROUP OR "${ARG_GROUP}" STREQUAL "")
    message(FATAL_ERROR
      "flash_attn: no arch group given. Pass GROUP with one of: ${valid_groups}.")
  endif()
  if(NOT ARG_GROUP IN_LIST FLASH_ATTN_ARCH_GROUPS)
    message(FATAL_ERROR
      "flash_attn: unknown arch group '${ARG_GROUP}'. Valid groups: ${valid_groups} "
      "(custom takes an explicit ARCHS list, e.g. ARCHS 80;90).")
  endif()

  # CUDA_VERSION: "12.8", "12.9.1", "13.0.88" (CMAKE_CUDA_COMPILER_VERSION).
  if(NOT ARG_CUDA_VERSION MATCHES "^[0-9]+\\.[0-9]+(\\.[0-9]+)?$")
    message(FATAL_ERROR
      "flash_attn: CUDA_VERSION '${ARG_CUDA_VERSION}' is not a CUDA version; "
      "pass x.y or x.y.z, e.g. \${CMAKE_CUDA_COMPILER_VERSION}.")
  endif()
  set(cuda "${ARG_CUDA_VERSION}")

  # ARCHS as a flat list. PARSE_ARGV keeps a quoted argument whole, so
  # ARCHS "80;90" arrives as one element "80\;90"; commas and blanks
  # (TORCH_CUDA_ARCH_LIST style "8.0 9.0") separate entries as well.
  set(requested "")
  foreach(entry IN LISTS ARG_ARCHS)
    string(REGEX REPLACE "[,; \t]+" ";" entry "${entry}")
    foreach(item IN LISTS entry)
      if(NOT "${item}" STREQUAL "")
        list(APPEND requested "${item}")
      endif()
    endforeach()
  endforeach()

  # Members of the group.
  if(ARG_GROUP STREQUAL "custom")
    set(archs "")
    foreach(entry IN LISTS requested)
      _flash_attn_parse_arch("${entry}" sm)
      list(APPEND archs "${sm}")
    endforeach()
    list(LENGTH archs n_archs)
    if(n_archs EQUAL 0)
      message(FATAL_ERROR
        "flash_attn: arch group custom needs a non-empty ARCHS list, "
        "e.g. ARCHS 80;90 or ARCHS 8.0;9.0.")
    endif()
  else()
    # An empty ARCHS is accepted, so a caller can always pass its option
    # through (ARCHS "${FLASH_ATTN_CUDA_ARCHS}"); a non-empty one is a mistake.
    if(requested)
      string(REPLACE ";" ", " fixed "${FLASH_ATTN_ARCH_GROUP_${ARG_GROUP}}")
      message(FATAL_ERROR
        "flash_attn: ARCHS is only for GROUP custom; group ${ARG_GROUP} is "
        "fixed to ${fixed}. Use GROUP custom ARCHS <list> to choose archs.")
    endif()
    set(archs ${FLASH_ATTN_ARCH_GROUP_${ARG_GROUP}})
  endif()
  list(REMOVE_DUPLICATES archs)
  list(SORT archs COMPARE NATURAL ORDER ASCENDING)

  # Refusals, per arch, in ascending order so the oldest problem is named first.
  foreach(sm IN LISTS archs)
    if(sm LESS FLASH_ATTN_MIN_ARCH)
      message(FATAL_ERROR
        "flash_attn: FlashAttention-2 needs sm_80 or newer (Ampere); sm_${sm} "
        "was requested in group ${ARG_GROUP}. Remove it from ARCHS.")
    endif()
    if(sm IN_LIST FLASH_ATTN_THOR_ARCHS)
      message(FATAL_ERROR
        "flash_attn: sm_${sm} (Jetson Thor) is not built by this project. "
        "sm_101 was renamed sm_110 in CUDA 13, and the blackwell group targets "
        "discrete GPUs (sm_100, sm_120) and GB10 (sm_121), not Thor. "
        "Remove sm_${sm} from ARCHS.")
    endif()
    if(NOT sm IN_LIST FLASH_ATTN_KNOWN_ARCHS)
      string(REPLACE ";" ", sm_" known "${FLASH_ATTN_KNOWN_ARCHS}")
      message(FATAL_ERROR
        "flash_attn: sm_${sm} is not an architecture this project builds. "
        "Known: sm_${known}. Add it to FLASH_ATTN_KNOWN_ARCHS in "
        "cmake/FlashAttnArchGroups.cmake if it is real.")
    endif()
    set(need "${FLASH_ATTN_ARCH_MIN_CUDA_${sm}}")
    if(cuda VERSION_LESS need)
      message(FATAL_ERROR
        "flash_attn: sm_${sm} (${FLASH_ATTN_ARCH_NAME_${sm}}) needs CUDA ${need} "
        "or newer; this toolkit is CUDA ${cuda}. Install CUDA >= ${need} or "
        "leave sm_${sm} out (GROUP custom ARCHS ...).")
    endif()
  endforeach()

  # SASS entries.
  set(cuda_archs "")
  set(sass "")
  foreach(sm IN LISTS archs)
    if(sm IN_LIST FLASH_ATTN_FAMILY_SPECIFIC_ARCHS
       AND cuda VERSION_GREATER_EQUAL FLASH_ATTN_FAMILY_SPECIFIC_MIN_CUDA)
      list(APPEND cuda_archs "${sm}f-real")
      list(APPEND sass "sm_${sm}f")
      message(STATUS
        "flash_attn: sm_${sm} -> ${sm}f-real (family-specific SASS, "
        "CUDA ${cuda} >= ${FLASH_ATTN_FAMILY_SPECIFIC_MIN_CUDA})")
    else()
      list(APPEND cuda_archs "${sm}-real")
      list(APPEND sass "sm_${sm}")
    endif()
  endforeach()

  # PTX for the newest arch only, always the plain (forward-compatible) form.
  list(GET archs -1 ptx)
  list(APPEND cuda_archs "${ptx}-virtual")

  message(STATUS
    "flash_attn: arch group ${ARG_GROUP} (CUDA ${cuda}) -> CUDA_ARCHITECTURES "
    "${cuda_archs} (SASS: ${sass}; PTX: compute_${ptx})")

  set(${ARG_OUT_ARCHS} "${archs}" PARENT_SCOPE)
  set(${ARG_OUT_CUDA_ARCHITECTURES} "${cuda_archs}" PARENT_SCOPE)
  set(${ARG_OUT_PTX_ARCH} "${ptx}" PARENT_SCOPE)
  set(${ARG_OUT_SASS} "${sass}" PARENT_SCOPE)
endfunction()
