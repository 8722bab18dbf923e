# FindMUSA: Moore Threads' MUSA SDK (the MUSA runtime + the muDNN operator library).
#
#   find_package(MUSA REQUIRED)
#
# Looks under MUSA_HOME (CMake variable, else environment, else /usr/local/musa): include/ for
# musa_runtime_api.h and mudnn.h, lib/ or lib64/ for libmusart.so and libmudnn.so. Defines
#   MUSA_FOUND, MUSA_HOME, MUSA_INCLUDE_DIRS, MUSA_RUNTIME_LIBRARY, MUSA_DNN_LIBRARY,
#   MUSA_IS_EMULATOR (the torch-fl emulator's musa_emulator.h is there)
# and imported targets MUSA::musart, MUSA::mudnn.
include_guard(GLOBAL)

if(NOT MUSA_HOME)
  if(DEFINED ENV{MUSA_HOME} AND NOT "$ENV{MUSA_HOME}" STREQUAL "")
    set(MUSA_HOME "$ENV{MUSA_HOME}")
  else()
    set(MUSA_HOME "/usr/local/musa")
  endif()
endif()

find_path(MUSA_RUNTIME_INCLUDE_DIR musa_runtime_api.h PATHS "${MUSA_HOME}/include" NO_DEFAULT_PATH)
find_path(MUSA_DNN_INCLUDE_DIR mudnn.h PATHS "${MUSA_HOME}/include" NO_DEFAULT_PATH)
find_library(MUSA_RUNTIME_LIBRARY musart PATHS "${MUSA_HOME}/lib" "${MUSA_HOME}/lib64"
  NO_DEFAULT_PATH)
find_library(MUSA_DNN_LIBRARY mudnn PATHS "${MUSA_HOME}/lib" "${MUSA_HOME}/lib64" NO_DEFAULT_PATH)

set(_musa_missing "")
foreach(_v MUSA_RUNTIME_INCLUDE_DIR MUSA_DNN_INCLUDE_DIR MUSA_RUNTIME_LIBRARY MUSA_DNN_LIBRARY)
  if(NOT ${_v})
    list(APPEND _musa_missing "${_v}")
  endif()
endforeach()
if(_musa_missing)
  set(MUSA_FOUND FALSE)
  string(REPLACE ";" ", " _musa_missing "${_musa_missing}")
  string(CONCAT _musa_msg
    "MUSA SDK not found under MUSA_HOME=${MUSA_HOME} (missing: ${_musa_missing}; looked for "
    "include/musa_runtime_api.h, include/mudnn.h, lib[64]/libmusart.so, lib[64]/libmudnn.so).\n"
    "Point MUSA_HOME at an SDK install (export MUSA_HOME=/path/to/musa), or build the MUSA "
    "emulator that ships with torch-fl-musa and use it:\n"
    "  cmake -S packages/torch_fl_musa/emulator -B packages/torch_fl_musa/emulator/build "
    "-DCMAKE_INSTALL_PREFIX=$PWD/packages/torch_fl_musa/emulator/prefix\n"
    "  cmake --build packages/torch_fl_musa/emulator/build && "
    "cmake --install packages/torch_fl_musa/emulator/build\n"
    "  export MUSA_HOME=$PWD/packages/torch_fl_musa/emulator/prefix\n"
    "(`nox -s build-musa` does exactly this when MUSA_HOME is unset).")
  if(MUSA_FIND_REQUIRED)
    message(FATAL_ERROR "${_musa_msg}")
  elseif(NOT MUSA_FIND_QUIETLY)
    message(WARNING "${_musa_msg}")
  endif()
  return()
endif()

set(MUSA_FOUND TRUE)
set(MUSA_INCLUDE_DIRS "${MUSA_RUNTIME_INCLUDE_DIR}" "${MUSA_DNN_INCLUDE_DIR}")
list(REMOVE_DUPLICATES MUSA_INCLUDE_DIRS)
if(EXISTS "${MUSA_RUNTIME_INCLUDE_DIR}/musa_emulator.h")
  set(MUSA_IS_EMULATOR TRUE)
else()
  set(MUSA_IS_EMULATOR FALSE)
endif()
if(NOT TARGET MUSA::musart)
  add_library(MUSA::musart SHARED IMPORTED)
  set_target_properties(MUSA::musart PROPERTIES IMPORTED_LOCATION "${MUSA_RUNTIME_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MUSA_RUNTIME_INCLUDE_DIR}")
  add_library(MUSA::mudnn SHARED IMPORTED)
  set_target_properties(MUSA::mudnn PROPERTIES IMPORTED_LOCATION "${MUSA_DNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MUSA_INCLUDE_DIRS}" INTERFACE_LINK_LIBRARIES MUSA::musart)
endif()
message(STATUS "MUSA: ${MUSA_HOME} (runtime ${MUSA_RUNTIME_LIBRARY}, muDNN ${MUSA_DNN_LIBRARY}, "
               "emulator: ${MUSA_IS_EMULATOR})")
