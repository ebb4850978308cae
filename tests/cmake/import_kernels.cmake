# Driver for flash_attn_import_kernels()'s key check, run by test_cmake_modules.py:
#
#   cmake -DARCHIVE=<empty folder> -DEDIT=key|none -P import_kernels.cmake
#
# Writes ARCHIVE/kernels-manifest.json for the fields {format: 1, definitions: X=1}, with its key
# replaced by zeros when EDIT is "key", then imports it against the real key of those fields.
# Outputs: the FATAL_ERROR of the import (the object list is empty, so a passing check fails later
# with "no objects" in this script). Errors: whatever the function raises.
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/FlashAttnKernels.cmake")
flash_attn_kernel_key(OUT_KEY key OUT_FIELDS fields FIELDS format 1 definitions X=1)
set(recorded "${key}")
if(EDIT STREQUAL "key")
  string(REPEAT "0" 64 recorded)
endif()
file(WRITE "${ARCHIVE}/kernels-manifest.json"
     "{\"format\": 1, \"key\": \"${recorded}\", \"fields\": ${fields}, \"kernels\": {\"shard\": null}, \"objects\": []}")
flash_attn_import_kernels(TARGET t ARCHIVE "${ARCHIVE}" KEY "${key}" FIELDS "${fields}" UNITS fwd_hdim64_fp16)
