// A vendor's same-device copy kernel, the one core calls for the copies the runtime's byte moves
// cannot do (a cast, a strided layout; core's aten/vendor_copy.h): its schema, its registration
// and the argument check every such kernel makes. A vendor writes only the SDK call:
//
//   void copy(const c10::OperatorHandle& op, torch::jit::Stack* s) {
//     Call c(op, s, Form::Inplace);
//     auto [self, src] = torch_fl::kit::device_copy_operands(c);
//     ... decline dtypes the SDK does not move, launch the SDK copy ...
//     c.finish(self);
//   }
//   TFL_KIT_DEVICE_COPY(torch_fl_gcu, &tfl_gcu::copy)
#ifndef TORCH_FL_KIT_DEVICE_COPY_H_
#define TORCH_FL_KIT_DEVICE_COPY_H_

#include <torch/library.h>
#include <torch_fl/kit/kernel_call.h>

#include <utility>

namespace torch_fl::kit {

// (self, src): two tensors of one device and one shape, as core hands them (it broadcasts first,
// resolves conj/neg bits and refuses partial overlap); anything else is a caller's bug, named.
inline std::pair<at::Tensor, at::Tensor> device_copy_operands(const KernelCall& c) {
  at::Tensor self = c.tensor("self");
  at::Tensor src = c.tensor("src");
  TORCH_CHECK(src.device() == self.device() && src.sizes() == self.sizes(), c.name(), " (vendor ",
              c.vendor(), "): the device copy takes two tensors of one device and one shape, got ",
              src.device(), " ", src.sizes(), " into ", self.device(), " ", self.sizes());
  return {std::move(self), std::move(src)};
}

}  // namespace torch_fl::kit

// Registers `fn` (a boxed kernel) as <ns>::copy_, with aten's copy_ schema.
#define TFL_KIT_DEVICE_COPY(ns, fn)                                                     \
  TORCH_LIBRARY_FRAGMENT(ns, m) {                                                       \
    m.def("copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)"); \
  }                                                                                     \
  TORCH_LIBRARY_IMPL(ns, PrivateUse1, m) {                                              \
    m.impl("copy_", torch::CppFunction::makeFromBoxedFunction<fn>());                   \
  }

#endif  // TORCH_FL_KIT_DEVICE_COPY_H_
