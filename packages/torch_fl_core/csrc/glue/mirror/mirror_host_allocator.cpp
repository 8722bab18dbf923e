#include "glue/mirror/mirror_host_allocator.h"

#include "glue/runtime_access.h"

namespace torch_fl::mirror {
namespace {

class MirrorHostAllocator final : public at::HostAllocator {
 public:
  explicit MirrorHostAllocator(c10::DeviceType type) : type_(type) {}
  c10::DataPtr allocate(size_t n) override {
    ensure_mirror_initialized();
    return inner()->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return inner()->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    inner()->copy_data(dest, src, count);
  }
  bool record_event(void* ptr, void* ctx, c10::Stream s) override {
    const c10::Stream m =
        s.device_type() == c10::DeviceType::PrivateUse1
            ? c10::Stream(c10::Stream::UNSAFE, c10::Device(type_, s.device_index()), s.id())
            : s;
    return inner()->record_event(ptr, ctx, m);
  }
  void empty_cache() override { inner()->empty_cache(); }
  at::HostStats get_stats() override { return inner()->get_stats(); }
  void reset_accumulated_stats() override { inner()->reset_accumulated_stats(); }
  void reset_peak_stats() override { inner()->reset_peak_stats(); }

 private:
  at::HostAllocator* inner() const { return at::getHostAllocator(type_); }
  c10::DeviceType type_;
};

}  // namespace

at::HostAllocator* mirror_host_allocator(c10::DeviceType type) {
  return new MirrorHostAllocator(type);
}

}  // namespace torch_fl::mirror
