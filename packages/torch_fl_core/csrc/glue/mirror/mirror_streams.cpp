#include "glue/mirror/mirror_streams.h"

#include <cstdint>

namespace torch_fl::mirror {
namespace {

class MirrorStreams final : public StreamModel {
 public:
  MirrorStreams(c10::DeviceType type, const c10::impl::DeviceGuardImplInterface* guard)
      : type_(type), guard_(guard) {}

  tfl_stream native(const c10::Stream& stream) const override {
    return reinterpret_cast<tfl_stream>(static_cast<intptr_t>(stream.id()));
  }
  c10::Stream default_stream(c10::DeviceIndex device) const override {
    return from_mirror(guard_->getDefaultStream(mirrored(device)));
  }
  c10::Stream from_pool(c10::DeviceIndex device, bool high_priority) const override {
    return from_mirror(guard_->getStreamFromGlobalPool(mirrored(device), high_priority));
  }
  c10::Stream current(c10::DeviceIndex device) const override {
    return from_mirror(guard_->getStream(mirrored(device)));
  }
  void set_current(const c10::Stream& stream) const override {
    guard_->exchangeStream(to_mirror(stream));
  }
  void* native_handle(const c10::Stream& stream) const override {
#if TORCH_FL_TORCH_MAJOR > 2 || TORCH_FL_TORCH_MINOR >= 11
    return guard_->getStreamNativeHandle(to_mirror(stream));
#else
    return native(stream);
#endif
  }

 private:
  c10::Device mirrored(c10::DeviceIndex device) const { return c10::Device(type_, device); }
  static c10::Stream from_mirror(const c10::Stream& s) {
    return make_stream(s.device_index(), s.id());
  }
  c10::Stream to_mirror(const c10::Stream& s) const {
    return c10::Stream(c10::Stream::UNSAFE, mirrored(s.device_index()), s.id());
  }

  c10::DeviceType type_;
  const c10::impl::DeviceGuardImplInterface* guard_;
};

}  // namespace

const StreamModel* mirror_streams(c10::DeviceType type,
                                  const c10::impl::DeviceGuardImplInterface* guard) {
  return new MirrorStreams(type, guard);  // process lifetime, like the registry's guards
}

}  // namespace torch_fl::mirror
