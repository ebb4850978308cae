# Driver for flash_attn_generate_units(), run by test_cmake_modules.py:
#
#   cmake -DTREE=<upstream root> -DOUT=<output folder> -DKERNEL_SET=ci -DPYTHON=<python> -P generate_units.cmake
#
# Outputs one "-- RESULT SOURCE=<path>" line per generated unit source, after checking that each
# path CMake read back exists. Errors: FATAL_ERROR naming a source that does not exist.
cmake_minimum_required(VERSION 3.25)
get_filename_component(PROJECT_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
include("${PROJECT_SOURCE_DIR}/cmake/FlashAttnKernelSet.cmake")
flash_attn_generate_units(PYTHON "${PYTHON}" KERNEL_SET "${KERNEL_SET}" TREE "${TREE}" OUT_DIR "${OUT}"
                          OUT_SOURCES sources OUT_DISPATCH dispatch OUT_SET_NAME set_name OUT_KERNELS_JSON json)
foreach(source IN LISTS sources)
  if(NOT EXISTS "${source}")
    message(FATAL_ERROR "no such source: ${source}")
  endif()
  message(STATUS "RESULT SOURCE=${source}")
endforeach()
