#include "router/producer_order.h"

#include <atomic>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

namespace torch_fl {
namespace {

std::atomic<bool> g_enabled{true};
std::atomic<int64_t> g_marked_count{0};  // fast path: nothing marked
std::atomic<uint64_t> g_barriers{0};
std::mutex g_mutex;
auto* g_marked = new std::set<std::pair<int, int64_t>>();  // (device, stream id)

bool applies() { return has_capability(TFL_CAP_UNORDERED_PRODUCERS); }

}  // namespace

std::vector<c10::DeviceIndex> stack_flagos_devices(const c10::OperatorHandle& op,
                                                   const torch::jit::Stack& stack) {
  std::vector<c10::DeviceIndex> out;
  if (!applies()) return out;
  auto add = [&](const at::Tensor& t) {
    if (t.defined() && t.device().is_privateuseone()) {
      const auto d = t.device().index();
      for (auto x : out)
        if (x == d) return;
      out.push_back(d);
    }
  };
  const size_t n = op.schema().arguments().size();
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      add(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) add(t);
    } else if (v.isOptionalTensorList()) {
      for (const auto& t : v.toOptionalTensorList()) {
        const std::optional<at::Tensor> ot = t;
        if (ot.has_value()) add(*ot);
      }
    }
  }
  if (out.empty()) out.push_back(current_device());  // factories: the current device
  return out;
}

void note_unordered_producer(c10::DeviceIndex device) {
  if (!applies()) return;
  const c10::Stream s = current_stream(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_marked->emplace(static_cast<int>(s.device_index()), s.id()).second) ++g_marked_count;
}

void order_native_producer(c10::DeviceIndex device) {
  if (g_marked_count.load(std::memory_order_acquire) == 0 || !g_enabled.load()) return;
  const c10::Stream s = current_stream(device);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_marked->erase({static_cast<int>(s.device_index()), s.id()}) == 0) return;
    --g_marked_count;
  }
  CurrentDeviceScope scope(s.device_index());
  TFL_CALL(s.device_index(), stream_synchronize, native_stream(s));
  ++g_barriers;
}

void order_native_producer_for_stack(const c10::OperatorHandle& op,
                                     const torch::jit::Stack& stack) {
  if (g_marked_count.load(std::memory_order_acquire) == 0 || !g_enabled.load()) return;
  for (auto d : stack_flagos_devices(op, stack)) order_native_producer(d);
}

void set_producer_barrier(bool on) { g_enabled.store(on); }
bool producer_barrier_enabled() { return g_enabled.load(); }
uint64_t producer_barrier_count() { return g_barriers.load(); }

}  // namespace torch_fl
