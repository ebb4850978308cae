# FlashAttnKernelSet.cmake: turn a kernel set into generated instantiation units.
#
# flash_attn_generate_units(PYTHON <exe> KERNEL_SET <spec> TREE <upstream root> OUT_DIR <dir>
#                           OUT_SOURCES <var> OUT_DISPATCH <var> OUT_SET_NAME <var> OUT_KERNELS_JSON <var>)
#   Runs src/kernels/generate_units.py (the kernel sets are defined in src/kernels/kernel_set.py:
#   release = all 72 upstream units, dev = head dims 64/128, ci = fwd_hdim64_fp16, or an explicit
#   list of unit names/patterns). Returns the unit sources heaviest first (so Ninja starts the
#   longest compiles first), the generated dispatch source, the resolved set name and the path of
#   the JSON list of built units. FATAL_ERROR with the generator's message for a bad set or tree.
#   The generator rewrites only files whose text changed, so an unchanged configuration
#   recompiles nothing.
function(flash_attn_generate_units)
  cmake_parse_arguments(arg "" "PYTHON;KERNEL_SET;TREE;OUT_DIR;OUT_SOURCES;OUT_DISPATCH;OUT_SET_NAME;OUT_KERNELS_JSON"
                        "" ${ARGN})
  set(generator "${PROJECT_SOURCE_DIR}/src/kernels/generate_units.py")
  execute_process(
    COMMAND "${arg_PYTHON}" "${generator}" --kernel-set "${arg_KERNEL_SET}" --tree "${arg_TREE}" --out "${arg_OUT_DIR}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${err}\nflash_attn: FLASH_ATTN_KERNEL_SET='${arg_KERNEL_SET}' cannot be built (see above).")
  endif()
  message(STATUS "${out}")
  # Re-run the configure when the generator or the kernel set definitions change.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               "${generator}" "${PROJECT_SOURCE_DIR}/src/kernels/kernel_set.py")
  file(STRINGS "${arg_OUT_DIR}/units.txt" sources)
  file(READ "${arg_OUT_DIR}/kernels.json" kernels_json)
  string(JSON set_name GET "${kernels_json}" kernel_set)
  set(${arg_OUT_SOURCES} "${sources}" PARENT_SCOPE)
  set(${arg_OUT_DISPATCH} "${arg_OUT_DIR}/dispatch.cu" PARENT_SCOPE)
  set(${arg_OUT_SET_NAME} "${set_name}" PARENT_SCOPE)
  set(${arg_OUT_KERNELS_JSON} "${arg_OUT_DIR}/kernels.json" PARENT_SCOPE)
endfunction()

# flash_attn_compile_pool(TARGET <target> UNITS <n units> GENCODES <n gencode targets> [JOBS <n>])
#   Puts the target's compiles into a Ninja job pool `flash_attn_nvcc` sized so that parallel
#   nvcc processes fit in memory: min(logical cores, available memory / 7 GiB), at least 1.
#   7 GiB is the peak of the heaviest unit (bwd hdim256 sm_90: 6.9 GB, docs/design.md). JOBS (or the
#   FLASH_ATTN_JOBS cache variable / environment variable) overrides the computed size.
#   When there are fewer units than jobs (small kernel sets), the spare jobs go to nvcc
#   --threads, which compiles a unit's gencode targets in parallel: threads = min(GENCODES,
#   jobs / UNITS), so units x threads never exceeds the job count the memory allows.
function(flash_attn_compile_pool)
  cmake_parse_arguments(arg "" "TARGET;JOBS;UNITS;GENCODES" "" ${ARGN})
  set(jobs "${arg_JOBS}")
  if(NOT jobs AND DEFINED ENV{FLASH_ATTN_JOBS})
    set(jobs "$ENV{FLASH_ATTN_JOBS}")
  endif()
  if(NOT jobs)
    cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
    cmake_host_system_information(RESULT free_mib QUERY AVAILABLE_PHYSICAL_MEMORY)
    math(EXPR by_memory "${free_mib} / 7168")
    set(jobs ${cores})
    if(by_memory LESS jobs)
      set(jobs ${by_memory})
    endif()
    if(jobs LESS 1)
      set(jobs 1)
    endif()
    set(why "${cores} cores, ${free_mib} MiB available, 7 GiB per nvcc")
  else()
    set(why "set by FLASH_ATTN_JOBS")
  endif()
  if(NOT jobs MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "flash_attn: FLASH_ATTN_JOBS='${jobs}' is not a positive integer.")
  endif()
  set_property(GLOBAL APPEND PROPERTY JOB_POOLS flash_attn_nvcc=${jobs})
  set_property(TARGET ${arg_TARGET} PROPERTY JOB_POOL_COMPILE flash_attn_nvcc)
  set(threads 1)
  if(arg_UNITS GREATER 0)
    math(EXPR threads "${jobs} / ${arg_UNITS}")
  endif()
  if(threads GREATER arg_GENCODES)
    set(threads ${arg_GENCODES})
  endif()
  if(threads GREATER 1)
    target_compile_options(${arg_TARGET} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:--threads=${threads}>")
  endif()
  message(STATUS "flash_attn: ${jobs} parallel compile jobs (${why}); nvcc --threads=${threads} "
                 "for ${arg_UNITS} units x ${arg_GENCODES} gencode targets")
endfunction()
