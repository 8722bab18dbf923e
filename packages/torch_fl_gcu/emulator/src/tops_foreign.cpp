// A second producer on a stream (tops_emulator.h: topsEmuLaunchForeign), the way the S60 runs a
// Triton kernel: its work is queued, and the SDK's own work submitted behind it runs ahead of it.
// Only synchronisation (and topsStreamQuery, which makes progress) drains it.
#include <algorithm>
#include <cstring>

#include "tops_emulator.h"
#include "tops_state.h"

namespace tops_emu {

void drain(itopsStream_t* s, uint64_t upto) {
  while (!s->pending.empty() && s->pending.front().seq <= upto) {
    auto& item = s->pending.front();
    char* dst = resolve_on(s->device(), item.dst, item.bytes.size());
    if (dst) std::memcpy(dst, item.bytes.data(), item.bytes.size());
    s->done_seq = item.seq;
    s->pending.pop_front();
  }
  if (s->pending.empty()) s->done_seq = s->next_seq - 1;
}

}  // namespace tops_emu

using namespace tops_emu;

EMU_API topsError_t topsEmuLaunchForeign(topsStream_t stream, void* dst, const void* host_src,
                                         size_t bytes) {
  Lock lock(S().mu);
  itopsStream_t* s = stream_of(stream);
  if (!s) return fail(topsErrorInvalidHandle);
  if (!resolve_on(s->device(), dst, std::max<size_t>(bytes, 1)))
    return fail(topsErrorInvalidDevicePointer);
  itopsStream_t::Item item;
  item.seq = s->next_seq++;
  item.dst = dst;
  item.bytes.assign(static_cast<const char*>(host_src), static_cast<const char*>(host_src) + bytes);
  s->pending.push_back(std::move(item));
  return topsSuccess;
}

EMU_API uint64_t topsEmuPendingForeign(int device) {
  Lock lock(S().mu);
  uint64_t n = 0;
  for (const auto& s : S().streams.all()) {
    if (s->device() == device) n += s->pending.size();
  }
  return n;
}
