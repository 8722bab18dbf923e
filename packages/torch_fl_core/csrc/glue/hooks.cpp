// PrivateUse1HooksInterface: what ATen asks of a device it does not know.
#include <ATen/Context.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "glue/resize.h"
#include "glue/generator.h"
#include "glue/host_allocator.h"
#include "glue/runtime_access.h"

namespace torch_fl {
namespace {

struct FlagosHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  // Must neither throw nor initialise anything.
  bool isAvailable() const override { return device_count_noexcept() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return runtime_active() && device_index >= 0 && device_index < device_count_noexcept();
  }
  void init() const override {
    runtime();
    if (mirror_device_type()) ensure_mirror_initialized();
  }
  c10::DeviceIndex deviceCount() const override { return device_count_noexcept(); }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    check_device_index(device);
    TFL_CALL(device, set_device, device);
  }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const auto prev = current_device();
    if (device >= 0 && device != prev) setCurrentDevice(device);
    return prev;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(device_index);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    if (const auto type = mirror_device_type()) {
      const auto d = at::globalContext().getAcceleratorHooksInterface(*type).getDeviceFromPtr(data);
      return {c10::DeviceType::PrivateUse1, d.index()};
    }
    tfl_pointer_kind kind = TFL_POINTER_UNKNOWN;
    int device = -1;
    TFL_CALL(-1, pointer_info, data, &kind, &device);
    TORCH_CHECK(kind == TFL_POINTER_DEVICE, "flagos: pointer ", data,
                " was not allocated on a flagos device (runtime '", runtime_name(), "')");
    return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)};
  }

  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), newsize);
  }
};

// Registered at load time; the hooks only reach the runtime when called.
struct Registrar {
  Registrar() { at::RegisterPrivateUse1HooksInterface(new FlagosHooks()); }
} registrar;

}  // namespace
}  // namespace torch_fl
