// libmusart.so internals (not SDK API): emulated GPUs in host memory over the emulator
// framework's CUDA-style runtime (emu_kit/cuda_style.h says the contract it enforces). Streams
// are worker streams: queued work runs later on the stream's thread, so work that outlives its
// memory fails with musaErrorIllegalAddress at the next synchronisation.
#pragma once

#include "emu_kit/cuda_style.h"
#include "musa_runtime_api.h"

struct MUstream_st : emu_kit::CudaStream {
  using CudaStream::CudaStream;
};

struct MUevent_st : emu_kit::Event {
  using Event::Event;
};

namespace musa_emu {

// The runtime, from MUSA_EMU_DEVICE_COUNT / MUSA_EMU_MEMORY_MB at first use.
emu_kit::CudaRuntime& R();

}  // namespace musa_emu
