// The written-argument rule: which argument an out= / in-place return writes.
//
// A return `Tensor(a!)` writes the argument with the same `(a!)` alias set. Core's boxing (the
// CPU fallback, boxed routes) and the vendors' kernels (their write-back into out= and in-place
// targets) read it here, so out= semantics have one definition.
#ifndef TORCH_FL_KIT_WRITTEN_ARGUMENT_H_
#define TORCH_FL_KIT_WRITTEN_ARGUMENT_H_

#include <ATen/core/function_schema.h>

#include <cstddef>

namespace torch_fl::kit {

// The index of the argument return `ret` of `schema` writes, or -1 (a fresh result).
inline int written_argument(const c10::FunctionSchema& schema, size_t ret) {
  const auto* info = schema.returns()[ret].alias_info();
  if (!info || !info->isWrite()) return -1;
  const auto& args = schema.arguments();
  for (size_t a = 0; a < args.size(); ++a) {
    const auto* ainfo = args[a].alias_info();
    if (ainfo && ainfo->isWrite() && ainfo->beforeSets() == info->beforeSets()) {
      return static_cast<int>(a);
    }
  }
  return -1;
}

}  // namespace torch_fl::kit

#endif  // TORCH_FL_KIT_WRITTEN_ARGUMENT_H_
