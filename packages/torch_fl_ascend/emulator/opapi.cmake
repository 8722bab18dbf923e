# The op half of the CANN emulator, included by CMakeLists.txt:
#   libnnopbase.so  aclCreateTensor & friends, executors, the two-phase protocol (no torch)
#   libopapi.so     the aclnn ops, computed with libtorch CPU ATen on the emulated device memory
# libopapi.so links only libtorch_cpu / libc10 and carries an rpath to torch/lib, so it loads in
# any process whose Python has that torch.

# --- libnnopbase.so ---
add_library(nnopbase SHARED src/nnopbase_emu.cpp)
target_include_directories(nnopbase PUBLIC include PRIVATE src)
target_link_libraries(nnopbase PRIVATE ascendcl)
set_target_properties(nnopbase PROPERTIES CXX_VISIBILITY_PRESET hidden
  POSITION_INDEPENDENT_CODE ON BUILD_RPATH "$ORIGIN" INSTALL_RPATH "$ORIGIN")

# --- torch (headers, libtorch_cpu, libc10) from the Python that builds us ---
include("${CMAKE_CURRENT_LIST_DIR}/../../../shared_cmake/TorchFlTorch.cmake")

# --- libopapi.so ---
file(GLOB _emu_opapi_sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_LIST_DIR}/src/opapi_*.cpp")
add_library(opapi SHARED ${_emu_opapi_sources})
target_include_directories(opapi PRIVATE include src)
target_include_directories(opapi SYSTEM PRIVATE "${_tfl_torch_inc}" "${_tfl_torch_api_inc}")
target_compile_definitions(opapi PRIVATE _GLIBCXX_USE_CXX11_ABI=${_tfl_torch_cxx11_abi})
target_link_libraries(opapi PRIVATE nnopbase ascendcl "${_tfl_lib_torch_cpu}" "${_tfl_lib_c10}")
if(COMMAND torch_fl_precompile_torch_headers)
  torch_fl_precompile_torch_headers(opapi)
endif()
set_target_properties(opapi PROPERTIES CXX_STANDARD ${TORCH_FL_CXX_STANDARD}
  CXX_VISIBILITY_PRESET hidden POSITION_INDEPENDENT_CODE ON
  BUILD_RPATH "$ORIGIN;${TORCH_FL_TORCH_LIB_DIR}" INSTALL_RPATH "$ORIGIN;${TORCH_FL_TORCH_LIB_DIR}")

# Exports: every aclnn* entry point except the ASCEND_EMU_OMIT ones (exact names in `local`
# take precedence over the `aclnn*` pattern).
set(_emu_omit_syms "")
foreach(_op IN LISTS ASCEND_EMU_OMIT)
  string(APPEND _emu_omit_syms "    ${_op};\n    ${_op}GetWorkspaceSize;\n")
endforeach()
set(_emu_opapi_map "${CMAKE_CURRENT_BINARY_DIR}/opapi.map")
file(WRITE "${_emu_opapi_map}.in"
  "{\n  global:\n    aclnn*;\n  local:\n${_emu_omit_syms}    *;\n};\n")
configure_file("${_emu_opapi_map}.in" "${_emu_opapi_map}" COPYONLY)
target_link_options(opapi PRIVATE "-Wl,--version-script=${_emu_opapi_map}")
set_property(TARGET opapi APPEND PROPERTY LINK_DEPENDS "${_emu_opapi_map}")

install(TARGETS nnopbase opapi LIBRARY DESTINATION lib64)
install(DIRECTORY include/aclnn include/aclnnop DESTINATION include)
