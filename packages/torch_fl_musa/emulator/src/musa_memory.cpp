// Device memory in each GPU's unmapped address range, pinned host memory, pointer attributes.
#include "emu_kit/cuda_style_api.h"
#include "musa_state.h"

using musa_emu::R;

EMU_KIT_CUDA_MEMORY_API(musa, R(), musaHostAlloc, musaFreeHost)

EMU_KIT_EXPORT musaError_t musaPointerGetAttributes(struct musaPointerAttributes* attributes,
                                                    const void* ptr) {
  emu_kit::PointerInfo i;
  const int e = R().pointer_attributes("musaPointerGetAttributes", ptr, attributes ? &i : nullptr);
  if (e == musaSuccess)
    *attributes = musaPointerAttributes{static_cast<musaMemoryType>(i.type), i.device,
                                        i.device_pointer, i.host_pointer};
  return static_cast<musaError_t>(e);
}
