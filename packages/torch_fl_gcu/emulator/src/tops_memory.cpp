// Device memory in each card's unmapped address range, pinned host memory, pointer attributes.
#include "emu_kit/cuda_style_api.h"
#include "tops_state.h"

using tops_emu::S;

EMU_KIT_CUDA_MEMORY_API(tops, S(), topsHostMalloc, topsHostFree)

// Another card's pointer, or host memory topsHostMalloc did not hand out: topsErrorInvalidValue.
EMU_API topsError_t topsPointerGetAttributes(topsPointerAttribute_t* attr, const void* ptr) {
  emu_kit::PointerInfo i;
  const int e = S().pointer_attributes("topsPointerGetAttributes", ptr, attr ? &i : nullptr);
  if (e == topsSuccess)
    *attr = topsPointerAttribute_t{i.type, i.device, i.device_pointer, i.host_pointer, 0, 0};
  return static_cast<topsError_t>(e);
}
