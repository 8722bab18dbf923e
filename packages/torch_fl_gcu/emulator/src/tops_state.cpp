// The cards, their address ranges and the lookups every entry point uses.
#include "tops_state.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "emu_internal.h"

namespace tops_emu {

namespace {
constexpr uintptr_t kBase = 0x200000000000ull;     // 32 TiB: outside glibc's heap and mmap areas
constexpr uintptr_t kCardSpan = 0x10000000000ull;  // 1 TiB of address space per card
}  // namespace

thread_local int t_device = 0;
thread_local topsError_t t_last = topsSuccess;  // topsGetLastError

State::State() {
  count = static_cast<int>(emu_kit::env_size("TOPS_EMU_DEVICE_COUNT", 2));
  const size_t cap = emu_kit::env_size("TOPS_EMU_MEMORY_MB", 4096) << 20;
  cards.resize(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    cards[i].memory.capacity = cap;
    cards[i].next = kBase + kCardSpan * static_cast<uintptr_t>(i);
  }
}

State& S() {
  static State* s = new State();  // never destroyed: other libraries may call in at exit
  return *s;
}

topsError_t fail(topsError_t e) {
  t_last = e;
  return e;
}

bool valid_card(int d) { return d >= 0 && d < S().count; }

char* resolve_on(int card, const void* p, size_t n) { return S().allocs.resolve(card, p, n); }

int card_of_range(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a < kBase) return -1;
  const uintptr_t i = (a - kBase) / kCardSpan;
  return i < static_cast<uintptr_t>(S().count) ? static_cast<int>(i) : -1;
}

namespace {
itopsStream_t* default_stream(int card) {
  Card& c = S().cards[static_cast<size_t>(card)];
  if (!c.default_stream) {
    c.default_stream = std::make_shared<itopsStream_t>(card, true);
    S().streams.add(c.default_stream);
  }
  return c.default_stream.get();
}
}  // namespace

itopsStream_t* stream_of(topsStream_t s) {
  if (s == nullptr) return t_device < S().count ? default_stream(t_device) : nullptr;
  return S().streams.find(s) ? s : nullptr;
}

}  // namespace tops_emu

using namespace tops_emu;

// ---- internals for libtopsaten ----

EMU_API void* topsEmuInternalResolve(const void* ptr, size_t bytes) {
  Lock lock(S().mu);
  return resolve_on(t_device, ptr, std::max<size_t>(bytes, 1));
}

EMU_API int topsEmuInternalStreamDevice(topsStream_t stream) {
  Lock lock(S().mu);
  itopsStream_t* s = stream_of(stream);
  return s ? s->device() : -1;
}

EMU_API int topsEmuInternalEnter(const char* name) { return S().ledger.enter(name); }

EMU_API topsError_t topsEmuInternalPin(topsStream_t stream, const topsEmuRange* ranges, size_t n,
                                       void** host, int* card, void** pin, size_t* bad) {
  Lock lock(S().mu);
  itopsStream_t* s = stream_of(stream);
  if (s == nullptr) return topsErrorInvalidHandle;
  auto held = std::make_unique<std::vector<emu_kit::AllocRef>>();
  for (size_t i = 0; i < n; ++i) {
    const size_t bytes = std::max<size_t>(ranges[i].bytes, 1);
    emu_kit::AllocRef a = S().allocs.range(ranges[i].ptr, bytes);
    char* h = resolve_on(s->device(), ranges[i].ptr, bytes);
    if (!a || h == nullptr) {
      *bad = i;
      return topsErrorInvalidValue;
    }
    host[i] = h;
    held->push_back(std::move(a));
  }
  *card = s->device();
  *pin = held.release();
  return topsSuccess;
}

EMU_API void topsEmuInternalUnpin(void* pin) {
  delete static_cast<std::vector<emu_kit::AllocRef>*>(pin);
}
