// c10's DeviceGuardImplInterface for PrivateUse1: devices, streams and events,
// all through the runtime table.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pthread.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "glue/caching_allocator.h"
#include "glue/runtime_access.h"
#include "glue/stream_pool.h"

namespace torch_fl {
namespace {

using c10::Device;
using c10::DeviceIndex;
using c10::DeviceType;
using c10::Stream;

tfl_event as_event(void* e) { return static_cast<tfl_event>(e); }

// The device each event was created on, for error messages: c10 passes
// query/synchronize only the event. Touched when an event is created or
// destroyed, read only when a runtime call on it failed.
std::mutex g_event_mutex;
auto* g_event_devices = new std::unordered_map<tfl_event, DeviceIndex>();

void note_event_device(tfl_event e, DeviceIndex device) {
  std::lock_guard<std::mutex> lock(g_event_mutex);
  (*g_event_devices)[e] = device;
}
void forget_event(tfl_event e) {
  std::lock_guard<std::mutex> lock(g_event_mutex);
  g_event_devices->erase(e);
}
DeviceIndex event_device(tfl_event e) {
  std::lock_guard<std::mutex> lock(g_event_mutex);
  auto it = g_event_devices->find(e);
  return it == g_event_devices->end() ? -1 : it->second;
}

// Whether this is one of the autograd engine's device threads (torch names
// them "pt_autograd_<device>"). Each calls setDevice once when it starts, in
// code that does not catch: an exception there ends the process.
bool on_autograd_device_thread() {
  char name[16] = {};
  return pthread_getname_np(pthread_self(), name, sizeof(name)) == 0 &&
         std::strncmp(name, "pt_autograd_", 12) == 0;
}

struct FlagosGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  DeviceType type() const override { return DeviceType::PrivateUse1; }

  Device exchangeDevice(Device d) const override {
    TORCH_CHECK(d.is_privateuseone(), "flagos: expected a flagos device, got ", d);
    const Device old = getDevice();
    if (d.index() >= 0 && d.index() != old.index()) setDevice(d);
    return old;
  }

  Device getDevice() const override { return Device(DeviceType::PrivateUse1, current_device()); }

  void setDevice(Device d) const override {
    TORCH_CHECK(d.is_privateuseone(), "flagos: expected a flagos device, got ", d);
    if (d.index() < 0) return;
    check_device_index(d.index());
    const tfl_status st = runtime().set_device(d.index());
    if (C10_LIKELY(st == TFL_OK)) return;
    if (on_autograd_device_thread()) {
      // Not fatal there: every flagos call the thread runs makes its device
      // current itself (CurrentDeviceScope), so a runtime that keeps failing
      // raises inside backward(), where the caller sees it.
      TORCH_WARN(
          "flagos: autograd's device thread could not make flagos:", static_cast<int>(d.index()),
          " current (runtime '", runtime_name(), "'); its calls set the device themselves");
      return;
    }
    throw_runtime_error(st, "set_device", d.index());
  }

  void uncheckedSetDevice(Device d) const noexcept override {
    if (runtime_active() && d.index() >= 0) runtime().set_device(d.index());
  }

  Stream getStream(Device d) const override { return current_stream(d.index()); }

  Stream getDefaultStream(Device d) const override { return default_stream(d.index()); }

  Stream getStreamFromGlobalPool(Device d, bool high_priority = false) const override {
    return stream_from_pool(d.index(), high_priority);
  }

  Stream getNewStream(Device d, int priority = 0) const override {
    return stream_from_pool(d.index(), priority < 0);
  }

  Stream exchangeStream(Stream s) const override {
    const Stream old = current_stream(s.device_index());
    set_current_stream(s);
    return old;
  }

#if TORCH_FL_TORCH_MAJOR > 2 || TORCH_FL_TORCH_MINOR >= 11
  void* getStreamNativeHandle(const Stream s) const override { return stream_native_handle(s); }
#endif

  void destroyEvent(void* event, const DeviceIndex device_index) const noexcept override {
    if (!event || !runtime_active()) return;
    forget_event(as_event(event));
    runtime().event_destroy(as_event(event));
  }

  void record(void** event, const Stream& stream, const DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "flagos: event on device ", static_cast<int>(device_index),
                " cannot be recorded on a stream of ", stream.device());
    CurrentDeviceScope scope(stream.device_index());
    if (*event == nullptr) {
      // PyTorch's default events skip timing, as on CUDA; BACKEND_DEFAULT
      // (torch.Event(enable_timing=True)) keeps it.
      const uint32_t flags =
          flag == c10::EventFlag::PYTORCH_DEFAULT ? TFL_EVENT_DISABLE_TIMING : TFL_EVENT_DEFAULT;
      tfl_event e = nullptr;
      TFL_CALL(stream.device_index(), event_create, &e, flags);
      note_event_device(e, stream.device_index());
      *event = e;
    }
    TFL_CALL(stream.device_index(), event_record, as_event(*event), native_stream(stream));
  }

  void block(void* event, const Stream& stream) const override {
    if (!event) return;  // never recorded: nothing to wait for
    CurrentDeviceScope scope(stream.device_index());
    TFL_CALL(stream.device_index(), stream_wait_event, native_stream(stream), as_event(event));
  }

  bool queryEvent(void* event) const override {
    if (!event) return true;
    const tfl_status st = runtime().event_query(as_event(event));
    if (st == TFL_ERROR_NOT_READY) return false;
    if (st != TFL_OK) throw_runtime_error(st, "event_query", event_device(as_event(event)));
    return true;
  }

  DeviceIndex deviceCount() const noexcept override { return device_count_noexcept(); }

#if __has_include(<c10/core/DeviceCapability.h>)
  // torch.accelerator.get_device_capability: flagos memory holds, and copies
  // convert, every dtype (the default DeviceCapability, all set).
  c10::DeviceCapability getDeviceCapability(Device d) const override {
    check_device_index(d.index() < 0 ? current_device() : d.index());
    return c10::DeviceCapability();
  }
#endif

  bool queryStream(const Stream& stream) const override {
    CurrentDeviceScope scope(stream.device_index());
    const tfl_status st = runtime().stream_query(native_stream(stream));
    if (st == TFL_ERROR_NOT_READY) return false;
    if (st != TFL_OK) throw_runtime_error(st, "stream_query", stream.device_index());
    return true;
  }

  void synchronizeStream(const Stream& stream) const override {
    CurrentDeviceScope scope(stream.device_index());
    TFL_CALL(stream.device_index(), stream_synchronize, native_stream(stream));
  }

  void synchronizeEvent(void* event) const override {
    if (!event) return;
    const tfl_status st = runtime().event_synchronize(as_event(event));
    if (st != TFL_OK) throw_runtime_error(st, "event_synchronize", event_device(as_event(event)));
  }

  void synchronizeDevice(const DeviceIndex device_index) const override {
    CurrentDeviceScope scope(device_index);
    TFL_CALL(device_index, device_synchronize);
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const Stream& stream) const override {
    caching_allocator()->recordStream(data_ptr, stream);
  }

  double elapsedTime(void* start, void* end, const DeviceIndex device_index) const override {
    TORCH_CHECK(start && end, "flagos: both events must be recorded before elapsed_time");
    float ms = 0.f;
    TFL_CALL(device_index, event_elapsed_ms, &ms, as_event(start), as_event(end));
    return static_cast<double>(ms);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, FlagosGuardImpl);

}  // namespace
}  // namespace torch_fl
