// The runtime's configuration (topsrt's names and statuses), its foreign lane hooks, and the
// internals libtopsaten and libeccl use.
#include "tops_state.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "emu_internal.h"

namespace tops_emu {

namespace {
// Where topsrt departs from CUDA's names and behaviour.
emu_kit::CudaConfig config() {
  emu_kit::CudaConfig c("tops", "TopsRider emulator", emu_kit::Stream::Mode::inline_);
  c.ledger_prefix += "|eccl";  // libeccl.so counts through it too
  c.device_kind = "GCU";
  c.host_free = "topsHostFree";
  // A two-card topsMemcpy answers topsErrorInvalidDevicePointer (measured); pointer attributes
  // of host memory topsHostMalloc did not hand out answer topsErrorInvalidValue.
  c.cross_device_copy = topsErrorInvalidDevicePointer;
  c.unregistered_host = false;
  c.renamed = {{topsErrorOutOfMemory, "OutOfMemory"},
               {topsErrorNotInitialized, "NotInitialized"},
               {topsErrorInvalidHandle, "InvalidHandle"}};
  return c;
}

emu_kit::CudaRuntime* make() { return new TopsRuntime(); }

itopsStream_t& lane(emu_kit::CudaStream& s) { return static_cast<itopsStream_t&>(s); }
itopsEvent_t& mark(emu_kit::Event& e) { return static_cast<itopsEvent_t&>(e); }
}  // namespace

TopsRuntime::TopsRuntime() : CudaRuntimeOf(config()) {}

TopsRuntime& S() { return static_cast<TopsRuntime&>(emu_kit::cuda_runtime(make)); }

bool TopsRuntime::lane_busy(emu_kit::CudaStream& s) { return !lane(s).pending.empty(); }

void TopsRuntime::lane_drain(emu_kit::CudaStream& s) { drain_all(&lane(s)); }

bool TopsRuntime::lane_behind(emu_kit::Event& e) {
  std::shared_ptr<itopsStream_t> s = mark(e).stream.lock();
  return s && s->done_seq < mark(e).wait_seq;
}

void TopsRuntime::lane_drain_to(emu_kit::Event& e) {
  if (std::shared_ptr<itopsStream_t> s = mark(e).stream.lock())
    tops_emu::drain(s.get(), mark(e).wait_seq);
}

void TopsRuntime::recorded(emu_kit::Event& e, const emu_kit::CudaStreamRef& s) {
  auto st = std::static_pointer_cast<itopsStream_t>(s);
  mark(e).stream = st;
  mark(e).wait_seq = st->next_seq - 1;
}

std::shared_ptr<itopsStream_t> stream_of(topsStream_t s) {
  return std::static_pointer_cast<itopsStream_t>(S().stream(s));
}

}  // namespace tops_emu

using namespace tops_emu;

// ---- internals for libtopsaten and libeccl ----

EMU_API void* topsEmuInternalResolve(const void* ptr, size_t bytes) {
  return S().resolve(S().current_device(), ptr, std::max<size_t>(bytes, 1));
}

EMU_API int topsEmuInternalStreamDevice(topsStream_t stream) {
  std::shared_ptr<itopsStream_t> s = stream_of(stream);
  return s ? s->device() : -1;
}

EMU_API int topsEmuInternalEnter(const char* name) { return S().ledger().enter(name); }

EMU_API topsError_t topsEmuInternalPin(topsStream_t stream, const topsEmuRange* ranges, size_t n,
                                       void** host, int* card, void** pin, size_t* bad) {
  std::shared_ptr<itopsStream_t> s = stream_of(stream);
  if (s == nullptr) return topsErrorInvalidHandle;
  auto held = std::make_unique<std::vector<emu_kit::AllocRef>>();
  const long first_bad =
      S().pin(s->device(), emu_kit::ranges_of(ranges, n), false, host, held.get());
  if (first_bad >= 0) {
    *bad = static_cast<size_t>(first_bad);
    return topsErrorInvalidValue;
  }
  *card = s->device();
  *pin = held.release();
  return topsSuccess;
}

EMU_API void topsEmuInternalUnpin(void* pin) {
  delete static_cast<std::vector<emu_kit::AllocRef>*>(pin);
}
