// The SDK stream behind a flagos stream, for a vendor's kernels library: the
// native_stream of its own runtime's table (runtime ABI v1.2), looked up once.
// The kernels library links the package's runtime library, whose
// tfl_runtime_get this resolves to. Plain C++ and runtime.h: no torch.
#pragma once

#include <torch_fl/runtime.h>

extern "C" const tfl_runtime_v1* tfl_runtime_get(uint32_t abi_version);

namespace torch_fl::kit {

// The SDK handle (topsStream_t, aclrtStream, ...) behind `stream` of `device`
// (NULL: its default stream). On failure *error is the runtime's message.
inline tfl_status native_stream(tfl_stream stream, int device, void** out, const char** error) {
  static const tfl_runtime_v1* const rt = tfl_runtime_get(TFL_RUNTIME_ABI_VERSION);
  if (rt == nullptr || !TFL_RUNTIME_HAS(rt, native_stream)) {
    *error = "the package's runtime library has no native_stream (runtime ABI v1.2)";
    return TFL_ERROR_NOT_SUPPORTED;
  }
  const tfl_status st = rt->native_stream(stream, device, out);
  if (st != TFL_OK) *error = rt->last_error();
  return st;
}

}  // namespace torch_fl::kit
