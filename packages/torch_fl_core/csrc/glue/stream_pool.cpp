#include "glue/stream_pool.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "glue/runtime_access.h"

namespace torch_fl {
namespace {

struct DevicePool {
  std::once_flag created;
  std::array<tfl_stream, kStreamPoolSize> streams{};
  std::atomic<uint32_t> next{0};
};

// Device pools live for the whole process (leaked on purpose: streams must
// outlive every tensor deleter that may still record on them at exit).
std::vector<DevicePool*>& pools() {
  static auto* p = new std::vector<DevicePool*>([] {
    runtime();  // throws (and leaves this static unset) until a runtime is active
    const auto n = device_count();
    std::vector<DevicePool*> v;
    for (c10::DeviceIndex i = 0; i < n; ++i) v.push_back(new DevicePool());
    return v;
  }());
  return *p;
}

DevicePool& pool_for(c10::DeviceIndex device) {
  auto& ps = pools();
  TORCH_CHECK(device >= 0 && static_cast<size_t>(device) < ps.size(),
              "flagos: invalid device ordinal ", static_cast<int>(device), " for a stream");
  DevicePool& p = *ps[device];
  std::call_once(p.created, [&] {
    CurrentDeviceScope scope(device);
    for (auto& s : p.streams) TFL_CALL(device, stream_create, &s, 0);
  });
  return p;
}

// Per-thread current stream id for each device; 0 (default stream) until set.
std::vector<c10::StreamId>& thread_current_ids() {
  thread_local std::vector<c10::StreamId> ids;
  const auto n = pools().size();
  if (ids.size() < n) ids.resize(n, 0);
  return ids;
}

c10::DeviceIndex resolve(c10::DeviceIndex device) { return device < 0 ? current_device() : device; }

// The runtime's own streams: id 0 is its default (NULL) stream, 1..kStreamPoolSize
// its pooled streams, and the current stream a per-thread id per device.
class RuntimeStreams final : public StreamModel {
 public:
  tfl_stream native(const c10::Stream& stream) const override {
    const c10::StreamId id = stream.id();
    if (id == 0) return nullptr;
    TORCH_CHECK(id > 0 && id <= kStreamPoolSize, "flagos: unknown stream id ", id, " on ",
                stream.device());
    return pool_for(stream.device_index()).streams[id - 1];
  }
  c10::Stream default_stream(c10::DeviceIndex device) const override {
    return make_stream(device, 0);
  }
  c10::Stream from_pool(c10::DeviceIndex device, bool) const override {
    DevicePool& p = pool_for(device);
    const uint32_t slot = p.next.fetch_add(1) % kStreamPoolSize;
    return make_stream(device, static_cast<c10::StreamId>(slot + 1));
  }
  c10::Stream current(c10::DeviceIndex device) const override {
    auto& ids = thread_current_ids();
    TORCH_CHECK(device >= 0 && static_cast<size_t>(device) < ids.size(),
                "flagos: invalid device ordinal ", static_cast<int>(device));
    return make_stream(device, ids[device]);
  }
  void set_current(const c10::Stream& stream) const override {
    auto& ids = thread_current_ids();
    const auto device = stream.device_index();
    TORCH_CHECK(device >= 0 && static_cast<size_t>(device) < ids.size(),
                "flagos: invalid device ordinal ", static_cast<int>(device));
    if (stream.id() != 0) native(stream);  // validates and creates the pool
    ids[device] = stream.id();
  }
  void* native_handle(const c10::Stream& stream) const override { return native(stream); }
};

const RuntimeStreams g_runtime_streams;
std::atomic<const StreamModel*> g_model{&g_runtime_streams};

const StreamModel& model() { return *g_model.load(std::memory_order_acquire); }

}  // namespace

c10::Stream make_stream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

void install_stream_model(const StreamModel* model) {
  g_model.store(model, std::memory_order_release);
}

tfl_stream native_stream(const c10::Stream& stream) { return model().native(stream); }

c10::Stream default_stream(c10::DeviceIndex device) {
  return model().default_stream(resolve(device));
}

c10::Stream stream_from_pool(c10::DeviceIndex device, bool high_priority) {
  return model().from_pool(resolve(device), high_priority);
}

c10::Stream current_stream(c10::DeviceIndex device) { return model().current(resolve(device)); }

void set_current_stream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1, "flagos: cannot make a ",
              stream.device(), " stream current");
  model().set_current(stream);
}

void* stream_native_handle(const c10::Stream& stream) { return model().native_handle(stream); }

}  // namespace torch_fl
