// How what a kernel produced on alias views becomes flagos tensors again:
// written arguments take the geometry (and grown memory) the kernel gave their
// aliases, and fresh results join flagos without a copy where their memory is
// flagos memory.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>

namespace torch_fl::boxing {

// A flagos tensor over `storage` with `like`'s geometry and conj/neg bits.
at::Tensor flagos_over(c10::Storage storage, const at::Tensor& like);

// The caller's flagos tensor `base` (an out=/in-place argument) takes the
// geometry, and grown memory, the kernel gave its alias.
void adopt_written(const at::Tensor& base, const at::Tensor& alias);

// A result of a `type` kernel as a flagos tensor on flagos:<device>: its
// memory taken over when it is flagos memory (a host result, a grown alias, or
// the mirrored backend's pool), else copied into a flagos allocation.
at::Tensor to_flagos(const at::Tensor& result, c10::DeviceIndex device, c10::DeviceType type);

}  // namespace torch_fl::boxing
