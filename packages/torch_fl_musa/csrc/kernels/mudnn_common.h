// Shared machinery of the generated muDNN kernels (tools/gen_kernels.py).
//
// Kernels are boxed: the router hands them the dispatcher stack of an aten overload, they read
// the arguments BY NAME from aten's schema, so one category routine serves every spelling of an
// op (functional, out=, in-place, Tensor or Scalar `other`). What muDNN needs, done here once:
//  - muDNN honours strides: a descriptor carries the view's sizes and strides from its data
//    pointer, so inputs are passed as they are (no contiguous copies), broadcast operands as
//    zero-stride expansions, and a result is written straight into an out= / in-place target
//    where that is exact (torch_fl::kit::KernelCall::output);
//  - an operator object is configured (SetMode, SetDim, ...) and Run on a Handle bound to the
//    call's device and the flagos current stream (one handle per device per thread);
//  - a call whose compute dtype the mode's kernel lacks (the ops table's dtypes) is DECLINED
//    before it has any effect, and core serves it with its counted CPU fallback;
//  - every Status is checked: an error names the muDNN operator, the aten overload, the device,
//    the vendor and the status.
#pragma once

#include <ATen/ATen.h>
#include <mudnn.h>
#include <musa_runtime_api.h>
#include <torch_fl/kit/category_operands.h>
#include <torch_fl/kit/dtype_set.h>
#include <torch_fl/kit/kernel_call.h>
#include <torch_fl/kit/operands.h>
#include <torch_fl/kit/reduction_shape.h>
#include <torch_fl/kit/type_promotion.h>

namespace tfl_musa {

namespace dnn = ::musa::dnn;
using torch_fl::kit::BinaryKind;
using torch_fl::kit::DtypeSet;
using torch_fl::kit::Form;
using torch_fl::kit::UnaryKind;

// One boxed muDNN call (torch_fl::kit::KernelCall: arguments, decline, output, write-back).
class Call : public torch_fl::kit::KernelCall {
 public:
  Call(const c10::OperatorHandle& op, torch::jit::Stack* stack, Form form)
      : KernelCall(op, stack, form, "musa", "muDNN") {}

  // Declines unless `dtypes` has `t`.
  void need(const DtypeSet& dtypes, at::ScalarType t, const char* fn) const {
    torch_fl::kit::need_dtype(*this, dtypes, t, fn);
  }
};

// muDNN's operator `fn` serving `dtypes`: it honours strides, so operands are views; a CPU
// scalar operand is a fill on the device, which a graph capture records
// (torch_fl/kit/category_operands.h).
inline torch_fl::kit::SdkKernel kernel(const char* fn, const DtypeSet& dtypes) {
  return {torch_fl::kit::TensorForm::kStrided, fn, dtypes, &torch_fl::kit::on_device_filled};
}

// A descriptor of `t` as it is (sizes and strides from its data pointer; rank 0 -> {1}).
// Declines a rank or dtype muDNN cannot describe.
dnn::Tensor desc(const Call& c, const at::Tensor& t);

// The muDNN handle of the call's device, bound to the flagos current stream there. The call's
// device must be current (a DeviceGuard in the category routine).
dnn::Handle& handle(const Call& c);

// Throws unless `status` is SUCCESS, naming the muDNN operator, the aten overload, the device,
// the vendor and the status.
void check(dnn::Status status, const char* fn, const Call& c);

}  // namespace tfl_musa
