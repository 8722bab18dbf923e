// Shared machinery of the generated ACLNN kernels (tools/gen_kernels.py).
//
// Kernels are boxed: the router hands them the dispatcher stack of an aten
// overload, they read the arguments BY NAME from aten's schema, so one
// category routine serves every spelling of an op (functional, out=,
// in-place, Tensor or Scalar `other`). What ACLNN needs, done here once:
//  - aclTensor descriptors carry the tensor's sizes, strides and storage
//    offset over its whole storage: ACLNN honours them, so inputs are passed
//    as they are (no contiguous copies); rank 0 is a rank-0 descriptor;
//  - a call whose compute dtype the op's ACLNN kernel lacks (the ops
//    table's dtypes) is DECLINED before it has any effect, and core serves it
//    with its counted CPU fallback (docs/routing.md);
//  - the two-phase protocol: aclnnXGetWorkspaceSize -> a workspace from the
//    flagos caching allocator (allocated on the flagos current stream) ->
//    aclnnX on that stream; the block's reuse is ordered behind the op by the
//    stream, and the allocator synchronizes before freeing cached segments;
//  - every status is checked: an error names the aclnn function, the aten
//    overload, the device, the vendor, the status and aclGetRecentErrMsg.
#pragma once

#include <ATen/ATen.h>
#include <acl/acl.h>
#include <aclnn/aclnn_base.h>
#include <torch_fl/kit/category_operands.h>
#include <torch_fl/kit/dtype_set.h>
#include <torch_fl/kit/kernel_call.h>
#include <torch_fl/kit/operands.h>
#include <torch_fl/kit/reduction_shape.h>

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tfl_ascend {

using torch_fl::kit::dims_arg;
using torch_fl::kit::empty_result;
using torch_fl::kit::Form;
using torch_fl::kit::operand;
using torch_fl::kit::reduce_dims;
using torch_fl::kit::reduced_shape;

// The dtypes an op's ACLNN kernel computes in (from the ops table).
using torch_fl::kit::DtypeSet;

// One boxed ACLNN call (torch_fl::kit::KernelCall: arguments, decline, output, write-back).
class Call : public torch_fl::kit::KernelCall {
 public:
  Call(const c10::OperatorHandle& op, torch::jit::Stack* stack, Form form)
      : KernelCall(op, stack, form, "ascend", "ACLNN") {}

  // Declines unless `dtypes` has `t`.
  void need(const DtypeSet& dtypes, at::ScalarType t, const char* aclnn) const {
    torch_fl::kit::need_dtype(*this, dtypes, t, aclnn);
  }
};

// `t` on the call's device in `dtype`; a CPU 0-dim scalar as a fill on the device (stream work
// that neither waits for the stream nor breaks a graph capture: torch_fl::kit::on_device_filled).
inline at::Tensor on_device(const Call& c, const at::Tensor& t, at::ScalarType dtype) {
  return torch_fl::kit::on_device_filled(c, t, dtype);
}

// ACLNN's kernel `fn` serving `dtypes`: aclTensor descriptors carry strides, so operands are views
// (torch_fl/kit/category_operands.h).
inline torch_fl::kit::SdkKernel kernel(const char* fn, const DtypeSet& dtypes) {
  return {torch_fl::kit::TensorForm::kStrided, fn, dtypes, &torch_fl::kit::on_device_filled};
}

// ACLNN's dtype for a torch dtype; ACL_DT_UNDEFINED when it has none.
aclDataType acl_dtype(at::ScalarType t);

// An owned ACLNN parameter object: aclDestroy* on scope exit.
template <class T, aclnnStatus (*Destroy)(const T*)>
class Owned {
 public:
  Owned() = default;  // nothing owned: an absent optional argument (nullptr)
  Owned(Owned&& o) noexcept : p_(o.release()) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) own(o.release());
    return *this;
  }
  ~Owned() { own(nullptr); }
  T* get() const { return p_; }
  operator T*() const { return p_; }
  T* release() { return std::exchange(p_, nullptr); }

 protected:
  void own(T* p) {
    if (p_) Destroy(p_);
    p_ = p;
  }

 private:
  T* p_ = nullptr;
};

struct Tensor : Owned<aclTensor, aclDestroyTensor> {
  Tensor() = default;
  explicit Tensor(const at::Tensor& t);
};
struct Scalar : Owned<aclScalar, aclDestroyScalar> {
  // `like`: the dtype the value is given in (the op's compute dtype family).
  Scalar(const at::Scalar& s, at::ScalarType like);
};
struct IntArray : Owned<aclIntArray, aclDestroyIntArray> {
  explicit IntArray(const std::vector<int64_t>& v);
};
struct BoolArray : Owned<aclBoolArray, aclDestroyBoolArray> {
  explicit BoolArray(const std::vector<bool>& v);
};

// The most tensors one aclTensorList may carry into an op.
constexpr size_t kMaxTensorList = 50;

struct TensorList : Owned<aclTensorList, aclDestroyTensorList> {
  // At most kMaxTensorList tensors (callers split longer lists).
  explicit TensorList(const std::vector<at::Tensor>& ts);
};

// The aclrtStream of the flagos current stream on `device` (the stream
// every producer on that device enqueues on).
aclrtStream current_stream(c10::Device device);

using RunFn = aclnnStatus (*)(void*, uint64_t, aclOpExecutor*, aclrtStream);

// Throws unless `status` is ACLNN_SUCCESS, naming the aclnn function, the
// aten overload, the device, the vendor, the status and the toolkit's text.
void check(aclnnStatus status, const std::string& aclnn_fn, const Call& c);

// The second phase: a workspace of `size` bytes from the flagos caching
// allocator on the current stream, then aclnnX on that stream (the workspace's
// reuse is ordered behind the op by the stream, like any temporary's).
void execute(const Call& c, RunFn run, const char* aclnn, uint64_t size, aclOpExecutor* executor);

// Both phases: ws(args..., &size, &executor), then execute().
template <typename WsFn, typename... Args>
void launch(const Call& c, WsFn ws, RunFn run, const char* aclnn, Args&&... args) {
  uint64_t size = 0;
  aclOpExecutor* executor = nullptr;
  check(ws(std::forward<Args>(args)..., &size, &executor), std::string(aclnn) + "GetWorkspaceSize",
        c);
  execute(c, run, aclnn, size, executor);
}

}  // namespace tfl_ascend
