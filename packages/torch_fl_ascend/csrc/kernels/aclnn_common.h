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
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <acl/acl.h>
#include <torch_fl/boxed_call.h>
#include <aclnn/aclnn_base.h>

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tfl_ascend {

enum class Form { Functional, Out, Inplace };

// The dtypes an op's ACLNN kernel computes in (from the ops table).
class DtypeSet {
 public:
  DtypeSet(std::initializer_list<at::ScalarType> types) : types_(types) {}
  bool has(at::ScalarType t) const;
  std::string text() const;

 private:
  std::vector<at::ScalarType> types_;
};

// One boxed call: arguments by schema name (torch_fl::BoxedCall), results pushed back.
class Call : public torch_fl::BoxedCall {
 public:
  Call(const c10::OperatorHandle& op, torch::jit::Stack* stack, Form form);

  Form form() const { return form_; }
  std::string str(const char* arg) const;
  std::vector<bool> bools(const char* arg) const;

  // Refuse the call (a dtype or shape ACLNN does not serve): core serves it on
  // the CPU. Only before anything has been written.
  [[noreturn]] void decline(const std::string& why) const;
  // Declines unless `dtypes` has `t`.
  void need(const DtypeSet& dtypes, at::ScalarType t, const char* aclnn) const;

  // Where the result of `shape`/`dtype` is written: the out= / in-place target
  // itself when ACLNN can write it directly (right sizes and dtype after
  // out='s resize, no internal overlap, and for a non-elementwise op no
  // overlap with an input), else a fresh tensor that finish() copies in.
  at::Tensor output(at::IntArrayRef shape, at::ScalarType dtype, bool elementwise,
                    std::initializer_list<at::Tensor> inputs = {});
  // Finish: copy results that are not the target itself into the target for
  // out=/in-place forms (resizing out= as PyTorch does) and push the returns.
  void finish(const at::Tensor& result);
  void finish(const std::vector<at::Tensor>& results);

 private:
  Form form_;
};

// ACLNN's dtype for a torch dtype; ACL_DT_UNDEFINED when it has none.
aclDataType acl_dtype(at::ScalarType t);

// A tensor on the call's device in `dtype` (a CPU 0-dim scalar is moved, a
// cast is a routed copy); views (strides, offset, expanded dims) are kept.
at::Tensor on_device(const Call& c, const at::Tensor& t, at::ScalarType dtype);
at::Tensor empty_result(const Call& c, at::IntArrayRef shape, at::ScalarType dtype);

// RAII owners of the ACLNN parameter objects (aclDestroy* on scope exit).
class Tensor {
 public:
  Tensor() = default;  // an absent optional tensor (nullptr)
  explicit Tensor(const at::Tensor& t);
  Tensor(Tensor&&) noexcept;
  Tensor& operator=(Tensor&&) noexcept;
  ~Tensor();
  aclTensor* get() const { return t_; }
  operator aclTensor*() const { return t_; }
  aclTensor* release() {
    aclTensor* t = t_;
    t_ = nullptr;
    return t;
  }

 private:
  aclTensor* t_ = nullptr;
};

class Scalar {
 public:
  // `like`: the dtype the value is given in (the op's compute dtype family).
  Scalar(const at::Scalar& s, at::ScalarType like);
  ~Scalar();
  Scalar(const Scalar&) = delete;
  Scalar& operator=(const Scalar&) = delete;
  operator aclScalar*() const { return s_; }

 private:
  aclScalar* s_ = nullptr;
};

class IntArray {
 public:
  explicit IntArray(const std::vector<int64_t>& v);
  ~IntArray();
  IntArray(const IntArray&) = delete;
  IntArray& operator=(const IntArray&) = delete;
  operator aclIntArray*() const { return a_; }

 private:
  aclIntArray* a_ = nullptr;
};

class BoolArray {
 public:
  explicit BoolArray(const std::vector<bool>& v);
  ~BoolArray();
  BoolArray(const BoolArray&) = delete;
  BoolArray& operator=(const BoolArray&) = delete;
  operator aclBoolArray*() const { return a_; }

 private:
  aclBoolArray* a_ = nullptr;
};

// The most tensors one aclTensorList may carry into an op.
constexpr size_t kMaxTensorList = 50;

class TensorList {
 public:
  // At most kMaxTensorList tensors (callers split longer lists).
  explicit TensorList(const std::vector<at::Tensor>& ts);
  ~TensorList();
  TensorList(const TensorList&) = delete;
  TensorList& operator=(const TensorList&) = delete;
  operator aclTensorList*() const { return l_; }

 private:
  aclTensorList* l_ = nullptr;
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
