// Streams: the framework's worker streams, one thread each; a default stream per GPU.
#include "emu_kit/cuda_style_api.h"
#include "musa_state.h"

using musa_emu::R;

EMU_KIT_CUDA_STREAM_API(musa, R())

// Priorities outside musaDeviceGetStreamPriorityRange are clamped into it, as CUDA does.
EMU_KIT_EXPORT musaError_t musaStreamCreateWithPriority(musaStream_t* stream, unsigned int flags,
                                                        int priority) {
  return static_cast<musaError_t>(
      emu_kit::create_stream(R(), "musaStreamCreateWithPriority", stream, flags, priority));
}

// Host functions run on the stream's worker, in order; recorded while the stream captures.
EMU_KIT_EXPORT musaError_t musaLaunchHostFunc(musaStream_t stream, musaHostFn_t fn,
                                              void* userData) {
  return static_cast<musaError_t>(R().launch_host_func("musaLaunchHostFunc", stream, fn, userData));
}
