# FetchUpstreamSdist.cmake: the pinned upstream sdist, verified, as the build obtains it.
#
# Usage (script mode):  cmake [-DPYTHON=<python>] [-DFLASH_ATTN_SDIST=<file>] -P cmake/scripts/FetchUpstreamSdist.cmake
#
# With FLASH_ATTN_SDIST it checks that file's SHA-256 against the pin; otherwise it downloads the
# pin (PyPI's file URL of the manifest, else pip) into the download cache (flash_attn_default_cache_dir) when absent and verifies the
# cached file. It prints one line, "flash_attn-sdist=<absolute path>", on success and stops with
# FATAL_ERROR (exit code 1) with the build's own message otherwise. Tests and tools call it so
# that they find the upstream tree exactly the way the build does (cmake/FlashAttnUpstream.cmake).
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../FlashAttnUpstream.cmake")

if(NOT PYTHON)
  set(PYTHON python3)
endif()
if(FLASH_ATTN_SDIST)
  file(REAL_PATH "${FLASH_ATTN_SDIST}" sdist)
else()
  flash_attn_default_cache_dir(cache_dir)
  flash_attn_download_sdist("${PYTHON}" "${cache_dir}" sdist)
endif()
flash_attn_verify_sdist("${sdist}")
# message(NOTICE) goes to stderr; the result line goes to stdout.
execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "flash_attn-sdist=${sdist}")
