// Streams: the framework's inline streams (SDK work runs at submission), each with a lane of
// foreign work that only synchronisation drains (tops_foreign.cpp).
#include "tops_state.h"

using namespace tops_emu;

itopsStream_t::itopsStream_t(int device, bool is_default)
    // Nothing is ever queued on an inline stream, so no work can outlive its memory.
    : emu_kit::Stream(device, is_default, Mode::inline_,
                      emu_kit::FreedWork{topsErrorIllegalAddress, "topsFree", "topsHostFree"}) {}

EMU_API topsError_t topsStreamCreateWithFlags(topsStream_t* stream, unsigned int flags) {
  ENTER("topsStreamCreateWithFlags");
  if (!stream || flags > topsStreamNonBlocking) return fail(topsErrorInvalidValue);
  if (!valid_card(t_device)) return fail(topsErrorNoDevice);
  *stream = S().streams.add(std::make_shared<itopsStream_t>(t_device, false));
  return topsSuccess;
}

EMU_API topsError_t topsStreamCreate(topsStream_t* stream) {
  return topsStreamCreateWithFlags(stream, topsStreamDefault);
}

EMU_API topsError_t topsStreamDestroy(topsStream_t stream) {
  ENTER("topsStreamDestroy");
  std::shared_ptr<itopsStream_t> s = stream ? S().streams.find(stream) : nullptr;
  if (!s || s->is_default()) return fail(topsErrorInvalidHandle);
  drain_all(s.get());
  for (const auto& e : S().events.all()) {
    if (e->stream == stream) e->stream = nullptr;
  }
  S().streams.remove(stream);
  return topsSuccess;
}

EMU_API topsError_t topsStreamQuery(topsStream_t stream) {
  ENTER("topsStreamQuery");
  itopsStream_t* s = stream_of(stream);
  if (!s) return fail(topsErrorInvalidHandle);
  if (s->pending.empty()) return topsSuccess;
  drain_all(s);  // the card makes progress; the caller sees it next time
  return topsErrorNotReady;
}

EMU_API topsError_t topsStreamSynchronize(topsStream_t stream) {
  ENTER("topsStreamSynchronize");
  itopsStream_t* s = stream_of(stream);
  if (!s) return fail(topsErrorInvalidHandle);
  drain_all(s);
  return topsSuccess;
}

EMU_API topsError_t topsStreamWaitEvent(topsStream_t stream, topsEvent_t event,
                                        unsigned int flags) {
  ENTER("topsStreamWaitEvent");
  itopsStream_t* s = stream_of(stream);
  if (!s || !event || !S().events.find(event)) return fail(topsErrorInvalidHandle);
  // Everything before the event becomes visible to work queued on `stream` after this.
  if (event->armed() && event->stream) drain(event->stream, event->wait_seq);
  return topsSuccess;
}
