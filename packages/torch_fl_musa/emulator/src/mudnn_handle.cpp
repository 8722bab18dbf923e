// Handle: an operator's device and stream.
#include "mudnn_op.h"

namespace musa {
namespace dnn {

Handle::Handle(int device) : device_(device < 0 ? musa_emu::current_device() : device) {}

Handle::~Handle() = default;

Status Handle::SetStream(musaStream_t stream) {
  // nullptr is the default stream of whichever device is current at Run, which Run requires to
  // be the handle's.
  if (stream != nullptr && musa_emu::stream_device(stream) != device_)
    return Status::INVALID_PARAMETER;
  stream_ = stream;
  return Status::SUCCESS;
}

musaStream_t Handle::GetStream() const { return stream_; }

int Handle::GetDeviceId() const { return device_; }

}  // namespace dnn
}  // namespace musa
