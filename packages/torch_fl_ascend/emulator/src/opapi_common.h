// The frame every aclnn op of libopapi.so is written in: argument validation, the shape check
// (the op's computation first runs on meta tensors), and the executor whose work runs the same
// computation with libtorch CPU ATen on the emulated device memory.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "nnopbase_emu.h"

#define OPAPI_EXPORT extern "C" __attribute__((visibility("default")))

namespace emu_op {

// A set of aclDataTypes (bit = enum value).
using Dtypes = uint64_t;
constexpr Dtypes Bit(aclDataType d) { return Dtypes{1} << static_cast<int>(d); }
constexpr Dtypes kFloating = Bit(ACL_FLOAT) | Bit(ACL_FLOAT16) | Bit(ACL_BF16);
constexpr Dtypes kInts = Bit(ACL_INT32) | Bit(ACL_INT64) | Bit(ACL_INT8) | Bit(ACL_UINT8);
constexpr Dtypes kArith = kFloating | kInts;
constexpr Dtypes kWithBool = kArith | Bit(ACL_BOOL);
constexpr Dtypes kIndex = Bit(ACL_INT32) | Bit(ACL_INT64);
constexpr Dtypes kAny = kWithBool | Bit(ACL_DOUBLE) | Bit(ACL_INT16);

// Around the emulator's own ATen calls (they stand for device work): no profiler rows, no
// autograd, no autocast of the calling thread.
struct EmulatorAtenScope {
  at::RecordFunctionGuard no_record{false};
  at::NoGradGuard no_grad;
  c10::impl::ExcludeDispatchKeyGuard no_autocast{c10::autocast_dispatch_keyset};
};

struct Ctx {
  bool meta = false;
  std::vector<at::Tensor> t;                   // per tensor argument (undefined: NULL optional)
  std::vector<std::vector<at::Tensor>> lists;  // per tensor-list argument
  // Writes r into output k (same shape required: CANN's out tensors are never broadcast into).
  void set(int k, const at::Tensor& r);
};

using Compute = std::function<void(Ctx&)>;

class Op {
 public:
  explicit Op(const char* name);  // name: "aclnnAdd"
  // Tensor arguments, numbered in call order (the index the computation reads them by).
  int in(const char* arg, const aclTensor* t, Dtypes allowed, bool optional = false);
  int out(const char* arg, const aclTensor* t, Dtypes allowed, bool optional = false) {
    return in(arg, t, allowed, optional);
  }
  int list(const char* arg, const aclTensorList* l, Dtypes allowed);
  at::Scalar scalar(const char* arg, const aclScalar* s, bool optional = false);
  std::vector<int64_t> ints(const char* arg, const aclIntArray* a, bool optional = false);
  std::vector<bool> bools(const char* arg, const aclBoolArray* a, bool optional = false);
  // A failed precondition: 161002 with msg.
  void require(bool cond, const std::string& msg);
  aclDataType dtype(int k) const;  // of tensor argument k (ACL_DT_UNDEFINED when absent)
  // Validates, runs `fn` on meta tensors, and creates the executor asking `workspace` bytes.
  aclnnStatus build(uint64_t* workspaceSize, aclOpExecutor** executor, uint64_t workspace,
                    Compute fn);

 private:
  void fail(aclnnStatus st, const std::string& msg);
  std::string name_;
  aclnnStatus status_ = ACLNN_SUCCESS;
  std::string msg_;
  int injected_ = 0;
  std::vector<emu_nn::Slot> slots_;
  std::vector<std::string> slotNames_;
  std::vector<int> tensorSlot_;              // tensor argument -> slot
  std::vector<std::vector<int>> listSlots_;  // list argument -> slots
};

at::ScalarType ToAten(aclDataType dt);
// Workspace the emulator asks for an op over `elements` values (nonzero, so callers exercise
// the protocol).
uint64_t ScratchBytes(int64_t elements);

}  // namespace emu_op

#define EMU_LAUNCH(Name)                                                              \
  OPAPI_EXPORT aclnnStatus aclnn##Name(void* workspace, uint64_t workspaceSize,       \
                                       aclOpExecutor* executor, aclrtStream stream) { \
    return emu_nn::Launch("aclnn" #Name, workspace, workspaceSize, executor, stream); \
  }
