# FindTopsRider: Enflame's TopsRider SDK (topsrt runtime + topsaten operator library).
#
#   find_package(TopsRider REQUIRED)
#
# Looks under TOPS_HOME (CMake variable, else environment, else /opt/tops), in the layouts
# installs use: include/ or include/gcu/ for topsaten/topsaten.h, lib/, lib64/ (and /usr/lib
# for libtopsaten.so, where some installs put it). Defines
#   TopsRider_FOUND, TopsRider_HOME, TopsRider_INCLUDE_DIRS,
#   TopsRider_RUNTIME_LIBRARY (libtopsrt.so), TopsRider_ATEN_LIBRARY (libtopsaten.so),
#   TopsRider_LIBRARY_DIRS, TopsRider_IS_EMULATOR (the torch-fl emulator's tops_emulator.h is there)
# and imported targets TopsRider::topsrt, TopsRider::topsaten.
include_guard(GLOBAL)

if(NOT TOPS_HOME)
  if(DEFINED ENV{TOPS_HOME} AND NOT "$ENV{TOPS_HOME}" STREQUAL "")
    set(TOPS_HOME "$ENV{TOPS_HOME}")
  else()
    set(TOPS_HOME "/opt/tops")
  endif()
endif()
set(TopsRider_HOME "${TOPS_HOME}")

find_path(TopsRider_RUNTIME_INCLUDE_DIR tops_runtime_api.h
  PATHS "${TOPS_HOME}/include" "${TOPS_HOME}/include/tops" NO_DEFAULT_PATH)
find_path(TopsRider_ATEN_INCLUDE_DIR topsaten/topsaten.h
  PATHS "${TOPS_HOME}/include" "${TOPS_HOME}/include/gcu" NO_DEFAULT_PATH)
find_library(TopsRider_RUNTIME_LIBRARY topsrt
  PATHS "${TOPS_HOME}/lib" "${TOPS_HOME}/lib64" NO_DEFAULT_PATH)
find_library(TopsRider_ATEN_LIBRARY topsaten
  PATHS "${TOPS_HOME}/lib" "${TOPS_HOME}/lib64" NO_DEFAULT_PATH)
if(NOT TopsRider_ATEN_LIBRARY AND EXISTS "/usr/lib/libtopsaten.so")
  set(TopsRider_ATEN_LIBRARY "/usr/lib/libtopsaten.so" CACHE FILEPATH "libtopsaten.so" FORCE)
endif()

set(_tops_missing "")
foreach(_v TopsRider_RUNTIME_INCLUDE_DIR TopsRider_ATEN_INCLUDE_DIR TopsRider_RUNTIME_LIBRARY
           TopsRider_ATEN_LIBRARY)
  if(NOT ${_v})
    list(APPEND _tops_missing "${_v}")
  endif()
endforeach()

if(_tops_missing)
  set(TopsRider_FOUND FALSE)
  string(REPLACE ";" ", " _tops_missing "${_tops_missing}")
  # One string (string(CONCAT)): set() with several arguments would make a list, and the message
  # would show its `;` separators.
  string(CONCAT _tops_msg
    "TopsRider SDK not found under TOPS_HOME=${TOPS_HOME} (missing: ${_tops_missing}; looked for "
    "include/tops_runtime_api.h, include[/gcu]/topsaten/topsaten.h, lib[64]/libtopsrt.so, "
    "lib[64]/libtopsaten.so).\n"
    "Point TOPS_HOME at an SDK install (export TOPS_HOME=/path/to/tops, or -DTOPS_HOME=...), or "
    "build the TopsRider emulator that ships with torch-fl-gcu and use it:\n"
    "  cmake -S packages/torch_fl_gcu/emulator -B packages/torch_fl_gcu/emulator/build "
    "-DCMAKE_INSTALL_PREFIX=$PWD/packages/torch_fl_gcu/emulator/prefix\n"
    "  cmake --build packages/torch_fl_gcu/emulator/build && "
    "cmake --install packages/torch_fl_gcu/emulator/build\n"
    "  export TOPS_HOME=$PWD/packages/torch_fl_gcu/emulator/prefix\n"
    "(`nox -s build-gcu` does exactly this when TOPS_HOME is unset).")
  if(TopsRider_FIND_REQUIRED)
    message(FATAL_ERROR "${_tops_msg}")
  elseif(NOT TopsRider_FIND_QUIETLY)
    message(WARNING "${_tops_msg}")
  endif()
  return()
endif()

set(TopsRider_FOUND TRUE)
set(TopsRider_INCLUDE_DIRS "${TopsRider_RUNTIME_INCLUDE_DIR}" "${TopsRider_ATEN_INCLUDE_DIR}")
list(REMOVE_DUPLICATES TopsRider_INCLUDE_DIRS)
get_filename_component(_tops_rt_dir "${TopsRider_RUNTIME_LIBRARY}" DIRECTORY)
get_filename_component(_tops_aten_dir "${TopsRider_ATEN_LIBRARY}" DIRECTORY)
set(TopsRider_LIBRARY_DIRS "${_tops_rt_dir}" "${_tops_aten_dir}")
list(REMOVE_DUPLICATES TopsRider_LIBRARY_DIRS)
if(EXISTS "${TopsRider_RUNTIME_INCLUDE_DIR}/tops_emulator.h")
  set(TopsRider_IS_EMULATOR TRUE)
else()
  set(TopsRider_IS_EMULATOR FALSE)
endif()

if(NOT TARGET TopsRider::topsrt)
  add_library(TopsRider::topsrt SHARED IMPORTED)
  set_target_properties(TopsRider::topsrt PROPERTIES
    IMPORTED_LOCATION "${TopsRider_RUNTIME_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${TopsRider_RUNTIME_INCLUDE_DIR}")
  add_library(TopsRider::topsaten SHARED IMPORTED)
  set_target_properties(TopsRider::topsaten PROPERTIES
    IMPORTED_LOCATION "${TopsRider_ATEN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${TopsRider_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES TopsRider::topsrt)
endif()
message(STATUS "TopsRider: ${TOPS_HOME} (runtime ${TopsRider_RUNTIME_LIBRARY}, "
               "topsaten ${TopsRider_ATEN_LIBRARY}, emulator: ${TopsRider_IS_EMULATOR})")
