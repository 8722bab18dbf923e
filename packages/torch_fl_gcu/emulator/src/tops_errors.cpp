// topsGetErrorString and the per-thread last error.
#include "tops_state.h"

namespace tops_emu {
extern thread_local topsError_t t_last;
}  // namespace tops_emu

using namespace tops_emu;

EMU_API const char* topsGetErrorString(topsError_t error) {
  switch (error) {
    case topsSuccess:
      return "topsSuccess: no error";
    case topsErrorInvalidValue:
      return "topsErrorInvalidValue: invalid argument";
    case topsErrorOutOfMemory:
      return "topsErrorOutOfMemory: out of memory";
    case topsErrorNotInitialized:
      return "topsErrorNotInitialized: initialization error";
    case topsErrorInvalidDevicePointer:
      return "topsErrorInvalidDevicePointer: invalid device pointer";
    case topsErrorInvalidMemcpyDirection:
      return "topsErrorInvalidMemcpyDirection: invalid copy direction";
    case topsErrorNoDevice:
      return "topsErrorNoDevice: no GCU device is detected";
    case topsErrorInvalidDevice:
      return "topsErrorInvalidDevice: invalid device ordinal";
    case topsErrorPeerAccessUnsupported:
      return "topsErrorPeerAccessUnsupported: peer access is not supported";
    case topsErrorInvalidHandle:
      return "topsErrorInvalidHandle: invalid resource handle";
    case topsErrorNotReady:
      return "topsErrorNotReady: device not ready";
    case topsErrorIllegalAddress:
      return "topsErrorIllegalAddress: an illegal memory access was encountered";
    case topsErrorNotSupported:
      return "topsErrorNotSupported: operation not supported";
    case topsErrorUnknown:
      return "topsErrorUnknown: unknown error";
  }
  return "unrecognized topsError_t";
}

EMU_API topsError_t topsGetLastError(void) {
  const topsError_t e = t_last;
  t_last = topsSuccess;
  return e;
}
