# Common settings for every torch-fl native target: hidden visibility, rpath
# to torch's lib dir and to the package dir, warnings.
include_guard(GLOBAL)

function(torch_fl_target_defaults target)
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON
    BUILD_RPATH_USE_ORIGIN ON
    INSTALL_RPATH "$ORIGIN;$ORIGIN/../torch/lib")
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()
