// Operands and fresh results of a boxed kernel call, as SDK kernels take them.
#ifndef TORCH_FL_KIT_OPERANDS_H_
#define TORCH_FL_KIT_OPERANDS_H_

#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <torch_fl/boxed_call.h>

namespace torch_fl::kit {

// An operand that may be a Tensor or a Scalar in this overload's schema (a Scalar becomes a CPU
// wrapped number, so type promotion treats it as PyTorch does).
inline at::Tensor operand(const BoxedCall& c, const char* name) {
  const c10::IValue& v = c.arg(name);
  if (v.isTensor()) return v.toTensor();
  return at::native::wrapped_scalar_tensor(v.toScalar());
}

// `t` on the call's device in `dtype`, conj/neg bits resolved (an SDK reads raw values). A CPU
// 0-dim scalar is moved; a cast is a routed copy; views are kept.
inline at::Tensor on_device(const BoxedCall& c, const at::Tensor& t, at::ScalarType dtype) {
  at::Tensor x = t;
  if (!x.device().is_privateuseone()) x = x.to(c.device());
  if (x.scalar_type() != dtype) x = x.to(dtype);
  return x.resolve_conj().resolve_neg();
}

// As on_device, except that a CPU 0-dim scalar becomes a fill of a device scalar instead of a
// copy from pageable host memory: the fill is stream work carrying the value, so it neither waits
// for the stream nor breaks a graph capture. The value is cast on the host first, as the
// copy-then-cast would (uint8 + 300 wraps instead of failing the fill's range check).
inline at::Tensor on_device_filled(const BoxedCall& c, const at::Tensor& t, at::ScalarType dtype) {
  if (t.device().is_cpu() && t.dim() == 0)
    return at::empty({}, at::TensorOptions().dtype(dtype).device(c.device()))
        .fill_(t.to(dtype).item());
  return on_device(c, t, dtype);
}

// A fresh result on the call's device (contiguous unless `format` says otherwise).
inline at::Tensor empty_result(const BoxedCall& c, at::IntArrayRef shape, at::ScalarType dtype,
                               at::MemoryFormat format = at::MemoryFormat::Contiguous) {
  return at::empty(shape, at::TensorOptions().dtype(dtype).device(c.device()), format);
}

}  // namespace torch_fl::kit

#endif  // TORCH_FL_KIT_OPERANDS_H_
