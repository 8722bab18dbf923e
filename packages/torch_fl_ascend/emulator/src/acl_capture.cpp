// Stream capture: the capture registry, the recording of enqueued tasks, the rules a capture
// imposes on other calls, and aclmdlRICaptureBegin / GetInfo / End.
//
// The rules follow CANN's documentation (aclmdlRICaptureBegin: the capture mode limits the
// unsafe functions aclrtMemcpy, aclrtMemset, ...; aclmdlRICaptureEnd of an invalidated capture
// fails) and, where CANN says nothing, CUDA's stream capture, which CANN's mirrors: a forbidden
// call fails and invalidates the capture, and so does every later task on it.
#include "acl_capture.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace acl_emu {
namespace {

struct Model {
  int32_t device = -1;
  bool capturing = true;  // until aclmdlRICaptureEnd (guarded by CaptureState::mu)
  // Shared with every queued execution, so aclmdlRIDestroy never pulls tasks from under one.
  std::shared_ptr<const Nodes> nodes;
};
using ModelRef = std::shared_ptr<Model>;

struct Capture {
  StreamRef stream;
  ModelRef model;
  aclmdlRI handle = nullptr;
  aclmdlRICaptureMode mode = ACL_MODEL_RI_CAPTURE_MODE_GLOBAL;
  std::thread::id thread;  // the thread that began it
  Nodes nodes;
  std::unordered_set<const emu_kit::Event*> events;  // last recorded by this capture
  bool invalidated = false;
  std::string reason;  // the first forbidden call: what aclmdlRICaptureEnd reports
};
using CaptureRef = std::shared_ptr<Capture>;

struct CaptureState {
  std::mutex mu;  // captures and the fields of models
  std::unordered_map<const AclStream*, CaptureRef> by_stream;
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

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

const char* mode_name(aclmdlRICaptureMode m) {
  switch (m) {
    case ACL_MODEL_RI_CAPTURE_MODE_GLOBAL:
      return "ACL_MODEL_RI_CAPTURE_MODE_GLOBAL";
    case ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL:
      return "ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL";
    case ACL_MODEL_RI_CAPTURE_MODE_RELAXED:
      return "ACL_MODEL_RI_CAPTURE_MODE_RELAXED";
  }
  return "an unknown aclmdlRICaptureMode";
}

bool reaches_this_thread(const Capture& c) {
  return c.mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL ||
         (c.mode == ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL &&
          c.thread == std::this_thread::get_id());
}

// The first reason is kept: later failures follow from it.
void invalidate(Capture& c, const std::string& reason) {
  if (c.invalidated) return;
  c.invalidated = true;
  c.reason = reason;
}

CaptureRef find(CaptureState& cs, const AclStream* st) {
  auto it = cs.by_stream.find(st);
  return it == cs.by_stream.end() ? nullptr : it->second;
}

CaptureRef find_by_event(CaptureState& cs, const emu_kit::Event* ev) {
  for (auto& kv : cs.by_stream)
    if (kv.second->events.count(ev)) return kv.second;
  return nullptr;
}

std::string invalidated_text(const char* fn, const Capture& c) {
  return format(
      "%s: stream %p captures into a model run instance that was invalidated (%s); "
      "end the capture (aclmdlRICaptureEnd)",
      fn, static_cast<void*>(c.stream.get()), c.reason.c_str());
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
  if (!st->capturing.load(std::memory_order_acquire)) {
    st->push(std::move(item));
    return ACL_SUCCESS;
  }
  CaptureState& cs = C();
  std::unique_lock<std::mutex> lk(cs.mu);
  CaptureRef c = find(cs, st.get());
  if (!c) {  // the capture ended meanwhile: the task runs as usual
    lk.unlock();
    st->push(std::move(item));
    return ACL_SUCCESS;
  }
  if (c->invalidated) {
    const std::string msg = invalidated_text(fn, *c);
    lk.unlock();
    if (item.cleanup) item.cleanup();
    return fail(ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED, "%s", msg.c_str());
  }
  Node node;
  node.name = std::move(item.name);
  node.allocs = std::move(item.allocs);
  // What the task owns (an aclnn op's arguments) lives as long as the recording and its queued
  // executions: the cleanup runs when the last copy of `run` is gone.
  std::shared_ptr<void> keep;
  if (item.cleanup) keep = std::shared_ptr<void>(nullptr, [cl = item.cleanup](void*) { cl(); });
  node.run = [run = std::move(item.run), keep](char* msg, size_t len) {
    return run ? run(msg, len) : 0;
  };
  c->nodes.push_back(std::move(node));
  return ACL_SUCCESS;
}

aclError record_event(const char* fn, const EventRef& ev, const StreamRef& st) {
  CaptureState& cs = C();
  if (cs.active.load(std::memory_order_acquire) > 0) {
    std::unique_lock<std::mutex> lk(cs.mu);
    // A record replaces what the event stood for: it belongs to no other capture now.
    for (auto& kv : cs.by_stream) kv.second->events.erase(ev.get());
    if (st->capturing.load(std::memory_order_acquire)) {
      if (CaptureRef c = find(cs, st.get())) {
        if (c->invalidated) {
          const std::string msg = invalidated_text(fn, *c);
          lk.unlock();
          return fail(ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED, "%s", msg.c_str());
        }
        Node node;
        node.name = fn;
        node.event = ev;
        c->nodes.push_back(std::move(node));
        c->events.insert(ev.get());
        return ACL_SUCCESS;
      }
    }
  }
  ev->record(*st, fn);
  return ACL_SUCCESS;
}

bool capture_wait_event(const char* fn, const StreamRef& st, const EventRef& ev, aclError* rc) {
  CaptureState& cs = C();
  if (cs.active.load(std::memory_order_acquire) == 0) return false;
  std::unique_lock<std::mutex> lk(cs.mu);
  CaptureRef mine = find(cs, st.get());
  CaptureRef theirs = find_by_event(cs, ev.get());
  void* s = st.get();
  void* e = ev.get();
  if (!mine) {
    if (!theirs) return false;
    // CANN pulls the waiting stream into the capture; the emulator records one stream per
    // capture, so it refuses the fork instead of emulating it wrongly.
    invalidate(*theirs, format("%s: stream %p waited on event %p recorded by the capture of "
                               "stream %p",
                               fn, s, e, static_cast<void*>(theirs->stream.get())));
    void* cap = theirs->stream.get();
    lk.unlock();
    *rc = fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
               "%s: stream %p waits on event %p recorded by the capture of stream %p, which would "
               "join that capture; the CANN emulator captures one stream per capture; the "
               "capture is now invalidated",
               fn, s, e, cap);
    return true;
  }
  if (mine->invalidated) {
    const std::string msg = invalidated_text(fn, *mine);
    lk.unlock();
    *rc = fail(ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED, "%s", msg.c_str());
    return true;
  }
  if (theirs == mine || !ev->armed()) {
    // Recorded earlier in this capture (stream order already waits), or never recorded.
    *rc = ACL_SUCCESS;
    return true;
  }
  // Recorded outside the capture (or by another one): a replay would depend on work that is not
  // in the model (CUDA's cudaErrorStreamCaptureIsolation).
  const std::string what = format("%s: stream %p, capturing, waits on event %p recorded %s", fn, s,
                                  e, theirs ? "by another capture" : "outside the capture");
  if (theirs) invalidate(*theirs, what);
  invalidate(*mine, what);
  lk.unlock();
  *rc = fail(ACL_ERROR_RT_CAPTURE_DEPENDENCY, "%s; the capture is now invalidated", what.c_str());
  return true;
}

aclError check_unsafe_call(const char* fn, int32_t device) {
  CaptureState& cs = C();
  if (cs.active.load(std::memory_order_acquire) == 0) return ACL_SUCCESS;
  std::unique_lock<std::mutex> lk(cs.mu);
  std::string first;
  for (auto& kv : cs.by_stream) {
    Capture& c = *kv.second;
    if ((device >= 0 && c.stream->device() != device) || !reaches_this_thread(c)) continue;
    const std::string what =
        format("%s: not allowed while stream %p captures on device %d (%s)", fn,
               static_cast<void*>(c.stream.get()), c.stream->device(), mode_name(c.mode));
    if (first.empty()) first = what;
    invalidate(c, what);
  }
  lk.unlock();
  if (first.empty()) return ACL_SUCCESS;
  return fail(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, "%s; the capture is now invalidated",
              first.c_str());
}

aclError check_stream_call(const char* fn, const StreamRef& st) {
  if (!st->capturing.load(std::memory_order_acquire)) return ACL_SUCCESS;
  CaptureState& cs = C();
  std::unique_lock<std::mutex> lk(cs.mu);
  CaptureRef c = find(cs, st.get());
  if (!c) return ACL_SUCCESS;
  const std::string what = format(
      "%s: stream %p captures: its tasks are recorded, not run, so it cannot be synchronized, "
      "queried or destroyed until aclmdlRICaptureEnd",
      fn, static_cast<void*>(st.get()));
  invalidate(*c, what);
  lk.unlock();
  return fail(ACL_ERROR_RT_STREAM_CAPTURED, "%s; the capture is now invalidated", what.c_str());
}

aclError check_event_call(const char* fn, const EventRef& ev) {
  CaptureState& cs = C();
  if (cs.active.load(std::memory_order_acquire) == 0) return ACL_SUCCESS;
  std::unique_lock<std::mutex> lk(cs.mu);
  CaptureRef c = find_by_event(cs, ev.get());
  if (!c) return ACL_SUCCESS;
  const std::string what = format(
      "%s: event %p was recorded by the capture of stream %p: it stands for recorded "
      "tasks, not run",
      fn, static_cast<void*>(ev.get()), static_cast<void*>(c->stream.get()));
  invalidate(*c, what);
  lk.unlock();
  return fail(ACL_ERROR_RT_EVENT_CAPTURED, "%s; the capture is now invalidated", what.c_str());
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
  std::unique_lock<std::mutex> lk(cs.mu);
  if (CaptureRef c = find(cs, st.get())) {
    const std::string what = format("aclmdlRICaptureBegin: stream %p already captures", stream);
    invalidate(*c, what);
    lk.unlock();
    return fail(ACL_ERROR_RT_STREAM_CAPTURED, "%s; the capture is now invalidated", what.c_str());
  }
  auto c = std::make_shared<Capture>();
  c->stream = st;
  c->model = std::make_shared<Model>();
  c->model->device = st->device();
  c->handle = cs.models.add(c->model);
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  cs.by_stream[st.get()] = c;
  cs.active.fetch_add(1, std::memory_order_acq_rel);
  st->capturing.store(true, std::memory_order_release);
  return ACL_SUCCESS;
}

aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus* status,
                                aclmdlRI* modelRI) {
  ACL_ENTER("aclmdlRICaptureGetInfo");
  if (!status) return fail(ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureGetInfo: status is NULL");
  ACL_NEED_STREAM("aclmdlRICaptureGetInfo", st, stream);
  CaptureState& cs = C();
  std::lock_guard<std::mutex> lk(cs.mu);
  CaptureRef c = find(cs, st.get());
  *status = !c               ? ACL_MODEL_RI_CAPTURE_STATUS_NONE
            : c->invalidated ? ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
                             : ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
  if (modelRI) *modelRI = c ? c->handle : nullptr;
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
  CaptureRef c;  // dropped after the lock: its tasks' cleanups run then
  std::unique_lock<std::mutex> lk(cs.mu);
  c = find(cs, st.get());
  if (!c)
    return fail(ACL_ERROR_RT_STREAM_NOT_CAPTURED, "aclmdlRICaptureEnd: stream %p is not capturing",
                stream);
  // The capture ends whatever follows; a failed one leaves no model run instance.
  cs.by_stream.erase(st.get());
  st->capturing.store(false, std::memory_order_release);
  cs.active.fetch_sub(1, std::memory_order_acq_rel);
  if (c->mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED && c->thread != std::this_thread::get_id()) {
    cs.models.remove(c->handle);
    lk.unlock();
    return fail(ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
                "aclmdlRICaptureEnd: the capture of stream %p began in another thread with %s, so "
                "it ends there; it ended, its tasks are dropped",
                stream, mode_name(c->mode));
  }
  if (c->invalidated) {
    cs.models.remove(c->handle);
    const std::string reason = c->reason;
    lk.unlock();
    return fail(ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
                "aclmdlRICaptureEnd: the capture of stream %p was invalidated, so there is no "
                "model run instance: %s",
                stream, reason.c_str());
  }
  c->model->nodes = std::make_shared<const Nodes>(std::move(c->nodes));
  c->model->capturing = false;
  *modelRI = c->handle;
  return ACL_SUCCESS;
}

}  // extern "C"
