# Driver for flash_attn_kernel_key(), run by test_cmake_modules.py:
#
#   cmake -DFIELDS="name=value|name=value" -P kernel_key.cmake
#
# Arguments: FIELDS, '|'-separated name=value pairs in any order. Outputs: "-- RESULT KEY=<sha256>"
# and "-- RESULT FIELDS=<json on one line>". Errors: whatever the function raises.
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/FlashAttnKernels.cmake")

string(REPLACE "|" ";" pairs "${FIELDS}")
set(args "")
foreach(pair IN LISTS pairs)
  string(FIND "${pair}" "=" eq)
  string(SUBSTRING "${pair}" 0 ${eq} name)
  math(EXPR start "${eq} + 1")
  string(SUBSTRING "${pair}" ${start} -1 value)
  list(APPEND args "${name}" "${value}")
endforeach()
flash_attn_kernel_key(OUT_KEY key OUT_FIELDS fields FIELDS ${args})
string(REPLACE "\n" "" fields "${fields}")
message(STATUS "RESULT KEY=${key}")
message(STATUS "RESULT FIELDS=${fields}")
