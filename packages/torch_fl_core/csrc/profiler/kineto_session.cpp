// The flagos activity profiler for Kineto (libkineto::IActivityProfiler), so
// torch.profiler.profile(activities=[CPU, PrivateUse1]) shows flagos device
// time where torch drives PrivateUse1 through Kineto (torch >= 2.12, state
// KINETO_PRIVATEUSE1).
//
// While a session records, every routed call (profiler/route_scope.h) records
// a start and an end runtime event on the flagos current stream and remembers
// the Kineto correlation id of its own profiler row (the innermost id Kineto
// pushed on this thread). At the end of the trace the events become device
// activities (CONCURRENT_KERNEL, which torch maps to the PrivateUse1 device)
// linked to those rows, so each row gets its flagos device time.
//
// Absolute device timestamps: the first interval on a device records an anchor
// event and waits for it; interval times are the anchor's host time plus the
// runtime's elapsed time from the anchor.
//
// Switched off (set_kineto_session_enabled(false)) where the vendor's device
// work is already traced by a native activity of torch (the cuda vendor's
// kernels by CUPTI): the same calls would otherwise be counted twice
// (torch_fl/profiler_activity.py).
#include "profiler/route_scope.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

#if __has_include(<kineto/libkineto.h>) && (TORCH_FL_TORCH_MAJOR > 2 || TORCH_FL_TORCH_MINOR >= 12)
#define TORCH_FL_KINETO_SESSION 1
#include <kineto/GenericTraceActivity.h>
#include <kineto/IActivityProfiler.h>
#include <kineto/libkineto.h>
#include <kineto/output_base.h>
#endif

namespace torch_fl::profiler {

struct DeviceInterval {
  std::string name;
  std::string backend;
  c10::DeviceIndex device = 0;
  int64_t stream_id = 0;
  uint64_t correlation = 0;
  tfl_event start = nullptr;
  tfl_event end = nullptr;
};

namespace {

std::atomic<bool> g_recording{false};
std::atomic<bool> g_enabled{true};
std::mutex g_mutex;
// deque: stable addresses for the intervals handed out while recording.
std::deque<DeviceInterval> g_intervals;
// Per device: anchor event and the host time (ns since epoch) it completed at.
std::map<c10::DeviceIndex, std::pair<tfl_event, int64_t>> g_anchors;
thread_local std::vector<uint64_t> t_correlation;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

tfl_event record_event(c10::DeviceIndex device, const c10::Stream& stream) {
  tfl_event e = nullptr;
  TFL_CALL(device, event_create, &e, TFL_EVENT_DEFAULT);
  TFL_CALL(device, event_record, e, native_stream(stream));
  return e;
}

void ensure_anchor(c10::DeviceIndex device, const c10::Stream& stream) {
  if (g_anchors.count(device)) return;
  tfl_event anchor = record_event(device, stream);
  TFL_CALL(device, event_synchronize, anchor);
  g_anchors[device] = {anchor, now_ns()};
}

void clear_locked() {
  for (auto& i : g_intervals) {
    if (i.start) runtime().event_destroy(i.start);
    if (i.end) runtime().event_destroy(i.end);
  }
  g_intervals.clear();
  for (auto& [d, a] : g_anchors) runtime().event_destroy(a.first);
  g_anchors.clear();
}

}  // namespace

bool session_recording() noexcept { return g_recording.load(std::memory_order_relaxed); }

void set_kineto_session_enabled(bool enabled) noexcept { g_enabled.store(enabled); }

bool kineto_session_enabled() noexcept { return g_enabled.load(); }

DeviceInterval* interval_begin(const std::string& name, const std::string& backend,
                               c10::DeviceIndex device) {
  if (!session_recording() || t_correlation.empty() || !runtime_active()) return nullptr;
  if (device < 0) device = current_device();
  CurrentDeviceScope scope(device);
  const c10::Stream stream = current_stream(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  ensure_anchor(device, stream);
  g_intervals.push_back(DeviceInterval{name, backend, device, stream.id(), t_correlation.back(),
                                       record_event(device, stream), nullptr});
  return &g_intervals.back();
}

void interval_end(DeviceInterval* interval) {
  CurrentDeviceScope scope(interval->device);
  const c10::Stream stream = current_stream(interval->device);
  tfl_event e = record_event(interval->device, stream);
  std::lock_guard<std::mutex> lock(g_mutex);
  interval->end = e;
}

#ifdef TORCH_FL_KINETO_SESSION
namespace {

class FlagosSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      clear_locked();
    }
    start_ns_ = now_ns();
    g_recording.store(true);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    g_recording.store(false);
    end_ns_ = now_ns();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, start_ns_, end_ns_);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked,
                    int64_t, int64_t) override {
    std::lock_guard<std::mutex> lock(g_mutex);
    libkineto::TraceSpan span(start_ns_, end_ns_, "flagos");
    for (const DeviceInterval& i : g_intervals) {
      if (!i.start || !i.end) continue;  // still running when the trace stopped
      const auto& [anchor, anchor_ns] = g_anchors.at(i.device);
      float a = 0.f, b = 0.f;
      if (runtime().event_synchronize(i.end) != TFL_OK ||
          runtime().event_elapsed_ms(&a, anchor, i.start) != TFL_OK ||
          runtime().event_elapsed_ms(&b, anchor, i.end) != TFL_OK) {
        errors_.push_back("flagos: could not time " + i.name + ": " + runtime().last_error());
        continue;
      }
      libkineto::GenericTraceActivity act(span, libkineto::ActivityType::CONCURRENT_KERNEL, i.name);
      act.startTime = anchor_ns + static_cast<int64_t>(static_cast<double>(a) * 1e6);
      act.endTime = anchor_ns + static_cast<int64_t>(static_cast<double>(b) * 1e6);
      act.id = static_cast<int32_t>(i.correlation);
      act.device = i.device;
      act.resource = static_cast<int32_t>(i.stream_id);
      act.linked = linked ? linked(static_cast<int32_t>(i.correlation)) : nullptr;
      act.addMetadataQuoted("flagos_backend", i.backend);
      // addMetadataQuoted, not addMetadata: the latter formats with fmt, whose
      // out-of-line symbols libtorch does not export.
      act.addMetadataQuoted("stream", std::to_string(i.stream_id));
      logger.handleGenericActivity(act);
    }
    clear_locked();
    status_ = libkineto::TraceStatus::READY;
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  void pushCorrelationId(uint64_t id) override { t_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlation.empty()) t_correlation.pop_back();
  }

 private:
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
  std::vector<std::string> errors_;
};

class FlagosActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override {
    return activities_;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& types, const libkineto::Config&) override {
    // Only when the user asked for device activity (ProfilerActivity.PrivateUse1).
    if (!types.count(libkineto::ActivityType::CONCURRENT_KERNEL)) return nullptr;
    if (!kineto_session_enabled()) return nullptr;
    if (!runtime_active() || !has_capability(TFL_CAP_EVENT_TIMING)) return nullptr;
    return std::make_unique<FlagosSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"flagos"};
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL};
};

struct Registerer {
  Registerer() {
    // Directly with Kineto (an inline API): added to Kineto's child profilers
    // when torch initialises Kineto for the first trace.
    libkineto::api().registerProfilerFactory(
        [] { return std::make_unique<FlagosActivityProfiler>(); });
  }
} g_register;

}  // namespace
#endif  // TORCH_FL_KINETO_SESSION

bool kineto_session_available() noexcept {
#ifdef TORCH_FL_KINETO_SESSION
  return true;
#else
  return false;
#endif
}

}  // namespace torch_fl::profiler
