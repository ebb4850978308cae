# FlashAttnKernelSet.cmake: turn a kernel set into generated instantiation units.
#
# flash_attn_generate_units(PYTHON <exe> KERNEL_SET <spec> [SHARD <K/N>] TREE <upstream root> OUT_DIR <dir>
#                           OUT_SOURCES <var> OUT_DISPATCH <var> OUT_SET_NAME <var> OUT_KERNELS_JSON <var>)
#   Runs src/kernels/generate_units.py (the kernel sets are "kernels" in build-manifest.json, read
#   by src/kernels/kernel_set.py: release, dev, ci, or an explicit list of unit names/patterns);
#   the generator is given the manifest CMake reads (FLASH_ATTN_MANIFEST). With SHARD, only the
#   units of that shard get sources (kernel_set.split_shards); the dispatch covers the whole set. Returns the unit sources heaviest first (so Ninja starts the
#   longest compiles first), the generated dispatch source, the resolved set name and the path of
#   the JSON list of built units. FATAL_ERROR with the generator's message for a bad set or tree.
#   The generator rewrites only files whose text changed, so an unchanged configuration
#   recompiles nothing.
include("${CMAKE_CURRENT_LIST_DIR}/FlashAttnManifest.cmake")

function(flash_attn_generate_units)
  cmake_parse_arguments(arg "" "PYTHON;KERNEL_SET;SHARD;TREE;OUT_DIR;OUT_SOURCES;OUT_DISPATCH;OUT_SET_NAME;OUT_KERNELS_JSON"
                        "" ${ARGN})
  set(generator "${PROJECT_SOURCE_DIR}/src/kernels/generate_units.py")
  flash_attn_manifest_text(_)  # the kernel sets are in the manifest: its change re-runs the configure
  flash_attn_manifest_file(manifest)
  execute_process(
    # PYTHONPATH: the generator imports flash_attn_wheel_names (src/), the owner of the "built without"
    # message the runtime matches. The generator needs the standard library only, so src/ alone is enough.
    COMMAND "${CMAKE_COMMAND}" -E env "FLASH_ATTN_MANIFEST=${manifest}" "PYTHONPATH=${PROJECT_SOURCE_DIR}/src"
            "${arg_PYTHON}" "${generator}" --kernel-set "${arg_KERNEL_SET}" --shard "${arg_SHARD}" --tree "${arg_TREE}" --out "${arg_OUT_DIR}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${err}\nflash_attn: FLASH_ATTN_KERNEL_SET='${arg_KERNEL_SET}' cannot be built (see above).")
  endif()
  message(STATUS "${out}")
  # Re-run the configure when the generator or the kernel set definitions change.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               "${generator}" "${PROJECT_SOURCE_DIR}/src/kernels/kernel_set.py"
               "${PROJECT_SOURCE_DIR}/src/flash_attn_wheel_names/native.py")
  # ENCODING UTF-8: without it file(STRINGS) keeps ASCII only and splits a path at "ö" (a build root "b röt").
  file(STRINGS "${arg_OUT_DIR}/units.txt" sources ENCODING UTF-8)
  file(READ "${arg_OUT_DIR}/kernels.json" kernels_json)
  string(JSON set_name GET "${kernels_json}" kernel_set)
  set(${arg_OUT_SOURCES} "${sources}" PARENT_SCOPE)
  set(${arg_OUT_DISPATCH} "${arg_OUT_DIR}/dispatch.cu" PARENT_SCOPE)
  set(${arg_OUT_SET_NAME} "${set_name}" PARENT_SCOPE)
  set(${arg_OUT_KERNELS_JSON} "${arg_OUT_DIR}/kernels.json" PARENT_SCOPE)
endfunction()

# flash_attn_compile_pool(TARGET <target> UNITS <n units> GENCODES <n gencode targets> [JOBS <n>]
#                         [ALSO <targets...>])
#   Puts the compiles of the target (and of the ALSO targets) into a Ninja job pool `flash_attn_nvcc`
#   sized so that parallel nvcc processes fit in memory: min(logical cores, available memory / GiB
#   per nvcc), at least 1. GiB per nvcc is build.nvcc_memory_gib of build-manifest.json (7: the peak
#   of the heaviest unit, bwd hdim256 sm_90, 6.9 GB). JOBS (the
#   FLASH_ATTN_JOBS cache variable, which flash_attn_option fills from the environment and
#   flash_attn_option_check has already refused unless it is a whole number >= 1) overrides the
#   computed size.
#   When there are fewer units than jobs (small kernel sets), the spare jobs go to nvcc
#   --threads, which compiles a unit's gencode targets in parallel: threads = min(GENCODES,
#   jobs / UNITS), so units x threads never exceeds the job count the memory allows.
function(flash_attn_compile_pool)
  cmake_parse_arguments(arg "" "TARGET;JOBS;UNITS;GENCODES" "ALSO" ${ARGN})
  set(jobs "${arg_JOBS}")
  if(NOT jobs)
    cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
    cmake_host_system_information(RESULT free_mib QUERY AVAILABLE_PHYSICAL_MEMORY)
    flash_attn_manifest_get(gib_per_job build nvcc_memory_gib)
    math(EXPR by_memory "${free_mib} / (${gib_per_job} * 1024)")
    set(jobs ${cores})
    if(by_memory LESS jobs)
      set(jobs ${by_memory})
    endif()
    if(jobs LESS 1)
      set(jobs 1)
    endif()
    set(why "${cores} cores, ${free_mib} MiB available, ${gib_per_job} GiB per nvcc")
  else()
    set(why "set by FLASH_ATTN_JOBS")
  endif()
  set_property(GLOBAL APPEND PROPERTY JOB_POOLS flash_attn_nvcc=${jobs})
  set_property(TARGET ${arg_TARGET} ${arg_ALSO} PROPERTY JOB_POOL_COMPILE flash_attn_nvcc)
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

# flash_attn_compile_first(FIRST <target> THEN <target>)
#   No object of THEN starts compiling before every object of FIRST has compiled (an order-only
#   dependency through the utility target `<FIRST>_compiled`; with Ninja, plain add_dependencies
#   between two object libraries would order nothing but generated headers). Used so that the
#   binding and dispatch sources, which depend on the shape of the upstream declarations, fail in
#   the first minute instead of after hours of kernel units. Editing a FIRST source recompiles only
#   that source: the dependency orders, it does not invalidate.
function(flash_attn_compile_first)
  cmake_parse_arguments(arg "" "FIRST;THEN" "" ${ARGN})
  add_custom_target(${arg_FIRST}_compiled)
  add_dependencies(${arg_FIRST}_compiled ${arg_FIRST})
  add_dependencies(${arg_THEN} ${arg_FIRST}_compiled)
endfunction()
