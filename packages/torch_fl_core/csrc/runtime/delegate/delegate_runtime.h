// The delegate runtime: runtime.h's table implemented by mirroring an
// in-process torch backend (CUDA, or HIP-as-CUDA on DTK) through c10's
// device-generic interfaces: its DeviceGuardImplInterface for devices, streams
// and events, its DeviceAllocator and HostAllocator for memory, and ATen
// copies for memcpy. No vendor headers: whatever torch build is loaded is what
// it drives, which is why the DCU vendor reuses it unchanged.
//
// Stream handles are the mirrored backend's StreamId on the calling thread's
// current device (NULL: the default stream), so a flagos stream and the
// mirrored stream with the same id are one queue.
#pragma once

#include <c10/core/DeviceType.h>
#include <torch_fl/runtime.h>

namespace torch_fl::delegate {

// The table for `type` (one mirrored type per process; see runtime_access).
const tfl_runtime_v1* runtime_table(c10::DeviceType type);

}  // namespace torch_fl::delegate
