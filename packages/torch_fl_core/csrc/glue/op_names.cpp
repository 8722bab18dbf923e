#include "glue/op_names.h"

namespace torch_fl {

std::string full_name(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

std::string short_name(const c10::OperatorName& name) {
  std::string n = full_name(name);
  return n.rfind("aten::", 0) == 0 ? n.substr(6) : n;
}

}  // namespace torch_fl
