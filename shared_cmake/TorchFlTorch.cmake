# Locate the installed torch wheel without find_package(Torch): a CUDA wheel's
# TorchConfig.cmake insists on a CUDA toolkit at configure time, and core never
# needs one. We ask the interpreter that builds us where torch lives instead.
#
# Defines the imported target torch_fl::torch and the variables
#   TORCH_FL_TORCH_VERSION, TORCH_FL_TORCH_MAJOR, TORCH_FL_TORCH_MINOR
include_guard(GLOBAL)

if(NOT Python_EXECUTABLE)
  find_package(Python 3.10 REQUIRED COMPONENTS Interpreter Development.Module)
endif()

# TORCH_DEVICE_BACKEND_AUTOLOAD=0: a stale or broken torch-fl already installed
# must not stop the build that would replace it.
execute_process(
  COMMAND "${CMAKE_COMMAND}" -E env TORCH_DEVICE_BACKEND_AUTOLOAD=0 "${Python_EXECUTABLE}" -c
"import os, torch
root = os.path.dirname(torch.__file__)
print(torch.__version__.split('+')[0])
print(os.path.join(root, 'include'))
print(os.path.join(root, 'include', 'torch', 'csrc', 'api', 'include'))
print(os.path.join(root, 'lib'))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
  OUTPUT_VARIABLE _tfl_torch_out
  RESULT_VARIABLE _tfl_torch_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _tfl_torch_rc EQUAL 0)
  message(FATAL_ERROR "torch-fl: cannot import torch with ${Python_EXECUTABLE}; "
                      "install torch>=2.10 into the build environment first")
endif()
string(REPLACE "\n" ";" _tfl_torch_out "${_tfl_torch_out}")
list(GET _tfl_torch_out 0 TORCH_FL_TORCH_VERSION)
list(GET _tfl_torch_out 1 _tfl_torch_inc)
list(GET _tfl_torch_out 2 _tfl_torch_api_inc)
list(GET _tfl_torch_out 3 _tfl_torch_lib)
list(GET _tfl_torch_out 4 _tfl_torch_cxx11_abi)
string(REPLACE "." ";" _tfl_v "${TORCH_FL_TORCH_VERSION}")
list(GET _tfl_v 0 TORCH_FL_TORCH_MAJOR)
list(GET _tfl_v 1 TORCH_FL_TORCH_MINOR)
if(TORCH_FL_TORCH_MAJOR EQUAL 2 AND TORCH_FL_TORCH_MINOR LESS 10)
  message(FATAL_ERROR "torch-fl needs torch >= 2.10, found ${TORCH_FL_TORCH_VERSION}")
endif()
message(STATUS "torch-fl: building against torch ${TORCH_FL_TORCH_VERSION} (${_tfl_torch_lib})")

# torch 2.12 moved its headers to C++20.
if(TORCH_FL_TORCH_MAJOR GREATER 2 OR TORCH_FL_TORCH_MINOR GREATER_EQUAL 12)
  set(TORCH_FL_CXX_STANDARD 20)
else()
  set(TORCH_FL_CXX_STANDARD 17)
endif()

add_library(torch_fl_torch INTERFACE)
add_library(torch_fl::torch ALIAS torch_fl_torch)
target_include_directories(torch_fl_torch SYSTEM INTERFACE "${_tfl_torch_inc}" "${_tfl_torch_api_inc}")
target_compile_definitions(torch_fl_torch INTERFACE
  _GLIBCXX_USE_CXX11_ABI=${_tfl_torch_cxx11_abi}
  # Version macros for the few places where the C++ API differs by minor.
  TORCH_FL_TORCH_MAJOR=${TORCH_FL_TORCH_MAJOR}
  TORCH_FL_TORCH_MINOR=${TORCH_FL_TORCH_MINOR})
target_compile_features(torch_fl_torch INTERFACE cxx_std_${TORCH_FL_CXX_STANDARD})
foreach(_lib c10 torch_cpu torch torch_python)
  find_library(_tfl_lib_${_lib} NAMES ${_lib} PATHS "${_tfl_torch_lib}" NO_DEFAULT_PATH REQUIRED)
  target_link_libraries(torch_fl_torch INTERFACE "${_tfl_lib_${_lib}}")
endforeach()
set(TORCH_FL_TORCH_LIB_DIR "${_tfl_torch_lib}")

# The torch minor a package's compiled code is built for, as <package>/_torch_build.py in the
# wheel: the package checks it at import, before loading any extension, so running under another
# torch minor is one clear error (torch_fl.versions), not an undefined symbol.
function(torch_fl_install_torch_build_info package_dir)
  set(_file "${CMAKE_CURRENT_BINARY_DIR}/_torch_build.py")
  file(WRITE "${_file}"
       "# Written by the build (shared_cmake/TorchFlTorch.cmake): the torch this wheel is built for.\n"
       "TORCH_VERSION = \"${TORCH_FL_TORCH_VERSION}\"\n"
       "TORCH_MINOR = \"${TORCH_FL_TORCH_MAJOR}.${TORCH_FL_TORCH_MINOR}\"\n")
  install(FILES "${_file}" DESTINATION "${package_dir}")
endfunction()

# Precompiled torch headers for a target's C++ sources. Parsing ATen's headers is most of each
# translation unit's compile time (core's csrc/aten/copy.cpp: 20 s without, 6 s with, on a 2-core
# machine), and the suites build core twice (two torch minors). -DTORCH_FL_PCH=OFF disables it.
option(TORCH_FL_PCH "precompile torch's headers" ON)
function(torch_fl_precompile_torch_headers target)
  if(TORCH_FL_PCH)
    target_precompile_headers(${target} PRIVATE
      "$<$<COMPILE_LANGUAGE:CXX>:<ATen/ATen.h$<ANGLE-R>>"
      "$<$<COMPILE_LANGUAGE:CXX>:<ATen/core/dispatch/Dispatcher.h$<ANGLE-R>>"
      "$<$<COMPILE_LANGUAGE:CXX>:<torch/library.h$<ANGLE-R>>")
  endif()
endfunction()
