// libtopsrt.so internals (not SDK API): emulated cards in host memory over the emulator
// framework, enforcing the contract measured on Enflame hardware (docs/gcu.md, "The runtime over
// topsrt"):
//  - device pointers are device-scoped: a pointer resolves only while its card is current
//    (free/memcpy/memset run with the owner current; H2D: dst decides, D2H and D2D: src
//    decides). Addresses are NOT host addressable: they live in an unmapped virtual range, so
//    host code that dereferences one crashes as it would on the card.
//  - topsMemcpy(DeviceToDevice) between two cards fails and leaves the destination untouched,
//    under every current card;
//  - topsMemcpyPeer needs the current card to be one of the two; topsMemcpyPeerAsync also needs
//    the stream to belong to the source card (the hardware hangs; the emulator reports an error
//    so tests catch it);
//  - default streams are per card, created lazily while the card is current;
//  - work of a second producer (topsEmuLaunchForeign, a Triton kernel) queued on a stream is not
//    waited for by the SDK's own work submitted behind it.
// SDK work itself runs synchronously at submission (the framework's inline streams: a valid
// schedule of an in-order stream), which keeps the emulator deterministic.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "emu_kit/event.h"
#include "emu_kit/handles.h"
#include "emu_kit/ledger.h"
#include "emu_kit/memory.h"
#include "emu_kit/stream.h"
#include "tops_runtime_api.h"

#define EMU_API extern "C" __attribute__((visibility("default")))

struct itopsStream_t : emu_kit::Stream {
  itopsStream_t(int device, bool is_default);
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
  explicit itopsEvent_t(unsigned flags);
  itopsStream_t* stream = nullptr;  // of the latest record; cleared when it is destroyed
  uint64_t wait_seq = 0;            // foreign work of `stream` the event is behind
};

namespace tops_emu {

struct Card {
  emu_kit::DeviceMemory memory;
  uintptr_t next = 0;  // where its next allocation goes in its address range
  std::shared_ptr<itopsStream_t> default_stream;
};

struct State {
  State();
  // Every API call holds it: SDK work runs at submission, under it.
  std::recursive_mutex mu;
  int count = 0;
  std::vector<Card> cards;
  emu_kit::AllocationMap allocs;       // device memory of every card
  emu_kit::AllocationMap host_allocs;  // topsHostMalloc blocks
  emu_kit::HandleTable<itopsStream_t> streams;
  emu_kit::HandleTable<itopsEvent_t> events;
  emu_kit::Ledger ledger{"tops|eccl", "TopsRider emulator"};  // libeccl.so counts through it too
};

// The emulated cards, from TOPS_EMU_DEVICE_COUNT / TOPS_EMU_MEMORY_MB at first use.
State& S();
extern thread_local int t_device;

using Lock = std::lock_guard<std::recursive_mutex>;

// Records e as the thread's last error (topsGetLastError) and returns it.
topsError_t fail(topsError_t e);
bool valid_card(int d);
// The host memory behind [p, p + n) on `card`, or nullptr.
char* resolve_on(int card, const void* p, size_t n);
// Which card's address range p falls in (whether or not it is allocated): -1 for none.
int card_of_range(const void* p);
// NULL -> the current card's default stream; nullptr for an unknown handle.
itopsStream_t* stream_of(topsStream_t s);
// Runs the stream's foreign work up to sequence number `upto`.
void drain(itopsStream_t* s, uint64_t upto);
inline void drain_all(itopsStream_t* s) { drain(s, UINT64_MAX); }

}  // namespace tops_emu

// Every API function starts with this: lock, count, injected fault.
#define ENTER(name)                                  \
  ::tops_emu::Lock _lock(::tops_emu::S().mu);        \
  if (int _inj = ::tops_emu::S().ledger.enter(name)) \
  return ::tops_emu::fail(static_cast<topsError_t>(_inj))
