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
}
