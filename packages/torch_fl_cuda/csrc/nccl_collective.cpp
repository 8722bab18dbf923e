// The cuda vendor's collective library (torch_fl/collective.h) over NCCL's C
// API, through the kit's NCCL-style library. NCCL is the one torch's CUDA
// wheel loads (libnccl.so.2, found by its soname once torch's CUDA libraries
// are in the process); the library builds without NCCL headers and loads on
// machines without NCCL (every call then says why it cannot run).
//
// The runtime is core's delegate runtime (flagos memory is CUDA memory):
// attach_runtime gives its table, whose native_stream turns a tfl_stream into
// the cudaStream_t NCCL enqueues on and whose set_device selects the device
// a communicator is made on.
#include <torch_fl/kit/nccl_style_collective.h>

namespace {

struct Nccl {
  static constexpr const char* kLibrary = "NCCL";
  static constexpr const char* kTable = "nccl";
  static constexpr const char* kPrefix = "nccl";
  static constexpr const char* kSoname = "libnccl.so.2";
  static constexpr const char* kMissing = "a CUDA build of torch ships it (the nvidia-nccl wheel)";
  static constexpr bool kReduces64Bit = true;
  static constexpr bool kMixedGroups = true;
};

}  // namespace

TFL_NCCL_STYLE_COLLECTIVE(Nccl)
