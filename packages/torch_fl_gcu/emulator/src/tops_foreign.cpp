// A second producer on a stream (tops_emulator.h: topsEmuLaunchForeign), the way the S60 runs a
// Triton kernel: its work is queued, and the SDK's own work submitted behind it runs ahead of it.
// Only synchronisation (and topsStreamQuery, which makes progress) drains it.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "tops_emulator.h"
#include "tops_state.h"

namespace tops_emu {

void drain(itopsStream_t* s, uint64_t upto) {
  while (!s->pending.empty() && s->pending.front().seq <= upto) {
    auto& item = s->pending.front();
    char* dst = S().resolve(s->device(), item.dst, item.bytes.size());
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
  std::lock_guard<std::recursive_mutex> lock(S().mutex());
  std::shared_ptr<itopsStream_t> s = stream_of(stream);
  if (!s) return static_cast<topsError_t>(S().fail(topsErrorInvalidHandle));
  if (!S().resolve(s->device(), dst, std::max<size_t>(bytes, 1)))
    return static_cast<topsError_t>(S().fail(topsErrorInvalidDevicePointer));
  itopsStream_t::Item item;
  item.seq = s->next_seq++;
  item.dst = dst;
  item.bytes.assign(static_cast<const char*>(host_src), static_cast<const char*>(host_src) + bytes);
  s->pending.push_back(std::move(item));
  return topsSuccess;
}

EMU_API uint64_t topsEmuPendingForeign(int device) {
  std::lock_guard<std::recursive_mutex> lock(S().mutex());
  uint64_t n = 0;
  for (const auto& s : S().streams()) {
    if (s->device() == device) n += static_cast<const itopsStream_t&>(*s).pending.size();
  }
  return n;
}
