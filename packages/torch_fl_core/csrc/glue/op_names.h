// Operator names as messages, counters and logs spell them.
#pragma once

#include <ATen/core/operator_name.h>

#include <string>

namespace torch_fl {

// Full operator name for messages and counters: "aten::add.Tensor", "aten::abs".
std::string full_name(const c10::OperatorName& name);
// Log spelling users know from the platform docs: "add.Tensor", "abs".
std::string short_name(const c10::OperatorName& name);

}  // namespace torch_fl
