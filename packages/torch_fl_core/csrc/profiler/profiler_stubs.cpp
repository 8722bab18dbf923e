// Legacy profiler stubs for PrivateUse1 (torch::profiler::impl::ProfilerStubs):
// what torch's KINETO_PRIVATEUSE1_FALLBACK state calls at the start and end of
// every profiled op to time it on the device. Events are runtime events with
// timing, recorded on the flagos current stream, so an op's device time is the
// time the stream spent between them. Used where torch chooses the fallback
// (torch.autograd.profiler.profile(use_device="flagos", use_kineto=False) on
// every minor; torch.profiler.profile on minors whose Kineto has no
// PrivateUse1 activity).
#include <torch/csrc/profiler/stubs/base.h>

#include <c10/util/ApproximateClock.h>

#include <chrono>

#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

namespace torch_fl::profiler {
namespace {

class FlagosStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = current_device();
    if (device) *device = index;
    tfl_event e = nullptr;
    TFL_CALL(index, event_create, &e, TFL_EVENT_DEFAULT);
    // Owned by the profiler's event record; destroyed with it.
    *event = std::shared_ptr<void>(static_cast<void*>(e), [](void* p) {
      if (runtime_active()) runtime().event_destroy(static_cast<tfl_event>(p));
    });
    if (cpu_ns) *cpu_ns = c10::getTime();
    TFL_CALL(index, event_record, e, native_stream(current_stream(index)));
  }

  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* event,
                const torch::profiler::impl::ProfilerVoidEventStub* event2) const override {
    auto* a = static_cast<tfl_event>(event->get());
    auto* b = static_cast<tfl_event>(event2->get());
    TFL_CALL(-1, event_synchronize, a);
    TFL_CALL(-1, event_synchronize, b);
    float ms = 0.f;
    TFL_CALL(-1, event_elapsed_ms, &ms, a, b);
    return ms * 1000.f;  // microseconds, as the profiler expects
  }

  // No device-side range markers on the runtime ABI: nothing to annotate.
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}

  bool enabled() const override { return runtime_active() && has_capability(TFL_CAP_EVENT_TIMING); }

  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex n = device_count_noexcept();
    for (c10::DeviceIndex i = 0; i < n; ++i) {
      CurrentDeviceScope scope(i);
      op(i);
    }
  }

  void synchronize() const override { TFL_CALL(current_device(), device_synchronize); }
};

struct Registerer {
  Registerer() {
    static FlagosStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} g_register;

}  // namespace
}  // namespace torch_fl::profiler
