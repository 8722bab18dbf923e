// Emulator internals shared by libtopsrt.so and libtopsaten.so (not SDK API).
#pragma once

#include <cstddef>

#include "tops_runtime_api.h"

extern "C" {
// Resolves [ptr, ptr + bytes) against the CURRENT card, the way a GCU kernel
// would: nullptr unless the whole range lies inside one live allocation of
// that card. Device pointers are device-scoped.
void* topsEmuInternalResolve(const void* ptr, size_t bytes);
// The card a stream belongs to (NULL: the current card's default stream);
// -1 for an unknown stream.
int topsEmuInternalStreamDevice(topsStream_t stream);
// Fault injection and call counting shared with topsaten: returns the injected
// status for this call of `name` (0 when none) and counts the call.
int topsEmuInternalEnter(const char* name);

// Memory that SDK work running outside the runtime's lock reads or writes (libeccl's
// collectives, which wait for their peers there).
typedef struct topsEmuRange {
  const void* ptr;
  size_t bytes;
} topsEmuRange;
// For work on `stream` (NULL: the current card's default stream): each range must lie in one
// live allocation of the stream's card. On success host[i] is the host memory behind
// ranges[i], *card the stream's card and *pin keeps those allocations backed (a topsFree
// meanwhile does not recycle them) until topsEmuInternalUnpin(*pin). On failure nothing is
// pinned: topsErrorInvalidHandle (unknown stream) or topsErrorInvalidValue with *bad
// the first range that does not resolve.
topsError_t topsEmuInternalPin(topsStream_t stream, const topsEmuRange* ranges, size_t n,
                               void** host, int* card, void** pin, size_t* bad);
void topsEmuInternalUnpin(void* pin);
}
