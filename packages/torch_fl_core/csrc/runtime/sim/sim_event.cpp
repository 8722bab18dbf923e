// Events: markers on a stream; each record starts a new generation and the
// event is complete once its latest generation's marker has run (CUDA).
#include "sim_event.h"

#include <unordered_map>

#include "sim_entry.h"
#include "sim_errors.h"
#include "sim_graph.h"
#include "sim_stream.h"

namespace torch_fl::sim {

// ---- Event --------------------------------------------------------------------

uint64_t Event::begin_record() {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_ = 0;
  return ++recorded_;
}

void Event::set_capture(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_ = id;
}

uint64_t Event::capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  return capture_;
}

void Event::mark_reached(uint64_t generation, Clock::time_point when) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Records on different streams may finish out of order; an older marker
  // finishing late must neither un-complete nor re-time a newer record.
  if (generation > reached_) {
    reached_ = generation;
    time_ = when;
  }
  cv_.notify_all();
}

uint64_t Event::latest_record() {
  std::lock_guard<std::mutex> lock(mutex_);
  return recorded_;
}

bool Event::reached(uint64_t generation) {
  std::lock_guard<std::mutex> lock(mutex_);
  return reached_ >= generation;
}

void Event::wait(uint64_t generation) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return reached_ >= generation; });
}

Event::State Event::state() {
  std::lock_guard<std::mutex> lock(mutex_);
  return State{recorded_, reached_, time_};
}

// ---- registry ---------------------------------------------------------------

namespace {

struct EventRegistry {
  std::mutex mutex;
  // Owning references; queued markers and waits hold their own, so destroying
  // an event with work pending is safe (as in CUDA).
  std::unordered_map<tfl_event, EventPtr> events;
};

// Leaked on purpose, like the stream registry.
EventRegistry& registry() {
  static EventRegistry* r = new EventRegistry();
  return *r;
}

}  // namespace

tfl_status resolve_event(const char* fn, tfl_event handle, EventPtr* out) {
  EventRegistry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = handle == nullptr ? reg.events.end() : reg.events.find(handle);
  if (it == reg.events.end()) {
    return set_error(TFL_ERROR_INVALID_HANDLE, "%s: unknown or destroyed event %p", fn,
                     static_cast<void*>(handle));
  }
  *out = it->second;
  return TFL_OK;
}

// ---- table functions ------------------------------------------------------------

tfl_status sim_event_create(tfl_event* event, uint32_t flags) {
  return entry(Call::event_create, [&] {
    if (event == nullptr)
      return set_error(TFL_ERROR_INVALID_VALUE, "tfl_event_create: event is NULL");
    if ((flags & ~static_cast<uint32_t>(TFL_EVENT_DISABLE_TIMING)) != 0) {
      return set_error(TFL_ERROR_INVALID_VALUE, "tfl_event_create: unknown flags 0x%x", flags);
    }
    auto e = std::make_shared<Event>(flags);
    const auto handle = reinterpret_cast<tfl_event>(e.get());
    EventRegistry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    reg.events.emplace(handle, std::move(e));
    *event = handle;
    return TFL_OK;
  });
}

tfl_status sim_event_destroy(tfl_event event) {
  return entry(Call::event_destroy, [&] {
    EventRegistry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    if (event == nullptr || reg.events.erase(event) == 0) {
      return set_error(TFL_ERROR_INVALID_HANDLE, "tfl_event_destroy: unknown or destroyed event %p",
                       static_cast<void*>(event));
    }
    return TFL_OK;
  });
}

tfl_status sim_event_record(tfl_event event, tfl_stream stream) {
  return entry(Call::event_record, [&] {
    EventPtr e;
    tfl_status st = resolve_event("tfl_event_record", event, &e);
    if (st != TFL_OK) return st;
    StreamPtr s;
    st = resolve_stream("tfl_event_record", stream, &s);
    if (st != TFL_OK) return st;
    // Captured, the record happens at every launch of the graph.
    if (s->capturing() && record_node("tfl_event_record", *s, Node{nullptr, e}, &st)) return st;
    const uint64_t generation = e->begin_record();
    try {
      // The timestamp is taken when the stream reaches the marker, not now.
      s->enqueue([e, generation] { e->mark_reached(generation, Event::Clock::now()); });
    } catch (...) {
      e->mark_reached(generation, Event::Clock::now());  // never leave an event pending forever
      throw;
    }
    return TFL_OK;
  });
}

tfl_status sim_event_synchronize(tfl_event event) {
  return entry(Call::event_synchronize, [&] {
    EventPtr e;
    tfl_status st = resolve_event("tfl_event_synchronize", event, &e);
    if (st != TFL_OK) return st;
    if ((st = check_event_call("tfl_event_synchronize", *e)) != TFL_OK) return st;
    e->wait(e->latest_record());  // never recorded: generation 0, complete
    return TFL_OK;
  });
}

tfl_status sim_event_query(tfl_event event) {
  return entry(Call::event_query, [&] {
    EventPtr e;
    tfl_status st = resolve_event("tfl_event_query", event, &e);
    if (st != TFL_OK) return st;
    if ((st = check_event_call("tfl_event_query", *e)) != TFL_OK) return st;
    const Event::State state = e->state();
    // NOT_READY is an answer, not a failure: last_error stays as it was.
    return state.reached >= state.recorded ? TFL_OK : TFL_ERROR_NOT_READY;
  });
}

tfl_status sim_event_elapsed_ms(float* ms, tfl_event start, tfl_event end) {
  return entry(Call::event_elapsed_ms, [&] {
    const char* fn = "tfl_event_elapsed_ms";
    if (ms == nullptr) return set_error(TFL_ERROR_INVALID_VALUE, "%s: ms is NULL", fn);
    EventPtr a, b;
    tfl_status st = resolve_event(fn, start, &a);
    if (st != TFL_OK) return st;
    st = resolve_event(fn, end, &b);
    if (st != TFL_OK) return st;
    if (!a->timing_enabled() || !b->timing_enabled()) {
      return set_error(TFL_ERROR_INVALID_VALUE,
                       "%s: the %s event was created with TFL_EVENT_DISABLE_TIMING", fn,
                       !a->timing_enabled() ? "start" : "end");
    }
    const Event::State sa = a->state();
    const Event::State sb = b->state();
    if (sa.recorded == 0 || sb.recorded == 0) {
      return set_error(TFL_ERROR_INVALID_VALUE, "%s: the %s event was never recorded", fn,
                       sa.recorded == 0 ? "start" : "end");
    }
    if (sa.reached < sa.recorded || sb.reached < sb.recorded) {
      return set_error(TFL_ERROR_NOT_READY, "%s: the %s event has not completed yet", fn,
                       sa.reached < sa.recorded ? "start" : "end");
    }
    *ms = std::chrono::duration<float, std::milli>(sb.time - sa.time).count();
    return TFL_OK;
  });
}

}  // namespace torch_fl::sim
