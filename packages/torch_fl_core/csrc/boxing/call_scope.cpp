#include "boxing/call_scope.h"

#include "glue/stream_pool.h"

namespace torch_fl::boxing {

CallScope::CallScope(c10::DeviceIndex device, bool make_current, c10::DeviceType target,
                     bool host_results) {
  // A forked child's calls on its parent's tensors: the clear error, not the
  // mirrored driver's own (mirror-mode kernels never reach the runtime table).
  check_not_in_bad_fork();
  if (make_current) current_.emplace(device);
  if (target != c10::DeviceType::CPU) return;
  const c10::Stream stream = current_stream(device);
  TFL_CALL(device, stream_synchronize, native_stream(stream));
  // The stream id is passed on so allocations do not look it up again.
  if (host_results) results_.emplace(device, stream.id());
}

}  // namespace torch_fl::boxing
