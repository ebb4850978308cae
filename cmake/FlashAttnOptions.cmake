# FlashAttnOptions.cmake: the user-facing cache variables (README.md "Options" lists them all)
# and the CUDA language check. Each may also come from the environment variable of the same name,
# which is how scikit-build-core and nox pass them through.

# flash_attn_option(<name> <default> <doc>)
#   Cache variable <name>; its default is $ENV{<name>} when set, else <default>.
macro(flash_attn_option name default doc)
  if(DEFINED ENV{${name}} AND NOT "$ENV{${name}}" STREQUAL "")
    set(${name} "$ENV{${name}}" CACHE STRING "${doc}")
  else()
    set(${name} "${default}" CACHE STRING "${doc}")
  endif()
endmacro()

flash_attn_option(FLASH_ATTN_ARCH_GROUP "legacy" "GPU arch group: blackwell (sm 100;120;121), legacy (sm 80;89;90) or custom")
flash_attn_option(FLASH_ATTN_CUDA_ARCHS "" "SM list for the custom group, e.g. 80;90")
flash_attn_option(FLASH_ATTN_KERNEL_SET "release" "Kernel set: release, dev, ci, or a list of unit names/patterns")
flash_attn_option(FLASH_ATTN_JOBS "" "Parallel nvcc jobs (default: from cores and available memory)")
flash_attn_option(FLASH_ATTN_FATBIN_COMPRESSION "size" "nvcc --compress-mode: none, default, size, speed or balance")
flash_attn_option(FLASH_ATTN_SOURCE_DIR "" "Local upstream/fork tree to build instead of the pinned sdist (no hash check)")
flash_attn_option(FLASH_ATTN_SDIST "" "Already-downloaded flash_attn-2.8.3.post2.tar.gz (hash-checked)")
flash_attn_option(FLASH_ATTN_CUTLASS_DIR "" "CUTLASS include directory (default: the tree's csrc/cutlass/include)")

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

set(_fa_modes none default size speed balance)
if(NOT FLASH_ATTN_FATBIN_COMPRESSION IN_LIST _fa_modes)
  message(FATAL_ERROR "flash_attn: FLASH_ATTN_FATBIN_COMPRESSION='${FLASH_ATTN_FATBIN_COMPRESSION}' is not one of "
                      "${_fa_modes}.")
endif()

# flash_attn_enable_cuda()
#   Enables the CUDA language, with a message that says what to install when no nvcc is found,
#   and sets FLASH_ATTN_FATBIN_FLAGS (--compress-mode needs nvcc >= 12.8) and
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
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.8)
    set(FLASH_ATTN_FATBIN_FLAGS "--compress-mode=${FLASH_ATTN_FATBIN_COMPRESSION}")
    set(FLASH_ATTN_FATBIN_COMPRESSION_USED "${FLASH_ATTN_FATBIN_COMPRESSION}")
    message(STATUS "flash_attn: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, fatbin compression ${FLASH_ATTN_FATBIN_COMPRESSION}")
  else()
    set(FLASH_ATTN_FATBIN_COMPRESSION_USED "none")
    message(STATUS "flash_attn: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, fatbin compression none (no --compress-mode "
                   "before CUDA 12.8; FLASH_ATTN_FATBIN_COMPRESSION=${FLASH_ATTN_FATBIN_COMPRESSION} unused)")
  endif()
endmacro()
