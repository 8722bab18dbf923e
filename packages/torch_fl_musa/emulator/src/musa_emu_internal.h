// Emulator internals shared by libmusart.so, libmudnn.so and libmccl.so (not SDK API; C++, one
// build).
#pragma once

#include <cstddef>
#include <functional>

#include "musa_runtime_api.h"

#define MUSA_EMU_INTERNAL __attribute__((visibility("default")))

namespace musa_emu {

// A tensor's memory as an operator touches it: [ptr, ptr + bytes) of the device.
struct Range {
  const void* ptr;
  size_t bytes;
};

// Counts a call of `name` ("Binary::Run") and returns the status injected for this call (0: none).
MUSA_EMU_INTERNAL int enter(const char* name);

// The device current in the calling thread.
MUSA_EMU_INTERNAL int current_device();

// The device `stream` belongs to (nullptr: the current device's default stream); -1 when unknown.
MUSA_EMU_INTERNAL int stream_device(musaStream_t stream);

// Queues `work` on `stream` (nullptr: the current device's default stream). Each range must lie
// inside one live allocation of the current device (an empty one needs none), which must be the
// stream's device. On success the allocations stay backed until the work ran, `work` runs later
// on the stream's worker with host[i] the host memory behind ranges[i], and its non-zero return
// (with a message written into msg) becomes the stream's asynchronous error, surfaced by the next
// synchronisation as musaErrorIllegalAddress-style runtime errors do. While the stream captures,
// the work is recorded and runs at each launch of the graph. Returns 0, or: -1 unknown stream or
// a stream of another device, -2 when the stream's capture was invalidated (musaGetLastError
// says so), 1 + i when ranges[i] does not resolve. Nothing is queued on failure.
MUSA_EMU_INTERNAL int submit(const char* name, musaStream_t stream, const Range* ranges, size_t n,
                             std::function<int(void* const* host, char* msg, size_t len)> work);

// As submit, on a stream of any device, the ranges resolved on the stream's device (libmccl: an
// operation runs on its communicator's device, whichever is current). -1 for an unknown stream.
MUSA_EMU_INTERNAL int submit_on_stream_device(
    const char* name, musaStream_t stream, const Range* ranges, size_t n,
    std::function<int(void* const* host, char* msg, size_t len)> work);

// Records a contract violation (musaEmuLastViolation reads it).
MUSA_EMU_INTERNAL void violation(const char* message);

}  // namespace musa_emu
