# The build of a native vendor package: a runtime library over its SDK implementing core's
# runtime.h, and a kernels library generated from its ops table against the SDK's symbols.
#
#   torch_fl_vendor(<name>
#     RUNTIME_LIBRARIES <SDK targets the runtime links>
#     KERNEL_LIBRARIES <SDK targets the kernels link>
#     GENERATOR_ARGS <the SDK arguments of tools/gen_kernels.py (before --out)>
#     GENERATOR_DEPENDS <files whose change re-runs the generator (the SDK library)>
#     SDK_JSON <key> <value> [<key> <value> ...]
#     [COLLECTIVE_LIBRARIES <SDK targets the collective library links, if it links any>])
#
# Conventions (one package layout for every native vendor): the runtime is csrc/runtime/*.cpp
# (SDK + runtime.h, no torch), the kernels csrc/kernels/*.cpp plus what tools/gen_kernels.py
# writes, the collective library csrc/collective/*.cpp (SDK + collective.h, no torch: the
# `vendor` tier of torch.distributed); all install into
# torch_fl_<name>/lib with the generator's kernels.json, the sdk.json
# of SDK_JSON (where the SDK was at build time: information only, the SDK is located at run
# time) and _torch_build.py (the torch minor the kernels are built for).
# The collective library is built wherever csrc/collective/*.cpp exist: a dialect of the kit's
# library over the SDK's headers and COLLECTIVE_LIBRARIES (ascend's HCCL), or the kit's NCCL-style
# dialect, which opens the SDK's collective library at run time and links none (gcu's ECCL).
include_guard(GLOBAL)
include(TorchFlModule)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()

# runtime.h of the installed torch-fl-core (the ABI this runtime will be loaded by); the
# monorepo's copy when core is not installed in the build environment.
function(_torch_fl_vendor_runtime_header out label)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
      "import importlib.util, pathlib; s = importlib.util.find_spec('torch_fl'); print(next((p for p in (pathlib.Path(x) / 'include' for x in (s.submodule_search_locations or [])) if (p / 'torch_fl' / 'runtime.h').is_file()), '') if s else '')"
    OUTPUT_VARIABLE _include OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _include)
    set(_include "${CMAKE_CURRENT_SOURCE_DIR}/../torch_fl_core/include")
  endif()
  if(NOT EXISTS "${_include}/torch_fl/runtime.h")
    message(FATAL_ERROR "${label}: torch_fl/runtime.h not found; install torch-fl-core first")
  endif()
  message(STATUS "${label}: runtime ABI header from ${_include}")
  set(${out} "${_include}" PARENT_SCOPE)
endfunction()

# tools/gen_kernels.py at configure time, so its warnings (ops the SDK lacks) show in the build
# output and a changed SDK library re-runs it. It writes into a fresh directory whose files are
# then copied over the previous run's only where they differ (unchanged kernels are not
# recompiled) and a file it no longer writes is removed (no stale kernels after a rename).
function(_torch_fl_vendor_generate out label)
  set(_gen "${CMAKE_CURRENT_BINARY_DIR}/generated")
  set(_fresh "${CMAKE_CURRENT_BINARY_DIR}/generated.new")
  file(REMOVE_RECURSE "${_fresh}")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -E env TORCH_DEVICE_BACKEND_AUTOLOAD=0
            "${Python_EXECUTABLE}" "${CMAKE_CURRENT_SOURCE_DIR}/tools/gen_kernels.py"
            ${ARGN} --out "${_fresh}"
    RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${label}: kernel generation failed:\n${_err}")
  endif()
  string(REGEX MATCHALL "gen_kernels: warning: [^\n]*" _warnings "${_err}")
  foreach(_w IN LISTS _warnings)
    message(WARNING "${_w}")
  endforeach()
  string(REGEX MATCH "gen_kernels: [0-9]+ aten overloads[^\n]*" _summary "${_err}")
  message(STATUS "${_summary}")
  file(MAKE_DIRECTORY "${_gen}")
  file(GLOB _old RELATIVE "${_gen}" "${_gen}/*")
  file(GLOB _new RELATIVE "${_fresh}" "${_fresh}/*")
  foreach(_f IN LISTS _old)
    if(NOT _f IN_LIST _new)
      file(REMOVE "${_gen}/${_f}")
    endif()
  endforeach()
  foreach(_f IN LISTS _new)
    file(COPY_FILE "${_fresh}/${_f}" "${_gen}/${_f}" ONLY_IF_DIFFERENT)
  endforeach()
  file(REMOVE_RECURSE "${_fresh}")
  set(${out} "${_gen}" PARENT_SCOPE)
endfunction()

function(torch_fl_vendor name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG ""
    "" "RUNTIME_LIBRARIES;KERNEL_LIBRARIES;GENERATOR_ARGS;GENERATOR_DEPENDS;SDK_JSON;COLLECTIVE_LIBRARIES")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "torch_fl_vendor(${name}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  set(label "torch-fl-${name}")
  set(package "torch_fl_${name}")
  if(NOT Python_EXECUTABLE)
    find_package(Python 3.10 REQUIRED COMPONENTS Interpreter)
  endif()
  _torch_fl_vendor_runtime_header(core_include "${label}")

  # rpath: $ORIGIN-relative only, so the installed package can move. The kernels find the runtime
  # beside them and torch's libraries in site-packages/torch/lib. The SDK is never in the rpath:
  # it lives outside the wheel, wherever the user installed it, and the package's sdk module
  # loads its libraries first, at run time, so these libraries' DT_NEEDED entries find them
  # already loaded.
  set(runtime_rpath "$ORIGIN")
  set(kernels_rpath "$ORIGIN;$ORIGIN/../../torch/lib")

  # ---- the runtime table over the SDK: SDK + runtime.h only, no torch ----
  file(GLOB runtime_sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/csrc/runtime/*.cpp")
  add_library(${package}_runtime SHARED ${runtime_sources})
  target_include_directories(${package}_runtime PRIVATE "${core_include}")
  target_link_libraries(${package}_runtime PRIVATE ${ARG_RUNTIME_LIBRARIES})
  target_compile_features(${package}_runtime PRIVATE cxx_std_17)
  torch_fl_target_defaults(${package}_runtime)
  set_target_properties(${package}_runtime PROPERTIES INSTALL_RPATH "${runtime_rpath}")
  install(TARGETS ${package}_runtime LIBRARY DESTINATION ${package}/lib)

  # ---- the collective table over the SDK's collective library: no torch ----
  file(GLOB collective_sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/csrc/collective/*.cpp")
  if(collective_sources)
    add_library(${package}_collective SHARED ${collective_sources})
    target_include_directories(${package}_collective PRIVATE "${core_include}")
    target_link_libraries(${package}_collective PRIVATE ${ARG_COLLECTIVE_LIBRARIES} ${CMAKE_DL_LIBS})
    target_compile_features(${package}_collective PRIVATE cxx_std_17)
    torch_fl_target_defaults(${package}_collective)
    set_target_properties(${package}_collective PROPERTIES INSTALL_RPATH "${runtime_rpath}")
    install(TARGETS ${package}_collective LIBRARY DESTINATION ${package}/lib)
  endif()

  # ---- the kernels, generated from the ops table and the SDK's symbols ----
  include(TorchFlTorch)
  _torch_fl_vendor_generate(generated "${label}" ${ARG_GENERATOR_ARGS})
  # The vendor's ops table and its SDK's emission, and core's generator driver where the tools
  # find it in the monorepo (a change to either re-runs generation).
  file(GLOB generator_sources "${CMAKE_CURRENT_SOURCE_DIR}/tools/*.py"
       "${CMAKE_CURRENT_SOURCE_DIR}/../torch_fl_core/src/torch_fl/kit/*.py")
  set_property(DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
    ${ARG_GENERATOR_DEPENDS} ${generator_sources})
  file(GLOB kernel_sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/csrc/kernels/*.cpp")
  file(GLOB generated_sources "${generated}/*.cpp")
  add_library(${package}_kernels SHARED ${kernel_sources} ${generated_sources})
  target_include_directories(${package}_kernels PRIVATE
    "${CMAKE_CURRENT_SOURCE_DIR}/csrc/kernels" "${core_include}")
  target_link_libraries(${package}_kernels PRIVATE torch_fl::torch ${ARG_KERNEL_LIBRARIES}
                        ${package}_runtime)
  set_target_properties(${package}_kernels PROPERTIES CXX_STANDARD ${TORCH_FL_CXX_STANDARD})
  torch_fl_target_defaults(${package}_kernels)
  torch_fl_precompile_torch_headers(${package}_kernels)
  set_target_properties(${package}_kernels PROPERTIES INSTALL_RPATH "${kernels_rpath}")
  install(TARGETS ${package}_kernels LIBRARY DESTINATION ${package}/lib)
  install(FILES "${generated}/kernels.json" DESTINATION ${package}/lib)
  torch_fl_install_torch_build_info(${package})

  # Where the SDK was at build time (`python -m torch_fl_<name>`, the hint of the SDK-not-found
  # error): {"<key>": "<value>", ...}.
  set(fields "")
  set(pairs ${ARG_SDK_JSON})
  list(LENGTH pairs count)
  math(EXPR odd "${count} % 2")
  if(odd)
    message(FATAL_ERROR "torch_fl_vendor(${name}): SDK_JSON takes <key> <value> pairs")
  endif()
  while(pairs)
    list(POP_FRONT pairs key value)
    list(APPEND fields "\"${key}\": \"${value}\"")
  endwhile()
  list(JOIN fields ", " fields)
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/sdk.json" "{${fields}}\n")
  install(FILES "${CMAKE_CURRENT_BINARY_DIR}/sdk.json" DESTINATION ${package}/lib)
endfunction()
