// libmccl.so of the MUSA emulator: MCCL, the emulator kit's NCCL-style library (emu_kit/
// nccl_style.h says the contract) under MCCL's names, over the MUSA runtime's worker streams.
//
// An operation is queued on its stream like the SDK's other work (musa_emu::submit_on_stream_device
// keeps its buffers backed until it ran) and runs later on the stream's worker, where it waits
// for its peers; the call returns at once. MCCL takes every type in every operation and a group
// may mix kinds of operation; the emulator runs a group on one stream.
#include "mccl.h"

#include <vector>

#include "emu_kit/nccl_style_api.h"
#include "musa_emu_internal.h"

namespace {

class MusaRuntime final : public emu_kit::nccl::Runtime {
 public:
  int enter(const char* fn) override { return musa_emu::enter(fn); }
  int current_device() override { return musa_emu::current_device(); }
  int stream_device(void* stream) override {
    return musa_emu::stream_device(static_cast<musaStream_t>(stream));
  }

  emu_kit::nccl::Refusal run(const std::vector<emu_kit::nccl::Part>& parts,
                             emu_kit::nccl::HostWork work) override {
    using emu_kit::nccl::Refusal;
    std::vector<musa_emu::Range> ranges;
    std::vector<size_t> counts;
    for (size_t p = 0; p < parts.size(); ++p) {
      if (parts[p].stream != parts.front().stream) return {Refusal::several_streams, p, 0};
      for (const emu_kit::Range& r : parts[p].ranges) ranges.push_back({r.ptr, r.bytes});
      counts.push_back(parts[p].ranges.size());
    }
    auto* stream = static_cast<musaStream_t>(parts.front().stream);
    musaStreamCaptureStatus capture = musaStreamCaptureStatusNone;
    const bool recorded = stream != nullptr &&
                          musaStreamIsCapturing(stream, &capture) == musaSuccess &&
                          capture == musaStreamCaptureStatusActive;
    const int r = musa_emu::submit_on_stream_device(
        "mccl", stream, ranges.data(), ranges.size(),
        [counts, work = std::move(work)](void* const* host, char*, size_t) {
          std::vector<std::vector<void*>> per_part;
          for (size_t n : counts) {
            per_part.emplace_back(host, host + n);
            host += n;
          }
          work(per_part);
          return 0;  // a failure is the communicator's asynchronous error, not the stream's
        });
    if (r == 0) return {Refusal::none, 0, 0, recorded};
    if (r == -2) return {Refusal::capture_invalidated, 0, 0};
    if (r < 0) return {Refusal::unknown_stream, 0, 0};
    // Range r - 1 of the flattened list: its part and index.
    size_t bad = static_cast<size_t>(r - 1), p = 0;
    while (bad >= counts[p]) bad -= counts[p++];
    return {Refusal::bad_range, p, bad};
  }
};

constexpr emu_kit::nccl::Dialect kMccl = {"mccl",
                                          "MCCL",
                                          "MUSA GPU",
                                          "emulated MUSA GPU",
                                          "musaSetDevice",
                                          "unhandled musa error",
                                          "MUSA_EMU_MCCL_TIMEOUT",
                                          MCCL_VERSION_CODE,
                                          /*reduces_64bit=*/true,
                                          /*mixed_groups=*/true};

}  // namespace

EMU_KIT_NCCL_API(mccl, musaStream_t, MusaRuntime, kMccl)
