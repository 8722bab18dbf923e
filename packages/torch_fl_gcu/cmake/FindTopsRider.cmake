# FindTopsRider: Enflame's TopsRider SDK (topsrt runtime + topsaten operator library).
#
#   find_package(TopsRider REQUIRED)
#
# Looks under TOPS_HOME (CMake variable, else environment, else /opt/tops), in the layouts
# installs use: include/ or include/tops/, include/gcu/ for the headers, lib/, lib64/ (and /usr/lib
# for libtopsaten.so, where some installs put it) (shared_cmake/TorchFlSdk.cmake). Defines
# TopsRider_FOUND, TOPS_HOME, TopsRider_{RUNTIME,ATEN}_INCLUDE_DIR, TopsRider_INCLUDE_DIRS,
# TopsRider_RUNTIME_LIBRARY (libtopsrt.so), TopsRider_ATEN_LIBRARY (libtopsaten.so),
# TopsRider_IS_EMULATOR (the torch-fl emulator's tops_emulator.h is there) and imported targets
# TopsRider::topsrt, TopsRider::topsaten.
include_guard(GLOBAL)
include(TorchFlSdk)

torch_fl_find_sdk(TopsRider
  PRODUCT "TopsRider SDK"
  HOME TOPS_HOME
  ENV TOPS_HOME
  DEFAULT "/opt/tops"
  HEADERS RUNTIME tops_runtime_api.h ATEN topsaten/topsaten.h
  INCLUDE_SUBDIRS tops gcu
  LIBRARIES RUNTIME topsrt ATEN topsaten
  FALLBACK_LIB_DIRS /usr/lib
  EMULATOR_HEADER tops_emulator.h
  PACKAGE gcu)
if(TopsRider_FOUND)
  set_property(TARGET TopsRider::topsaten PROPERTY INTERFACE_LINK_LIBRARIES TopsRider::topsrt)
endif()
