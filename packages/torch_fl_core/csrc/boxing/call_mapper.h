// The one argument/result mapper of boxing: what a box:<key> kernel (boxed or
// unboxed) and a Python backend with core views are handed for a flagos call,
// and how what they return becomes flagos tensors again.
//
// Within one call, aliasing is what the target backend would see natively:
// the same flagos tensor object twice is the same alias object (so "output is
// input" identity checks hold), and distinct flagos tensors over one storage
// are aliases over one alias storage (so ATen's overlap and alias checks,
// Storage::is_alias_of, see that they share memory).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

#include <vector>

#include "boxing/list_aliases.h"
#include "boxing/list_versions.h"
#include "boxing/pointer_index.h"

namespace torch_fl::boxing {

class CallMapper {
 public:
  // kPooled: call-scoped aliases from the thread's pool (kernels that keep no
  // reference past the call: ATen kernels). kOwning: aliases that keep their
  // flagos storage alive (Python code may keep what it is handed).
  enum class Aliases { kPooled, kOwning };

  // `device` is the call's flagos device, `target` the device aliases have
  // (CPU, or the mirrored device of that index), `key` their dispatch key.
  CallMapper(c10::DeviceIndex device, c10::Device target, c10::DispatchKey key, Aliases aliases)
      : device_(device), target_(target), key_(key), aliases_(aliases) {}
  ~CallMapper();
  CallMapper(const CallMapper&) = delete;
  CallMapper& operator=(const CallMapper&) = delete;

  // The arguments a call can map before its entries move (one per tensor
  // argument without lists; references from arg() stay valid that long).
  static constexpr size_t kInlineEntries = 6;

  c10::DeviceIndex device() const { return device_; }
  c10::Device target() const { return target_; }

  // A tensor argument as the target sees it (non-flagos tensors as they are).
  // The reference is valid until the next arg() or arg_list(): copy it to keep it.
  const at::Tensor& arg(const at::Tensor& t);
  // Room for n more tensor arguments (a list argument), grown once.
  void reserve(size_t n) { entries_.reserve(entries_.size() + n); }
  // A list argument as the target sees it: a kept set of aliases (see
  // ListAliases) where the list's memory has one and nothing else in the call
  // shares that memory, else each tensor through arg(), into `owned`.
  at::TensorList arg_list(at::TensorList l, std::vector<at::Tensor>& owned);
  // A device argument (factories): flagos devices become the target.
  c10::Device arg_device(c10::Device d) const { return d.is_privateuseone() ? target_ : d; }

  // A result that is no out=/in-place return, as a flagos tensor: over the
  // flagos storage of the argument it aliases, else adopted (to_flagos); a
  // sparse one (to_sparse) as its parts, a quantized one as its integers
  // (boxing/sparse_tensors.h, quantized_tensors.h). A
  // mirrored kernel's result on another device (a CPU tensor a CUDA kernel
  // returns) stays there, as natively.
  at::Tensor result(const at::Tensor& r) const;
  c10::IValue result_value(const c10::IValue& v) const;

  // An out=/in-place argument after the kernel wrote its alias: the caller's
  // tensor takes the alias's geometry and grown memory.
  static void written(const at::Tensor& original, const at::Tensor& alias);

 private:
  struct Entry {
    const c10::TensorImpl* source;  // the caller's flagos tensor
    const c10::StorageImpl* storage;
    at::Tensor alias;
    int32_t next = -1;  // the next entry over the same storage
  };
  c10::DeviceIndex device_;
  c10::Device target_;
  c10::DispatchKey key_;
  Aliases aliases_;
  c10::SmallVector<Entry, kInlineEntries> entries_;
  // List arguments served by a kept set: the set and the caller's list.
  struct KeptList {
    ListAliases* set;
    at::TensorList sources;
  };
  c10::SmallVector<KeptList, 2> kept_;
  // An argument over the memory of a kept list: the entry of its alias, or -1.
  int64_t kept_alias(const at::Tensor& t, const c10::TensorImpl* source,
                     const c10::StorageImpl* storage);
  bool shares_memory_with_call(const ListAliases& set) const;
  // A call with many tensors (a cat, a foreach over a model's parameters)
  // looks them up by hash once it has kScanned of them, instead of scanning,
  // and takes their aliases from the pool's long-call table (below the
  // pool's short per-kind lists' length, so those never run out).
  static constexpr size_t kScanned = 8;
  // An index holds each storage's first entry (the others follow `next`),
  // and each data pointer's first entry once a result was looked up.
  PointerIndex* index_ = nullptr;  // from PointerIndex::acquire() once long
  mutable bool data_indexed_ = false;
  void index(size_t i) const;
};

// A boxed call through a CallMapper: the stack's arguments are mapped in
// place (the caller's values are kept), and after the kernel ran, written
// arguments adopt their aliases and results are mapped back.
class MappedCall {
 public:
  MappedCall(const c10::FunctionSchema& schema, torch::jit::Stack* stack, CallMapper& mapper);

  // The caller's value of argument i.
  const c10::IValue& original(size_t i) const { return originals_[i]; }
  // Written arguments take their aliases' geometry, and written lists' elements
  // their aliases' version bumps (after the kernel ran, or failed).
  void adopt_written();
  // Return `i` of the kernel as the caller gets it: an out=/in-place return is
  // the caller's own tensor (a kernel that returned None, the alias, or a new
  // tensor holding the values: the values are copied in), others go through
  // CallMapper::result.
  c10::IValue result(size_t i, c10::IValue value) const;
  // The index of the argument return `i` writes, or -1.
  int written_argument(size_t i) const;

 private:
  const c10::FunctionSchema& schema_;
  CallMapper& mapper_;
  std::vector<c10::IValue> originals_;
  std::vector<c10::IValue> aliases_;
  WrittenListVersions list_versions_;
};

}  // namespace torch_fl::boxing
