// A vendor's kernel for the same-device copies the runtime's byte moves cannot do (a cast, a
// strided layout). Where memory is host-addressable core runs ATen's CPU copy on aliases of it;
// elsewhere it would stage both spans through the host, waiting for the stream: slow in eager,
// and impossible inside a device-graph capture. A vendor library that registers
// `<its namespace>::copy_` (aten's copy_ schema, a PrivateUse1 kernel; e.g. over ACLNN's
// aclnnInplaceCopy) gets those copies on its stream instead. It may decline one
// (c10::NotImplementedError, before any effect): core then stages it as before.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_fl {

// Copies src into dst (same flagos device, same sizes, no conj/neg bits, no partial overlap) with
// the vendor's kernel; false when there is none or it declined.
bool vendor_copy(const at::Tensor& src, const at::Tensor& dst);

// Whether a vendor library registered such a kernel.
bool has_vendor_copy();

}  // namespace torch_fl
