# FlashAttnArchGroups.cmake
#
# GPU architecture groups of the flash_attn wheels (data: "archs" and
# "arch_groups" in build-manifest.json), and the one function that turns a
# group plus a CUDA toolkit version into the value of the CUDA_ARCHITECTURES
# target property.
#
# Vocabulary: an "arch group" is a named
# set of SM numbers built into one wheel; SASS is machine code for one SM; PTX
# is the virtual ISA that the driver JIT-compiles for GPUs newer than any SASS
# in the file. Each group embeds PTX for its newest arch only.
#
# What CMake makes of the entries (CMake 4.4.5, nvcc 13.0, Ninja): CMake
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
#
# flash_attn_arch_group_targets runs three steps: flash_attn_arch_group_parse
# (group name, toolkit spelling, SM list), flash_attn_arch_group_check (the SM
# rules of the manifest) and _flash_attn_arch_group_emit (the entries above).
# The rules are written here only: the Python release tooling runs the first
# two through cmake/scripts/CheckArchGroup.cmake (release.compile.arch_rules), with the
# remedies worded for its flags (ARCHS_FLAG, GROUP_HINT, CUSTOM_PREFIX, ...).

include("${CMAKE_CURRENT_LIST_DIR}/FlashAttnManifest.cmake")

# ---------------------------------------------------------------------------
# _flash_attn_arch_group_data()  (internal)
#
# Arguments: none. Outputs: sets the FLASH_ATTN_* data variables below in the
# calling scope, read from the build manifest (build-manifest.json: "archs",
# "arch_groups"; docs/manifest.md says where each figure comes from):
#   FLASH_ATTN_ARCH_GROUPS            group names, in the order users see them
#   FLASH_ATTN_ARCH_GROUP_<g>         fixed SMs of group <g> (not for custom)
#   FLASH_ATTN_ARCH_GROUP_PTX_<g>     the SM group <g> ships as PTX
#   FLASH_ATTN_KNOWN_ARCHS            every SM this project can build, with
#   FLASH_ATTN_ARCH_MIN_CUDA_<sm>     the first CUDA toolkit that generates it
#   FLASH_ATTN_ARCH_NAME_<sm>         and its name for messages
#   FLASH_ATTN_MIN_ARCH               oldest SM (80: Ampere)
#   FLASH_ATTN_REFUSED_ARCHS          SMs refused by name (Jetson Thor 101/110),
#   FLASH_ATTN_REFUSED_NAME_<sm>      with their name and
#   FLASH_ATTN_REFUSED_REASON_<sm>    the reason given in the error
#   FLASH_ATTN_FAMILY_SPECIFIC_ARCHS  SMs emitted as family-specific NNf SASS
#   FLASH_ATTN_FAMILY_SPECIFIC_MIN_CUDA  from this toolkit on
# Errors: FATAL_ERROR when the manifest lacks an entry. Called by this file at
# include time (so callers can read FLASH_ATTN_ARCH_GROUPS) and at the start of
# each function, so the functions work from any directory or function scope,
# also one that never included this file itself.
# ---------------------------------------------------------------------------
function(_flash_attn_arch_group_data)
  set(vars FLASH_ATTN_ARCH_GROUPS FLASH_ATTN_KNOWN_ARCHS FLASH_ATTN_MIN_ARCH FLASH_ATTN_REFUSED_ARCHS
           FLASH_ATTN_FAMILY_SPECIFIC_ARCHS FLASH_ATTN_FAMILY_SPECIFIC_MIN_CUDA)
  set(FLASH_ATTN_ARCH_GROUPS "")
  flash_attn_manifest_get(groups arch_groups)
  string(JSON n LENGTH "${groups}")
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON name GET "${groups}" ${i} name)
    list(APPEND FLASH_ATTN_ARCH_GROUPS "${name}")
    flash_attn_manifest_list(FLASH_ATTN_ARCH_GROUP_${name} arch_groups ${i} sms)
    flash_attn_manifest_get(FLASH_ATTN_ARCH_GROUP_PTX_${name} arch_groups ${i} ptx)
    list(APPEND vars FLASH_ATTN_ARCH_GROUP_${name} FLASH_ATTN_ARCH_GROUP_PTX_${name})
  endforeach()

  set(FLASH_ATTN_KNOWN_ARCHS "")
  flash_attn_manifest_get(known archs known)
  string(JSON n LENGTH "${known}")
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON sm GET "${known}" ${i} sm)
    list(APPEND FLASH_ATTN_KNOWN_ARCHS "${sm}")
    string(JSON FLASH_ATTN_ARCH_MIN_CUDA_${sm} GET "${known}" ${i} min_cuda)
    string(JSON FLASH_ATTN_ARCH_NAME_${sm} GET "${known}" ${i} name)
    list(APPEND vars FLASH_ATTN_ARCH_MIN_CUDA_${sm} FLASH_ATTN_ARCH_NAME_${sm})
  endforeach()

  set(FLASH_ATTN_REFUSED_ARCHS "")
  flash_attn_manifest_get(refused archs refused)
  string(JSON n LENGTH "${refused}")
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON sm GET "${refused}" ${i} sm)
    list(APPEND FLASH_ATTN_REFUSED_ARCHS "${sm}")
    string(JSON FLASH_ATTN_REFUSED_NAME_${sm} GET "${refused}" ${i} name)
    string(JSON FLASH_ATTN_REFUSED_REASON_${sm} GET "${refused}" ${i} reason)
    list(APPEND vars FLASH_ATTN_REFUSED_NAME_${sm} FLASH_ATTN_REFUSED_REASON_${sm})
  endforeach()

  flash_attn_manifest_get(FLASH_ATTN_MIN_ARCH archs min_sm)
  flash_attn_manifest_list(FLASH_ATTN_FAMILY_SPECIFIC_ARCHS archs family_specific sms)
  flash_attn_manifest_get(FLASH_ATTN_FAMILY_SPECIFIC_MIN_CUDA archs family_specific min_cuda)
  foreach(v IN LISTS vars)
    set(${v} "${${v}}" PARENT_SCOPE)
  endforeach()
endfunction()
_flash_attn_arch_group_data()

# ---------------------------------------------------------------------------
# flash_attn_arch_groups_list(<out_var>)
#
# Arguments: <out_var> name of a variable in the caller's scope.
# Outputs:   <out_var> = the valid group names, "blackwell;legacy;custom".
# Errors:    FATAL_ERROR when <out_var> is missing.
# Source:    arch_groups in build-manifest.json.
# ---------------------------------------------------------------------------
function(flash_attn_arch_groups_list out_var)
  if(NOT out_var OR NOT ARGC EQUAL 1)
    message(FATAL_ERROR "flash_attn_arch_groups_list: expects exactly one argument, the output variable name")
  endif()
  _flash_attn_arch_group_data()
  set(${out_var} "${FLASH_ATTN_ARCH_GROUPS}" PARENT_SCOPE)
endfunction()

# ---------------------------------------------------------------------------
# _flash_attn_parse_arch(<text> <flag> <out_var>)  (internal)
#
# Arguments: <text> one entry of a custom ARCHS list: "80", "8.0" or "sm_80";
#            <flag> the list's name in the message (ARCHS, or --cuda-archs).
# Outputs:   <out_var> = the SM as an integer ("80"); "8.0" means 8*10+0, the
#            compute-capability spelling used by TORCH_CUDA_ARCH_LIST.
# Errors:    FATAL_ERROR for anything else (e.g. "90a", "compute_90", "abc"),
#            saying how to write it.
# Source:    compute capability X.Y is SM number X*10+Y (CUDA programming guide).
# ---------------------------------------------------------------------------
function(_flash_attn_parse_arch text flag out_var)
  string(STRIP "${text}" t)
  if(t MATCHES "^(sm_)?([0-9]+)$")
    math(EXPR sm "${CMAKE_MATCH_2}")
  elseif(t MATCHES "^([0-9]+)\\.([0-9])$")
    math(EXPR sm "${CMAKE_MATCH_1} * 10 + ${CMAKE_MATCH_2}")
  else()
    if(flag STREQUAL "ARCHS")
      set(several "ARCHS 80;90")
    else()
      set(several "${flag} 80,90")
    endif()
    message(FATAL_ERROR
      "flash_attn: '${text}' in ${flag} is not an SM number. Write it as 80, 8.0 or sm_80 "
      "(several: ${several}); suffixes such as 'a'/'f' are chosen by the build.")
  endif()
  set(${out_var} "${sm}" PARENT_SCOPE)
endfunction()

# ---------------------------------------------------------------------------
# _flash_attn_sass_entries(<cuda> <archs> <out_cuda_archs> <out_sass>)  (internal)
#
# Arguments: <cuda> toolkit version, <archs> SM list (checked by the caller).
# Outputs:   <out_cuda_archs> one CUDA_ARCHITECTURES SASS entry per SM: NNf-real
#            for the manifest's family-specific SMs when <cuda> has that form,
#            else NN-real; <out_sass> the same as sm_NN[f] names.
# Errors:    none.
# ---------------------------------------------------------------------------
function(_flash_attn_sass_entries cuda archs out_cuda_archs out_sass)
  _flash_attn_arch_group_data()
  set(cuda_archs "")
  set(sass "")
  foreach(sm IN LISTS archs)
    if(sm IN_LIST FLASH_ATTN_FAMILY_SPECIFIC_ARCHS
       AND cuda VERSION_GREATER_EQUAL FLASH_ATTN_FAMILY_SPECIFIC_MIN_CUDA)
      list(APPEND cuda_archs "${sm}f-real")
      list(APPEND sass "sm_${sm}f")
    else()
      list(APPEND cuda_archs "${sm}-real")
      list(APPEND sass "sm_${sm}")
    endif()
  endforeach()
  set(${out_cuda_archs} "${cuda_archs}" PARENT_SCOPE)
  set(${out_sass} "${sass}" PARENT_SCOPE)
endfunction()

# ---------------------------------------------------------------------------
# flash_attn_arch_groups_sass(CUDA_VERSION <x.y[.z]> OUT_JSON <var>)
#
# Arguments: CUDA_VERSION the toolkit version (as for the function below).
# Outputs:   OUT_JSON = a JSON object, fixed group name -> its SASS targets with
#            this toolkit, e.g. {"blackwell": ["sm_100f", "sm_120f", "sm_121"],
#            "legacy": ["sm_80", "sm_89", "sm_90"]}. The build info carries it
#            so an installed wheel can name the group whose wheel runs on a GPU.
#            No toolkit check: a legacy build with CUDA 12.4 still lists the
#            blackwell group's SMs.
# Errors:    FATAL_ERROR when an argument is missing.
# ---------------------------------------------------------------------------
function(flash_attn_arch_groups_sass)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "CUDA_VERSION;OUT_JSON" "")
  if(NOT ARG_CUDA_VERSION OR NOT ARG_OUT_JSON)
    message(FATAL_ERROR "flash_attn_arch_groups_sass: CUDA_VERSION and OUT_JSON are required.")
  endif()
  _flash_attn_arch_group_data()
  set(json "{}")
  foreach(group IN LISTS FLASH_ATTN_ARCH_GROUPS)
    if(NOT FLASH_ATTN_ARCH_GROUP_${group})
      continue()  # custom: no fixed SMs
    endif()
    _flash_attn_sass_entries("${ARG_CUDA_VERSION}" "${FLASH_ATTN_ARCH_GROUP_${group}}" unused sass)
    list(JOIN sass "\", \"" items)
    string(JSON json SET "${json}" "${group}" "[\"${items}\"]")
  endforeach()
  set(${ARG_OUT_JSON} "${json}" PARENT_SCOPE)
endfunction()

# ---------------------------------------------------------------------------
# flash_attn_arch_group_parse(GROUP <g> [CUDA_VERSION <x.y[.z]>] [ARCHS_TEXT <text>]
#     [GROUP_ONLY] [ALLOW_EMPTY] [ARCHS_FLAG <name>] [GROUP_HINT <text>]
#     [CUSTOM_PREFIX <text>] OUT_ARCHS <var>)
#
# Step 1 of 3 (parse, check, emit): the inputs as given, before any SM rule.
# Arguments:
#   GROUP         a name from flash_attn_arch_groups_list(); empty = not given.
#   CUDA_VERSION  optional; when given it must read x.y or x.y.z.
#   ARCHS_TEXT    GROUP custom only: SM entries (80, 8.0 or sm_80) separated
#                 by ",", ";" or blanks. A fixed group accepts it only empty.
#   GROUP_ONLY    stop after the group name (no ARCHS rules); OUT_ARCHS is "".
#   ALLOW_EMPTY   an empty custom list is no error (OUT_ARCHS ""): the sessions
#                 parse --cuda-archs before they know the group.
#   ARCHS_FLAG    how the caller's user writes the SM list in the messages
#                 (default ARCHS; the wheel sessions pass --cuda-archs).
#   GROUP_HINT    what to do after an unknown group (default: how CMake users
#                 pick custom; the sessions name their nox sessions).
#   CUSTOM_PREFIX what comes before ARCHS_FLAG to build the custom group, in the
#                 remedies (default "GROUP custom"; the sessions: nox -s
#                 wheel_custom --).
# Outputs: OUT_ARCHS = the group's SMs, integers, ascending, no duplicates
#   (a fixed group's from the manifest, custom's from ARCHS_TEXT).
# Errors (FATAL_ERROR, in this order): no GROUP; unknown GROUP (lists the
#   valid groups); a malformed CUDA_VERSION; an entry that is not an SM
#   number; an empty custom list (unless ALLOW_EMPTY); a non-empty list for
#   a fixed group.
# ---------------------------------------------------------------------------
function(flash_attn_arch_group_parse)
  _flash_attn_arch_group_data()
  cmake_parse_arguments(PARSE_ARGV 0 ARG "GROUP_ONLY;ALLOW_EMPTY"
    "GROUP;CUDA_VERSION;ARCHS_TEXT;ARCHS_FLAG;GROUP_HINT;CUSTOM_PREFIX;OUT_ARCHS" "")
  if(NOT ARG_OUT_ARCHS)
    message(FATAL_ERROR "flash_attn_arch_group_parse: OUT_ARCHS is required.")
  endif()
  if(NOT ARG_ARCHS_FLAG)
    set(ARG_ARCHS_FLAG ARCHS)
  endif()
  if(NOT ARG_CUSTOM_PREFIX)
    set(ARG_CUSTOM_PREFIX "GROUP custom")
  endif()
  if(NOT DEFINED ARG_GROUP_HINT)
    set(ARG_GROUP_HINT "(custom takes an explicit ARCHS list, e.g. ARCHS 80;90)")
  endif()

  string(REPLACE ";" ", " valid_groups "${FLASH_ATTN_ARCH_GROUPS}")
  if("${ARG_GROUP}" STREQUAL "")
    message(FATAL_ERROR
      "flash_attn: no arch group given. Pass GROUP with one of: ${valid_groups}.")
  endif()
  if(NOT ARG_GROUP IN_LIST FLASH_ATTN_ARCH_GROUPS)
    message(FATAL_ERROR
      "flash_attn: unknown arch group '${ARG_GROUP}'. Valid groups: ${valid_groups} ${ARG_GROUP_HINT}.")
  endif()
  if(ARG_GROUP_ONLY)
    set(${ARG_OUT_ARCHS} "" PARENT_SCOPE)
    return()
  endif()

  # CUDA_VERSION: "12.8", "12.9.1", "13.0.88" (CMAKE_CUDA_COMPILER_VERSION).
  if(NOT "${ARG_CUDA_VERSION}" STREQUAL "" AND NOT ARG_CUDA_VERSION MATCHES "^[0-9]+\\.[0-9]+(\\.[0-9]+)?$")
    message(FATAL_ERROR
      "flash_attn: CUDA_VERSION '${ARG_CUDA_VERSION}' is not a CUDA version; "
      "pass x.y or x.y.z, e.g. \${CMAKE_CUDA_COMPILER_VERSION}.")
  endif()

  # Commas and blanks (TORCH_CUDA_ARCH_LIST style "8.0 9.0") separate entries as well.
  string(REGEX REPLACE "[,; \t]+" ";" requested "${ARG_ARCHS_TEXT}")
  list(REMOVE_ITEM requested "")

  if(ARG_GROUP STREQUAL "custom")
    set(archs "")
    foreach(entry IN LISTS requested)
      _flash_attn_parse_arch("${entry}" "${ARG_ARCHS_FLAG}" sm)
      list(APPEND archs "${sm}")
    endforeach()
    if(NOT archs AND NOT ARG_ALLOW_EMPTY)
      message(FATAL_ERROR
        "flash_attn: the custom arch group needs ${ARG_ARCHS_FLAG}, "
        "e.g. ${ARG_CUSTOM_PREFIX} ${ARG_ARCHS_FLAG} 80,90.")
    endif()
  else()
    # An empty list is accepted, so a caller can always pass its option
    # through (ARCHS "${FLASH_ATTN_CUDA_ARCHS}"); a non-empty one is a mistake.
    if(requested)
      string(REPLACE ";" ", " fixed "${FLASH_ATTN_ARCH_GROUP_${ARG_GROUP}}")
      string(REPLACE ";" "," given "${requested}")
      message(FATAL_ERROR
        "flash_attn: ${ARG_ARCHS_FLAG} applies to the custom group only; the ${ARG_GROUP} group has "
        "fixed archs (${fixed}). Use ${ARG_CUSTOM_PREFIX} ${ARG_ARCHS_FLAG} ${given}")
    endif()
    set(archs ${FLASH_ATTN_ARCH_GROUP_${ARG_GROUP}})
  endif()
  list(REMOVE_DUPLICATES archs)
  list(SORT archs COMPARE NATURAL ORDER ASCENDING)
  set(${ARG_OUT_ARCHS} "${archs}" PARENT_SCOPE)
endfunction()

# ---------------------------------------------------------------------------
# flash_attn_arch_group_check(GROUP <g> ARCHS <list> [CUDA_VERSION <x.y[.z]>]
#     [ARCHS_FLAG <name>] [TOOLKIT_HINT <text>] [MIN_ARCH_ONLY] OUT_PTX_ARCH <var>)
#
# Step 2 of 3: the SM rules of the manifest ("archs", "arch_groups") on the
# list flash_attn_arch_group_parse() returned. This is the one place these
# rules are written; the Python release tooling asks it through
# cmake/scripts/CheckArchGroup.cmake (release.compile.arch_rules).
# Arguments:
#   GROUP, ARCHS  the group and its SMs (integers, ascending).
#   CUDA_VERSION  the toolkit; without it the toolkit rule is skipped (the
#                 sessions check the names before nvcc is probed).
#   ARCHS_FLAG    the name of the SM list in the remedies (default ARCHS).
#   TOOLKIT_HINT  for a fixed group, what to do instead of installing a newer
#                 CUDA (default: leave the SM out of a custom list).
#   MIN_ARCH_ONLY apply the first rule only (archs.min_sm), as the sessions do
#                 while they parse --cuda-archs; OUT_PTX_ARCH is then "".
# Outputs: OUT_PTX_ARCH = the SM shipped as PTX: the group's ptx in the
#   manifest, the newest SM for custom (or a group without ptx).
# Errors (FATAL_ERROR, per SM ascending, so the oldest problem is named
# first, each naming what to do):
#   - below archs.min_sm: "FlashAttention-2 needs sm_80 or newer (Ampere)"
#     (upstream flash_api.cpp refuses pre-Ampere GPUs at run time);
#   - in archs.refused (sm_101 / sm_110, Jetson Thor), with its reason;
#   - missing from archs.known;
#   - newer than the toolkit: each known SM's min_cuda (sm_100/sm_120 need
#     CUDA 12.8, sm_103/sm_121 CUDA 12.9; toolkit release notes);
#   then a fixed group whose manifest ptx is not one of its SMs.
# ---------------------------------------------------------------------------
function(flash_attn_arch_group_check)
  _flash_attn_arch_group_data()
  cmake_parse_arguments(PARSE_ARGV 0 ARG "MIN_ARCH_ONLY"
    "GROUP;CUDA_VERSION;ARCHS_FLAG;TOOLKIT_HINT;OUT_PTX_ARCH" "ARCHS")
  if(NOT ARG_GROUP OR NOT ARG_ARCHS OR NOT ARG_OUT_PTX_ARCH)
    message(FATAL_ERROR "flash_attn_arch_group_check: GROUP, ARCHS and OUT_PTX_ARCH are required.")
  endif()
  if(NOT ARG_ARCHS_FLAG)
    set(ARG_ARCHS_FLAG ARCHS)
  endif()
  foreach(sm IN LISTS ARG_ARCHS)
    if(sm LESS FLASH_ATTN_MIN_ARCH)
      message(FATAL_ERROR
        "flash_attn: FlashAttention-2 needs sm_${FLASH_ATTN_MIN_ARCH} or newer (Ampere); sm_${sm} "
        "was requested in group ${ARG_GROUP}. Remove it from ${ARG_ARCHS_FLAG}.")
    endif()
    if(ARG_MIN_ARCH_ONLY)
      continue()
    endif()
    if(sm IN_LIST FLASH_ATTN_REFUSED_ARCHS)
      message(FATAL_ERROR
        "flash_attn: sm_${sm} (${FLASH_ATTN_REFUSED_NAME_${sm}}) is not built by this project. "
        "${FLASH_ATTN_REFUSED_REASON_${sm}}. Remove sm_${sm} from ${ARG_ARCHS_FLAG}.")
    endif()
    if(NOT sm IN_LIST FLASH_ATTN_KNOWN_ARCHS)
      string(REPLACE ";" ", sm_" known "${FLASH_ATTN_KNOWN_ARCHS}")
      message(FATAL_ERROR
        "flash_attn: sm_${sm} is not an architecture this project builds. "
        "Known: sm_${known}. Add it to archs.known in build-manifest.json "
        "if it is real.")
    endif()
    set(need "${FLASH_ATTN_ARCH_MIN_CUDA_${sm}}")
    if(NOT "${ARG_CUDA_VERSION}" STREQUAL "" AND ARG_CUDA_VERSION VERSION_LESS need)
      if(ARG_TOOLKIT_HINT AND NOT ARG_GROUP STREQUAL "custom")
        set(instead "${ARG_TOOLKIT_HINT}")
      elseif(ARG_ARCHS_FLAG STREQUAL "ARCHS")
        set(instead "leave sm_${sm} out (GROUP custom ARCHS ...)")
      else()
        set(instead "leave sm_${sm} out (${ARG_ARCHS_FLAG})")
      endif()
      message(FATAL_ERROR
        "flash_attn: sm_${sm} (${FLASH_ATTN_ARCH_NAME_${sm}}) needs CUDA ${need} "
        "or newer; this toolkit is CUDA ${ARG_CUDA_VERSION}. Install CUDA >= ${need} or "
        "${instead}.")
    endif()
  endforeach()

  if(ARG_MIN_ARCH_ONLY)
    set(${ARG_OUT_PTX_ARCH} "" PARENT_SCOPE)
    return()
  endif()
  # PTX: the group's ptx entry in the manifest (a member of the group), the
  # newest arch for custom; the emit step makes it the plain (forward-compatible) form.
  if(ARG_GROUP STREQUAL "custom" OR "${FLASH_ATTN_ARCH_GROUP_PTX_${ARG_GROUP}}" STREQUAL "")
    list(GET ARG_ARCHS -1 ptx)
  else()
    set(ptx "${FLASH_ATTN_ARCH_GROUP_PTX_${ARG_GROUP}}")
    if(NOT ptx IN_LIST ARG_ARCHS)
      string(REPLACE ";" ", " members "${ARG_ARCHS}")
      message(FATAL_ERROR
        "flash_attn: arch group ${ARG_GROUP} ships PTX for ${ptx}, which is not one of its SMs "
        "(${members}). Set its ptx in build-manifest.json (arch_groups) to one of them.")
    endif()
  endif()
  set(${ARG_OUT_PTX_ARCH} "${ptx}" PARENT_SCOPE)
endfunction()

# ---------------------------------------------------------------------------
# _flash_attn_arch_group_emit(<group> <cuda> <archs> <ptx> <out_cuda_archs> <out_sass>)  (internal)
#
# Step 3 of 3: the CUDA_ARCHITECTURES entries of a checked group.
# Arguments: <group> for the summary line, <cuda> the toolkit, <archs> the
#   checked SMs (ascending), <ptx> the SM shipped as PTX.
# Outputs: <out_cuda_archs> one SASS entry per SM (NN-real, or NNf-real for
#   the manifest's family-specific SMs from its min_cuda on), then one PTX
#   entry <ptx>-virtual; <out_sass> the SASS names (sm_NN[f]).
# Status lines: one per family-specific choice, then one summary line.
# Errors: none.
# Rules and their sources:
#   - PTX for one arch only (forward compatibility at the smallest fatbin).
#     It is always plain compute_NN, also for 121 on CUDA >= 12.9, although
#     CMake passes 121f-virtual through as well: family-specific ('f') and
#     arch-specific ('a') PTX can only be JIT-compiled inside its own
#     family, plain PTX on every later GPU.
#   - sm_121 keeps SASS of its own (121-real) next to 120f-real: a GB10 then
#     runs code compiled for exactly its SM.
# ---------------------------------------------------------------------------
function(_flash_attn_arch_group_emit group cuda archs ptx out_cuda_archs out_sass)
  _flash_attn_arch_group_data()
  _flash_attn_sass_entries("${cuda}" "${archs}" cuda_archs sass)
  foreach(entry IN LISTS cuda_archs)
    if(entry MATCHES "^([0-9]+)f-real$")
      message(STATUS
        "flash_attn: sm_${CMAKE_MATCH_1} -> ${entry} (family-specific SASS, "
        "CUDA ${cuda} >= ${FLASH_ATTN_FAMILY_SPECIFIC_MIN_CUDA})")
    endif()
  endforeach()
  list(APPEND cuda_archs "${ptx}-virtual")
  message(STATUS
    "flash_attn: arch group ${group} (CUDA ${cuda}) -> CUDA_ARCHITECTURES "
    "${cuda_archs} (SASS: ${sass}; PTX: compute_${ptx})")
  set(${out_cuda_archs} "${cuda_archs}" PARENT_SCOPE)
  set(${out_sass} "${sass}" PARENT_SCOPE)
endfunction()

# ---------------------------------------------------------------------------
# flash_attn_arch_group_targets(
#     GROUP <name from flash_attn_arch_groups_list()>
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
#   OUT_CUDA_ARCHITECTURES value for the CUDA_ARCHITECTURES target property,
#                          e.g. 80-real;89-real;90-real;90-virtual.
#   OUT_PTX_ARCH           the arch shipped as PTX (e.g. 90).
#   OUT_SASS               the SASS targets for humans and build info, e.g.
#                          sm_80;sm_89;sm_90 or sm_100f;sm_120f;sm_121.
# Errors: missing GROUP/CUDA_VERSION/OUT_* or unparsed arguments here; then
#   those of flash_attn_arch_group_parse() and flash_attn_arch_group_check(),
#   which this function runs before _flash_attn_arch_group_emit().
# ---------------------------------------------------------------------------
function(flash_attn_arch_group_targets)
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

  # PARSE_ARGV keeps a quoted argument whole (ARCHS "80;90" arrives as one
  # element "80\;90"); foreach unescapes it, and commas carry it on as text.
  set(archs_text "")
  foreach(entry IN LISTS ARG_ARCHS)
    string(REPLACE ";" "," entry "${entry}")
    string(APPEND archs_text "${entry},")
  endforeach()

  flash_attn_arch_group_parse(GROUP "${ARG_GROUP}" CUDA_VERSION "${ARG_CUDA_VERSION}"
    ARCHS_TEXT "${archs_text}," OUT_ARCHS archs)
  flash_attn_arch_group_check(GROUP "${ARG_GROUP}" ARCHS ${archs} CUDA_VERSION "${ARG_CUDA_VERSION}"
    OUT_PTX_ARCH ptx)
  _flash_attn_arch_group_emit("${ARG_GROUP}" "${ARG_CUDA_VERSION}" "${archs}" "${ptx}" cuda_archs sass)

  set(${ARG_OUT_ARCHS} "${archs}" PARENT_SCOPE)
  set(${ARG_OUT_CUDA_ARCHITECTURES} "${cuda_archs}" PARENT_SCOPE)
  set(${ARG_OUT_PTX_ARCH} "${ptx}" PARENT_SCOPE)
  set(${ARG_OUT_SASS} "${sass}" PARENT_SCOPE)
endfunction()
