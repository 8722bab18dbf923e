#include "router/capture_rules.h"

#include <c10/util/Exception.h>

#include <mutex>

#include "boxing/call_arguments.h"
#include "glue/op_names.h"
#include "glue/runtime_access.h"

namespace torch_fl {

const char* uncapturable_reason(const c10::OperatorHandle& op,
                                std::optional<c10::DeviceType> views) {
  if (views == c10::DeviceType::CPU && records_host_work()) {
    return "its kernel computes on host views of the operands when it is called, so a replay "
           "would not run it";
  }
  if (boxing::has_generator_argument(op.schema())) {
    return "it draws from a generator: its kernel takes the seed and offset as host values at "
           "the call, so every replay would repeat the random numbers of the capture";
  }
  return nullptr;
}

void refuse_uncapturable(const c10::OperatorHandle& op, const std::string& backend,
                         c10::DeviceIndex device, const char* why) {
  TORCH_CHECK(false, "flagos: ", full_name(op.schema().operator_name()),
              " cannot be captured into a device graph on flagos:", static_cast<int>(device),
              " (runtime ", runtime_name(), ", backend '", backend, "'): ", why,
              ". Route it to another backend while capturing, or list one after '", backend,
              "' in its route (docs/routing.md), or move it out of the captured region.");
}

namespace {
std::mutex g_alternates_mutex;
std::map<std::string, std::string>& alternates() {
  static auto* map = new std::map<std::string, std::string>();
  return *map;
}
}  // namespace

std::shared_ptr<Backend> capture_alternate(const c10::OperatorHandle& op) {
  std::string name;
  {
    std::lock_guard<std::mutex> lock(g_alternates_mutex);
    const auto it = alternates().find(full_name(op.schema().operator_name()));
    if (it == alternates().end()) return nullptr;
    name = it->second;
  }
  return find_backend(name);
}

void set_capture_alternates(std::map<std::string, std::string> map) {
  std::lock_guard<std::mutex> lock(g_alternates_mutex);
  alternates() = std::move(map);
}

}  // namespace torch_fl
