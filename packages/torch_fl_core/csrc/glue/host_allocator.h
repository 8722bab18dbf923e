// Pinned (page-locked) host memory for flagos: an at::HostAllocator over the
// runtime's host_malloc, registered with REGISTER_HOST_ALLOCATOR for
// PrivateUse1 (in the .cpp).
//
// Freed blocks are cached by size (rounded up to a power of two). A block that
// an async copy used (record_host_event) is reused only after events recorded
// on those streams at free time have completed, so a later pin_memory() never
// hands out a buffer a copy is still reading or writing.
#pragma once

#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

namespace torch_fl {

// The PrivateUse1 host allocator: this one (never destroyed; see the .cpp),
// unless activation installed another.
at::Allocator* pinned_host_allocator();
// Installs `allocator` (process lifetime) in place of this one; called once at
// activation, before the runtime is published.
void install_host_allocator(at::HostAllocator* allocator);

// True for any address inside a live or cached block of this allocator, or
// (when a runtime is active) inside any runtime host_malloc allocation.
// Never throws; false for nullptr.
bool is_pinned_ptr(const void* p);

// Marks the pinned block holding `ptr` (`ctx`: the DataPtr's context) as used
// by `s`; false when the memory is not from this allocator.
bool record_host_event(void* ptr, void* ctx, c10::Stream s);

// Control-plane helpers (torch.flagos host memory APIs).
void empty_host_cache();
at::HostStats host_stats();
void reset_host_accumulated_stats();
void reset_host_peak_stats();

}  // namespace torch_fl
