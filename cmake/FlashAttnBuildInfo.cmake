# FlashAttnBuildInfo.cmake: the build info record of one shared object.
#
# flash_attn_write_build_info(OUT_JSON <file> OUT_HEADER <file> KERNELS_JSON <file> <KEY> <value>...)
#   Writes <file> (installed beside flash_attn/_C_<group> as build_info_<group>.json and read by the
#   package's loader before the library is loaded) and a C++ header defining
#   `kFlashAttnBuildInfoJson` with the same text (returned by torch.ops.flash_attn.build_info, so the
#   library itself can say how it was built). Scalar keys: VERSION GROUP PTX_ARCH CUDA_VERSION
#   TORCH_VERSION TORCH_CUDA_VERSION CXX11_ABI TORCH_ABI (exact|stable) TORCH_MIN (stable: "2.11") UPSTREAM_SOURCE UPSTREAM_SHA256 UPSTREAM_PHILOX_ARGS
#   CXX_COMPILER CUDA_COMPILER FATBIN_COMPRESSION KERNELS_KEY (the kernel objects' build key,
#   cmake/FlashAttnKernels.cmake); list keys: ARCHS SASS. Booleans are CMake truth
#   values. UPSTREAM_SOURCE is "sdist", "sdist-file" or a local tree's path. With
#   FLASH_ATTN_APPLY_DELTAS=OFF the delta settings are recorded as null (they had no effect).
#   Beside what this build is, the record carries the project tables the runtime needs, so the
#   installed package keeps no copy of them: "arch_groups" (each fixed group's SASS with this
#   toolkit, flash_attn_arch_groups_sass), "min_arch" (archs.min_sm of build-manifest.json) and
#   "head_dims" (what the dispatch rounds a head dim up to, from the kernels JSON), and "install"
#   (the index URL and stable_abi.torch_min: `python -m flash_attn` names the index to install from). The
#   index URL is $ENV{FLASH_ATTN_INDEX_URL}, which the wheel build sets from the repository it runs in
#   (src/release/index_url.py; "" outside a workflow: no install line), read at every configure.
#   Files are rewritten only when their text changes (no needless relinks).
include("${CMAKE_CURRENT_LIST_DIR}/FlashAttnArchGroups.cmake")

function(_flash_attn_json_list out_var)
  set(items "")
  foreach(v IN LISTS ARGN)
    if(v MATCHES "^[0-9]+$")
      list(APPEND items "${v}")
    else()
      list(APPEND items "\"${v}\"")
    endif()
  endforeach()
  list(JOIN items ", " joined)
  set(${out_var} "[${joined}]" PARENT_SCOPE)
endfunction()

function(_flash_attn_json_bool out_var value)
  if(value)
    set(${out_var} true PARENT_SCOPE)
  else()
    set(${out_var} false PARENT_SCOPE)
  endif()
endfunction()

function(flash_attn_write_build_info)
  set(scalars VERSION GROUP PTX_ARCH CUDA_VERSION TORCH_VERSION TORCH_CUDA_VERSION CXX11_ABI TORCH_ABI TORCH_MIN UPSTREAM_SOURCE
              UPSTREAM_VERSION UPSTREAM_SHA256 UPSTREAM_PHILOX_ARGS CXX_COMPILER CUDA_COMPILER FATBIN_COMPRESSION
              KERNELS_KEY OUT_JSON OUT_HEADER KERNELS_JSON)
  cmake_parse_arguments(arg "" "${scalars}" "ARCHS;SASS" ${ARGN})
  file(READ "${arg_KERNELS_JSON}" kernels)
  string(JSON kernel_set GET "${kernels}" kernel_set)
  string(JSON kernel_list GET "${kernels}" kernels)
  string(JSON head_dims GET "${kernels}" head_dims)
  flash_attn_arch_groups_sass(CUDA_VERSION "${arg_CUDA_VERSION}" OUT_JSON arch_groups)
  flash_attn_manifest_get(min_arch archs min_sm)
  set(index_url "$ENV{FLASH_ATTN_INDEX_URL}")  # src/release/index_url.py resolve(); never the manifest's template
  flash_attn_manifest_get(stable_min stable_abi torch_min)
  _flash_attn_json_list(archs ${arg_ARCHS})
  _flash_attn_json_list(sass ${arg_SASS})
  _flash_attn_json_bool(abi "${arg_CXX11_ABI}")
  _flash_attn_json_bool(applied "${FLASH_ATTN_APPLY_DELTAS}")
  _flash_attn_json_bool(packed "${FLASH_ATTN_PACKED_FMA}")
  _flash_attn_json_bool(broken "${FLASH_ATTN_RESCALE_BROKEN_NO_MAX_RESET}")
  set(threshold "${FLASH_ATTN_RESCALE_THRESHOLD}")
  if(NOT arg_TORCH_ABI MATCHES "^(exact|stable)$")
    message(FATAL_ERROR "flash_attn_write_build_info: TORCH_ABI must be exact or stable, got '${arg_TORCH_ABI}'")
  endif()
  set(torch_min null)  # JSON null: an exact build serves its one torch
  if(NOT "${arg_TORCH_MIN}" STREQUAL "")
    set(torch_min "\"${arg_TORCH_MIN}\"")
  endif()
  if(NOT FLASH_ATTN_APPLY_DELTAS)
    set(threshold null)
    set(packed null)
    set(broken null)
  endif()
  set(json "{}")
  foreach(pair "version;\"${arg_VERSION}\"" "group;\"${arg_GROUP}\"" "archs;${archs}" "sass;${sass}"
               "ptx_arch;${arg_PTX_ARCH}" "cuda_version;\"${arg_CUDA_VERSION}\""
               "torch_version;\"${arg_TORCH_VERSION}\"" "torch_cuda_version;\"${arg_TORCH_CUDA_VERSION}\""
               "cxx11_abi;${abi}" "torch_abi;\"${arg_TORCH_ABI}\"" "torch_min;${torch_min}" "kernel_set;\"${kernel_set}\"" "kernels;${kernel_list}"
               "deltas;{\"applied\": ${applied}, \"rescale_threshold\": ${threshold}, \"packed_fma\": ${packed}, \"broken_no_max_reset\": ${broken}}"
               "upstream;{\"version\": \"${arg_UPSTREAM_VERSION}\", \"sha256\": \"${arg_UPSTREAM_SHA256}\", \"source\": \"${arg_UPSTREAM_SOURCE}\", \"philox_args\": \"${arg_UPSTREAM_PHILOX_ARGS}\"}"
               "compilers;{\"cxx\": \"${arg_CXX_COMPILER}\", \"cuda\": \"${arg_CUDA_COMPILER}\"}"
               "fatbin_compression;\"${arg_FATBIN_COMPRESSION}\"" "head_dims;${head_dims}"
               "arch_groups;${arch_groups}" "min_arch;${min_arch}" "kernels_key;\"${arg_KERNELS_KEY}\""
               "install;{\"index_url\": \"${index_url}\", \"stable_torch_min\": \"${stable_min}\"}")
    list(GET pair 0 key)
    list(SUBLIST pair 1 -1 value)
    list(JOIN value ";" value)
    string(JSON json SET "${json}" "${key}" "${value}")
  endforeach()
  file(CONFIGURE OUTPUT "${arg_OUT_JSON}" CONTENT "${json}\n" @ONLY)
  file(CONFIGURE OUTPUT "${arg_OUT_HEADER}" CONTENT
       "// Generated by cmake/FlashAttnBuildInfo.cmake. Do not edit.\n#pragma once\ninline constexpr const char* kFlashAttnBuildInfoJson = R\"flash_attn_json(${json})flash_attn_json\";\n"
       @ONLY)
endfunction()
