// libtopsrt.so internals (not SDK API): emulated cards in host memory over the emulator
// framework's CUDA-style runtime (emu_kit/cuda_style.h), enforcing the contract measured on
// Enflame hardware (docs/gcu.md, "The runtime over topsrt"): device-scoped pointers in an
// unmapped range per card, topsMemcpy(DeviceToDevice) between two cards failing and moving
// nothing, topsMemcpyPeerAsync on a stream of the source card, per-card default streams. What
// is topsrt's own:
//  - work of a second producer (topsEmuLaunchForeign, a Triton kernel) queued on a stream is not
//    waited for by the SDK's own work submitted behind it (tops_foreign.cpp);
//  - SDK work itself runs synchronously at submission (the framework's inline streams: a valid
//    schedule of an in-order stream), which keeps the emulator deterministic.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "emu_kit/cuda_style.h"
#include "tops_runtime_api.h"

#define EMU_API extern "C" __attribute__((visibility("default")))

struct itopsStream_t : emu_kit::CudaStream {
  using CudaStream::CudaStream;
  // Foreign (Triton) work not yet drained, oldest first.
  struct Item {
    uint64_t seq;
    void* dst;
    std::vector<char> bytes;
  };
  std::deque<Item> pending;
  uint64_t next_seq = 1;
  uint64_t done_seq = 0;  // every item with seq <= done_seq has run
};

struct itopsEvent_t : emu_kit::Event {
  using Event::Event;
  std::weak_ptr<itopsStream_t> stream;  // of the latest record
  uint64_t wait_seq = 0;                // foreign work of `stream` the event is behind
};

namespace tops_emu {

// The CUDA-style runtime with the foreign lane as its streams' second lane.
class TopsRuntime : public emu_kit::CudaRuntimeOf<itopsStream_t, itopsEvent_t> {
 public:
  TopsRuntime();

 protected:
  bool lane_busy(emu_kit::CudaStream& s) override;
  void lane_drain(emu_kit::CudaStream& s) override;
  bool lane_behind(emu_kit::Event& e) override;
  void lane_drain_to(emu_kit::Event& e) override;
  void recorded(emu_kit::Event& e, const emu_kit::CudaStreamRef& s) override;
};

// The emulated cards, from TOPS_EMU_DEVICE_COUNT / TOPS_EMU_MEMORY_MB at first use.
TopsRuntime& S();

// NULL -> the current card's default stream; nullptr for an unknown handle.
std::shared_ptr<itopsStream_t> stream_of(topsStream_t s);
// Runs the stream's foreign work up to sequence number `upto` (the runtime's lock held).
void drain(itopsStream_t* s, uint64_t upto);
inline void drain_all(itopsStream_t* s) { drain(s, UINT64_MAX); }

}  // namespace tops_emu
