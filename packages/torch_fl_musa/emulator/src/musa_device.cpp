// GPUs: count, the current one, synchronisation, memory figures, stream priorities.
#include "emu_kit/cuda_style_api.h"
#include "musa_state.h"

using musa_emu::R;

EMU_KIT_CUDA_DEVICE_API(musa, R())

EMU_KIT_EXPORT musaError_t musaDeviceGetStreamPriorityRange(int* leastPriority,
                                                            int* greatestPriority) {
  return static_cast<musaError_t>(R().stream_priority_range("musaDeviceGetStreamPriorityRange",
                                                            leastPriority, greatestPriority));
}
