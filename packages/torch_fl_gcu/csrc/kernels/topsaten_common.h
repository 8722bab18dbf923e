// Shared machinery of the generated topsaten kernels (tools/gen_kernels.py).
//
// Kernels are boxed: the router hands them the dispatcher stack of an aten
// overload, they read the arguments BY NAME from aten's schema, so one
// category routine serves every spelling of an op (functional, out=,
// in-place, Tensor or Scalar `other`). What the SDK needs, done here once:
//  - topsaten ignores strides: inputs are made contiguous first;
//  - rank-0 shapes are described as {1};
//  - no broadcasting: operands are expanded to the result shape explicitly;
//  - no 64-bit kernels: a call whose compute dtype topsaten lacks (int64,
//    float64, complex, ...) is DECLINED before it has any effect, and core
//    serves it with its counted CPU fallback (docs/routing.md);
//  - results are written into fresh contiguous tensors and copied into out=
//    / in-place targets, which keeps out= resizing and aliasing exact;
//  - every topsaten status is checked: an error names the topsaten function,
//    the aten overload, the device and the status.
#pragma once

#include <ATen/ATen.h>
#include <tops_runtime_api.h>
#include <topsaten/topsaten.h>
#include <torch_fl/kit/category_operands.h>
#include <torch_fl/kit/dtype_set.h>
#include <torch_fl/kit/kernel_call.h>
#include <torch_fl/kit/operands.h>
#include <torch_fl/kit/reduction_shape.h>

#include <optional>
#include <string>
#include <vector>

namespace tfl_gcu {

using torch_fl::kit::empty_result;
using torch_fl::kit::Form;
using torch_fl::kit::operand;
using torch_fl::kit::reduce_dims;
using torch_fl::kit::reduced_shape;

// One boxed topsaten call (torch_fl::kit::KernelCall: arguments, decline, write-back).
class Call : public torch_fl::kit::KernelCall {
 public:
  Call(const c10::OperatorHandle& op, torch::jit::Stack* stack, Form form)
      : KernelCall(op, stack, form, "gcu", "topsaten") {}
};

// topsaten's dtype for a torch dtype; TOPSATEN_DATA_NONE when it has none.
topsaten::topsatenDataType_t tops_dtype(at::ScalarType t);
// Dtypes topsaten computes arithmetic in (float32/16, bfloat16, int32), its floating ones, and
// those it can read and compare (arithmetic plus int16/int8/uint8/bool).
extern const torch_fl::kit::DtypeSet kArithmetic, kFloating, kStorage;

// topsaten's kernel `fn` serving `dtypes`: dense operands (it neither broadcasts nor reads
// strides) and fresh results (torch_fl::kit::category_operands.h).
inline torch_fl::kit::SdkKernel kernel(const char* fn, const torch_fl::kit::DtypeSet& dtypes) {
  return {torch_fl::kit::TensorForm::kDense, fn, dtypes};
}

// Descriptor topsaten reads (rank 0 -> {1}; the tensor must be contiguous).
class Desc {
 public:
  explicit Desc(const at::Tensor& t);
  Desc();  // absent optional tensor
  topsaten::topsatenTensor& get() { return t_; }
  operator topsaten::topsatenTensor&() { return t_; }

 private:
  std::vector<int64_t> dims_, strides_;
  topsaten::topsatenTensor t_;
};

topsaten::topsatenScalar_t tops_scalar(const at::Scalar& s);
topsaten::topsatenSize_t tops_size(const std::vector<int64_t>& v);

// The topsStream_t of the flagos current stream on `device` (the stream
// every producer on that device enqueues on).
topsStream_t current_stream(c10::Device device);
// Registers the allocator callbacks and runs topsatenInit() once.
void ensure_init();
// Throws unless `status` is success, naming everything a user needs.
void check(topsaten::topsatenStatus_t status, const char* tops_fn, const Call& c);
const char* status_name(topsaten::topsatenStatus_t status);

}  // namespace tfl_gcu
