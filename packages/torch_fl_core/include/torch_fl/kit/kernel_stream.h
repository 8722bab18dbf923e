// The SDK stream a vendor's kernel launches on: the one behind the current
// flagos stream of its device (the runtime's native_stream, runtime_native_stream.h).
#ifndef TORCH_FL_KIT_KERNEL_STREAM_H_
#define TORCH_FL_KIT_KERNEL_STREAM_H_

#include <c10/core/Device.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch_fl/kit/runtime_native_stream.h>

namespace torch_fl::kit {

// The SDK handle (topsStream_t, aclrtStream, ...) of the current flagos stream
// of `device`; errors name `vendor` and `sdk_stream` (the SDK's stream type).
inline void* current_native_stream(c10::Device device, const char* vendor, const char* sdk_stream) {
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  const c10::Stream s = impl->getStream(device);
  void* handle = nullptr;
#if TORCH_FL_TORCH_MAJOR > 2 || TORCH_FL_TORCH_MINOR >= 11
  handle = impl->getStreamNativeHandle(s);
#else
  // torch 2.10 cannot name the native stream: use the device's default one.
  TORCH_CHECK(s.id() == 0, vendor, " kernels need torch >= 2.11 to run on a non-default stream");
#endif
  void* sdk = nullptr;
  const char* why = "";
  const tfl_status st = native_stream(static_cast<tfl_stream>(handle), device.index(), &sdk, &why);
  TORCH_CHECK(st == TFL_OK, vendor, ": cannot resolve the ", sdk_stream, " of ", device, ": ", why,
              " (vendor ", vendor, ")");
  return sdk;
}

}  // namespace torch_fl::kit

#endif  // TORCH_FL_KIT_KERNEL_STREAM_H_
