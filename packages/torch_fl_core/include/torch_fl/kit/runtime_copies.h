// Which device a copy runs on, from the kind asked for and the pointers'
// owners: the rule every device-scoped runtime follows (H2D: dst decides; D2H
// and D2D: src), and the refusal when the kind does not fit the pointers.
#pragma once

#include <torch_fl/runtime.h>

namespace torch_fl::kit {

inline const char* memcpy_kind_name(tfl_memcpy_kind kind) {
  switch (kind) {
    case TFL_MEMCPY_HOST_TO_HOST:
      return "HostToHost";
    case TFL_MEMCPY_HOST_TO_DEVICE:
      return "HostToDevice";
    case TFL_MEMCPY_DEVICE_TO_HOST:
      return "DeviceToHost";
    case TFL_MEMCPY_DEVICE_TO_DEVICE:
      return "DeviceToDevice";
  }
  return "?";
}

struct CopyRoute {
  int device = -1;  // where the copy runs (-1: host to host)
  int other = -1;   // D2D: the destination's device
};

// The route of a `kind` copy between dst (owned by device dst_owner, -1: host)
// and src (src_owner); false when the kind does not fit the owners.
inline bool copy_route(tfl_memcpy_kind kind, int dst_owner, int src_owner, CopyRoute* out) {
  switch (kind) {
    case TFL_MEMCPY_HOST_TO_HOST:
      *out = {-1, -1};
      return dst_owner < 0 && src_owner < 0;
    case TFL_MEMCPY_HOST_TO_DEVICE:
      *out = {dst_owner, -1};
      return dst_owner >= 0 && src_owner < 0;
    case TFL_MEMCPY_DEVICE_TO_HOST:
      *out = {src_owner, -1};
      return src_owner >= 0 && dst_owner < 0;
    case TFL_MEMCPY_DEVICE_TO_DEVICE:
      *out = {src_owner, dst_owner};
      return src_owner >= 0 && dst_owner >= 0;
  }
  return false;
}

}  // namespace torch_fl::kit
