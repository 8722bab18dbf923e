#include "boxing/host_results.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>

#include <cstring>
#include <mutex>

#include "glue/caching_allocator.h"

namespace torch_fl::boxing {
namespace {

// One thread_local object, not two variables: each TLS access of this
// extension module may cost a __tls_get_addr call.
struct ResultTarget {
  int device = -1;           // -1: no HostResultScope open on this thread
  c10::StreamId stream = 0;  // the id of `device`'s current stream
};
thread_local ResultTarget t_result;

// A host-result allocation is the flagos pool's own DataPtr retyped as CPU:
// same data, context and deleter (the caching allocator's for that device,
// which finds the block by pointer), so no side table and no lock of ours is
// needed per call, and raw_allocate (context == data) keeps working. Adoption
// moves that deleter from the CPU storage to the flagos one.
c10::Allocator* g_base_cpu = nullptr;
c10::DeleterFnPtr g_pool_deleter = nullptr;  // the caching allocator's raw deleter

// raw_deallocate of a pointer from either allocator (rare: the raw interface);
// the pool owns it exactly when it is one of its live allocations.
void release_raw(void* data) {
  if (allocator_owns(data)) {
    g_pool_deleter(data);  // finds the device by pointer
  } else {
    g_base_cpu->raw_deleter()(data);
  }
}

class HostResultAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const ResultTarget target = t_result;
    const int device = target.device;
    if (C10_LIKELY(device < 0) || n == 0) return g_base_cpu->allocate(n);
    // The call scope made `device` current and looked up its current stream:
    // no runtime query, no second stream lookup.
    c10::DataPtr inner =
        allocate_for_host_writer(static_cast<c10::DeviceIndex>(device), target.stream, n);
    const c10::DeleterFnPtr deleter = inner.get_deleter();
    TORCH_INTERNAL_ASSERT(is_pool_deleter(deleter) && inner.get() == inner.get_context());
    void* data = inner.get();
    inner.release_context();  // ownership moves to the CPU-typed DataPtr below
    return {data, data, deleter, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release_raw; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

bool is_host_result(const c10::DataPtr& dp) {
  return g_pool_deleter != nullptr && dp.device().is_cpu() && is_pool_deleter(dp.get_deleter());
}

}  // namespace

HostResultScope::HostResultScope(c10::DeviceIndex device, c10::StreamId stream_id)
    : prev_(t_result.device), prev_stream_(t_result.stream) {
  if (g_base_cpu) {
    ResultTarget& r = t_result;
    r.device = device;
    r.stream = stream_id;
  }
}

HostResultScope::~HostResultScope() {
  ResultTarget& r = t_result;
  r.device = prev_;
  r.stream = prev_stream_;
}

void install_host_result_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_base_cpu = c10::GetDefaultCPUAllocator();
    g_pool_deleter = caching_allocator()->raw_deleter();
    // Never destroyed: CPU tensors may outlive every static.
    c10::SetCPUAllocator(new HostResultAllocator(), /*priority=*/1);
  });
}

// A host result that nothing else holds (the kernel's fresh output: one
// TensorImpl, the router's own reference, over a storage no other tensor
// shares) has its StorageImpl turned into flagos storage as it is, which saves
// building a second one per result. The CPU TensorImpl over it is dropped by
// the router right after; it is never handed out. A result shared in any way
// takes the path of take_host_result instead (a new flagos storage).
bool relabel_host_result(const at::Tensor& t, c10::DeviceIndex device) {
  const c10::Storage& s = t.storage();
  if (t.use_count() != 1 || s.use_count() != 1) return false;
  c10::StorageImpl* impl = s.unsafeGetStorageImpl();
  c10::DataPtr& dp = impl->_mutable_data_ptr_no_checks();
  if (!is_host_result(dp)) return false;
  dp.unsafe_set_device(c10::Device(c10::DeviceType::PrivateUse1, device));
  impl->set_allocator(caching_allocator());
  impl->set_resizable(true);
  return true;
}

// The storage keeps a non-owning pointer (its tensors are the kernel's
// results, which the router drops after the call), the returned DataPtr owns
// the block. A second result over the same storage finds it already taken and
// is copied.
std::optional<c10::DataPtr> take_host_result(const c10::Storage& s, c10::DeviceIndex device) {
  const c10::DataPtr& dp = s.data_ptr();
  if (!is_host_result(dp)) return std::nullopt;
  const c10::DeleterFnPtr deleter = dp.get_deleter();
  void* data = dp.get();
  c10::DataPtr owned =
      s.unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr(data, c10::Device(c10::DeviceType::CPU)));
  void* ctx = owned.release_context();
  return c10::DataPtr(data, ctx, deleter, c10::Device(c10::DeviceType::PrivateUse1, device));
}

}  // namespace torch_fl::boxing
