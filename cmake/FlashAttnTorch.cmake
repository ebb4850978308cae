# FlashAttnTorch.cmake: find the torch the wheel is built against, and keep its CUDA flags out.
#
# flash_attn_find_torch(PYTHON <exe> CUDA_VERSION <nvcc version>)
#   Locates torch through `torch.utils.cmake_prefix_path` of <exe> and runs find_package(Torch).
#   Sets in the caller's scope:
#     FLASH_ATTN_TORCH_VERSION       e.g. 2.14.1+cu130
#     FLASH_ATTN_TORCH_CUDA_VERSION  e.g. 13.0 (torch.version.cuda)
#     FLASH_ATTN_TORCH_CXX11_ABI     ON/OFF (torch._C._GLIBCXX_USE_CXX11_ABI)
#     FLASH_ATTN_TORCH_LIB_DIR       torch/lib
#   and the INTERFACE target `flash_attn_torch` (torch headers; c10, torch, torch_cpu, c10_cuda,
#   torch_cuda; CUDA::cudart; the torch C++ ABI define) to link operator libraries against, and
#   `flash_attn_torch_stable` (torch headers; torch_cpu, torch_cuda, CUDA::cudart) for the
#   stable-ABI binding.
#   Errors (FATAL_ERROR, before anything compiles):
#     - torch not importable by <exe>: says to install torch into that interpreter;
#     - torch is a CPU build;
#     - torch's CUDA major differs from nvcc's: names both versions (an extension built with
#       another CUDA major than torch's fails at load with undefined CUDA runtime symbols).
#   TorchConfig appends -gencode flags for TORCH_CUDA_ARCH_LIST (or the local GPU) to
#   CMAKE_CUDA_FLAGS and resets CMAKE_CUDA_ARCHITECTURES; both are restored afterwards so the only
#   targets compiled are the arch group's (set per target by cmake/FlashAttnArchGroups.cmake).
function(_flash_attn_query_torch python out_prefix out_version out_cuda out_abi)
  execute_process(
    COMMAND "${python}" -c
            "import torch, torch.utils; print(torch.utils.cmake_prefix_path); print(torch.__version__); print(torch.version.cuda or ''); print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "flash_attn: cannot import torch with ${python}:\n${err}\nInstall the torch you build "
                        "against into that interpreter (e.g. pip install torch==2.14.1) and build without build "
                        "isolation (nox does this for you).")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  list(GET lines 0 prefix)
  list(GET lines 1 version)
  list(GET lines 2 cuda)
  list(GET lines 3 abi)
  set(${out_prefix} "${prefix}" PARENT_SCOPE)
  set(${out_version} "${version}" PARENT_SCOPE)
  set(${out_cuda} "${cuda}" PARENT_SCOPE)
  set(${out_abi} "${abi}" PARENT_SCOPE)
endfunction()

macro(flash_attn_find_torch)
  cmake_parse_arguments(_fat "" "PYTHON;CUDA_VERSION" "" ${ARGN})
  _flash_attn_query_torch("${_fat_PYTHON}" _fat_prefix FLASH_ATTN_TORCH_VERSION FLASH_ATTN_TORCH_CUDA_VERSION
                          _fat_abi)
  if(FLASH_ATTN_TORCH_CUDA_VERSION STREQUAL "")
    message(FATAL_ERROR "flash_attn: torch ${FLASH_ATTN_TORCH_VERSION} is a CPU build; install a CUDA build of "
                        "torch whose CUDA major matches nvcc ${_fat_CUDA_VERSION}.")
  endif()
  string(REGEX MATCH "^[0-9]+" _fat_torch_major "${FLASH_ATTN_TORCH_CUDA_VERSION}")
  string(REGEX MATCH "^[0-9]+" _fat_nvcc_major "${_fat_CUDA_VERSION}")
  if(NOT _fat_torch_major STREQUAL _fat_nvcc_major)
    message(FATAL_ERROR "flash_attn: torch ${FLASH_ATTN_TORCH_VERSION} is built with CUDA "
                        "${FLASH_ATTN_TORCH_CUDA_VERSION} but nvcc is CUDA ${_fat_CUDA_VERSION}: the CUDA majors must "
                        "match. Install a torch built for CUDA ${_fat_nvcc_major}.x, or put a CUDA "
                        "${_fat_torch_major}.x nvcc first on PATH (or set CUDACXX).")
  endif()
  if(_fat_abi)
    set(FLASH_ATTN_TORCH_CXX11_ABI ON)
  else()
    set(FLASH_ATTN_TORCH_CXX11_ABI OFF)
  endif()
  set(FLASH_ATTN_TORCH_LIB_DIR "${_fat_prefix}/../../lib")
  cmake_path(NORMAL_PATH FLASH_ATTN_TORCH_LIB_DIR)

  set(_fat_saved_cuda_flags "${CMAKE_CUDA_FLAGS}")
  set(_fat_saved_archs "${CMAKE_CUDA_ARCHITECTURES}")
  unset(CMAKE_CUDA_ARCHITECTURES)  # TorchConfig warns about it and would switch it OFF
  unset(CMAKE_CUDA_ARCHITECTURES CACHE)
  # A fixed list keeps TorchConfig from probing the local GPU with try_run (which fails without
  # CMAKE_CUDA_ARCHITECTURES); the flags it derives from it are thrown away below anyway.
  set(TORCH_CUDA_ARCH_LIST "8.0")
  # TorchConfig still uses the legacy FindCUDA, which guesses the toolkit from the nvcc on PATH
  # (wrong when that is a wrapper script); point it at the toolkit CMake's CUDA language found.
  if(NOT CUDA_TOOLKIT_ROOT_DIR)
    set(CUDA_TOOLKIT_ROOT_DIR "${CMAKE_CUDA_COMPILER_TOOLKIT_ROOT}")
  endif()
  list(PREPEND CMAKE_PREFIX_PATH "${_fat_prefix}")
  # TorchConfig looks for the kineto profiler library, which torch's pip wheels do not ship as a
  # separate file, and warns "library kineto not found". We never link TORCH_LIBRARIES (see
  # flash_attn_torch below), so a set variable skips that search (find_library, policy CMP0125).
  set(kineto_LIBRARY "kineto-not-linked")
  find_package(Torch REQUIRED)
  unset(kineto_LIBRARY)
  set(CMAKE_CUDA_FLAGS "${_fat_saved_cuda_flags}")
  set(CMAKE_CUDA_ARCHITECTURES "${_fat_saved_archs}")
  # Our own link target: torch's headers and only the libraries an operator library needs.
  # TORCH_LIBRARIES would also pull CUDA libraries (nvrtc, nvtx, ...) from the local toolkit,
  # which minimal toolkits lack and the extension never calls; torch's wheel ships its own.
  if(NOT TARGET flash_attn_torch)
    add_library(flash_attn_torch INTERFACE)
    target_include_directories(flash_attn_torch INTERFACE ${TORCH_INCLUDE_DIRS})
    foreach(_fat_lib c10 torch torch_cpu c10_cuda torch_cuda)
      find_library(FLASH_ATTN_LIB_${_fat_lib} NAMES ${_fat_lib} PATHS "${FLASH_ATTN_TORCH_LIB_DIR}" NO_DEFAULT_PATH
                   REQUIRED)
      target_link_libraries(flash_attn_torch INTERFACE "${FLASH_ATTN_LIB_${_fat_lib}}")
    endforeach()
    if(_fat_abi)
      target_compile_definitions(flash_attn_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
    else()
      target_compile_definitions(flash_attn_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=0)
    endif()
    find_package(CUDAToolkit REQUIRED)
    target_link_libraries(flash_attn_torch INTERFACE CUDA::cudart)
    # The stable-ABI binding (cmake/FlashAttnTorchAbi.cmake): the same headers, but only the libraries
    # that export torch's C shims (torch_cpu; torch_cuda for the current CUDA stream), no c10.
    add_library(flash_attn_torch_stable INTERFACE)
    target_include_directories(flash_attn_torch_stable INTERFACE ${TORCH_INCLUDE_DIRS})
    target_link_libraries(flash_attn_torch_stable INTERFACE "${FLASH_ATTN_LIB_torch_cpu}" "${FLASH_ATTN_LIB_torch_cuda}"
                                                            CUDA::cudart)
  endif()
  message(STATUS "flash_attn: torch ${FLASH_ATTN_TORCH_VERSION} (CUDA ${FLASH_ATTN_TORCH_CUDA_VERSION}, "
                 "cxx11 ABI ${FLASH_ATTN_TORCH_CXX11_ABI}); its -gencode flags removed")
endmacro()
