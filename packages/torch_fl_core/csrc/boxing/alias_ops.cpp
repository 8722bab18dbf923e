// Boxing for Python: `torch.ops.torch_fl.alias_as(t, device)` gives a tensor
// of another device type over the same memory as the flagos tensor `t` (what
// FlagGems and the distributed backends hand to CUDA/CPU libraries), and
// `torch.ops.torch_fl.adopt(t, device)` turns a result of such a library back
// into a flagos tensor, zero-copy when the memory is flagos memory.
//
// No autograd: these are plumbing for kernels and collectives, which run
// under no_grad or as the implementation of an op that has its own formula.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "glue/runtime_access.h"
#include "glue/stream_pool.h"
#include "boxing/alias_ops.h"
#include "boxing/alias_view.h"
#include "boxing/result_adoption.h"

namespace torch_fl::boxing {

void check_addressable(c10::Device device, c10::DeviceType type, const char* op) {
  if (type == c10::DeviceType::CPU) {
    TORCH_CHECK(has_capability(TFL_CAP_HOST_ADDRESSABLE_MEMORY), op, ": ", device,
                " memory of runtime '", runtime_name(),
                "' is not host addressable, so it cannot be viewed as a CPU tensor");
    return;
  }
  TORCH_CHECK(mirror_device_type() == type, op, ": ", device, " memory of runtime '",
              runtime_name(), "' cannot be viewed as ", c10::DeviceTypeName(type, true),
              " memory (the runtime mirrors ",
              mirror_device_type() ? c10::DeviceTypeName(*mirror_device_type(), true)
                                   : std::string("no torch backend"),
              ")");
}

at::Tensor alias_as(const at::Tensor& self, c10::Device device) {
  TORCH_CHECK(self.device().is_privateuseone(),
              "torch_fl::alias_as: expected a flagos tensor, got ", self.device());
  const c10::DeviceIndex index = self.device().index();
  TORCH_CHECK(!device.has_index() || device.is_cpu() || device.index() == index,
              "torch_fl::alias_as: ", self.device(), " memory cannot be viewed as ", device,
              " (the view keeps the device index)");
  check_addressable(self.device(), device.type(), "torch_fl::alias_as");
  const c10::Device target = target_device(device.type(), index);
  if (device.is_cpu() && self.storage().nbytes() > 0) {
    // Host code reads the view directly: the stream's earlier work must be done.
    CurrentDeviceScope scope(index);
    TFL_CALL(index, stream_synchronize, native_stream(current_stream(index)));
  }
  const c10::DispatchKey key = c10::computeDispatchKey(std::nullopt, std::nullopt, target);
  return make_alias(self, target, key);
}

at::Tensor adopt(const at::Tensor& self, c10::Device device) {
  TORCH_CHECK(device.is_privateuseone(),
              "torch_fl::adopt: the target must be a flagos device, got ", device);
  if (self.device().is_privateuseone()) return self;
  const c10::DeviceIndex index = device.has_index() ? device.index() : current_device();
  return to_flagos(self, index, self.device().type());
}

TORCH_LIBRARY(torch_fl, m) {
  m.def("alias_as(Tensor(a) self, Device device) -> Tensor(a)");
  m.def("adopt(Tensor self, Device device) -> Tensor");
}

TORCH_LIBRARY_IMPL(torch_fl, PrivateUse1, m) { m.impl("alias_as", TORCH_FN(alias_as)); }

// adopt takes tensors of any device: CompositeExplicitAutograd catches them all.
TORCH_LIBRARY_IMPL(torch_fl, CompositeExplicitAutograd, m) { m.impl("adopt", TORCH_FN(adopt)); }

}  // namespace torch_fl::boxing
