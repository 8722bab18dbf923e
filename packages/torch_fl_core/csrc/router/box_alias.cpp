#include "router/box_alias.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>

#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "glue/caching_allocator.h"
#include "glue/mirror_allocator.h"
#include "glue/runtime_access.h"

namespace torch_fl::box {
namespace {

void release_storage_ref(void* ctx) { delete static_cast<c10::Storage*>(ctx); }
void release_grown(void* ctx) { delete static_cast<c10::DataPtr*>(ctx); }

// The allocator of alias storages. When a boxed kernel grows an out= alias
// (resize_ of a result), the new memory comes from the flagos pool of the
// owning device, so the router can hand it back to the flagos tensor without
// a copy.
class GrowAllocator final : public c10::Allocator {
 public:
  GrowAllocator(c10::DeviceIndex flagos_device, c10::Device target)
      : flagos_device_(flagos_device), target_(target) {}

  c10::DataPtr allocate(size_t n) override {
    CurrentDeviceScope scope(flagos_device_);
    auto* inner = new c10::DataPtr(caching_allocator()->allocate(n));
    return {inner->get(), inner, &release_grown, target_};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

 private:
  c10::DeviceIndex flagos_device_;
  c10::Device target_;
};

constexpr size_t kMaxDevices = 64;

// One GrowAllocator per (flagos device, target kind), created on first
// use and kept for the process. Lock-free lookup: this runs for every alias.
c10::Allocator* grow_allocator(c10::DeviceIndex flagos_device, c10::Device target) {
  static std::array<std::atomic<GrowAllocator*>, kMaxDevices * 2> table{};
  TORCH_CHECK(flagos_device >= 0 && static_cast<size_t>(flagos_device) < kMaxDevices,
              "flagos box: device index ", static_cast<int>(flagos_device), " out of range");
  const size_t slot = static_cast<size_t>(flagos_device) * 2 + (target.is_cpu() ? 0 : 1);
  GrowAllocator* a = table[slot].load(std::memory_order_acquire);
  if (a) return a;
  auto* fresh = new GrowAllocator(flagos_device, target);
  if (table[slot].compare_exchange_strong(a, fresh)) return fresh;
  delete fresh;  // another thread won
  return a;
}

// ---- host results in flagos memory (HostResultScope) ----------------------
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
    // The box:cpu call made `device` current (BoxScope) and looked up its
    // current stream: no runtime query, no second stream lookup.
    c10::DataPtr inner =
        allocate_on_current(static_cast<c10::DeviceIndex>(device), target.stream, n);
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

// Takes the flagos memory out of a host-result storage: the storage keeps a
// non-owning pointer (its tensors are the kernel's results, which the router
// drops after the call), the returned DataPtr owns the block. A second result
// over the same storage finds it already taken and is copied.
std::optional<c10::DataPtr> take_host_result(const c10::Storage& s, c10::DeviceIndex device) {
  const c10::DataPtr& dp = s.data_ptr();
  const c10::DeleterFnPtr deleter = dp.get_deleter();
  if (g_pool_deleter == nullptr || !dp.device().is_cpu() || !is_pool_deleter(deleter)) {
    return std::nullopt;
  }
  void* data = dp.get();
  c10::DataPtr owned =
      s.unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr(data, c10::Device(c10::DeviceType::CPU)));
  void* ctx = owned.release_context();
  return c10::DataPtr(data, ctx, deleter, c10::Device(c10::DeviceType::PrivateUse1, device));
}

// A host result that nothing else holds (the kernel's fresh output: one
// TensorImpl, the router's own reference, over a storage no other tensor
// shares) has its StorageImpl turned into flagos storage as it is, which saves
// building a second one per result. The CPU TensorImpl over it is dropped by
// the router right after; it is never handed out. A result shared in any way
// takes the path of take_host_result instead (a new flagos storage).
std::optional<c10::Storage> relabel_host_result(const at::Tensor& t, c10::DeviceIndex device) {
  const c10::Storage& s = t.storage();
  if (t.use_count() != 1 || s.use_count() != 1) return std::nullopt;
  c10::StorageImpl* impl = s.unsafeGetStorageImpl();
  c10::DataPtr& dp = impl->_mutable_data_ptr_no_checks();
  if (g_pool_deleter == nullptr || !dp.device().is_cpu() || !is_pool_deleter(dp.get_deleter())) {
    return std::nullopt;
  }
  dp.unsafe_set_device(c10::Device(c10::DeviceType::PrivateUse1, device));
  impl->set_allocator(caching_allocator());
  impl->set_resizable(true);
  return s;
}

// The flagos memory of a storage grown through GrowAllocator, taken over.
std::optional<c10::DataPtr> take_grown(const c10::Storage& s, c10::DeviceIndex device) {
  auto* inner = s.data_ptr().cast_context<c10::DataPtr>(&release_grown);
  if (!inner) return take_host_result(s, device);
  return std::move(*inner);
}

}  // namespace

c10::Device target_device(c10::DeviceType type, c10::DeviceIndex flagos_index) {
  return type == c10::DeviceType::CPU ? c10::Device(c10::DeviceType::CPU)
                                      : c10::Device(type, flagos_index);
}

namespace {

// The TensorImpl of an alias: a plain TensorImpl that can take another
// tensor's geometry together with the contiguity flags that tensor already
// computed. TensorImpl::set_sizes_and_strides recomputes them (contiguity,
// channels-last, non-overlapping-and-dense), which was most of re-pointing a
// pooled alias at a new operand (callgrind, sim decode loop).
class AliasImpl final : public c10::TensorImpl {
 public:
  AliasImpl(c10::Storage&& storage, c10::DispatchKeySet keys, caffe2::TypeMeta dtype)
      : c10::TensorImpl(std::move(storage), keys, dtype) {}

  // Flagos tensors are never symbolic; the public accessors below also
  // answer for a custom sizes/strides policy.
  void copy_geometry(const c10::TensorImpl& src) {
    sizes_and_strides_.set_sizes(src.sizes());
    sizes_and_strides_.set_strides(src.strides());
    storage_offset_ = src.storage_offset();
    numel_ = src.numel();
    is_contiguous_ = src.is_contiguous(c10::MemoryFormat::Contiguous);
    is_channels_last_contiguous_ = src.is_contiguous(c10::MemoryFormat::ChannelsLast);
    is_channels_last_3d_contiguous_ = src.is_contiguous(c10::MemoryFormat::ChannelsLast3d);
    is_channels_last_ = src.is_strides_like(c10::MemoryFormat::ChannelsLast);
    is_channels_last_3d_ = src.is_strides_like(c10::MemoryFormat::ChannelsLast3d);
    is_non_overlapping_and_dense_ = src.is_non_overlapping_and_dense();
  }
};

// An alias TensorImpl of t's geometry over `dp` (t's memory typed as `device`).
at::Tensor build_alias(const at::Tensor& t, c10::DataPtr dp, c10::Device device,
                       c10::DispatchKey key) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), t.storage().nbytes(), std::move(dp),
                       grow_allocator(t.device().index(), device), /*resizable=*/true);
  auto impl =
      c10::make_intrusive<AliasImpl>(std::move(storage), c10::DispatchKeySet(key), t.dtype());
  impl->copy_geometry(*t.unsafeGetTensorImpl());
  if (t.is_conj()) impl->_set_conj(true);
  if (t.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
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

at::Tensor make_alias(const at::Tensor& t, c10::Device device, c10::DispatchKey key) {
  const c10::Storage& base = t.storage();
  return build_alias(
      t, c10::DataPtr(base.mutable_data(), new c10::Storage(base), &release_storage_ref, device),
      device, key);
}

namespace {

// Per-thread pool of call-scoped aliases. Building an alias (a StorageImpl and
// a TensorImpl) per operand is most of the router's own cost per call on tiny
// tensors, so aliases nobody else holds (use_count 1: the pool's own
// reference) are re-pointed at the next operand instead.
//
// A pool, not a cache keyed by memory: a decoder's token passes about 400
// distinct weights and activations, and an alias kept per memory block
// (session 7's 2048-slot table) is cold again by the time its block comes
// back. On the H200 host the routed call then paid cache misses for the
// table's set, the alias's TensorImpl and its StorageImpl, all of which the
// kernel reads again: about half of core's own time per decode token. The
// short per-kind lists below, re-pointed call after call, stay in the
// first-level cache. An alias that already views the operand's memory with its
// geometry (a loop over the same tensors) is taken without writing to it.
struct AliasSlot {
  at::Tensor alias;
  const void* data = nullptr;  // the memory it was last pointed at
  size_t nbytes = 0;
  uint64_t used = 0;  // AliasPool::tick at its last use
};
// Aliases of one kind (alias_kind(): dtype, target device, dispatch key,
// flagos device). A call scans only its operand's kind, so a long list of one
// kind (a decode loop's final cat of 64 int64 tokens filled session 8's single
// list of 64, and every later alias of any dtype walked all of it: 40 cache
// lines per operand in a loop that evicts them between calls) costs nothing to
// the others, and each list stays as short as the most aliases of its kind one
// ordinary call holds at once. Longer calls (a cat or a foreach over many
// tensors) build the rest for the call.
constexpr size_t kSlotsPerKind = 12;
constexpr size_t kMaxKinds = 8;
struct KindPool {
  uint64_t kind = 0;
  uint64_t used = 0;  // AliasPool::tick at its last use (the least recent goes first)
  std::vector<AliasSlot> slots;
};
struct AliasPool {
  std::array<KindPool, kMaxKinds> kinds;
  size_t nkinds = 0;
  AliasCacheStats stats;
  uint64_t tick = 0;

  KindPool& of(uint64_t kind, uint64_t now) {
    for (size_t i = 0; i < nkinds; ++i) {
      if (kinds[i].kind == kind) {
        kinds[i].used = now;
        return kinds[i];
      }
    }
    KindPool* k = nullptr;
    if (nkinds < kMaxKinds) {
      k = &kinds[nkinds++];
      k->slots.reserve(kSlotsPerKind);
    } else {
      // A ninth kind replaces the least recently used one. Dropping the pool's
      // references is safe: an alias a call still holds lives on with it.
      k = &kinds[0];
      for (KindPool& c : kinds) {
        if (c.used < k->used) k = &c;
      }
      k->slots.clear();
    }
    k->kind = kind;
    k->used = now;
    return *k;
  }
};
// On the heap, one pointer in TLS: a large thread_local object in this module
// made sim's routed-call overhead read higher. A plain pointer (constant-
// initialised, so reading it needs no TLS init call); the owner below frees
// the pool when the thread ends.
thread_local AliasPool* t_alias_pool = nullptr;
struct AliasPoolOwner {
  ~AliasPoolOwner() {
    delete t_alias_pool;
    t_alias_pool = nullptr;
  }
};

AliasPool& alias_pool() {
  AliasPool* pool = t_alias_pool;
  if (C10_UNLIKELY(pool == nullptr)) {
    static thread_local AliasPoolOwner owner;
    (void)owner;
    pool = t_alias_pool = new AliasPool();
  }
  return *pool;
}

// Everything an alias is built with besides its memory and geometry; the
// flagos device picks the grow allocator of its storage.
uint64_t alias_kind(const at::Tensor& t, c10::Device device, c10::DispatchKey key) {
  return static_cast<uint64_t>(static_cast<uint8_t>(t.scalar_type())) |
         static_cast<uint64_t>(static_cast<uint8_t>(device.type())) << 8 |
         static_cast<uint64_t>(static_cast<uint8_t>(device.index())) << 16 |
         static_cast<uint64_t>(static_cast<uint16_t>(key)) << 24 |
         static_cast<uint64_t>(static_cast<uint8_t>(t.device().index())) << 40;
}

// Whether the pooled alias is free: nobody but the pool holds it or its
// storage (a kernel may keep neither past the call it got them for).
bool is_free(const at::Tensor& a) {
  return a.use_count() == 1 && a.storage().use_count() == 1 &&
         a.unsafeGetTensorImpl()->allow_tensor_metadata_change();
}

// Points a free pooled alias at t's memory and geometry. Its storage's data
// pointer never owns memory, except after a kernel grew it (the grow
// allocator's wrapper, whose block the flagos tensor has taken over, or which
// nobody took when the kernel failed): replacing it frees only what is ours.
at::Tensor repoint(AliasSlot& slot, const at::Tensor& t, void* data, size_t nbytes,
                   c10::Device device) {
  at::Tensor& a = slot.alias;
  c10::TensorImpl* impl = a.unsafeGetTensorImpl();
  c10::StorageImpl* storage = impl->storage().unsafeGetStorageImpl();
  if (storage->data() != data || storage->nbytes() != nbytes ||
      storage->data_ptr().get_context() != nullptr) {
    storage->set_data_ptr_noswap(c10::DataPtr(data, device));
    storage->set_nbytes(nbytes);
  }
  slot.data = data;
  slot.nbytes = nbytes;
  const c10::TensorImpl* src = t.unsafeGetTensorImpl();
  if (impl->storage_offset() != src->storage_offset() || impl->sizes() != src->sizes() ||
      impl->strides() != src->strides()) {
    // Pooled aliases are all built by build_alias.
    static_cast<AliasImpl*>(impl)->copy_geometry(*src);
  }
  if (a.is_conj() != t.is_conj()) impl->_set_conj(t.is_conj());
  if (a.is_neg() != t.is_neg()) impl->_set_neg(t.is_neg());
  return a;
}

}  // namespace

at::Tensor call_alias(const at::Tensor& t, c10::Device device, c10::DispatchKey key) {
  const c10::Storage& base = t.storage();
  void* data = base.mutable_data();
  const size_t nbytes = base.nbytes();
  AliasPool& pool = alias_pool();
  const uint64_t tick = ++pool.tick;
  KindPool& kp = pool.of(alias_kind(t, device, key), tick);
  // The slot data alone finds an alias already viewing this memory, else the
  // least recently used one. Only the pick is checked for being free: the
  // aliases this call already holds are the most recently used, so the least
  // recently used one almost always is.
  AliasSlot* oldest = nullptr;
  for (AliasSlot& slot : kp.slots) {
    if (slot.data == data && slot.nbytes == nbytes && is_free(slot.alias)) {
      ++pool.stats.hits;
      slot.used = tick;
      return repoint(slot, t, data, nbytes, device);
    }
    if (oldest == nullptr || slot.used < oldest->used) oldest = &slot;
  }
  if (oldest != nullptr && !is_free(oldest->alias)) {
    oldest = nullptr;
    for (AliasSlot& slot : kp.slots) {
      if (is_free(slot.alias) && (oldest == nullptr || slot.used < oldest->used)) oldest = &slot;
    }
  }
  if (oldest != nullptr) {
    ++pool.stats.rebinds;
    oldest->used = tick;
    return repoint(*oldest, t, data, nbytes, device);
  }
  ++pool.stats.builds;
  // Non-owning: the caller's flagos tensor keeps the memory alive for the
  // call, and a result that aliases it is re-wrapped over the flagos storage.
  at::Tensor alias = build_alias(t, c10::DataPtr(data, device), device, key);
  if (kp.slots.size() < kSlotsPerKind) {
    kp.slots.push_back(AliasSlot{alias, data, nbytes, tick});
  }
  return alias;
}

AliasCacheStats alias_cache_stats() { return alias_pool().stats; }

at::Tensor flagos_over(c10::Storage storage, const at::Tensor& like) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) impl->_set_conj(true);
  if (like.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

void adopt_geometry(const at::Tensor& base, const at::Tensor& alias) {
  c10::TensorImpl* impl = base.unsafeGetTensorImpl();
  const c10::Storage& astorage = alias.storage();
  if (astorage.data() != base.storage().data()) {
    // The kernel gave the alias other storage (grew it).
    auto grown = take_grown(astorage, base.device().index());
    TORCH_CHECK(grown.has_value(),
                "flagos box: a kernel replaced the storage of an output with "
                "memory that is not flagos memory");
    c10::Storage s = base.storage();
    s.set_data_ptr_noswap(std::move(*grown));
    s.set_nbytes(astorage.nbytes());
  }
  if (base.sizes() != alias.sizes() || base.strides() != alias.strides() ||
      base.storage_offset() != alias.storage_offset()) {
    impl->set_sizes_and_strides(alias.sizes(), alias.strides(), alias.storage_offset());
  }
}

namespace {

// A fresh kernel result nobody else can see (the router holds its only
// reference, so no Python object or other tensor does) whose storage has just
// become flagos storage: its TensorImpl becomes the flagos tensor itself, dispatch
// keys and device, instead of a second TensorImpl being built over the
// storage. The keys are those a new PrivateUse1 TensorImpl gets (the backend
// bit, and the autocast key that goes with it; autograd keys are per-backend).
bool retype_tensor_in_place(const at::Tensor& t) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (t.use_count() != 1 || !impl->allow_tensor_metadata_change()) return false;
  impl->set_storage_keep_dtype(impl->storage());  // the device follows the storage's
  impl->_change_backend_component_keys(impl->storage().device());
  return true;
}

}  // namespace

at::Tensor to_flagos(const at::Tensor& t, c10::DeviceIndex device, c10::DeviceType type) {
  if (!t.defined() || t.device().is_privateuseone()) return t;
  if (auto relabeled = relabel_host_result(t, device)) {
    if (retype_tensor_in_place(t)) return t;
    return flagos_over(std::move(*relabeled), t);
  }
  if (auto grown = take_grown(t.storage(), device)) {
    const size_t nbytes = t.storage().nbytes();
    c10::Storage s(c10::Storage::use_byte_size_t(), nbytes, std::move(*grown), caching_allocator(),
                   true);
    return flagos_over(std::move(s), t);
  }
  if (mirror_device_type() == t.device().type() && t.device().index() == device) {
    // Mirror mode: the result came from the pool flagos allocates from, so it
    // joins flagos as it is (zero-copy): a fresh result is retyped in place,
    // anything shared is wrapped, keeping its storage alive.
    const c10::Storage& src = t.storage();
    if (t.use_count() == 1 && src.use_count() == 1 && retype_mirror_storage(src, device)) {
      if (retype_tensor_in_place(t)) return t;
      return flagos_over(src, t);
    }
    c10::Storage s(c10::Storage::use_byte_size_t(), src.nbytes(), adopt_mirror_storage(src, device),
                   caching_allocator(), src.resizable());
    return flagos_over(std::move(s), t);
  }
  at::Tensor src = t.is_non_overlapping_and_dense() ? t : t.contiguous();
  at::Tensor out = at::empty_strided(src.sizes(), src.strides(),
                                     src.options().device(c10::Device(c10::kPrivateUse1, device)));
  if (type == c10::DeviceType::CPU && has_capability(TFL_CAP_HOST_ADDRESSABLE_MEMORY)) {
    // The stream was synchronized before the host kernel ran and nothing was
    // queued since, so a host copy into device memory is ordered.
    if (src.numel() > 0) {
      std::memcpy(out.data_ptr(), src.data_ptr(), src.numel() * src.element_size());
    }
  } else {
    out.copy_(src);
  }
  if (t.is_conj()) out._set_conj(true);
  if (t.is_neg()) out._set_neg(true);
  return out;
}

at::Tensor view_of_input_or_fresh(const at::Tensor& result, const at::Tensor* const* bases,
                                  size_t n, c10::DeviceIndex device, c10::DeviceType type) {
  if (!result.defined() || result.device().is_privateuseone()) return result;
  // A box:<mirror> kernel's result on another device stays there, as it does
  // natively: CUDA's flash and memory-efficient attention return their philox
  // seed and offset as CPU tensors, which became flagos tensors through two
  // pageable host-to-device copies per call. (box:cpu results are all host
  // tensors standing for flagos ones.) Python backends already do so.
  if (type != c10::DeviceType::CPU && result.device().type() != type) return result;
  const void* data = result.storage().data();
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& b = *bases[i];
    if (b.defined() && b.device().is_privateuseone() && data != nullptr &&
        b.storage().data() == data) {
      return flagos_over(b.storage(), result);
    }
  }
  return to_flagos(result, device, type);
}

}  // namespace torch_fl::box
