#include "glue/graph_capture.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

namespace torch_fl {
namespace {
thread_local c10::DeviceIndex t_capturing = -1;

// Seat captures in progress. The count keeps every host kernel outside a
// capture to one relaxed load.
std::atomic<int> g_sink_count{0};
std::mutex g_sinks_mutex;
std::vector<CaptureSink*>& sinks() {
  static auto* v = new std::vector<CaptureSink*>();  // leaked: used until exit
  return *v;
}
}  // namespace

c10::DeviceIndex capturing_device() {
  if (t_capturing >= 0) return t_capturing;
  if (C10_LIKELY(g_sink_count.load(std::memory_order_relaxed) == 0)) return -1;
  CaptureSink* sink = capture_sink();
  return sink != nullptr ? sink->stream().device_index() : -1;
}

void set_capturing_device(c10::DeviceIndex device) { t_capturing = device; }

CaptureSink* capture_sink() {
  if (C10_LIKELY(g_sink_count.load(std::memory_order_relaxed) == 0)) return nullptr;
  std::lock_guard<std::mutex> lock(g_sinks_mutex);
  for (CaptureSink* sink : sinks()) {
    const c10::Stream stream = sink->stream();
    if (current_stream(stream.device_index()) == stream) return sink;
  }
  return nullptr;
}

void add_capture_sink(CaptureSink* sink) {
  std::lock_guard<std::mutex> lock(g_sinks_mutex);
  sinks().push_back(sink);
  g_sink_count.fetch_add(1, std::memory_order_relaxed);
}

void remove_capture_sink(CaptureSink* sink) {
  std::lock_guard<std::mutex> lock(g_sinks_mutex);
  auto& v = sinks();
  const auto it = std::find(v.begin(), v.end(), sink);
  if (it == v.end()) return;
  v.erase(it);
  g_sink_count.fetch_sub(1, std::memory_order_relaxed);
}

void check_not_capturing(std::string_view what) {
  const c10::DeviceIndex device = capturing_device();
  if (C10_LIKELY(device < 0)) return;
  TORCH_CHECK(false, "flagos: ", what,
              " cannot run while a device graph is being captured on flagos:",
              static_cast<int>(device), " (runtime ", runtime_name(),
              "): it needs the host in the middle of the stream. Route the operator to a device "
              "kernel (docs/routing.md) or move it out of the captured region.");
}

}  // namespace torch_fl
