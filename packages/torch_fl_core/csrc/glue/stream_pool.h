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

// Where flagos streams come from, chosen once when the runtime is activated:
// the runtime's own streams (below), or on the delegate runtime the mirrored
// backend's streams (glue/mirror/mirror_streams.cpp), so that every producer
// on a device shares one stream order. Devices passed in are resolved (>= 0).
class StreamModel {
 public:
  virtual ~StreamModel() = default;
  virtual tfl_stream native(const c10::Stream& stream) const = 0;
  virtual c10::Stream default_stream(c10::DeviceIndex device) const = 0;
  virtual c10::Stream from_pool(c10::DeviceIndex device, bool high_priority) const = 0;
  virtual c10::Stream current(c10::DeviceIndex device) const = 0;
  virtual void set_current(const c10::Stream& stream) const = 0;
  // What DeviceGuardImpl::getStreamNativeHandle reports (torch >= 2.11).
  virtual void* native_handle(const c10::Stream& stream) const = 0;
};
// Installs `model` (process lifetime) in place of the runtime's streams; called
// once at activation, before the runtime is published.
void install_stream_model(const StreamModel* model);

// The flagos stream `device` and `id` name.
c10::Stream make_stream(c10::DeviceIndex device, c10::StreamId id);

tfl_stream native_stream(const c10::Stream& stream);
c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream stream_from_pool(c10::DeviceIndex device, bool high_priority = false);
// The calling thread's current stream on `device` (-1: current device).
c10::Stream current_stream(c10::DeviceIndex device = -1);
// Sets the calling thread's current stream for the stream's device.
void set_current_stream(const c10::Stream& stream);
void* stream_native_handle(const c10::Stream& stream);

}  // namespace torch_fl
