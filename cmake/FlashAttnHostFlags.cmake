# FlashAttnHostFlags.cmake
#
# Host-compiler and nvcc flags for the flash_attn extension, chosen per
# compiler, CUDA toolkit and torch version (docs/design.md, "Data flow", step 4).
#
# The function is pure: it reads only its arguments (never CMAKE_* variables),
# so tests run it with `cmake -P` on any machine, and CMakeLists.txt calls it
# as
#   include(FlashAttnHostFlags)
#   flash_attn_host_flags(
#     COMPILER_ID      ${CMAKE_CXX_COMPILER_ID}
#     COMPILER_VERSION ${CMAKE_CXX_COMPILER_VERSION}
#     CUDA_VERSION     ${CMAKE_CUDA_COMPILER_VERSION}
#     TORCH_VERSION    ${Torch_VERSION}
#     OUT_CXX_FLAGS cxx_flags OUT_CUDA_FLAGS cuda_flags OUT_CXX_STANDARD cxx_std)
#   target_compile_options(_C PRIVATE
#     "$<$<COMPILE_LANGUAGE:CXX>:${cxx_flags}>" "$<$<COMPILE_LANGUAGE:CUDA>:${cuda_flags}>")
#   set_target_properties(_C PROPERTIES CXX_STANDARD ${cxx_std} CUDA_STANDARD ${cxx_std})

# ---------------------------------------------------------------------------
# _flash_attn_host_flags_data()  (internal macro)
#
# Arguments: none. Outputs: the FLASH_ATTN_* data variables below, in the
# calling scope (a macro, so the function works from any scope). Errors: none.
# ---------------------------------------------------------------------------
macro(_flash_attn_host_flags_data)
  # From torch 2.13 on, everything is built as C++20 (docs/design.md step 4).
  # torch 2.13 rebuilt c10::ArrayRef on HeaderOnlyArrayRef with hidden-friend
  # operator== overloads (pytorch/pytorch#185379); MSVC then reports C2666
  # ("overloaded functions have similar conversions") on `ArrayRef ==
  # ArrayRef` (pytorch/pytorch#193589) unless it compiles as conforming C++20
  # (/std:c++20 /permissive-). Older torch builds as C++17.
  set(FLASH_ATTN_TORCH_CXX20_MIN 2.13)

  # nvcc flags everyone gets: the flags upstream FlashAttention-2's setup.py
  # passes (minus -std, chosen below). torch's build defines the
  # __CUDA_NO_HALF*__ / __CUDA_NO_BFLOAT16_CONVERSIONS__ macros; the kernels
  # need the half/bfloat16 operators and conversions, hence the -U.
  # --expt-relaxed-constexpr and --expt-extended-lambda are needed by CuTe.
  set(FLASH_ATTN_NVCC_COMMON_FLAGS
    -O3
    --use_fast_math
    --expt-relaxed-constexpr
    --expt-extended-lambda
    -U__CUDA_NO_HALF_OPERATORS__
    -U__CUDA_NO_HALF_CONVERSIONS__
    -U__CUDA_NO_HALF2_OPERATORS__
    -U__CUDA_NO_BFLOAT16_CONVERSIONS__)

  # Host compilers with GCC-style flags. On Windows nvcc takes only cl.exe
  # (COMPILER_ID MSVC), so clang-cl never reaches this function.
  set(FLASH_ATTN_GNU_LIKE_COMPILERS GNU Clang)

  # First MSVC (cl.exe) versions with the flags used below (Microsoft docs):
  # /Zc:preprocessor since VS 2019 16.5 (19.25); /std:c++20 since VS 2019
  # 16.11 (19.29).
  set(FLASH_ATTN_MSVC_MIN_ZC_PREPROCESSOR 19.25)
  set(FLASH_ATTN_MSVC_MIN_STD_CXX20 19.29)

  # CCCL in CUDA >= 13.2 stops with C1189 under MSVC's traditional
  # preprocessor. Only used to word the status line: the flag is always passed.
  set(FLASH_ATTN_CUDA_NEEDS_ZC_PREPROCESSOR 13.2)
endmacro()
_flash_attn_host_flags_data()

# ---------------------------------------------------------------------------
# _flash_attn_release_version(<what> <text> <out_var>)  (internal)
#
# Arguments: <what> label for messages ("TORCH_VERSION"); <text> a version as
#            Python packages and compilers print it.
# Outputs:   <out_var> = the release part, "major.minor[.patch...]":
#            "2.14.1+cu130" -> 2.14.1, "2.13.0.dev20260601+cu130" -> 2.13.0,
#            "2.13.0a0+git1234" -> 2.13.0, "v2.13.0rc2" -> 2.13.0,
#            "19.44.35207.1" -> 19.44.35207.1.
#            The local label (+...) and pre/post/dev parts are dropped: a torch
#            2.13 pre-release already has the 2.13 headers, so it needs the 2.13
#            flags even though PEP 440 sorts it before 2.13.0.
# Errors:    FATAL_ERROR when <text> does not start with major.minor digits or
#            carries anything but PEP 440 pre/post/dev parts and a local label.
# ---------------------------------------------------------------------------
function(_flash_attn_release_version what text out_var)
  string(STRIP "${text}" t)
  set(release_re "[0-9]+(\\.[0-9]+)+")
  set(suffix_re "((a|b|rc)[0-9]+)?(\\.post[0-9]+)?(\\.dev[0-9]+)?(\\+[A-Za-z0-9.]+)?")
  if(NOT t MATCHES "^v?(${release_re})${suffix_re}$")
    message(FATAL_ERROR
      "flash_attn: ${what} '${text}' is not a version. Pass it as printed by "
      "its tool, e.g. 2.14.1 or 2.14.1+cu130 (torch.__version__), 13.0 or "
      "13.0.88 (nvcc), 19.44.35207 (cl.exe).")
  endif()
  set(${out_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

# ---------------------------------------------------------------------------
# flash_attn_host_flags(
#     COMPILER_ID <MSVC|GNU|Clang>
#     COMPILER_VERSION <v>
#     CUDA_VERSION <v>
#     TORCH_VERSION <v>
#     OUT_CXX_FLAGS <var>
#     OUT_CUDA_FLAGS <var>
#     OUT_CXX_STANDARD <var>)
#
# Arguments:
#   COMPILER_ID       the host C++ compiler, as CMAKE_CXX_COMPILER_ID spells it.
#   COMPILER_VERSION  its version (CMAKE_CXX_COMPILER_VERSION), e.g. 19.44.35207.
#   CUDA_VERSION      the toolkit version, e.g. 13.2 or 13.0.88.
#   TORCH_VERSION     torch.__version__; a local label (2.14.1+cu130) and
#                     pre/dev parts are stripped before comparing. "none" for
#                     code that includes no torch header (the kernel objects):
#                     C++17, upstream's standard, for every torch.
# Outputs (set in the caller's scope):
#   OUT_CXX_STANDARD  20 when torch >= 2.13, else 17 (also for TORCH_VERSION
#                     none) (for CXX_STANDARD and CUDA_STANDARD).
#   OUT_CXX_FLAGS     host flags for C++ sources:
#                     MSVC: /Zc:preprocessor /Zc:__cplusplus [/permissive-]
#                           /std:c++20|/std:c++17 /bigobj /EHsc
#                           (/permissive- with /std:c++20 only, torch >= 2.13);
#                     GNU-like: -fvisibility=hidden.
#   OUT_CUDA_FLAGS    nvcc flags: FLASH_ATTN_NVCC_COMMON_FLAGS, -std=c++20 or
#                     -std=c++17, then every OUT_CXX_FLAGS entry forwarded as
#                     -Xcompiler=<flag>.
# Status line: one, naming the compiler, standard and host flags.
# Errors (message(FATAL_ERROR)):
#   - a missing argument or an unexpected one;
#   - TORCH_VERSION, CUDA_VERSION or COMPILER_VERSION that is not a version;
#   - a COMPILER_ID other than MSVC and the GNU-like list (nvcc on Windows
#     takes only cl.exe; other compilers are untested here);
#   - MSVC older than 19.25 (no /Zc:preprocessor), or older than 19.29 with
#     torch >= 2.13 (no /std:c++20).
# Rules and their sources:
#   - C++20 for torch >= 2.13, else C++17, for every compiler: docs/design.md step
#     4 and the data macro above; nvcc 13.0 builds the units with torch 2.14.1
#     headers and -std=c++20 (docs/design.md, measured facts).
#   - MSVC /Zc:preprocessor: always passed. CCCL in CUDA >= 13.2 fails with
#     C1189 without it; CCCL also warns whenever MSVC's traditional
#     preprocessor is used (NVIDIA/cccl#5171, #5172). Earlier toolkits compile
#     with it as well, so passing it everywhere is harmless and keeps one flag
#     set for all toolkits (project decision).
#   - MSVC /Zc:__cplusplus: report the real __cplusplus (torch and CCCL test
#     it); /bigobj: template-heavy units exceed the default COFF limit of
#     65535 sections per object; /EHsc:
#     standard C++ exceptions (torch throws c10::Error).
#   - GNU-like -fvisibility=hidden: export nothing but what loading needs;
#     TORCH_LIBRARY registers operators from static initializers, so no symbol
#     has to be exported (docs/design.md: LNK1189 export limit, same policy).
#   - forwarding through -Xcompiler: nvcc compiles the host side of .cu files
#     with the same compiler, which must see the same flags (docs/design.md step 4).
# ---------------------------------------------------------------------------
function(flash_attn_host_flags)
  _flash_attn_host_flags_data()
  set(one_value COMPILER_ID COMPILER_VERSION CUDA_VERSION TORCH_VERSION
      OUT_CXX_FLAGS OUT_CUDA_FLAGS OUT_CXX_STANDARD)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "${one_value}" "")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR
      "flash_attn_host_flags: unexpected arguments '${ARG_UNPARSED_ARGUMENTS}'. "
      "Known keywords: ${one_value}.")
  endif()
  foreach(kw IN LISTS one_value)
    if(NOT DEFINED ARG_${kw} OR "${ARG_${kw}}" STREQUAL "")
      message(FATAL_ERROR "flash_attn_host_flags: ${kw} is required.")
    endif()
  endforeach()

  _flash_attn_release_version(CUDA_VERSION "${ARG_CUDA_VERSION}" cuda)
  _flash_attn_release_version(COMPILER_VERSION "${ARG_COMPILER_VERSION}" cc_version)

  if(ARG_TORCH_VERSION STREQUAL "none")
    # Torch-free code (the kernel objects): upstream's own standard, whatever torch the binding
    # uses, so one set of kernel objects serves every torch.
    set(torch "none")
    set(std 17)
  else()
    _flash_attn_release_version(TORCH_VERSION "${ARG_TORCH_VERSION}" torch)
    if(torch VERSION_GREATER_EQUAL FLASH_ATTN_TORCH_CXX20_MIN)
      set(std 20)
    else()
      set(std 17)
    endif()
  endif()

  set(cxx_flags "")
  if(ARG_COMPILER_ID STREQUAL "MSVC")
    if(cc_version VERSION_LESS FLASH_ATTN_MSVC_MIN_ZC_PREPROCESSOR)
      message(FATAL_ERROR
        "flash_attn: MSVC ${ARG_COMPILER_VERSION} has no /Zc:preprocessor; use "
        "MSVC ${FLASH_ATTN_MSVC_MIN_ZC_PREPROCESSOR} (Visual Studio 2019 16.5) "
        "or newer, preferably Visual Studio 2022.")
    endif()
    if(std EQUAL 20 AND cc_version VERSION_LESS FLASH_ATTN_MSVC_MIN_STD_CXX20)
      message(FATAL_ERROR
        "flash_attn: torch ${ARG_TORCH_VERSION} needs C++20, and MSVC "
        "${ARG_COMPILER_VERSION} has no /std:c++20; use MSVC "
        "${FLASH_ATTN_MSVC_MIN_STD_CXX20} (Visual Studio 2019 16.11) or newer, "
        "preferably Visual Studio 2022.")
    endif()
    list(APPEND cxx_flags /Zc:preprocessor /Zc:__cplusplus)
    if(std EQUAL 20)
      list(APPEND cxx_flags /permissive- /std:c++20)
    else()
      list(APPEND cxx_flags /std:c++17)
    endif()
    list(APPEND cxx_flags /bigobj /EHsc)
    if(cuda VERSION_GREATER_EQUAL FLASH_ATTN_CUDA_NEEDS_ZC_PREPROCESSOR)
      set(why "/Zc:preprocessor required by CCCL for CUDA >= ${FLASH_ATTN_CUDA_NEEDS_ZC_PREPROCESSOR}")
    else()
      set(why "/Zc:preprocessor passed for every CUDA, required from ${FLASH_ATTN_CUDA_NEEDS_ZC_PREPROCESSOR}")
    endif()
  elseif(ARG_COMPILER_ID IN_LIST FLASH_ATTN_GNU_LIKE_COMPILERS)
    list(APPEND cxx_flags -fvisibility=hidden)
    set(why "hidden visibility: the extension exports nothing")
  else()
    string(REPLACE ";" ", " known "MSVC;${FLASH_ATTN_GNU_LIKE_COMPILERS}")
    message(FATAL_ERROR
      "flash_attn: host compiler '${ARG_COMPILER_ID}' is not supported; "
      "supported: ${known}. Point CMAKE_CXX_COMPILER and CMAKE_CUDA_HOST_COMPILER "
      "at one of them.")
  endif()

  set(cuda_flags ${FLASH_ATTN_NVCC_COMMON_FLAGS} -std=c++${std})
  foreach(flag IN LISTS cxx_flags)
    list(APPEND cuda_flags "-Xcompiler=${flag}")
  endforeach()

  message(STATUS
    "flash_attn: host ${ARG_COMPILER_ID} ${ARG_COMPILER_VERSION}, torch ${torch}, "
    "CUDA ${cuda} -> C++${std}, host flags ${cxx_flags} (${why})")

  set(${ARG_OUT_CXX_FLAGS} "${cxx_flags}" PARENT_SCOPE)
  set(${ARG_OUT_CUDA_FLAGS} "${cuda_flags}" PARENT_SCOPE)
  set(${ARG_OUT_CXX_STANDARD} "${std}" PARENT_SCOPE)
endfunction()

# flash_attn_hide_exports(<target>)
#   The shared object exports nothing but what loading needs: the operators register themselves
#   from static initialisers (TORCH_LIBRARY), so no symbol has to be visible. -fvisibility=hidden
#   still leaves ~140 weak template symbols from torch/std headers exported on Linux; a version
#   script with `local: *` hides them too. MSVC exports nothing without dllexport, which keeps
#   the import library far below LNK1189's 65535-export limit.
function(flash_attn_hide_exports target)
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    set(script "${CMAKE_BINARY_DIR}/flash_attn_exports.map")
    file(CONFIGURE OUTPUT "${script}" CONTENT "{ local: *; };\n")
    target_link_options(${target} PRIVATE "LINKER:--version-script=${script}" "LINKER:--no-undefined")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${script}")
  endif()
endfunction()
