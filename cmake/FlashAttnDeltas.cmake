# FlashAttnDeltas.cmake: this project's kernel changes (A-1 rescale skip, A-2 packed FMA).
#
# Options (all recorded in the build info):
#   FLASH_ATTN_APPLY_DELTAS        ON: apply src/kernels/apply_deltas.py to the staged upstream tree.
#                                  OFF: compile the tree as it is (a fork that carries its own version).
#   FLASH_ATTN_RESCALE_THRESHOLD   A-1 threshold in log2 units (default and range in the manifest); 0
#                                  reproduces upstream's always-rescale behaviour.
#   FLASH_ATTN_PACKED_FMA          A-2 packed fma.rn.f32x2 on sm_100+.
#   FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET  test only: skip without the max reset (must fail the A-1 test).
#
# flash_attn_apply_deltas(PYTHON <exe> TREE <staged root>)
#   Applies the deltas in place (idempotent); FATAL_ERROR with the script's message when the tree
#   does not have the shape the deltas expect (exit 2), or already carries its own rescale skip or
#   packed FMA (exit 3: the message lists file:line of each marker and suggests --apply-deltas OFF).
# flash_attn_delta_definitions(<out var>)
#   Compile definitions for the kernel units: the threshold and the packed-FMA switch always (the delta
#   header stops with #error without them, so its defaults cannot drift from the manifest's).
# The options above are declared and checked with every other option by the loop of
# cmake/FlashAttnOptions.cmake (which CMakeLists.txt includes first), from options.<name> of
# build-manifest.json: defaults, help texts and the threshold's range (min, below) live there only.

set(FLASH_ATTN_DELTA_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/../src/kernels/apply_deltas.py")
cmake_path(NORMAL_PATH FLASH_ATTN_DELTA_SCRIPT)

function(flash_attn_apply_deltas)
  cmake_parse_arguments(arg "" "PYTHON;TREE" "" ${ARGN})
  if(NOT FLASH_ATTN_APPLY_DELTAS)
    message(STATUS "flash_attn: kernel deltas not applied (FLASH_ATTN_APPLY_DELTAS=OFF)")
    return()
  endif()
  execute_process(COMMAND "${arg_PYTHON}" "${FLASH_ATTN_DELTA_SCRIPT}" --tree "${arg_TREE}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc EQUAL 3)
    message(FATAL_ERROR "${err}\nflash_attn: refused to apply the kernel deltas to a tree that carries its own "
                        "version of them (see above); nothing was compiled. Rebuild with --apply-deltas OFF "
                        "(FLASH_ATTN_APPLY_DELTAS=OFF) to build the tree as it is.")
  elseif(NOT rc EQUAL 0)
    message(FATAL_ERROR "${err}\nflash_attn: the kernel deltas do not fit this upstream tree. Use the pinned sdist, "
                        "or build a fork that carries its own version with FLASH_ATTN_APPLY_DELTAS=OFF.")
  endif()
  message(STATUS "${out}")
endfunction()

function(flash_attn_delta_definitions out_var)
  set(defs "")
  if(FLASH_ATTN_APPLY_DELTAS)
    if(FLASH_ATTN_PACKED_FMA)
      set(packed 1)
    else()
      set(packed 0)
    endif()
    set(threshold "${FLASH_ATTN_RESCALE_THRESHOLD}")
    if(NOT threshold MATCHES "\\.")
      string(APPEND threshold ".0")  # "8" -> "8.0" so "8.0f" is a float literal
    endif()
    list(APPEND defs "FLASH_ATTN_RESCALE_THRESHOLD=${threshold}f" "FLASH_ATTN_PACKED_FMA=${packed}")
    if(FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET)
      list(APPEND defs "FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET=1")
    endif()
  endif()
  set(${out_var} "${defs}" PARENT_SCOPE)
endfunction()
