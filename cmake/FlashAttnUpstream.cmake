# FlashAttnUpstream.cmake: obtain the upstream FlashAttention-2 source tree the build compiles.
#
# Upstream code is never committed to this repository. It is taken at configure time from one
# of three places, in this order of precedence:
#
#   FLASH_ATTN_SOURCE_DIR  a local upstream or fork tree (no download, no hash check). Its kernel
#                          directory csrc/flash_attn is copied into the build tree, so applying the
#                          kernel deltas never edits the user's tree; CUTLASS is used in place.
#   FLASH_ATTN_SDIST       an already-downloaded sdist file (offline machines); hash-checked.
#   (default)              the pinned sdist downloaded (PyPI's file URL, else pip) into a cache outside
#                          the build tree, hash-checked, reused by every later build.
#
# The pin (version and sha256 of the sdist) is "upstream" in build-manifest.json.
# pip must prepare the sdist's metadata, and its setup.py imports torch, hence the flags
# --no-build-isolation --no-deps --no-binary :all: and FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE.

include("${CMAKE_CURRENT_LIST_DIR}/FlashAttnManifest.cmake")
flash_attn_manifest_get(FLASH_ATTN_UPSTREAM_VERSION upstream version)
flash_attn_manifest_get(FLASH_ATTN_UPSTREAM_SHA256 upstream sha256)
flash_attn_manifest_get(FLASH_ATTN_UPSTREAM_URL upstream url)

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
#   Returns the path of the pinned sdist in <cache dir>, downloading it when absent or damaged (a
#   cached file whose SHA-256 is not the pin): first straight
#   from PyPI's file URL (upstream.url of build-manifest.json, file(DOWNLOAD) with the pinned
#   SHA-256: no pip and no torch needed, so torch-free kernel builds can fetch it), else with pip
#   (for machines that reach PyPI only through pip's configured index; pip prepares the sdist's
#   metadata, whose setup.py imports torch). FATAL_ERROR naming both attempts when neither works.
function(flash_attn_download_sdist python cache_dir out_var)
  set(file "${cache_dir}/flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}.tar.gz")
  # A cached copy that lost bytes (a full disk, a copy cut short) is this cache's own file, not the
  # user's: it is removed and downloaded again, so no rerun keeps failing on it.
  if(EXISTS "${file}" AND NOT IS_DIRECTORY "${file}")
    file(SHA256 "${file}" cached)
    if(NOT cached STREQUAL FLASH_ATTN_UPSTREAM_SHA256)
      message(STATUS "flash_attn: the cached ${file} is damaged (sha256 ${cached}, expected "
                     "${FLASH_ATTN_UPSTREAM_SHA256}); removing it and downloading it again")
      file(REMOVE "${file}")
    endif()
  endif()
  if(NOT EXISTS "${file}")
    message(STATUS "flash_attn: downloading flash-attn==${FLASH_ATTN_UPSTREAM_VERSION} sdist into ${cache_dir}")
    # An unwritable cache folder is named as such, not reported as a failed download.
    file(MAKE_DIRECTORY "${cache_dir}" RESULT made)
    set(probe "${cache_dir}/.flash_attn-write-probe")
    execute_process(COMMAND "${CMAKE_COMMAND}" -E touch "${probe}" RESULT_VARIABLE touched OUTPUT_QUIET ERROR_QUIET)
    file(REMOVE "${probe}")
    if(NOT made EQUAL 0 OR NOT touched EQUAL 0)
      if(made EQUAL 0)
        set(made "no file can be created there")
      endif()
      message(FATAL_ERROR "flash_attn: the sdist download cache ${cache_dir} cannot be written (${made}). Set "
                          "FLASH_ATTN_CACHE_DIR to a writable folder, or pass FLASH_ATTN_SDIST=<path to the .tar.gz>.")
    endif()
    set(staging "${cache_dir}/.download-${FLASH_ATTN_UPSTREAM_SHA256}")
    file(REMOVE_RECURSE "${staging}")
    set(got "${staging}/flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}.tar.gz")
    file(DOWNLOAD "${FLASH_ATTN_UPSTREAM_URL}" "${got}" EXPECTED_HASH "SHA256=${FLASH_ATTN_UPSTREAM_SHA256}"
         TLS_VERIFY ON STATUS status)
    list(GET status 0 code)
    if(NOT code EQUAL 0)
      list(GET status 1 url_error)
      file(REMOVE_RECURSE "${staging}")
      execute_process(
        COMMAND "${CMAKE_COMMAND}" -E env FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE
                "${python}" -m pip download --quiet --no-build-isolation --no-deps --no-binary :all:
                "flash-attn==${FLASH_ATTN_UPSTREAM_VERSION}" -d "${staging}"
        RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
      if(NOT rc EQUAL 0 OR NOT EXISTS "${got}")
        file(REMOVE_RECURSE "${staging}")
        message(FATAL_ERROR "flash_attn: could not download flash-attn==${FLASH_ATTN_UPSTREAM_VERSION}: from "
                            "${FLASH_ATTN_UPSTREAM_URL}: ${url_error}; with pip (exit ${rc}, needs torch installed):\n"
                            "${err}\nOn an offline machine pass FLASH_ATTN_SDIST=<path to the .tar.gz> or "
                            "FLASH_ATTN_SOURCE_DIR=<upstream tree>.")
      endif()
    endif()
    flash_attn_verify_sdist("${got}")
    file(RENAME "${got}" "${file}")
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
#                             OUT_SOURCE <var> OUT_VERSION <var> OUT_SHA256 <var> OUT_FRESH <var>)
#   Prepares ${CMAKE_BINARY_DIR}/upstream and returns:
#     OUT_TREE     root of the tree to compile (its csrc/flash_attn is ours to patch)
#     OUT_CUTLASS  CUTLASS include directory (FLASH_ATTN_CUTLASS_DIR overrides the tree's csrc/cutlass)
#     OUT_SOURCE   "sdist", "sdist-file", or the absolute path of a local tree (FLASH_ATTN_SOURCE_DIR)
#     OUT_VERSION  the pinned version, or a local tree's own (flash_attn_tree_version)
#     OUT_SHA256   the sdist hash, or "" for a local tree
#     OUT_FRESH    TRUE when the tree was (re)staged now, so the caller applies the deltas again
#   The staged tree is reused while a stamp (source identity, FLASH_ATTN_APPLY_DELTAS and hashes of
#   STAMP_INPUTS, i.e. the delta code) is unchanged, so reconfiguring never touches file timestamps and Ninja stays idle.
function(flash_attn_prepare_upstream)
  cmake_parse_arguments(arg "" "PYTHON;OUT_TREE;OUT_CUTLASS;OUT_SOURCE;OUT_VERSION;OUT_SHA256;OUT_FRESH" "STAMP_INPUTS"
                        ${ARGN})
  set(stage "${CMAKE_BINARY_DIR}/upstream")
  # layout 3: the staged tree holds upstream's LICENSE and its Python package flash_attn/ (both
  # shipped in the wheel). Whether the deltas are applied is part of the staged tree's identity
  # too: switching FLASH_ATTN_APPLY_DELTAS in a reused build directory must restage, never keep a
  # patched tree.
  if(FLASH_ATTN_APPLY_DELTAS)
    set(identity "layout3;deltas=on;")
  else()
    set(identity "layout3;deltas=off;")
  endif()
  foreach(input IN LISTS arg_STAMP_INPUTS)
    file(SHA256 "${input}" h)
    string(APPEND identity "${h};")
  endforeach()

  if(FLASH_ATTN_SOURCE_DIR)
    file(REAL_PATH "${FLASH_ATTN_SOURCE_DIR}" user_tree)
    flash_attn_check_tree("${user_tree}" "FLASH_ATTN_SOURCE_DIR")
    set(source "dir")
    set(sha "")
    flash_attn_tree_version("${user_tree}" version)
    # A local tree can change under us: include its kernel and Python files' hashes in the stamp.
    file(GLOB_RECURSE kernel_files LIST_DIRECTORIES false "${user_tree}/csrc/flash_attn/*"
         "${user_tree}/flash_attn/*.py")
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
    set(version "${FLASH_ATTN_UPSTREAM_VERSION}")
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
      if(IS_DIRECTORY "${user_tree}/flash_attn")
        file(COPY "${user_tree}/flash_attn" DESTINATION "${stage}" FILES_MATCHING PATTERN "*.py")
      endif()
    else()
      # Extract to a scratch folder first so an interrupted extraction never looks complete.
      set(scratch "${CMAKE_BINARY_DIR}/upstream.extract")
      file(REMOVE_RECURSE "${scratch}")
      file(ARCHIVE_EXTRACT INPUT "${sdist}" DESTINATION "${scratch}"
           PATTERNS "flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}/csrc/flash_attn/*"
                    "flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}/csrc/cutlass/include/*"
                    "flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}/LICENSE"
                    "flash_attn-${FLASH_ATTN_UPSTREAM_VERSION}/flash_attn/*")
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
  if(source STREQUAL "dir")
    set(source "${user_tree}")
  endif()
  set(${arg_OUT_SOURCE} "${source}" PARENT_SCOPE)
  if(arg_OUT_VERSION)
    set(${arg_OUT_VERSION} "${version}" PARENT_SCOPE)
  endif()
  set(${arg_OUT_SHA256} "${sha}" PARENT_SCOPE)
  set(${arg_OUT_FRESH} ${fresh} PARENT_SCOPE)
  # The stamp is written by the caller once the deltas are applied (flash_attn_commit_upstream).
  set(FLASH_ATTN_UPSTREAM_STAMP_FILE "${stamp_file}" PARENT_SCOPE)
  set(FLASH_ATTN_UPSTREAM_STAMP_VALUE "${stamp_value}" PARENT_SCOPE)
endfunction()

# flash_attn_upstream_shape(PYTHON <exe> TREE <staged root> OUT_DEFINITIONS <var> OUT_PHILOX_ARGS <var>)
#   Reads the declarations of the tree's flash.h that the binding touches (src/kernels/upstream_shape.py:
#   Flash_fwd_params::philox_args, rng_state, the launch templates) and returns the binding's compile
#   definitions (FLASH_ATTN_PHILOX_ARGS_WORDS=0 for at::PhiloxCudaState in 2.8.3.post2, =4 for the
#   uint64_t[4] of upstream main) and the philox_args form for the build info. A shape the binding does
#   not know stops the configure (FATAL_ERROR naming the file, line, declaration found and the ones
#   expected), before anything is compiled.
function(flash_attn_upstream_shape)
  cmake_parse_arguments(arg "" "PYTHON;TREE;OUT_DEFINITIONS;OUT_PHILOX_ARGS" "" ${ARGN})
  set(script "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../src/kernels/upstream_shape.py")
  cmake_path(NORMAL_PATH script)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${script}")
  execute_process(COMMAND "${arg_PYTHON}" "${script}" --tree "${arg_TREE}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    if(FLASH_ATTN_SOURCE_DIR)
      set(origin "FLASH_ATTN_SOURCE_DIR=${FLASH_ATTN_SOURCE_DIR}")
    else()
      set(origin "the flash-attn ${FLASH_ATTN_UPSTREAM_VERSION} sdist")
    endif()
    message(FATAL_ERROR "${err}\nflash_attn: refused the upstream tree (${origin}, staged in ${arg_TREE}) before "
                        "compiling anything: the binding does not fit its declarations (see above).")
  endif()
  string(JSON summary GET "${out}" summary)
  string(JSON philox GET "${out}" philox_args)
  string(JSON count LENGTH "${out}" definitions)
  set(defs "")
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON d GET "${out}" definitions ${i})
    list(APPEND defs "${d}")
  endforeach()
  message(STATUS "flash_attn: upstream shape: ${summary} -> ${defs}")
  set(${arg_OUT_DEFINITIONS} "${defs}" PARENT_SCOPE)
  set(${arg_OUT_PHILOX_ARGS} "${philox}" PARENT_SCOPE)
endfunction()

# flash_attn_tree_version(<tree root> <out var>)
#   The __version__ of a local tree's flash_attn/__init__.py (e.g. "2.8.4"), or "unknown" when it
#   has none: recorded in the build info instead of the pinned version, which a local tree is not.
function(flash_attn_tree_version root out_var)
  set(version "unknown")
  if(EXISTS "${root}/flash_attn/__init__.py")
    file(STRINGS "${root}/flash_attn/__init__.py" lines REGEX "^__version__ *= *[\"'][^\"']+[\"']")
    if(lines MATCHES "[\"']([^\"']+)[\"']")
      set(version "${CMAKE_MATCH_1}")
    endif()
  endif()
  set(${out_var} "${version}" PARENT_SCOPE)
endfunction()

# flash_attn_commit_upstream()
#   Marks the staged tree complete (after the deltas were applied), so the next configure reuses it.
function(flash_attn_commit_upstream)
  file(WRITE "${FLASH_ATTN_UPSTREAM_STAMP_FILE}" "${FLASH_ATTN_UPSTREAM_STAMP_VALUE}")
endfunction()
