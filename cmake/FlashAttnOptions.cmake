# FlashAttnOptions.cmake: the user-facing cache variables, one per entry of `options` in
# build-manifest.json (its default, help text and checks; README.md "Options" is rendered from the
# same table), and the CUDA language check. Each may also come from the environment variable of the
# same name (plain cmake, and pip install ., whose pyproject.toml defines pass them empty).

include("${CMAKE_CURRENT_LIST_DIR}/FlashAttnManifest.cmake")

# flash_attn_option_field(<out_var> <name> <field>)
#   options.<name>.<field> of build-manifest.json as text ("" when the entry has no such field; a list as
#   its JSON text). For fields that may be absent; flash_attn_manifest_get stops on a missing one.
function(flash_attn_option_field out_var name field)
  flash_attn_manifest_text(json)
  string(JSON value ERROR_VARIABLE err GET "${json}" options ${name} ${field})
  if(err OR value STREQUAL "null")
    set(value "")
  endif()
  set(${out_var} "${value}" PARENT_SCOPE)
endfunction()

# flash_attn_option_choices(<out_var> <name>)
#   The values option <name> accepts, as a CMake list: its `choices`, or the `name` of every entry of the
#   manifest list its `choices_from` names (FLASH_ATTN_ARCH_GROUP: the arch groups); empty for other types.
function(flash_attn_option_choices out_var name)
  flash_attn_option_field(from ${name} choices_from)
  set(choices "")
  if(from)
    flash_attn_manifest_fields(choices name ${from})
  else()
    flash_attn_option_field(has ${name} choices)
    if(has)
      flash_attn_manifest_list(choices options ${name} choices)
    endif()
  endif()
  set(${out_var} "${choices}" PARENT_SCOPE)
endfunction()

# flash_attn_option_text(<out_var> <name> <field>)
#   A text of options.<name> (doc, invalid) with {choices} (joined with ", "), {min}, {below} and
#   {default} filled in from the same entry, so a bound or a choice is written once in the manifest;
#   release.compile.options fills in the same placeholders (fill_text).
function(flash_attn_option_text out_var name field)
  flash_attn_option_field(text ${name} ${field})
  flash_attn_option_choices(choices ${name})
  list(JOIN choices ", " shown)
  string(REPLACE "{choices}" "${shown}" text "${text}")
  foreach(key min below default)
    flash_attn_option_field(value ${name} ${key})
    string(REPLACE "{${key}}" "${value}" text "${text}")
  endforeach()
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

# flash_attn_option_check(<name> <value>)
#   Refuses <value> for option <name> by the rules of its manifest entry, when the entry has an
#   `invalid` sentence (the others are checked where they are used: the arch group and SMs by
#   FlashAttnArchGroups.cmake, the kernel set by kernel_set.py).
#   enum: one of its choices; number/integer: matches `pattern` (integer: digits only), >= `min`, < `below`.
#   An empty value passes (an option whose default is "" is unset). Errors: FATAL_ERROR
#   "flash_attn: <name>='<value>' <invalid sentence>", the sentence release.compile.options prints too.
function(flash_attn_option_check name value)
  flash_attn_option_field(invalid ${name} invalid)
  if(NOT invalid OR "${value}" STREQUAL "")
    return()
  endif()
  flash_attn_option_field(type ${name} type)
  set(ok TRUE)
  if(type STREQUAL "enum")
    flash_attn_option_choices(choices ${name})
    if(NOT value IN_LIST choices)
      set(ok FALSE)
    endif()
  elseif(type STREQUAL "number" OR type STREQUAL "integer")
    flash_attn_option_field(pattern ${name} pattern)
    if(NOT pattern)
      set(pattern "^[0-9]+$")
    endif()
    flash_attn_option_field(min ${name} min)
    flash_attn_option_field(below ${name} below)
    if(NOT value MATCHES "${pattern}")
      set(ok FALSE)
    elseif(NOT min STREQUAL "" AND value LESS min)
      set(ok FALSE)
    elseif(NOT below STREQUAL "" AND NOT value LESS below)
      set(ok FALSE)
    endif()
  endif()
  if(NOT ok)
    flash_attn_option_text(sentence ${name} invalid)
    message(FATAL_ERROR "flash_attn: ${name}='${value}' ${sentence}")
  endif()
endfunction()

# flash_attn_option(<name>)
#   Cache variable <name>; its default is $ENV{<name>} when set, else options.<name>.default of
#   build-manifest.json, whose options.<name>.doc is the help text. An empty value (-D<name>=) also
#   means that default: the nox sessions and pyproject.toml's cmake.define pass every option on every
#   configure, empty when not given, so a reused build folder never keeps a value of an earlier build.
#   This is the one place CMake reads an option's environment variable.
macro(flash_attn_option name)
  flash_attn_manifest_get(_fa_default options ${name} default)
  flash_attn_option_text(_fa_doc ${name} doc)
  if(DEFINED ENV{${name}} AND NOT "$ENV{${name}}" STREQUAL "")
    set(_fa_default "$ENV{${name}}")
  endif()
  set(${name} "${_fa_default}" CACHE STRING "${_fa_doc}")
  if("${${name}}" STREQUAL "")
    set(${name} "${_fa_default}" CACHE STRING "${_fa_doc}" FORCE)
  endif()
endmacro()

# Every option of the manifest's table (options of build-manifest.json), declared and checked in one loop.
flash_attn_manifest_get(_fa_options options)
string(JSON _fa_count LENGTH "${_fa_options}")
math(EXPR _fa_last "${_fa_count} - 1")
foreach(_fa_i RANGE ${_fa_last})
  string(JSON _fa_name MEMBER "${_fa_options}" ${_fa_i})
  flash_attn_option(${_fa_name})
  flash_attn_option_check(${_fa_name} "${${_fa_name}}")
endforeach()

# The package version: scikit-build-core passes it; plain CMake reads flash_attn/_version.py.
if(DEFINED SKBUILD_PROJECT_VERSION_FULL)
  set(FLASH_ATTN_VERSION "${SKBUILD_PROJECT_VERSION_FULL}")
else()
  file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../flash_attn/_version.py" _fa_version_line REGEX "^__version__")
  string(REGEX MATCH "\"([^\"]+)\"" _fa_match "${_fa_version_line}")
  set(FLASH_ATTN_VERSION "${CMAKE_MATCH_1}")
endif()

# Files whose change must restage the upstream tree: the delta code.
file(GLOB FLASH_ATTN_DELTA_INPUTS CONFIGURE_DEPENDS
     "${CMAKE_CURRENT_LIST_DIR}/../src/kernels/apply_deltas.py" "${CMAKE_CURRENT_LIST_DIR}/../src/kernels/deltas/*")

if(WIN32)
  set(FLASH_ATTN_MODULE_SUFFIX ".pyd")
else()
  set(FLASH_ATTN_MODULE_SUFFIX ".so")
endif()

# flash_attn_enable_cuda()
#   Enables the CUDA language, with a message that says what to install when no nvcc is found,
#   and sets FLASH_ATTN_FATBIN_FLAGS (--compress-mode needs the nvcc of options.
#   FLASH_ATTN_FATBIN_COMPRESSION.min_cuda in build-manifest.json, 12.8, or newer) and
#   FLASH_ATTN_FATBIN_COMPRESSION_USED, the mode the build info records: the option's value, or
#   "none" on older nvcc, where no --compress-mode is passed and the option is unused.
macro(flash_attn_enable_cuda)
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "flash_attn: no CUDA compiler found. Install the CUDA toolkit (nvcc 12.8 or newer; 13.x for "
                        "torch cu13x builds) and put its bin/ on PATH, or set CUDACXX=/path/to/nvcc.")
  endif()
  enable_language(CUDA)
  set(FLASH_ATTN_FATBIN_FLAGS "")
  flash_attn_manifest_get(_fa_compress_min_cuda options FLASH_ATTN_FATBIN_COMPRESSION min_cuda)
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL _fa_compress_min_cuda)
    set(FLASH_ATTN_FATBIN_FLAGS "--compress-mode=${FLASH_ATTN_FATBIN_COMPRESSION}")
    set(FLASH_ATTN_FATBIN_COMPRESSION_USED "${FLASH_ATTN_FATBIN_COMPRESSION}")
    message(STATUS "flash_attn: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, fatbin compression ${FLASH_ATTN_FATBIN_COMPRESSION}")
  else()
    set(FLASH_ATTN_FATBIN_COMPRESSION_USED "none")
    message(STATUS "flash_attn: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, fatbin compression none (no --compress-mode "
                   "before CUDA ${_fa_compress_min_cuda}; FLASH_ATTN_FATBIN_COMPRESSION=${FLASH_ATTN_FATBIN_COMPRESSION} "
                   "unused)")
  endif()
endmacro()
