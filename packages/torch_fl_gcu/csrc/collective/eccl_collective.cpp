// The gcu vendor's collective library (torch_fl/collective.h) over Enflame's ECCL, through the
// kit's NCCL-style library: ECCL's C API is NCCL's (functions and enum values), with two limits
// ECCL documents: only ecclBroadcast and ecclAllGather take 64-bit types (core reduces int64 and
// float64 by gathering them), and a group aggregates one kind of operation. libeccl.so is opened
// at first use; torch-fl-gcu loads it from the TopsRider install first (the vendor's
// collective_sdk), and without it the vendor tier says so and groups run gloo-staged.
//
// The runtime is the gcu runtime (csrc/runtime): its native_stream gives the topsStream_t
// behind each flagos stream, and set_device the card a communicator is made on.
#include <torch_fl/kit/nccl_style_collective.h>

namespace {

struct Eccl {
  static constexpr const char* kLibrary = "ECCL";
  static constexpr const char* kTable = "eccl";
  static constexpr const char* kPrefix = "eccl";
  static constexpr const char* kSoname = "libeccl.so";
  static constexpr const char* kMissing =
      "it ships with TopsRider (the eccl package) in $TOPS_HOME/lib";
  static constexpr bool kReduces64Bit = false;
  static constexpr bool kMixedGroups = false;
};

}  // namespace

TFL_NCCL_STYLE_COLLECTIVE(Eccl)
