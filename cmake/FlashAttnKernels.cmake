# FlashAttnKernels.cmake: the torch-free kernel library of an arch group, its build key, and the
# kernels archives that carry its objects between machines (docs/release.md, "Kernels archives").
#
# The instantiation units and the dispatch compile without torch (src/kernels/torch_free stands in
# for the three torch headers upstream's kernel code includes), so their objects depend only on
# what the build key lists. A build either compiles them (target flash_attn_kernels_<group>,
# optionally only one shard of the kernel set) or imports them from a kernels archive written by
# an earlier build of the same key (FLASH_ATTN_KERNELS), and then compiles only the binding.
#
# A kernels archive is a folder: the object files (dispatch and units, by unit name) and
# kernels-manifest.json, written by release.archive.archives from what flash_attn_export_kernels records
# (the build key and its fields, the kernel set, the object paths). Its format, its content-addressed
# archive key and folder name are release.archive.integrity's rule (docs/release.md, "Kernels
# archives and shards"); flash_attn_import_kernels runs that verifier rather than restating it.

# flash_attn_kernel_key(OUT_KEY <var> OUT_FIELDS <var> FIELDS <name> <value> [<name> <value>...])
#   The build key of the kernel objects: the SHA-256 of a JSON object of the given fields (sorted
#   by name). Callers pass everything that enters a kernel object and nothing else: nvcc and host
#   compiler versions, every CUDA flag and definition, the gencode targets, the kernel set, the
#   upstream tree's identity (sdist hash or tree hashes, and the delta code), the generator and
#   torch-free headers. Never torch. OUT_FIELDS is the JSON object, recorded in the archive so a
#   mismatch can name the field. Errors: FATAL_ERROR for an odd number of FIELDS entries.
function(flash_attn_kernel_key)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUT_KEY;OUT_FIELDS" "FIELDS")
  list(LENGTH arg_FIELDS n)
  math(EXPR odd "${n} % 2")
  if(odd)
    message(FATAL_ERROR "flash_attn_kernel_key: FIELDS needs <name> <value> pairs, got ${n} entries")
  endif()
  set(pairs "")
  math(EXPR last "${n} - 1")
  foreach(i RANGE 0 ${last} 2)
    math(EXPR j "${i} + 1")
    list(GET arg_FIELDS ${i} name)
    list(GET arg_FIELDS ${j} value)
    list(APPEND pairs "${name}")
    set(value_${name} "${value}")
  endforeach()
  list(SORT pairs)
  set(json "{}")
  set(canonical "")
  foreach(name IN LISTS pairs)
    string(REPLACE "\\" "\\\\" escaped "${value_${name}}")
    string(REPLACE "\"" "\\\"" escaped "${escaped}")
    string(JSON json SET "${json}" "${name}" "\"${escaped}\"")
    string(APPEND canonical "${name}=${value_${name}}\n")
  endforeach()
  # The key hashes "name=value" lines, not CMake's JSON rendering, so another CMake version
  # computes the same key for the same inputs.
  string(SHA256 key "${canonical}")
  set(${arg_OUT_KEY} "${key}" PARENT_SCOPE)
  set(${arg_OUT_FIELDS} "${json}" PARENT_SCOPE)
endfunction()

# flash_attn_export_kernels(TARGET <object library> KEY <key> FIELDS <json> KERNELS_JSON <file>
#                           OUT <json file>)
#   Writes <json file> at generate time: the key, its fields, the kernels.json of the generator
#   (the set's units, the shard) and the object paths of TARGET ($<TARGET_OBJECTS>), for
#   release.archive.archives to pack into an archive after the build.
function(flash_attn_export_kernels)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "TARGET;KEY;FIELDS;KERNELS_JSON;OUT" "")
  file(READ "${arg_KERNELS_JSON}" kernels)
  set(record "{}")
  string(JSON record SET "${record}" format 1)
  string(JSON record SET "${record}" key "\"${arg_KEY}\"")
  string(JSON record SET "${record}" fields "${arg_FIELDS}")
  string(JSON record SET "${record}" kernels "${kernels}")
  string(JSON record SET "${record}" objects "[\"@OBJECTS@\"]")
  string(REPLACE "\"@OBJECTS@\"" "\"$<JOIN:$<TARGET_OBJECTS:${arg_TARGET}>,\"$<COMMA>\">\"" record "${record}")
  file(GENERATE OUTPUT "${arg_OUT}" CONTENT "${record}\n")
endfunction()

# flash_attn_import_kernels(TARGET <name> ARCHIVE <folder> KEY <key> FIELDS <json> UNITS <names...>
#                           PYTHON <exe>)
#   Makes <name> an IMPORTED OBJECT library of the objects in the kernels archive <folder>, after
#   checking, before anything compiles, that the archive is whole and was built for exactly this
#   build. The rule is Python's, not restated here: this function writes this build's build key,
#   fields and units to <build>/kernels_expected.json and runs
#   `python -m release.archive.integrity <folder> --expect <that file>` (stdlib only, from this
#   checkout's src/), which verifies the archive (manifest shape, object paths confined to the
#   folder, the archive key recomputed from the objects read, the folder's name, each object's SASS
#   read from its fatbin) and then the link's checks: its build key equals KEY (else naming each
#   field that differs), it is a whole set, its units are UNITS. It prints the object paths, which
#   become IMPORTED_OBJECTS. Errors: FATAL_ERROR with the verifier's one error line.
function(flash_attn_import_kernels)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "TARGET;ARCHIVE;KEY;FIELDS;PYTHON" "UNITS")
  set(what "flash_attn: the kernels archive FLASH_ATTN_KERNELS=${arg_ARCHIVE}")
  if(NOT EXISTS "${arg_ARCHIVE}/kernels-manifest.json")
    message(FATAL_ERROR "${what} has no kernels-manifest.json. Pass the folder that nox -s archive_<group> or "
                        "nox -s archive_gather wrote, or leave FLASH_ATTN_KERNELS empty to compile the kernels.")
  endif()
  set(units_json "[]")
  set(i 0)
  foreach(unit IN LISTS arg_UNITS)
    string(JSON units_json SET "${units_json}" ${i} "\"${unit}\"")
    math(EXPR i "${i} + 1")
  endforeach()
  set(expect "{}")
  string(JSON expect SET "${expect}" build_key "\"${arg_KEY}\"")
  string(JSON expect SET "${expect}" fields "${arg_FIELDS}")
  string(JSON expect SET "${expect}" units "${units_json}")
  set(expect_file "${CMAKE_BINARY_DIR}/kernels_expected.json")
  file(WRITE "${expect_file}" "${expect}\n")
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env "PYTHONPATH=${PROJECT_SOURCE_DIR}/src" --
                          "${arg_PYTHON}" -m release.archive.integrity "${arg_ARCHIVE}" --expect "${expect_file}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    string(REGEX REPLACE "^error: " "" err "${err}")
    message(FATAL_ERROR "${what} does not verify: ${err}")
  endif()
  string(REPLACE "\n" ";" objects "${out}")
  add_library(${arg_TARGET} OBJECT IMPORTED GLOBAL)
  set_target_properties(${arg_TARGET} PROPERTIES IMPORTED_OBJECTS "${objects}")
  list(LENGTH objects n)
  message(STATUS "flash_attn: kernels from ${arg_ARCHIVE}: ${n} objects, key ${arg_KEY}; no kernel unit compiles")
endfunction()

# flash_attn_kernel_key_of_this_build(KERNELS_JSON <kernels.json path> CUDA_FLAGS <flags...>
#     STANDARD <n> DEFINITIONS <defs...> CUDA_ARCHITECTURES <list> OUT_KEY <var> OUT_FIELDS <var>
#     OUT_UNITS <var>)
#   The key of this configuration's kernel objects (flash_attn_kernel_key over the fields below)
#   and the unit names of its kernel set (all of them, also in a shard build). Fields: the system,
#   nvcc (id, version) and the host compiler (id, major version), every CUDA flag (CMAKE_CUDA_FLAGS
#   and those of the build type, the kernel flags, the fatbin compression), the per-source naming
#   flags (object_naming: flash_attn_object_naming_flags for a placeholder unit), the C++ standard,
#   the definitions (A-1 threshold, A-2, the namespace), the gencode targets, the kernel set and
#   its units, the staged upstream tree's stamp (sdist sha256 or a local tree's file hashes, with
#   the delta code and FLASH_ATTN_APPLY_DELTAS), the CUTLASS folder when one is given, and the
#   SHA-256 of the unit generator, dispatch.h and the torch-free headers.
function(flash_attn_kernel_key_of_this_build)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "KERNELS_JSON;STANDARD;CUDA_ARCHITECTURES;OUT_KEY;OUT_FIELDS;OUT_UNITS"
                        "CUDA_FLAGS;DEFINITIONS")
  file(READ "${arg_KERNELS_JSON}" kernels)
  string(JSON set_name GET "${kernels}" kernel_set)
  # the unit names as src/kernels/kernel_set.py spells them (generate_units.py writes them)
  string(JSON n LENGTH "${kernels}" unit_names)
  set(units "")
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON name GET "${kernels}" unit_names ${i})
    list(APPEND units "${name}")
  endforeach()
  list(SORT units)
  string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
  set(inputs "")
  file(GLOB_RECURSE shim_files LIST_DIRECTORIES false "${PROJECT_SOURCE_DIR}/src/kernels/torch_free/*")
  list(SORT shim_files)
  # native.py: the generated dispatch's "built without" message is its NOT_BUILT_PREFIX
  foreach(f "${PROJECT_SOURCE_DIR}/src/kernels/generate_units.py" "${PROJECT_SOURCE_DIR}/src/kernels/dispatch.h"
          "${PROJECT_SOURCE_DIR}/src/flash_attn_wheel_names/native.py" ${shim_files})
    file(SHA256 "${f}" h)
    file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${f}")
    list(APPEND inputs "${rel}=${h}")
  endforeach()
  string(REPLACE ";" "," units_text "${units}")
  # the per-source naming flags (flash_attn_deterministic_objects), spelled for a placeholder unit
  flash_attn_object_naming_flags(SOURCE "${CMAKE_BINARY_DIR}/kernels/units/<unit>.cu" BASE "${CMAKE_BINARY_DIR}"
                                 COMPILER_ID "${CMAKE_CXX_COMPILER_ID}" OUT naming)
  string(REPLACE ";" " " naming "${naming}")
  # The host compiler's id and MAJOR version only, no path: a runner-image rollout or a re-pushed image
  # tag in the middle of a release moves MSVC's minor and build number, gcc's minor and patch and
  # cl.exe's install path, none of which changes the ABI the shards' objects share (issue 25; the
  # kernels manifest still records each shard's full compiler, release.archive.archives).
  string(REGEX MATCH "^[0-9]+" host_major "${CMAKE_CXX_COMPILER_VERSION}")
  flash_attn_kernel_key(OUT_KEY key OUT_FIELDS fields FIELDS
    format 1
    system "${CMAKE_SYSTEM_NAME} ${CMAKE_SYSTEM_PROCESSOR}"
    cuda_compiler "${CMAKE_CUDA_COMPILER_ID} ${CMAKE_CUDA_COMPILER_VERSION}"
    host_compiler "${CMAKE_CXX_COMPILER_ID} ${host_major}"
    cuda_flags "${CMAKE_CUDA_FLAGS} ${CMAKE_CUDA_FLAGS_${config}} ${arg_CUDA_FLAGS} ${FLASH_ATTN_FATBIN_FLAGS}"
    object_naming "${naming}"
    cxx_standard "${arg_STANDARD}"
    definitions "${arg_DEFINITIONS}"
    cuda_architectures "${arg_CUDA_ARCHITECTURES}"
    kernel_set "${set_name}"
    units "${units_text}"
    upstream "${FLASH_ATTN_UPSTREAM_STAMP_VALUE}"
    cutlass_dir "${FLASH_ATTN_CUTLASS_DIR}"
    sources "${inputs}")
  message(STATUS "flash_attn: kernel objects' build key ${key} (torch is not part of it)")
  set(${arg_OUT_KEY} "${key}" PARENT_SCOPE)
  set(${arg_OUT_FIELDS} "${fields}" PARENT_SCOPE)
  set(${arg_OUT_UNITS} "${units}" PARENT_SCOPE)
endfunction()

# flash_attn_torch_free_tree(PYTHON <exe> TREE <staged root>)
#   Runs src/kernels/torch_free_tree.py on a freshly staged tree: flash.h's philox_args becomes
#   ::flash_attn_wheels::PhiloxState (torch's at::PhiloxCudaState changes layout between torch
#   versions; the binding converts). FATAL_ERROR with the script's message for a flash.h it does not
#   know. The script is a STAMP_INPUT of flash_attn_prepare_upstream, so editing it restages the tree.
function(flash_attn_torch_free_tree)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "PYTHON;TREE" "")
  execute_process(COMMAND "${arg_PYTHON}" "${PROJECT_SOURCE_DIR}/src/kernels/torch_free_tree.py" --tree "${arg_TREE}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${err}\nflash_attn: the staged tree ${arg_TREE} cannot be made torch-free (see above).")
  endif()
  message(STATUS "${out}")
endfunction()

# flash_attn_object_naming_flags(SOURCE <path> BASE <dir> COMPILER_ID <id> OUT <var>)
#   The nvcc flags for one source that make cudafe++'s module id a function of SOURCE's path below
#   BASE alone. The module id names every anonymous namespace (_GLOBAL__N_<id>) and prefixes the
#   internal-linkage entities of headers (_INTERNAL_<id>, e.g. CCCL's cuda::std CPOs), on the host
#   and in the PTX/cubins, so it reaches the symbol table and the fatbin. It reads
#   _<crc of the source's absolute path>_<length>_<file name>_<crc>[_<process id>]; nvcc 13.0 adds
#   cudafe++'s process id whenever the unit defines no external variable or non-template function
#   to derive the id from, which is every instantiation unit (explicit specializations only).
#   Measured (docs/release.md, "Kernels archives and shards", byte identity): two compiles of one
#   unit differed in that id and, through it, in the fatbin's size; with these flags they are
#   byte-identical, also in two build folders at different paths. <rel> below is SOURCE relative to
#   BASE (kernels/units/<unit>.cu).
#   - -frandom-seed=<rel>: nvcc's documented seed for the names it would otherwise make random
#     (it replaces the process id); one value per source, as nvcc asks. nvcc hands it to cudafe++,
#     cicc and, for GCC/Clang, the host compiler's own -frandom-seed. COMPILER_ID MSVC: cl.exe has no
#     such option, so the seed goes to cudafe++ only (-Xcudafe=--frandom-seed), the tool that makes
#     the module id (on Linux this gives the same bytes as the nvcc option).
#   - -Xcudafe=--orig_src_path_name=<rel>: cudafe++ takes the last value of this option, so the id's
#     path crc no longer depends on where the build folder is. Diagnostics keep the real path (they
#     come from the preprocessed file's #line lines), and __FILE__ was expanded before cudafe++ ran.
#   The flags of a placeholder source are a field of the build key
#   (flash_attn_kernel_key_of_this_build): they change the objects' symbol names. Errors: none.
function(flash_attn_object_naming_flags)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "SOURCE;BASE;COMPILER_ID;OUT" "")
  file(RELATIVE_PATH rel "${arg_BASE}" "${arg_SOURCE}")
  if(arg_COMPILER_ID STREQUAL "MSVC")
    set(seed "-Xcudafe=--frandom-seed=${rel}")
  else()
    set(seed "-frandom-seed=${rel}")
  endif()
  set(${arg_OUT} "${seed};-Xcudafe=--orig_src_path_name=${rel}" PARENT_SCOPE)
endfunction()

# flash_attn_deterministic_objects(TARGET <CUDA target>)
#   Makes the objects of the target's nvcc compiles a function of their inputs:
#   - `--keep --keep-dir=<build>/nvcc-intermediates` for the whole target. Without it nvcc names its
#     intermediate files tmpxft_<process id>_..., and those names end up in every object (the file
#     symbol and the static initialiser's name); with it they are named after the source
#     (fwd_hdim64_fp16.cudafe1.cpp). Not part of the build key: it changes no code and its folder
#     differs between machines (it does not enter the object). release.archive.archives empties the folder
#     after each build (it holds the preprocessed sources, PTX and cubins: tens of MB per unit).
#   - flash_attn_object_naming_flags for each .cu source (its path below the build folder), as a
#     source property: cudafe++'s module id without process id or absolute path.
function(flash_attn_deterministic_objects)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "TARGET" "")
  set(dir "${CMAKE_BINARY_DIR}/nvcc-intermediates")
  file(MAKE_DIRECTORY "${dir}")
  target_compile_options(${arg_TARGET} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:--keep;--keep-dir=${dir}>")
  get_target_property(sources ${arg_TARGET} SOURCES)
  list(FILTER sources INCLUDE REGEX "\\.cu$")
  foreach(src IN LISTS sources)
    get_filename_component(src "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    flash_attn_object_naming_flags(SOURCE "${src}" BASE "${CMAKE_BINARY_DIR}" COMPILER_ID "${CMAKE_CXX_COMPILER_ID}"
                                   OUT naming)
    set_property(SOURCE "${src}" APPEND PROPERTY COMPILE_OPTIONS ${naming})
  endforeach()
endfunction()
