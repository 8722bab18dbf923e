// Stream capture over the emulator kit's capture engine (emu_kit/capture.h): the engine holds the
// captures and decides the rules; this file guards it with a lock, gives its refusals CANN's
// statuses, keeps the model run instances, and implements aclmdlRICaptureBegin / GetInfo / End.
//
// The rules follow CANN's documentation (aclmdlRICaptureBegin: the capture mode limits the
// unsafe functions aclrtMemcpy, aclrtMemset, ...; aclmdlRICaptureEnd of an invalidated capture
// fails) and, where CANN says nothing, CUDA's stream capture, which CANN's mirrors: a forbidden
// call fails and invalidates the capture, and so does every later task on it. A stream that waits
// on an event recorded in a capture joins it ("through event deduction, more streams enter the
// capture state", aclmdlRICaptureBegin) and its later tasks are recorded too, until the capture
// ends; the origin must wait on a joined stream's last task before aclmdlRICaptureEnd
// (ACL_ERROR_RT_STREAM_UNJOINED), and only the origin ends it
// (ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED).
#include "acl_capture.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

namespace acl_emu {
namespace {

using emu_kit::Refusal;
using emu_kit::Verdict;

using emu_kit::CaptureMode;
using emu_kit::CaptureStatus;

// CANN's capture modes and statuses take CUDA's values, as the engine's do: they convert by value.
template <typename E>
constexpr int value(E e) {
  return static_cast<int>(e);
}
static_assert(ACL_MODEL_RI_CAPTURE_MODE_GLOBAL == value(CaptureMode::global) &&
                  ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL == value(CaptureMode::thread_local_) &&
                  ACL_MODEL_RI_CAPTURE_MODE_RELAXED == value(CaptureMode::relaxed) &&
                  ACL_MODEL_RI_CAPTURE_STATUS_NONE == value(CaptureStatus::none) &&
                  ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE == value(CaptureStatus::active) &&
                  ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED == value(CaptureStatus::invalidated),
              "aclmdlRICaptureMode and aclmdlRICaptureStatus");

struct Model {
  int32_t device = -1;
  bool capturing = true;  // until aclmdlRICaptureEnd (guarded by CaptureState::mu)
  // Shared with every queued execution, so aclmdlRIDestroy never pulls tasks from under one.
  std::shared_ptr<const Nodes> nodes;
};
using ModelRef = std::shared_ptr<Model>;

// The model run instance a capture records into, from aclmdlRICaptureBegin on.
struct OpenModel {
  aclmdlRI handle = nullptr;
  ModelRef model;
  std::vector<StreamRef> joined;  // the streams that joined it: they capture until it ends
};

struct CaptureState {
  // Guards the engine and the fields of models. The cleanups of refused or dropped tasks run
  // under it; none of them calls back into the runtime.
  std::mutex mu;
  emu_kit::Captures engine{{"ACL_MODEL_RI_CAPTURE_MODE_GLOBAL",
                            "ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL",
                            "ACL_MODEL_RI_CAPTURE_MODE_RELAXED"}};
  std::unordered_map<const AclStream*, OpenModel> open;  // by the stream it began on
  emu_kit::HandleTable<Model> models;
  std::atomic<int> active{0};  // lets every check skip the lock while nothing captures
};

// Never destroyed, like State; a forked child starts with no capture (as with no stream).
CaptureState*& state_ptr() {
  static CaptureState* s = new CaptureState();
  return s;
}
CaptureState& C() { return *state_ptr(); }
__attribute__((constructor)) void register_fork_handler() {
  pthread_atfork(nullptr, nullptr, [] { state_ptr() = new CaptureState(); });
}

// A refusal of the engine as CANN reports it; `forbidden` is the status of the call refused.
aclError refused(const Verdict& v, aclError forbidden = ACL_ERROR_RT_STREAM_CAPTURED) {
  aclError code = ACL_ERROR_INTERNAL_ERROR;
  bool invalidates = true;  // the refusal invalidated the capture
  switch (v.refusal) {
    case Refusal::none:
      return ACL_SUCCESS;
    case Refusal::forbidden:
      code = forbidden;
      break;
    case Refusal::merge:
    case Refusal::isolation:
      code = ACL_ERROR_RT_CAPTURE_DEPENDENCY;
      break;
    case Refusal::captured_event:
      code = ACL_ERROR_RT_EVENT_CAPTURED;
      break;
    case Refusal::invalidated:
      code = ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
      invalidates = false;
      break;
    case Refusal::wrong_thread:
      code = ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD;
      invalidates = false;
      break;
    case Refusal::not_capturing:
      code = ACL_ERROR_RT_STREAM_NOT_CAPTURED;
      invalidates = false;
      break;
    case Refusal::unmatched:
      code = ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED;
      break;
    case Refusal::unjoined:  // the capture ended, without a model run instance
      code = ACL_ERROR_RT_STREAM_UNJOINED;
      invalidates = false;
      break;
  }
  return fail(code, "%s%s", v.message.c_str(),
              invalidates ? "; the capture is now invalidated" : "");
}

}  // namespace

aclError captured_model(const char* fn, aclmdlRI h, std::shared_ptr<const Nodes>* nodes,
                        int32_t* device) {
  CaptureState& cs = C();
  ModelRef m = cs.models.find(h);
  if (!m) return fail(ACL_ERROR_INVALID_PARAM, "%s: %p is not a live aclmdlRI", fn, h);
  std::lock_guard<std::mutex> lk(cs.mu);
  if (m->capturing)
    return fail(ACL_ERROR_RT_MODEL_CAPTURED,
                "%s: model run instance %p is still being captured (aclmdlRICaptureEnd first)", fn,
                h);
  *nodes = m->nodes;
  *device = m->device;
  return ACL_SUCCESS;
}

aclError destroy_model(const char* fn, aclmdlRI h) {
  std::shared_ptr<const Nodes> nodes;
  int32_t device = -1;
  if (aclError e = captured_model(fn, h, &nodes, &device)) return e;
  C().models.remove(h);
  return ACL_SUCCESS;
}

aclError enqueue(const char* fn, const StreamRef& st, emu_kit::WorkItem item) {
  if (st->capturing.load(std::memory_order_acquire)) {
    CaptureState& cs = C();
    Verdict v;
    bool recorded;
    {
      std::lock_guard<std::mutex> lk(cs.mu);
      recorded = cs.engine.record(st.get(), fn, item, &v);
    }
    if (recorded) return refused(v);
    // The capture ended meanwhile: the task runs as usual.
  }
  st->push(std::move(item));
  return ACL_SUCCESS;
}

aclError record_event(const char* fn, const EventRef& ev, const StreamRef& st) {
  CaptureState& cs = C();
  if (cs.active.load(std::memory_order_acquire) > 0) {
    Verdict v;
    bool recorded;
    {
      std::lock_guard<std::mutex> lk(cs.mu);
      recorded = cs.engine.record_event(st.get(), fn, ev, &v);
    }
    if (recorded) return refused(v);
  }
  ev->record(*st, fn);
  return ACL_SUCCESS;
}

bool capture_wait_event(const char* fn, const StreamRef& st, const EventRef& ev, aclError* rc) {
  CaptureState& cs = C();
  if (cs.active.load(std::memory_order_acquire) == 0) return false;
  Verdict v;
  {
    std::lock_guard<std::mutex> lk(cs.mu);
    const emu_kit::Stream* mine = cs.engine.origin(st.get());
    const emu_kit::Stream* theirs = cs.engine.event_origin(ev.get());
    if (!mine && !theirs) return false;
    if (mine && theirs != mine && !ev->armed() &&
        cs.engine.status(st.get()) == CaptureStatus::active) {
      // An unarmed event outside this capture has nothing to wait for: the wait is dropped, even
      // when another capture recorded it (CUDA refuses that as a merge; this emulator's contract
      // lets it pass).
      *rc = ACL_SUCCESS;
      return true;
    }
    cs.engine.wait_event(st, fn, ev, &v);
    if (!v && !mine) {
      // Waiting on an event recorded in a capture: `st` joins it, its later tasks recorded.
      auto it = cs.open.find(static_cast<const AclStream*>(theirs));
      if (it != cs.open.end()) it->second.joined.push_back(st);
      st->capturing.store(true, std::memory_order_release);
    }
  }
  *rc = refused(v);
  return true;
}

aclError check_unsafe_call(const char* fn, int32_t device) {
  CaptureState& cs = C();
  if (cs.active.load(std::memory_order_acquire) == 0) return ACL_SUCCESS;
  Verdict v;
  {
    std::lock_guard<std::mutex> lk(cs.mu);
    v = cs.engine.unsafe_call(device, fn);
  }
  return refused(v, ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
}

aclError check_stream_call(const char* fn, const StreamRef& st) {
  if (!st->capturing.load(std::memory_order_acquire)) return ACL_SUCCESS;
  CaptureState& cs = C();
  Verdict v;
  {
    std::lock_guard<std::mutex> lk(cs.mu);
    v = cs.engine.stream_call(st.get(), fn);
  }
  return refused(v);
}

aclError check_event_call(const char* fn, const EventRef& ev) {
  CaptureState& cs = C();
  if (cs.active.load(std::memory_order_acquire) == 0) return ACL_SUCCESS;
  Verdict v;
  {
    std::lock_guard<std::mutex> lk(cs.mu);
    v = cs.engine.event_call(ev.get(), fn);
  }
  return refused(v);
}

}  // namespace acl_emu

using namespace acl_emu;

extern "C" {

aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode) {
  ACL_ENTER("aclmdlRICaptureBegin");
  ACL_NEED_DEVICE("aclmdlRICaptureBegin", dev);
  (void)dev;
  if (mode < ACL_MODEL_RI_CAPTURE_MODE_GLOBAL || mode > ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclmdlRICaptureBegin: mode %d is not an "
                "aclmdlRICaptureMode",
                static_cast<int>(mode));
  if (stream == nullptr)
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclmdlRICaptureBegin: the default stream cannot capture; use a created stream");
  StreamRef st = S().streams.find(stream);
  if (!st)
    return fail(ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureBegin: %p is not a live stream", stream);
  CaptureState& cs = C();
  Verdict v;
  {
    std::lock_guard<std::mutex> lk(cs.mu);
    v = cs.engine.begin(st, static_cast<CaptureMode>(mode), "aclmdlRICaptureBegin");
    if (!v) {
      OpenModel& open = cs.open[st.get()];
      open.model = std::make_shared<Model>();
      open.model->device = st->device();
      open.handle = cs.models.add(open.model);
      cs.active.fetch_add(1, std::memory_order_acq_rel);
      st->capturing.store(true, std::memory_order_release);
    }
  }
  return refused(v);
}

aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus* status,
                                aclmdlRI* modelRI) {
  ACL_ENTER("aclmdlRICaptureGetInfo");
  if (!status) return fail(ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureGetInfo: status is NULL");
  ACL_NEED_STREAM("aclmdlRICaptureGetInfo", st, stream);
  CaptureState& cs = C();
  std::lock_guard<std::mutex> lk(cs.mu);
  const CaptureStatus c = cs.engine.status(st.get());
  *status = static_cast<aclmdlRICaptureStatus>(c);
  if (modelRI) {
    // A joined stream reports the model run instance of the capture it joined.
    auto it = cs.open.find(static_cast<const AclStream*>(cs.engine.origin(st.get())));
    *modelRI = it == cs.open.end() ? nullptr : it->second.handle;
  }
  return ACL_SUCCESS;
}

aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI* modelRI) {
  ACL_ENTER("aclmdlRICaptureEnd");
  if (!modelRI) return fail(ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureEnd: modelRI is NULL");
  if (stream == nullptr)
    return fail(ACL_ERROR_RT_STREAM_NOT_CAPTURED,
                "aclmdlRICaptureEnd: the default stream never captures");
  StreamRef st = S().streams.find(stream);
  if (!st)
    return fail(ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureEnd: %p is not a live stream", stream);
  CaptureState& cs = C();
  emu_kit::CapturedGraph graph;
  Verdict v;
  aclmdlRI handle = nullptr;
  {
    std::lock_guard<std::mutex> lk(cs.mu);
    v = cs.engine.end(st.get(), "aclmdlRICaptureEnd", &graph);
    auto it = cs.open.find(st.get());
    if (v.refusal != Refusal::not_capturing && it != cs.open.end()) {
      // The capture ended whatever the verdict; a failed one leaves no model run instance.
      const OpenModel open = it->second;
      cs.open.erase(it);
      st->capturing.store(false, std::memory_order_release);
      for (const StreamRef& j : open.joined) j->capturing.store(false, std::memory_order_release);
      cs.active.fetch_sub(1, std::memory_order_acq_rel);
      if (v) {
        cs.models.remove(open.handle);
      } else {
        open.model->nodes = std::move(graph.body);
        open.model->capturing = false;
        handle = open.handle;
      }
    }
  }
  if (v) return refused(v);
  *modelRI = handle;
  return ACL_SUCCESS;
}

}  // extern "C"
