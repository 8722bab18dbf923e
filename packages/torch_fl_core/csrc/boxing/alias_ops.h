// Alias views of flagos memory as another device type, and adoption of such a
// library's results back into flagos (torch.ops.torch_fl.alias_as / adopt).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace torch_fl::boxing {

// Whether memory of flagos `device` can be viewed as `type` on this runtime;
// the error names `what` (the caller), the device and the runtime otherwise.
void check_addressable(c10::Device device, c10::DeviceType type, const char* what);
// A `device`-typed tensor over the memory of flagos tensor `self` (same index).
at::Tensor alias_as(const at::Tensor& self, c10::Device device);
// `self` as a flagos tensor on `device`: zero-copy for memory flagos can own.
at::Tensor adopt(const at::Tensor& self, c10::Device device);

}  // namespace torch_fl::boxing
