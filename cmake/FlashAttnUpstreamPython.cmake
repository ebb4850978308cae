# FlashAttnUpstreamPython.cmake: upstream's pure-Python modules in the wheel.
#
# The wheel replaces the official flash-attn wheel, whose users import more of the package than the
# attention functions: flash_attn.bert_padding (transformers), flash_attn.layers.rotary,
# flash_attn.ops.triton.*, flash_attn.losses.*, flash_attn.utils.* and so on. Those modules are
# upstream's, taken at build time from the same staged tree the kernels come from (the pinned
# sdist or FLASH_ATTN_SOURCE_DIR), never committed here. This project keeps owning the files
# named in upstream_python.owned of build-manifest.json (its __init__.py and
# flash_attn_interface.py); upstream_python.left_out lists what cannot work in this build, each
# with its reason (docs/upstream-python.md).

include(FlashAttnManifest)

# flash_attn_upstream_python_files(TREE <staged root> OUT_FILES <var>)
#   <var> = the paths, relative to <TREE>/<package_dir>, of the upstream .py files the wheel ships:
#   every *.py below the package folder except the owned files (at its top only: a subpackage's
#   own __init__.py ships) and the left_out paths (a file, or a folder and all below it).
#   Errors: FATAL_ERROR when the tree has no package folder (a tree that is not FlashAttention's
#   would otherwise give a wheel without bert_padding, silently); a WARNING when no module remains.
function(flash_attn_upstream_python_files)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "TREE;OUT_FILES" "")
  flash_attn_manifest_get(package_dir upstream_python package_dir)
  flash_attn_manifest_list(owned upstream_python owned)
  set(root "${arg_TREE}/${package_dir}")
  if(NOT IS_DIRECTORY "${root}")
    message(FATAL_ERROR "flash_attn: the upstream tree ${arg_TREE} has no ${package_dir}/ folder, so the wheel "
                        "would lack upstream's Python modules (bert_padding, layers, ops, ...). Use the pinned sdist "
                        "or a complete FlashAttention tree (FLASH_ATTN_SOURCE_DIR with its flash_attn/ folder).")
  endif()
  flash_attn_manifest_fields(left_out path upstream_python left_out)
  file(GLOB_RECURSE found RELATIVE "${root}" LIST_DIRECTORIES false "${root}/*.py")
  list(SORT found)
  set(files "")
  foreach(rel IN LISTS found)
    if(rel IN_LIST owned)
      continue()
    endif()
    set(skip FALSE)
    foreach(out IN LISTS left_out)
      if(rel STREQUAL out OR rel MATCHES "^${out}/")
        set(skip TRUE)
      endif()
    endforeach()
    if(NOT skip)
      list(APPEND files "${rel}")
    endif()
  endforeach()
  if(NOT files)
    # A trimmed tree (a fork carrying only its kernels and __init__.py) still builds; its wheel has
    # only this project's modules, and says so here.
    message(WARNING "flash_attn: no upstream Python module below ${root} besides the owned ones: the wheel will "
                    "lack bert_padding, layers/, ops/ ... (consumers such as transformers import them)")
  endif()
  set(${arg_OUT_FILES} "${files}" PARENT_SCOPE)
endfunction()

# flash_attn_install_upstream_python(TREE <staged root> DESTINATION <package folder in the wheel>)
#   Installs the files of flash_attn_upstream_python_files into DESTINATION, keeping their folders
#   (ops/triton/layer_norm.py -> <DESTINATION>/ops/triton/layer_norm.py), and prints one status line.
function(flash_attn_install_upstream_python)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "TREE;DESTINATION" "")
  flash_attn_manifest_get(package_dir upstream_python package_dir)
  flash_attn_upstream_python_files(TREE "${arg_TREE}" OUT_FILES files)
  foreach(rel IN LISTS files)
    cmake_path(GET rel PARENT_PATH sub)
    install(FILES "${arg_TREE}/${package_dir}/${rel}" DESTINATION "${arg_DESTINATION}/${sub}")
  endforeach()
  list(LENGTH files n)
  message(STATUS "flash_attn: upstream Python modules: ${n} files from ${arg_TREE}/${package_dir} into the wheel")
endfunction()
