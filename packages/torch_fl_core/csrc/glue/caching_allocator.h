// The flagos caching device allocator: one memory pool per device, stream
// aware, registered for PrivateUse1 (REGISTER_ALLOCATOR in the .cpp).
//
// Pools follow the CUDA scheme in a simpler form: requests round up to 512
// bytes; requests of at most 1 MiB are carved out of 2 MiB segments ("small
// pool"), larger ones get their own segment rounded up to 2 MiB ("large pool")
// that may later be split for smaller large requests. A freed block goes back
// to the pool of the stream it was allocated on; blocks used on other streams
// (recordStream) return only after events recorded on those streams complete.
// Each segment is exactly one runtime malloc, so num_device_alloc /
// num_device_free count runtime calls.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstddef>
#include <utility>

namespace torch_fl {

// The PrivateUse1 device allocator flagos tensors come from: this pool (a
// process-lifetime object, never destroyed: the runtime may be gone at exit,
// so cached memory is leaked on purpose rather than freed from a static
// destructor), unless activation installed another.
c10::DeviceAllocator* caching_allocator();
// Installs `allocator` (process lifetime) in place of this pool; called once at
// activation, before the runtime is published (the delegate runtime installs
// the mirrored backend's pool: glue/mirror/mirror_mode.h).
void install_device_allocator(c10::DeviceAllocator* allocator);

// Returns every unused cached segment of every device to the runtime, after
// waiting for the deferred (recordStream) frees.
void empty_cache_all();
void empty_cache(c10::DeviceIndex device);

// Statistics for the control plane (device -1: the current device).
c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device);
void reset_peak_stats(c10::DeviceIndex device);
void reset_accumulated_stats(c10::DeviceIndex device);
// (free, total) bytes of the device as the runtime reports them.
std::pair<size_t, size_t> device_memory_info(c10::DeviceIndex device);

// caching_allocator()->allocate(n) for a caller that has already made `device`
// current (box:cpu host results) and looked up its current stream: skips the
// runtime's current-device query and a second current_stream lookup.
// `stream_id` must be the id of current_stream(device) on the calling thread.
c10::DataPtr allocate_on_current(c10::DeviceIndex device, c10::StreamId stream_id, size_t n);

// An allocation a host thread writes at once, outside stream order: a host
// kernel's results and scratch on host-addressable memory. A cached block is
// handed out again in stream order, so work queued on the stream before it was
// freed (an async copy out of it, from any thread) may not have run yet.
// Producers that enqueue on the stream run behind that work anyway; a host
// writer does not, so this waits for the stream's queued work once it holds
// the block. `stream_id` and current-device rules as for allocate_on_current.
c10::DataPtr allocate_for_host_writer(c10::DeviceIndex device, c10::StreamId stream_id, size_t n);

// Device graphs' private pools. Between begin and end, allocations on
// `device` whose stream is `stream_id` (the capturing stream) come from pool
// `pool`, whose blocks nothing outside it reuses and which stays cached until
// every graph that began a capture into it released it: a replay writes the
// memory its capture was given. Pool ids come from new_graph_pool_id.
uint64_t new_graph_pool_id();
void begin_graph_pool(c10::DeviceIndex device, c10::StreamId stream_id, uint64_t pool);
void end_graph_pool(c10::DeviceIndex device, c10::StreamId stream_id);
void release_graph_pool(c10::DeviceIndex device, uint64_t pool);

// Whether `fn` is the deleter of this allocator's allocations (one per device:
// see caching_allocator.cpp).
bool is_pool_deleter(c10::DeleterFnPtr fn);

// Whether `ptr` is the start of a live allocation made by this allocator
// (for getDeviceFromPtr-style checks), and its device if so.
bool allocator_owns(const void* ptr, c10::DeviceIndex* device = nullptr);

}  // namespace torch_fl
