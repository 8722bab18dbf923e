#include "router/capture_rules.h"

#include <c10/util/Exception.h>

#include "boxing/call_arguments.h"
#include "glue/op_names.h"
#include "glue/runtime_access.h"

namespace torch_fl {

void refuse_uncapturable(const c10::OperatorHandle& op, const std::string& backend,
                         c10::DeviceIndex device, std::optional<c10::DeviceType> views) {
  const char* why = nullptr;
  if (views == c10::DeviceType::CPU && records_host_work()) {
    why =
        "its kernel computes on host views of the operands when it is called, so a replay "
        "would not run it";
  } else if (boxing::has_generator_argument(op.schema())) {
    why =
        "it draws from a generator: its kernel takes the seed and offset as host values at the "
        "call, so every replay would repeat the random numbers of the capture";
  }
  if (why == nullptr) return;
  TORCH_CHECK(false, "flagos: ", full_name(op.schema().operator_name()),
              " cannot be captured into a device graph on flagos:", static_cast<int>(device),
              " (runtime ", runtime_name(), ", backend '", backend, "'): ", why,
              ". Route it to another backend while capturing (docs/routing.md) or move it out of "
              "the captured region.");
}

}  // namespace torch_fl
