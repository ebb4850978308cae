# Driver for flash_attn_object_naming_flags(), run by test_cmake_modules.py and
# tests/real_builds/test_reproducible_objects.py:
#
#   cmake -DSOURCE=<path> -DBASE=<dir> -DCOMPILER_ID=<GNU|Clang|MSVC> -P object_naming.cmake
#
# Outputs: "-- RESULT FLAGS=<the nvcc flags, ';'-separated>". Errors: whatever the function raises.
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/FlashAttnKernels.cmake")

flash_attn_object_naming_flags(SOURCE "${SOURCE}" BASE "${BASE}" COMPILER_ID "${COMPILER_ID}" OUT flags)
message(STATUS "RESULT FLAGS=${flags}")
