// Argument access for boxed vendor kernels (header-only; vendor kernel libraries compile it
// against the torch they are built for).
//
// A vendor's generated kernels are boxed: core's library backend hands them the dispatcher stack
// of an aten overload, and they read the arguments BY NAME from aten's schema, so one category
// routine serves every spelling of an op (functional, out=, in-place, Tensor or Scalar `other`).
// BoxedCall is that reading, plus the device check CUDA makes: every tensor argument is on one
// flagos device, or is a CPU 0-dim scalar. torch_fl/kit/kernel_call.h adds declining a call and
// writing results back; a vendor derives its call type from that.
#ifndef TORCH_FL_BOXED_CALL_H_
#define TORCH_FL_BOXED_CALL_H_

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>
#include <torch_fl/kit/written_argument.h>

#include <optional>
#include <string>
#include <vector>

namespace torch_fl {

class BoxedCall {
 public:
  // `vendor` names the vendor in error messages ("gcu", "ascend"); it must outlive the call.
  BoxedCall(const c10::OperatorHandle& op, torch::jit::Stack* stack, const char* vendor)
      : op_(op), stack_(stack), vendor_(vendor) {
    const auto& schema = op.schema();
    name_ = schema.operator_name().name +
            (schema.overload_name().empty() ? "" : "." + schema.overload_name());
    // Report the aten overload the kernel stands for, whatever namespace it is registered in.
    const auto sep = name_.find("::");
    if (sep != std::string::npos) name_ = "aten" + name_.substr(sep);
    const size_t n = schema.arguments().size();
    TORCH_INTERNAL_ASSERT(stack->size() >= n);
    base_ = stack->size() - n;
    std::optional<c10::Device> found;
    auto visit = [&](const at::Tensor& t) {
      if (!t.defined()) return;
      if (t.device().is_privateuseone()) {
        if (!found) {
          found = t.device();
        } else if (*found != t.device()) {
          TORCH_CHECK(
              false,
              "Expected all tensors to be on the same device, but found at least two devices, ",
              *found, " and ", t.device(), "! (", name_, ", vendor ", vendor_, ")");
        }
      } else if (t.dim() != 0) {
        TORCH_CHECK(false, "Expected all tensors to be on the same device, but got ", t.device(),
                    " tensor with ", t.dim(), " dims in ", name_, " on flagos (vendor ", vendor_,
                    ")");
      }
    };
    for (size_t i = base_; i < stack->size(); ++i) {
      const c10::IValue& v = (*stack)[i];
      if (v.isTensor()) visit(v.toTensor());
      if (v.isTensorList())
        for (const at::Tensor& t : v.toTensorList().vec()) visit(t);
    }
    if (found) device_ = *found;
  }

  const std::string& name() const { return name_; }  // "aten::add.Tensor"
  const char* vendor() const { return vendor_; }
  // The flagos device of the call (its first flagos tensor argument).
  c10::Device device() const { return device_; }

  bool has(const char* a) const { return op_.schema().argumentIndexWithName(a).has_value(); }
  const c10::IValue& arg(const char* a) const { return (*stack_)[base_ + index_of(a)]; }
  at::Tensor tensor(const char* a) const { return arg(a).toTensor(); }  // CPU 0-dim allowed
  std::optional<at::Tensor> opt_tensor(const char* a) const {
    const auto& v = arg(a);
    if (v.isNone()) return std::nullopt;
    at::Tensor t = v.toTensor();
    return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
  }
  std::vector<at::Tensor> tensors(const char* a) const { return arg(a).toTensorList().vec(); }
  at::Scalar scalar(const char* a) const { return arg(a).toScalar(); }
  int64_t int_(const char* a) const { return arg(a).toInt(); }
  bool bool_(const char* a) const { return arg(a).toBool(); }
  double double_(const char* a) const { return arg(a).toDouble(); }
  std::optional<double> opt_double(const char* a) const {
    const auto& v = arg(a);
    return v.isNone() ? std::nullopt : std::optional<double>(v.toDouble());
  }
  std::vector<int64_t> ints(const char* a) const { return arg(a).toIntVector(); }
  std::optional<std::vector<int64_t>> opt_ints(const char* a) const {
    const auto& v = arg(a);
    return v.isNone() ? std::nullopt : std::optional<std::vector<int64_t>>(v.toIntVector());
  }
  std::optional<at::ScalarType> opt_dtype(const char* a) const {
    const auto& v = arg(a);
    return v.isNone() ? std::nullopt : std::optional<at::ScalarType>(v.toScalarType());
  }

  // The out= / in-place target: the argument the first written return writes.
  at::Tensor target() const {
    const auto& schema = op_.schema();
    for (size_t r = 0; r < schema.returns().size(); ++r) {
      const int w = kit::written_argument(schema, r);
      if (w >= 0) return (*stack_)[base_ + static_cast<size_t>(w)].toTensor();
    }
    TORCH_INTERNAL_ASSERT(false, vendor_, " kernel: ", name_, " has no mutable argument");
  }

 protected:
  size_t index_of(const char* a) const {
    auto i = op_.schema().argumentIndexWithName(a);
    TORCH_INTERNAL_ASSERT(i.has_value(), vendor_, " kernel: ", op_.schema().name(),
                          " has no argument ", a);
    return *i;
  }

  const c10::OperatorHandle& op_;
  torch::jit::Stack* stack_;
  const char* vendor_;
  std::string name_;
  size_t base_ = 0;
  c10::Device device_{c10::kPrivateUse1, 0};
};

}  // namespace torch_fl

#endif  // TORCH_FL_BOXED_CALL_H_
