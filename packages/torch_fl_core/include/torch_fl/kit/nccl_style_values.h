// NCCL's values for results, element types and reductions, which the libraries made in its image
// (Enflame's ECCL, Moore Threads' MCCL, ...) keep: the kit's NCCL-style library
// (nccl_style_collective.h) calls an SDK's library with them, and the SDK emulators' NCCL-style
// libraries (emulator_kit's emu_kit/nccl_style.h) answer with them.
#pragma once

#include <cstddef>

namespace torch_fl::kit::nccl_style {

enum Result : int {
  kSuccess = 0,
  kUnhandledRuntimeError = 1,  // ncclUnhandledCudaError, ecclUnhandledTopsError, ...
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
  kNumResults = 8
};
enum Type : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
  kNumTypes = 10
};
enum Op : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kNumOps = 5 };
// The bytes of a unique id (ncclUniqueId's `internal`).
constexpr size_t kUniqueIdBytes = 128;

}  // namespace torch_fl::kit::nccl_style
