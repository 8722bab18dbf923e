// torch.ops.torch_fl._native_stream(device): the SDK's stream handle (as an
// integer) behind the calling thread's current flagos stream on `device`, from
// the runtime table's native_stream (runtime ABI v1.2). What a launcher that
// calls the SDK directly (Triton: FlagGems on a vendor's backend) enqueues on,
// so every producer shares the flagos stream (docs/routing.md, "Producers on
// one stream"). One op for every vendor: each runtime maps its own streams.
#include <torch/library.h>

#include <cstdint>
#include <limits>

#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

namespace torch_fl {
namespace {

int64_t native_stream_op(int64_t device) {
  TORCH_CHECK(device >= 0 && device <= std::numeric_limits<c10::DeviceIndex>::max(),
              "torch.ops.torch_fl._native_stream: invalid device ", device);
  const auto index = static_cast<c10::DeviceIndex>(device);
  check_device_index(index);
  const tfl_runtime_v1& rt = runtime();
  TORCH_CHECK(TFL_RUNTIME_HAS(&rt, native_stream),
              "torch.ops.torch_fl._native_stream: flagos:", device,
              " has no SDK stream handle to give: runtime '", rt.name,
              "' does not implement native_stream (runtime ABI v1.2; its table is ", rt.struct_size,
              " bytes). Rebuild the vendor package against this torch-fl-core.");
  const tfl_stream stream = torch_fl::native_stream(current_stream(index));
  void* handle = nullptr;
  const tfl_status st = rt.native_stream(stream, static_cast<int>(device), &handle);
  if (st != TFL_OK) throw_runtime_error(st, "native_stream", index);
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(handle));
}

}  // namespace
}  // namespace torch_fl

TORCH_LIBRARY_FRAGMENT(torch_fl, m) {
  m.def("_native_stream(int device) -> int", &torch_fl::native_stream_op);
}
