#include "emu_kit/capture.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <unordered_set>

namespace emu_kit {

namespace {

thread_local CaptureMode t_mode = CaptureMode::global;

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

const void* addr(const void* p) { return p; }

}  // namespace

void launch_graph(const GraphBody& body, Stream& stream) {
  for (const GraphNode& n : *body) {
    if (n.event) {
      n.event->record(stream, n.name.c_str());
      continue;
    }
    WorkItem item;
    item.name = n.name;
    item.run = n.run;
    item.allocs = n.allocs;
    stream.push(std::move(item));
  }
}

CaptureMode Captures::exchange_thread_mode(CaptureMode mode) {
  const CaptureMode old = t_mode;
  t_mode = mode;
  return old;
}

const char* Captures::mode_name(CaptureMode m) const {
  const auto i = static_cast<size_t>(m);
  return i < names_.size() ? names_[i] : "unknown";
}

Captures::CaptureRef Captures::of(const Stream* s) const {
  auto it = by_stream_.find(s);
  return it == by_stream_.end() ? nullptr : it->second;
}

Captures::CaptureRef Captures::of_event(const Event* ev) const {
  for (const auto& kv : by_stream_)
    if (kv.second->events.count(ev)) return kv.second;
  return nullptr;
}

CaptureStatus Captures::status(const Stream* s) const {
  CaptureRef c = of(s);
  if (!c) return CaptureStatus::none;
  return c->invalidated ? CaptureStatus::invalidated : CaptureStatus::active;
}

const Stream* Captures::origin(const Stream* s) const {
  CaptureRef c = of(s);
  return c ? c->origin.get() : nullptr;
}

const Stream* Captures::event_origin(const Event* ev) const {
  CaptureRef c = of_event(ev);
  return c ? c->origin.get() : nullptr;
}

void Captures::invalidate(Capture& c, const std::string& reason) {
  if (c.invalidated) return;  // the first reason: later failures follow from it
  c.invalidated = true;
  c.reason = reason;
}

Verdict Captures::refuse(Refusal r, std::string message, Capture* c, Capture* other) {
  if (c) invalidate(*c, message);
  if (other) invalidate(*other, message);
  return Verdict{r, std::move(message)};
}

Verdict Captures::invalidated(const Capture& c, const char* fn) const {
  return Verdict{Refusal::invalidated, format("%s: the capture of stream %p was invalidated: %s",
                                              fn, addr(c.origin.get()), c.reason.c_str())};
}

void Captures::bump(Capture& c, const Stream* s) {
  if (s != c.origin.get()) ++c.members[s].work;
}

void Captures::forget_event(const Event* ev) {
  for (auto& kv : by_stream_) kv.second->events.erase(ev);
}

bool Captures::reaches_this_thread(const Capture& c) const {
  if (t_mode == CaptureMode::relaxed) return false;
  if (c.thread == std::this_thread::get_id()) return c.mode != CaptureMode::relaxed;
  return t_mode == CaptureMode::global && c.mode == CaptureMode::global;
}

Verdict Captures::begin(const StreamRef& s, CaptureMode mode, const char* fn) {
  if (CaptureRef c = of(s.get()))
    return refuse(Refusal::forbidden, format("%s: stream %p already captures", fn, addr(s.get())),
                  c.get());
  auto c = std::make_shared<Capture>();
  c->origin = s;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  by_stream_[s.get()] = std::move(c);
  return {};
}

Verdict Captures::end(const Stream* s, const char* fn, CapturedGraph* graph) {
  CaptureRef c = of(s);
  if (!c)
    return Verdict{Refusal::not_capturing, format("%s: stream %p does not capture", fn, addr(s))};
  if (c->origin.get() != s)
    return refuse(Refusal::unmatched,
                  format("%s: stream %p joined the capture begun on stream %p, which ends it", fn,
                         addr(s), addr(c->origin.get())),
                  c.get());
  // It ends whatever follows: its streams run their work again.
  for (auto it = by_stream_.begin(); it != by_stream_.end();)
    it = it->second == c ? by_stream_.erase(it) : std::next(it);
  if (c->mode != CaptureMode::relaxed && c->thread != std::this_thread::get_id())
    return Verdict{Refusal::wrong_thread,
                   format("%s: the %s capture of stream %p began in another thread, which ends "
                          "it; it ended without a graph",
                          fn, mode_name(c->mode), addr(s))};
  if (c->invalidated) return invalidated(*c, fn);
  for (const auto& kv : c->members) {
    if (kv.second.work > kv.second.joined)
      return Verdict{Refusal::unjoined,
                     format("%s: stream %p joined the capture of stream %p, which did not wait "
                            "for its last work",
                            fn, addr(kv.first), addr(s))};
  }
  graph->device = c->origin->device();
  graph->body = std::make_shared<const std::vector<GraphNode>>(std::move(c->nodes));
  return {};
}

bool Captures::record(const Stream* s, const char* fn, WorkItem& item, Verdict* v) {
  CaptureRef c = of(s);
  if (!c) return false;
  if (c->invalidated) {
    if (item.cleanup) item.cleanup();
    *v = invalidated(*c, fn);
    return true;
  }
  GraphNode n;
  n.name = std::move(item.name);
  n.allocs = std::move(item.allocs);
  // What the work owns lives as long as the graph and its queued launches.
  std::shared_ptr<void> keep;
  if (item.cleanup) keep = std::shared_ptr<void>(nullptr, [cl = item.cleanup](void*) { cl(); });
  n.run = [run = std::move(item.run), keep](char* msg, size_t len) {
    return run ? run(msg, len) : 0;
  };
  item = WorkItem{};
  c->nodes.push_back(std::move(n));
  bump(*c, s);
  return true;
}

bool Captures::record_graph(const Stream* s, const char* fn, const GraphBody& body, Verdict* v) {
  CaptureRef c = of(s);
  if (!c) return false;
  if (c->invalidated) {
    *v = invalidated(*c, fn);
    return true;
  }
  c->nodes.insert(c->nodes.end(), body->begin(), body->end());
  bump(*c, s);
  return true;
}

bool Captures::record_event(const Stream* s, const char* fn, const EventRef& ev, Verdict* v) {
  if (any()) forget_event(ev.get());  // it stands for this record from now on
  CaptureRef c = of(s);
  if (!c) return false;
  if (c->invalidated) {
    *v = invalidated(*c, fn);
    return true;
  }
  GraphNode n;
  n.name = fn;
  n.event = ev;
  c->nodes.push_back(std::move(n));
  c->events[ev.get()] = {s, s == c->origin.get() ? 0 : c->members[s].work};
  c->held.push_back(ev);
  return true;
}

bool Captures::wait_event(const StreamRef& s, const char* fn, const EventRef& ev, Verdict* v) {
  if (!any()) return false;
  CaptureRef mine = of(s.get());
  CaptureRef theirs = of_event(ev.get());
  if (!mine && !theirs) return false;
  if (!mine) {
    // Waiting on captured work: the stream joins that capture.
    if (theirs->invalidated) {
      *v = invalidated(*theirs, fn);
      return true;
    }
    theirs->members[s.get()].stream = s;
    by_stream_[s.get()] = theirs;
    return true;
  }
  if (mine->invalidated) {
    *v = invalidated(*mine, fn);
    return true;
  }
  if (theirs && theirs != mine) {
    *v = refuse(Refusal::merge,
                format("%s: stream %p of one capture waits on event %p of another", fn,
                       addr(s.get()), addr(ev.get())),
                mine.get(), theirs.get());
    return true;
  }
  if (theirs) {
    // Within the capture the call order already runs the event's work first; a joined stream
    // counts as joined up to the work the event stands for.
    const auto& [from, upto] = mine->events[ev.get()];
    if (from != mine->origin.get()) {
      Member& m = mine->members[from];
      m.joined = std::max(m.joined, upto);
    }
    bump(*mine, s.get());
    return true;
  }
  if (!ev->armed()) return true;  // never recorded: nothing to wait for
  *v = refuse(Refusal::isolation,
              format("%s: capturing stream %p waits on event %p, recorded outside the capture", fn,
                     addr(s.get()), addr(ev.get())),
              mine.get());
  return true;
}

Verdict Captures::stream_call(const Stream* s, const char* fn) {
  if (!any()) return {};
  CaptureRef c = of(s);
  if (!c) return {};
  return refuse(Refusal::forbidden,
                format("%s: stream %p captures: its work is recorded, not run", fn, addr(s)),
                c.get());
}

Verdict Captures::event_call(const Event* ev, const char* fn) {
  if (!any()) return {};
  CaptureRef c = of_event(ev);
  if (!c) return {};
  return refuse(Refusal::captured_event,
                format("%s: event %p was recorded in the capture of stream %p: it stands for "
                       "recorded work, not run",
                       fn, addr(ev), addr(c->origin.get())),
                c.get());
}

Verdict Captures::device_wait(int device, const char* fn) {
  if (!any()) return {};
  Verdict v;
  for (auto& kv : by_stream_) {
    if (kv.first->device() != device) continue;
    Capture& c = *kv.second;
    const std::string what = format(
        "%s: stream %p of device %d captures: a device-wide wait "
        "would wait for recorded work",
        fn, addr(kv.first), device);
    if (!v) v = Verdict{Refusal::forbidden, what};
    invalidate(c, what);
  }
  return v;
}

Verdict Captures::unsafe_call(int device, const char* fn) {
  if (!any()) return {};
  Verdict v;
  std::unordered_set<Capture*> seen;
  for (auto& kv : by_stream_) {
    Capture& c = *kv.second;
    if (!seen.insert(&c).second || !reaches_this_thread(c)) continue;
    if (device >= 0 && c.origin->device() != device) continue;
    const std::string what =
        format("%s: not allowed while stream %p captures on device %d (%s mode)", fn,
               addr(c.origin.get()), c.origin->device(), mode_name(c.mode));
    if (!v) v = Verdict{Refusal::forbidden, what};
    invalidate(c, what);
  }
  return v;
}

Verdict Captures::unrecordable(const Stream* s, const char* fn, const std::string& why) {
  if (!any()) return {};
  CaptureRef c = of(s);
  if (!c) return {};
  return refuse(Refusal::forbidden,
                format("%s: stream %p captures, which cannot record %s", fn, addr(s), why.c_str()),
                c.get());
}

}  // namespace emu_kit
