// libeccl.so of the TopsRider emulator: ECCL, the emulator kit's NCCL-style library (emu_kit/
// nccl_style.h says the contract) under ECCL's names, with the limits ECCL documents: only
// ecclBroadcast and ecclAllGather take 64-bit types, and a group aggregates one kind of
// operation (sends and receives are one kind).
//
// As all of this emulator's SDK work, an operation runs at submission, in stream order
// (topsEmuInternalPin resolves its buffers on the stream's card and keeps them backed), outside
// the runtime's lock: it returns once every rank reached it. Like the SDK's other producers it
// does not wait for a second producer's (Triton) work queued on the stream before it.
#include "eccl/eccl.h"

#include <vector>

#include "emu_internal.h"
#include "emu_kit/nccl_style_api.h"

namespace {

class Topsrt final : public emu_kit::nccl::Runtime {
 public:
  int enter(const char* fn) override { return topsEmuInternalEnter(fn); }
  int current_device() override {
    int device = -1;
    return topsGetDevice(&device) == topsSuccess ? device : -1;
  }
  int stream_device(void* stream) override {
    return topsEmuInternalStreamDevice(static_cast<topsStream_t>(stream));
  }

  emu_kit::nccl::Refusal run(const std::vector<emu_kit::nccl::Part>& parts,
                             emu_kit::nccl::HostWork work) override {
    using emu_kit::nccl::Refusal;
    std::vector<void*> pins;
    std::vector<std::vector<void*>> host(parts.size());
    Refusal refusal;
    for (size_t p = 0; p < parts.size() && refusal.kind == Refusal::none; ++p) {
      const std::vector<emu_kit::Range>& ranges = parts[p].ranges;
      std::vector<topsEmuRange> spans;
      for (const emu_kit::Range& r : ranges) spans.push_back({r.ptr, r.bytes});
      host[p].resize(ranges.size());
      int card = -1;
      void* pin = nullptr;
      size_t bad = 0;
      const topsError_t e =
          topsEmuInternalPin(static_cast<topsStream_t>(parts[p].stream), spans.data(), spans.size(),
                             host[p].data(), &card, &pin, &bad);
      if (e == topsSuccess) {
        pins.push_back(pin);
      } else {
        refusal = e == topsErrorInvalidHandle ? Refusal{Refusal::unknown_stream, p, 0}
                                              : Refusal{Refusal::bad_range, p, bad};
      }
    }
    if (refusal.kind == Refusal::none) work(host);
    for (void* pin : pins) topsEmuInternalUnpin(pin);
    return refusal;
  }
};

constexpr emu_kit::nccl::Dialect kEccl = {"eccl",
                                          "ECCL",
                                          "GCU",
                                          "emulated GCU",
                                          "topsSetDevice",
                                          "unhandled tops error",
                                          "TOPS_EMU_ECCL_TIMEOUT",
                                          ECCL_VERSION_CODE,
                                          /*reduces_64bit=*/false,
                                          /*mixed_groups=*/false};

}  // namespace

EMU_KIT_NCCL_API(eccl, topsStream_t, Topsrt, kEccl)
