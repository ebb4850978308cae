# FlashAttnManifest.cmake: read build-manifest.json, the one file that holds the build's tables
# (upstream pin, arch groups, option defaults, memory per nvcc; docs/manifest.md describes it).
#
# Which file: the CMake variable FLASH_ATTN_MANIFEST when set (cmake -DFLASH_ATTN_MANIFEST=...),
# else the environment variable of that name, else build-manifest.json in the repository root.
# The override exists so a test can point every reader at an edited copy.
#
# Usage:
#   include(FlashAttnManifest)
#   flash_attn_manifest_get(version upstream version)        # "2.8.3.post2"
#   flash_attn_manifest_list(sms arch_groups 1 sms)          # "80;89;90"

# flash_attn_manifest_file(<out_var>)
#   <out_var> = absolute path of the manifest in use (see above). No error here; the readers
#   below stop with FATAL_ERROR when the file is missing.
function(flash_attn_manifest_file out_var)
  if(DEFINED FLASH_ATTN_MANIFEST AND NOT "${FLASH_ATTN_MANIFEST}" STREQUAL "")
    set(file "${FLASH_ATTN_MANIFEST}")
  elseif(DEFINED ENV{FLASH_ATTN_MANIFEST} AND NOT "$ENV{FLASH_ATTN_MANIFEST}" STREQUAL "")
    set(file "$ENV{FLASH_ATTN_MANIFEST}")
  else()
    set(file "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../build-manifest.json")
  endif()
  file(REAL_PATH "${file}" file)
  set(${out_var} "${file}" PARENT_SCOPE)
endfunction()

# flash_attn_manifest_text(<out_var>)
#   <out_var> = the manifest's JSON text, read once per CMake run (a global property keeps it).
#   In a project (not `cmake -P`) the file is added to CMAKE_CONFIGURE_DEPENDS, so editing it
#   re-runs the configure. Errors: FATAL_ERROR when the file does not exist.
function(flash_attn_manifest_text out_var)
  flash_attn_manifest_file(file)
  get_property(cached GLOBAL PROPERTY "flash_attn_manifest:${file}" SET)
  if(cached)
    get_property(text GLOBAL PROPERTY "flash_attn_manifest:${file}")
    set(${out_var} "${text}" PARENT_SCOPE)
    return()
  endif()
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "flash_attn: the build manifest ${file} does not exist. Restore build-manifest.json "
                        "in the repository root (git checkout -- build-manifest.json) or unset FLASH_ATTN_MANIFEST.")
  endif()
  file(READ "${file}" text)
  set_property(GLOBAL PROPERTY "flash_attn_manifest:${file}" "${text}")
  if(NOT CMAKE_SCRIPT_MODE_FILE)
    set_property(DIRECTORY "${CMAKE_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")
  endif()
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# flash_attn_manifest_get(<out_var> <key or index>...)
#   <out_var> = the value at that path, as string(JSON GET) returns it: a string or number as
#   text, true/false as ON/OFF, an object or array as its JSON text, null as "".
#   Errors: FATAL_ERROR naming the path and the file when the path does not exist.
function(flash_attn_manifest_get out_var)
  flash_attn_manifest_text(text)
  string(JSON type ERROR_VARIABLE err TYPE "${text}" ${ARGN})
  if(err)
    flash_attn_manifest_file(file)
    string(REPLACE ";" "." path "${ARGN}")
    message(FATAL_ERROR "flash_attn: ${file} has no entry '${path}' (${err}). Compare it with docs/manifest.md.")
  endif()
  if(type STREQUAL "NULL")
    set(value "")
  else()
    string(JSON value GET "${text}" ${ARGN})
  endif()
  set(${out_var} "${value}" PARENT_SCOPE)
endfunction()

# flash_attn_manifest_list(<out_var> <key or index>...)
#   <out_var> = the JSON array at that path as a CMake list ([80, 89, 90] -> 80;89;90); null
#   gives an empty list. Errors: FATAL_ERROR as flash_attn_manifest_get, or when the value is
#   neither an array nor null.
function(flash_attn_manifest_list out_var)
  _flash_attn_manifest_items(items "" ${ARGN})
  set(${out_var} "${items}" PARENT_SCOPE)
endfunction()

# flash_attn_manifest_fields(<out_var> <field> <key or index>...)
#   <out_var> = the <field> of every object of the JSON array at that path, as a CMake list
#   (name of arch_groups -> blackwell;legacy;custom). Errors: as flash_attn_manifest_list, and
#   string(JSON)'s own when an object lacks <field>.
function(flash_attn_manifest_fields out_var field)
  _flash_attn_manifest_items(items "${field}" ${ARGN})
  set(${out_var} "${items}" PARENT_SCOPE)
endfunction()

# _flash_attn_manifest_items(<out_var> <field or ""> <key or index>...): the two above.
function(_flash_attn_manifest_items out_var field)
  flash_attn_manifest_get(array ${ARGN})
  set(items "")
  if(NOT "${array}" STREQUAL "")
    string(JSON type TYPE "${array}")
    if(NOT type STREQUAL "ARRAY")
      string(REPLACE ";" "." path "${ARGN}")
      message(FATAL_ERROR "flash_attn: build manifest entry '${path}' must be a list, found ${type}.")
    endif()
    string(JSON n LENGTH "${array}")
    if(n GREATER 0)
      math(EXPR last "${n} - 1")
      foreach(i RANGE ${last})
        string(JSON item GET "${array}" ${i} ${field})
        list(APPEND items "${item}")
      endforeach()
    endif()
  endif()
  set(${out_var} "${items}" PARENT_SCOPE)
endfunction()
