# Finding a native vendor's SDK, real or the torch-fl emulator of it, for the package's Find
# module (packages/<v>/cmake/Find<Name>.cmake): one search, one error, one set of results.
#
#   torch_fl_find_sdk(<Name>
#     PRODUCT <text>                  # "CANN toolkit", in messages
#     HOME <var>                      # the CMake variable naming the install (CANN_HOME)
#     ENV <vars...>                   # environment variables tried in order when <var> is unset
#     DEFAULT <dir>                   # else this
#     HEADERS <KEY> <path> [...]      # <home>/include[/<sub>]/<path>
#     [INCLUDE_SUBDIRS <sub>...]      # include/ subdirectories some installs use
#     LIBRARIES <KEY> <name> [...]    # <home>/lib64 or lib/lib<name>.so
#     [FALLBACK_LIB_DIRS <dir>...]    # where some installs put a library outside <home>
#     EMULATOR_HEADER <file>          # in the first header's directory only in the emulator
#     PACKAGE <name>)                 # the vendor ("gcu"): its emulator's build instructions
#
# Sets, in the caller's scope: <var> (the install searched), <Name>_FOUND,
# <Name>_<KEY>_INCLUDE_DIR and <Name>_INCLUDE_DIRS, <Name>_<KEY>_LIBRARY, <Name>_IS_EMULATOR,
# and an imported target <Name>::<name> per library carrying every include directory (the Find
# module adds the links between them). A missing piece is a FATAL_ERROR under REQUIRED (else a
# warning) that names what is missing, where it was looked for, the variable to set, and how to
# build and use the emulator that ships with the package.
include_guard(GLOBAL)

# The keys and the values of a KEY VALUE [KEY VALUE ...] list, as two lists.
function(_torch_fl_sdk_pairs pairs keys_out values_out)
  set(_keys "")
  set(_values "")
  set(_is_key TRUE)
  foreach(_item IN LISTS pairs)
    if(_is_key)
      list(APPEND _keys "${_item}")
      set(_is_key FALSE)
    else()
      list(APPEND _values "${_item}")
      set(_is_key TRUE)
    endif()
  endforeach()
  set(${keys_out} "${_keys}" PARENT_SCOPE)
  set(${values_out} "${_values}" PARENT_SCOPE)
endfunction()

macro(torch_fl_find_sdk name)
  cmake_parse_arguments(_sdk "" "PRODUCT;HOME;DEFAULT;EMULATOR_HEADER;PACKAGE"
    "ENV;HEADERS;INCLUDE_SUBDIRS;LIBRARIES;FALLBACK_LIB_DIRS" ${ARGN})
  if(NOT ${_sdk_HOME})
    foreach(_sdk_var ${_sdk_ENV})
      if(DEFINED ENV{${_sdk_var}} AND NOT "$ENV{${_sdk_var}}" STREQUAL "")
        set(${_sdk_HOME} "$ENV{${_sdk_var}}")
        break()
      endif()
    endforeach()
  endif()
  if(NOT ${_sdk_HOME})
    set(${_sdk_HOME} "${_sdk_DEFAULT}")
  endif()
  set(_sdk_home "${${_sdk_HOME}}")

  set(_sdk_missing "")
  set(_sdk_looked "")
  set(${name}_INCLUDE_DIRS "")
  set(_sdk_include_paths "${_sdk_home}/include")
  foreach(_sdk_sub ${_sdk_INCLUDE_SUBDIRS})
    list(APPEND _sdk_include_paths "${_sdk_home}/include/${_sdk_sub}")
  endforeach()
  set(_sdk_first_include "")
  _torch_fl_sdk_pairs("${_sdk_HEADERS}" _sdk_header_keys _sdk_header_paths)
  foreach(_sdk_key _sdk_path IN ZIP_LISTS _sdk_header_keys _sdk_header_paths)
    find_path(${name}_${_sdk_key}_INCLUDE_DIR "${_sdk_path}" PATHS ${_sdk_include_paths}
      NO_DEFAULT_PATH)
    list(APPEND _sdk_looked "include/${_sdk_path}")
    if(${name}_${_sdk_key}_INCLUDE_DIR)
      list(APPEND ${name}_INCLUDE_DIRS "${${name}_${_sdk_key}_INCLUDE_DIR}")
      if(NOT _sdk_first_include)
        set(_sdk_first_include "${${name}_${_sdk_key}_INCLUDE_DIR}")
      endif()
    else()
      list(APPEND _sdk_missing "${name}_${_sdk_key}_INCLUDE_DIR")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES ${name}_INCLUDE_DIRS)

  _torch_fl_sdk_pairs("${_sdk_LIBRARIES}" _sdk_lib_keys _sdk_lib_names)
  foreach(_sdk_key _sdk_lib IN ZIP_LISTS _sdk_lib_keys _sdk_lib_names)
    find_library(${name}_${_sdk_key}_LIBRARY ${_sdk_lib}
      PATHS "${_sdk_home}/lib64" "${_sdk_home}/lib" NO_DEFAULT_PATH)
    if(NOT ${name}_${_sdk_key}_LIBRARY AND _sdk_FALLBACK_LIB_DIRS)
      find_library(${name}_${_sdk_key}_LIBRARY ${_sdk_lib} PATHS ${_sdk_FALLBACK_LIB_DIRS}
        NO_DEFAULT_PATH)
    endif()
    list(APPEND _sdk_looked "lib[64]/lib${_sdk_lib}.so")
    if(NOT ${name}_${_sdk_key}_LIBRARY)
      list(APPEND _sdk_missing "${name}_${_sdk_key}_LIBRARY")
    endif()
  endforeach()

  list(GET _sdk_ENV 0 _sdk_env)
  if(_sdk_missing)
    set(${name}_FOUND FALSE)
    string(REPLACE ";" ", " _sdk_missing "${_sdk_missing}")
    string(REPLACE ";" ", " _sdk_looked "${_sdk_looked}")
    set(_sdk_emu "packages/torch_fl_${_sdk_PACKAGE}/emulator")
    list(LENGTH _sdk_ENV _sdk_n)
    string(REPLACE ";" " and " _sdk_unset "${_sdk_ENV}")
    if(_sdk_n GREATER 1)
      string(APPEND _sdk_unset " are unset")
    else()
      string(APPEND _sdk_unset " is unset")
    endif()
    # One string (string(CONCAT)): set() with several arguments would make a list, and the
    # message would show its `;` separators.
    string(CONCAT _sdk_msg
      "${_sdk_PRODUCT} not found under ${_sdk_HOME}=${_sdk_home} (missing: ${_sdk_missing}; "
      "looked for ${_sdk_looked}).\n"
      "Point ${_sdk_env} at an install (export ${_sdk_env}=/path, or -D${_sdk_HOME}=...), or build "
      "the emulator that ships with torch-fl-${_sdk_PACKAGE} and use it:\n"
      "  cmake -S ${_sdk_emu} -B ${_sdk_emu}/build -DCMAKE_INSTALL_PREFIX=$PWD/${_sdk_emu}/prefix\n"
      "  cmake --build ${_sdk_emu}/build && cmake --install ${_sdk_emu}/build\n"
      "  export ${_sdk_env}=$PWD/${_sdk_emu}/prefix\n"
      "(`nox -s build-${_sdk_PACKAGE}` does exactly this when ${_sdk_unset}).")
    if(${name}_FIND_REQUIRED)
      message(FATAL_ERROR "${_sdk_msg}")
    elseif(NOT ${name}_FIND_QUIETLY)
      message(WARNING "${_sdk_msg}")
    endif()
  else()
    set(${name}_FOUND TRUE)
    if(EXISTS "${_sdk_first_include}/${_sdk_EMULATOR_HEADER}")
      set(${name}_IS_EMULATOR TRUE)
    else()
      set(${name}_IS_EMULATOR FALSE)
    endif()
    foreach(_sdk_key _sdk_lib IN ZIP_LISTS _sdk_lib_keys _sdk_lib_names)
      if(NOT TARGET ${name}::${_sdk_lib})
        add_library(${name}::${_sdk_lib} SHARED IMPORTED)
        set_target_properties(${name}::${_sdk_lib} PROPERTIES
          IMPORTED_LOCATION "${${name}_${_sdk_key}_LIBRARY}"
          INTERFACE_INCLUDE_DIRECTORIES "${${name}_INCLUDE_DIRS}")
      endif()
    endforeach()
    message(STATUS "${_sdk_PRODUCT}: ${_sdk_home} (emulator: ${${name}_IS_EMULATOR})")
  endif()
endmacro()
