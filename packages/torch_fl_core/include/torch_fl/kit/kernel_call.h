// One boxed call of a vendor's SDK kernel: its arguments by schema name (BoxedCall), how it
// returns (Form), refusing it, and pushing its results back.
//
// A generated kernel serves every spelling of an aten op (functional, out=, in-place); it computes
// a result, then finish() writes it into the argument each return writes (the one
// written-argument rule, written_argument.h) and pushes the returns.
#ifndef TORCH_FL_KIT_KERNEL_CALL_H_
#define TORCH_FL_KIT_KERNEL_CALL_H_

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch_fl/boxed_call.h>
#include <torch_fl/kit/operands.h>
#include <torch_fl/kit/write_back.h>
#include <torch_fl/kit/written_argument.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace torch_fl::kit {

class KernelCall : public BoxedCall {
 public:
  // `vendor` ("gcu") and `sdk` ("topsaten") name the kernel in errors; both must outlive the call.
  KernelCall(const c10::OperatorHandle& op, torch::jit::Stack* stack, Form form, const char* vendor,
             const char* sdk)
      : BoxedCall(op, stack, vendor), form_(form), sdk_(sdk) {}

  Form form() const { return form_; }
  std::string str(const char* a) const { return arg(a).toStringRef(); }
  std::vector<bool> bools(const char* a) const {
    const auto list = arg(a).toBoolList();
    return std::vector<bool>(list.begin(), list.end());
  }

  // Refuse the call (a dtype or shape the SDK does not serve): core serves it with its counted
  // CPU fallback. Only before anything has been written.
  [[noreturn]] void decline(const std::string& why) const {
    TORCH_CHECK_NOT_IMPLEMENTED(false, vendor_, " (", sdk_, ") declines ", name_, " on ", device_,
                                ": ", why);
  }

  // Where a kernel that honours strides writes a result of `shape`/`dtype`: the out= / in-place
  // target itself where direct_target() allows it, else a fresh tensor finish() writes back.
  at::Tensor output(at::IntArrayRef shape, at::ScalarType dtype, bool elementwise,
                    std::initializer_list<at::Tensor> inputs = {}) {
    need_out_dtype(dtype);
    if (form_ != Form::Functional) {
      at::Tensor dst = target();
      if (direct_target(dst, shape, dtype, form_, elementwise, inputs)) return dst;
    }
    return empty_result(*this, shape, dtype);
  }

  // Writes each result into the argument its return writes (out= resized, casts checked) and
  // pushes the returns in place of the arguments.
  void finish(const at::Tensor& result) { finish(std::vector<at::Tensor>{result}); }
  void finish(const std::vector<at::Tensor>& results) {
    const auto& schema = op_.schema();
    std::vector<c10::IValue> out;
    for (size_t r = 0; r < results.size(); ++r) {
      const int w = r < schema.returns().size() ? written_argument(schema, r) : -1;
      if (w < 0) {
        out.emplace_back(results[r]);
        continue;
      }
      at::Tensor dst = (*stack_)[base_ + static_cast<size_t>(w)].toTensor();
      if (form_ == Form::Out && results[r].defined()) need_dtype_of(dst, results[r].scalar_type());
      write_back(dst, results[r], form_ == Form::Out, name_);
      out.emplace_back(std::move(dst));
    }
    torch::jit::drop(*stack_, stack_->size() - base_);
    for (auto& v : out) stack_->push_back(std::move(v));
  }

  // An out= of another dtype than the result's: whether PyTorch casts into it or raises differs
  // by operator (add and sqrt cast; sum, mm, softmax, amax, where and gelu raise), so the CPU
  // serves it and answers as PyTorch does. output() asks before anything is computed; finish()
  // asks again for results computed elsewhere, before the target is written.
  void need_out_dtype(at::ScalarType result) const {
    if (form_ == Form::Out) need_dtype_of(target(), result);
  }

 private:
  void need_dtype_of(const at::Tensor& out, at::ScalarType result) const {
    if (out.scalar_type() != result) {
      decline(std::string("an out= of dtype ") + c10::toString(out.scalar_type()) +
              " for a result of " + c10::toString(result));
    }
  }

  Form form_;
  const char* sdk_;
};

}  // namespace torch_fl::kit

#endif  // TORCH_FL_KIT_KERNEL_CALL_H_
