// Pinned host allocator for flagos (see host_allocator.h).
//
// One mutex guards the block table, the free lists, the pending-event list
// and the stats. host_malloc/host_free (possibly slow: pinning) and
// event_synchronize run with it released; event_record/event_query (they only
// enqueue or poll) run under it. No GIL, no Python.
#include "glue/host_allocator.h"

#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace torch_fl {
namespace {

constexpr size_t kMinHostBlock = 512;

struct HostBlock {
  HostBlock(void* p, size_t s) : ptr(p), size(s) {}
  void* ptr;
  size_t size;  // rounded (power of two) size actually reserved
  bool allocated = false;
  bool orphaned = false;  // could not be made safe to reuse: never reused
  int pending_events = 0;
  std::vector<c10::Stream> streams;  // streams that used it (record_event)
};

struct PendingEvent {
  tfl_event event;
  c10::DeviceIndex device;
  HostBlock* block;
  uint64_t seq;  // unique per record: event handles are recycled, entries are not
};

int64_t micros_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start)
      .count();
}

void host_raw_delete(void* ptr);

class FlagosHostAllocator final : public at::HostAllocator {
 public:
  // Must not touch the runtime: constructed during static initialization.
  FlagosHostAllocator() = default;

  at::DataPtr allocate(size_t n) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &host_raw_delete, cpu};
    // Beyond this, power-of-two rounding would overflow size_t.
    TORCH_CHECK_WITH(OutOfMemoryError, n <= (SIZE_MAX >> 1),
                     "flagos pinned memory: cannot allocate ", n, " bytes");
    const size_t size = c10::llvm::PowerOf2Ceil(std::max(n, kMinHostBlock));
    {
      std::lock_guard<std::mutex> g(mutex_);
      process_events();
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        HostBlock* block = it->second.back();
        it->second.pop_back();
        mark_active(block);
        return {block->ptr, block->ptr, &host_raw_delete, cpu};
      }
    }
    void* ptr = nullptr;
    tfl_status status = timed_host_malloc(&ptr, size);
    if (status == TFL_ERROR_OUT_OF_MEMORY) {
      // Cached pinned blocks may be what fills the host: drop them, retry once.
      empty_cache();
      status = timed_host_malloc(&ptr, size);
    }
    if (status != TFL_OK) throw_runtime_error(status, "host_malloc", -1);
    std::lock_guard<std::mutex> g(mutex_);
    auto* block = new HostBlock(ptr, size);
    blocks_.emplace(reinterpret_cast<uintptr_t>(ptr), block);
    stats_.allocations.increase(1);
    stats_.allocated_bytes.increase(size);
    ++stats_.num_host_alloc;
    mark_active(block);
    return {block->ptr, block->ptr, &host_raw_delete, cpu};
  }

  // The deleter; runs from tensor destructors (possibly at exit): no throw.
  void free(void* ptr) noexcept {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> g(mutex_);
    HostBlock* block = find_exact(ptr);
    if (block == nullptr || !block->allocated) {
      TORCH_WARN("flagos pinned allocator: free of a pointer it does not own (", ptr, "); ignored");
      return;
    }
    block->allocated = false;
    stats_.active_requests.decrease(1);
    stats_.active_bytes.decrease(block->size);
    for (const c10::Stream& s : block->streams) {
      record_on(block, s);
    }
    block->streams.clear();
    if (block->pending_events == 0 && !block->orphaned) free_[block->size].push_back(block);
  }

  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    if (stream.device_type() != c10::DeviceType::PrivateUse1) return false;
    std::lock_guard<std::mutex> g(mutex_);
    HostBlock* block = ctx != nullptr ? find_exact(ctx) : nullptr;
    if (block == nullptr && ptr != nullptr) block = find_exact(ptr);
    if (block == nullptr || !block->allocated) return false;
    if (std::find(block->streams.begin(), block->streams.end(), stream) == block->streams.end()) {
      block->streams.push_back(stream);
    }
    return true;
  }

  void empty_cache() override {
    std::vector<std::pair<uint64_t, tfl_event>> waits;
    {
      std::lock_guard<std::mutex> g(mutex_);
      for (const PendingEvent& p : pending_) waits.emplace_back(p.seq, p.event);
    }
    // Wait for copies still using freed blocks, without holding the lock.
    // Entries are identified by seq: another thread may process (and recycle
    // the event of) an entry meanwhile.
    std::vector<uint64_t> completed;
    for (const auto& [seq, ev] : waits) {
      if (runtime().event_synchronize(ev) == TFL_OK) completed.push_back(seq);
    }
    std::sort(completed.begin(), completed.end());
    std::vector<HostBlock*> release;
    {
      std::lock_guard<std::mutex> g(mutex_);
      process_events(&completed);
      for (auto& [size, list] : free_) {
        for (HostBlock* block : list) {
          blocks_.erase(reinterpret_cast<uintptr_t>(block->ptr));
          release.push_back(block);
        }
        list.clear();
      }
    }
    tfl_status failure = TFL_OK;
    for (HostBlock* block : release) {
      const auto start = std::chrono::steady_clock::now();
      const tfl_status status = runtime().host_free(block->ptr);
      const int64_t took = micros_since(start);
      std::lock_guard<std::mutex> g(mutex_);
      if (status != TFL_OK) {
        // Still ours: back in the cache, so a later empty_cache frees it (as
        // the device allocator keeps a segment whose free failed); reported
        // after the loop.
        blocks_.emplace(reinterpret_cast<uintptr_t>(block->ptr), block);
        free_[block->size].push_back(block);
        failure = status;
        continue;
      }
      stats_.host_free_time.increase(took);
      stats_.allocations.decrease(1);
      stats_.allocated_bytes.decrease(block->size);
      ++stats_.num_host_free;
      delete block;
    }
    if (failure != TFL_OK) throw_runtime_error(failure, "host_free", -1);
  }

  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> g(mutex_);
    return stats_;
  }

  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> g(mutex_);
    stats_.active_requests.reset_accumulated();
    stats_.active_bytes.reset_accumulated();
    stats_.allocations.reset_accumulated();
    stats_.allocated_bytes.reset_accumulated();
    stats_.host_alloc_time.reset_accumulated();
    stats_.host_free_time.reset_accumulated();
    stats_.num_host_alloc = 0;
    stats_.num_host_free = 0;
  }

  void reset_peak_stats() override {
    std::lock_guard<std::mutex> g(mutex_);
    stats_.active_requests.reset_peak();
    stats_.active_bytes.reset_peak();
    stats_.allocations.reset_peak();
    stats_.allocated_bytes.reset_peak();
    stats_.host_alloc_time.reset_peak();
    stats_.host_free_time.reset_peak();
  }

  c10::DeleterFnPtr raw_deleter() const override { return &host_raw_delete; }

  // Pinned memory is ordinary host memory to the CPU.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  bool contains(const void* p) {
    std::lock_guard<std::mutex> g(mutex_);
    const auto addr = reinterpret_cast<uintptr_t>(p);
    auto it = blocks_.upper_bound(addr);
    if (it == blocks_.begin()) return false;
    --it;
    return addr < it->first + it->second->size;
  }

 private:
  HostBlock* find_exact(const void* p) {
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(p));
    return it == blocks_.end() ? nullptr : it->second;
  }

  void mark_active(HostBlock* block) {
    block->allocated = true;
    stats_.active_requests.increase(1);
    stats_.active_bytes.increase(block->size);
  }

  tfl_status timed_host_malloc(void** ptr, size_t size) {
    const auto start = std::chrono::steady_clock::now();
    const tfl_status status = runtime().host_malloc(ptr, size);
    if (status == TFL_OK) {
      const int64_t took = micros_since(start);
      std::lock_guard<std::mutex> g(mutex_);
      stats_.host_alloc_time.increase(took);
    }
    return status;
  }

  // Records an event on `s` so the block returns to the cache only after the
  // work queued on `s` so far (the async copies) is done. Lock held.
  void record_on(HostBlock* block, const c10::Stream& s) noexcept {
    const c10::DeviceIndex dev = s.device_index();
    try {
      CurrentDeviceScope scope(dev);
      tfl_event ev = nullptr;
      auto& cache = event_cache_[dev];
      if (!cache.empty()) {
        ev = cache.back();
        cache.pop_back();
      } else {
        TFL_CALL(dev, event_create, &ev, TFL_EVENT_DISABLE_TIMING);
      }
      const tfl_status status = runtime().event_record(ev, native_stream(s));
      if (status != TFL_OK) {
        cache.push_back(ev);
        throw_runtime_error(status, "event_record", dev);
      }
      pending_.push_back({ev, dev, block, next_seq_++});
      ++block->pending_events;
    } catch (const std::exception& e) {
      // No event: wait for the stream instead; if that fails too, the block
      // is never reused (a leak beats handing out memory a copy still uses).
      bool synced = false;
      try {
        CurrentDeviceScope scope(dev);
        synced = runtime().stream_synchronize(native_stream(s)) == TFL_OK;
      } catch (...) {
      }
      if (!synced) {
        TORCH_WARN("flagos pinned allocator: could not order the free of a block used on ", s, " (",
                   e.what(), "); the block is not reused");
        block->orphaned = true;
      }
    }
  }

  // Moves blocks whose events all completed into the free lists; entries
  // whose seq is in `completed` were already waited for. Lock held.
  void process_events(const std::vector<uint64_t>* completed = nullptr) {
    if (pending_.empty()) return;
    size_t keep = 0;
    tfl_status failure = TFL_OK;
    c10::DeviceIndex failure_device = -1;
    for (size_t i = 0; i < pending_.size(); ++i) {
      PendingEvent& p = pending_[i];
      const bool waited =
          completed != nullptr && std::binary_search(completed->begin(), completed->end(), p.seq);
      const tfl_status status = waited ? TFL_OK : runtime().event_query(p.event);
      if (status != TFL_OK) {
        if (status != TFL_ERROR_NOT_READY && failure == TFL_OK) {
          failure = status;
          failure_device = p.device;
        }
        pending_[keep++] = p;
        continue;
      }
      event_cache_[p.device].push_back(p.event);
      HostBlock* block = p.block;
      if (--block->pending_events == 0 && !block->orphaned) free_[block->size].push_back(block);
    }
    pending_.resize(keep);
    if (failure != TFL_OK) throw_runtime_error(failure, "event_query", failure_device);
  }

  std::mutex mutex_;
  std::map<uintptr_t, HostBlock*> blocks_;  // every block by address (interior lookups)
  std::unordered_map<size_t, std::vector<HostBlock*>> free_;  // cached, by size
  std::vector<PendingEvent> pending_;
  uint64_t next_seq_ = 0;
  std::unordered_map<c10::DeviceIndex, std::vector<tfl_event>> event_cache_;
  at::HostStats stats_;
};

FlagosHostAllocator* instance() {
  // Never destroyed: pinned tensors freed during interpreter teardown still
  // find a live allocator, and nothing is returned to a runtime that may be
  // gone at exit.
  static FlagosHostAllocator* alloc = new FlagosHostAllocator();
  return alloc;
}

void host_raw_delete(void* ptr) { instance()->free(ptr); }

// The host allocator flagos pinned memory comes from, chosen once at
// activation: this one, or on the delegate runtime the mirrored backend's
// (glue/mirror/mirror_host_allocator.h).
std::atomic<at::HostAllocator*> g_active{nullptr};

at::HostAllocator* active() {
  at::HostAllocator* a = g_active.load(std::memory_order_acquire);
  return C10_LIKELY(a != nullptr) ? a : instance();
}

}  // namespace

at::Allocator* pinned_host_allocator() { return active(); }

void install_host_allocator(at::HostAllocator* allocator) {
  g_active.store(allocator, std::memory_order_release);
  at::setHostAllocator(at::kPrivateUse1, allocator, /*priority=*/1);
}

bool is_pinned_ptr(const void* p) {
  if (p == nullptr) return false;
  try {
    if (instance()->contains(p)) return true;
    if (!runtime_active()) return false;
    tfl_pointer_kind kind = TFL_POINTER_UNKNOWN;
    int device = -1;
    return runtime().pointer_info(p, &kind, &device) == TFL_OK && kind == TFL_POINTER_HOST;
  } catch (...) {
    return false;
  }
}

bool record_host_event(void* ptr, void* ctx, c10::Stream s) {
  return active()->record_event(ptr, ctx, s);
}

void empty_host_cache() { active()->empty_cache(); }

at::HostStats host_stats() { return active()->get_stats(); }

void reset_host_accumulated_stats() { active()->reset_accumulated_stats(); }

void reset_host_peak_stats() { active()->reset_peak_stats(); }

}  // namespace torch_fl

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, torch_fl::instance())
