// A boxed call of an operator on sparse or quantized flagos tensors through a CallMapper, as
// MappedCall is for strided ones: what the layout fallback (aten/layout_fallback.cpp) hands the
// kernels of the backend whose memory flagos memory is.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/quantized/Quantizer.h>

#include <vector>

namespace torch_fl::boxing {

class CallMapper;

class LayoutMappedCall {
 public:
  // The stack's arguments are mapped in place: sparse tensors by sparse_arg, quantized ones by
  // quantized_arg, one alias per caller's tensor object (so that a kernel comparing its arguments
  // sees what it would natively), strided ones by mapper.arg.
  LayoutMappedCall(const c10::FunctionSchema& schema, torch::jit::Stack* stack, CallMapper& mapper);

  // Written arguments take what the kernel left on their aliases (after it ran, or failed):
  // geometry and grown memory, a sparse tensor's parts, a quantized tensor's new quantizer.
  void adopt_written();
  // Return `i` as the caller gets it: an out=/in-place return is the caller's own tensor, others
  // join flagos (mapper.result; a view of an argument stays a view of the caller's memory).
  c10::IValue result(size_t i, c10::IValue value) const;

 private:
  at::Tensor arg(const at::Tensor& t);

  struct Mapped {
    const c10::TensorImpl* source;
    at::Tensor alias;
    const at::Quantizer* given;  // the quantizer the alias was made with (quantized only)
  };
  const c10::FunctionSchema& schema_;
  CallMapper& mapper_;
  std::vector<c10::IValue> originals_;
  std::vector<c10::IValue> aliases_;
  std::vector<Mapped> mapped_;    // sparse and quantized arguments
  std::vector<at::Tensor> kept_;  // what the mapper knows arguments by, for the call
};

}  // namespace torch_fl::boxing
