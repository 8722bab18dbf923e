#include "glue/mirror/mirror_allocator.h"

#include <array>
#include <atomic>

#include "glue/caching_allocator.h"
#include "glue/runtime_access.h"

namespace torch_fl {
namespace {

// c10::getDeviceAllocator() dynamic_casts on every call, and the mirrored
// allocator is asked for per routed result and allocation. The cast is
// remembered per device type for the allocator c10 currently registers (one
// record per registration: a replaced allocator, say a pluggable CUDA one, is
// looked up again; records are never freed, readers may hold one).
// The raw deleter is remembered with it: it marks the pointers that can be
// retyped per result (owned_by_address), and asking is a virtual call into the
// mirrored backend's library.
struct DeviceAllocatorRecord {
  c10::Allocator* registered;
  c10::DeviceAllocator* device;
  c10::DeleterFnPtr raw_deleter;
};
const DeviceAllocatorRecord& device_allocator_record(c10::DeviceType type) {
  static std::array<std::atomic<const DeviceAllocatorRecord*>,
                    static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)>
      records{};
  c10::Allocator* registered = c10::GetAllocator(type);
  auto& slot = records[static_cast<size_t>(type)];
  const DeviceAllocatorRecord* r = slot.load(std::memory_order_acquire);
  if (C10_LIKELY(r != nullptr && r->registered == registered)) return *r;
  c10::DeviceAllocator* device = c10::getDeviceAllocator(type);
  auto* fresh = new DeviceAllocatorRecord{registered, device, device->raw_deleter()};
  slot.store(fresh, std::memory_order_release);
  return *fresh;
}
c10::DeviceAllocator* device_allocator(c10::DeviceType type) {
  return device_allocator_record(type).device;
}

void release_inner(void* ctx) { delete static_cast<c10::DataPtr*>(ctx); }

// A DataPtr of the mirrored allocator that owns its block by address alone
// (context == data, the allocator's raw deleter: torch's CUDA caching allocator
// in its default configuration). Such a pointer can simply be retyped as
// flagos memory, with no wrapper to allocate per block.
bool owned_by_address(const c10::DataPtr& p, c10::DeviceType type) {
  const c10::DeleterFnPtr raw = device_allocator_record(type).raw_deleter;
  return raw != nullptr && p.get_deleter() == raw && p.get_context() == p.get();
}

void release_storage(void* ctx) { delete static_cast<c10::Storage*>(ctx); }

c10::Stream to_mirror(const c10::Stream& s) {
  return c10::Stream(c10::Stream::UNSAFE, mirror_device(s.device_index()), s.id());
}

class MirrorAllocator final : public c10::DeviceAllocator {
 public:
  explicit MirrorAllocator(c10::DeviceType type) : type_(type) {}

  c10::DataPtr allocate(size_t n) override {
    // The mirrored current device is the flagos current device.
    ensure_mirror_initialized();
    c10::DeviceAllocator* const alloc = inner();
    c10::DataPtr inner;
    try {
      inner = alloc->allocate(n);
    } catch (const c10::OutOfMemoryError& e) {
      TORCH_CHECK_WITH(OutOfMemoryError, false,
                       "flagos out of memory on flagos:", static_cast<int>(current_device()),
                       " (runtime '", runtime_name(), "', the ", c10::DeviceTypeName(type_, true),
                       " caching allocator): ", e.what_without_backtrace());
    }
    const c10::Device flagos(c10::DeviceType::PrivateUse1, inner.device().index());
    if (owned_by_address(inner, type_)) {
      inner.unsafe_set_device(flagos);
      return inner;
    }
    // A configured allocator whose pointers carry their own context: wrap.
    void* data = inner.get();
    return {data, new c10::DataPtr(std::move(inner)), &release_inner, flagos};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TFL_CALL(-1, memcpy, dest, src, count, TFL_MEMCPY_DEVICE_TO_DEVICE);
  }

  bool initialized() override { return inner()->initialized(); }

  void emptyCache(c10::MempoolId_t mempool_id) override { inner()->emptyCache(mempool_id); }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    if (owned_by_address(ptr, type_)) {
      inner()->recordStream(ptr, to_mirror(stream));  // finds the block by address
    } else if (auto* inner_ptr = ptr.cast_context<c10::DataPtr>(&release_inner)) {
      inner()->recordStream(*inner_ptr, to_mirror(stream));
    } else if (auto* storage = ptr.cast_context<c10::Storage>(&release_storage)) {
      inner()->recordStream(storage->data_ptr(), to_mirror(stream));
    }
    // Anything else (views of user memory) was not allocated by a pool.
  }

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    ensure_mirror_initialized();
    return inner()->getDeviceStats(device < 0 ? current_device() : device);
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    ensure_mirror_initialized();
    inner()->resetAccumulatedStats(device < 0 ? current_device() : device);
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    ensure_mirror_initialized();
    inner()->resetPeakStats(device < 0 ? current_device() : device);
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    ensure_mirror_initialized();
    return inner()->getMemoryInfo(device < 0 ? current_device() : device);
  }

 private:
  c10::DeviceAllocator* inner() const { return device_allocator(type_); }
  c10::DeviceType type_;
};

}  // namespace

c10::DeviceAllocator* mirror_allocator(c10::DeviceType type) {
  return new MirrorAllocator(type);  // never destroyed, like every torch allocator
}

bool retype_mirror_storage(const c10::Storage& storage, c10::DeviceIndex device) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  c10::DataPtr& dp = impl->_mutable_data_ptr_no_checks();
  if (!owned_by_address(dp, dp.device().type())) return false;
  dp.unsafe_set_device(c10::Device(c10::DeviceType::PrivateUse1, device));
  impl->set_allocator(caching_allocator());  // the installed mirror allocator
  return true;
}

c10::DataPtr adopt_mirror_storage(const c10::Storage& storage, c10::DeviceIndex device) {
  return {storage.mutable_data(), new c10::Storage(storage), &release_storage,
          c10::Device(c10::DeviceType::PrivateUse1, device)};
}

}  // namespace torch_fl
