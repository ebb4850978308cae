# Driver for flash_attn_import_kernels(), run by test_cmake_modules.py:
#
#   cmake -DARCHIVE=<archive folder> -DWORK=<scratch folder> -DPYTHON=<python> -DDEFINITIONS=<value>
#         -DUNITS=<unit;...> -P import_kernels.cmake
#
# Computes the build key of the fields {format: 1, definitions: DEFINITIONS, cuda_architectures:
# 80-real} with flash_attn_kernel_key, as a configure does, and imports ARCHIVE against it; the
# function runs the Python verifier (release.archive.integrity, from this checkout's src/).
# add_library and set_target_properties, which a script cannot call, are stood in for.
# Outputs: "-- RESULT KEY=<key>" and "-- RESULT OBJECTS=<paths>" when the import passes; else the
# FATAL_ERROR of the import.
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/FlashAttnKernels.cmake")
get_filename_component(PROJECT_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
set(CMAKE_BINARY_DIR "${WORK}")
function(add_library)
endfunction()
function(set_target_properties target properties name value)
  message(STATUS "RESULT OBJECTS=${value}")
endfunction()
flash_attn_kernel_key(OUT_KEY key OUT_FIELDS fields FIELDS format 1 definitions "${DEFINITIONS}"
                      cuda_architectures 80-real)
message(STATUS "RESULT KEY=${key}")
flash_attn_import_kernels(TARGET t ARCHIVE "${ARCHIVE}" KEY "${key}" FIELDS "${fields}" UNITS ${UNITS}
                          PYTHON "${PYTHON}")
