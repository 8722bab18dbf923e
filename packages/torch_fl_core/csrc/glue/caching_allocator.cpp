// Stream-aware caching device allocator for flagos (see caching_allocator.h).
//
// Locking: one lock per device (DeviceLock, below) guards that device's pools, pending frees,
// stats and its map from pointer to live Block (the deleter only gets the
// pointer). Each device has its own deleter function, so a free finds the
// right device without a global map or a second lock. The event cache has its
// own leaf mutex. Runtime calls that only enqueue or poll
// (malloc, free, event_record, event_query) run under the device lock; calls
// that wait (event_synchronize) run with it released, so a thread blocked on
// the allocator never holds up a stream. No GIL, no Python, anywhere here.
#include "glue/caching_allocator.h"
#include "glue/graph_capture.h"

#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>
#include <c10/util/flat_hash_map.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace torch_fl {
namespace {

// The device lock, taken twice per routed call that returns a tensor (its
// allocation, and later its free). Critical sections are pool bookkeeping (a
// few hundred nanoseconds) except the rare segment malloc. A test-and-test-
// and-set lock takes one atomic exchange and releases with a plain store,
// where std::mutex costs two atomic read-modify-writes and two library calls
// per pair; measured on the dispatch benchmark, the mutex was about 5 % of a
// tiny routed op. Waiters spin briefly, then yield (a holder may be in a
// runtime malloc).
class DeviceLock {
 public:
  void lock() noexcept {
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    lock_contended();
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  void lock_contended() noexcept {
    for (int spins = 0;;) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (spins < 100) {
          ++spins;
#if defined(__x86_64__) || defined(_M_X64)
          _mm_pause();
#endif
        } else {
          std::this_thread::yield();
        }
      }
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }
  std::atomic<bool> locked_{false};
};
using DeviceLockHold = std::unique_lock<DeviceLock>;

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlockSize = 512;     // every request rounds up to this
constexpr size_t kSmallSize = 1 << 20;    // requests <= 1 MiB use the small pool
constexpr size_t kSmallBuffer = 2 << 20;  // small-pool segments are 2 MiB
constexpr size_t kLargeRound = 2 << 20;   // large segments round up to 2 MiB
constexpr int kMaxDevices = 128;          // c10::DeviceIndex is int8_t

struct BlockPool;

struct Block {
  c10::DeviceIndex device;
  c10::StreamId stream_id;  // allocation stream; the block returns to its pool
  size_t size;              // bytes of this block (a multiple of kMinBlockSize)
  size_t requested = 0;     // bytes the caller asked for (while allocated)
  void* ptr;
  BlockPool* pool;
  Block* prev = nullptr;  // neighbours inside the same segment
  Block* next = nullptr;
  bool allocated = false;
  bool orphaned = false;                 // could not be made safe to reuse: never reused
  int pending_events = 0;                // deferred free: events still to complete
  std::vector<c10::Stream> stream_uses;  // other streams (recordStream)

  Block(c10::DeviceIndex d, c10::StreamId s, size_t sz, void* p, BlockPool* pl)
      : device(d), stream_id(s), size(sz), ptr(p), pool(pl) {}
  bool is_split() const { return prev != nullptr || next != nullptr; }
  // Free and sitting in its pool (so it may be merged or handed out).
  bool in_pool() const { return !allocated && pending_events == 0 && !orphaned; }
};

struct BlockLess {
  // Best fit: same stream first, then the smallest size, then the address.
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream_id != b->stream_id) return a->stream_id < b->stream_id;
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};

using BlockSet = std::set<Block*, BlockLess>;

struct BlockPool {
  explicit BlockPool(bool small) : is_small(small) {}
  BlockSet blocks;
  const bool is_small;
};

constexpr size_t kSpareBlocks = 16;

struct PendingFree {
  tfl_event event;
  c10::DeviceIndex event_device;  // device the event belongs to (its stream's)
  Block* block;
  uint64_t seq;  // unique per record: event handles are recycled, entries are not
};

struct DeviceState {
  explicit DeviceState(c10::DeviceIndex d) : device(d), small_pool(true), large_pool(false) {
    spare_blocks.reserve(kSpareBlocks);
  }
  DeviceLock mutex;
  const c10::DeviceIndex device;
  BlockPool small_pool;
  BlockPool large_pool;
  std::vector<PendingFree> pending;
  uint64_t next_seq = 0;
  DeviceStats stats;
  ska::flat_hash_map<void*, Block*> live;  // allocated blocks by pointer
  // Recycled, so that the steady state of tiny tensors (an allocation splits
  // a cached block, its free merges the two again) allocates no tree node and
  // no Block per allocation/free pair: a tree node taken out of a pool and
  // not yet reused, and retired Block objects.
  BlockSet::node_type spare_node;
  std::vector<Block*> spare_blocks;
  // Device graphs: streams capturing now and the pool tag their allocations
  // take, and the live pools with the number of graphs holding each. A pool's
  // blocks carry its tag (a negative stream id, never a real stream's) in
  // place of their stream, so best fit hands them only to the same pool, and
  // its free blocks stay cached while a graph holds it: replays write there.
  std::vector<std::pair<c10::StreamId, c10::StreamId>> capturing;
  ska::flat_hash_map<c10::StreamId, int> graph_pools;
  // Frees ordered after a capturing stream's use: an event recorded there now
  // would be recorded into the graph, so it is recorded when the capture ends.
  std::vector<std::pair<Block*, c10::StreamId>> after_capture;
};

c10::StreamId pool_tag(uint64_t pool) { return -static_cast<c10::StreamId>(pool); }

// Inserts `block` into `pool`, reusing the spare tree node if there is one.
void pool_insert(DeviceState& st, BlockPool& pool, Block* block) {
  if (st.spare_node.empty()) {
    pool.blocks.insert(block);
    return;
  }
  st.spare_node.value() = block;
  pool.blocks.insert(std::move(st.spare_node));  // leaves spare_node empty
}

// Removes the block at `it` from `pool`, keeping its tree node as the spare.
void pool_erase(DeviceState& st, BlockPool& pool, BlockSet::const_iterator it) {
  BlockSet::node_type node = pool.blocks.extract(it);
  if (st.spare_node.empty()) st.spare_node = std::move(node);
}

Block* make_block(DeviceState& st, c10::StreamId stream_id, size_t size, void* ptr,
                  BlockPool* pool) {
  if (st.spare_blocks.empty()) return new Block(st.device, stream_id, size, ptr, pool);
  Block* block = st.spare_blocks.back();
  st.spare_blocks.pop_back();
  *block = Block(st.device, stream_id, size, ptr, pool);
  return block;
}

void retire_block(DeviceState& st, Block* block) noexcept {
  if (st.spare_blocks.size() < kSpareBlocks) {
    st.spare_blocks.push_back(block);  // within the reserved capacity: no allocation
  } else {
    delete block;
  }
}

// The stat rows a block counts in: the aggregate and its pool's. Two indices
// rather than c10's StatTypes bitset walked per update: these run about ten
// times per allocation/free pair, on every routed call that returns a tensor.
struct StatRows {
  size_t pool;
};

StatRows stat_types_for(const BlockPool& pool) {
  return {static_cast<size_t>(pool.is_small ? StatType::SMALL_POOL : StatType::LARGE_POOL)};
}

void stat_increase(StatArray& arr, StatRows rows, size_t amount) {
  arr[static_cast<size_t>(StatType::AGGREGATE)].increase(amount);
  arr[rows.pool].increase(amount);
}

void stat_decrease(StatArray& arr, StatRows rows, size_t amount) {
  arr[static_cast<size_t>(StatType::AGGREGATE)].decrease(amount);
  arr[rows.pool].decrease(amount);
}

// The StatArray members present in every supported torch version (2.10..2.13).
constexpr StatArray DeviceStats::* kStatArrays[] = {
    &DeviceStats::allocation,      &DeviceStats::segment,
    &DeviceStats::active,          &DeviceStats::inactive_split,
    &DeviceStats::allocated_bytes, &DeviceStats::reserved_bytes,
    &DeviceStats::active_bytes,    &DeviceStats::inactive_split_bytes,
    &DeviceStats::requested_bytes,
};

size_t round_size(size_t n) {
  return n < kMinBlockSize ? kMinBlockSize
                           : (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t segment_size_for(const BlockPool& pool, size_t size) {
  return pool.is_small ? kSmallBuffer : (size + kLargeRound - 1) / kLargeRound * kLargeRound;
}

bool should_split(const Block* block, size_t size) {
  const size_t remaining = block->size - size;
  // Large-pool leftovers below 1 MiB would be too small to serve that pool.
  return block->pool->is_small ? remaining >= kMinBlockSize : remaining > kSmallSize;
}

std::string format_size(uint64_t bytes) {
  char buf[64];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof(buf), "%" PRIu64 " bytes", bytes);
  } else if (bytes < (1ull << 20)) {
    std::snprintf(buf, sizeof(buf), "%.2f KiB", bytes / 1024.0);
  } else if (bytes < (1ull << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", bytes / 1048576.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / 1073741824.0);
  }
  return buf;
}

void raw_delete(void* ptr);

// The deleter of an allocation on device D. DataPtr contexts must stay the
// data pointer (c10's raw_allocate asserts it), so the device travels in the
// deleter: a free then takes only its device's lock, never a global one.
template <int D>
void raw_delete_on(void* ptr);

template <size_t... D>
constexpr std::array<c10::DeleterFnPtr, sizeof...(D)> make_deleters(std::index_sequence<D...>) {
  return {&raw_delete_on<static_cast<int>(D)>...};
}
constexpr std::array<c10::DeleterFnPtr, kMaxDevices> kDeleters =
    make_deleters(std::make_index_sequence<kMaxDevices>());

// One more than the highest device index that has a pool: no deleter of a
// device beyond it has been handed out, so lookups stop there (usually 1).
std::atomic<int> g_device_limit{0};

// The device whose deleter `fn` is, or -1.
int deleter_device(c10::DeleterFnPtr fn) {
  const int limit = g_device_limit.load(std::memory_order_acquire);
  for (int d = 0; d < limit; ++d) {
    if (kDeleters[d] == fn) return d;
  }
  return -1;
}

// Runtime events are reused rather than destroyed: creating one per deferred
// free would be wasteful, and a handle that stays valid for the process lets
// emptyCache wait on a snapshot of pending events without holding the device
// lock (a recycled handle only makes that wait a little longer).
class EventCache {
 public:
  // Caller has made `device` current.
  tfl_event acquire(c10::DeviceIndex device) {
    {
      std::lock_guard<std::mutex> g(mutex_);
      auto& free_list = free_[device];
      if (!free_list.empty()) {
        tfl_event ev = free_list.back();
        free_list.pop_back();
        return ev;
      }
    }
    tfl_event ev = nullptr;
    TFL_CALL(device, event_create, &ev, TFL_EVENT_DISABLE_TIMING);
    return ev;
  }
  void release(c10::DeviceIndex device, tfl_event ev) {
    std::lock_guard<std::mutex> g(mutex_);
    free_[device].push_back(ev);
  }

 private:
  std::mutex mutex_;
  std::array<std::vector<tfl_event>, kMaxDevices> free_;
};

class FlagosCachingAllocator final : public c10::DeviceAllocator {
 public:
  // Must not touch the runtime: constructed during static initialization.
  FlagosCachingAllocator() = default;

  c10::DataPtr allocate(size_t n) override { return allocate_on(current_device(), n); }

  // `dev` must be the current device (its current stream is the block's).
  c10::DataPtr allocate_on(c10::DeviceIndex dev, size_t n) {
    if (n == 0) {
      return {nullptr, nullptr, &raw_delete, c10::Device(c10::DeviceType::PrivateUse1, dev)};
    }
    return allocate_on_stream(dev, current_stream(dev).id(), n);
  }

  // allocate_on with the current stream's id already known (`stream_id` must
  // be current_stream(dev).id() on this thread; the box:cpu route has it).
  // Inlined into both callers: the plain allocate() path keeps a single call.
  C10_ALWAYS_INLINE c10::DataPtr allocate_on_stream(c10::DeviceIndex dev, c10::StreamId stream_id,
                                                    size_t n) {
    const c10::Device device(c10::DeviceType::PrivateUse1, dev);
    if (n == 0) {
      return {nullptr, nullptr, &raw_delete, device};
    }
    // Beyond this, rounding to segments would overflow size_t; no device has it.
    TORCH_CHECK_WITH(OutOfMemoryError, n <= (SIZE_MAX >> 1),
                     "flagos out of memory. Tried to allocate ", n, " bytes on flagos:", int(dev));
    DeviceState& st = state(dev);
    const size_t size = round_size(n);
    Block* block = nullptr;
    size_t total_allocated = 0, total_reserved = 0;
    std::string oom_message;
    {
      DeviceLockHold lock(st.mutex);
      if (C10_UNLIKELY(!st.capturing.empty())) stream_id = capture_stream_tag(st, stream_id);
      BlockPool& pool = size <= kSmallSize ? st.small_pool : st.large_pool;
      process_events(st);
      block = take_free_block(st, pool, stream_id, size);
      if (block == nullptr) {
        block = new_segment(st, pool, stream_id, size, n, lock, &oom_message);
      }
      if (block != nullptr) {
        hand_out(st, block, size, n);
        st.live.emplace(block->ptr, block);
      }
      total_allocated = st.stats.allocated_bytes[0].current;
      total_reserved = st.stats.reserved_bytes[0].current;
    }
    if (block == nullptr) {
      // Reported and thrown outside the lock: profiler hooks are not ours.
      c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(size), total_allocated, total_reserved,
                                       device);
      TORCH_CHECK_WITH(OutOfMemoryError, false, oom_message);
    }
    c10::reportMemoryUsageToProfiler(block->ptr, static_cast<int64_t>(block->size), total_allocated,
                                     total_reserved, device);
    return {block->ptr, block->ptr, kDeleters[dev], device};
  }

  // The deleter of device `dev`'s allocations. Runs from tensor destructors,
  // possibly with the GIL held and possibly at interpreter exit: it must not
  // throw.
  void free_on(c10::DeviceIndex dev, void* ptr) noexcept {
    if (ptr == nullptr) return;
    DeviceState* st = devices_[dev].load(std::memory_order_acquire);
    int64_t size = -1;  // stays -1 when `ptr` is not a live allocation of `dev`
    size_t total_allocated = 0, total_reserved = 0;
    if (st != nullptr) {
      std::lock_guard<DeviceLock> lock(st->mutex);
      auto it = st->live.find(ptr);
      if (it != st->live.end()) {
        Block* block = it->second;
        st->live.erase(it);
        size = static_cast<int64_t>(block->size);
        release_block(*st, block);
        total_allocated = st->stats.allocated_bytes[0].current;
        total_reserved = st->stats.reserved_bytes[0].current;
      }
    }
    if (size < 0) {
      // Outside the lock: a warning handler may run Python.
      TORCH_WARN("flagos allocator: free of a pointer it did not allocate (", ptr, "); ignored");
      return;
    }
    c10::reportMemoryUsageToProfiler(ptr, -size, total_allocated, total_reserved,
                                     c10::Device(c10::DeviceType::PrivateUse1, dev));
  }

  // Marks a live block free: back to its pool, or deferred until the other
  // streams that used it are done. Lock held.
  void release_block(DeviceState& st, Block* block) noexcept {
    const StatRows types = stat_types_for(*block->pool);
    block->allocated = false;
    stat_decrease(st.stats.allocation, types, 1);
    stat_decrease(st.stats.allocated_bytes, types, block->size);
    stat_decrease(st.stats.requested_bytes, types, block->requested);
    block->requested = 0;
    if (!block->stream_uses.empty()) {
      defer_until_streams_done(st, block);
    }
    if (block->in_pool()) {
      return_to_pool(st, block);
    }
  }

  // raw_deleter(): a pointer without its device (c10's raw_deallocate).
  void free(void* ptr) noexcept {
    if (ptr == nullptr) return;
    c10::DeviceIndex dev = -1;
    if (!owns(ptr, &dev)) {
      TORCH_WARN("flagos allocator: free of a pointer it did not allocate (", ptr, "); ignored");
      return;
    }
    free_on(dev, ptr);
  }

  bool initialized() override { return runtime_active(); }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    for (int d = 0; d < kMaxDevices; ++d) {
      DeviceState* st = devices_[d].load(std::memory_order_acquire);
      if (st != nullptr) empty_device_cache(*st);
    }
  }

  void empty_device_cache(c10::DeviceIndex device) {
    if (DeviceState* st = existing_state(device)) empty_device_cache(*st);
  }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    // Size-0 storages and memory we did not allocate (from_blob) need nothing.
    if (ptr.get() == nullptr) return;
    const int dev = deleter_device(ptr.get_deleter());
    if (dev < 0) return;
    TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
                "recordStream: expected a flagos stream, got ", stream);
    DeviceState* stp = devices_[dev].load(std::memory_order_acquire);
    if (stp == nullptr) return;
    DeviceState& st = *stp;
    std::lock_guard<DeviceLock> lock(st.mutex);
    auto it = st.live.find(ptr.get());
    if (it == st.live.end()) return;
    // The caller holds the DataPtr, so the block cannot be freed meanwhile.
    Block* block = it->second;
    // A graph pool's block is reused only by captures into that pool, whose
    // work replays in capture order: no event (one recorded on a capturing
    // stream could not even be queried).
    if (block->stream_id < 0) return;
    if (stream.device_index() == block->device && stream.id() == block->stream_id) {
      return;  // the allocation stream orders its own reuse
    }
    if (std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) ==
        block->stream_uses.end()) {
      block->stream_uses.push_back(stream);
    }
  }

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    DeviceState* st = existing_state(resolve(device));
    if (st == nullptr) return DeviceStats();
    std::lock_guard<DeviceLock> lock(st->mutex);
    return st->stats;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    DeviceState* st = existing_state(resolve(device));
    if (st == nullptr) return;
    std::lock_guard<DeviceLock> lock(st->mutex);
    DeviceStats& s = st->stats;
    for (auto member : kStatArrays) {
      for (Stat& stat : s.*member) stat.reset_accumulated();
    }
    s.oversize_allocations.reset_accumulated();
    s.oversize_segments.reset_accumulated();
    s.num_alloc_retries = 0;
    s.num_ooms = 0;
    s.num_sync_all_streams = 0;
    s.num_device_alloc = 0;
    s.num_device_free = 0;
#if TORCH_FL_TORCH_MINOR >= 13
    s.num_oom_rejections = 0;
#endif
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    DeviceState* st = existing_state(resolve(device));
    if (st == nullptr) return;
    std::lock_guard<DeviceLock> lock(st->mutex);
    DeviceStats& s = st->stats;
    for (auto member : kStatArrays) {
      for (Stat& stat : s.*member) stat.reset_peak();
    }
    s.oversize_allocations.reset_peak();
    s.oversize_segments.reset_peak();
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    device = resolve(device);
    CurrentDeviceScope scope(device);
    size_t free_bytes = 0, total_bytes = 0;
    TFL_CALL(device, mem_get_info, &free_bytes, &total_bytes);
    return {free_bytes, total_bytes};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &raw_delete; }

  // Used by Allocator::clone (storage copies): a blocking device-to-device copy.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count == 0) return;
    c10::DeviceIndex dst_dev = device_of(dest);
    c10::DeviceIndex src_dev = device_of(src);
    if (dst_dev < 0) dst_dev = current_device();
    if (src_dev < 0) src_dev = dst_dev;
    if (dst_dev == src_dev) {
      CurrentDeviceScope scope(dst_dev);
      TFL_CALL(dst_dev, memcpy, dest, src, count, TFL_MEMCPY_DEVICE_TO_DEVICE);
      return;
    }
    if (has_capability(TFL_CAP_PEER_COPY)) {
      CurrentDeviceScope scope(dst_dev);
      TFL_CALL(dst_dev, memcpy_peer_async, dest, dst_dev, src, src_dev, count, nullptr);
      TFL_CALL(dst_dev, stream_synchronize, nullptr);
      return;
    }
    // No peer copies on this runtime: bounce through host memory.
    std::vector<char> staging(count);
    {
      CurrentDeviceScope scope(src_dev);
      TFL_CALL(src_dev, memcpy, staging.data(), src, count, TFL_MEMCPY_DEVICE_TO_HOST);
    }
    CurrentDeviceScope scope(dst_dev);
    TFL_CALL(dst_dev, memcpy, dest, staging.data(), count, TFL_MEMCPY_HOST_TO_DEVICE);
  }

  // Searches every device's map (the raw interface and pointer queries only:
  // rare, unlike frees, which know their device).
  bool owns(const void* ptr, c10::DeviceIndex* device) const {
    for (int d = 0; d < kMaxDevices; ++d) {
      DeviceState* st = devices_[d].load(std::memory_order_acquire);
      if (st == nullptr) continue;
      std::lock_guard<DeviceLock> g(st->mutex);
      if (st->live.count(const_cast<void*>(ptr)) != 0) {
        if (device != nullptr) *device = static_cast<c10::DeviceIndex>(d);
        return true;
      }
    }
    return false;
  }

 private:
  static c10::DeviceIndex resolve(c10::DeviceIndex device) {
    return device < 0 ? current_device() : device;
  }

  DeviceState* existing_state(c10::DeviceIndex device) {
    TORCH_CHECK(device >= 0 && device < kMaxDevices, "invalid flagos device index ", int(device));
    return devices_[device].load(std::memory_order_acquire);
  }

  DeviceState& state(c10::DeviceIndex device) {
    if (DeviceState* st = existing_state(device)) return *st;
    std::lock_guard<std::mutex> g(create_mutex_);
    DeviceState* st = devices_[device].load(std::memory_order_acquire);
    if (st == nullptr) {
      st = new DeviceState(device);  // never deleted (see the header)
      devices_[device].store(st, std::memory_order_release);
      if (g_device_limit.load(std::memory_order_relaxed) <= device) {
        g_device_limit.store(device + 1, std::memory_order_release);
      }
    }
    return *st;
  }

  c10::DeviceIndex device_of(const void* ptr) const {
    if (c10::DeviceIndex dev = -1; owns(ptr, &dev)) return dev;
    tfl_pointer_kind kind = TFL_POINTER_UNKNOWN;
    int device = -1;
    if (runtime().pointer_info(ptr, &kind, &device) == TFL_OK && kind == TFL_POINTER_DEVICE) {
      return static_cast<c10::DeviceIndex>(device);
    }
    return -1;
  }

  // Best-fit cached block on the same stream, removed from the pool.
  static Block* take_free_block(DeviceState& st, BlockPool& pool, c10::StreamId stream_id,
                                size_t size) {
    Block key(0, stream_id, size, nullptr, &pool);
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream_id != stream_id) return nullptr;
    Block* block = *it;
    pool_erase(st, pool, it);
    return block;
  }

  // Calls runtime malloc on `device`, counting successful calls.
  static tfl_status runtime_malloc(DeviceState& st, void** ptr, size_t bytes) {
    CurrentDeviceScope scope(st.device);
    const tfl_status status = runtime().malloc(ptr, bytes);
    if (status == TFL_OK) ++st.stats.num_device_alloc;
    return status;
  }

  // A fresh segment for `size` bytes (as one block, not yet in any pool), or
  // nullptr after an OOM that survived a cache flush (*oom_message set).
  Block* new_segment(DeviceState& st, BlockPool& pool, c10::StreamId stream_id, size_t size,
                     size_t requested, DeviceLockHold& lock, std::string* oom_message) {
    size_t seg_size = segment_size_for(pool, size);
    void* ptr = nullptr;
    tfl_status status = runtime_malloc(st, &ptr, seg_size);
    if (status == TFL_ERROR_OUT_OF_MEMORY) {
      // Flush the cache (waiting for deferred frees) and retry once.
      ++st.stats.num_alloc_retries;
      release_cached(st, lock);
      if (Block* cached = take_free_block(st, pool, stream_id, size)) return cached;
      status = runtime_malloc(st, &ptr, seg_size);
      if (status == TFL_ERROR_OUT_OF_MEMORY && seg_size > size) {
        // The rounding, not the request, does not fit (a device smaller than a
        // segment, or one nearly full): the request alone, as its own segment.
        status = runtime_malloc(st, &ptr, size);
        if (status == TFL_OK) seg_size = size;
      }
      if (status == TFL_ERROR_OUT_OF_MEMORY) {
        // Read the runtime's message first: later runtime calls may replace it.
        std::string runtime_text = runtime().last_error();
        ++st.stats.num_ooms;
        *oom_message = describe_oom(st, requested, runtime_text);
        return nullptr;
      }
    }
    if (status != TFL_OK) throw_runtime_error(status, "malloc", st.device);
    Block* block = make_block(st, stream_id, seg_size, ptr, &pool);
    const StatRows types = stat_types_for(pool);
    stat_increase(st.stats.segment, types, 1);
    stat_increase(st.stats.reserved_bytes, types, seg_size);
    return block;
  }

  std::string describe_oom(DeviceState& st, size_t requested, const std::string& runtime_text) {
    std::string capacity = "unknown", free_text = "unknown";
    {
      CurrentDeviceScope scope(st.device);
      size_t free_bytes = 0, total_bytes = 0;
      if (runtime().mem_get_info(&free_bytes, &total_bytes) == TFL_OK) {
        capacity = format_size(total_bytes);
        free_text = format_size(free_bytes);
      }
    }
    std::string msg = "flagos out of memory. Tried to allocate " + format_size(requested) + " (" +
                      std::to_string(requested) + " bytes) (flagos:" + std::to_string(st.device) +
                      "; runtime '" + runtime_name() + "'). Device capacity " + capacity + "; " +
                      free_text + " free; " + format_size(st.stats.reserved_bytes[0].current) +
                      " reserved by torch-fl, " + format_size(st.stats.allocated_bytes[0].current) +
                      " allocated.";
    if (!runtime_text.empty()) msg += " " + runtime_text;
    return msg;
  }

  // Marks `block` (taken from a pool or a fresh segment) allocated for
  // `size` bytes, splitting off the rest back into the pool.
  static void hand_out(DeviceState& st, Block* block, size_t size, size_t requested) {
    BlockPool& pool = *block->pool;
    const StatRows types = stat_types_for(pool);
    if (block->is_split()) {
      // It was counted as an inactive split block while it sat in the pool.
      stat_decrease(st.stats.inactive_split, types, 1);
      stat_decrease(st.stats.inactive_split_bytes, types, block->size);
    }
    if (should_split(block, size)) {
      Block* rest = make_block(st, block->stream_id, block->size - size,
                               static_cast<char*>(block->ptr) + size, &pool);
      rest->prev = block;
      rest->next = block->next;
      if (rest->next != nullptr) rest->next->prev = rest;
      block->next = rest;
      block->size = size;
      pool_insert(st, pool, rest);
      stat_increase(st.stats.inactive_split, types, 1);
      stat_increase(st.stats.inactive_split_bytes, types, rest->size);
    }
    block->allocated = true;
    block->requested = requested;
    stat_increase(st.stats.allocation, types, 1);
    stat_increase(st.stats.allocated_bytes, types, block->size);
    stat_increase(st.stats.requested_bytes, types, requested);
    stat_increase(st.stats.active, types, 1);
    stat_increase(st.stats.active_bytes, types, block->size);
  }

  // Records an event on every other stream that used the block; the block
  // returns to the pool once they all complete (process_events).
  void defer_until_streams_done(DeviceState& st, Block* block) noexcept {
    for (const c10::Stream& s : block->stream_uses) {
      const c10::DeviceIndex ev_dev = s.device_index();
      if (ev_dev == st.device && capture_stream_tag(st, s.id()) != s.id()) {
        st.after_capture.emplace_back(block, s.id());
        ++block->pending_events;
        continue;
      }
      try {
        CurrentDeviceScope scope(ev_dev);
        tfl_event ev = events_.acquire(ev_dev);
        const tfl_status status = runtime().event_record(ev, native_stream(s));
        if (status != TFL_OK) {
          events_.release(ev_dev, ev);
          throw_runtime_error(status, "event_record", ev_dev);
        }
        st.pending.push_back({ev, ev_dev, block, st.next_seq++});
        ++block->pending_events;
      } catch (const std::exception& e) {
        // Cannot defer through an event: wait for the stream instead so the
        // block is safe to reuse; if even that fails, never reuse it.
        bool synced = false;
        try {
          CurrentDeviceScope scope(ev_dev);
          synced = runtime().stream_synchronize(native_stream(s)) == TFL_OK;
        } catch (...) {
        }
        if (!synced) {
          TORCH_WARN("flagos allocator: could not order the free of a block used on ", s, " (",
                     e.what(), "); the block is not reused");
          block->orphaned = true;
        }
      }
    }
    block->stream_uses.clear();
  }

  // Puts a free block (no pending events) back into its pool, merging it with
  // free neighbours of its segment.
  static void return_to_pool(DeviceState& st, Block* block) {
    BlockPool& pool = *block->pool;
    const StatRows types = stat_types_for(pool);
    const size_t freed_size = block->size;
    for (Block* neighbour : {block->prev, block->next}) {
      if (neighbour == nullptr || !neighbour->in_pool()) continue;
      if (auto it = pool.blocks.find(neighbour); it != pool.blocks.end()) {
        pool_erase(st, pool, it);
      }
      // A free neighbour is part of a split segment, so it was inactive_split.
      stat_decrease(st.stats.inactive_split, types, 1);
      stat_decrease(st.stats.inactive_split_bytes, types, neighbour->size);
      if (neighbour == block->prev) {
        block->ptr = neighbour->ptr;
        block->prev = neighbour->prev;
        if (block->prev != nullptr) block->prev->next = block;
      } else {
        block->next = neighbour->next;
        if (block->next != nullptr) block->next->prev = block;
      }
      block->size += neighbour->size;
      retire_block(st, neighbour);
    }
    if (block->is_split()) {
      stat_increase(st.stats.inactive_split, types, 1);
      stat_increase(st.stats.inactive_split_bytes, types, block->size);
    }
    stat_decrease(st.stats.active, types, 1);
    stat_decrease(st.stats.active_bytes, types, freed_size);
    block->stream_uses.clear();
    pool_insert(st, pool, block);
  }

  // Returns blocks whose deferred-free events have all completed. Entries
  // whose seq is in `completed` were already waited for and are not queried.
  // Lock held.
  void process_events(DeviceState& st, const std::vector<uint64_t>* completed = nullptr) {
    if (st.pending.empty()) return;
    size_t keep = 0;
    tfl_status failure = TFL_OK;
    c10::DeviceIndex failure_device = st.device;
    for (size_t i = 0; i < st.pending.size(); ++i) {
      PendingFree& p = st.pending[i];
      const bool waited =
          completed != nullptr && std::binary_search(completed->begin(), completed->end(), p.seq);
      const tfl_status status = waited ? TFL_OK : runtime().event_query(p.event);
      if (status == TFL_ERROR_NOT_READY || (status != TFL_OK && failure != TFL_OK)) {
        st.pending[keep++] = p;
        continue;
      }
      if (status != TFL_OK) {
        // Keep the entry (the block stays unavailable) and report after the
        // list is consistent again.
        failure = status;
        failure_device = p.event_device;
        st.pending[keep++] = p;
        continue;
      }
      events_.release(p.event_device, p.event);
      Block* block = p.block;
      if (--block->pending_events == 0 && !block->orphaned) return_to_pool(st, block);
    }
    st.pending.resize(keep);
    if (failure != TFL_OK) throw_runtime_error(failure, "event_query", failure_device);
  }

  // Waits for all deferred frees (lock released while waiting), then frees
  // every cached segment that is entirely unused. Lock held on entry and exit.
  void release_cached(DeviceState& st, DeviceLockHold& lock) {
    if (!st.pending.empty()) {
      std::vector<std::pair<uint64_t, tfl_event>> waits;
      waits.reserve(st.pending.size());
      for (const PendingFree& p : st.pending) waits.emplace_back(p.seq, p.event);
      ++st.stats.num_sync_all_streams;
      lock.unlock();
      // Entries are identified by seq: another thread may process (and
      // recycle the event of) an entry while the lock is released.
      std::vector<uint64_t> completed;
      for (const auto& [seq, ev] : waits) {
        // Failures are reported by the event_query of the entry left pending.
        if (runtime().event_synchronize(ev) == TFL_OK) completed.push_back(seq);
      }
      lock.lock();
      std::sort(completed.begin(), completed.end());
      process_events(st, &completed);
    }
    // A cached segment's last use may still be queued: the block went back to the pool when its
    // tensor died, not when the stream passed it (the allocation stream orders its own reuse).
    // The runtime's free waits for nothing (unlike cudaFree, which synchronizes), so the device
    // is synchronized first -- without the lock, as stream work (host functions) may allocate.
    // The segments are taken out of the pools before, so nobody can reuse them meanwhile.
    std::vector<Block*> segments;
    take_free_segments(st, st.small_pool, &segments);
    take_free_segments(st, st.large_pool, &segments);
    if (segments.empty()) return;
    lock.unlock();
    tfl_status failure = TFL_OK;
    const char* failed_call = "device_synchronize";
    {
      CurrentDeviceScope scope(st.device);
      failure = runtime().device_synchronize();
      if (failure == TFL_OK) failed_call = "free";
      // After a failed synchronize the memory may still be in use: keep it cached rather than
      // free it under running work.
      for (Block* block : segments) {
        if (failure != TFL_OK) break;
        failure = runtime().free(block->ptr);
        if (failure != TFL_OK) break;
        block->ptr = nullptr;
      }
    }
    lock.lock();
    for (Block* block : segments) {
      if (block->ptr != nullptr) {  // not freed (see above): cached again, for a later retry
        block->pool->blocks.insert(block);
        continue;
      }
      const StatRows types = stat_types_for(*block->pool);
      ++st.stats.num_device_free;
      stat_decrease(st.stats.segment, types, 1);
      stat_decrease(st.stats.reserved_bytes, types, block->size);
      delete block;
    }
    if (failure != TFL_OK) throw_runtime_error(failure, failed_call, st.device);
  }

  // Moves every cached segment that is entirely unused out of `pool` into
  // `out`, except those of a graph pool a graph still holds.
  static void take_free_segments(DeviceState& st, BlockPool& pool, std::vector<Block*>* out) {
    for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
      Block* block = *it;
      if (block->is_split() || (block->stream_id < 0 && st.graph_pools.count(block->stream_id))) {
        ++it;
        continue;
      }
      out->push_back(block);
      it = pool.blocks.erase(it);
    }
  }

  void empty_device_cache(DeviceState& st) {
    DeviceLockHold lock(st.mutex);
    release_cached(st, lock);
  }

 public:
  void begin_graph_pool(c10::DeviceIndex device, c10::StreamId stream_id, uint64_t pool) {
    DeviceState& st = state(device);
    std::lock_guard<DeviceLock> lock(st.mutex);
    for (const auto& entry : st.capturing) {
      TORCH_CHECK(entry.first != stream_id, "flagos:", int(device),
                  ": this stream is already capturing a device graph");
    }
    ++st.graph_pools[pool_tag(pool)];
    st.capturing.emplace_back(stream_id, pool_tag(pool));
  }

  void end_graph_pool(c10::DeviceIndex device, c10::StreamId stream_id) {
    DeviceState& st = state(device);
    std::lock_guard<DeviceLock> lock(st.mutex);
    auto& v = st.capturing;
    v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& e) { return e.first == stream_id; }),
            v.end());
    // The frees that waited for this capture to end: ordered on the stream now.
    auto& after = st.after_capture;
    for (auto it = after.begin(); it != after.end();) {
      if (it->second != stream_id) {
        ++it;
        continue;
      }
      Block* block = it->first;
      it = after.erase(it);
      --block->pending_events;
      block->stream_uses.assign(
          1, c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device),
                         stream_id));
      defer_until_streams_done(st, block);
      if (block->in_pool()) return_to_pool(st, block);
    }
  }

  void release_graph_pool(c10::DeviceIndex device, uint64_t pool) {
    DeviceState* st = existing_state(device);
    if (st == nullptr) return;
    std::lock_guard<DeviceLock> lock(st->mutex);
    auto it = st->graph_pools.find(pool_tag(pool));
    if (it != st->graph_pools.end() && --it->second == 0) st->graph_pools.erase(it);
  }

 private:
  // The pool tag of allocations on `stream_id` while it captures. Lock held.
  static c10::StreamId capture_stream_tag(const DeviceState& st, c10::StreamId stream_id) {
    for (const auto& [captured, tag] : st.capturing) {
      if (captured == stream_id) return tag;
    }
    return stream_id;
  }

  std::mutex create_mutex_;
  std::array<std::atomic<DeviceState*>, kMaxDevices> devices_{};
  EventCache events_;
};

FlagosCachingAllocator* instance() {
  // Heap-allocated and never destroyed: tensors freed during interpreter
  // teardown still reach a live allocator, and nothing is freed at exit.
  static FlagosCachingAllocator* alloc = new FlagosCachingAllocator();
  return alloc;
}

void raw_delete(void* ptr) { instance()->free(ptr); }

template <int D>
void raw_delete_on(void* ptr) {
  instance()->free_on(static_cast<c10::DeviceIndex>(D), ptr);
}

}  // namespace

// The device allocator flagos tensors come from, chosen once at activation:
// this pool, or on the delegate runtime the mirrored backend's
// (glue/mirror/mirror_allocator.h); g_pool_replaced says it is not this pool.
std::atomic<c10::DeviceAllocator*> g_active{nullptr};
std::atomic<bool> g_pool_replaced{false};

c10::DeviceAllocator* caching_allocator() {
  c10::DeviceAllocator* a = g_active.load(std::memory_order_acquire);
  return C10_LIKELY(a != nullptr) ? a : instance();
}

void install_device_allocator(c10::DeviceAllocator* allocator) {
  g_pool_replaced.store(true, std::memory_order_relaxed);
  g_active.store(allocator, std::memory_order_release);
  // What c10::GetAllocator(PrivateUse1) answers (priority above the static
  // registration of this pool).
  c10::SetAllocator(c10::DeviceType::PrivateUse1, allocator, /*priority=*/1);
}

void empty_cache_all() { caching_allocator()->emptyCache({0, 0}); }

void empty_cache(c10::DeviceIndex device) {
  // c10's DeviceAllocator empties every device at once; this pool can do one.
  if (g_pool_replaced.load(std::memory_order_relaxed)) return empty_cache_all();
  instance()->empty_device_cache(device < 0 ? current_device() : device);
}

c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device) {
  return caching_allocator()->getDeviceStats(device);
}

void reset_peak_stats(c10::DeviceIndex device) { caching_allocator()->resetPeakStats(device); }

void reset_accumulated_stats(c10::DeviceIndex device) {
  caching_allocator()->resetAccumulatedStats(device);
}

std::pair<size_t, size_t> device_memory_info(c10::DeviceIndex device) {
  return caching_allocator()->getMemoryInfo(device);
}

c10::DataPtr allocate_on_current(c10::DeviceIndex device, c10::StreamId stream_id, size_t n) {
  if (C10_UNLIKELY(g_pool_replaced.load(std::memory_order_relaxed))) {
    return caching_allocator()->allocate(n);
  }
  return instance()->allocate_on_stream(device, stream_id, n);
}

c10::DataPtr allocate_for_host_writer(c10::DeviceIndex device, c10::StreamId stream_id, size_t n) {
  check_not_capturing("a kernel writing its result from the host");
  c10::DataPtr block = allocate_on_current(device, stream_id, n);
  const c10::Stream stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device),
                           stream_id);
  TFL_CALL(device, stream_synchronize, native_stream(stream));
  return block;
}

uint64_t new_graph_pool_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void begin_graph_pool(c10::DeviceIndex device, c10::StreamId stream_id, uint64_t pool) {
  TORCH_CHECK(pool > 0, "flagos: graph pool ids start at 1");
  if (g_pool_replaced.load(std::memory_order_relaxed)) return;  // the mirrored pool's own graphs
  instance()->begin_graph_pool(device, stream_id, pool);
}

void end_graph_pool(c10::DeviceIndex device, c10::StreamId stream_id) {
  if (g_pool_replaced.load(std::memory_order_relaxed)) return;
  instance()->end_graph_pool(device, stream_id);
}

void release_graph_pool(c10::DeviceIndex device, uint64_t pool) {
  if (g_pool_replaced.load(std::memory_order_relaxed)) return;
  instance()->release_graph_pool(device, pool);
}

bool is_pool_deleter(c10::DeleterFnPtr fn) { return deleter_device(fn) >= 0; }

bool allocator_owns(const void* ptr, c10::DeviceIndex* device) {
  // Another installed pool has no device-generic query.
  if (g_pool_replaced.load(std::memory_order_relaxed)) return false;
  return instance()->owns(ptr, device);
}

}  // namespace torch_fl

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, torch_fl::instance())
