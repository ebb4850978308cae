# FlashAttnOptions.cmake: the user-facing cache variables (README.md "Options" lists them all)
# and the CUDA language check. Each may also come from the environment variable of the same name,
# which is how scikit-build-core and nox pass them through.

include("${CMAKE_CURRENT_LIST_DIR}/FlashAttnManifest.cmake")

# flash_attn_option(<name>)
#   Cache variable <name>; its default is $ENV{<name>} when set, else options.<name>.default of
#   build-manifest.json, whose options.<name>.doc is the help text. An empty value (-D<name>=) also
#   means that default: the nox sessions and pyproject.toml's cmake.define pass every option on every
#   configure, empty when not given, so a reused build folder never keeps a value of an earlier build.
macro(flash_attn_option name)
  flash_attn_manifest_get(_fa_default options ${name} default)
  flash_attn_manifest_get(_fa_doc options ${name} doc)
  if(DEFINED ENV{${name}} AND NOT "$ENV{${name}}" STREQUAL "")
    set(_fa_default "$ENV{${name}}")
  endif()
  set(${name} "${_fa_default}" CACHE STRING "${_fa_doc}")
  if("${${name}}" STREQUAL "")
    set(${name} "${_fa_default}" CACHE STRING "${_fa_doc}" FORCE)
  endif()
endmacro()

flash_attn_option(FLASH_ATTN_ARCH_GROUP)
flash_attn_option(FLASH_ATTN_CUDA_ARCHS)
flash_attn_option(FLASH_ATTN_KERNEL_SET)
flash_attn_option(FLASH_ATTN_JOBS)
flash_attn_option(FLASH_ATTN_FATBIN_COMPRESSION)
flash_attn_option(FLASH_ATTN_SOURCE_DIR)
flash_attn_option(FLASH_ATTN_SDIST)
flash_attn_option(FLASH_ATTN_CUTLASS_DIR)
flash_attn_option(FLASH_ATTN_KERNELS)
flash_attn_option(FLASH_ATTN_KERNELS_ONLY)
flash_attn_option(FLASH_ATTN_SHARD)
flash_attn_option(FLASH_ATTN_TORCH_ABI)

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

flash_attn_manifest_list(_fa_modes options FLASH_ATTN_FATBIN_COMPRESSION choices)
if(NOT FLASH_ATTN_FATBIN_COMPRESSION IN_LIST _fa_modes)
  message(FATAL_ERROR "flash_attn: FLASH_ATTN_FATBIN_COMPRESSION='${FLASH_ATTN_FATBIN_COMPRESSION}' is not one of "
                      "${_fa_modes}.")
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
