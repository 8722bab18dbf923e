# FindCANN: Huawei's CANN toolkit (aclrt runtime, nnopbase, the ACLNN operator library).
#
#   find_package(CANN REQUIRED)
#
# Looks under CANN_HOME (CMake variable), else the environment's ASCEND_TOOLKIT_HOME, else
# ASCEND_HOME, else /usr/local/Ascend/ascend-toolkit/latest, for include/acl/acl.h,
# include/aclnn/acl_meta.h and lib64/ (or lib/) libascendcl.so, libnnopbase.so, libopapi.so.
# Defines
#   CANN_FOUND, CANN_HOME, CANN_INCLUDE_DIR, CANN_ASCENDCL_LIBRARY, CANN_NNOPBASE_LIBRARY, CANN_HCCL_LIBRARY,
#   CANN_OPAPI_LIBRARY, CANN_IS_EMULATOR (the torch-fl emulator's ascend_emulator.h is there)
# and imported targets CANN::ascendcl, CANN::nnopbase, CANN::opapi.
include_guard(GLOBAL)

if(NOT CANN_HOME)
  foreach(_var ASCEND_TOOLKIT_HOME ASCEND_HOME)
    if(DEFINED ENV{${_var}} AND NOT "$ENV{${_var}}" STREQUAL "")
      set(CANN_HOME "$ENV{${_var}}")
      break()
    endif()
  endforeach()
endif()
if(NOT CANN_HOME)
  set(CANN_HOME "/usr/local/Ascend/ascend-toolkit/latest")
endif()

find_path(CANN_INCLUDE_DIR acl/acl.h PATHS "${CANN_HOME}/include" NO_DEFAULT_PATH)
find_path(CANN_ACLNN_INCLUDE_DIR aclnn/acl_meta.h PATHS "${CANN_HOME}/include" NO_DEFAULT_PATH)
foreach(_lib ascendcl nnopbase opapi hccl)
  string(TOUPPER "${_lib}" _LIB)
  find_library(CANN_${_LIB}_LIBRARY ${_lib}
    PATHS "${CANN_HOME}/lib64" "${CANN_HOME}/lib" NO_DEFAULT_PATH)
endforeach()

set(_cann_missing "")
foreach(_v CANN_INCLUDE_DIR CANN_ACLNN_INCLUDE_DIR CANN_ASCENDCL_LIBRARY CANN_NNOPBASE_LIBRARY
           CANN_OPAPI_LIBRARY CANN_HCCL_LIBRARY)
  if(NOT ${_v})
    list(APPEND _cann_missing "${_v}")
  endif()
endforeach()

if(_cann_missing)
  set(CANN_FOUND FALSE)
  string(REPLACE ";" ", " _cann_missing "${_cann_missing}")
  string(CONCAT _cann_msg
    "CANN toolkit not found under ${CANN_HOME} (missing: ${_cann_missing}; looked for "
    "include/acl/acl.h, include/aclnn/acl_meta.h, lib64/libascendcl.so, lib64/libnnopbase.so, "
    "lib64/libopapi.so, lib64/libhccl.so).\n"
    "Point ASCEND_TOOLKIT_HOME at a CANN toolkit (source /usr/local/Ascend/ascend-toolkit/set_env.sh, "
    "or -DCANN_HOME=...), or build the CANN emulator that ships with torch-fl-ascend and use it:\n"
    "  cmake -S packages/torch_fl_ascend/emulator -B packages/torch_fl_ascend/emulator/build "
    "-DCMAKE_INSTALL_PREFIX=$PWD/packages/torch_fl_ascend/emulator/prefix\n"
    "  cmake --build packages/torch_fl_ascend/emulator/build && "
    "cmake --install packages/torch_fl_ascend/emulator/build\n"
    "  export ASCEND_TOOLKIT_HOME=$PWD/packages/torch_fl_ascend/emulator/prefix\n"
    "(`nox -s build-ascend` does exactly this when ASCEND_TOOLKIT_HOME and ASCEND_HOME are unset).")
  if(CANN_FIND_REQUIRED)
    message(FATAL_ERROR "${_cann_msg}")
  elseif(NOT CANN_FIND_QUIETLY)
    message(WARNING "${_cann_msg}")
  endif()
  return()
endif()

set(CANN_FOUND TRUE)
if(EXISTS "${CANN_INCLUDE_DIR}/ascend_emulator.h")
  set(CANN_IS_EMULATOR TRUE)
else()
  set(CANN_IS_EMULATOR FALSE)
endif()

if(NOT TARGET CANN::ascendcl)
  add_library(CANN::ascendcl SHARED IMPORTED)
  set_target_properties(CANN::ascendcl PROPERTIES
    IMPORTED_LOCATION "${CANN_ASCENDCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CANN_INCLUDE_DIR}")
  add_library(CANN::nnopbase SHARED IMPORTED)
  set_target_properties(CANN::nnopbase PROPERTIES
    IMPORTED_LOCATION "${CANN_NNOPBASE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CANN_ACLNN_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES CANN::ascendcl)
  add_library(CANN::hccl SHARED IMPORTED)
  set_target_properties(CANN::hccl PROPERTIES
    IMPORTED_LOCATION "${CANN_HCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CANN_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES CANN::ascendcl)
  add_library(CANN::opapi SHARED IMPORTED)
  set_target_properties(CANN::opapi PROPERTIES
    IMPORTED_LOCATION "${CANN_OPAPI_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CANN_ACLNN_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES CANN::nnopbase)
endif()
message(STATUS "CANN: ${CANN_HOME} (ascendcl ${CANN_ASCENDCL_LIBRARY}, opapi ${CANN_OPAPI_LIBRARY}, "
               "emulator: ${CANN_IS_EMULATOR})")
