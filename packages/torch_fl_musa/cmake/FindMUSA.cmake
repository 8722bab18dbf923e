# FindMUSA: Moore Threads' MUSA SDK (the MUSA runtime + the muDNN operator library).
#
#   find_package(MUSA REQUIRED)
#
# Looks under MUSA_HOME (CMake variable, else environment, else /usr/local/musa): include/ for
# musa_runtime_api.h and mudnn.h, lib/ or lib64/ for libmusart.so and libmudnn.so
# (shared_cmake/TorchFlSdk.cmake). Defines MUSA_FOUND, MUSA_HOME, MUSA_{RUNTIME,DNN}_INCLUDE_DIR,
# MUSA_INCLUDE_DIRS, MUSA_RUNTIME_LIBRARY, MUSA_DNN_LIBRARY, MUSA_IS_EMULATOR (the torch-fl
# emulator's musa_emulator.h is there) and imported targets MUSA::musart, MUSA::mudnn.
include_guard(GLOBAL)
include(TorchFlSdk)

torch_fl_find_sdk(MUSA
  PRODUCT "MUSA SDK"
  HOME MUSA_HOME
  ENV MUSA_HOME
  DEFAULT "/usr/local/musa"
  HEADERS RUNTIME musa_runtime_api.h DNN mudnn.h
  LIBRARIES RUNTIME musart DNN mudnn
  EMULATOR_HEADER musa_emulator.h
  PACKAGE musa)
if(MUSA_FOUND)
  set_property(TARGET MUSA::mudnn PROPERTY INTERFACE_LINK_LIBRARIES MUSA::musart)
endif()
