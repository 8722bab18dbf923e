// The musa vendor's collective library (torch_fl/collective.h) over Moore Threads' MCCL, through
// the kit's NCCL-style library: MCCL's C API is NCCL's (functions and enum values), 64-bit
// reductions and groups mixing kinds of operation included. libmccl.so is opened at first use;
// torch-fl-musa loads it from the MUSA install first (the vendor's collective_sdk), and without
// it the vendor tier says so and groups run gloo-staged.
//
// The runtime is the musa runtime (csrc/runtime): its native_stream gives the musaStream_t
// behind each flagos stream, and set_device the GPU a communicator is made on.
#include <torch_fl/kit/nccl_style_collective.h>

namespace {

struct Mccl {
  static constexpr const char* kLibrary = "MCCL";
  static constexpr const char* kTable = "mccl";
  static constexpr const char* kPrefix = "mccl";
  static constexpr const char* kSoname = "libmccl.so";
  static constexpr const char* kMissing = "it ships with the MUSA toolkit (mccl) in $MUSA_HOME/lib";
  static constexpr bool kReduces64Bit = true;
  static constexpr bool kMixedGroups = true;
};

}  // namespace

TFL_NCCL_STYLE_COLLECTIVE(Mccl)
