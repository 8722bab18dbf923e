# The emulator framework: device-scoped memory, streams, events, live handles, the call ledger
# (counters, injected faults, contract violations), the test controls every SDK emulator
# exports, a runtime of CUDA's shape, communicators over shared memory and collective libraries
# of NCCL's shape over them. Source only, never part of a wheel: an emulator's CMake project
# includes this file by its relative path and links `emu_kit` into its runtime library.
include_guard(GLOBAL)
find_package(Threads REQUIRED)
set(_emu_kit_dir "${CMAKE_CURRENT_LIST_DIR}")
add_library(emu_kit STATIC
  "${_emu_kit_dir}/src/ledger.cpp"
  "${_emu_kit_dir}/src/memory.cpp"
  "${_emu_kit_dir}/src/stream.cpp"
  "${_emu_kit_dir}/src/event.cpp"
  # The CUDA-shaped runtime the gcu and musa emulators wrap (emu_kit/cuda_style.h).
  "${_emu_kit_dir}/src/cuda_style.cpp"
  "${_emu_kit_dir}/src/cuda_style_memory.cpp"
  "${_emu_kit_dir}/src/cuda_style_sync.cpp"
  "${_emu_kit_dir}/src/cuda_style_graph.cpp"
  # Stream capture into graphs, SDK-neutral (emu_kit/capture.h).
  "${_emu_kit_dir}/src/capture.cpp"
  # The shared-memory communicator engine (sim's collectives and the SDK emulators' HCCL/ECCL/MCCL).
  "${_emu_kit_dir}/src/comm.cpp"
  "${_emu_kit_dir}/src/comm_ops.cpp"
  "${_emu_kit_dir}/src/comm_reduce.cpp"
  "${_emu_kit_dir}/src/comm_split.cpp"
  # Collective libraries of NCCL's shape over that engine (the gcu and musa emulators' ECCL, MCCL).
  "${_emu_kit_dir}/src/nccl_style.cpp")
# torch_fl/collective.h (statuses, dtypes, reductions of the engine's operations).
target_include_directories(emu_kit PUBLIC "${_emu_kit_dir}/include" "${_emu_kit_dir}/../include")
target_link_libraries(emu_kit PUBLIC Threads::Threads)
target_compile_features(emu_kit PUBLIC cxx_std_17)
# Linked into shared libraries whose exports are only their SDK's (and control) functions.
set_target_properties(emu_kit PROPERTIES POSITION_INDEPENDENT_CODE ON
  CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
