#include "aten/vendor_copy.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "router/library_backend.h"

namespace torch_fl {
namespace {

// The kernel, looked up again only when a library backend was added since (every kernel's
// .contiguous() on gcu comes here: no list copy per call).
std::optional<c10::OperatorHandle> kernel() {
  static std::mutex mutex;
  static size_t seen = 0;
  static std::optional<c10::OperatorHandle> found;
  const size_t count = library_namespace_count();
  std::lock_guard<std::mutex> lock(mutex);
  if (count != seen) {
    seen = count;
    found.reset();
    for (const std::string& ns : library_namespaces()) {
      auto op = c10::Dispatcher::singleton().findOp(c10::OperatorName(ns + "::copy_", ""));
      if (op && op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
        found = *op;
        break;
      }
    }
  }
  return found;
}

}  // namespace

bool has_vendor_copy() { return kernel().has_value(); }

bool vendor_copy(const at::Tensor& src, const at::Tensor& dst) {
  if (src.is_conj() || src.is_neg() || dst.is_conj() || dst.is_neg()) return false;
  const auto op = kernel();
  if (!op) return false;
  try {
    op->typed<at::Tensor&(at::Tensor&, const at::Tensor&, bool)>().redispatch(
        c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), const_cast<at::Tensor&>(dst), src,
        false);
  } catch (const c10::NotImplementedError&) {
    return false;
  }
  return true;
}

}  // namespace torch_fl
