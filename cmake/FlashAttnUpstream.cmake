# FlashAttnUpstream.cmake: obtain the upstream FlashAttention-2 source tree the build compiles.
#
# Upstream code is never committed to this repository. It is taken at configure time from one
# of three places, in this order of precedence:
#
#   FLASH_ATTN_SOURCE_DIR  a local upstream or fork tree (no download, no hash check). Its kernel
#                          directory csrc/flash_attn is copied into the build tree, so applying the
#                          kernel deltas never edits the user's tree; CUTLASS is used in place.
#   FLASH_ATTN_SDIST       an already-downloaded sdist file (offline machines); hash-checked.
#   (default)              `pip download` of the pinned sdist into a cache outside the build tree,
#                          hash-checked, reused by every later build.
#
# The pin (docs/design.md): flash-attn==2.8.3.post2,
#   sha256 d0f9f0b08a986cdeadbffcf5ec8b3a8f514366c68ad1853d3ab061bc83cc340b.
# pip must prepare the sdist's metadata, and its setup.py imports torch, hence the flags
# --no-build-isolation --no-deps --no-binary :all: and FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE.

set(FLASH_ATTN_UPSTREAM_VERSION "2.8.3.post2")
set(FLASH_ATTN_UPSTREAM_SHA256 "d0f9f0b08a986cdeadbffcf5ec8b3a8f514366c68ad1853d3ab061bc83cc340b")

# flash_attn_default_cache_dir(<out var>)
#   Per-user cache for downloaded sdists: $FLASH_ATTN_CACHE_DIR, else %LOCALAPPDATA%\flash_attn_wheels
#   on Windows, else $XDG_CACHE_HOME/flash_attn_wheels or ~/.cache/flash_attn_wheels.
function(flash_attn_default_cache_dir out_var)
  if(DEFINED ENV{FLASH_ATTN_CACHE_DIR} AND NOT "$ENV{FLASH_ATTN_CACHE_DIR}" STREQUAL "")
    set(dir "$ENV{FLASH_ATTN_CACHE_DIR}")
  elseif(WIN32 AND DEFINED ENV{LOCALAPPDATA})
    set(dir "$ENV{LOCALAPPDATA}/flash_attn_wheels")
  elseif(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
    set(dir "$ENV{XDG_CACHE_HOME}/flash_attn_wheels")
  else()
    set(dir "$ENV{HOME}/.cache/flash_attn_wheels")
  endif()
  file(TO_CMAKE_PATH "${dir}" dir)
  set(${out_var} "${dir}" PARENT_SCOPE)
endfunction()

# flash_attn_verify_sdist(<file>)
#   Stops the configure with FATAL_ERROR when <file> is missing or its SHA-256 is not the pin.
function(flash_attn_verify_sdist file)
  if(NOT EXISTS "${file}" OR IS_DIRECTORY "${file}")
    message(FATAL_ERROR "flash_attn: sdist ${file} does not exist or is a folder. Pass FLASH_ATTN_SDIST=<path to "
                        "flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}.tar.gz> or unset it to download the pin.")
  endif()
  file(SHA256 "${file}" actual)
  if(NOT actual STREQUAL FLASH_ATTN_UPSTREAM_SHA256)
    message(FATAL_ERROR "flash_attn: ${file} is not the pinned sdist flash-attn==${FLASH_ATTN_UPSTREAM_VERSION}: its "
                        "sha256 is ${actual}, expected ${FLASH_ATTN_UPSTREAM_SHA256}. Pass the right file as "
                        "FLASH_ATTN_SDIST (FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE pip download --no-deps --no-binary "
                        ":all: --no-build-isolation flash-attn==${FLASH_ATTN_UPSTREAM_VERSION}, with torch "
                        "installed), leave FLASH_ATTN_SDIST unset to download it, or use FLASH_ATTN_SOURCE_DIR for a "
                        "tree of another version.")
  endif()
endfunction()

# flash_attn_download_sdist(<python> <cache dir> <out var>)
#   Returns the path of the pinned sdist in <cache dir>, downloading it with pip when absent.
function(flash_attn_download_sdist python cache_dir out_var)
  set(file "${cache_dir}/flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}.tar.gz")
  if(NOT EXISTS "${file}")
    message(STATUS "flash_attn: downloading flash-attn==${FLASH_ATTN_UPSTREAM_VERSION} sdist into ${cache_dir}")
    file(MAKE_DIRECTORY "${cache_dir}")
    set(staging "${cache_dir}/.download-${FLASH_ATTN_UPSTREAM_SHA256}")
    file(REMOVE_RECURSE "${staging}")
    execute_process(
      COMMAND "${CMAKE_COMMAND}" -E env FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE
              "${python}" -m pip download --quiet --no-build-isolation --no-deps --no-binary :all:
              "flash-attn==${FLASH_ATTN_UPSTREAM_VERSION}" -d "${staging}"
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0 OR NOT EXISTS "${staging}/flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}.tar.gz")
      file(REMOVE_RECURSE "${staging}")
      message(FATAL_ERROR "flash_attn: could not download flash-attn==${FLASH_ATTN_UPSTREAM_VERSION} with pip "
                          "(exit ${rc}):\n${err}\nOn an offline machine pass FLASH_ATTN_SDIST=<path to the .tar.gz> "
                          "or FLASH_ATTN_SOURCE_DIR=<upstream tree>.")
    endif()
    flash_attn_verify_sdist("${staging}/flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}.tar.gz")
    file(RENAME "${staging}/flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}.tar.gz" "${file}")
    file(REMOVE_RECURSE "${staging}")
  endif()
  set(${out_var} "${file}" PARENT_SCOPE)
endfunction()

# flash_attn_check_tree(<root> <what>)
#   FATAL_ERROR unless <root> looks like an upstream FlashAttention-2 tree (csrc/flash_attn/src/flash.h).
function(flash_attn_check_tree root what)
  if(NOT EXISTS "${root}/csrc/flash_attn/src/flash.h")
    message(FATAL_ERROR "flash_attn: ${what} ${root} has no csrc/flash_attn/src/flash.h; expected the root of an "
                        "upstream FlashAttention-2 source tree (the folder that holds setup.py and csrc/).")
  endif()
endfunction()

# flash_attn_prepare_upstream(PYTHON <exe> STAMP_INPUTS <files...> OUT_TREE <var> OUT_CUTLASS <var>
#                             OUT_SOURCE <var> OUT_SHA256 <var> OUT_FRESH <var>)
#   Prepares ${CMAKE_BINARY_DIR}/upstream and returns:
#     OUT_TREE     root of the tree to compile (its csrc/flash_attn is ours to patch)
#     OUT_CUTLASS  CUTLASS include directory (FLASH_ATTN_CUTLASS_DIR overrides the tree's csrc/cutlass)
#     OUT_SOURCE   "sdist", "sdist-file" or "dir"
#     OUT_SHA256   the sdist hash, or "" for a local tree
#     OUT_FRESH    TRUE when the tree was (re)staged now, so the caller applies the deltas again
#   The staged tree is reused while a stamp (source identity + hashes of STAMP_INPUTS, i.e. the
#   delta code) is unchanged, so reconfiguring never touches file timestamps and Ninja stays idle.
function(flash_attn_prepare_upstream)
  cmake_parse_arguments(arg "" "PYTHON;OUT_TREE;OUT_CUTLASS;OUT_SOURCE;OUT_SHA256;OUT_FRESH" "STAMP_INPUTS" ${ARGN})
  set(stage "${CMAKE_BINARY_DIR}/upstream")
  set(identity "layout2;")  # layout 2: the staged tree holds upstream's LICENSE (shipped in the wheel)
  foreach(input IN LISTS arg_STAMP_INPUTS)
    file(SHA256 "${input}" h)
    string(APPEND identity "${h};")
  endforeach()

  if(FLASH_ATTN_SOURCE_DIR)
    file(REAL_PATH "${FLASH_ATTN_SOURCE_DIR}" user_tree)
    flash_attn_check_tree("${user_tree}" "FLASH_ATTN_SOURCE_DIR")
    set(source "dir")
    set(sha "")
    # A local tree can change under us: include its kernel files' hashes in the stamp.
    file(GLOB_RECURSE kernel_files LIST_DIRECTORIES false "${user_tree}/csrc/flash_attn/*")
    list(SORT kernel_files)
    foreach(f IN LISTS kernel_files)
      file(SHA256 "${f}" h)
      string(APPEND identity "${f}=${h};")
    endforeach()
    set(identity "dir:${user_tree};${identity}")
    set(cutlass_default "${user_tree}/csrc/cutlass/include")
  else()
    if(FLASH_ATTN_SDIST)
      file(REAL_PATH "${FLASH_ATTN_SDIST}" sdist)
      set(source "sdist-file")
    else()
      flash_attn_default_cache_dir(cache_dir)
      flash_attn_download_sdist("${arg_PYTHON}" "${cache_dir}" sdist)
      set(source "sdist")
    endif()
    flash_attn_verify_sdist("${sdist}")
    set(sha "${FLASH_ATTN_UPSTREAM_SHA256}")
    set(identity "sdist:${sha};${identity}")
    set(cutlass_default "${stage}/csrc/cutlass/include")
  endif()

  string(SHA256 stamp_value "${identity}")
  set(stamp_file "${stage}/.flash_attn_stamp")
  set(fresh FALSE)
  set(old_stamp "")
  if(EXISTS "${stamp_file}")
    file(READ "${stamp_file}" old_stamp)
  endif()
  if(NOT old_stamp STREQUAL stamp_value)
    set(fresh TRUE)
    file(REMOVE_RECURSE "${stage}")
    if(source STREQUAL "dir")
      file(MAKE_DIRECTORY "${stage}/csrc")
      file(COPY "${user_tree}/csrc/flash_attn" DESTINATION "${stage}/csrc")
      if(EXISTS "${user_tree}/LICENSE")
        file(COPY "${user_tree}/LICENSE" DESTINATION "${stage}")
      endif()
    else()
      # Extract to a scratch folder first so an interrupted extraction never looks complete.
      set(scratch "${CMAKE_BINARY_DIR}/upstream.extract")
      file(REMOVE_RECURSE "${scratch}")
      file(ARCHIVE_EXTRACT INPUT "${sdist}" DESTINATION "${scratch}"
           PATTERNS "flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}/csrc/flash_attn/*"
                    "flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}/csrc/cutlass/include/*"
                    "flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}/LICENSE")
      file(RENAME "${scratch}/flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}" "${stage}")
      file(REMOVE_RECURSE "${scratch}")
    endif()
    message(STATUS "flash_attn: staged upstream source (${source}) in ${stage}")
  else()
    message(STATUS "flash_attn: reusing staged upstream source (${source}) in ${stage}")
  endif()
  flash_attn_check_tree("${stage}" "staged upstream tree")

  if(FLASH_ATTN_CUTLASS_DIR)
    set(cutlass "${FLASH_ATTN_CUTLASS_DIR}")
  else()
    set(cutlass "${cutlass_default}")
  endif()
  if(NOT EXISTS "${cutlass}/cutlass/cutlass.h")
    message(FATAL_ERROR "flash_attn: no CUTLASS headers at ${cutlass} (expected cutlass/cutlass.h). Initialise the "
                        "tree's csrc/cutlass submodule or pass FLASH_ATTN_CUTLASS_DIR=<cutlass>/include.")
  endif()

  set(${arg_OUT_TREE} "${stage}" PARENT_SCOPE)
  set(${arg_OUT_CUTLASS} "${cutlass}" PARENT_SCOPE)
  set(${arg_OUT_SOURCE} "${source}" PARENT_SCOPE)
  set(${arg_OUT_SHA256} "${sha}" PARENT_SCOPE)
  set(${arg_OUT_FRESH} ${fresh} PARENT_SCOPE)
  # The stamp is written by the caller once the deltas are applied (flash_attn_commit_upstream).
  set(FLASH_ATTN_UPSTREAM_STAMP_FILE "${stamp_file}" PARENT_SCOPE)
  set(FLASH_ATTN_UPSTREAM_STAMP_VALUE "${stamp_value}" PARENT_SCOPE)
endfunction()

# flash_attn_commit_upstream()
#   Marks the staged tree complete (after the deltas were applied), so the next configure reuses it.
function(flash_attn_commit_upstream)
  file(WRITE "${FLASH_ATTN_UPSTREAM_STAMP_FILE}" "${FLASH_ATTN_UPSTREAM_STAMP_VALUE}")
endfunction()
