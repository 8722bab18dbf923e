// A vendor runtime's default stream per device: made on first use (with that
// device current, by the runtime's own stream constructor) and kept for the
// process, so runtime.h's NULL stream has one SDK stream behind it.
#pragma once

#include <torch_fl/runtime.h>

#include <mutex>
#include <vector>

namespace torch_fl::kit {

template <class Stream>
class DefaultStreams {
 public:
  // Forgets every stream and sizes the table for `count` devices (init).
  void reset(int count) {
    std::lock_guard<std::mutex> lock(mutex_);
    streams_.assign(count > 0 ? count : 0, nullptr);
  }
  bool has_device(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return device >= 0 && device < static_cast<int>(streams_.size());
  }
  // The default stream of `device` (which has_device), made by
  // `create(device, Stream** out) -> tfl_status` the first time.
  template <class Create>
  tfl_status get(int device, Stream** out, Create&& create) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (device < 0 || device >= static_cast<int>(streams_.size())) return TFL_ERROR_INVALID_DEVICE;
    Stream*& slot = streams_[device];
    if (slot == nullptr) {
      if (tfl_status st = create(device, &slot)) return st;
    }
    *out = slot;
    return TFL_OK;
  }

 private:
  std::mutex mutex_;
  std::vector<Stream*> streams_;
};

}  // namespace torch_fl::kit
