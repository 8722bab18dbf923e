#include "router/foreach_overlap.h"

#include <string_view>
#include <vector>

namespace torch_fl::foreach_overlap {

Checks checks_for(const c10::FunctionSchema& schema) {
  const std::string_view name = schema.name();
  constexpr std::string_view kPrefix = "aten::_foreach_";
  if (name.substr(0, kPrefix.size()) != kPrefix || name.back() != '_') return Checks::kNone;
  const auto& args = schema.arguments();
  if (args.empty() || !args[0].alias_info() || !args[0].alias_info()->isWrite() ||
      args[0].type()->kind() != c10::TypeKind::ListType) {
    return Checks::kNone;
  }
  if (name == "aten::_foreach_zero_") return Checks::kPartial;
  return name == "aten::_foreach_copy_" ? Checks::kCopy : Checks::kInternalAndPartial;
}

void check_stack(Checks checks, const c10::FunctionSchema& schema, const torch::jit::Stack& stack) {
  if (checks == Checks::kNone) return;
  const size_t n = schema.arguments().size();
  Checker checker(checks);
  std::vector<std::vector<at::Tensor>> lists;  // keeps each TensorList's tensors alive
  lists.reserve(n);
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensorList()) {
      lists.push_back(v.toTensorVector());
      checker.see(at::TensorList(lists.back()));
    }
  }
}

}  // namespace torch_fl::foreach_overlap
