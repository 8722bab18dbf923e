// Cards: count, the current one, synchronisation, memory figures.
#include "tops_state.h"

using namespace tops_emu;

EMU_API topsError_t topsGetDeviceCount(int* count) {
  ENTER("topsGetDeviceCount");
  if (!count) return fail(topsErrorInvalidValue);
  *count = S().count;
  return S().count > 0 ? topsSuccess : fail(topsErrorNoDevice);
}

EMU_API topsError_t topsGetDevice(int* device) {
  ENTER("topsGetDevice");
  if (!device) return fail(topsErrorInvalidValue);
  if (S().count == 0) return fail(topsErrorNoDevice);
  *device = t_device;
  return topsSuccess;
}

EMU_API topsError_t topsSetDevice(int device) {
  ENTER("topsSetDevice");
  if (!valid_card(device)) return fail(topsErrorInvalidDevice);
  t_device = device;
  return topsSuccess;
}

EMU_API topsError_t topsDeviceSynchronize(void) {
  ENTER("topsDeviceSynchronize");
  if (!valid_card(t_device)) return fail(topsErrorNoDevice);
  for (const auto& s : S().streams.all()) {
    if (s->device() == t_device) drain_all(s.get());
  }
  return topsSuccess;
}

EMU_API topsError_t topsMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  ENTER("topsMemGetInfo");
  if (!free_bytes || !total_bytes) return fail(topsErrorInvalidValue);
  if (!valid_card(t_device)) return fail(topsErrorNoDevice);
  const emu_kit::DeviceMemory& m = S().cards[static_cast<size_t>(t_device)].memory;
  *free_bytes = m.available();
  *total_bytes = m.capacity;
  return topsSuccess;
}
