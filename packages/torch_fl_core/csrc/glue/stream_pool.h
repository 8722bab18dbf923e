// c10::Stream <-> runtime stream handles, and the per-thread current stream.
//
// Stream ids: 0 is the device's default stream (the runtime's NULL stream);
// ids 1..kPoolSize are pooled streams created lazily on first use (like CUDA's
// stream pool), handed out round robin by getStreamFromGlobalPool/getNewStream.
#pragma once

#include <c10/core/Stream.h>
#include <torch_fl/runtime.h>

namespace torch_fl {

constexpr int kStreamPoolSize = 32;

tfl_stream native_stream(const c10::Stream& stream);
c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream stream_from_pool(c10::DeviceIndex device, bool high_priority = false);
// The calling thread's current stream on `device` (-1: current device).
c10::Stream current_stream(c10::DeviceIndex device = -1);
// Sets the calling thread's current stream for the stream's device.
void set_current_stream(const c10::Stream& stream);

}  // namespace torch_fl
